"""Real clients (kafka-python, aiokafka, confluent-kafka at default settings) riding out a broker
stop in a 3-broker cluster: a consuming group whose coordinator's broker stops finds the new
coordinator (loaded from the shared log) and keeps consuming with nothing lost and its committed
offsets intact; producers with acks=all whose partition leader stops retry to the new leader and no
acknowledged record is lost."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from groupd.coordinator.routing import partition_for
from groupd.ops.pytest_plugin import GroupdBroker
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.cluster.conftest import create_topic, leaders
from tests.support import kafka_python

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")


class Consuming:
    """A group member consuming ``topic`` in a thread: the values it saw and how many of them it
    had committed (synchronously) when it last committed. ``config``: settings in the client's own
    spelling on top of its defaults."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, config: dict[str, Any] | None = None) -> None:
        self.kind, self.bootstrap, self.group, self.topic = kind, bootstrap, group, topic
        self.config = config or {}
        self.seen: list[bytes] = []
        self.committed = 0
        self.commit_errors: list[str] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"{kind}-consuming")

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.error is not None:
                raise AssertionError(f"{self.kind} failed") from self.error
            assert time.monotonic() < deadline, f"{self.kind}: {what} (seen {len(self.seen)}, {self.commit_errors})"
            time.sleep(0.05)

    def _run(self) -> None:
        try:
            getattr(self, "_" + self.kind.replace("-", "_"))()
        except BaseException as e:
            self.error = e

    def _got(self, values: list[bytes], commit: Callable[[], Any]) -> None:
        if not values:
            return
        self.seen.extend(values)
        try:
            commit()
            self.committed = len(self.seen)
        except Exception as e:  # retried with the next batch, as an application would
            self.commit_errors.append(repr(e))

    def _kafka_python(self) -> None:
        from kafka import KafkaConsumer

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **self.config,
        )
        kafka_python.subscribe(c, self.topic)
        try:
            while not self.stop.is_set():
                batches = c.poll(timeout_ms=100)
                self._got([r.value for recs in batches.values() for r in recs], c.commit)
        finally:
            c.close()

    def _aiokafka(self) -> None:
        asyncio.run(self._aiokafka_main())

    async def _aiokafka_main(self) -> None:
        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **self.config,
        )
        await c.start()
        try:
            while not self.stop.is_set():
                batches = await c.getmany(timeout_ms=100)
                values = [r.value for recs in batches.values() for r in recs]
                if values:
                    self.seen.extend(values)
                    try:
                        await c.commit()
                        self.committed = len(self.seen)
                    except Exception as e:
                        self.commit_errors.append(repr(e))
        finally:
            await c.stop()

    def _confluent_kafka(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **self.config,
            }
        )
        c.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                msgs = [m for m in c.consume(100, 0.1) if m.error() is None]
                self._got([m.value() for m in msgs], lambda: c.commit(asynchronous=False))
        finally:
            c.close()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for v in values:
            producer.send(topic, v)
        producer.flush(15)
    finally:
        producer.close(5)


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}


def _live_bootstrap(cluster: GroupdBroker) -> str:
    return ",".join(f"{b['host']}:{b['port']}" for b in cluster.brokers() if b["state"] == "live")


