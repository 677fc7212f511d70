"""Three brokers in one process: what Metadata, DescribeCluster and CreateTopics say, and who answers
partition requests (NOT_LEADER_OR_FOLLOWER and the leader-epoch checks of Kafka's
``Partition.localLogWithEpochOrThrow``)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidReplicationFactorError

from tests.cluster.conftest import create_topic, leaders, metadata, raw

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("version", range(13))
def test_metadata_of_every_version_from_every_broker_lists_all_three(
    cluster: GroupdBroker, unique: str, version: int
) -> None:
    topic = f"meta-{unique}"
    create_topic(cluster, topic, partitions=6, replication=2)
    answers = [metadata(cluster, node, None if version == 0 else [topic], version) for node in sorted(cluster.nodes)]
    for answer in answers:
        assert sorted((b["node_id"], b["port"]) for b in answer["brokers"]) == sorted(
            (n, int(a.rsplit(":", 1)[1])) for n, a in cluster.nodes.items()
        )
    views = []
    for answer in answers:
        (t,) = [t for t in answer["topics"] if t["name"] == topic]
        views.append(sorted((p["partition_index"], p["leader_id"], tuple(p["replica_nodes"])) for p in t["partitions"]))
    assert views[0] == views[1] == views[2]
    # Round robin: six partitions, two led by each broker; two replicas each, the leader first.
    assert sorted(leader for _, leader, _ in views[0]) == [1, 1, 2, 2, 3, 3]
    assert all(len(set(r)) == 2 and r[0] == leader for _, leader, r in views[0])


def test_consumer_offsets_partitions_are_spread_over_the_brokers(cluster: GroupdBroker) -> None:
    by_leader: dict[int, int] = {}
    for leader, _epoch in leaders(cluster, "__consumer_offsets").values():
        by_leader[leader] = by_leader.get(leader, 0) + 1
    assert by_leader == {1: 17, 2: 17, 3: 16}


def test_a_client_creates_a_topic_with_replication_factor_3_and_not_4(cluster: GroupdBroker, unique: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(f"rf3-{unique}", 3, 3)])
        with pytest.raises(InvalidReplicationFactorError, match="only 3 broker"):
            admin.create_topics([NewTopic(f"rf4-{unique}", 1, 4)])
        (described,) = admin.describe_topics([f"rf3-{unique}"])
    finally:
        admin.close()
    for p in described["partitions"]:
        assert sorted(p["replica_nodes"]) == [1, 2, 3]
        assert sorted(p["isr_nodes"]) == [1, 2, 3]
        assert p["replica_nodes"][0] == p["leader_id"]


def test_confluent_sees_three_brokers_and_the_same_leaders_from_each(cluster: GroupdBroker, unique: str) -> None:
    from confluent_kafka.admin import AdminClient

    topic = f"cf-{unique}"
    create_topic(cluster, topic, partitions=3)
    views = []
    for address in cluster.nodes.values():
        md = AdminClient({"bootstrap.servers": address}).list_topics(topic, timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        views.append({p: (m.leader, tuple(m.replicas), tuple(m.isrs)) for p, m in md.topics[topic].partitions.items()})
    assert views[0] == views[1] == views[2]
    assert sorted(leader for leader, _, _ in views[0].values()) == [1, 2, 3]


def test_describe_cluster_lists_every_broker(cluster: GroupdBroker) -> None:
    for node in cluster.nodes:
        client = raw(cluster, node)
        try:
            answer = client.request("DescribeCluster", 0, {"include_cluster_authorized_operations": False})
        finally:
            client.close()
        assert [b["broker_id"] for b in answer["brokers"]] == [1, 2, 3]
        assert answer["controller_id"] == 1


def _produce(topic: str, partition: int) -> dict[str, Any]:
    from groupd.storage import records as rec

    batch = rec.build_batch([(None, b"v", (), 1)])
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }


def _fetch(topic: str, partitions: list[tuple[int, int]]) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": epoch,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p, epoch in partitions
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _list_offsets(topic: str) -> dict[str, Any]:
    """ListOffsets v7 of partition 0's log end."""
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
        ],
    }


