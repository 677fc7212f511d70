"""Issue 6, data plane: real clients produce to and consume from a real ``groupd serve``.

Every client produces keyed messages to explicit partitions and reads them back with
assign() + seek, checking that each partition holds exactly what was sent, in order. Compression
codecs are exercised where the client can encode them here (kafka-python and aiokafka only have
gzip without extra packages; librdkafka and kcat have all four).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e

N = 300
PARTITIONS = 3


def _create(groupd: GroupdProcess, topic: str, partitions: int = PARTITIONS, **configs: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)])[
        topic
    ].result(15)
    return topic


def _messages(n: int = N, partitions: int = PARTITIONS) -> list[tuple[int, bytes, bytes]]:
    return [(i % partitions, b"k%d" % (i % 17), b"value-%05d-" % i + b"x" * (i % 50)) for i in range(n)]


def _expected(msgs: list[tuple[int, bytes, bytes]]) -> dict[int, list[tuple[bytes, bytes]]]:
    out: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for p, k, v in msgs:
        out[p].append((k, v))
    return dict(out)


def _confluent_consume(
    groupd: GroupdProcess, topic: str, partitions: int, done: Callable[[list[tuple[int, int, bytes, bytes]]], bool]
) -> list[tuple[int, int, bytes, bytes]]:
    """(partition, offset, key, value) of every record read from offset 0 until ``done`` (or 15 s)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    got: list[tuple[int, int, bytes, bytes]] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 15
        while not done(got) and time.monotonic() < deadline:
            for m in c.consume(500, 0.2):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return got


def _confluent_read(groupd: GroupdProcess, topic: str, n: int, partitions: int = PARTITIONS) -> dict:
    got: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    offsets: dict[int, list[int]] = defaultdict(list)
    for p, offset, key, value in _confluent_consume(groupd, topic, partitions, lambda recs: len(recs) >= n):
        got[p].append((key, value))
        offsets[p].append(offset)
    for p, offs in offsets.items():
        assert offs == list(range(len(offs))), f"partition {p}: offsets not contiguous"
    return dict(got)


