"""Issue 5 acceptance: kill -9 the daemon at random moments; every acknowledged commit and the last
completed generation come back. Restarts are clean-state equal. Torn tails are truncated."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import GroupdProcess
from tests.support.groups import admin_for, describe, forget_admin, wait_balanced

pytestmark = pytest.mark.e2e

PARTITIONS = 6


class Committer:
    """A real group member (confluent-kafka) that commits ever-growing offsets for its assignment
    and remembers, with the time of the answer, every commit the coordinator acknowledged."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        from confluent_kafka import Consumer

        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "session.timeout.ms": 30000,
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
            }
        )
        self.c.subscribe([topic])
        self.topic = topic
        self.acked: list[tuple[float, int, int]] = []  # (time acknowledged, partition, offset)
        self.next_offset = 1
        self.committing = threading.Event()
        self._committing_now = threading.Lock()  # held from the check of ``committing`` to the answer
        self._stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        while not self._stop.is_set():
            self.c.poll(0.02)
            with self._committing_now:
                if not self.committing.is_set():
                    continue
                parts = [tp.partition for tp in self.c.assignment()]
                if not parts:
                    continue
                off = self.next_offset
                self.next_offset += 1
                try:
                    self.c.commit(offsets=[TopicPartition(self.topic, p, off) for p in parts], asynchronous=False)
                except KafkaException:
                    continue
                now = time.monotonic()
                self.acked.extend((now, p, off) for p in parts)

    def pause(self) -> None:
        """Stop committing, and return once a commit already on its way has been answered (it can take
        longer than any fixed sleep on a loaded machine)."""
        self.committing.clear()
        with self._committing_now:
            pass

    def close(self) -> None:
        self._stop.set()
        self.t.join(30)
        self.c.close()


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = admin_for(bootstrap)
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions}


def _wait_loaded(d: GroupdProcess, since: int, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        loaded = d.events("offsets_loaded")
        if len(loaded) > since:
            return loaded[-1]
        time.sleep(0.05)
    raise AssertionError("offsets were not loaded")


def _members(view: Any) -> list[tuple[str, list[tuple[str, int]]]]:
    return sorted((m["member_id"], m["assignment"]) for m in view.members)


def test_sigkill_during_commit_storm_loses_no_acknowledged_commit(tmp_path: Path) -> None:
    from confluent_kafka.admin import NewTopic

    rng = random.Random(5)
    d = GroupdProcess(tmp_path / "data", "--fsync", "interval:1000").start()
    topic, group = "storm", "storm-group"
    admin_for(d.bootstrap).create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    committers = [Committer(d.bootstrap, group, topic, f"c{i}") for i in range(3)]
    try:
        before = wait_balanced(d.bootstrap, group, topic, 3, PARTITIONS)
        for c in committers:
            c.committing.set()
        for trial in range(20):
            time.sleep(rng.uniform(0.2, 1.0))
            loads = len(d.events("offsets_loaded"))
            killed_at = time.monotonic()
            d.kill()
            acked: dict[int, int] = {}
            for c in committers:
                for t, p, off in list(c.acked):
                    if t < killed_at:
                        acked[p] = max(acked.get(p, 0), off)
            d.start(port=d.port)
            _wait_loaded(d, loads)
            forget_admin(d.bootstrap)
            after = describe(d.bootstrap, group)
            # The loaded group is the last completed generation: same members, same assignments.
            assert after.state == "STABLE", (trial, after)
            assert _members(after) == _members(before), trial
            committed = _committed(d.bootstrap, group)
            for p, off in acked.items():
                assert committed.get((topic, p), -1) >= off, (trial, p, off, committed)
        assert sum(len(c.acked) for c in committers) > 100
    finally:
        # A synchronous commit to a dead coordinator blocks for ever: close the members while a daemon
        # is up, then stop it.
        for c in committers:
            c.committing.clear()
        if d.proc is None or d.proc.poll() is not None:
            d.start(port=d.port)
        for c in committers:
            c.close()
        d.kill()


def test_clean_restart_keeps_groups_and_offsets_identical(tmp_path: Path) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import NewTopic

    d = GroupdProcess(tmp_path / "data").start()
    try:
        admin = admin_for(d.bootstrap)
        admin.create_topics([NewTopic("t", 3, 1)])["t"].result(15)
        for g in range(5):
            admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(f"g{g}", [TopicPartition("t", p, 10 * g + p) for p in range(3)])]
            )[f"g{g}"].result(15)
        committers = [Committer(d.bootstrap, "live", "t", f"c{i}") for i in range(2)]
        try:
            wait_balanced(d.bootstrap, "live", "t", 2, 3)
            for c in committers:
                c.committing.set()
            time.sleep(0.5)
            for c in committers:
                c.pause()
            groups = sorted(g.group_id for g in admin.list_consumer_groups().result(15).valid)
            state_before = {g: (_members(describe(d.bootstrap, g)), _committed(d.bootstrap, g)) for g in groups}
            loads = len(d.events("offsets_loaded"))
            d.stop()
            d.start(port=d.port)
            _wait_loaded(d, loads)
            forget_admin(d.bootstrap)
            groups_after = sorted(g.group_id for g in admin_for(d.bootstrap).list_consumer_groups().result(15).valid)
            state_after = {g: (_members(describe(d.bootstrap, g)), _committed(d.bootstrap, g)) for g in groups_after}
            assert groups_after == groups
            assert state_after == state_before
        finally:
            for c in committers:
                c.close()
    finally:
        d.stop()