def test_partition_requests_to_a_non_leader_answer_not_leader_or_follower(cluster: GroupdBroker, unique: str) -> None:
    topic = f"nl-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, epoch),) = leaders(cluster, topic).values()
    other = next(n for n in cluster.nodes if n != leader)
    at_leader, at_other = raw(cluster, leader), raw(cluster, other)
    try:
        # Produce v9 (no hint), v11 (current_leader and node_endpoints, KIP-951)
        p = at_other.request("Produce", 9, _produce(topic, 0))["responses"][0]["partition_responses"][0]
        assert p["error_code"] == NOT_LEADER
        answer = at_other.request("Produce", 11, _produce(topic, 0))
        part = answer["responses"][0]["partition_responses"][0]
        assert part["error_code"] == NOT_LEADER
        assert part["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}
        assert [e["node_id"] for e in answer["node_endpoints"]] == [leader]
        assert (
            at_leader.request("Produce", 9, _produce(topic, 0))["responses"][0]["partition_responses"][0]["error_code"]
            == 0
        )
        # Fetch v12: the current_leader hint
        fp = at_other.request("Fetch", 12, _fetch(topic, [(0, -1)]))["responses"][0]["partitions"][0]
        assert fp["error_code"] == NOT_LEADER
        assert fp["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}
        fp = at_leader.request("Fetch", 12, _fetch(topic, [(0, epoch)]))["responses"][0]["partitions"][0]
        assert fp["error_code"] == 0 and fp["high_watermark"] == 1 and fp["records"]
        # ListOffsets, DeleteRecords, OffsetForLeaderEpoch
        lo = _list_offsets(topic)
        assert at_other.request("ListOffsets", 7, lo)["topics"][0]["partitions"][0]["error_code"] == NOT_LEADER
        assert at_leader.request("ListOffsets", 7, lo)["topics"][0]["partitions"][0]["offset"] == 1
        dr = {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 1000}
        assert at_other.request("DeleteRecords", 2, dr)["topics"][0]["partitions"][0]["error_code"] == NOT_LEADER
        ofe = {
            "replica_id": -1,
            "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
            ],
        }
        assert at_other.request("OffsetForLeaderEpoch", 4, ofe)["topics"][0]["partitions"][0]["error_code"] == (
            NOT_LEADER
        )
        assert at_leader.request("OffsetForLeaderEpoch", 4, ofe)["topics"][0]["partitions"][0]["end_offset"] == 1
    finally:
        at_leader.close()
        at_other.close()


def test_a_fetch_mixing_led_and_not_led_partitions_answers_both_at_once(cluster: GroupdBroker, unique: str) -> None:
    topic = f"mix-{unique}"
    create_topic(cluster, topic, partitions=3, replication=1)
    by_partition = leaders(cluster, topic)
    node = by_partition[0][0]
    client = raw(cluster, node)
    try:
        body = _fetch(topic, [(p, -1) for p in range(3)])
        body["max_wait_ms"] = 30_000  # an error answers at once, as Kafka's does
        parts = client.request("Fetch", 11, body)["responses"][0]["partitions"]
    finally:
        client.close()
    codes = {p["partition_index"]: p["error_code"] for p in parts}
    assert codes == {p: 0 if by_partition[p][0] == node else NOT_LEADER for p in range(3)}


def test_stale_and_future_leader_epochs_are_fenced_and_unknown(cluster: GroupdBroker, unique: str) -> None:
    topic = f"ep-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, epoch),) = leaders(cluster, topic).values()
    client = raw(cluster, leader)
    try:
        fp = client.request("Fetch", 12, _fetch(topic, [(0, epoch + 1)]))["responses"][0]["partitions"][0]
        assert fp["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
        fp = client.request("Fetch", 12, _fetch(topic, [(0, epoch)]))["responses"][0]["partitions"][0]
        assert fp["error_code"] == 0
    finally:
        client.close()


def test_unknown_topic_ids_still_get_kafkas_answer(cluster: GroupdBroker) -> None:
    client = raw(cluster, 2)
    try:
        answer = client.request(
            "Metadata",
            12,
            {"topics": [{"name": None, "topic_id": uuid.uuid4()}], "include_topic_authorized_operations": False},
        )
    finally:
        client.close()
    assert answer["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_an_acks_0_produce_to_a_non_leader_closes_the_connection(cluster: GroupdBroker, unique: str) -> None:
    """No answer to carry NOT_LEADER_OR_FOLLOWER: Kafka closes the connection (KafkaApis.handleProduceRequest)."""
    topic = f"a0-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, _epoch),) = leaders(cluster, topic).values()
    other = next(n for n in cluster.nodes if n != leader)
    at_leader, at_other = raw(cluster, leader), raw(cluster, other)
    try:
        at_other.send("Produce", 9, {**_produce(topic, 0), "acks": 0})
        assert at_other.closed_by_peer()
        at_leader.send("Produce", 9, {**_produce(topic, 0), "acks": 0})
        assert not at_leader.closed_by_peer(0.5)
        lo = _list_offsets(topic)
        assert at_leader.request("ListOffsets", 7, lo)["topics"][0]["partitions"][0]["offset"] == 1
    finally:
        at_leader.close()
        at_other.close()


@pytest.mark.parametrize("node", [1, 2, 3])
def test_a_brokers_configs_are_described_by_that_broker(cluster: GroupdBroker, node: int) -> None:
    """librdkafka sends a broker resource to that broker, which must know its own id (ConfigHelper)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, str(node))
    configs = admin.describe_configs([resource])[resource].result(timeout=15)
    assert configs["node.id"].value == str(node)
    assert configs["num.partitions"].value == "3"
