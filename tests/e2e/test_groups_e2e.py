"""Issue 3 acceptance: real clients form classic consumer groups against a real groupd."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support.daemon import GroupdProcess
from tests.support.groups import Member, describe, wait_balanced

pytestmark = pytest.mark.e2e

PARTITIONS = 20


def _topic(groupd: GroupdProcess, name: str, partitions: int = PARTITIONS) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(15)
    return name


def _stop_all(members: list[Member]) -> None:
    for m in members:
        m.stop()
    errors = [m.error for m in members if m.error]
    assert not errors, errors


CASES = [
    ("kafka-python", "range", 1),
    ("kafka-python", "roundrobin", 3),
    ("kafka-python", "range", 10),
    ("aiokafka", "roundrobin", 1),
    ("aiokafka", "range", 3),
    ("aiokafka", "roundrobin", 10),
    ("confluent-kafka", "range", 1),
    ("confluent-kafka", "roundrobin", 3),
    ("confluent-kafka", "cooperative-sticky", 10),
]


@pytest.mark.parametrize(("kind", "assignor", "n"), CASES)
def test_group_forms_and_assigns_every_partition_once(
    groupd: GroupdProcess, unique: str, kind: str, assignor: str, n: int
) -> None:
    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    members = [
        Member(kind, groupd.bootstrap, group, topic, assignor=assignor, client_id=f"{kind}-{i}").start()
        for i in range(n)
    ]
    try:
        view = wait_balanced(groupd.bootstrap, group, topic, n, PARTITIONS)
        want = {"cooperative-sticky": "cooperative-sticky", "range": "range", "roundrobin": "roundrobin"}[assignor]
        assert view.protocol == want
        # Each member holds exactly what the coordinator says it was assigned.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            held = sorted(tp for m in members for tp in m.assignment)
            if held == sorted((topic, p) for p in range(PARTITIONS)):
                break
            time.sleep(0.1)
        assert sorted(tp for m in members for tp in m.assignment) == sorted((topic, p) for p in range(PARTITIONS))
    finally:
        _stop_all(members)


def test_mixed_libraries_form_one_group_and_rebalance(groupd: GroupdProcess, unique: str) -> None:
    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    members = [
        Member(kind, groupd.bootstrap, group, topic, assignor="range")
        for kind in ("kafka-python", "aiokafka", "confluent-kafka")
    ]
    for m in members:
        m.start()
    try:
        view = wait_balanced(groupd.bootstrap, group, topic, 3, PARTITIONS)
        assert {m["client_id"] for m in view.members} == {"kafka-python", "aiokafka", "confluent-kafka"}
        members[0].stop()
        wait_balanced(groupd.bootstrap, group, topic, 2, PARTITIONS)
    finally:
        _stop_all(members)


def test_killed_member_expires_and_its_partitions_move(groupd: GroupdProcess, unique: str) -> None:
    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    survivor = Member("confluent-kafka", groupd.bootstrap, group, topic, session_timeout_ms=6000).start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.member_proc", groupd.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_balanced(groupd.bootstrap, group, topic, 2, PARTITIONS)
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        view = wait_balanced(groupd.bootstrap, group, topic, 1, PARTITIONS, timeout=30)
        waited = time.monotonic() - t0
        # Expired by the session timeout (6 s), not before.
        assert waited >= 4.0
        assert view.members[0]["client_id"] == "confluent-kafka"
        expired = [e for e in groupd.events("member_expired") if e.get("group") == group]
        assert expired, "the coordinator logged no expiry"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _stop_all([survivor])


def test_static_member_restart_keeps_partitions_without_rebalance(groupd: GroupdProcess, unique: str) -> None:
    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    other = Member(
        "confluent-kafka", groupd.bootstrap, group, topic, instance_id="static-b", session_timeout_ms=30000
    ).start()
    first = Member(
        "confluent-kafka", groupd.bootstrap, group, topic, instance_id="static-a", session_timeout_ms=30000
    ).start()
    restarted = None
    try:
        before = wait_balanced(groupd.bootstrap, group, topic, 2, PARTITIONS)
        a_before = next(m["assignment"] for m in before.members if m["instance_id"] == "static-a")
        gens_before = [e["generation"] for e in groupd.events("rebalance_completed") if e.get("group") == group]
        first.stop()  # a static member's close sends no LeaveGroup
        restarted = Member(
            "confluent-kafka", groupd.bootstrap, group, topic, instance_id="static-a", session_timeout_ms=30000
        ).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sorted(restarted.assignment) != a_before:
            time.sleep(0.1)
        assert sorted(restarted.assignment) == a_before
        after = describe(groupd.bootstrap, group)
        assert after.state == "STABLE"
        gens_after = [e["generation"] for e in groupd.events("rebalance_completed") if e.get("group") == group]
        assert gens_after == gens_before, "a static rejoin must not start a new generation"
        assert any(e.get("group") == group for e in groupd.events("static_member_replaced"))
    finally:
        _stop_all([m for m in (other, restarted) if m is not None])


# Not kafka-python: 3.0.12's leader rejoins by itself when a poll times out while its SyncGroup answer
# lands (see tests/support/kafka_python.py), a generation of its own at any delay.
@pytest.mark.parametrize("kind", ["confluent-kafka", "aiokafka"])
def test_members_started_together_form_one_generation_at_the_default_delay(
    groupd: GroupdProcess, unique: str, kind: str
) -> None:
    """Consumers started in a burst join one generation, not one each: the default
    ``group.initial.rebalance.delay.ms`` holds a new group's first join phase open while members are
    still arriving (Kafka's ``GroupMetadataManager.prepareRebalance`` and
    ``tryCompleteInitialRebalanceElseSchedule``). At 0 the first member's join completed alone and the
    later arrivals started another generation (two generations in 3 runs of 3, both libraries)."""
    overridden = any(a.startswith("--group-initial-rebalance-delay") for a in groupd.extra_args)
    assert not overridden and "GROUPD_GROUP_INITIAL_REBALANCE_DELAY_MS" not in {**os.environ, **(groupd.env or {})}
    topic = _topic(groupd, f"t-{unique}", partitions=4)
    group = f"g-{unique}"
    members = [Member(kind, groupd.bootstrap, group, topic, client_id=f"{kind}-{i}") for i in range(4)]
    for m in members:
        m.start()
    try:
        wait_balanced(groupd.bootstrap, group, topic, 4, 4)
        formed = [e["generation"] for e in groupd.events("join_phase_completed") if e.get("group") == group]
        assert formed == [1], f"generations formed: {formed}"
    finally:
        _stop_all(members)