def test_torn_tail_is_truncated_and_earlier_commits_survive(tmp_path: Path) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import NewTopic
    from groupd.coordinator import partition_for

    rng = random.Random(11)
    d = GroupdProcess(tmp_path / "data", "--fsync", "always").start()
    group = "torn"
    try:
        admin = admin_for(d.bootstrap)
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(15)
        for off in range(1, 41):
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition("t", 0, off)])])[
                group
            ].result(15)
        d.kill()
        seg_dir = tmp_path / "data" / f"__consumer_offsets-{partition_for(group)}"
        (seg,) = sorted(seg_dir.glob("*.log"))
        data = bytearray(seg.read_bytes())
        # Damage the tail: flip bytes somewhere in the last few batches.
        cut = len(data) - rng.randint(1, 200)
        data[cut] ^= 0xFF
        seg.write_bytes(bytes(data))
        loads = len(d.events("offsets_loaded"))
        d.start(port=d.port)
        _wait_loaded(d, loads)
        forget_admin(d.bootstrap)
        committed = _committed(d.bootstrap, group)[("t", 0)]
        # Only the damaged tail is lost: each commit is a few dozen bytes, so a few at most.
        assert 30 <= committed <= 40, committed
        assert (
            d.events("storage.truncated")
            or any("truncat" in str(e.get("event", "")) for e in d.events("log_truncated"))
            or "truncat" in d.log_tail(200)
        )
    finally:
        d.stop()


def test_group_created_by_a_member_id_required_join_survives_a_restart(tmp_path: Path) -> None:
    # Kafka 4 (GroupMetadataManager.classicGroupJoinToClassicGroup) writes an empty group-metadata
    # record when a join creates a group and writes nothing else -- the first JoinGroup of a
    # consumer, answered MEMBER_ID_REQUIRED. A consumer that dies before its second JoinGroup leaves
    # that Empty group behind, and a restarted broker still lists it.
    from groupd.ops.kafka_client import BrokerConnection, KafkaClient

    d = GroupdProcess(tmp_path / "data").start()
    try:
        conn = BrokerConnection("127.0.0.1", d.port, timeout=10, client_id="dies-early")
        join = {
            "group_id": "left-behind",
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
            "reason": None,
        }
        _, resp = conn.send("JoinGroup", join, 9)
        assert resp["error_code"] == 79  # MEMBER_ID_REQUIRED; the client never comes back
        conn.close()
        loads = len(d.events("offsets_loaded"))
        d.stop()
        d.start(port=d.port)
        _wait_loaded(d, loads)
        with KafkaClient(d.bootstrap) as admin:
            listed = {g.group_id: (g.protocol_type, g.state) for g in admin.list_groups()}
            assert listed == {"left-behind": ("", "Empty")}
            described = admin.describe_group("left-behind")
            assert described is not None and (described.state, described.members) == ("Empty", [])
        groups = admin_for(d.bootstrap).list_consumer_groups().result(15).valid
        assert [(g.group_id, g.state.name) for g in groups] == [("left-behind", "EMPTY")]
        forget_admin(d.bootstrap)
    finally:
        d.stop()


