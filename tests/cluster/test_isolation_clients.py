"""Real clients against an isolated broker (``isolate_broker``: its connections are accepted and
nothing is read from them, as behind a network partition; it keeps its leaderships, as a
partitioned Kafka broker does until the controller fences it after ``broker.session.timeout.ms``).

Request timeouts are shortened (a few seconds instead of 30-60 s) so that the client gives up on
the isolated broker within a test: what is asserted is what a Kafka user expects then -- requests
time out, the connection is dropped and the client retries (after a Metadata refresh), nothing
acknowledged is lost, and work resumes once the partition heals or once the leadership is moved
away from the isolated broker.

kafka-python 3.0.12 and Kafka alike: an idempotent kafka-python producer (its default) whose
in-flight batch expires (``delivery_timeout_ms``) while the leader is unreachable resets its
producer id (``TransactionManager.reset_producer_id``) but stays in state READY, so
``Sender.run_once`` never sends the InitProducerId it waits for (``init_producer_id`` only acts from
UNINITIALIZED): every later send hangs. The Java client re-initialises the id in that case
(``TransactionManager.bumpIdempotentEpochAndResetIdIfNeeded``). Nothing here depends on the broker,
so these tests keep ``delivery_timeout_ms`` at its default (120 s), longer than any isolation.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

import pytest
from groupd.coordinator.routing import partition_for
from groupd.ops.pytest_plugin import GroupdBroker

from tests.cluster.conftest import create_topic, leaders, raw
from tests.cluster.test_failover_clients import (
    CLIENTS,
    Acked,
    Consuming,
    _live_bootstrap,
    _produce,
    _producing,
    _read_all,
)

RDKAFKA_LOG = logging.getLogger("rdkafka")  # librdkafka's log lines, into pytest's log capture
# The client's own per-request timeout, shortened from 30 s (kafka-python, librdkafka's
# socket.timeout.ms is 60 s, aiokafka 40 s) so that it gives up on the isolated broker in 2 s.
# aiokafka differs from the Java client: a non-idempotent producer (its default) fails a batch
# older than request_timeout_ms at its next retriable error (Sender._can_retry, MessageBatch.expired:
# the batch's time to live is request_timeout_ms; there is no delivery.timeout.ms), so its sends
# during a 4 s isolation fail with RequestTimedOutError; an idempotent one retries until delivered,
# which is what a Java producer with its defaults (idempotent, delivery.timeout.ms 120 s) does.
PRODUCER_TIMEOUTS: dict[str, dict[str, Any]] = {
    "kafka-python": {"request_timeout_ms": 2000},
    "aiokafka": {"request_timeout_ms": 2000, "enable_idempotence": True},
    "confluent-kafka": {"socket.timeout.ms": 2000, "logger": RDKAFKA_LOG},
}
# Kafka's smallest session (group.min.session.timeout.ms 6 s) and a 1 s heartbeat; kafka-python
# wants its request timeout above the session timeout.
CONSUMER_TIMEOUTS: dict[str, dict[str, Any]] = {
    "kafka-python": {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "request_timeout_ms": 7000},
    "aiokafka": {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "request_timeout_ms": 3000},
    "confluent-kafka": {
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "socket.timeout.ms": 3000,
        "logger": RDKAFKA_LOG,
    },
}


def _committed_at(cluster: GroupdBroker, node_id: int, group: str) -> dict[int, int]:
    """The group's committed offsets as broker ``node_id`` answers them (an admin client could pick
    the isolated broker for its FindCoordinator and time out there)."""
    client = raw(cluster, node_id)
    try:
        answer = client.request("OffsetFetch", 7, {"group_id": group, "topics": None, "require_stable": False})
    finally:
        client.close()
    assert answer["error_code"] == 0, answer
    return {p["partition_index"]: p["committed_offset"] for t in answer["topics"] for p in t["partitions"]}


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _timed_out(caplog: pytest.LogCaptureFixture, since: float = 0.0) -> list[float]:
    """When (``time.time()``) the client logged a request timing out, from ``since`` on (kafka-python,
    aiokafka and, through its ``logger`` setting, librdkafka log one when they give up on a request)."""
    return [
        r.created
        for r in caplog.records
        if r.created >= since and re.search(r"timed ?out", r.getMessage(), re.IGNORECASE)
    ]


def _producing_to(cluster: GroupdBroker, kind: str, topic: str, values: list[bytes]) -> tuple[threading.Thread, Acked]:
    """Produce ``values`` from a thread (acks=all, one every 10 ms); returns once 30 are acknowledged."""
    acked = Acked()
    thread = threading.Thread(
        target=_producing, args=(kind, cluster.bootstrap, topic, values, acked, PRODUCER_TIMEOUTS[kind]), daemon=True
    )
    thread.start()
    _wait(lambda: len(acked.values) >= 30, 15, f"30 acknowledged before the isolation ({acked.errors})")
    return thread, acked


def _unacknowledged_for(acked: Acked, seconds: float) -> None:
    time.sleep(0.5)  # answers already on their way when the isolation began
    at_isolation = len(acked.values)
    time.sleep(seconds)
    assert len(acked.values) == at_isolation, "acknowledged by an isolated leader"
    assert acked.errors == []


def _all_delivered(cluster: GroupdBroker, thread: threading.Thread, acked: Acked, values: list[bytes]) -> None:
    thread.join(25)
    assert not thread.is_alive()
    assert acked.errors == []
    assert sorted(acked.values) == sorted(values)


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_acks_all_producer_waits_out_its_leaders_isolation_and_loses_nothing(
    healthy_cluster: GroupdBroker, unique: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The leader's broker is isolated mid-stream: the client's requests time out and are retried
    (the records wait in the client, no send fails, nothing is acknowledged), and once the
    partition heals every record is acknowledged and stored, as with a Kafka leader behind a
    healed partition."""
    cluster = healthy_cluster
    caplog.set_level(logging.INFO)
    topic = f"iso-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, epoch),) = leaders(cluster, topic).values()
    values = [f"v{i}".encode() for i in range(300)]
    thread, acked = _producing_to(cluster, kind, topic, values)
    cluster.isolate_broker(leader)
    _unacknowledged_for(acked, 3)  # more than the request timeout
    # the client's own thread logs the timeout when its next scan finds the request expired (librdkafka
    # scans once a second): on a loaded machine that can come after these 3.5 s, so wait for it
    _wait(lambda: _timed_out(caplog), 20, "the client timed out a request to the isolated leader")
    cluster.isolate_broker(leader, False)
    _all_delivered(cluster, thread, acked, values)
    # A request the client gave up on may still be read and appended once the partition heals (at
    # least once, as with Kafka: librdkafka's producer is not idempotent by default).
    assert set(_read_all(cluster.bootstrap, topic)) == set(values)
    assert leaders(cluster, topic) == {0: (leader, epoch)}  # it never stopped leading


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_acks_all_producer_follows_the_leadership_off_its_isolated_leader(
    healthy_cluster: GroupdBroker, unique: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A controller failover: the partition's leader is isolated mid-stream and, while it stays
    isolated, a preferred leader election moves the partition to another broker, as Kafka's
    controller elects a new leader once the partitioned broker's session has expired
    (broker.session.timeout.ms, 9 s, shorter than a client's 30 s request.timeout.ms: the move
    comes before the client gives up). The client's request to the isolated broker times out, its
    Metadata refresh (answered by another broker) names the new leader, and every record is
    acknowledged there and stored once. The preferred replica is stopped and started again first,
    so that another broker leads when the isolation begins and the election has somewhere to move
    the partition.

    Moved later, after the client has given up once, a client (Java's as well as kafka-python's)
    first reconnects to the isolated broker it still believes leads, and learns of the move only
    when that connection's setup times out (socket.connection.setup.timeout.ms, 10 s; KafkaProducer
    3.0.12 does not let it be set)."""
    cluster = healthy_cluster
    caplog.set_level(logging.INFO)
    topic = f"isom-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((preferred, epoch),) = leaders(cluster, topic).values()
    cluster.stop_broker(preferred)
    cluster.start_broker(preferred)  # without rebalancing: another broker keeps leading
    ((isolated, _),) = leaders(cluster, topic).values()
    assert isolated != preferred
    values = [f"m{i}".encode() for i in range(300)]
    thread, acked = _producing_to(cluster, kind, topic, values)
    cluster.isolate_broker(isolated)
    isolated_at = time.time()
    assert cluster.rebalance_leaders()["leaders_moved"] >= 1
    assert leaders(cluster, topic, preferred) == {0: (preferred, epoch + 2)}
    # The client knows nothing of it until its request to the isolated broker times out: nothing is
    # acknowledged from the isolation until then. (A fixed window after the election raced with that
    # timeout when the election took long: the new leader's acknowledgements landed inside it.)
    _wait(lambda: _timed_out(caplog, isolated_at), 20, "the client timed out a request to the isolated leader")
    gave_up_at = min(_timed_out(caplog, isolated_at))
    with acked.lock:
        early = [round(t - isolated_at, 2) for t in acked.times if isolated_at + 0.5 < t < gave_up_at]
    assert not early, f"{len(early)} acknowledged from {early[0]} s into the isolation, before the client timed out"
    _all_delivered(cluster, thread, acked, values)
    assert [b["state"] for b in cluster.brokers() if b["node_id"] == isolated] == ["isolated"]
    # Healed: the requests that waited in its sockets are read now and refused (it leads no more),
    # so nothing is stored twice.
    cluster.isolate_broker(isolated, False)
    assert sorted(_read_all(cluster.bootstrap, topic)) == sorted(values)


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_group_whose_coordinator_is_isolated_follows_it_when_it_moves(
    healthy_cluster: GroupdBroker, unique: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The coordinator's broker is isolated and the coordinator moved to another broker (what
    Kafka's controller does once the isolated broker's session expires): the member's heartbeat
    and commit requests to the isolated broker time out, it marks the coordinator dead, finds
    the new one and carries on consuming; the offsets committed before are intact and everything
    is consumed. The topic's leader is a third broker, so only the coordinator is cut off."""
    cluster = healthy_cluster
    caplog.set_level(logging.INFO)
    name = f"isoc-{unique}"
    create_topic(cluster, name, partitions=1, replication=3)
    ((leader, _),) = leaders(cluster, name).values()
    isolated, target = (n for n in cluster.nodes if n != leader)
    cluster.move_coordinator(name, isolated)
    first = [f"a{i}".encode() for i in range(20)]
    second = [f"b{i}".encode() for i in range(20)]
    _produce(_live_bootstrap(cluster), name, first)
    member = Consuming(kind, cluster.bootstrap, name, name, CONSUMER_TIMEOUTS[kind])
    member.thread.start()
    try:
        member.wait(lambda: member.committed >= 20, 20, "first half consumed and committed")
        assert _committed_at(cluster, isolated, name) == {0: 20}
        cluster.isolate_broker(isolated)
        assert cluster.move_coordinator(name, target)["coordinator"] == target
        # The new coordinator loaded them from the shared log.
        assert _committed_at(cluster, target, name) == {0: 20}
        _produce(_live_bootstrap(cluster), name, second)
        # kafka-python asks FindCoordinator (and Metadata) of its least loaded node, which can be the isolated
        # broker: each such request costs another timeout (~10 s) after the commit's own 7 s, before the
        # member rejoins at the new coordinator (a run under load needed more than 25 s)
        member.wait(lambda: member.committed >= 40, 60, "second half consumed and committed")
        # It learnt of the move by timing out: the isolated broker cannot answer NOT_COORDINATOR.
        assert _timed_out(caplog)
    finally:
        member.stop.set()
        member.thread.join(15)
    assert member.error is None
    assert set(member.seen) == set(first + second)
    assert _committed_at(cluster, target, name) == {0: 40}
    assert leaders(cluster, "__consumer_offsets")[partition_for(name)][0] == target


