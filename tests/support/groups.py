"""Real consumer-group members for end-to-end tests, one per thread, for each client library.

Each member runs its library's own poll loop (group coordination happens inside poll) until
stopped, and records the assignment it currently holds. The group as the coordinator sees it is
read back with confluent-kafka's ``describe_consumer_groups`` (DescribeGroups + the consumer
protocol decoded by librdkafka), which is independent of groupd's own decoder.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.support import kafka_python


@dataclass
class GroupView:
    state: str
    protocol: str
    members: list[dict[str, Any]] = field(default_factory=list)

    def partitions(self) -> Counter[tuple[str, int]]:
        c: Counter[tuple[str, int]] = Counter()
        for m in self.members:
            for tp in m["assignment"]:
                c[tp] += 1
        return c


_ADMINS: dict[str, Any] = {}


def admin_for(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    if bootstrap not in _ADMINS:
        # Short reconnect backoff: tests restart daemons on the same port and expect prompt answers.
        _ADMINS[bootstrap] = AdminClient(
            {"bootstrap.servers": bootstrap, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500}
        )
    return _ADMINS[bootstrap]


def forget_admin(bootstrap: str) -> None:
    """Drop the cached admin client: after several broker kills on one port, a long-lived librdkafka
    AdminClient can stop answering (a fresh one gets its answer in milliseconds)."""
    _ADMINS.pop(bootstrap, None)


def describe(bootstrap: str, group: str) -> GroupView:
    admin = admin_for(bootstrap)
    d = admin.describe_consumer_groups([group])[group].result(timeout=15)
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "instance_id": m.group_instance_id,
            "host": m.host,
            "assignment": sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions),
        }
        for m in d.members
    ]
    state = str(d.state).split(".")[-1]
    return GroupView(state=state, protocol=d.partition_assignor, members=members)


def wait_balanced(
    bootstrap: str, group: str, topic: str, n_members: int, n_partitions: int, timeout: float = 60.0
) -> GroupView:
    """Wait until the group is Stable with ``n_members`` and every partition assigned exactly once."""
    deadline = time.monotonic() + timeout
    view = None
    while time.monotonic() < deadline:
        view = describe(bootstrap, group)
        want = Counter({(topic, p): 1 for p in range(n_partitions)})
        if view.state == "STABLE" and len(view.members) == n_members and view.partitions() == want:
            return view
        time.sleep(0.2)
    raise AssertionError(f"group {group} not balanced in {timeout}s: {view}")


class Member:
    """A consumer in a background thread. ``kind`` is kafka-python, aiokafka or confluent-kafka."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, **opts: Any) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.opts = opts
        self.assignment: set[tuple[str, int]] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"{kind}-member")

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            getattr(self, "_run_" + self.kind.replace("-", "_"))()
        except BaseException as e:  # surfaced by the test through .error
            self.error = e

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[
            self.opts.get("assignor", "range")
        ]
        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.opts.get("client_id", "kafka-python"),
            partition_assignment_strategy=[strategy],
            session_timeout_ms=self.opts.get("session_timeout_ms", 10000),
            heartbeat_interval_ms=1000,
            enable_auto_commit=False,
        )
        kafka_python.subscribe(c, self.topic)
        try:
            while not self._stop.is_set():
                c.poll(timeout_ms=100)
                self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
        finally:
            c.close()

    def _run_aiokafka(self) -> None:
        asyncio.run(self._aiokafka())

    async def _aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[
            self.opts.get("assignor", "range")
        ]
        c = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.opts.get("client_id", "aiokafka"),
            partition_assignment_strategy=(strategy,),
            session_timeout_ms=self.opts.get("session_timeout_ms", 10000),
            heartbeat_interval_ms=1000,
            enable_auto_commit=False,
        )
        await c.start()
        try:
            while not self._stop.is_set():
                await c.getmany(timeout_ms=100)
                self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
        finally:
            await c.stop()

    def _run_confluent_kafka(self) -> None:
        from confluent_kafka import Consumer

        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.opts.get("client_id", "confluent-kafka"),
            "partition.assignment.strategy": self.opts.get("assignor", "range"),
            "session.timeout.ms": self.opts.get("session_timeout_ms", 10000),
            "heartbeat.interval.ms": 1000,
            "enable.auto.commit": False,
        }
        if self.opts.get("instance_id"):
            conf["group.instance.id"] = self.opts["instance_id"]
        if self.opts.get("group_protocol") == "consumer":
            # KIP-848: the broker decides the session, the interval and the assignor (librdkafka
            # refuses the classic settings under this protocol)
            for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
                del conf[key]
            conf["group.protocol"] = "consumer"
        c = Consumer(conf)
        c.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                c.poll(0.1)
                self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
        finally:
            c.close()
