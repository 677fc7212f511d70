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
    "confluent-kafka": {"socket.timeout.ms": 2000},
}
# Kafka's smallest session (group.min.session.timeout.ms 6 s) and a 1 s heartbeat; kafka-python
# wants its request timeout above the session timeout.
CONSUMER_TIMEOUTS: dict[str, dict[str, Any]] = {
    "kafka-python": {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "request_timeout_ms": 7000},
    "aiokafka": {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "request_timeout_ms": 3000},
    "confluent-kafka": {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "socket.timeout.ms": 3000},
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


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_acks_all_producer_waits_out_its_leaders_isolation_and_loses_nothing(
    healthy_cluster: GroupdBroker, unique: str, kind: str
) -> None:
    """The leader's broker is isolated mid-stream for 4 s, twice the client's request timeout:
    nothing is acknowledged meanwhile and no send fails (the timed-out requests are retried, the
    records wait in the client), and once the partition heals every record is acknowledged and
    stored, as with a Kafka leader behind a healed partition."""
    cluster = healthy_cluster
    topic = f"iso-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, epoch),) = leaders(cluster, topic).values()
    values = [f"v{i}".encode() for i in range(300)]
    acked = Acked()
    thread = threading.Thread(
        target=_producing,
        args=(kind, cluster.bootstrap, topic, values, acked, PRODUCER_TIMEOUTS[kind]),
        daemon=True,
    )
    thread.start()
    _wait(lambda: len(acked.values) >= 30, 15, f"30 acknowledged before the isolation ({acked.errors})")
    cluster.isolate_broker(leader)
    time.sleep(0.5)  # answers already on their way when the isolation began
    at_isolation = len(acked.values)
    time.sleep(4)
    assert len(acked.values) == at_isolation, "acknowledged by an isolated leader"
    assert acked.errors == []
    cluster.isolate_broker(leader, False)
    thread.join(25)
    assert not thread.is_alive()
    assert acked.errors == []
    assert sorted(acked.values) == sorted(values)
    assert set(_read_all(cluster.bootstrap, topic)) == set(values)
    assert leaders(cluster, topic) == {0: (leader, epoch)}  # it never stopped leading


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_group_whose_coordinator_is_isolated_follows_it_when_it_moves(
    healthy_cluster: GroupdBroker, unique: str, kind: str
) -> None:
    """The coordinator's broker is isolated and the coordinator moved to another broker (what
    Kafka's controller does once the isolated broker's session expires): the member's heartbeat
    and commit requests to the isolated broker time out, it marks the coordinator dead, finds
    the new one and carries on consuming; the offsets committed before are intact and everything
    is consumed. The topic's leader is a third broker, so only the coordinator is cut off."""
    cluster = healthy_cluster
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
        member.wait(lambda: member.committed >= 40, 25, "second half consumed and committed")
    finally:
        member.stop.set()
        member.thread.join(15)
    assert member.error is None
    assert set(member.seen) == set(first + second)
    assert _committed_at(cluster, target, name) == {0: 40}
    assert leaders(cluster, "__consumer_offsets")[partition_for(name)][0] == target
