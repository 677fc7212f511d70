"""Issue 18 (KIP-848 migration, ``group.consumer.migration.policy``): kafka-python consumers (the classic
protocol, eager range/roundrobin) form a group; a confluent-kafka ``group.protocol=consumer`` member joins
it, and the group becomes a consumer group whose coordinator assigns the classic members too
(``convertToConsumerGroup``, ``classicGroupJoin/Sync/HeartbeatToConsumerGroup``). When that member
leaves, the group becomes classic again and the kafka-python consumers go on (``convertToClassicGroup``).
A producer writes all along: nothing is lost, and the members' own rebalance callbacks show that no
partition is ever held by two members at once. With the policy ``disabled`` the consumer-protocol member
is refused (GROUP_ID_NOT_FOUND) and the classic group is left alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import kafka_python
from tests.support.daemon import GroupdProcess
from tests.support.groups import admin_for, forget_admin

pytestmark = pytest.mark.e2e

PARTITIONS = 6


class Ledger:
    """Who holds which partition, from the members' own assignment callbacks; and what they consumed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: dict[str, set[int]] = {}
        self.overlaps: list[str] = []
        self.consumed: dict[str, set[tuple[int, int]]] = {}

    def assigned(self, who: str, parts: list[int]) -> None:
        with self.lock:
            mine = self.held.setdefault(who, set())
            for p in parts:
                others = [o for o, s in self.held.items() if o != who and p in s]
                if others:
                    self.overlaps.append(f"partition {p} given to {who} while {others} hold it")
                mine.add(p)

    def revoked(self, who: str, parts: list[int]) -> None:
        with self.lock:
            self.held.setdefault(who, set()).difference_update(parts)

    def got(self, who: str, partition: int, offset: int) -> None:
        with self.lock:
            self.consumed.setdefault(who, set()).add((partition, offset))

    def holders(self) -> dict[str, set[int]]:
        with self.lock:
            return {k: set(v) for k, v in self.held.items() if v}

    def all_consumed(self) -> set[tuple[int, int]]:
        with self.lock:
            return set().union(*self.consumed.values()) if self.consumed else set()


class Classic(threading.Thread):
    """A kafka-python consumer (eager range/roundrobin, the classic protocol) in its own poll loop."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger) -> None:
        super().__init__(daemon=True, name=name)
        self.bootstrap, self.group, self.topic, self.ledger = bootstrap, group, topic, ledger
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        ledger, me = self.ledger, self.name

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                ledger.revoked(me, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                ledger.assigned(me, [tp.partition for tp in assigned])

        try:
            c = KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                client_id=me,
                auto_offset_reset="earliest",
                session_timeout_ms=10000,
                heartbeat_interval_ms=500,
            )
            kafka_python.subscribe(c, self.topic, Listener())
            try:
                while not self.stop.is_set():
                    for tp, msgs in c.poll(timeout_ms=100).items():
                        for m in msgs:
                            ledger.got(me, tp.partition, m.offset)
            finally:
                c.close()
        except BaseException as e:  # surfaced by the test
            self.error = e


class ConsumerProtocol(threading.Thread):
    """A confluent-kafka ``group.protocol=consumer`` member (KIP-848) in its own poll loop."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger) -> None:
        super().__init__(daemon=True, name=name)
        self.bootstrap, self.group, self.topic, self.ledger = bootstrap, group, topic, ledger
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        from confluent_kafka import Consumer

        me, ledger = self.name, self.ledger
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "error_cb": lambda e: self.errors.append(str(e)),
            }
        )
        c.subscribe(
            [self.topic],
            on_assign=lambda _c, ps: ledger.assigned(me, [p.partition for p in ps]),
            on_revoke=lambda _c, ps: ledger.revoked(me, [p.partition for p in ps]),
        )
        try:
            while not self.stop.is_set():
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    ledger.got(me, m.partition(), m.offset())
        finally:
            c.close()  # leaves the group (member epoch -1)


class Producer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True, name="producer")
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.produced: set[tuple[int, int]] = set()

    def run(self) -> None:
        from confluent_kafka import Producer as P

        p = P({"bootstrap.servers": self.bootstrap, "linger.ms": 5})

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.produced.add((msg.partition(), msg.offset()))

        i = 0
        while not self.stop.is_set():
            p.produce(self.topic, value=str(i).encode(), partition=i % PARTITIONS, on_delivery=delivered)
            p.poll(0)
            i += 1
            time.sleep(0.01)
        p.flush(10)


def wait_for(what: str, cond: Callable[[], bool], timeout: float, *threads: Any) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for t in threads:
            assert getattr(t, "error", None) is None, t.error
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def group_type(bootstrap: str, group: str) -> str:
    d = admin_for(bootstrap).describe_consumer_groups([group])[group].result(15)
    return f"{str(d.type).split('.')[-1]}/{str(d.state).split('.')[-1]}/{len(d.members)}"


