"""Leader epochs in the data (Kafka's ``LeaderEpochFileCache``): after a leader change the new
leader's batches carry its epoch, the partition's ``leader-epoch-checkpoint`` records where each
epoch started, OffsetForLeaderEpoch and ListOffsets answer from it, and all of it survives a
SIGKILL. Real clients lean on this (KIP-320): committed offsets carry the leader epoch of the last
record consumed, and a consumer validates its position with OffsetForLeaderEpoch after a leader
change; a wrong answer is a false "log truncation detected" or a missed real one."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from groupd.coordinator.routing import partition_for
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.storage import iter_batches
from kafka import KafkaProducer

from tests.cluster.conftest import create_topic, leaders, raw
from tests.cluster.test_failover_clients import Consuming, _live_bootstrap

CHECKPOINT = "leader-epoch-checkpoint"


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for v in values:
            producer.send(topic, v, partition=0).get(timeout=20)  # one batch each
    finally:
        producer.close(5)


def _batch_epochs(cluster: GroupdBroker, topic: str, partition: int = 0) -> list[tuple[int, int]]:
    """(base offset, partition leader epoch) of every batch in the partition's segment files."""
    out = []
    for seg in sorted((cluster.data_dir / f"{topic}-{partition}").glob("*.log")):
        data = seg.read_bytes()
        out += [(v.base_offset, v.partition_leader_epoch) for v in iter_batches(data, 0, len(data))]
    return out


def _checkpoint(cluster: GroupdBroker, topic: str, want: str, timeout: float = 5.0, partition: int = 0) -> None:
    """The file is written by the election (off the event loop) or the next append: wait for it."""
    path: Path = cluster.data_dir / f"{topic}-{partition}" / CHECKPOINT
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text() == want):
        assert time.monotonic() < deadline, path.read_text() if path.exists() else "no checkpoint"
        time.sleep(0.05)


def _end_offset(cluster: GroupdBroker, node: int, topic: str, epoch: int, version: int = 4) -> tuple[int, int, int]:
    """(error, leader epoch, end offset) of OffsetForLeaderEpoch for ``epoch`` of partition 0."""
    client = raw(cluster, node)
    try:
        body: dict[str, Any] = {
            "replica_id": -1,
            "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}]}
            ],
        }
        answer = client.request("OffsetForLeaderEpoch", version, body)
    finally:
        client.close()
    (p,) = answer["topics"][0]["partitions"]
    return p["error_code"], p.get("leader_epoch", -1), p["end_offset"]


def _list_offset(cluster: GroupdBroker, node: int, topic: str, timestamp: int) -> tuple[int, int, int]:
    """(error, offset, leader epoch) of ListOffsets v7 for partition 0."""
    client = raw(cluster, node)
    try:
        answer = client.request(
            "ListOffsets",
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                    }
                ],
            },
        )
    finally:
        client.close()
    (p,) = answer["topics"][0]["partitions"]
    return p["error_code"], p["offset"], p["leader_epoch"]


def test_a_new_partitions_leader_records_its_epoch_before_any_append(cluster: GroupdBroker, unique: str) -> None:
    """Partition.makeLeader on creation (and on CreatePartitions) assigns epoch 0 at offset 0: the
    checkpoint is written then, off the event loop, not by the first append on it (issue 29 item 4:
    one blocking fsync per new partition inside a Produce)."""
    topic = f"new-{unique}"
    create_topic(cluster, topic, partitions=3, replication=3)
    client = raw(cluster, min(cluster.nodes))
    try:
        answer = client.request(
            "CreatePartitions",
            1,
            {"topics": [{"name": topic, "count": 5, "assignments": None}], "timeout_ms": 10000, "validate_only": False},
        )
    finally:
        client.close()
    assert [r["error_code"] for r in answer["results"]] == [0]
    for p in range(5):
        _checkpoint(cluster, topic, "0\n1\n0 0\n", partition=p)
    assert all(not _batch_epochs(cluster, topic, p) for p in range(5))  # nothing was appended


