"""Share-group membership (KIP-932) against a real daemon with confluent-kafka 2.16's ``ShareConsumer``
at its default settings: members join and get what Kafka's ``SimpleAssignor`` gives them, leave on
close, are fenced when their session expires (a consumer SIGKILLed); the group shows in ListGroups
(type share) and ShareGroupDescribe, and as Kafka answers for it in the classic APIs (AdminClient's
describe_consumer_groups: Dead); ``groupd share-groups`` lists, describes, resets and deletes it.

Delivery (ShareFetch) is not part of these tests: the consumers' poll loop only keeps their
heartbeats going."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from groupd.coordinator.consumer.assignor_spec import GroupSpec, SubscriptionType, java_member_spec
from groupd.coordinator.consumer.java_collections import java_hashmap_order
from groupd.coordinator.consumer.simple import simple_assign
from groupd.ops.kafka_client import KafkaClient

from tests.support.daemon import GroupdProcess

SESSION_MS = 4000


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    d = GroupdProcess(
        Path(tmp_path_factory.mktemp("share")) / "data",
        "--group-share-min-session-timeout-ms",
        "1000",
        "--group-share-session-timeout-ms",
        str(SESSION_MS),
    )
    d.start()
    try:
        yield d
    finally:
        d.stop()


def _topic(d: GroupdProcess, partitions: int) -> str:
    name = "share-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": d.bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


class Pollers:
    """Share consumers polled from one thread each (a ShareConsumer is not thread-safe)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.consumers: list[ShareConsumer] = []

    def start(self, bootstrap: str, group: str, topic: str) -> ShareConsumer:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([topic])
        stop = threading.Event()

        def run() -> None:
            while not stop.is_set() and not self.stop.is_set():
                c.poll(0.1)
            c.close()

        t = threading.Thread(target=run, daemon=True)
        t.stop = stop  # type: ignore[attr-defined]
        t.start()
        self.threads.append(t)
        self.consumers.append(c)
        return c

    def close(self, i: int) -> None:
        t = self.threads[i]
        t.stop.set()  # type: ignore[attr-defined]
        t.join(15)

    def close_all(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)


@pytest.fixture
def pollers() -> Iterator[Pollers]:
    p = Pollers()
    try:
        yield p
    finally:
        p.close_all()


def describe(d: GroupdProcess, group: str) -> dict[str, Any]:
    with KafkaClient(d.bootstrap) as client:
        _, resp = client.coordinator(group).send(
            "ShareGroupDescribe", {"group_ids": [group], "include_authorized_operations": False}
        )
    return resp["groups"][0]


