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


def test_kafka_python_remove_members_of_unknown_group_answers_per_member(groupd: GroupdProcess, unique: str) -> None:
    """GroupCoordinatorService.leaveGroup: LeaveGroup v3+ for a group that does not exist answers
    NONE at the top and UNKNOWN_MEMBER_ID per member (a top-level error made kafka-python raise)."""
    from kafka.admin import KafkaAdminClient, MemberToRemove

    admin = KafkaAdminClient(bootstrap_servers=groupd.bootstrap)
    try:
        members = [MemberToRemove(member_id="m-1"), MemberToRemove(group_instance_id="instance-2")]
        result = admin.remove_group_members(f"nope-{unique}", members)
        assert {k: e.errno for k, e in result.items()} == {"m-1": 25, "instance-2": 25}
    finally:
        admin.close()


def test_describe_during_rebalance_shows_last_assignment(groupd: GroupdProcess, unique: str) -> None:
    """ClassicGroupMember.describeNoMetadata(): outside Stable, DescribeGroups still carries each
    member's last assignment, so confluent-kafka's describe_consumer_groups (librdkafka decoding)
    shows who holds what while a rebalance waits (groupd sent empty bytes)."""
    import threading

    from groupd.coordinator.consumer_protocol import (
        Assignment,
        Subscription,
        TopicPartitions,
        encode_assignment,
        encode_subscription,
    )
    from groupd.ops.kafka_client import BrokerConnection

    group, topic = f"g-{unique}", f"t-{unique}"
    host, port = groupd.bootstrap.rsplit(":", 1)

    def join(conn: BrokerConnection, member_id: str = "") -> dict:
        body = {
            "group_id": group,
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": member_id,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(Subscription((topic,)))}],
        }
        resp = conn.send("JoinGroup", body, version=5)[1]
        return conn.send("JoinGroup", {**body, "member_id": resp["member_id"]}, version=5)[1]

    a = BrokerConnection(host, int(port), timeout=15, client_id="member-a")
    b = BrokerConnection(host, int(port), timeout=15, client_id="member-b")
    try:
        joined = join(a)
        held = encode_assignment(Assignment((TopicPartitions(topic, (0, 1)),)))
        sync = {
            "group_id": group,
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "assignments": [{"member_id": joined["member_id"], "assignment": held}],
        }
        assert a.send("SyncGroup", sync, version=3)[1]["error_code"] == 0
        parked = threading.Thread(target=join, args=(b,), daemon=True)
        parked.start()  # b waits in PreparingRebalance for a, which does not rejoin
        deadline = time.monotonic() + 10
        while (view := describe(groupd.bootstrap, group)).state != "PREPARING_REBALANCING":
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
        by_client = {m["client_id"]: m["assignment"] for m in view.members}
        assert by_client == {"member-a": [(topic, 0), (topic, 1)], "member-b": []}
        leave = {"group_id": group, "members": [{"member_id": joined["member_id"]}]}
        assert a.send("LeaveGroup", leave, version=3)[1]["error_code"] == 0
        parked.join(15)
        assert not parked.is_alive()
    finally:
        a.close()
        b.close()


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
