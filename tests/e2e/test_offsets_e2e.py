"""Issue 4 acceptance: committed offsets through real clients, and their admin APIs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import kafka_python
from tests.support.daemon import GroupdProcess
from tests.support.groups import Member, admin_for, forget_admin, wait_balanced

pytestmark = pytest.mark.e2e


def _topic(groupd: GroupdProcess, name: str, partitions: int = 4) -> str:
    from confluent_kafka.admin import NewTopic

    admin_for(groupd.bootstrap).create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[
        name
    ].result(15)
    return name


def test_confluent_commit_sync_async_and_read_back(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    conf = {"bootstrap.servers": groupd.bootstrap, "group.id": group, "enable.auto.commit": False}
    c = Consumer(conf)
    c.assign([TopicPartition(topic, p) for p in range(4)])
    c.commit(offsets=[TopicPartition(topic, 0, 11), TopicPartition(topic, 1, 22, leader_epoch=0)], asynchronous=False)
    c.commit(offsets=[TopicPartition(topic, 2, 33)], asynchronous=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        c.poll(0.1)
        got = {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, 2)], timeout=5)}
        if got[2] == 33:
            break
    c.close()
    reader = Consumer(conf)
    got = reader.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    reader.close()
    assert {tp.partition: tp.offset for tp in got} == {0: 11, 1: 22, 2: 33, 3: -1001}


def test_kafka_python_commit_and_committed(groupd: GroupdProcess, unique: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    c = KafkaConsumer(bootstrap_servers=groupd.bootstrap, group_id=group, enable_auto_commit=False)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c.assign([tp0, tp1])
    c.commit({tp0: OffsetAndMetadata(5, "meta-a", -1), tp1: OffsetAndMetadata(7, "", -1)})
    c.close()
    r = KafkaConsumer(bootstrap_servers=groupd.bootstrap, group_id=group, enable_auto_commit=False)
    assert r.committed(tp0) == 5
    assert r.committed(tp1) == 7
    assert r.committed(TopicPartition(topic, 2)) is None
    r.close()


async def test_aiokafka_commit_and_committed(groupd: GroupdProcess, unique: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    c = AIOKafkaConsumer(bootstrap_servers=groupd.bootstrap, group_id=group, enable_auto_commit=False)
    await c.start()
    tp = TopicPartition(topic, 3)
    c.assign([tp])
    await c.commit({tp: 99})
    await c.stop()
    r = AIOKafkaConsumer(bootstrap_servers=groupd.bootstrap, group_id=group, enable_auto_commit=False)
    await r.start()
    try:
        assert await r.committed(tp) == 99
    finally:
        await r.stop()


def test_commit_from_fenced_generation_fails_with_client_exception(groupd: GroupdProcess, unique: str) -> None:
    """A kafka-python member that stalls (no heartbeats, as in a long GC pause) is expired by the
    coordinator and the group moves on to a new generation without it; its commit, still carrying
    the old member id and generation, is refused by the coordinator and surfaces as the client's
    own CommitFailedError. (A commit during PreparingRebalance with the current generation is
    accepted by Kafka, so the group must really have moved on before the commit.)"""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import CommitFailedError
    from kafka.structs import OffsetAndMetadata

    topic = _topic(groupd, f"t-{unique}", partitions=2)
    group = f"g-{unique}"
    c = KafkaConsumer(
        bootstrap_servers=groupd.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=60000,
    )
    kafka_python.subscribe(c, topic)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not c.assignment():
            c.poll(timeout_ms=100)
        assert c.assignment()
        old_member = c._coordinator._generation.member_id
        # The stall: kafka-python's heartbeat loop stops, nothing else in the client changes.
        c._coordinator._disable_heartbeat()
        other = Member("confluent-kafka", groupd.bootstrap, group, topic, session_timeout_ms=6000).start()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                view = wait_balanced(groupd.bootstrap, group, topic, 1, 2, timeout=30)
                if old_member not in {m["member_id"] for m in view.members}:
                    break
                time.sleep(0.2)
            assert old_member not in {m["member_id"] for m in view.members}, view
            with pytest.raises(CommitFailedError):
                c.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
        finally:
            other.stop()
    finally:
        c.close()


def test_confluent_admin_offset_and_group_operations(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = admin_for(groupd.bootstrap)
    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    # alter (a standalone commit on an empty group)
    res = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 100), TopicPartition(topic, 1, 200)])]
    )
    res[group].result(15)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    assert {(tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions} == {(topic, 0, 100), (topic, 1, 200)}
    groups = admin.list_consumer_groups().result(15)
    assert group in {g.group_id for g in groups.valid}
    desc = admin.describe_consumer_groups([group])[group].result(15)
    assert str(desc.state).endswith("EMPTY")
    # confluent-kafka 2.16 has no delete_consumer_group_offsets (OffsetDelete): kafka-python's is tested below.
    # delete the group
    admin.delete_consumer_groups([group])[group].result(15)
    groups = admin.list_consumer_groups().result(15)
    assert group not in {g.group_id for g in groups.valid}
    with pytest.raises(Exception) as exc:
        admin.delete_consumer_groups([group])[group].result(15)
    assert "GROUP_ID_NOT_FOUND" in str(exc.value) or "does not exist" in str(exc.value)


def test_confluent_admin_refuses_to_delete_non_empty_group(groupd: GroupdProcess, unique: str) -> None:
    admin = admin_for(groupd.bootstrap)
    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    m = Member("confluent-kafka", groupd.bootstrap, group, topic).start()
    try:
        wait_balanced(groupd.bootstrap, group, topic, 1, 4)
        with pytest.raises(Exception) as exc:
            admin.delete_consumer_groups([group])[group].result(15)
        assert "NON_EMPTY_GROUP" in str(exc.value) or "not empty" in str(exc.value)
    finally:
        m.stop()


def test_kafka_python_admin_group_operations(groupd: GroupdProcess, unique: str) -> None:
    """kafka-python 3.0 names them list_group_offsets, list_groups, describe_groups, delete_groups,
    delete_group_offsets (the 2.x names in the issue were renamed)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    topic = _topic(groupd, f"t-{unique}")
    group = f"g-{unique}"
    c = KafkaConsumer(bootstrap_servers=groupd.bootstrap, group_id=group, enable_auto_commit=False)
    c.assign([TopicPartition(topic, 2), TopicPartition(topic, 3)])
    c.commit(
        {
            TopicPartition(topic, 2): OffsetAndMetadata(42, "", -1),
            TopicPartition(topic, 3): OffsetAndMetadata(43, "", -1),
        }
    )
    c.close()
    admin = KafkaAdminClient(bootstrap_servers=groupd.bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {2: 42, 3: 43}
        listed = admin.list_groups()
        assert group in {g["group_id"] if isinstance(g, dict) else g[0] for g in listed}
        desc = admin.describe_groups([group])
        d = desc[group] if isinstance(desc, dict) else desc[0]
        assert (d["group_state"] if isinstance(d, dict) else d.state) == "Empty"
        errors = admin.delete_group_offsets(group, [TopicPartition(topic, 2)])
        assert all(e.errno == 0 for e in errors.values()), errors
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {3: 43}
        result = admin.delete_groups([group])
        pairs = result.items() if isinstance(result, dict) else result
        assert [(g, getattr(e, "errno", 0)) for g, e in pairs] == [(group, 0)]
        listed = admin.list_groups()
        assert group not in {g["group_id"] if isinstance(g, dict) else g[0] for g in listed}
    finally:
        admin.close()


def test_kafka_python_delete_group_offsets_of_unknown_topics_and_partitions(groupd: GroupdProcess, unique: str) -> None:
    """KafkaApis.handleOffsetDeleteRequest: UNKNOWN_TOPIC_OR_PARTITION for a topic the broker does
    not have and for a partition beyond the topic's count (groupd answered NONE)."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    topic = _topic(groupd, f"t-{unique}", partitions=2)
    group, never = f"g-{unique}", f"never-created-{unique}"
    admin = KafkaAdminClient(bootstrap_servers=groupd.bootstrap)
    try:
        committed = admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1)})
        assert {tp: e.errno for tp, e in committed.items()} == {TopicPartition(topic, 0): 0}
        wanted = [TopicPartition(topic, 0), TopicPartition(topic, 7), TopicPartition(never, 0)]
        errors = admin.delete_group_offsets(group, wanted)
        assert {tp: e.errno for tp, e in errors.items()} == {wanted[0]: 0, wanted[1]: 3, wanted[2]: 3}
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()


def test_auto_commit_offsets_visible_to_new_consumer(groupd: GroupdProcess, unique: str) -> None:
    """confluent-kafka with auto-commit: positions are committed in the background."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = _topic(groupd, f"t-{unique}", partitions=1)
    group = f"g-{unique}"
    p = Producer({"bootstrap.servers": groupd.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"v%d" % i)
    p.flush(15)
    c = Consumer(
        {
            "bootstrap.servers": groupd.bootstrap,
            "group.id": group,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 10 and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            seen += 1
    time.sleep(0.6)
    c.close()  # commits final positions
    assert seen == 10
    r = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": group})
    (tp,) = r.committed([TopicPartition(topic, 0)], timeout=10)
    r.close()
    assert tp.offset == 10


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(15) == 0


def _consume_and_commit(bootstrap: str, group: str, topic: str, want: int, timeout: float = 20) -> list[bytes]:
    """A confluent-kafka group member (earliest reset) reads until ``want`` records have come or
    ``timeout``, waits a moment for more, commits what it read and leaves."""
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg.value())
    if got:
        c.commit(asynchronous=False)
    c.close()
    return got


def test_deleted_topic_loses_its_committed_offsets_for_good(tmp_path: Path) -> None:
    """Kafka's OffsetMetadataManager.onPartitionsDeleted: a group that committed 3 on ``orders``,
    ``orders`` deleted and re-created with 5 new records, reads all 5 (it read only the last 2 when
    the old offset outlived the topic). The tombstones are in the log: a restart in between changes
    nothing."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import NewTopic

    d = GroupdProcess(tmp_path / "data").start()
    try:
        admin = admin_for(d.bootstrap)
        group = "billing"
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(15)
        _produce(d.bootstrap, "orders", [b"old-%d" % i for i in range(3)])
        assert _consume_and_commit(d.bootstrap, group, "orders", 3) == [b"old-0", b"old-1", b"old-2"]

        def committed() -> dict[tuple[str, int], int]:
            res = admin_for(d.bootstrap).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
            return {(tp.topic, tp.partition): tp.offset for tp in res[group].result(15).topic_partitions}

        assert committed() == {("orders", 0): 3}
        admin.delete_topics(["orders"])["orders"].result(15)
        assert committed() == {}
        d.stop()
        forget_admin(d.bootstrap)
        d.start(port=d.port)
        assert committed() == {}
        assert [e["tombstones"] for e in d.events("deleted_partitions_offsets_removed")] == [1]
        admin = admin_for(d.bootstrap)
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(15)
        new = [b"new-%d" % i for i in range(5)]
        _produce(d.bootstrap, "orders", new)
        assert _consume_and_commit(d.bootstrap, group, "orders", 5) == new
        assert committed() == {("orders", 0): 5}
    finally:
        forget_admin(d.bootstrap)
        d.stop()