def wait_for(what: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = what()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out; last: {last!r}")


def settled(d: GroupdProcess, group: str, members: int) -> dict[str, Any] | None:
    """The group once it has ``members`` members, each at the group epoch and holding something."""
    g = describe(d, group)
    if g["error_code"] or len(g["members"]) != members:
        return None
    if any(m["member_epoch"] != g["group_epoch"] for m in g["members"]) or g["assignment_epoch"] != g["group_epoch"]:
        return None
    if any(not m["assignment"]["topic_partitions"] for m in g["members"]):
        return None
    return g


def assigned(g: dict[str, Any]) -> dict[str, dict[uuid.UUID, list[int]]]:
    return {
        m["member_id"]: {tp["topic_id"]: sorted(tp["partitions"]) for tp in m["assignment"]["topic_partitions"]}
        for m in g["members"]
    }


def is_simple_assignor_fixed_point(g: dict[str, Any], topic_id: uuid.UUID, partitions: int) -> bool:
    """SimpleAssignor is sticky: handed the members' current assignment, in the order Kafka's
    ``TargetAssignmentBuilder`` hands the members over (a Java ``HashMap`` of member ids), it gives
    it back unchanged when that assignment is one it would give."""
    current = assigned(g)

    def fixed(order: list[str]) -> bool:
        specs = {mid: java_member_spec(["t"], lambda _n: topic_id, current[mid]) for mid in order}
        out = simple_assign(GroupSpec(specs, SubscriptionType.HOMOGENEOUS), {topic_id: partitions})
        return {m: {t: sorted(ps) for t, ps in parts.items()} for m, parts in out.items()} == current

    # ids sharing a bucket iterate in insertion order, which a client cannot see: either will do
    return any(fixed(java_hashmap_order(list(p))) for p in itertools.permutations(current))


def test_three_members_one_partition_share_it(daemon: GroupdProcess, pollers: Pollers) -> None:
    topic, group = _topic(daemon, 1), "sg-" + uuid.uuid4().hex[:8]
    for _ in range(3):
        pollers.start(daemon.bootstrap, group, topic)
    g = wait_for(lambda: settled(daemon, group, 3))
    assert g["group_state"] == "Stable" and g["assignor_name"] == "simple"
    tid = g["members"][0]["assignment"]["topic_partitions"][0]["topic_id"]
    assert assigned(g) == {m["member_id"]: {tid: [0]} for m in g["members"]}
    assert all(m["subscribed_topic_names"] == [topic] for m in g["members"])


def test_members_split_partitions_as_simple_assignor_then_leave(daemon: GroupdProcess, pollers: Pollers) -> None:
    topic, group = _topic(daemon, 5), "sg-" + uuid.uuid4().hex[:8]
    for _ in range(2):
        pollers.start(daemon.bootstrap, group, topic)
    g = wait_for(lambda: settled(daemon, group, 2))
    tid = g["members"][0]["assignment"]["topic_partitions"][0]["topic_id"]
    parts = sorted(p for m in assigned(g).values() for p in m[tid])
    assert parts == [0, 1, 2, 3, 4]  # each partition to one member when members <= partitions
    assert sorted(len(m[tid]) for m in assigned(g).values()) == [2, 3]
    assert is_simple_assignor_fixed_point(g, tid, 5)
    # close() sends the leave heartbeat (epoch -1): the other member takes everything
    pollers.close(0)
    g = wait_for(lambda: settled(daemon, group, 1))
    assert list(assigned(g).values()) == [{tid: [0, 1, 2, 3, 4]}]
    pollers.close(1)
    g = wait_for(lambda: (x := describe(daemon, group))["group_state"] == "Empty" and x)
    assert g["members"] == []


def test_a_killed_member_is_fenced_after_its_session(daemon: GroupdProcess, pollers: Pollers) -> None:
    topic, group = _topic(daemon, 2), "sg-" + uuid.uuid4().hex[:8]
    pollers.start(daemon.bootstrap, group, topic)
    script = (
        "import sys, time\n"
        "from confluent_kafka import ShareConsumer\n"
        "c = ShareConsumer({'bootstrap.servers': sys.argv[1], 'group.id': sys.argv[2]})\n"
        "c.subscribe([sys.argv[3]])\n"
        "while True:\n"
        "    c.poll(0.1)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, daemon.bootstrap, group, topic], stderr=subprocess.DEVNULL)
    try:
        g = wait_for(lambda: settled(daemon, group, 2))
        assert sorted(len(p) for m in assigned(g).values() for p in m.values()) == [1, 1]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        # no leave heartbeat: the member goes when its session expires (shareGroupFenceMember)
        g = wait_for(lambda: settled(daemon, group, 1), timeout=SESSION_MS / 1000 + 20)
        assert [sorted(p) for m in assigned(g).values() for p in m.values()] == [[0, 1]]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    events = daemon.events("share_member_fenced")
    assert any(e.get("group") == group and e.get("reason") == "the member session expired" for e in events)


def test_listed_and_described_as_kafka_does(daemon: GroupdProcess, pollers: Pollers) -> None:
    topic, group = _topic(daemon, 1), "sg-" + uuid.uuid4().hex[:8]
    pollers.start(daemon.bootstrap, group, topic)
    wait_for(lambda: settled(daemon, group, 1))
    with KafkaClient(daemon.bootstrap) as client:
        shares = client.list_groups(types=["share"])
        assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in shares if g.group_id == group] == [
            (group, "share", "Stable", "share")
        ]
        assert group not in {g.group_id for g in client.list_groups(types=["classic", "consumer"])}
    admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    # librdkafka lists consumer and classic groups only; it describes a share group's id through
    # DescribeGroups, which Kafka answers for a non-classic group with a Dead group
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    desc = admin.describe_consumer_groups([group])[group].result(10)
    assert desc.state.name == "DEAD" and desc.members == []


def test_share_groups_cli(daemon: GroupdProcess, pollers: Pollers) -> None:
    topic, group = _topic(daemon, 2), "sg-" + uuid.uuid4().hex[:8]
    pollers.start(daemon.bootstrap, group, topic)
    wait_for(lambda: settled(daemon, group, 1))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "groupd", "share-groups", *args, "--bootstrap-server", daemon.bootstrap],
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = cli("list")
    assert out.returncode == 0 and group in out.stdout and "Stable" in out.stdout
    out = cli("describe", group)
    assert out.returncode == 0 and "START-OFFSET" in out.stdout and f"{topic}:0" in out.stdout
    out = cli("reset-offsets", group, "--topic", topic, "--to-earliest")
    assert out.returncode == 2 and "--dry-run --execute is required" in out.stderr  # safe by default
    out = cli("reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert out.returncode == 1 and f"Share group '{group}' is not empty." in out.stderr
    out = cli("delete", group)
    assert out.returncode == 1 and "NON_EMPTY_GROUP" in out.stderr
    pollers.close_all()
    wait_for(lambda: describe(daemon, group)["group_state"] == "Empty")
    out = cli("reset-offsets", group, "--topic", topic, "--to-latest", "--dry-run")
    assert out.returncode == 0 and "dry run" in out.stdout
    out = cli("reset-offsets", group, "--all-topics", "--to-earliest", "--execute", "--json")
    assert out.returncode == 0, out.stderr
    assert '"executed": true' in out.stdout
    out = cli("describe", group, "--json")
    assert out.returncode == 0 and '"start_offset": 0' in out.stdout
    out = cli("delete", group)
    assert out.returncode == 0, out.stderr
    assert describe(daemon, group)["error_code"] == 69


def test_group_configs_share_timings_in_force(daemon: GroupdProcess) -> None:
    """``share.heartbeat.interval.ms`` / ``share.session.timeout.ms`` set on the group's GROUP resource
    (IncrementalAlterConfigs) are what its members are told and timed by (Kafka's
    ``shareGroupHeartbeatIntervalMs``), within the broker's group.share.* bounds; DescribeConfigs
    shows them and the other share.* configs in force."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic, group = _topic(daemon, 1), "sg-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": daemon.bootstrap})

    def alter(**configs: str) -> None:
        entries = [
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
        ]
        res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
        admin.incremental_alter_configs([res])[res].result(10)

    alter(share_heartbeat_interval_ms="1234", share_session_timeout_ms="3000", share_auto_offset_reset="earliest")
    with pytest.raises(Exception, match=r"share\.session\.timeout\.ms"):
        alter(share_session_timeout_ms="500")  # below group.share.min.session.timeout.ms (1000 here)
    with pytest.raises(Exception, match=r"share\.isolation\.level"):
        alter(share_isolation_level="snapshot")
    with pytest.raises(Exception, match=r"by_duration:<PnDTnHnMn\.nS>"):
        alter(share_auto_offset_reset="by_duration:-PT1H")  # ShareGroupAutoOffsetResetStrategy.Validator
    alter(share_auto_offset_reset="by_duration:PT1H")
    alter(share_auto_offset_reset="earliest")
    res = ConfigResource(ConfigResource.Type.GROUP, group)
    described = admin.describe_configs([res])[res].result(10)
    assert described["share.heartbeat.interval.ms"].value == "1234"
    assert described["share.auto.offset.reset"].value == "earliest"
    assert described["share.isolation.level"].value == "read_uncommitted"  # the default, in force
    with KafkaClient(daemon.bootstrap) as client:
        _, ans = client.coordinator(group).send(
            "ShareGroupHeartbeat",
            {
                "group_id": group,
                "member_id": uuid.uuid4().hex[:22],
                "member_epoch": 0,
                "rack_id": None,
                "subscribed_topic_names": [topic],
            },
        )
    assert (ans["error_code"], ans["heartbeat_interval_ms"]) == (0, 1234)
    # no more heartbeats: the session fences the member (its length under the group's config is
    # checked with a fake clock in tests/coordinator/test_share_groups.py)
    wait_for(lambda: describe(daemon, group)["members"] == [], timeout=20)


def test_a_restart_loads_share_groups_from_the_log(tmp_path: Path) -> None:
    """The share-group records in __consumer_offsets are replayed at start-up through the same fold:
    the group, its epochs, members and assignments come back (a SIGKILL loses nothing durable)."""
    d = GroupdProcess(tmp_path / "data", "--fsync", "always")
    d.start()
    try:
        topic, group = _topic(d, 2), "sg-" + uuid.uuid4().hex[:8]
        member = uuid.uuid4().hex[:22]

        def beat(epoch: int, topics: list[str] | None) -> dict[str, Any]:
            with KafkaClient(d.bootstrap) as client:
                body = {
                    "group_id": group,
                    "member_id": member,
                    "member_epoch": epoch,
                    "rack_id": None,
                    "subscribed_topic_names": topics,
                }
                return client.coordinator(group).send("ShareGroupHeartbeat", body)[1]

        a = beat(0, [topic])
        b = wait_for(lambda: (x := beat(a["member_epoch"], None))["assignment"] is not None and x)
        before = describe(d, group)
        assert [tp["partitions"] for m in before["members"] for tp in m["assignment"]["topic_partitions"]] == [[0, 1]]
        d.kill()
        d.start()
        after = wait_for(lambda: (x := describe(d, group))["error_code"] == 0 and x)
        assert {k: after[k] for k in ("group_epoch", "assignment_epoch", "group_state", "members")} == {
            k: before[k] for k in ("group_epoch", "assignment_epoch", "group_state", "members")
        }
        assert beat(b["member_epoch"], None)["error_code"] == 0  # it carries on with its epoch
    finally:
        d.stop()
