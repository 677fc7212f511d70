"""DescribeProducers: the producers a partition's state knows (KIP-664, ``kafka-transactions.sh``).

Per partition, each producer's epoch, last sequence and timestamp, coordinator epoch and the first
offset of its open transaction, from the partition's producer state (loaded from the log first if
need be: ``producers.py``). ``__consumer_offsets`` keeps no producer state here: its partitions
answer no producers.
"""

from __future__ import annotations

from typing import Any

from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request

from ..topics import OFFSETS_TOPIC, TopicError, validate_name
from .producers import ProducerStates
from .state import DataState

__all__ = ["DESCRIBE_PRODUCERS_VERSIONS", "DescribeProducersHandler"]

DESCRIBE_PRODUCERS_VERSIONS = (0, 0)


class DescribeProducersHandler:
    """DescribeProducers (KafkaApis.handleDescribeProducersRequest)."""

    def __init__(self, state: DataState, producer_states: ProducerStates) -> None:
        self.state = state
        self.producer_states = producer_states

    def handle(self, req: Request) -> Any:
        """KafkaApis.handleDescribeProducersRequest: per partition the producers its state knows
        (ReplicaManager.activeProducerState); the state is rebuilt from the log first if needed."""
        missing = self.producer_states.unloaded(req.body, "name", "partition_indexes", "")
        if missing:
            return self.producer_states.after_load(missing, lambda: self.handle(req))
        topics = []
        for tp in req.body["topics"] or []:
            name = tp["name"]
            topic_error: int | None = None
            try:
                validate_name(name)
            except TopicError as exc:
                topic_error = exc.code
            t = self.state.topics.get(name)
            if topic_error is None and t is None:
                topic_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            parts = []
            for index in tp["partition_indexes"] or []:
                out: dict[str, Any] = {
                    "partition_index": index,
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "active_producers": [],
                }
                parts.append(out)
                if topic_error is not None:
                    out["error_code"] = topic_error
                elif t is None or not 0 <= index < t.partitions:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif name == OFFSETS_TOPIC:
                    continue  # the group shell's partitions: no producer state is kept here
                else:
                    plog = self.state.logs.get(name, index)
                    producers = self.state.producers.get((name, index))
                    if plog is None or plog.closed or producers is None:
                        out["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER  # no local log (activeProducerState)
                        continue
                    out["active_producers"] = [
                        {
                            "producer_id": pid,
                            "producer_epoch": e.epoch,
                            "last_sequence": e.last_seq,
                            "last_timestamp": e.last_timestamp,
                            "coordinator_epoch": e.coordinator_epoch,
                            "current_txn_start_offset": e.txn.first_offset if e.txn is not None else -1,
                        }
                        for pid, e in producers.producers.items()
                    ]
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}