def _consume_across(
    cluster: GroupdBroker, kind: str, name: str, n: int, disrupt: Callable[[int], str]
) -> tuple[Consuming, list[bytes], str]:
    """A ``kind`` member of group ``name`` consumes and commits ``n`` records of topic ``name`` (3
    partitions, replication factor 3); ``disrupt(coordinator)`` acts on the group's coordinator and
    returns a bootstrap that still works; the offsets committed before it must be intact after it;
    ``n`` more records are then consumed and committed. Returns the member, every value, the bootstrap."""
    create_topic(cluster, name, partitions=3, replication=3)
    coordinator = leaders(cluster, "__consumer_offsets")[partition_for(name)][0]
    first = [f"a{i}".encode() for i in range(n)]
    second = [f"b{i}".encode() for i in range(n)]
    _produce(cluster.bootstrap, name, first)
    member = Consuming(kind, cluster.bootstrap, name, name)
    member.thread.start()
    try:
        member.wait(lambda: member.committed >= n, 20, "first half consumed and committed")
        before = _committed(cluster.bootstrap, name, name)
        assert sum(before.values()) == n
        bootstrap = disrupt(coordinator)
        # The new coordinator loaded the group's offsets from the shared log: intact.
        assert _committed(bootstrap, name, name) == before
        _produce(bootstrap, name, second)
        member.wait(lambda: member.committed >= 2 * n, 25, "second half consumed and committed")
    finally:
        member.stop.set()
        member.thread.join(15)
    assert member.error is None
    assert sum(_committed(bootstrap, name, name).values()) == 2 * n
    assert leaders(cluster, "__consumer_offsets")[partition_for(name)][0] != coordinator
    return member, first + second, bootstrap


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_group_whose_coordinator_broker_stops_moves_on_and_loses_nothing(
    healthy_cluster: GroupdBroker, unique: str, kind: str
) -> None:
    def stop(coordinator: int) -> str:
        healthy_cluster.stop_broker(coordinator)
        return _live_bootstrap(healthy_cluster)

    member, values, _ = _consume_across(healthy_cluster, kind, f"fo-{unique}", 30, stop)
    assert set(member.seen) == set(values)


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_group_follows_its_coordinator_when_it_moves(healthy_cluster: GroupdBroker, unique: str, kind: str) -> None:
    """The control endpoint's move-coordinator: the old coordinator answers NOT_COORDINATOR, the
    member finds the new one and carries on committing; nothing is consumed twice or lost."""

    def move(coordinator: int) -> str:
        target = next(n for n in healthy_cluster.nodes if n != coordinator)
        assert healthy_cluster.move_coordinator(f"mvc-{unique}", target)["coordinator"] == target
        return healthy_cluster.bootstrap

    member, values, _ = _consume_across(healthy_cluster, kind, f"mvc-{unique}", 20, move)
    assert sorted(member.seen) == sorted(values)


class Acked:
    """Values acknowledged by the broker (acks=all), and errors reported, from any thread."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.times: list[float] = []  # time.time() of each acknowledgement, as logging's record.created
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def ok(self, value: bytes) -> None:
        with self.lock:
            self.values.append(value)
            self.times.append(time.time())

    def failed(self, error: object) -> None:
        with self.lock:
            self.errors.append(repr(error))


def _producing(
    kind: str, bootstrap: str, topic: str, values: list[bytes], acked: Acked, config: dict[str, Any] | None = None
) -> None:
    """Send ``values`` one every 10 ms with the client's default settings (acks=all for each of
    these three) and ``config`` (in the client's spelling), recording the acknowledged ones."""
    config = config or {}
    if kind == "kafka-python":
        p = KafkaProducer(bootstrap_servers=bootstrap, **config)
        for v in values:
            p.send(topic, v).add_callback(lambda _md, v=v: acked.ok(v)).add_errback(acked.failed)
            time.sleep(0.01)
        p.flush(30)
        p.close(5)
    elif kind == "aiokafka":

        async def run() -> None:
            from aiokafka import AIOKafkaProducer

            p = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
            await p.start()
            try:
                futures = []
                for v in values:
                    fut = await p.send(topic, v)
                    fut.add_done_callback(lambda f, v=v: acked.failed(f.exception()) if f.exception() else acked.ok(v))
                    futures.append(fut)
                    await asyncio.sleep(0.01)
                await asyncio.gather(*futures, return_exceptions=True)
            finally:
                await p.stop()

        asyncio.run(run())
    else:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, **config})

        def report(err: Any, msg: Any) -> None:
            acked.failed(err) if err is not None else acked.ok(msg.value())

        for v in values:
            p.produce(topic, v, on_delivery=report)
            p.poll(0.01)
        assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    try:
        return [r.value for r in c]
    finally:
        c.close()


@pytest.mark.parametrize("kind", CLIENTS)
def test_acks_all_producers_retry_to_the_new_leader_and_lose_no_acknowledged_record(
    healthy_cluster: GroupdBroker, unique: str, kind: str
) -> None:
    cluster = healthy_cluster
    topic = f"pl-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, epoch),) = leaders(cluster, topic).values()
    values = [f"v{i}".encode() for i in range(150)]
    acked = Acked()
    thread = threading.Thread(target=_producing, args=(kind, cluster.bootstrap, topic, values, acked), daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while len(acked.values) < 30:
        assert time.monotonic() < deadline, acked.errors
        time.sleep(0.02)
    cluster.stop_broker(leader)
    at_stop = len(acked.values)
    thread.join(40)
    assert not thread.is_alive()
    ((new_leader, new_epoch),) = leaders(cluster, topic).values()
    assert new_leader != leader and new_epoch == epoch + 1
    assert len(acked.values) > at_stop, "nothing was acknowledged after the leader stopped"
    stored = _read_all(_live_bootstrap(cluster), topic)
    assert set(acked.values) <= set(stored)
    assert len(set(acked.values)) == len(values), acked.errors  # the default retries ride it out
