"""ListOffsets: the offset of a timestamp, or of the log's start or end, per partition.

As Kafka's ``Partition.fetchOffsetForTimestamp`` answers a consumer: LATEST is the last fetchable
offset, EARLIEST the log start, MAX_TIMESTAMP the batch holding the largest timestamp, a timestamp
the first offset at or after it; each with the leader epoch of that offset. With isolation level 1
(read_committed) the last fetchable offset is the last stable offset, and timestamps at or past it
are ignored; the partition's producer state is loaded first if need be (``producers.py``).

ListOffsets v0, which Kafka 4.0 removed, is served as Kafka 3.x served it (clients written against
Kafka 2.x): up to ``max_num_offsets`` offsets by segment (``legacy_offsets_before``).
"""

from __future__ import annotations

import os
from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.storage import PartitionLog
from groupd.storage.epochs import epoch_for_offset
from groupd.storage.errors import CorruptRecordError, StorageError

from ..producer_state import PartitionProducers
from .producers import ProducerStates
from .state import LEADER_EPOCH, DataState, Key

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LIST_OFFSETS_VERSIONS",
    "MAX_TIMESTAMP",
    "ListOffsetsHandler",
    "legacy_offsets_before",
]

# What ListOffsets serves (and ApiVersions advertises): the whole range of the schema.
LIST_OFFSETS_VERSIONS = (0, 8)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

log = structlog.get_logger("groupd.data")


class ListOffsetsHandler:
    """ListOffsets (KafkaApis.handleListOffsetRequest)."""

    def __init__(self, state: DataState, producer_states: ProducerStates) -> None:
        self.state = state
        self.producer_states = producer_states

    def handle(self, req: Request) -> Any:
        body = req.body
        if req.api_version == 0:
            return self._handle_v0(body)
        read_committed = body.get("isolation_level", 0) == 1
        if read_committed:
            missing = self.producer_states.unloaded(body, "name", "partitions", "partition_index")
            if missing:
                return self.producer_states.after_load(missing, lambda: self.handle(req))
        seen: dict[Key, int] = {}
        for tp in body["topics"] or []:
            for pp in tp["partitions"] or []:
                key = (tp["name"], pp["partition_index"])
                seen[key] = seen.get(key, 0) + 1
        topics = []
        for tp in body["topics"] or []:
            name = tp["name"]
            t = self.state.topics.get(name)
            parts = []
            for pp in tp["partitions"] or []:
                index = pp["partition_index"]
                out = {
                    "partition_index": index,
                    "error_code": ErrorCode.NONE,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                parts.append(out)
                if seen[(name, index)] > 1:
                    out["error_code"] = ErrorCode.INVALID_REQUEST
                elif t is None or not 0 <= index < t.partitions:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif (pp.get("current_leader_epoch") or -1) > LEADER_EPOCH:
                    out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
                else:
                    try:
                        plog = self.state.log_for(t, index)
                        fetchable = plog.log_end_offset
                        if read_committed:
                            producers = self.state.producers.get((name, index)) or PartitionProducers()
                            fetchable = producers.last_stable_offset(fetchable, plog.log_start_offset)
                        ts, offset = offset_for(plog, pp["timestamp"], fetchable)
                        epoch = epoch_of(plog, pp["timestamp"], offset)
                    except (StorageError, CorruptRecordError, ValueError) as exc:
                        log.error("list_offsets_failed", topic=name, partition=index, error=str(exc))
                        out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                        continue
                    out["timestamp"], out["offset"], out["leader_epoch"] = ts, offset, epoch
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def _handle_v0(self, body: dict[str, Any]) -> dict[str, Any]:
        """Kafka 3.x's KafkaApis.handleListOffsetRequestV0: up to ``max_num_offsets`` offsets per
        partition (``UnifiedLog.legacyFetchOffsetsBefore``), no duplicate check, no leader epochs."""
        from_consumer = body["replica_id"] == -1
        topics = []
        for tp in body["topics"] or []:
            t = self.state.topics.get(tp["name"])
            parts = []
            for pp in tp["partitions"] or []:
                index = pp["partition_index"]
                out: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE, "old_style_offsets": []}
                parts.append(out)
                if t is None or not 0 <= index < t.partitions:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                try:
                    plog = self.state.log_for(t, index)
                    offsets = legacy_offsets_before(plog, pp["timestamp"], pp["max_num_offsets"], self.state.clock())
                except (StorageError, OSError, ValueError) as exc:
                    log.error("list_offsets_failed", topic=tp["name"], partition=index, error=str(exc))
                    out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                hw = plog.log_end_offset
                if from_consumer and any(o > hw for o in offsets):
                    # Partition.legacyFetchOffsetsForTimestamp: a consumer never sees past the HW.
                    offsets = [hw, *[o for o in offsets if o <= hw]]
                out["old_style_offsets"] = offsets
            topics.append({"name": tp["name"], "partitions": parts})
        return {"topics": topics}


