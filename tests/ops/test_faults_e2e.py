"""Each fault kind against real clients, through the pytest plugin's ``broker.faults`` (the control
endpoint): the client reacts as it does against a Kafka broker that answers so."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from groupd.ops.control_client import FaultsClient
from groupd.ops.pytest_plugin import GroupdBroker

from tests.ops.conftest import free_port
from tests.support import kafka_python
from tests.support.groups import Member, describe


@pytest.fixture
def faults(groupd_broker_session: GroupdBroker) -> Iterator[FaultsClient]:
    client = groupd_broker_session.faults
    yield client
    client.clear()


def broker_events(broker: GroupdBroker, name: str, **match: Any) -> list[dict[str, Any]]:
    out = []
    for line in broker.log_path.read_text(errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == name and all(ev.get(k) == v for k, v in match.items()):
            out.append(ev)
    return out


def wait_for(what: Callable[[], Any], timeout: float = 20.0, message: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {message}")


def produce(bootstrap: str, topic: str, n: int = 3) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(10) == 0


def generations(broker: GroupdBroker, group: str) -> list[int]:
    return [int(ev["generation"]) for ev in broker_events(broker, "join_phase_completed", group=group)]


def requests_answered(metrics_port: int, api: str) -> int:
    """``groupd_requests_total`` of ``api``, all versions and error codes (the broker's own count)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("groupd_requests_total{") and f'api="{api}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


@pytest.fixture
def observed(groupd_broker_factory: Callable[..., GroupdBroker]) -> tuple[GroupdBroker, int]:
    """A broker of its own with metrics, to count the requests clients send."""
    port = free_port()
    return groupd_broker_factory(metrics_port=port), port


def test_not_coordinator_on_commit_makes_kafka_python_rediscover_and_commit(
    observed: tuple[GroupdBroker, int], unique: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker, metrics_port = observed
    bootstrap, topic, group = broker.bootstrap, f"t-{unique}", f"g-{unique}"
    produce(bootstrap, topic)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        kafka_python.subscribe(c, topic)
        wait_for(lambda: c.poll(timeout_ms=200) or c.assignment(), message="an assignment")
        finds = requests_answered(metrics_port, "FindCoordinator")
        broker.faults.add("OffsetCommit", error="NOT_COORDINATOR", count=3, group=group)
        tp = TopicPartition(topic, 0)
        c.commit({tp: OffsetAndMetadata(2, "", -1)})
        # kafka-python: NotCoordinatorError is retriable; coordinator_dead(), a FindCoordinator,
        # the commit again -- three times, then it goes through.
        assert requests_answered(metrics_port, "FindCoordinator") >= finds + 3
        assert broker.faults.list() == []
        assert c.committed(tp) == 2
    finally:
        c.close()
    assert len(broker_events(broker, "fault_injected", api="OffsetCommit", error="NOT_COORDINATOR")) == 3


def test_not_coordinator_on_commit_makes_confluent_rediscover(observed: tuple[GroupdBroker, int], unique: str) -> None:
    """librdkafka marks the coordinator dead and asks FindCoordinator again. (Its commit then often
    stalls: with the new coordinator the same broker, the "nodename change" of its logical
    GroupCoordinator connection fails the retried commit with a transport error, which marks the
    coordinator dead again, until the session times out -- seen with librdkafka 2.16 whenever the
    FindCoordinator answer comes within a millisecond; a 1 ms injected delay on FindCoordinator
    makes the commit go through. Left for investigation: see notes/faults.md.)"""
    from confluent_kafka import Consumer

    broker, metrics_port = observed
    bootstrap, topic, group = broker.bootstrap, f"t-{unique}", f"g-{unique}"
    produce(bootstrap, topic)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.subscribe([topic])
        msg = wait_for(lambda: (m := c.poll(0.2)) is not None and m.error() is None and m, message="a record")
        finds = requests_answered(metrics_port, "FindCoordinator")
        broker.faults.add("OffsetCommit", error="NOT_COORDINATOR", count=1, group=group)
        c.commit(message=msg, asynchronous=True)
        wait_for(lambda: broker.faults.list() == [], message="the commit answered with NOT_COORDINATOR")
        wait_for(lambda: requests_answered(metrics_port, "FindCoordinator") > finds, message="a FindCoordinator")
    finally:
        c.close()


@pytest.mark.parametrize("kind", ["kafka-python", "aiokafka", "confluent-kafka"])
def test_rebalance_in_progress_on_heartbeat_makes_the_member_rejoin(
    groupd_broker_session: GroupdBroker, faults: FaultsClient, members: Callable[..., Member], unique: str, kind: str
) -> None:
    bootstrap, topic, group = groupd_broker_session.bootstrap, f"t-{unique}", f"g-{unique}"
    produce(bootstrap, topic, 1)
    m = members(kind, bootstrap, group, topic)
    wait_for(lambda: m.assignment, message="an assignment")
    before = max(generations(groupd_broker_session, group))
    faults.add("Heartbeat", error="REBALANCE_IN_PROGRESS", count=1, group=group)
    # The client rejoins (JoinGroup); it is the group's leader, so Kafka's coordinator rebalances
    # (updateMemberAndRebalance): a new generation forms.
    wait_for(lambda: max(generations(groupd_broker_session, group)) > before, message="a new generation")
    wait_for(lambda: m.assignment, message="the assignment back")
    assert m.error is None


def test_delay_shows_in_the_clients_latency(
    groupd_broker_session: GroupdBroker, faults: FaultsClient, unique: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bootstrap, topic, group = groupd_broker_session.bootstrap, f"t-{unique}", f"g-{unique}"
    produce(bootstrap, topic, 1)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    try:
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(1, "", -1)})  # coordinator known, connection open

        def commit_seconds(offset: int) -> float:
            t0 = time.monotonic()
            c.commit({tp: OffsetAndMetadata(offset, "", -1)})
            return time.monotonic() - t0

        fast = commit_seconds(1)
        # a delay well above what a loaded machine adds to a commit (a 0.3 s bound on the undelayed one
        # against a 0.6 s delay left too little room)
        faults.add("OffsetCommit", delay_ms=2000, group=group)
        slow = commit_seconds(1)
        assert fast < 1.0 and 2.0 <= slow < 8, (fast, slow)
        assert c.committed(tp) == 1
    finally:
        c.close()


def test_close_makes_the_client_reconnect(
    groupd_broker_session: GroupdBroker, faults: FaultsClient, unique: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bootstrap, topic, group = groupd_broker_session.bootstrap, f"t-{unique}", f"g-{unique}"
    produce(bootstrap, topic, 1)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    try:
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(1, "", -1)})
        rule = faults.add("OffsetCommit", kind="close", group=group)
        assert rule["count"] == 1  # "the next request"
        # kafka-python: the connection error fails the request (retriable), it reconnects and retries.
        c.commit({tp: OffsetAndMetadata(1, "", -1)})
        assert faults.list() == []
        assert c.committed(tp) == 1
    finally:
        c.close()
    closes = broker_events(groupd_broker_session, "fault_injected", kind="close", api="OffsetCommit")
    assert closes and all(ev["rule"] == rule["id"] for ev in closes[-1:])


