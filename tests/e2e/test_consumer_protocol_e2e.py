"""Issue 18 (KIP-848): confluent-kafka with ``group.protocol=consumer`` against a real groupd. The
coordinator computes the assignment (server-side ``uniform``) and members move to it incrementally;
the assignment callbacks show every partition owned once and never by two members at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

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
        # ConsumerGroupDescribe as librdkafka's admin client decodes it
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert str(described.state).endswith("STABLE"), described.state
        assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == list(
            range(PARTITIONS)
        )
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


def test_a_sigkilled_member_is_fenced_after_its_session_and_its_partitions_move(tmp_path: Path, unique: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    flags = ("--group-consumer-session-timeout-ms", "6000", "--group-consumer-heartbeat-interval-ms", "1000")
    daemon = GroupdProcess(tmp_path / "data", *flags)
    daemon.start()
    topic, group = f"kip848-k-{unique}", f"kip848-k-g-{unique}"
    admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(15)
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


def test_a_static_member_restarted_within_its_session_gets_its_partitions_back_alone(
    groupd: GroupdProcess, unique: str
) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kip848-s-{unique}", f"kip848-s-g-{unique}"
    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(15)
    owned: dict[str, set[int]] = {"a": set(), "b": set()}
    revoked_from_b: list[int] = []

    def member(name: str) -> Any:
        c = Consumer(
            {
                "bootstrap.servers": groupd.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "group.instance.id": f"static-{name}",
            }
        )

        def on_revoke(_c: Any, ps: list[Any]) -> None:
            owned[name].difference_update(p.partition for p in ps)
            if name == "b" and settled:
                revoked_from_b.extend(p.partition for p in ps)

        c.subscribe([topic], on_assign=lambda _c, ps: owned[name].update(p.partition for p in ps), on_revoke=on_revoke)
        return c

    settled = False
    a, b = member("a"), member("b")
    try:
        end = time.monotonic() + 20
        while time.monotonic() < end and not (len(owned["a"]) == 2 and len(owned["b"]) == 2):
            a.poll(0.05)
            b.poll(0.05)
        assert len(owned["a"]) == len(owned["b"]) == 2, owned
        settled, before = True, set(owned["a"])
        a.close()  # a static member leaves with epoch -2: its partitions stay reserved for it
        owned["a"] = set()
        a = member("a")
        end = time.monotonic() + 15
        while time.monotonic() < end and owned["a"] != before:
            a.poll(0.05)
            b.poll(0.05)
        assert owned["a"] == before and not revoked_from_b
    finally:
        a.close()
        b.close()


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