def covers(ledger: Ledger, names: set[str]) -> Callable[[], bool]:
    def check() -> bool:
        h = ledger.holders()
        return set(h) == names and sorted(p for s in h.values() for p in s) == list(range(PARTITIONS))

    return check


def conversions(daemon: GroupdProcess, event: str, group: str) -> list[dict[str, object]]:
    return [e for e in daemon.events(event) if e.get("group") == group]


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin_for(bootstrap).create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
        topic
    ].result(15)


def test_classic_group_upgrades_when_a_consumer_protocol_member_joins_and_downgrades_when_it_leaves(
    groupd: GroupdProcess, unique: str
) -> None:
    topic, group = f"mig-{unique}", f"mig-g-{unique}"
    bootstrap = groupd.bootstrap
    create_topic(bootstrap, topic)
    ledger = Ledger()
    classic = [Classic(f"classic-{i}", bootstrap, group, topic, ledger) for i in range(2)]
    modern = [ConsumerProtocol(f"modern-{i}", bootstrap, group, topic, ledger) for i in range(2)]
    producer = Producer(bootstrap, topic)
    try:
        for c in classic:
            c.start()
        wait_for("the classic group", covers(ledger, {"classic-0", "classic-1"}), 20, *classic)
        assert group_type(bootstrap, group).startswith("CLASSIC/STABLE/2")
        producer.start()

        # the upgrade: four members share the partitions, the coordinator assigns them all
        for m in modern:
            m.start()
        everyone = {"classic-0", "classic-1", "modern-0", "modern-1"}
        wait_for("the upgraded group", covers(ledger, everyone), 25, *classic)
        wait_for("a stable consumer group", lambda: group_type(bootstrap, group) == "CONSUMER/STABLE/4", 10)
        # the daemon is shared by the session's e2e tests: only this group's conversions count
        assert len(conversions(groupd, "group_upgraded", group)) == 1, groupd.log_tail()
        # records flow to all four: wait until each has consumed some (modern-0 has no other chance,
        # and its first fetch after the assign can take over a second on a loaded machine)
        wait_for("records consumed by all four", lambda: all(ledger.consumed.get(n) for n in everyone), 20, *classic)

        # one consumer-protocol member leaves: still a consumer group, its partitions move
        modern[0].stop.set()
        modern[0].join(15)
        wait_for("three members", covers(ledger, everyone - {"modern-0"}), 25, *classic)
        wait_for("a stable consumer group", lambda: group_type(bootstrap, group) == "CONSUMER/STABLE/3", 10)
        assert not conversions(groupd, "group_downgraded", group)

        # the downgrade: the last consumer-protocol member leaves, the classic members take everything back
        modern[1].stop.set()
        modern[1].join(15)
        wait_for("the downgraded group", covers(ledger, {"classic-0", "classic-1"}), 25, *classic)
        assert conversions(groupd, "group_downgraded", group), groupd.log_tail()
        wait_for("a stable classic group", lambda: group_type(bootstrap, group) == "CLASSIC/STABLE/2", 10)
        time.sleep(1)  # and records keep flowing to the classic members
        producer.stop.set()
        producer.join(15)
        wait_for("every record consumed", lambda: producer.produced <= ledger.all_consumed(), 20, *classic)
        assert all(ledger.consumed.get(t.name) for t in (*classic, *modern)), ledger.consumed.keys()
        assert not ledger.overlaps, ledger.overlaps
        assert not [e for m in modern for e in m.errors]
    finally:
        for t in (producer, *modern, *classic):
            t.stop.set()
        for t in (producer, *modern, *classic):
            if t.is_alive() or t.ident is not None:
                t.join(15)


def test_with_the_migration_policy_disabled_a_consumer_protocol_member_cannot_join_a_classic_group(
    tmp_path: Path, unique: str
) -> None:
    daemon = GroupdProcess(tmp_path / "data", "--group-consumer-migration-policy", "disabled")
    daemon.start()
    topic, group = f"mig-d-{unique}", f"mig-d-g-{unique}"
    ledger = Ledger()
    classic = Classic("classic-0", daemon.bootstrap, group, topic, ledger)
    modern = ConsumerProtocol("modern", daemon.bootstrap, group, topic, ledger)
    try:
        create_topic(daemon.bootstrap, topic)
        classic.start()
        wait_for("the classic group", covers(ledger, {"classic-0"}), 20, classic)
        modern.start()
        # validateOnlineUpgrade refuses: the heartbeat is answered GROUP_ID_NOT_FOUND, again and again
        wait_for("the refusal", lambda: len(daemon.events("online_upgrade_refused")) >= 1, 15)
        time.sleep(2)
        assert ledger.holders() == {"classic-0": set(range(PARTITIONS))}
        assert group_type(daemon.bootstrap, group) == "CLASSIC/STABLE/1"
    finally:
        modern.stop.set()
        classic.stop.set()
        for t in (modern, classic):
            if t.ident is not None:
                t.join(15)
        forget_admin(daemon.bootstrap)
        daemon.stop()
