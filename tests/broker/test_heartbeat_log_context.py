"""The heartbeat handlers bind the request themselves (issue 26: ``BINDS_REQUEST``, the dispatcher
no longer sets ``current_request`` for them): every line a heartbeat logs still carries its client's
id. A real daemon at debug level (where every classic heartbeat takes the long path and logs a
``heartbeat`` line) with a classic member, and a KIP-848 member whose join is logged from the
ConsumerGroupHeartbeat's long path."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.ops.test_metrics import create_topic
from tests.support.daemon import GroupdProcess
from tests.support.groups import Member, wait_balanced

pytestmark = pytest.mark.e2e


def test_heartbeat_lines_carry_the_client_id(tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:8]
    topic, classic_group, consumer_group = f"t-{unique}", f"gc-{unique}", f"gk-{unique}"
    d = GroupdProcess(tmp_path / "data", "--log-level", "debug").start()
    members: list[Member] = []
    try:
        create_topic(d.bootstrap, topic, 2)
        members.append(Member("kafka-python", d.bootstrap, classic_group, topic, client_id="classic-probe").start())
        members.append(
            Member(
                "confluent-kafka",
                d.bootstrap,
                consumer_group,
                topic,
                client_id="kip848-probe",
                group_protocol="consumer",
            ).start()
        )
        wait_balanced(d.bootstrap, classic_group, topic, 1, 2)
        wait_balanced(d.bootstrap, consumer_group, topic, 1, 2)
        deadline = time.monotonic() + 30
        beats: list[dict[str, object]] = []
        while time.monotonic() < deadline and len(beats) < 3:
            time.sleep(0.5)
            beats = [e for e in d.events("heartbeat") if e.get("group") == classic_group]
        assert len(beats) >= 3
        assert {e.get("client_id") for e in beats} == {"classic-probe"}
        joined = [e for e in d.events("member_joined") if e.get("group") == consumer_group]
        assert joined and {e.get("client_id") for e in joined} == {"kip848-probe"}
        for m in members:
            assert m.error is None
    finally:
        for m in members:
            m.stop()
        d.stop()