def test_after_a_leader_change_batches_carry_the_new_epoch_and_the_cache_answers_for_it(
    healthy_cluster: GroupdBroker, unique: str
) -> None:
    """Partition.makeLeader assigns (epoch, log end); UnifiedLog.appendAsLeader stamps the epoch;
    KafkaApis.handleOffsetForLeaderEpochRequest -> LeaderEpochFileCache.endOffsetFor;
    UnifiedLog.fetchOffsetByTimestamp's epochs (latest, earliest, by timestamp)."""
    cluster = healthy_cluster
    topic = f"ep-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    _produce(cluster.bootstrap, topic, [b"a0", b"a1", b"a2"])
    first, epoch = leaders(cluster, topic)[0]
    assert epoch == 0
    before_move = int(time.time() * 1000)
    cluster.stop_broker(first)  # leader epoch 1 at offset 3
    second, epoch = leaders(cluster, topic)[0]
    assert second != first and epoch == 1
    _checkpoint(cluster, topic, "0\n2\n0 0\n1 3\n")  # written at the election, before any append
    assert _end_offset(cluster, second, topic, 0) == (0, 0, 3)
    _produce(_live_bootstrap(cluster), topic, [b"b0", b"b1"])
    assert _batch_epochs(cluster, topic) == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]
    # epoch 0 ended where epoch 1 began; epoch 1 is the latest: it ends at the log end
    assert _end_offset(cluster, second, topic, 0) == (0, 0, 3)
    assert _end_offset(cluster, second, topic, 1) == (0, 1, 5)
    assert _end_offset(cluster, second, topic, 2) == (0, -1, -1)  # unknown epoch: UNDEFINED
    for version in range(4):  # every version: v0-1 answer the end offset only
        assert _end_offset(cluster, second, topic, 0, version=version)[::2] == (0, 3), version
    assert _list_offset(cluster, second, topic, -1) == (0, 5, 1)  # LATEST: the current epoch
    assert _list_offset(cluster, second, topic, -2) == (0, 0, 0)  # EARLIEST: the first epoch
    assert _list_offset(cluster, second, topic, before_move + 1)[1:] in {(3, 1), (4, 1)}  # by timestamp
    # Back to the preferred leader: epoch 2 at offset 5.
    cluster.start_broker(first, rebalance=True)
    assert leaders(cluster, topic)[0] == (first, 2)
    _checkpoint(cluster, topic, "0\n3\n0 0\n1 3\n2 5\n")
    _produce(cluster.bootstrap, topic, [b"c0"])
    assert _batch_epochs(cluster, topic)[-1] == (5, 2)
    assert _end_offset(cluster, first, topic, 1) == (0, 1, 5)
    assert _list_offset(cluster, first, topic, -1) == (0, 6, 2)


def test_offset_for_leader_epoch_checks_the_current_epoch_against_the_leaders(
    healthy_cluster: GroupdBroker, unique: str
) -> None:
    """Partition.localLogWithEpochOrThrow, now that the epoch is not 0."""
    cluster = healthy_cluster
    topic = f"ec-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    first, _ = leaders(cluster, topic)[0]
    cluster.stop_broker(first)
    second, epoch = leaders(cluster, topic)[0]
    client = raw(cluster, second)
    try:
        codes = []
        for current in (epoch - 1, epoch, epoch + 1):
            answer = client.request(
                "OffsetForLeaderEpoch",
                4,
                {
                    "replica_id": -1,
                    "topics": [
                        {
                            "topic": topic,
                            "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": 0}],
                        }
                    ],
                },
            )
            codes.append(answer["topics"][0]["partitions"][0]["error_code"])
    finally:
        client.close()
    assert codes == [74, 0, 75]  # FENCED_LEADER_EPOCH, NONE, UNKNOWN_LEADER_EPOCH


def test_the_epochs_survive_a_sigkill_after_a_leader_move(groupd_cluster_factory: Any, unique: str) -> None:
    """On restart the cache agrees with cluster-leaders.json and the batches (LogLoader truncates
    the cache to the log, the leader assigns its epoch at the log end again)."""
    cluster: GroupdBroker = groupd_cluster_factory(num_partitions=1)
    topic = f"ek-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    _produce(cluster.bootstrap, topic, [b"a0", b"a1"])
    first, _ = leaders(cluster, topic)[0]
    cluster.stop_broker(first)
    _produce(_live_bootstrap(cluster), topic, [b"b0"])
    cluster.start_broker(first, rebalance=True)  # epoch 2 at offset 3, nothing appended in it
    _checkpoint(cluster, topic, "0\n3\n0 0\n1 2\n2 3\n")
    assert cluster.proc is not None
    cluster.proc.kill()
    # stop() reaps it and waits for its output's reader, which would otherwise wake start() early
    cluster.stop()
    cluster.start()
    leader, epoch = leaders(cluster, topic)[0]
    assert (leader, epoch) == (first, 2)  # cluster-leaders.json
    assert _end_offset(cluster, leader, topic, 0) == (0, 0, 2)
    assert _end_offset(cluster, leader, topic, 1) == (0, 1, 3)
    assert _end_offset(cluster, leader, topic, 2) == (0, 2, 3)
    assert _list_offset(cluster, leader, topic, -1) == (0, 3, 2)
    _produce(cluster.bootstrap, topic, [b"c0"])
    assert _batch_epochs(cluster, topic) == [(0, 0), (1, 0), (2, 1), (3, 2)]
    _checkpoint(cluster, topic, "0\n3\n0 0\n1 2\n2 3\n")


