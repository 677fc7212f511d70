"""``Leadership`` without sockets: round-robin placement, elections when brokers stop, preferred
leader election, and the request check (Kafka's ``Partition.localLogWithEpochOrThrow`` order)."""

from __future__ import annotations

from pathlib import Path

from groupd.broker.cluster import Leadership
from groupd.broker.topics import OFFSETS_TOPIC, TopicRegistry
from groupd.protocol.errors import ErrorCode


def _registry(tmp_path: Path) -> TopicRegistry:
    topics = TopicRegistry(tmp_path)
    topics.load()
    return topics


def test_offsets_partitions_go_round_robin_and_topics_start_by_name(tmp_path: Path) -> None:
    topics = _registry(tmp_path)
    leaders = Leadership([1, 2, 3], topics)
    offsets = topics.get(OFFSETS_TOPIC)
    assert offsets is not None
    assert [leaders.get(offsets, p)[0] for p in range(6)] == [1, 2, 3, 1, 2, 3]
    assert leaders.replicas(offsets, 4) == [2, 3, 1]  # offsets.topic.replication.factor 3
    t = topics.create("orders", 4, replication_factor=2)
    replicas = [leaders.replicas(t, p) for p in range(4)]
    # Consecutive partitions, consecutive brokers (wrapping), the second replica the next broker.
    assert len({r[0] for r in replicas[:3]}) == 3 and replicas[3][0] == replicas[0][0]
    assert all(len(r) == 2 and r[1] == r[0] % 3 + 1 for r in replicas)


def test_a_stopped_brokers_partitions_move_to_a_live_replica_with_the_next_epoch(tmp_path: Path) -> None:
    topics = _registry(tmp_path)
    leaders = Leadership([1, 2, 3], topics)
    t = topics.create("one", 3, replication_factor=1)
    before = {p: leaders.get(t, p)[0] for p in range(3)}
    victim = before[0]
    moves = [m for m in leaders.broker_stopped(victim) if m.topic == "one"]
    assert [(m.partition, m.old, m.epoch) for m in moves] == [(p, victim, 1) for p in range(3) if before[p] == victim]
    leader, epoch, replicas, isr, offline = leaders.describe(t, 0)
    # Its only replica is stopped: another broker leads it (the logs are shared) and is listed.
    assert leader != victim and epoch == 1
    assert replicas == [victim, leader] and isr == [leader] and offline == [victim]
    leaders.broker_started(victim)
    assert leaders.get(t, 0) == [leader, 1]  # a start moves nothing by itself
    assert {(m.topic, m.partition) for m in leaders.rebalance() if m.topic == "one"} == {
        ("one", p) for p in range(3) if before[p] == victim
    }
    assert leaders.get(t, 0) == [victim, 2]


def test_the_check_looks_at_the_epoch_before_the_leader(tmp_path: Path) -> None:
    topics = _registry(tmp_path)
    leaders = Leadership([1, 2, 3], topics)
    t = topics.create("t", 1, replication_factor=3)
    leader, _ = leaders.get(t, 0)
    other = leader % 3 + 1
    leaders.move(t, 0, other)  # epoch 1, led by `other`
    assert leaders.check(other, "t", 0, -1) == (0, other, 1)
    assert leaders.check(other, "t", 0, 1) == (0, other, 1)
    assert leaders.check(leader, "t", 0, -1) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, other, 1)
    assert leaders.check(leader, "t", 0, 0)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert leaders.check(leader, "t", 0, 2)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    # Unknown topics and partitions are the data plane's to answer.
    assert leaders.check(leader, "nope", 0, -1) == (0, -1, -1)
    assert leaders.check(leader, "t", 5, -1) == (0, -1, -1)
    leaders.forget("t")
    assert leaders.get(t, 0)[1] == 0


def test_leaders_and_epochs_survive_a_restart_and_a_missing_broker_is_replaced_at_the_next_epoch(
    tmp_path: Path,
) -> None:
    """Kafka keeps leader epochs in its metadata log; a client that cached epoch 2 must not meet
    epoch 0 after the daemon restarts (UNKNOWN_LEADER_EPOCH on every fetch, and librdkafka ignores
    metadata whose epoch went back)."""
    topics = _registry(tmp_path)
    path = tmp_path / "cluster-leaders.json"
    leaders = Leadership([1, 2, 3], topics, path=path)
    t = topics.create("t", 2, replication_factor=3)
    home = leaders.get(t, 0)[0]
    leaders.move(t, 0, home % 3 + 1)
    leaders.move(t, 0, home)  # epoch 2, back at its preferred leader
    offsets = topics.get(OFFSETS_TOPIC)
    assert offsets is not None
    assert leaders.get(t, 0) == [home, 2]
    assert leaders.get(offsets, 2)[0] == 3
    leaders.broker_stopped(3)
    before = {(x.name, p): list(leaders.get(x, p)) for x in (t, offsets) for p in range(x.partitions)}
    assert before[(OFFSETS_TOPIC, 2)][1] == 1  # broker 3 led it: moved once

    again = Leadership([1, 2, 3], topics, path=path)
    assert {(x.name, p): again.get(x, p) for x in (t, offsets) for p in range(x.partitions)} == before

    # restarted with --brokers 2 after broker 3 had come back and led again: its partitions are
    # elected anew, one epoch on
    leaders.broker_started(3)
    leaders.rebalance()
    assert leaders.get(offsets, 2) == [3, 2]
    fewer = Leadership([1, 2], topics, path=path)
    leader, epoch = fewer.get(offsets, 2)
    assert leader in (1, 2) and epoch == 3
    assert fewer.get(offsets, 0) == leaders.get(offsets, 0)


def test_forgetting_a_topic_forgets_its_epochs_for_good(tmp_path: Path) -> None:
    topics = _registry(tmp_path)
    path = tmp_path / "cluster-leaders.json"
    leaders = Leadership([1, 2, 3], topics, path=path)
    t = topics.create("gone", 1, replication_factor=1)
    leaders.move(t, 0, leaders.get(t, 0)[0] % 3 + 1)
    leaders.forget("gone")
    assert Leadership([1, 2, 3], topics, path=path).get(t, 0)[1] == 0
