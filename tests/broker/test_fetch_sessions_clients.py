"""Real clients over fetch sessions: kafka-python 3.0.12's ``FetchSessionHandler`` (KIP-227) opens a
session and then fetches incrementally, at its default settings, from a real daemon while a
producer writes to a multi-partition topic; every record arrives exactly once and in order per
partition, and the daemon's metrics show incremental fetches were served. librdkafka
(confluent-kafka), which fetches sessionless (epoch -1), still reads everything.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from kafka import KafkaConsumer, KafkaProducer

from tests.support import kafka_python
from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient

from .test_fetch_parking import free_port
from .test_fetch_sessions_wire import create_topic, session_requests

pytestmark = pytest.mark.e2e

PARTITIONS = 4
PER_PARTITION = 300


def _daemon(tmp_path_factory: pytest.TempPathFactory, brokers: int) -> Iterator[tuple[GroupdProcess, int]]:
    port = free_port()
    d = GroupdProcess(
        tmp_path_factory.mktemp("fs-clients") / "data",
        "--metrics-port",
        str(port),
        "--group-initial-rebalance-delay-ms",
        "0",
        "--brokers",
        str(brokers),
    ).start()
    try:
        yield d, port
    finally:
        d.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GroupdProcess, int]]:
    yield from _daemon(tmp_path_factory, 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GroupdProcess, int]]:
    """Three brokers in one process: the consumer keeps a session with each (a cache per broker)."""
    yield from _daemon(tmp_path_factory, 3)


def expected() -> dict[int, list[bytes]]:
    return {p: [f"{p}-{i}".encode() for i in range(PER_PARTITION)] for p in range(PARTITIONS)}


def produce_slowly(bootstrap: str, topic: str, errors: list[BaseException]) -> None:
    """Every partition's values in order, in small steps, while the consumer reads."""
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        try:
            for i in range(PER_PARTITION):
                for p in range(PARTITIONS):
                    producer.send(topic, value=f"{p}-{i}".encode(), partition=p)
                if i % 20 == 19:
                    producer.flush()
                    time.sleep(0.05)
            producer.flush()
        finally:
            producer.close()
    except BaseException as exc:  # reported by the test
        errors.append(exc)


@pytest.mark.parametrize("where", ["daemon", "cluster"])
def test_kafka_python_consumes_over_an_incremental_session(where: str, request: pytest.FixtureRequest) -> None:
    proc, metrics_port = request.getfixturevalue(where)
    topic = f"fs-kp-{uuid.uuid4().hex[:8]}"
    c = RawClient(proc.port)
    try:
        create_topic(c, topic, PARTITIONS)
    finally:
        c.close()
    before = session_requests(metrics_port)
    consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, group_id=f"g-{topic}", auto_offset_reset="earliest")
    errors: list[BaseException] = []
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    writer = threading.Thread(target=produce_slowly, args=(proc.bootstrap, topic, errors))
    try:
        kafka_python.subscribe(consumer, topic)
        writer.start()
        deadline = time.monotonic() + 90
        while sum(map(len, got.values())) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(r.value for r in records)
        writer.join(60)
    finally:
        consumer.close()
    assert not errors, errors
    assert got == expected()  # exactly once, in order, per partition
    after = session_requests(metrics_port)
    assert after["incremental"] - before["incremental"] > 0, (before, after)
    # a session with each broker it fetches from (the cluster's partitions are spread over three)
    assert after["full"] - before["full"] >= (3 if where == "cluster" else 1)
    assert after["error"] == before["error"]  # never a session error on the way


def test_confluent_kafka_still_consumes_sessionless(daemon: tuple[GroupdProcess, int]) -> None:
    proc, metrics_port = daemon
    topic = f"fs-ck-{uuid.uuid4().hex[:8]}"
    c = RawClient(proc.port)
    try:
        create_topic(c, topic, PARTITIONS)
    finally:
        c.close()
    errors: list[BaseException] = []
    produce_slowly(proc.bootstrap, topic, errors)
    assert not errors, errors
    before = session_requests(metrics_port)
    consumer = Consumer(
        {"bootstrap.servers": proc.bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            m: Any = consumer.poll(0.5)
            if m is None or m.error():
                continue
            got[m.partition()].append(m.value())
    finally:
        consumer.close()
    assert got == expected()
    after = session_requests(metrics_port)
    assert after["sessionless"] - before["sessionless"] > 0
