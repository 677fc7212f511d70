"""Issue 28: a real daemon's JSON log tells the story of a KIP-848 group, as it does a classic one's:
a confluent-kafka consumer with ``group.protocol=consumer`` joins (``member_joined``), the group
converges (``group_converged``), and a close is a ``member_left``."""

from __future__ import annotations

import time

import pytest

from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e


def _mine(groupd: GroupdProcess, event: str, group: str) -> list[dict[str, object]]:
    return [e for e in groupd.events(event) if e.get("group") == group]


def test_consumer_group_events_in_the_daemon_log(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kip848-logs-{unique}", f"kip848-logs-g-{unique}"
    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(15)
    c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": group, "group.protocol": "consumer"})
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _mine(groupd, "group_converged", group):
            c.poll(0.1)
        joined = _mine(groupd, "member_joined", group)
        assert len(joined) == 1, groupd.log_tail()
        assert joined[0]["protocol"] == "consumer" and joined[0]["topics"] == [topic]
        assert joined[0]["generation"] == 1 and joined[0]["member"]
        converged = _mine(groupd, "group_converged", group)
        assert len(converged) == 1, groupd.log_tail()
        assert converged[0]["generation"] == 1 and converged[0]["members"] == 1
        assert converged[0]["partitions"] == 3
        bumped = _mine(groupd, "group_epoch_bumped", group)
        assert [b["reason"] for b in bumped] == ["member_joined"]
        assert [e["level"] for e in joined + converged] == ["info", "info"]
        # steady state: heartbeats (librdkafka's interval is the coordinator's, 5 s by default) log nothing more
        time.sleep(0.5)
        c.poll(0.5)
        assert len(_mine(groupd, "group_converged", group)) == 1
    finally:
        c.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _mine(groupd, "member_left", group):
        time.sleep(0.05)
    left = _mine(groupd, "member_left", group)
    assert len(left) == 1 and left[0]["member"] == joined[0]["member"] and left[0]["reason"] == "leave"