def _committed(cluster: GroupdBroker, group: str, topic: str) -> tuple[int, int]:
    """(committed offset, committed leader epoch) of partition 0, from OffsetFetch v7 to the coordinator."""
    coordinator = leaders(cluster, "__consumer_offsets")[partition_for(group)][0]
    client = raw(cluster, coordinator)
    try:
        answer = client.request(
            "OffsetFetch",
            7,
            {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}], "require_stable": False},
        )
    finally:
        client.close()
    (p,) = answer["topics"][0]["partitions"]
    assert p["error_code"] == 0, answer
    return p["committed_offset"], p["committed_leader_epoch"]


class _Producing:
    """An idempotent producer sending one record at a time to partition 0 until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.sent: list[bytes] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="epochs-producing")

    def _run(self) -> None:
        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True)
            try:
                while not self.stop.is_set():
                    value = f"v{len(self.sent)}".encode()
                    producer.send(self.topic, value, partition=0).get(timeout=30)
                    self.sent.append(value)
                    time.sleep(0.01)
            finally:
                producer.close(5)
        except BaseException as e:
            self.error = e


# kafka-python 3.0.12 validates its position with OffsetForLeaderEpoch after a leader change
# (Fetcher._send_offset_for_leader_epoch_request, KIP-320) and commits the leader epoch of the last
# record consumed (ConsumerCoordinator: committed_leader_epoch=offset.leader_epoch); librdkafka 2.16
# does both too. aiokafka 0.14 does neither (OffsetCommit <= v3 has no leader epoch, and it never
# sends OffsetForLeaderEpoch), so it has nothing to show here.
@pytest.mark.parametrize("kind", ["confluent-kafka", "kafka-python"])
def test_a_consumer_reads_through_two_leader_moves_once_and_commits_the_new_epoch(
    healthy_cluster: GroupdBroker, unique: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = healthy_cluster
    caplog.set_level(logging.INFO)
    topic = group = f"ecl-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    config = {"logger": logging.getLogger("rdkafka")} if kind == "confluent-kafka" else {}
    member = Consuming(kind, cluster.bootstrap, group, topic, config)
    producing = _Producing(cluster.bootstrap, topic)
    member.thread.start()
    producing.thread.start()
    try:
        member.wait(lambda: len(member.seen) >= 20, 20, "records before the moves")
        first, _ = leaders(cluster, topic)[0]
        cluster.stop_broker(first)  # epoch 1
        n = len(producing.sent)
        member.wait(lambda: len(member.seen) >= n + 20, 20, "records after the first move")
        cluster.start_broker(first, rebalance=True)  # epoch 2
        n = len(producing.sent)
        member.wait(lambda: len(member.seen) >= n + 20, 20, "records after the second move")
        producing.stop.set()
        producing.thread.join(20)
        assert producing.error is None
        member.wait(
            lambda: len(member.seen) >= len(producing.sent) and member.committed == len(member.seen),
            20,
            "every record consumed and committed",
        )
    finally:
        producing.stop.set()
        member.stop.set()
        member.thread.join(15)
    assert member.error is None
    assert leaders(cluster, topic)[0] == (first, 2)
    assert member.seen == producing.sent  # each once, in order: no false truncation sent it back
    assert _committed(cluster, group, topic) == (len(producing.sent), 2)
    assert not [r.getMessage() for r in caplog.records if "truncat" in r.getMessage().lower()]


def test_coordinator_writes_carry_the_offsets_partitions_new_epoch(healthy_cluster: GroupdBroker, unique: str) -> None:
    """The group coordinator's records (``__consumer_offsets``) are appended by the partition's leader
    too, so after its leader moves they carry the new epoch (the group shell's appends go through
    the same stamping partition log)."""
    cluster = healthy_cluster
    group = topic = f"eg-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    partition = partition_for(group)
    home, epoch = leaders(cluster, "__consumer_offsets")[partition]
    to = home % 3 + 1
    assert cluster.move_coordinator(group, to)["leader_epoch"] == epoch + 1
    client = raw(cluster, to)
    try:
        for _ in range(50):  # the new coordinator loads the partition first
            answer = client.request(
                "OffsetCommit",
                2,
                {
                    "group_id": group,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "retention_time_ms": -1,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}],
                        }
                    ],
                },
            )
            code = answer["topics"][0]["partitions"][0]["error_code"]
            if code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                break
            time.sleep(0.1)
    finally:
        client.close()
    assert code == 0
    assert _batch_epochs(cluster, "__consumer_offsets", partition)[-1][1] == epoch + 1
    assert _committed(cluster, group, topic) == (7, -1)  # OffsetCommit v2 has no leader epoch to keep