def test_expire_member_and_trigger_rebalance_make_new_generations(
    groupd_broker_session: GroupdBroker, faults: FaultsClient, members: Callable[..., Member], unique: str
) -> None:
    bootstrap, topic, group = groupd_broker_session.bootstrap, f"t-{unique}", f"g-{unique}"
    produce(bootstrap, topic, 1)
    m = members("confluent-kafka", bootstrap, group, topic)
    view = wait_for(lambda: (v := describe(bootstrap, group)).state == "STABLE" and v.members and v, message="stable")
    (member_id,) = [x["member_id"] for x in view.members]
    gen = max(generations(groupd_broker_session, group))

    faults.trigger_rebalance(group)
    wait_for(lambda: max(generations(groupd_broker_session, group)) == gen + 1, message="a rebalance")
    view = wait_for(lambda: (v := describe(bootstrap, group)).state == "STABLE" and v.members and v, message="stable")
    assert [x["member_id"] for x in view.members] == [member_id]  # the same member, rejoined

    faults.expire_member(group, member_id)
    # The member learns UNKNOWN_MEMBER_ID on its next heartbeat and joins again under a new id.
    view = wait_for(
        lambda: (
            (v := describe(bootstrap, group)).state == "STABLE" and v.members and member_id not in str(v.members) and v
        ),
        message="a new member id",
    )
    assert max(generations(groupd_broker_session, group)) >= gen + 2
    assert m.error is None
    assert broker_events(groupd_broker_session, "member_expired", group=group, reason="injected")


def test_not_coordinator_on_commit_makes_aiokafka_rediscover_and_commit(
    observed: tuple[GroupdBroker, int], unique: str
) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    broker, metrics_port = observed
    bootstrap, topic, group = broker.bootstrap, f"t-{unique}", f"g-{unique}"
    produce(bootstrap, topic)

    async def run() -> int | None:
        c = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await c.start()
        try:
            while not await c.getmany(timeout_ms=200):
                pass
            finds = requests_answered(metrics_port, "FindCoordinator")
            broker.faults.add("OffsetCommit", error="NOT_COORDINATOR", count=2, group=group)
            tp = TopicPartition(topic, 0)
            # aiokafka's commit_offsets: a retriable error marks the coordinator dead, looks it up again, retries.
            await c.commit({tp: 2})
            assert requests_answered(metrics_port, "FindCoordinator") >= finds + 2
            return await c.committed(tp)
        finally:
            await c.stop()

    assert asyncio.run(run()) == 2
    assert broker.faults.list() == []