def test_a_producer_whose_sends_expired_during_an_isolation_delivers_as_soon_as_it_ends(
    healthy_cluster: GroupdBroker, unique: str
) -> None:
    """An isolation outlasting the delivery timeout (the cluster engineer's case): the send fails
    with KafkaTimeoutError, and once the isolation ends the same producer's next send is
    acknowledged at once: groupd answers the connection the client opened meanwhile. The producer
    is not idempotent: an idempotent kafka-python 3.0.12 one would hang here for good (see the
    module docstring), as it would against Kafka. A timed-out send's outcome is unknown, as with
    Kafka: the request may have reached the broker and is then appended when the isolation ends."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    cluster = healthy_cluster
    topic = f"isoe-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, _),) = leaders(cluster, topic).values()
    p = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, enable_idempotence=False, request_timeout_ms=1000, delivery_timeout_ms=2500
    )
    try:
        p.send(topic, b"before").get(10)
        cluster.isolate_broker(leader)
        with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
            p.send(topic, b"during").get(10)
        cluster.isolate_broker(leader, False)
        started = time.monotonic()
        assert p.send(topic, b"after").get(10).offset >= 1
        assert time.monotonic() - started < 2
    finally:
        p.close(2)
    assert {b"before", b"after"} <= set(_read_all(cluster.bootstrap, topic))
