"""Share-group helpers for raw-protocol tests: a member that joins a share group with
ShareGroupHeartbeat until the group coordinator has initialized and assigned the topic's partitions
(Kafka's share-partitions exist only once the group coordinator initialized them)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.support.wire import Wire


def join(port: int, group: str, topic: str, timeout: float = 15.0) -> str:
    """Join ``group`` subscribed to ``topic`` (on the broker at ``port``, its coordinator) and
    heartbeat until the member is assigned partitions; the member id (the caller may fetch with any)."""
    member = uuid.uuid4().hex[:22]
    epoch = 0
    deadline = time.monotonic() + timeout
    with Wire(port) as w:
        while time.monotonic() < deadline:
            body: dict[str, Any] = {
                "group_id": group,
                "member_id": member,
                "member_epoch": epoch,
                "rack_id": None,
                "subscribed_topic_names": [topic] if epoch == 0 else None,
            }
            w.pipeline(("ShareGroupHeartbeat", 1, body))
            _, r = w.read()
            assert r["error_code"] == 0, r
            epoch = r["member_epoch"]
            assignment = r["assignment"]
            if assignment is not None and any(tp["partitions"] for tp in assignment["topic_partitions"]):
                return member
            time.sleep(0.05)
    raise AssertionError(f"{group} was not assigned {topic} in {timeout}s")