def epoch_of(plog: PartitionLog, timestamp: int, offset: int) -> int:
    """The leader epoch ListOffsets answers with ``offset`` (-1: none), as Kafka's
    ``Partition.fetchOffsetForTimestamp`` / ``UnifiedLog.fetchOffsetByTimestamp``: LATEST the
    current leader epoch; EARLIEST the first cached epoch if it starts at or below the log
    start; a timestamp (or MAX_TIMESTAMP) lookup the epoch of the batch holding the offset,
    which is the cache's epoch for it (every batch is stamped with the epoch the cache records
    before the batch is written)."""
    if offset < 0:
        return -1
    entries = plog.leader_epoch_entries()
    if timestamp == LATEST_TIMESTAMP:
        return entries[-1].epoch if entries else -1
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        first = entries[0] if entries else None
        return first.epoch if first is not None and first.start_offset <= plog.log_start_offset else -1
    found = epoch_for_offset(entries, offset)
    return -1 if found is None else found


def offset_for(plog: PartitionLog, timestamp: int, last_fetchable: int) -> tuple[int, int]:
    """(timestamp, offset) as Kafka's Partition.fetchOffsetForTimestamp answers a consumer:
    LATEST is the last fetchable offset (the LSO for read_committed, else the high watermark),
    EARLIEST the log start, and a timestamp lookup (UnifiedLog.fetchOffsetByTimestamp) only
    counts below the last fetchable offset."""
    if timestamp == LATEST_TIMESTAMP:
        return -1, last_fetchable
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return -1, plog.log_start_offset
    if timestamp == MAX_TIMESTAMP:
        ts, offset = plog.max_timestamp()
        if ts < 0 or offset < plog.log_start_offset or offset >= last_fetchable:
            return -1, -1
        return ts, offset
    found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= last_fetchable:
        return -1, -1
    offset, ts = found
    return ts, offset


def legacy_offsets_before(plog: PartitionLog, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """Kafka's ``UnifiedLog.legacyFetchOffsetsBefore`` (ListOffsets v0): the base offsets of the
    segments last modified at or before ``timestamp`` (and the log end offset, stamped ``now``, when
    the active segment holds data), newest first, at most ``max_num_offsets`` of them. LATEST starts
    from the newest entry, EARLIEST from the oldest."""
    segments = plog.segments
    start = plog.log_start_offset
    entries = [(max(s.base_offset, start), int(os.stat(s.log_path).st_mtime * 1000)) for s in segments]
    if segments[-1].size > 0:
        entries.append((plog.log_end_offset, now_ms))
    if timestamp == LATEST_TIMESTAMP:
        i = len(entries) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        i = 0
    else:
        i = len(entries) - 1
        while i >= 0 and entries[i][1] > timestamp:
            i -= 1
    n = max(0, min(max_num_offsets, i + 1))
    return sorted((entries[i - j][0] for j in range(n)), reverse=True)
