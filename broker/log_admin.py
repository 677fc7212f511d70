"""DeleteRecords, OffsetForLeaderEpoch, DescribeLogDirs and DescribeCluster: the admin APIs about
partition logs and the node itself.

OffsetForLeaderEpoch answers from the partition's leader epoch cache (``PartitionLog.
leader_epoch_entries``): one broker alone leads every partition at epoch 0 for ever (one entry,
epoch 0 from the log start, no file); in cluster mode the epochs change with the leaders
(storage/epochs.py). The high watermark is the log end offset.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.security.acl import Authorizer, subject_of
from groupd.security.acl_model import CLUSTER_NAME, AclOperation, ResourceType
from groupd.storage import LogManager, PartitionLog
from groupd.storage.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, end_offset_for
from groupd.storage.errors import OffsetOutOfRangeError, StorageError

from .settings import Config
from .topics import OFFSETS_TOPIC, TopicRegistry

log = structlog.get_logger("groupd.admin")

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK
# DescribeClusterRequest's EndpointType
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2


class LogAdmin:
    def __init__(
        self,
        config: Config,
        topics: TopicRegistry,
        logs: LogManager,
        authorizer: Authorizer,
        advertised: Callable[[Request], tuple[str, int]],
    ) -> None:
        self.config = config
        self.topics = topics
        self.logs = logs
        self.authz = authorizer
        self.advertised = advertised

    def _log(self, topic: str, partition: int) -> PartitionLog | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            return None
        return self.logs.get(topic, partition) or self.logs.get_or_create(topic, partition)

    # --- DeleteRecords ----------------------------------------------------------------------------
    def delete_records(self, req: Request) -> Awaitable[dict[str, Any]]:
        """Kafka's ``ReplicaManager.deleteRecords`` -> ``Partition.deleteRecordsOnLeader`` ->
        ``UnifiedLog.maybeIncrementLogStartOffset``: the start moves to the offset (-1 = the high
        watermark), never back, never past the high watermark (OFFSET_OUT_OF_RANGE); compacted-only
        topics answer POLICY_VIOLATION, internal topics INVALID_TOPIC_EXCEPTION."""
        subject = subject_of(req)
        work: list[tuple[dict[str, Any], PartitionLog, int]] = []
        topics_out = []
        for tp in req.body.get("topics") or []:
            name = tp["name"]
            allowed = self.authz.authorize(subject, AclOperation.DELETE, ResourceType.TOPIC, name)
            parts = []
            for pp in tp.get("partitions") or []:
                out = {"partition_index": pp["partition_index"], "low_watermark": -1, "error_code": 0}
                parts.append(out)
                t = self.topics.get(name)
                plog = self._log(name, pp["partition_index"]) if allowed else None
                if not allowed:
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif plog is None or t is None:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif t.internal or name == OFFSETS_TOPIC:
                    out["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif not plog.config.delete:
                    out["error_code"] = ErrorCode.POLICY_VIOLATION
                else:
                    offset = pp["offset"]
                    offset = plog.log_end_offset if offset == HIGH_WATERMARK else offset
                    if offset < 0:
                        out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    else:
                        work.append((out, plog, offset))
            topics_out.append({"name": name, "partitions": parts})
        response = {"throttle_time_ms": 0, "topics": topics_out}

        async def run() -> dict[str, Any]:
            loop = asyncio.get_running_loop()
            for out, plog, offset in work:
                try:
                    # the start-offset file is fsynced: off the event loop
                    out["low_watermark"] = await loop.run_in_executor(None, plog.delete_records_before, offset)
                except OffsetOutOfRangeError:
                    out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                except (StorageError, ValueError) as exc:
                    log.error("delete_records_failed", path=str(plog.path), error=str(exc))
                    out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
            if work:
                log.info(
                    "records_deleted",
                    partitions=[f"{p.path.name}:{o['low_watermark']}" for o, p, _ in work][:20],
                )
            return response

        return run()

    # --- OffsetForLeaderEpoch ---------------------------------------------------------------------
    def offset_for_leader_epoch(self, req: Request) -> dict[str, Any]:
        subject = subject_of(req)
        topics = []
        for tp in req.body.get("topics") or []:
            name = tp["topic"]
            allowed = self.authz.authorize(subject, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            parts = []
            for pp in tp.get("partitions") or []:
                out = {
                    "error_code": 0,
                    "partition": pp["partition"],
                    "leader_epoch": UNDEFINED_EPOCH,
                    "end_offset": UNDEFINED_EPOCH_OFFSET,
                }
                parts.append(out)
                current = pp.get("current_leader_epoch", -1)
                plog = self._log(name, pp["partition"]) if allowed else None
                if not allowed:
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif plog is None:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    self._end_offset(out, plog, current, pp["leader_epoch"])
            topics.append({"topic": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    @staticmethod
    def _end_offset(out: dict[str, Any], plog: PartitionLog, current: int, requested: int) -> None:
        """Kafka's ``Partition.lastOffsetForLeaderEpoch``: the current epoch checked
        (``localLogWithEpochOrThrow``), then ``UnifiedLog.endOffsetForEpoch`` (an UNDEFINED end is
        answered as (-1, -1))."""
        try:
            epoch = plog.leader_epoch
            if current != -1 and current > epoch:
                out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
            elif current != -1 and current < epoch:
                out["error_code"] = ErrorCode.FENCED_LEADER_EPOCH
            else:
                found = end_offset_for(plog.leader_epoch_entries(), requested, plog.log_end_offset)
                if found[1] != UNDEFINED_EPOCH_OFFSET:
                    out["leader_epoch"], out["end_offset"] = found
        except StorageError as exc:
            log.error("offset_for_leader_epoch_failed", path=str(plog.path), error=str(exc))
            out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR

    # --- DescribeLogDirs --------------------------------------------------------------------------
    def describe_log_dirs(self, req: Request) -> dict[str, Any]:
        """Kafka's ``ReplicaManager.describeLogDirs`` over the one data directory: partition sizes,
        offset lag 0 (no future replicas), the file system's total and usable bytes (v4+)."""
        if not self.authz.authorize(subject_of(req), AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
        wanted = req.body.get("topics")
        want: dict[str, set[int]] | None = None
        if wanted is not None:
            want = {}
            for t in wanted:
                want.setdefault(t["topic"], set()).update(t.get("partitions") or [])
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, p in self.logs.partitions():
            if want is not None and p not in want.get(topic, ()):
                continue
            plog = self.logs.get(topic, p)
            if plog is None:
                continue
            by_topic.setdefault(topic, []).append(
                {"partition_index": p, "partition_size": plog.size_in_bytes, "offset_lag": 0, "is_future_key": False}
            )
        # A __consumer_offsets partition's log is created by its first append (GroupShell.existing_log);
        # one without it yet is reported as the empty log a Kafka broker would have made at election.
        offsets = self.topics.get(OFFSETS_TOPIC)
        if offsets is not None:
            listed = {e["partition_index"] for e in by_topic.get(OFFSETS_TOPIC, ())}
            for p in range(offsets.partitions):
                if p not in listed and (want is None or p in want.get(OFFSETS_TOPIC, ())):
                    by_topic.setdefault(OFFSETS_TOPIC, []).append(
                        {"partition_index": p, "partition_size": 0, "offset_lag": 0, "is_future_key": False}
                    )
            by_topic.get(OFFSETS_TOPIC, []).sort(key=lambda e: e["partition_index"])
        data_dir = Path(self.config.data_dir).resolve()
        try:
            st = os.statvfs(data_dir)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        result = {
            "error_code": 0,
            "log_dir": str(data_dir),
            "topics": [{"name": t, "partitions": parts} for t, parts in sorted(by_topic.items())],
            "total_bytes": total,
            "usable_bytes": usable,
        }
        return {"throttle_time_ms": 0, "error_code": 0, "results": [result]}

    # --- DescribeCluster --------------------------------------------------------------------------
    def describe_cluster(self, req: Request) -> dict[str, Any]:
        """Kafka's ``KafkaApis.handleDescribeCluster`` / ``AuthHelper.computeDescribeClusterResponse``."""
        body, v = req.body, req.api_version
        base: dict[str, Any] = {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": BROKER_ENDPOINT,
            "cluster_id": self.topics.cluster_id,
            "controller_id": self.config.node_id,
            "brokers": [],
            "cluster_authorized_operations": -(2**31),
        }
        endpoint = body.get("endpoint_type", BROKER_ENDPOINT) if v >= 1 else BROKER_ENDPOINT
        if endpoint != BROKER_ENDPOINT:
            if endpoint == CONTROLLER_ENDPOINT:
                code, message = (
                    ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                    "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
                )
            else:
                code, message = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint}"
            return {**base, "error_code": code, "error_message": message, "controller_id": -1}
        if body.get("include_cluster_authorized_operations"):
            subject = subject_of(req)
            if self.authz.authorize(subject, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
                base["cluster_authorized_operations"] = self.authz.authorized_operations(
                    subject, ResourceType.CLUSTER, CLUSTER_NAME
                )
            else:
                base["cluster_authorized_operations"] = 0
        host, port = self.advertised(req)
        base["brokers"] = [
            {"broker_id": self.config.node_id, "host": host, "port": port, "rack": None, "is_fenced": False}
        ]
        return base
