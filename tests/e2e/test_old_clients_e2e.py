"""Old clients against a real daemon: the versions Kafka 4 removed, as Kafka 2.x/3.x served them.

- sarama 1.22 (Debian's) at its own default Version (0.8.2) produces (Produce v0, message format v0,
  plain and gzip) and reads back (ListOffsets v0, Fetch v0); its ConsumerGroup, at the lowest Version
  it accepts (0.10.2), consumes through a group (JoinGroup v1, SyncGroup v0, Heartbeat v0, Fetch v3,
  OffsetCommit v1, OffsetFetch v1, LeaveGroup v0).
- kafka-go 0.2 (Debian's) creates a topic (CreateTopics v0), produces (Produce v2, message format v1,
  plain and gzip), reads back (Fetch v2) and deletes the topic (DeleteTopics v1).
- sarama sends snappy message sets at its default Version and lz4 ones at 0.10.0; both are stored with
  their codec and read back down-converted (Fetch v0, v2) and by a current client; DeleteTopics v0.
- kafka-python pinned to ``api_version=(0, 10, 1)`` produces (Produce v2) and consumes through a group
  (Fetch v3, ListOffsets v1).
- a lag monitor in Burrow's manner, on sarama configured for Kafka 2.0.0, reads ``__consumer_offsets``
  and the end offsets of the group's partitions (ListOffsets v1, and v0 at sarama's default Version).

The daemon serves Prometheus metrics, and each test checks from ``groupd_requests_total`` that the
old versions really were the ones used.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from groupd.storage import records as rec
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.ops.test_metrics import create_topic, free_port, scrape, total
from tests.support.daemon import GroupdProcess
from tests.support.go_programs import GoBuilder, missing_toolchain, run_json_lines
from tests.support.kafka_python import subscribe

pytestmark = pytest.mark.e2e

NO_GO = missing_toolchain()
needs_go = pytest.mark.skipif(NO_GO is not None, reason=NO_GO or "")
OLD_KAFKA_PYTHON = (0, 10, 1)


class Daemon:
    def __init__(self, proc: GroupdProcess, metrics_port: int) -> None:
        self.proc = proc
        self.metrics_port = metrics_port
        self.bootstrap = proc.bootstrap

    def requests(self, api: str, version: int) -> float:
        """Requests answered at (api, version) so far (the metric has no client label)."""
        return total(scrape(self.metrics_port), "groupd_requests_total", api=api, version=str(version))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    port = free_port()
    proc = GroupdProcess(Path(tmp_path_factory.mktemp("oldclients")) / "data", "--metrics-port", str(port))
    proc.start()
    try:
        yield Daemon(proc, port)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def go_builder(tmp_path_factory: pytest.TempPathFactory) -> GoBuilder:
    return GoBuilder(Path(tmp_path_factory.mktemp("go-compat")))


def _counts(d: Daemon, pairs: list[tuple[str, int]]) -> dict[tuple[str, int], float]:
    return {p: d.requests(*p) for p in pairs}


def _grew(d: Daemon, before: dict[tuple[str, int], float]) -> list[tuple[str, int]]:
    """The (api, version) pairs of ``before`` that were not requested since."""
    after = _counts(d, list(before))
    return [p for p in before if after[p] <= before[p]]


@needs_go
def test_sarama_default_version_produces_and_a_group_consumes(
    daemon: Daemon, go_builder: GoBuilder, unique: str
) -> None:
    binary = go_builder.build("sarama_produce_consume")
    topic, group = f"sarama-{unique}", f"sarama-g-{unique}"
    create_topic(daemon.bootstrap, topic, 1)
    used = [
        ("Metadata", 0),
        ("Produce", 0),
        ("ListOffsets", 0),
        ("Fetch", 0),
        ("FindCoordinator", 0),
        ("JoinGroup", 1),
        ("SyncGroup", 0),
        ("Heartbeat", 0),
        ("OffsetFetch", 1),
        ("Fetch", 3),
        ("OffsetCommit", 1),
        ("LeaveGroup", 0),
    ]
    before = _counts(daemon, used)
    events = run_json_lines(binary, daemon.bootstrap, topic, group)
    assert events[0] == {"event": "config", "default_version": "0.8.2.0"}
    assert [e["offset"] for e in events if e["event"] == "produced"] == [0, 1, 2, 3, 4, 5]
    expected = [(i, f"k{i}", f"plain-{i}" if i < 3 else f"gzip-{i}") for i in range(6)]
    for via in ("partition_consumer", "group"):
        got = [e for e in events if e["event"] == "message" and e["via"] == via]
        assert [(e["offset"], e["key"], e["value"]) for e in got] == expected, via
        # Magic 0 has no timestamps: stored as NO_TIMESTAMP, read back as none (sarama's zero time).
        assert all(e["zero_time"] for e in got), via
    assert [e["offset"] for e in events if e["event"] == "committed"] == [6]
    assert [e["offset"] for e in events if e["event"] == "end_offset"] == [6]
    assert _grew(daemon, before) == []

    # What a current client reads: the same records, timestamps -1 as Kafka 3.x stored magic 0 input.
    consumer = KafkaConsumer(bootstrap_servers=daemon.bootstrap, consumer_timeout_ms=5000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records = [consumer.__next__() for _ in range(6)]
    consumer.close()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (i, k.encode(), v.encode(), -1) for i, k, v in expected
    ]


@needs_go
def test_kafka_go_produces_with_v2_and_reads_back_with_fetch_v2(
    daemon: Daemon, go_builder: GoBuilder, unique: str
) -> None:
    binary = go_builder.build("kafkago_v2")
    topic = f"kafkago-{unique}"
    used = [("CreateTopics", 0), ("Produce", 2), ("Fetch", 2), ("DeleteTopics", 1)]
    before = _counts(daemon, used)
    events = run_json_lines(binary, daemon.bootstrap, topic)
    base = 1700000000000
    assert [(e["offset"], e["key"], e["null_key"], e["value"], e["time_ms"]) for e in events] == [
        (0, "k0", False, "plain-0", base),
        (1, "k1", False, "plain-1", base + 1000),
        (2, "k2", False, "gzip-2", base + 2000),
        (3, "k3", False, "gzip-3", base + 3000),
        (4, "", True, "gzip-4", base + 4000),
    ]
    assert {e["high_watermark"] for e in events} == {5}
    assert _grew(daemon, before) == []


@needs_go
def test_sarama_snappy_and_lz4_message_sets_are_stored_with_their_codec_and_read_back(
    daemon: Daemon, go_builder: GoBuilder, unique: str
) -> None:
    binary = go_builder.build("sarama_codecs")
    topic, doomed = f"codecs-{unique}", f"codecs-doomed-{unique}"
    create_topic(daemon.bootstrap, topic, 1)
    create_topic(daemon.bootstrap, doomed, 1)
    before = _counts(daemon, [("Produce", 0), ("Produce", 2), ("Fetch", 0), ("Fetch", 2), ("DeleteTopics", 0)])
    events = run_json_lines(binary, daemon.bootstrap, topic, doomed)
    assert [(e["codec"], e["offset"]) for e in events if e["event"] == "produced"] == [
        ("snappy", 0),
        ("snappy", 1),
        ("snappy", 2),
        ("lz4", 3),
        ("lz4", 4),
        ("lz4", 5),
    ]
    value = [f"{c}-{i}-" + "abcd" * 40 for c in ("snappy", "lz4") for i in range(3)]
    got = {via: [(e["offset"], e["value"]) for e in events if e.get("via") == via] for via in ("fetch_v0", "fetch_v2")}
    assert got == {"fetch_v0": list(enumerate(value[:3])), "fetch_v2": list(enumerate(value))}
    assert _grew(daemon, before) == []
    # Stored as one v2 batch per message set (sarama may split a SendMessages into several), each
    # with the producer's codec (compression.type=producer).
    log = (daemon.proc.data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()
    codecs = [c for b in rec.iter_batches(log) for c in [b.compression] * b.record_count]
    assert codecs == [rec.COMPRESSION_SNAPPY] * 3 + [rec.COMPRESSION_LZ4] * 3
    # A current client (librdkafka decompresses both) reads the same records.
    consumer = Consumer(
        {"bootstrap.servers": daemon.bootstrap, "group.id": f"cg-{unique}", "auto.offset.reset": "earliest"}
    )
    consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
    seen: list[str] = []
    deadline = time.monotonic() + 15
    while len(seen) < 6 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value().decode())
    consumer.close()
    assert seen == value
    assert [e["error"] for e in events if e["event"] == "deleted"] == [0]
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    assert doomed not in admin.list_topics() and topic in admin.list_topics()
    admin.close()


@pytest.mark.parametrize(
    ("api_version", "used"),
    [
        # What the issue asks for: message format v1 (Produce v2, Fetch v3).
        (OLD_KAFKA_PYTHON, [("Produce", 2), ("Fetch", 3), ("ListOffsets", 1), ("JoinGroup", 1), ("OffsetCommit", 2)]),
        # The first group protocol: message format v0 and every group API at v0.
        (
            (0, 9),
            [
                ("Produce", 1),
                ("Fetch", 1),
                ("ListOffsets", 0),
                ("JoinGroup", 0),
                ("SyncGroup", 0),
                ("LeaveGroup", 0),
                ("OffsetFetch", 1),
            ],
        ),
    ],
    ids=["0.10.1", "0.9"],
)
def test_kafka_python_pinned_to_an_old_version_produces_and_consumes_through_a_group(
    daemon: Daemon, unique: str, api_version: tuple[int, ...], used: list[tuple[str, int]]
) -> None:
    topic, group = f"kp-old-{unique}-{len(used)}", f"kp-old-g-{unique}-{len(used)}"
    create_topic(daemon.bootstrap, topic, 2)
    before = _counts(daemon, used)
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap, api_version=api_version, linger_ms=20)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2) for i in range(10)]
    gz = KafkaProducer(
        bootstrap_servers=daemon.bootstrap, api_version=api_version, compression_type="gzip", linger_ms=20
    )
    futures += [gz.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2) for i in range(10, 20)]
    producer.flush()
    gz.flush()
    metas = [f.get(timeout=10) for f in futures]
    producer.close()
    gz.close()
    assert sorted((m.partition, m.offset) for m in metas) == [(p, o) for p in (0, 1) for o in range(10)]

    consumer = KafkaConsumer(
        bootstrap_servers=daemon.bootstrap,
        api_version=api_version,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    subscribe(consumer, topic)
    got: list[tuple[int, int, bytes, bytes]] = []
    deadline = time.monotonic() + 20
    while len(got) < 20 and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=200).values():
            got += [(r.partition, r.offset, r.key, r.value) for r in recs]
    consumer.commit()
    consumer.close()
    assert sorted(got) == sorted((i % 2, i // 2, b"k%d" % i, b"v%d" % i) for i in range(20))

    checker = KafkaConsumer(bootstrap_servers=daemon.bootstrap, group_id=group, enable_auto_commit=False)
    committed = {p: checker.committed(TopicPartition(topic, p)) for p in (0, 1)}
    checker.close()
    assert committed == {0: 10, 1: 10}
    assert _grew(daemon, before) == []


@needs_go
def test_lag_monitor_on_sarama_as_kafka_2_0_reads_consumer_offsets_and_end_offsets(
    daemon: Daemon, go_builder: GoBuilder, unique: str
) -> None:
    binary = go_builder.build("sarama_lag_monitor")
    topic, group = f"lag-{unique}", f"lag-g-{unique}"
    create_topic(daemon.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap)
    for i in range(9):
        producer.send(topic, value=b"x", partition=0 if i < 5 else 1)
    producer.flush()
    producer.close()
    # A group that consumed and committed, then went away: its group metadata and offsets stay.
    consumer = KafkaConsumer(bootstrap_servers=daemon.bootstrap, group_id=group, enable_auto_commit=False)
    subscribe(consumer, topic)
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=100)
    consumer.commit(
        {TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1), TopicPartition(topic, 1): OffsetAndMetadata(4, "", -1)}
    )
    consumer.close()

    used = [("Fetch", 4), ("ListOffsets", 1), ("ListOffsets", 0)]
    before = _counts(daemon, used)
    events = run_json_lines(binary, daemon.bootstrap, group, topic, "2")
    assert events[0] == {"event": "offsets_topic", "partitions": 50}
    records = [e for e in events if e["event"] == "record"]
    commits = {(e["partition"], e["offset"]) for e in records if e.get("kind") == "offset_commit"}
    assert (0, 2) in commits and (1, 4) in commits
    # Kafka writes offset commits as key v1 + value v3 and group metadata as value v3, which
    # Burrow 1.2 reports as undecodable, with real Kafka as here.
    assert {(e["key_version"], e["value_version"]) for e in records if e.get("kind") == "offset_commit"} == {(1, 3)}
    metadata = [e for e in records if e.get("kind") == "group_metadata"]
    assert metadata and {e["value_version"] for e in metadata} == {3}
    assert all("warning" in e for e in metadata)
    lag = sorted(
        (e["partition"], e["end_v1"], e["end_v0"], e["start_v0"], e["committed"], e["lag"])
        for e in events
        if e["event"] == "lag"
    )
    assert lag == [(0, 5, 5, 0, 2, 3), (1, 4, 4, 0, 4, 0)]
    assert _grew(daemon, before) == []


@pytest.mark.parametrize(("api_version", "commit_v", "fetch_v"), [((0, 8, 1), 0, 0), ((0, 8, 2), 1, 1)])
def test_kafka_python_pinned_to_0_8_commits_and_lists_all_topics_with_metadata_v0(
    daemon: Daemon, unique: str, api_version: tuple[int, ...], commit_v: int, fetch_v: int
) -> None:
    """Before groups (0.8.x): a standalone commit and fetch of offsets (OffsetCommit v0/v1,
    OffsetFetch v0/v1), and Metadata v0, where an empty topic list means every topic."""
    topic, group = f"kp08-{unique}-{commit_v}", f"kp08-g-{unique}-{commit_v}"
    create_topic(daemon.bootstrap, topic, 1)
    used = [("OffsetCommit", commit_v), ("OffsetFetch", fetch_v), ("Metadata", 0)]
    before = _counts(daemon, used)
    consumer = KafkaConsumer(
        bootstrap_servers=daemon.bootstrap, group_id=group, api_version=api_version, enable_auto_commit=False
    )
    assert topic in consumer.topics()  # Metadata v0 with no topics: all of them
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(42, "m", -1)})
    assert consumer.committed(tp) == 42
    consumer.close()
    # Current clients see the same commit.
    checker = KafkaConsumer(bootstrap_servers=daemon.bootstrap, group_id=group, enable_auto_commit=False)
    assert checker.committed(tp) == 42
    checker.close()
    assert _grew(daemon, before) == []
