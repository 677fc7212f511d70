"""Transaction markers: the control records Kafka writes to end a transaction in a partition.

A marker is a one-record control batch (attributes bits 4 and 5 set) carrying the producer id and
epoch of the transaction it ends (Kafka's ``MemoryRecords.withEndTransactionMarker``). Its key is
``ControlRecordType`` (int16 version 0, int16 type: ABORT 0, COMMIT 1) and its value the
``EndTransactionMarker`` (int16 version 0, int32 coordinator epoch); readers accept longer values
and keys, as Kafka's ``EndTransactionMarker.deserializeValue`` does, so later versions stay readable.
Both the data plane (user partitions) and the group coordinator's shell (``__consumer_offsets``)
write and read them, hence this floor.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .records import BatchView, build_batch

__all__ = ["ABORT", "COMMIT", "EndTxnMarker", "end_txn_marker_batch", "parse_end_txn_marker", "read_end_txn_marker"]

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class EndTxnMarker(NamedTuple):
    committed: bool
    coordinator_epoch: int


def end_txn_marker_batch(
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch ending ``producer_id``'s transaction, ready for ``PartitionLog.append_items``."""
    key = _KEY.pack(0, COMMIT if committed else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [(key, value, (), timestamp_ms)],
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def read_end_txn_marker(batch: BatchView) -> EndTxnMarker | None:
    """The marker a control batch carries, or None when it is not an end-transaction marker
    (other control types, e.g. Kafka's LeaderChange/snapshot records, are not transaction ends)."""
    if not batch.is_control:
        return None
    recs = batch.records()
    return parse_end_txn_marker(recs[0].key, recs[0].value) if recs else None


def parse_end_txn_marker(key: bytes | None, value: bytes | None) -> EndTxnMarker | None:
    """The marker a control record's key and value carry (None for other control types)."""
    if key is None or len(key) < _KEY.size:
        return None
    _version, kind = _KEY.unpack_from(key)
    if kind not in (ABORT, COMMIT):
        return None
    value = value or b""
    epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return EndTxnMarker(kind == COMMIT, epoch)
