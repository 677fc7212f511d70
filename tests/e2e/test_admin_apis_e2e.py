"""confluent-kafka's AdminClient (and kafka-python's, for DescribeLogDirs) against a real daemon:
configs that round-trip and take effect, DeleteRecords, DescribeCluster, OffsetForLeaderEpoch.

The daemon checks retention every 200 ms, so a shortened ``retention.ms`` shows within a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
)

from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    d = GroupdProcess(
        Path(tmp_path_factory.mktemp("groupd-admin")) / "data", "--log-retention-check-interval-ms", "200"
    )
    d.start()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def admin(daemon: GroupdProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": daemon.bootstrap})


def _create(admin: AdminClient, topic: str, **configs: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)


def _produce(bootstrap: str, topic: str, n: int, size: int = 200) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, value=b"x" * size, key=str(i).encode())
        p.flush(10)  # one batch per record: small segments roll often
    assert p.flush(10) == 0


def _earliest(admin: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset


def _describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    return admin.describe_configs([resource])[resource].result(10)


def test_topic_configs_round_trip_with_sources_and_defaults(admin: AdminClient, unique: str) -> None:
    topic = f"cfg-{unique}"
    _create(admin, topic, **{"cleanup.policy": "compact"})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    before = _describe(admin, res)
    assert before["cleanup.policy"].value == "compact"
    assert before["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert before["retention.ms"].value == "604800000"
    assert before["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # groupd's own broker default (100 MiB segments) shows as the broker's static config
    assert before["segment.bytes"].value == str(100 * 1024 * 1024)
    assert before["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    after = _describe(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert after["retention.ms"].value == "3600000"
    assert after["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert after["cleanup.policy"].value == "compact,delete"
    assert after["min.insync.replicas"].value == "1"

    # DELETE restores the default
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    assert _describe(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))["retention.ms"].value == "604800000"


def test_bad_configs_get_kafkas_errors(admin: AdminClient, unique: str) -> None:
    topic = f"cfg-bad-{unique}"
    _create(admin, topic)
    cases = [
        (ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET), "INVALID_CONFIG"),
        (ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET), "INVALID_CONFIG"),
        (ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND), "INVALID_CONFIG"),
        (ConfigEntry("cleanup.policy", "shred", incremental_operation=AlterConfigOpType.SET), "INVALID_CONFIG"),
    ]
    for entry, code in cases:
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
        with pytest.raises(KafkaException) as exc:
            admin.incremental_alter_configs([res])[res].result(10)
        assert exc.value.args[0].name() == code, entry
    missing = ConfigResource(ConfigResource.Type.TOPIC, f"missing-{unique}")
    with pytest.raises(KafkaException) as exc:
        admin.describe_configs([missing])[missing].result(10)
    assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_legacy_alter_configs_replaces_the_set(admin: AdminClient, unique: str) -> None:
    topic = f"cfg-legacy-{unique}"
    _create(admin, topic, **{"retention.ms": "1000000"})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"segment.ms": "7200000"})
    admin.alter_configs([res])[res].result(10)
    got = _describe(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert got["segment.ms"].value == "7200000"
    assert got["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # AlterConfigs replaces every override


def test_shortened_retention_deletes_old_segments(admin: AdminClient, daemon: GroupdProcess, unique: str) -> None:
    topic = f"retention-{unique}"
    _create(admin, topic, **{"segment.bytes": "1024"})
    _produce(daemon.bootstrap, topic, 30)
    time.sleep(0.5)  # two retention checks: the 7-day default keeps everything
    assert _earliest(admin, topic) == 0
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    deadline = time.monotonic() + 10
    while _earliest(admin, topic) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    start = _earliest(admin, topic)
    assert 0 < start <= 30
    segments = sorted((daemon.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) == 1  # only the active segment is left


def test_delete_records_moves_the_start_and_consumers_see_it(
    admin: AdminClient, daemon: GroupdProcess, unique: str
) -> None:
    topic = f"delrec-{unique}"
    _create(admin, topic)
    _produce(daemon.bootstrap, topic, 10, size=10)
    tp = TopicPartition(topic, 0, 6)
    got = admin.delete_records([tp])[tp].result(10)
    assert got.low_watermark == 6  # the new low watermark
    assert _earliest(admin, topic) == 6

    # a consumer from the beginning starts at the new log start
    c = Consumer(
        {
            "bootstrap.servers": daemon.bootstrap,
            "group.id": f"g-{unique}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0)])
        msgs = []
        deadline = time.monotonic() + 15
        while len(msgs) < 4 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                msgs.append(m)
        assert [m.offset() for m in msgs] == [6, 7, 8, 9]
    finally:
        c.close()

    # past the high watermark: OFFSET_OUT_OF_RANGE
    tp = TopicPartition(topic, 0, 11)
    with pytest.raises(KafkaException) as exc:
        admin.delete_records([tp])[tp].result(10)
    assert exc.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_delete_records_and_altered_configs_survive_a_restart(admin: AdminClient, tmp_path: Path, unique: str) -> None:
    d = GroupdProcess(tmp_path / "data")
    d.start()
    try:
        a = AdminClient({"bootstrap.servers": d.bootstrap})
        topic = f"delrec-restart-{unique}"
        _create(a, topic)
        _produce(d.bootstrap, topic, 5, size=10)
        tp = TopicPartition(topic, 0, 3)
        assert a.delete_records([tp])[tp].result(10).low_watermark == 3
        entry = ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
        a.incremental_alter_configs([res])[res].result(10)
        d.stop()
        d.start()
        a = AdminClient({"bootstrap.servers": d.bootstrap})
        assert _earliest(a, topic) == 3
        assert _describe(a, ConfigResource(ConfigResource.Type.TOPIC, topic))["retention.ms"].value == "123456"
    finally:
        d.stop()


def test_describe_cluster(admin: AdminClient, daemon: GroupdProcess) -> None:
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert [n.port for n in cluster.nodes] == [daemon.port]
    assert cluster.controller.id == 1
    assert cluster.cluster_id
    seven = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
    # librdkafka adds WRITE of its own where IDEMPOTENT_WRITE is set; the wire carries Kafka's seven (below)
    assert seven <= {op.name for op in cluster.authorized_operations} <= seven | {"WRITE"}
    raw = RawClient(daemon.port)
    try:
        for v in (0, 1, 2):
            got = raw.request("DescribeCluster", v, {"include_cluster_authorized_operations": True})
            # without an authorizer Kafka reports every operation the cluster supports
            # (AuthHelper.authorizedOperations, AclEntry.supportedOperations(CLUSTER))
            assert got["cluster_authorized_operations"] == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12)), v
            assert got["brokers"][0]["port"] == daemon.port
        got = raw.request("DescribeCluster", 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2})
        assert got["error_code"] == 114  # MISMATCHED_ENDPOINT_TYPE: a broker is not a controller endpoint
        assert got["cluster_authorized_operations"] == -(2**31)
    finally:
        raw.close()


def test_offset_for_leader_epoch_answers_the_one_epoch(admin: AdminClient, daemon: GroupdProcess, unique: str) -> None:
    topic = f"ofle-{unique}"
    _create(admin, topic)
    _produce(daemon.bootstrap, topic, 3, size=10)
    raw = RawClient(daemon.port)
    try:
        for v in (2, 3, 4):
            parts = [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                {"partition": 1, "current_leader_epoch": -1, "leader_epoch": 0},
            ]
            got = raw.request(
                "OffsetForLeaderEpoch", v, {"replica_id": -1, "topics": [{"topic": topic, "partitions": parts}]}
            )
            p0, p1 = got["topics"][0]["partitions"]
            # LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the log end offset
            assert (p0["error_code"], p0["leader_epoch"], p0["end_offset"]) == (0, 0, 3), v
            assert p1["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        got = raw.request(
            "OffsetForLeaderEpoch",
            4,
            {
                "replica_id": -1,
                "topics": [
                    {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": 5, "leader_epoch": 5}]}
                ],
            },
        )
        assert got["topics"][0]["partitions"][0]["error_code"] == 75  # UNKNOWN_LEADER_EPOCH
    finally:
        raw.close()


def test_describe_log_dirs_with_kafka_python(daemon: GroupdProcess, unique: str, admin: AdminClient) -> None:
    from kafka.admin import KafkaAdminClient

    topic = f"logdirs-{unique}"
    _create(admin, topic)
    _produce(daemon.bootstrap, topic, 2, size=10)
    client = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        got = client.describe_log_dirs()
    finally:
        client.close()
    [broker] = got
    [log_dir] = broker["log_dirs"]
    assert Path(log_dir["log_dir"]) == daemon.data_dir.resolve()
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    sizes = {t["name"]: t["partitions"] for t in log_dir["topics"]}
    [p0] = sizes[topic]
    assert p0["partition_size"] == (daemon.data_dir / f"{topic}-0" / "00000000000000000000.log").stat().st_size > 0
    assert p0["offset_lag"] == 0
    assert len(sizes["__consumer_offsets"]) == 50


def test_group_configs_are_stored_and_validated(admin: AdminClient, unique: str) -> None:
    group = f"grp-{unique}"

    def alter(value: str) -> ConfigResource:
        entry = ConfigEntry("consumer.session.timeout.ms", value, incremental_operation=AlterConfigOpType.SET)
        return ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[entry])

    res = alter("50000")
    admin.incremental_alter_configs([res])[res].result(10)
    got = _describe(admin, ConfigResource(ConfigResource.Type.GROUP, group))
    assert got["consumer.session.timeout.ms"].value == "50000"
    assert got["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    # a group config's default is the broker's setting: groupd's 250 ms (Kafka's 5000 under --kafka-version)
    assert got["consumer.heartbeat.interval.ms"].value == "250"
    assert got["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    bad = alter("1000")  # below group.consumer.min.session.timeout.ms (GroupConfig.validate)
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([bad])[bad].result(10)
    assert exc.value.args[0].name() == "INVALID_CONFIG"


def test_broker_configs_are_described_and_static(admin: AdminClient, daemon: GroupdProcess) -> None:
    got = _describe(admin, ConfigResource(ConfigResource.Type.BROKER, "1"))
    assert got["log.retention.check.interval.ms"].value == "200"
    assert got["log.retention.check.interval.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert got["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    entry = ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)
    res = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[entry])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([res])[res].result(10)
    assert exc.value.args[0].name() == "INVALID_REQUEST"
    # librdkafka sends a broker resource to that broker: ask for another id by hand
    raw = RawClient(daemon.port)
    try:
        body = {"resources": [{"resource_type": 4, "resource_name": "7", "configuration_keys": None}]}
        [result] = raw.request("DescribeConfigs", 4, body)["results"]
        assert result["error_code"] == 42  # INVALID_REQUEST, as ConfigHelper.describeConfigs
        assert result["error_message"] == "Unexpected broker id, expected 1 or empty string, but received 7"
    finally:
        raw.close()


def test_describe_configs_synonyms_types_and_documentation(
    daemon: GroupdProcess, unique: str, admin: AdminClient
) -> None:
    topic = f"cfg-raw-{unique}"
    _create(admin, topic, **{"retention.ms": "1000"})
    raw = RawClient(daemon.port)
    try:
        for v in (1, 2, 3, 4):
            body = {
                "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}],
                "include_synonyms": True,
                "include_documentation": True,
            }
            [result] = raw.request("DescribeConfigs", v, body)["results"]
            [entry] = result["configs"]
            assert (entry["value"], entry["config_source"]) == ("1000", 1)
            # ConfigHelper's synonyms: the topic override, then the broker default (in hours)
            assert [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]] == [
                ("retention.ms", "1000", 1),
                ("log.retention.hours", "168", 5),
            ]
            if v >= 3:
                assert entry["config_type"] == 5  # LONG
                assert entry["documentation"].startswith("The maximum time a log is retained")
        # null and empty key lists both mean every config (ConfigHelper.createResponseConfig)
        for keys in (None, []):
            body = {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": keys}]}
            assert len(raw.request("DescribeConfigs", 4, body)["results"][0]["configs"]) >= 30
        bad = {"resources": [{"resource_type": 2, "resource_name": "no/slash", "configuration_keys": None}]}
        assert raw.request("DescribeConfigs", 4, bad)["results"][0]["error_code"] == 17  # INVALID_TOPIC_EXCEPTION
    finally:
        raw.close()


def test_delete_records_refusals_as_kafka(admin: AdminClient, daemon: GroupdProcess, unique: str) -> None:
    compacted, plain = f"delrec-compact-{unique}", f"delrec-hw-{unique}"
    _create(admin, compacted, **{"cleanup.policy": "compact"})
    _create(admin, plain)
    _produce(daemon.bootstrap, plain, 4, size=10)
    raw = RawClient(daemon.port)
    try:

        def delete(topic: str, partition: int, offset: int, v: int = 2) -> tuple[int, int]:
            body = {"topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}]}
            [p] = raw.request("DeleteRecords", v, {**body, "timeout_ms": 5000})["topics"][0]["partitions"]
            return p["error_code"], p["low_watermark"]

        assert delete(compacted, 0, 0) == (44, -1)  # POLICY_VIOLATION (Partition.deleteRecordsOnLeader)
        assert delete("__consumer_offsets", 0, 0) == (17, -1)  # INVALID_TOPIC_EXCEPTION: internal topic
        assert delete(f"missing-{unique}", 0, 0) == (3, -1)  # UNKNOWN_TOPIC_OR_PARTITION
        assert delete(plain, 1, 0) == (3, -1)
        assert delete(plain, 0, 2, v=0) == (0, 2)
        assert delete(plain, 0, 1, v=1) == (0, 2)  # the start never moves back
        assert delete(plain, 0, -1) == (0, 4)  # -1: up to the high watermark
        assert delete(plain, 0, -7) == (1, -1)  # OFFSET_OUT_OF_RANGE
    finally:
        raw.close()
    c = Consumer({"bootstrap.servers": daemon.bootstrap, "group.id": f"g-{unique}", "auto.offset.reset": "error"})
    try:
        # a fetch below the new start: OFFSET_OUT_OF_RANGE, which librdkafka reports as _AUTO_OFFSET_RESET
        c.assign([TopicPartition(plain, 0, 1)])
        err = None
        deadline = time.monotonic() + 10
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is not None:
                err = m.error()
        assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
        assert "Offset out of range" in err.str() or "OFFSET_OUT_OF_RANGE" in err.str(), err.str()
    finally:
        c.close()


def test_versions_kafka_4_removed(admin: AdminClient, daemon: GroupdProcess, unique: str) -> None:
    """DescribeConfigs v0 (is_default instead of a source), OffsetForLeaderEpoch v0-1, DescribeLogDirs v0:
    what clients of Kafka 2.x (sarama with an old Version) send."""
    topic = f"old-{unique}"
    _create(admin, topic, **{"retention.ms": "1000"})
    _produce(daemon.bootstrap, topic, 2, size=10)
    raw = RawClient(daemon.port)
    try:
        keys = ["retention.ms", "segment.ms"]
        body = {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": keys}]}
        [result] = raw.request("DescribeConfigs", 0, body)["results"]
        got = {c["name"]: (c["value"], c["is_default"]) for c in result["configs"]}
        assert got == {"retention.ms": ("1000", False), "segment.ms": ("604800000", True)}
        for v in (0, 1):
            parts = [{"partition": 0, "leader_epoch": 0}]
            [p] = raw.request("OffsetForLeaderEpoch", v, {"topics": [{"topic": topic, "partitions": parts}]})["topics"][
                0
            ]["partitions"]
            assert (p["error_code"], p["end_offset"]) == (0, 2)
            assert p.get("leader_epoch", 0) == 0
        logdirs = raw.request("DescribeLogDirs", 0, {"topics": [{"topic": topic, "partitions": [0]}]})
        [entry] = logdirs["results"][0]["topics"]
        assert entry["name"] == topic and entry["partitions"][0]["partition_size"] > 0
    finally:
        raw.close()


def test_kafka_python_admin_describes_and_alters_configs(daemon: GroupdProcess, unique: str) -> None:
    """kafka-python's admin client (which filters the answer itself: config_filter)."""
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    topic = f"kp-{unique}"
    client = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        client.create_topics([KpNewTopic(topic, 1, 1)])
        assert client.alter_configs(
            [KpResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "5000"})]
        ) == {"topic": {topic: "OK"}}
        resource = KpResource(ConfigResourceType.TOPIC, topic)
        described = client.describe_configs([resource], config_filter="all")["topic"][topic]
    finally:
        client.close()
    assert described["retention.ms"]["value"] == "5000"
    assert described["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert len(described) >= 30  # every LogConfig entry