def test_offsets_partition_log_is_created_by_its_first_commit_and_survives_sigkill(tmp_path: Path) -> None:
    """A first start creates no ``__consumer_offsets`` log (issue 26: 50 of them were most of the
    start-up); the first commit of a group creates its partition's log, durably before it is
    acknowledged (``--fsync always``): after SIGKILL the commit is back."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import NewTopic
    from groupd.coordinator import partition_for

    data = tmp_path / "data"
    d = GroupdProcess(data, "--fsync", "always").start()
    try:
        _wait_loaded(d, 0)
        assert sorted(p.name for p in data.glob("__consumer_offsets-*")) == []
        admin = admin_for(d.bootstrap)
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(15)
        group = "lazy-offsets"
        req = ConsumerGroupTopicPartitions(group, [TopicPartition("t", 0, 42)])
        admin.alter_consumer_group_offsets([req])[group].result(15)
        assert sorted(p.name for p in data.glob("__consumer_offsets-*")) == [
            f"__consumer_offsets-{partition_for(group)}"
        ]
        loads = len(d.events("offsets_loaded"))
        d.kill()
        forget_admin(d.bootstrap)
        d.start(port=d.port)
        _wait_loaded(d, loads)
        assert _committed(d.bootstrap, group) == {("t", 0): 42}
    finally:
        forget_admin(d.bootstrap)
        d.kill()


def test_commits_across_rolled_segments_survive_sigkill_and_a_clean_restart(tmp_path: Path) -> None:
    """The active segment's index entries are written at its roll and close, not per append
    (issue 26): a commit load over small ``__consumer_offsets`` segments (several rolls, the active
    one's entries only in memory), SIGKILL, restart: every acknowledged commit is back; then a
    clean restart, which trusts the index files, has them too, and so does a second SIGKILL."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import NewTopic
    from groupd.coordinator import partition_for

    data = tmp_path / "data"
    d = GroupdProcess(data, "--fsync", "interval:1000", "--segment-bytes", "16384").start()
    topic, group, parts = "rolled", "rolled-group", 20
    consumer = None
    try:
        admin_for(d.bootstrap).create_topics([NewTopic(topic, parts, 1)])[topic].result(15)
        acked: dict[tuple[str, int], int] = {}

        def commit_rounds(first: int, rounds: int) -> None:
            for n in range(first, first + rounds):
                offsets = [TopicPartition(topic, p, n * 10 + p) for p in range(parts)]
                consumer.commit(offsets=offsets, asynchronous=False)  # type: ignore[union-attr]
                acked.update({(topic, p): n * 10 + p for p in range(parts)})

        consumer = Consumer({"bootstrap.servers": d.bootstrap, "group.id": group, "enable.auto.commit": False})
        commit_rounds(1, 150)
        consumer.close()
        consumer = None
        logdir = data / f"__consumer_offsets-{partition_for(group)}"
        assert len(list(logdir.glob("*.log"))) >= 3  # the load rolled segments
        loads = len(d.events("offsets_loaded"))
        d.kill()
        forget_admin(d.bootstrap)
        d.start(port=d.port)
        _wait_loaded(d, loads)
        assert _committed(d.bootstrap, group) == acked

        consumer = Consumer({"bootstrap.servers": d.bootstrap, "group.id": group, "enable.auto.commit": False})
        commit_rounds(151, 60)
        consumer.close()
        consumer = None
        loads = len(d.events("offsets_loaded"))
        d.stop()
        forget_admin(d.bootstrap)
        d.start(port=d.port)
        _wait_loaded(d, loads)
        assert _committed(d.bootstrap, group) == acked

        consumer = Consumer({"bootstrap.servers": d.bootstrap, "group.id": group, "enable.auto.commit": False})
        commit_rounds(211, 40)
        consumer.close()
        consumer = None
        loads = len(d.events("offsets_loaded"))
        d.kill()
        forget_admin(d.bootstrap)
        d.start(port=d.port)
        _wait_loaded(d, loads)
        assert _committed(d.bootstrap, group) == acked
    finally:
        if consumer is not None:
            consumer.close()
        forget_admin(d.bootstrap)
        d.kill()
