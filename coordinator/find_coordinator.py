"""FindCoordinator (Kafka's ``KafkaApis.handleFindCoordinatorRequest`` / ``getCoordinator``): who
leads the ``__consumer_offsets`` partition of a group, or who coordinates a transactional id."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from ..protocol.errors import default_message
from . import errors as err
from .result import Result
from .routing import Node, partition_for
from .runtime import CoordinatorRuntime


class CoordinatorFinder:
    def __init__(self, runtime: CoordinatorRuntime[Result], num_offsets_partitions: int) -> None:
        self.rt = runtime
        self.num_offsets_partitions = num_offsets_partitions
        # Who coordinates a transactional id (key type 1): the leader of its __transaction_state
        # partition. None: this node (a single broker leads them all).
        self.txn_coordinator: Callable[[str], Node | None] | None = None

    def find_coordinator(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        runtime, txn_coordinator, num_offsets_partitions = self.rt, self.txn_coordinator, self.num_offsets_partitions
        key_type = int(req.get("key_type", 0)) if v >= 1 else 0
        keys = list(req.get("coordinator_keys") or []) if v >= 4 else [req.get("key") or ""]
        answers = []
        for key in keys:
            node: Node | None = None
            message: str | None = None
            if key_type in (0, 1):
                # KafkaApis.getCoordinator: the leader of the key's partition of __consumer_offsets
                # (a group) or of __transaction_state (a transactional id, abs(hashCode) % 50).
                if key_type == 0:
                    node = runtime.ownership.owner(partition_for(key, num_offsets_partitions))
                else:
                    node = runtime.ownership.local if txn_coordinator is None else txn_coordinator(key)
                code = err.NONE if node is not None else err.COORDINATOR_NOT_AVAILABLE
                # v1-3 carry Errors.message() (KafkaApis.handleFindCoordinatorRequestLessThanV4 and
                # FindCoordinatorResponse.prepareOldResponse); v4's per-key message is left at its
                # schema default, "".
                message = default_message(code) if v < 4 else ""
            elif key_type == 2:
                # KafkaApis.getCoordinator for the share coordinator: v6+, a valid
                # "groupId:topicId:partition" (SharePartitionKey.validate), the leader of its
                # __share_group_state partition (abs(hashCode) % 50). groupd's node leads them all.
                if v < 6 or not valid_share_key(key):
                    code, message = err.INVALID_REQUEST, "" if v >= 4 else default_message(err.INVALID_REQUEST)
                else:
                    node = runtime.ownership.local
                    code = err.NONE
                    message = "" if v >= 4 else default_message(code)
            else:
                code, message = err.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
            answers.append(
                {
                    "key": key,
                    "node_id": node.node_id if node else -1,
                    "host": node.host if node else "",
                    "port": node.port if node else -1,
                    "error_code": code,
                    "error_message": message,
                }
            )
        if v >= 4:
            runtime.respond(ctx, {"throttle_time_ms": 0, "coordinators": answers})
        else:
            a = answers[0]
            a.pop("key")
            runtime.respond(ctx, {"throttle_time_ms": 0, **a})


def valid_share_key(key: str) -> bool:
    """``SharePartitionKey.validate``: "groupId:topicId:partition", a group id, a base64 topic id
    (Kafka's ``Uuid.fromString``: 16 bytes) and a partition number."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0]:
        return False
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "==")
        return len(raw) == 16 and int(parts[2]) >= 0
    except (ValueError, binascii.Error):
        return False
