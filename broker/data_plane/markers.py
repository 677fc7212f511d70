"""Transaction markers: the partition's side of a transaction's end (Kafka's WriteTxnMarkers).

``write_txn_markers`` is the transaction coordinator's marker channel (``txn_shell.py`` calls it): a
COMMIT/ABORT control batch per partition through the same appender queue as produce batches, ending
the producer's transaction in the partition's producer state (loaded first if need be:
``producers.py``). Once written the last stable offset moves, an abort joins the aborted index (and
its segment's ``.txnindex``), and read_committed fetches parked on the partition are read again
(``wake`` with ``stable_moved``; appends above the LSO do not wake them).
"""

from __future__ import annotations

import asyncio

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import StorageError
from groupd.storage.markers import end_txn_marker_batch

from ..topics import OFFSETS_TOPIC
from .produce import append_error
from .producers import ProducerStates
from .state import LEADER_EPOCH, DataState, Key, Wake

__all__ = ["MarkerWriter"]

log = structlog.get_logger("groupd.data")


class MarkerWriter:
    """Writes the coordinator's COMMIT/ABORT markers into user partitions."""

    def __init__(self, state: DataState, producer_states: ProducerStates, wake: Wake) -> None:
        self.state = state
        self.producer_states = producer_states
        self.wake = wake

    async def write_txn_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[Key],
    ) -> dict[Key, int]:
        """End ``producer_id``'s transaction in each user partition (Kafka's WriteTxnMarkers as the
        coordinator's marker channel sends it): the Kafka error code per partition, NONE once the
        marker is in the log (fsynced first under ``--fsync always``). A partition of an unknown or
        deleted topic answers UNKNOWN_TOPIC_OR_PARTITION (the coordinator counts it as done, as
        Kafka's TransactionMarkerRequestCompletionHandler does); a marker older than the producer's
        epoch INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED
        (ProducerAppendInfo.appendEndTxnMarker). ``__consumer_offsets`` is the group shell's: its
        partitions answer INVALID_TOPIC_EXCEPTION here."""
        keys = list(dict.fromkeys(partitions))
        codes = await asyncio.gather(
            *(self._write_marker(key, producer_id, producer_epoch, committed, coordinator_epoch) for key in keys)
        )
        return dict(zip(keys, codes, strict=True))

    async def _write_marker(self, key: Key, pid: int, epoch: int, committed: bool, coordinator_epoch: int) -> int:
        topic, index = key
        if topic == OFFSETS_TOPIC:
            log.error("txn_marker_misrouted", topic=topic, partition=index, producer_id=pid)
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        t = self.state.topics.get(topic)
        if t is None or not 0 <= index < t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            plog = self.state.log_for(t, index)
        except (StorageError, ValueError) as exc:
            log.error("txn_marker_failed", topic=topic, partition=index, error=str(exc))
            return ErrorCode.KAFKA_STORAGE_ERROR
        producers = await self.producer_states.state_for(key, plog)
        if producers is None or self.state.logs.get(topic, index) is not plog:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        code, message = producers.check_marker(pid, epoch, coordinator_epoch)
        if code != ErrorCode.NONE:
            log.info("txn_marker_refused", topic=topic, partition=index, producer_id=pid, error=message)
            return code
        try:
            plog.note_transactions()
        except StorageError as exc:
            log.error("txn_marker_failed", topic=topic, partition=index, error=str(exc))
            return ErrorCode.KAFKA_STORAGE_ERROR
        now = self.state.clock()
        raw = end_txn_marker_batch(pid, epoch, committed, coordinator_epoch, now, partition_leader_epoch=LEADER_EPOCH)
        lat = now if plog.config.message_timestamp_type == "LogAppendTime" else None
        # Applied as it is queued, like a data batch, so state and log order agree (module docstring
        # of producer_state); the LSO moves once the marker is written.
        txn = producers.begin_marker(pid, epoch, coordinator_epoch, now)
        # Queued now, as data batches are (``ProduceHandler._idempotent_append``): the appender takes
        # the marker and the batches checked before or after it in the order the state saw them.
        append = self.state.appender.append_future(plog, raw, log_append_time_ms=lat)
        try:
            base, _last = await append
        except Exception as exc:
            producers.marker_failed(pid, txn)
            return append_error(self.state.topics, topic, index, exc)["error_code"]
        entry = producers.marker_written(txn, committed, base)
        if entry is not None:
            producers.index_abort(plog, entry)
        self.producer_states.snapshot_if_due(plog, producers)
        log.debug("txn_marker_written", topic=topic, partition=index, producer_id=pid, committed=committed, offset=base)
        self.wake(key, len(raw), stable_moved=txn is not None)
        return ErrorCode.NONE
