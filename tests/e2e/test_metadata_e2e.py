"""Metadata as Kafka 4 answers it: auto-creation and the cluster's authorized operations.

Kafka 4 (KRaft) forwards an auto-creation to the controller and answers the Metadata request that
caused it with UNKNOWN_TOPIC_OR_PARTITION and no partitions
(``AutoTopicCreationManager.sendCreateTopicRequest``); the topic is there for a later request.
Real clients retry: the producer tests below send to fresh topics through that first answer.
"""

from __future__ import annotations

from groupd.ops.kafka_client import BrokerConnection
from groupd.protocol.errors import ErrorCode

from tests.support.daemon import GroupdProcess

# Kafka's AclOperation codes of AclEntry.supportedOperations(ResourceType.CLUSTER).
KAFKA_CLUSTER_OPERATIONS = {"CREATE": 5, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9}
KAFKA_CLUSTER_OPERATIONS |= {"DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}


def _metadata(conn: BrokerConnection, topic: str, version: int = 12, **extra: bool) -> dict:  # type: ignore[type-arg]
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": True, **extra}
    return conn.send("Metadata", body, version)[1]


def test_auto_creating_metadata_answers_unknown_topic_then_the_partitions(groupd: GroupdProcess, unique: str) -> None:
    # KafkaApis.getTopicMetadata -> AutoTopicCreationManager.createTopics (KRaft path)
    conn = BrokerConnection("127.0.0.1", groupd.port, timeout=10, client_id="md")
    try:
        for version in (4, 9, 12):
            topic = f"md-auto-{unique}-{version}"
            [first] = _metadata(conn, topic, version)["topics"]
            assert (first["name"], first["error_code"], first["partitions"]) == (
                topic,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                [],
            )
            assert first["is_internal"] is False
            [later] = _metadata(conn, topic, version)["topics"]
            assert later["error_code"] == 0
            assert [p["partition_index"] for p in later["partitions"]] == [0]
        # Without permission to create, the answer is the same and nothing is created.
        body = {"topics": [{"name": f"md-none-{unique}"}], "allow_auto_topic_creation": False}
        for _ in range(2):
            [t] = conn.send("Metadata", body, 12)[1]["topics"]
            assert (t["error_code"], t["partitions"]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    finally:
        conn.close()


def test_cluster_authorized_operations_are_kafkas_seven(groupd: GroupdProcess, unique: str) -> None:
    conn = BrokerConnection("127.0.0.1", groupd.port, timeout=10, client_id="md")
    try:
        resp = _metadata(conn, f"md-ops-{unique}", 10, include_cluster_authorized_operations=True)
        ops = resp["cluster_authorized_operations"]
        assert {name for name, bit in KAFKA_CLUSTER_OPERATIONS.items() if ops & (1 << bit)} == set(
            KAFKA_CLUSTER_OPERATIONS
        )
        assert ops == sum(1 << bit for bit in KAFKA_CLUSTER_OPERATIONS.values())
    finally:
        conn.close()


def test_real_producers_send_to_auto_created_topics(groupd: GroupdProcess, unique: str) -> None:
    """Each client library retries through the first UNKNOWN_TOPIC_OR_PARTITION and delivers."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    kp = KafkaProducer(bootstrap_servers=groupd.bootstrap)
    try:
        assert kp.send(f"md-kp-{unique}", b"v").get(timeout=20).offset == 0
    finally:
        kp.close()

    async def aio() -> int:
        p = AIOKafkaProducer(bootstrap_servers=groupd.bootstrap)
        await p.start()
        try:
            return (await p.send_and_wait(f"md-aio-{unique}", b"v")).offset  # type: ignore[no-any-return]
        finally:
            await p.stop()

    assert asyncio.run(aio()) == 0

    delivered: list[int] = []
    cp = Producer({"bootstrap.servers": groupd.bootstrap})
    cp.produce(f"md-ck-{unique}", b"v", on_delivery=lambda err, msg: delivered.append(-1 if err else msg.offset()))
    assert cp.flush(20) == 0
    assert delivered == [0]