# --------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_idempotent_producer_every_codec(groupd: GroupdProcess, unique: str, codec: str) -> None:
    from confluent_kafka import Producer

    topic = _create(groupd, f"ck-{codec}-{unique}")
    msgs = _messages()
    p = Producer(
        {
            "bootstrap.servers": groupd.bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    errors: list = []
    for part, k, v in msgs:
        p.produce(topic, key=k, value=v, partition=part, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(15) == 0
    assert errors == []
    assert _confluent_read(groupd, topic, N) == _expected(msgs)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks(groupd: GroupdProcess, unique: str, acks: str) -> None:
    from confluent_kafka import Producer

    topic = _create(groupd, f"ck-acks{acks}-{unique}")
    msgs = _messages(100)
    p = Producer({"bootstrap.servers": groupd.bootstrap, "acks": acks, "linger.ms": 2})
    delivered: list = []
    for part, k, v in msgs:
        p.produce(topic, key=k, value=v, partition=part, on_delivery=lambda e, m: delivered.append((e, m.offset())))
    assert p.flush(15) == 0
    assert all(e is None for e, _ in delivered)
    if acks != "0":  # with acks=0 the client never learns offsets
        assert sorted(o for _, o in delivered) == sorted(i // PARTITIONS for i in range(100))
    assert _confluent_read(groupd, topic, 100) == _expected(msgs)


def test_confluent_watermarks_and_offsets_for_times(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = _create(groupd, f"ck-lo-{unique}", 1)
    p = Producer({"bootstrap.servers": groupd.bootstrap, "linger.ms": 0})
    base = 1_600_000_000_000
    for i in range(10):
        p.produce(topic, value=b"%d" % i, partition=0, timestamp=base + i * 1000)
        p.flush(5)  # one batch per message, so timestamps are per batch too
    c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": "unused"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        (tp,) = c.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
        assert tp.offset == 5
        (tp,) = c.offsets_for_times([TopicPartition(topic, 0, base + 99_000)], timeout=10)
        assert tp.offset == -1  # OFFSET_END: nothing that late
        (tp,) = c.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
        assert tp.offset == 0
        # assign() at the offset found by timestamp reads from there on.
        (tp,) = c.offsets_for_times([TopicPartition(topic, 0, base + 6500)], timeout=10)
        c.assign([tp])
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            got += [(m.offset(), m.value(), m.timestamp()[1]) for m in c.consume(10, 0.2) if m.error() is None]
        assert got == [(i, b"%d" % i, base + i * 1000) for i in (7, 8, 9)]
    finally:
        c.close()


def test_fetch_long_poll_is_woken_by_a_produce(groupd: GroupdProcess, unique: str) -> None:
    """The consumer waits in a 10 s long poll; a produce must answer it at once."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = _create(groupd, f"ck-lp-{unique}", 1)
    c = Consumer(
        {
            "bootstrap.servers": groupd.bootstrap,
            "group.id": "unused",
            "fetch.wait.max.ms": 10_000,
            "fetch.min.bytes": 1,
        }
    )
    p = Producer({"bootstrap.servers": groupd.bootstrap, "linger.ms": 0})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        assert c.poll(1.0) is None  # the fetch is now parked in the broker
        t0 = time.monotonic()
        p.produce(topic, value=b"wake up", partition=0)
        p.flush(5)
        msg = None
        while msg is None and time.monotonic() - t0 < 9:
            msg = c.poll(0.1)
        latency = time.monotonic() - t0
        assert msg is not None and msg.value() == b"wake up"
        assert latency < 2.0, f"long poll answered after {latency:.2f}s"
    finally:
        c.close()


def test_produce_errors_reach_the_client(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import KafkaError, Producer

    topic = _create(groupd, f"ck-big-{unique}", 1, **{"max.message.bytes": "2000"})
    p = Producer({"bootstrap.servers": groupd.bootstrap, "linger.ms": 0, "message.max.bytes": 100_000})
    results: list = []
    p.produce(topic, value=b"x" * 10_000, partition=0, on_delivery=lambda e, m: results.append(e))
    p.flush(10)  # separate batches: the whole batch is refused, as Kafka does
    p.produce(topic, value=b"small", partition=0, on_delivery=lambda e, m: results.append(e))
    p.flush(10)
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert results[1] is None


# --------------------------------------------------------------------------------------------
# kafka-python


@pytest.mark.parametrize(("acks", "codec"), [(0, None), (1, "gzip"), ("all", None), ("all", "gzip")])
def test_kafka_python_produce_and_read_back(groupd: GroupdProcess, unique: str, acks, codec) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _create(groupd, f"kp-{acks}-{codec}-{unique}")
    msgs = _messages()
    producer = KafkaProducer(
        bootstrap_servers=groupd.bootstrap,
        acks=acks,
        compression_type=codec,
        enable_idempotence=acks == "all",
        linger_ms=5,
    )
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p) for p, k, v in msgs]
        producer.flush(15)
        metas = [f.get(10) for f in futures]
    finally:
        producer.close(5)
    if acks != 0:
        assert [m.offset for m in metas] == [i // PARTITIONS for i in range(N)]
    consumer = KafkaConsumer(bootstrap_servers=groupd.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
        deadline = time.monotonic() + 15
        while sum(map(len, got.values())) < N and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                got[tp.partition] += [(r.key, r.value) for r in records]
        assert dict(got) == _expected(msgs)
        assert consumer.end_offsets(tps) == {tp: N // PARTITIONS for tp in tps}
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
    finally:
        consumer.close()


def test_kafka_python_offsets_for_times(groupd: GroupdProcess, unique: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _create(groupd, f"kp-ts-{unique}", 1)
    base = 1_600_000_000_000
    producer = KafkaProducer(bootstrap_servers=groupd.bootstrap, linger_ms=0)
    try:
        for i in range(5):
            producer.send(topic, value=b"%d" % i, partition=0, timestamp_ms=base + i * 1000).get(10)
    finally:
        producer.close(5)
    consumer = KafkaConsumer(bootstrap_servers=groupd.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: base + 2500})[tp]
        assert (found.offset, found.timestamp) == (3, base + 3000)
        assert consumer.offsets_for_times({tp: base + 10_000})[tp] is None
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------
# aiokafka


@pytest.mark.parametrize("codec", [None, "gzip"])
async def test_aiokafka_idempotent_produce_and_read_back(groupd: GroupdProcess, unique: str, codec) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _create(groupd, f"aio-{codec}-{unique}")
    msgs = _messages()
    producer = AIOKafkaProducer(
        bootstrap_servers=groupd.bootstrap, enable_idempotence=True, acks="all", compression_type=codec, linger_ms=5
    )
    await producer.start()
    try:
        futures = [await producer.send(topic, key=k, value=v, partition=p) for p, k, v in msgs]
        metas = [await f for f in futures]
    finally:
        await producer.stop()
    assert [m.offset for m in metas] == [i // PARTITIONS for i in range(N)]
    consumer = AIOKafkaConsumer(bootstrap_servers=groupd.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
        deadline = time.monotonic() + 15
        while sum(map(len, got.values())) < N and time.monotonic() < deadline:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                got[tp.partition] += [(r.key, r.value) for r in records]
        assert dict(got) == _expected(msgs)
        assert await consumer.end_offsets(tps) == {tp: N // PARTITIONS for tp in tps}
        tp0 = tps[0]
        ts = metas[0].timestamp
        found = (await consumer.offsets_for_times({tp0: ts}))[tp0]
        assert found is not None and found.offset == 0
    finally:
        await consumer.stop()


async def test_aiokafka_long_poll_consumer_sees_new_messages(groupd: GroupdProcess, unique: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _create(groupd, f"aio-lp-{unique}", 1)
    consumer = AIOKafkaConsumer(bootstrap_servers=groupd.bootstrap, fetch_max_wait_ms=10_000)
    producer = AIOKafkaProducer(bootstrap_servers=groupd.bootstrap)
    await consumer.start()
    await producer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        assert await consumer.getmany(timeout_ms=800) == {}
        t0 = time.monotonic()
        await producer.send_and_wait(topic, b"hello", partition=0)
        records = await consumer.getmany(timeout_ms=5000)
        while not records and time.monotonic() - t0 < 8:
            records = await consumer.getmany(timeout_ms=500)
        assert [r.value for r in records[tp]] == [b"hello"]
        assert time.monotonic() - t0 < 2.0
    finally:
        await producer.stop()
        await consumer.stop()


# --------------------------------------------------------------------------------------------
# kcat


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (.ci/run installs it)")
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_kcat_produce_and_consume(groupd: GroupdProcess, unique: str, codec: str) -> None:
    topic = _create(groupd, f"kcat-{codec}-{unique}", 2)
    lines = [f"key{i}:value {i}" for i in range(50)]
    subprocess.run(
        ["kcat", "-P", "-b", groupd.bootstrap, "-t", topic, "-p", "1", "-K", ":", "-z", codec],
        input="\n".join(lines) + "\n",
        text=True,
        timeout=20,
        check=True,
    )
    out = subprocess.run(
        ["kcat", "-C", "-b", groupd.bootstrap, "-t", topic, "-p", "1", "-o", "beginning", "-e", "-f", "%k:%s:%o\n"],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    ).stdout
    assert out.splitlines() == [f"{line}:{i}" for i, line in enumerate(lines)]
    empty = subprocess.run(
        ["kcat", "-C", "-b", groupd.bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    ).stdout
    assert empty == ""


# --------------------------------------------------------------------------------------------
# restarts


def test_idempotent_producer_across_a_daemon_kill_writes_each_message_once(tmp_path) -> None:
    """SIGKILL the daemon under a steady idempotent producer: every message is stored exactly
    once, in order (retries of batches that were written but not acknowledged are recognised from
    the producer state rebuilt from the log)."""
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    n = 6000
    d = GroupdProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        admin.create_topics([NewTopic("r", 2, 1)])["r"].result(15)
        p = Producer(
            {
                "bootstrap.servers": d.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 1,
                "batch.num.messages": 50,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 100,
            }
        )
        errors: list = []

        def produce() -> None:
            for i in range(n):
                p.produce("r", value=b"%06d" % i, partition=i % 2, on_delivery=lambda e, m: e and errors.append(e))
                if i % 100 == 0:
                    p.poll(0)
                    time.sleep(0.01)  # ~10k messages/s, so the kill lands mid-stream
            p.flush(30)

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(0.25)
        d.kill()
        d.start(port=d.port)
        t.join(60)
        assert errors == []
        c = Consumer({"bootstrap.servers": d.bootstrap, "group.id": "unused"})
        try:
            c.assign([TopicPartition("r", i, 0) for i in range(2)])
            got: dict[int, list[int]] = defaultdict(list)
            deadline = time.monotonic() + 15
            while sum(map(len, got.values())) < n and time.monotonic() < deadline:
                for m in c.consume(5000, 0.3):
                    assert m.error() is None, m.error()
                    got[m.partition()].append(int(m.value()))
            # Nothing more arrives: no duplicates hiding behind the count.
            assert [m for m in c.consume(100, 0.5) if m.error() is None] == []
        finally:
            c.close()
        assert got == {0: list(range(0, n, 2)), 1: list(range(1, n, 2))}
    finally:
        d.stop()


# --------------------------------------------------------------------------------------------
# compaction on the cleaner's cadence


@pytest.fixture(scope="module")
def cleaning_groupd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    """A daemon whose cleaner looks every 200 ms (log.cleaner.backoff.ms; Kafka's default is 15 s)
    while retention keeps its 300 s check: what gets compacted here is the cleaner's doing."""
    d = GroupdProcess(Path(tmp_path_factory.mktemp("cleaner")) / "data", "--log-cleaner-backoff-ms", "200")
    d.start()
    try:
        yield d
    finally:
        d.stop()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compacted_topic_is_cleaned_on_the_cleaner_cadence(
    cleaning_groupd: GroupdProcess, unique: str, codec: str
) -> None:
    """librdkafka batches of every codec on a compacted topic: accepted (groupd reads their keys)
    and compacted by the daemon well before the retention check would run."""
    from confluent_kafka import Producer

    d = cleaning_groupd
    topic = _create(d, f"cc-{codec}-{unique}", 1, **{"cleanup.policy": "compact", "segment.bytes": "4096"})
    p = Producer({"bootstrap.servers": d.bootstrap, "compression.type": codec, "linger.ms": 0})
    errors: list = []
    latest: dict[bytes, bytes] = {}
    n = 300
    for i in range(n):
        key, value = b"k%d" % (i % 5), b"%05d-" % i + os.urandom(40).hex().encode()
        latest[key] = value
        p.produce(topic, key=key, value=value, partition=0, on_delivery=lambda e, m: e and errors.append(e))
        if i % 10 == 9:
            assert p.flush(10) == 0  # batches of 10: several segments of 4 KiB
    assert errors == []

    def compactions() -> list[dict[str, object]]:
        return [e for e in d.events("storage.compaction.done") if f"{os.sep}{topic}-0" in str(e["path"])]

    deadline = time.monotonic() + 10
    while not compactions() and time.monotonic() < deadline:
        time.sleep(0.1)
    [done, *_] = compactions()
    assert int(done["records_dropped"]) > 0  # type: ignore[call-overload]

    got = [
        (o, k, v) for _, o, k, v in _confluent_consume(d, topic, 1, lambda recs: bool(recs) and recs[-1][1] >= n - 1)
    ]
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)) and offsets[-1] == n - 1
    assert len(got) < n  # superseded records of the cleaned segments are gone
    assert {k: v for _, k, v in got} == latest  # the latest value of every key is kept
