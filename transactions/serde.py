"""Bytes of ``__transaction_state`` records, in Kafka's own formats (``TransactionLog.java``).

A key is an int16 version (0: the only record type of this topic) followed by the key struct; a
value is an int16 version followed by the value struct; a null value is a tombstone. Values of
version 0 and 1 are read, so a log copied from a Kafka broker loads; version 1 is written.
Partitions are grouped by topic, as Kafka writes them, and written as null while Empty.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from ..protocol._rt import DecodeError
from ..protocol.messages.transaction_records import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE
from .records import Record, TransactionLogKey, TransactionLogValue, TransactionState

_VERSION = struct.Struct(">h")


class RecordDecodeError(ValueError):
    """A ``__transaction_state`` record that is not in any known format."""


def encode_key(key: TransactionLogKey) -> bytes:
    return _VERSION.pack(0) + TRANSACTION_LOG_KEY.codec(0).encode({"transactional_id": key.transactional_id})


def encode_value(value: TransactionLogValue | None, version: int | None = None) -> bytes | None:
    if value is None:
        return None
    if value.state == TransactionState.EMPTY and value.partitions:
        # TransactionLog.valueToBytes refuses the same
        raise ValueError(f"an Empty transaction has no partitions: {value!r}")
    v = value.version if version is None else version
    partitions = None
    if value.state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(value.partitions):
            by_topic[topic].append(partition)
        partitions = [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()]
    return _VERSION.pack(v) + TRANSACTION_LOG_VALUE.codec(v).encode(
        {
            "producer_id": value.producer_id,
            "previous_producer_id": value.previous_producer_id,
            "next_producer_id": value.next_producer_id,
            "producer_epoch": value.producer_epoch,
            "transaction_timeout_ms": value.transaction_timeout_ms,
            "transaction_status": int(value.state),
            "transaction_partitions": partitions,
            "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
            "transaction_start_timestamp_ms": value.start_timestamp_ms,
            "client_transaction_version": value.client_transaction_version,
        }
    )


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    key, value = record
    return encode_key(key), encode_value(value)


def decode_key(data: bytes) -> TransactionLogKey:
    if len(data) < 2:
        raise RecordDecodeError("record key shorter than its version")
    (v,) = _VERSION.unpack_from(data, 0)
    if v != 0:
        raise RecordDecodeError(f"unknown transaction log key version {v}")
    try:
        return TransactionLogKey(TRANSACTION_LOG_KEY.codec(0).decode(data, 2)["transactional_id"])
    except DecodeError as e:
        raise RecordDecodeError(f"bad transaction log key: {e}") from None


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    if data is None:
        return None
    if len(data) < 2:
        raise RecordDecodeError("record value shorter than its version")
    (v,) = _VERSION.unpack_from(data, 0)
    if v not in (0, 1):
        raise RecordDecodeError(f"unknown transaction log value version {v}")
    try:
        o = TRANSACTION_LOG_VALUE.codec(v).decode(data, 2)
    except DecodeError as e:
        raise RecordDecodeError(f"bad transaction log value v{v}: {e}") from None
    try:
        state = TransactionState(o["transaction_status"])
    except ValueError:
        raise RecordDecodeError(f"unknown transaction state id {o['transaction_status']}") from None
    partitions: frozenset[tuple[str, int]] = frozenset()
    if state != TransactionState.EMPTY and o["transaction_partitions"]:
        partitions = frozenset((t["topic"], p) for t in o["transaction_partitions"] for p in t["partition_ids"])
    return TransactionLogValue(
        producer_id=o["producer_id"],
        producer_epoch=o["producer_epoch"],
        transaction_timeout_ms=o["transaction_timeout_ms"],
        state=state,
        partitions=partitions,
        last_update_timestamp_ms=o["transaction_last_update_timestamp_ms"],
        start_timestamp_ms=o["transaction_start_timestamp_ms"],
        previous_producer_id=o.get("previous_producer_id", -1),
        next_producer_id=o.get("next_producer_id", -1),
        client_transaction_version=o.get("client_transaction_version", 0),
    )


def decode_record(key: bytes, value: bytes | None) -> Record:
    return decode_key(key), decode_value(value)
