"""Issue 18 (KIP-848): confluent-kafka with ``group.protocol=consumer`` against a real groupd. The
coordinator computes the assignment (server-side ``uniform``) and members move to it incrementally;
the assignment callbacks show every partition owned once and never by two members at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from groupd.ops.kafka_client import GroupDescription, KafkaClient

from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e

PARTITIONS = 6


def test_three_consumer_protocol_members_cover_every_partition_once(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kip848-{unique}", f"kip848-g-{unique}"
    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(15)
    owned: dict[int, set[int]] = {}
    overlaps: list[str] = []

    def callbacks(i: int) -> dict[str, Any]:
        def on_assign(_c: Any, parts: list[Any]) -> None:
            mine = owned.setdefault(i, set())
            for p in parts:
                holders = [j for j, s in owned.items() if j != i and p.partition in s]
                if holders:
                    overlaps.append(f"partition {p.partition} given to {i} while {holders} own it")
                mine.add(p.partition)

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            owned.setdefault(i, set()).difference_update(p.partition for p in parts)

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    consumers = []
    for i in range(3):
        c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": group, "group.protocol": "consumer"})
        c.subscribe([topic], **callbacks(i))
        consumers.append(c)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.05)
            if len(owned) == 3 and all(len(s) == PARTITIONS // 3 for s in owned.values()):
                break
        assert not overlaps
        assert sorted(p for s in owned.values() for p in s) == list(range(PARTITIONS)), owned
        assert all(len(s) == 2 for s in owned.values()), owned
        # ConsumerGroupDescribe as librdkafka's admin client decodes it. The callbacks can show the final
        # split while a member whose partitions did not move is still at the previous epoch until its next
        # heartbeat (5 s): Reconciling until then (ConsumerGroup.maybeUpdateGroupState), so wait for Stable.
        deadline = time.monotonic() + 20
        described = admin.describe_consumer_groups([group])[group].result(15)
        while not str(described.state).endswith("STABLE") and time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.05)
            described = admin.describe_consumer_groups([group])[group].result(15)
        assert str(described.state).endswith("STABLE"), described.state
        assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == list(
            range(PARTITIONS)
        )
    finally:
        for c in consumers:
            c.close()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_two_members_get_contiguous_halves_as_from_kafka(groupd: GroupdProcess, unique: str, assignor: str) -> None:
    """Issue 28: the server assignors are Kafka's, so two members on 6 partitions own 0-2 and 3-5
    (groupd's former ``uniform`` dealt 0, 2, 4 / 1, 3, 5)."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kip848-halves-{unique}", f"kip848-halves-g-{unique}"
    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(15)
    owned: dict[int, set[int]] = {}

    def callbacks(i: int) -> dict[str, Any]:
        def on_assign(_c: Any, parts: list[Any]) -> None:
            owned.setdefault(i, set()).update(p.partition for p in parts)

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            owned.setdefault(i, set()).difference_update(p.partition for p in parts)

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    consumers = []
    for i in range(2):
        c = Consumer(
            {
                "bootstrap.servers": groupd.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "group.remote.assignor": assignor,
            }
        )
        c.subscribe([topic], **callbacks(i))
        consumers.append(c)
    try:
        halves = sorted(sorted(s) for s in owned.values())
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and halves != [[0, 1, 2], [3, 4, 5]]:
            for c in consumers:
                c.poll(0.05)
            halves = sorted(sorted(s) for s in owned.values())
        assert halves == [[0, 1, 2], [3, 4, 5]], owned
    finally:
        for c in consumers:
            c.close()


def _first_message(consumer: Any, timeout: float = 20.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            return m
    raise AssertionError("no message")


def test_offsets_committed_under_the_consumer_protocol_are_where_a_classic_consumer_resumes(
    groupd: GroupdProcess, unique: str
) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kip848-o-{unique}", f"kip848-o-g-{unique}"
    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": groupd.bootstrap})
    for v in (b"first", b"second"):
        producer.produce(topic, v)
    producer.flush(10)
    common = {"bootstrap.servers": groupd.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    new = Consumer({**common, "group.protocol": "consumer", "enable.auto.commit": False})
    new.subscribe([topic])
    m = _first_message(new)
    assert m.value() == b"first"
    new.commit(message=m, asynchronous=False)  # OffsetCommit v9 at the member's epoch
    new.close()  # leaves (epoch -1): the consumer group is empty
    classic = Consumer({**common, "group.protocol": "classic"})
    classic.subscribe([topic])
    try:
        assert _first_message(classic).value() == b"second"
    finally:
        classic.close()


def test_regex_subscription_picks_up_a_topic_created_afterwards(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = f"kip848-rx-{unique}"
    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(f"{prefix}-a", num_partitions=2, replication_factor=1)])[f"{prefix}-a"].result(15)
    owned: set[tuple[str, int]] = set()
    consumer = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": prefix, "group.protocol": "consumer"})
    consumer.subscribe(
        [f"^{prefix}-.*"],
        on_assign=lambda _c, ps: owned.update((p.topic, p.partition) for p in ps),
        on_revoke=lambda _c, ps: owned.difference_update((p.topic, p.partition) for p in ps),
    )
    try:

        def poll_until(n: int) -> None:
            end = time.monotonic() + 15
            while time.monotonic() < end and len(owned) < n:
                consumer.poll(0.1)

        poll_until(2)
        assert owned == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}
        admin.create_topics([NewTopic(f"{prefix}-b", num_partitions=1, replication_factor=1)])[f"{prefix}-b"].result(15)
        poll_until(3)  # the next heartbeat (5 s interval) re-resolves the expression
        assert (f"{prefix}-b", 0) in owned
    finally:
        consumer.close()


@pytest.mark.parametrize("where", ["broker-settings", "group-configs"])
def test_a_sigkilled_member_is_fenced_after_its_session_and_its_partitions_move(
    tmp_path: Path, unique: str, where: str
) -> None:
    """A 6 s session and 1 s heartbeats, from the broker's group.consumer.* settings or from the group's own
    consumer.session.timeout.ms / consumer.heartbeat.interval.ms (Kafka's GroupConfigManager; set with
    AdminClient.incremental_alter_configs before the daemon restarts, so they are also read back at
    start-up). With the broker's 45 s the member would still hold its partitions when the test gives up."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    bounds = ("--group-consumer-min-session-timeout-ms", "6000", "--group-consumer-min-heartbeat-interval-ms", "1000")
    timings = ("--group-consumer-session-timeout-ms", "6000", "--group-consumer-heartbeat-interval-ms", "1000")
    daemon = GroupdProcess(tmp_path / "data", *bounds, *(timings if where == "broker-settings" else ()))
    daemon.start()
    topic, group = f"kip848-k-{unique}", f"kip848-k-g-{unique}"
    admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(15)
    if where == "group-configs":
        entries = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in (("consumer.session.timeout.ms", "6000"), ("consumer.heartbeat.interval.ms", "1000"))
        ]
        res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
        admin.incremental_alter_configs([res])[res].result(10)
        del admin  # it would keep calling the old port
        daemon.stop()
        daemon.start()
    owned: set[int] = set()
    survivor = Consumer({"bootstrap.servers": daemon.bootstrap, "group.id": group, "group.protocol": "consumer"})
    survivor.subscribe(
        [topic],
        on_assign=lambda _c, ps: owned.update(p.partition for p in ps),
        on_revoke=lambda _c, ps: owned.difference_update(p.partition for p in ps),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.member_proc", daemon.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "MEMBER_GROUP_PROTOCOL": "consumer"},
    )

    def poll_until(done: Any, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and not done():
            survivor.poll(0.1)

    try:
        poll_until(lambda: len(owned) == 2, 20)  # two members, two partitions each
        assert len(owned) == 2, owned
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        poll_until(lambda: len(owned) == 4, 20)
        waited = time.monotonic() - t0
        assert owned == {0, 1, 2, 3}
        assert waited >= 4.0, waited  # fenced by the 6 s session, not before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        survivor.close()
        daemon.stop()


def test_api_versions_reports_the_group_version_feature(groupd: GroupdProcess) -> None:
    from groupd.ops.kafka_client import BrokerConnection

    host, port = groupd.bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout=15, client_id="features")
    try:
        resp = conn.send("ApiVersions", {"client_software_name": "t", "client_software_version": "1"}, version=3)[1]
    finally:
        conn.close()
    assert {"name": "group.version", "min_version": 0, "max_version": 1} in resp["supported_features"]
    assert {"name": "group.version", "max_version_level": 1, "min_version_level": 1} in resp["finalized_features"]
    assert {68, 69} <= {k["api_key"] for k in resp["api_keys"]}


# --- members in their own processes, on a daemon with a short heartbeat interval -----------------
# Members learn of a new target at their next heartbeat: at Kafka's 5 s interval, ten joins and nine
# leaves one by one would take minutes. One daemon for the tests below, at 500 ms.


FAST_HEARTBEATS = ("--group-consumer-heartbeat-interval-ms", "500", "--group-consumer-min-heartbeat-interval-ms", "500")


@pytest.fixture(scope="module")
def fast_groupd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    d = GroupdProcess(tmp_path_factory.mktemp("kip848-fast") / "data", *FAST_HEARTBEATS)
    d.start()
    try:
        yield d
    finally:
        d.stop()


class MemberProcess:
    """``tests.support.member_proc`` with MEMBER_EVENTS=1: its callbacks' events, timestamped with the
    machine's monotonic clock, and the records it consumed, read from its stdout by a thread."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, instance_id: str | None = None) -> None:
        self.name = name
        args = [sys.executable, "-m", "tests.support.member_proc", bootstrap, group, topic]
        env = {**os.environ, "MEMBER_GROUP_PROTOCOL": "consumer", "MEMBER_EVENTS": "1"}
        self.proc = subprocess.Popen(
            [*args, *([instance_id] if instance_id else [])], stdout=subprocess.PIPE, text=True, env=env
        )
        self.events: list[tuple[int, str, tuple[int, ...]]] = []  # (t ns, assign/revoke/lost/closed, partitions)
        self.consumed: set[tuple[int, int]] = set()
        self.owned: set[int] = set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, *rest = line.split()
            if kind == "msg":
                self.consumed.add((int(rest[0]), int(rest[1])))
                continue
            parts = () if kind == "closed" or rest[1] == "-" else tuple(int(p) for p in rest[1].split(","))
            self.events.append((int(rest[0]), kind, parts))
            if kind == "assign":
                self.owned |= set(parts)
            elif kind in ("revoke", "lost"):
                self.owned -= set(parts)

    def close(self, timeout: float = 20.0) -> None:
        """SIGTERM: the member closes its consumer (revoking, then leaving) and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(5)


def wait_until(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def described(bootstrap: str, group: str) -> GroupDescription | None:
    """A raw ConsumerGroupDescribe (groupd's own protocol client, not librdkafka)."""
    with KafkaClient(bootstrap, timeout=10) as client:
        return client.describe_consumer_group(group)


def converged(bootstrap: str, group: str, n_members: int, n_partitions: int) -> GroupDescription | None:
    """The group when Stable with ``n_members`` at the target epoch, each owning its target, and every
    partition owned once."""
    d = described(bootstrap, group)
    if d is None or d.state != "Stable" or len(d.members) != n_members:
        return None
    owned = [p for m in d.members for _t, p in m.assignment or []]
    ok = all(m.member_epoch == d.assignment_epoch and m.assignment == m.target_assignment for m in d.members)
    return d if ok and sorted(owned) == list(range(n_partitions)) else None


def ownership_overlaps(members: list[MemberProcess]) -> list[str]:
    """Walk every member's callback events in time order: a partition assigned while another member
    still holds it (revoke/lost not yet called, or still open when it closed) is an overlap."""
    timeline = sorted((t, kind, m.name, parts) for m in members for t, kind, parts in m.events)
    owner: dict[int, str] = {}
    overlaps = []
    for t, kind, name, parts in timeline:
        if kind == "closed":
            for p in [p for p, o in owner.items() if o == name]:
                del owner[p]
        for p in parts:
            if kind == "assign":
                if p in owner and owner[p] != name:
                    overlaps.append(f"partition {p} assigned to {name} at {t} while {owner[p]} owns it")
                owner[p] = name
            elif owner.get(p) == name:
                del owner[p]
    return overlaps


def test_ten_members_join_and_leave_one_by_one_while_a_producer_writes(fast_groupd: GroupdProcess, unique: str) -> None:
    """Issue 18: 10 members, each its own process, join one by one and cover every partition once;
    then they leave one by one while a producer writes. Every record produced is consumed, and the
    callbacks (incremental: the old owner's revoke before the new owner's assign) never show a
    partition owned by two members."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap, partitions = fast_groupd.bootstrap, 12
    topic, group = f"kip848-ten-{unique}", f"kip848-ten-g-{unique}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(15)
    produced: set[tuple[int, int]] = set()
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                produced.add((msg.partition(), msg.offset()))

        i = 0
        while not stop.is_set():
            producer.produce(topic, f"r{i}".encode(), partition=i % partitions, on_delivery=delivered)
            producer.poll(0)
            i += 1
            time.sleep(0.004)
        producer.flush(15)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    members: list[MemberProcess] = []
    try:
        for i in range(10):
            m = MemberProcess(f"m{i}", bootstrap, group, topic)
            members.append(m)
            wait_until(lambda m=m: m.owned, f"m{i}'s first partitions")
        d = wait_until(lambda: converged(bootstrap, group, 10, partitions), "10 members covering 12 partitions")
        assert sorted(len(m.assignment or []) for m in d.members) == [1] * 8 + [2] * 2
        # as the members see it, once their callbacks have caught up with the coordinator
        wait_until(lambda: sorted(len(m.owned) for m in members) == [1] * 8 + [2] * 2, "the members' own view")

        for n in range(9, 0, -1):
            members[9 - n].close()
            wait_until(lambda n=n: converged(bootstrap, group, n, partitions), f"{n} members after a leave")
        last = members[-1]
        wait_until(lambda: last.owned == set(range(partitions)), "the last member's callbacks for every partition")
        stop.set()
        writer.join(20)
        assert not failed and len(produced) > 1000

        # Every record read by someone: the last member reads what the others left. Not "the last
        # member reads each partition's last record": a leaver may have read and committed a
        # partition's end before the producer stopped, and then nothing new reaches that partition
        # before the stop (under load the producer is slow: 1 in ~5 loaded runs, committed 201 =
        # end 200 + 1 on 4 of 12 partitions, nothing left for the last member there).
        def unread() -> set[tuple[int, int]]:
            return produced - set().union(*(m.consumed for m in members))

        try:
            wait_until(lambda: not unread(), "every record to be read", 30)
        except AssertionError as e:
            missing = sorted(unread())
            raise AssertionError(f"{e}: {len(missing)} unread, first {missing[:12]}") from None
        last.close()
    finally:
        stop.set()
        for m in members:
            m.close()
    consumed = set().union(*(m.consumed for m in members))
    assert produced - consumed == set(), f"{len(produced - consumed)} records lost"
    assert ownership_overlaps(members) == []
    # every member saw a revoke for what it gave up, before the new owner's assign
    assert all(any(kind == "revoke" for _t, kind, _p in m.events) for m in members[:-1])


def test_a_static_member_restarted_within_its_session_gets_its_partitions_back_alone(
    fast_groupd: GroupdProcess, unique: str
) -> None:
    """Issue 18: a static member (group.instance.id) that closes leaves with epoch -2: it stays in the
    group at epoch -2, holding its partitions, and the group epoch does not move
    (consumerGroupStaticMemberGroupLeave); restarted, it takes them back without anybody else's
    assignment changing. A dynamic member leaving (-1) bumps the epoch: the raw ConsumerGroupDescribe
    tells the two apart."""
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = fast_groupd.bootstrap
    topic, group = f"kip848-st-{unique}", f"kip848-st-g-{unique}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])[topic].result(15)
    instance = f"static-{unique}"
    static = MemberProcess("static", bootstrap, group, topic, instance_id=instance)
    others = [MemberProcess(f"d{i}", bootstrap, group, topic) for i in range(2)]
    restarted = None
    try:
        before = wait_until(lambda: converged(bootstrap, group, 3, 6), "3 members covering 6 partitions")
        # the members' callbacks lag the coordinator's view: count their events once each has run its own
        # assign (a CI run counted a member's first assign, arriving after convergence, as a move)
        wait_until(lambda: all(len(m.owned) == 2 for m in (static, *others)), "each member's own 2 partitions")
        mine = set(static.owned)
        seen_by_others = [len(m.events) for m in others]

        static.close()
        gone = wait_until(
            lambda: (d := described(bootstrap, group)) and any(m.member_epoch == -2 for m in d.members) and d,
            "the static member's -2 leave",
        )
        assert gone.group_epoch == before.group_epoch  # a -1 leave would have bumped it
        (held,) = [m for m in gone.members if m.instance_id == instance]
        assert {p for _t, p in held.assignment or []} == mine  # still reserved for it

        restarted = MemberProcess("static-again", bootstrap, group, topic, instance_id=instance)
        wait_until(lambda: restarted.owned == mine, "the restarted static member's partitions")
        after = wait_until(lambda: converged(bootstrap, group, 3, 6), "the group with the member back")
        assert after.group_epoch == before.group_epoch
        assert [len(m.events) for m in others] == seen_by_others  # nobody else moved
        assert {m.instance_id for m in after.members} == {instance, None}

        others[0].close()  # a dynamic member's -1 leave: a new group epoch
        left = wait_until(lambda: converged(bootstrap, group, 2, 6), "the dynamic member's leave")
        assert left.group_epoch == before.group_epoch + 1
    finally:
        for m in [static, *others, *([restarted] if restarted else [])]:
            m.close()


def test_the_overlap_check_sees_an_assign_before_the_previous_owners_revoke() -> None:
    """The check above can fail: B's assign of partition 0 before A's revoke is an overlap; after it,
    or after A closed, it is not."""
    from types import SimpleNamespace

    def run(*a_events: tuple[int, str, tuple[int, ...]]) -> list[str]:
        a = SimpleNamespace(name="A", events=[(0, "assign", (0, 1)), *a_events])
        b = SimpleNamespace(name="B", events=[(5, "assign", (0,))])
        return ownership_overlaps([a, b])  # type: ignore[list-item]

    assert run((6, "revoke", (0,))) == ["partition 0 assigned to B at 5 while A owns it"]
    assert run((4, "revoke", (0,))) == []
    assert run((4, "closed", ())) == []
    assert run((4, "revoke", (1,))) == ["partition 0 assigned to B at 5 while A owns it"]
