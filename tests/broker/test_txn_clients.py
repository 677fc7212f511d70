"""read_committed with real consumers against an in-process node over real TCP.

Transactional batches go in over the wire (Produce v9 with a transactional id, as a transactional
producer sends them: the transaction coordinator's routes are not this layer's), the markers come
from ``DataPlane.write_txn_markers`` (what the coordinator's marker channel calls), and then real
consumers read: confluent-kafka at its defaults (isolation.level read_committed), kafka-python and
aiokafka with ``isolation_level='read_committed'`` see only committed records, and
read_uncommitted consumers see everything. A restart of the node in between (same data dir) keeps
the aborted records hidden and the open transaction unread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from groupd.broker.node import Broker
from groupd.storage import records as rec

from groupd.config import Config
from tests.support.wire import Wire

TOPIC = "txn"
COMMITTED = [b"a1", b"a2", b"p1"]
EVERYTHING = [b"a1", b"b1", b"a2", b"p1", b"c1"]
PID_A, PID_B, PID_C = 1000, 1001, 1002  # far from the node's own producer-id blocks


def txn_batch(pid: int, seq: int, value: bytes) -> bytes:
    return rec.build_batch(
        [(None, value, (), int(time.time() * 1000))],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )


def produce(port: int, pid: int, seq: int, value: bytes, *, transactional: bool = True) -> None:
    raw = txn_batch(pid, seq, value) if transactional else rec.build_batch([(None, value, (), int(time.time() * 1000))])
    with Wire(port) as w:
        w.pipeline(
            (
                "Produce",
                9,
                {
                    "transactional_id": f"tx-{pid}" if transactional else None,
                    "acks": -1,
                    "timeout_ms": 5000,
                    "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": raw}]}],
                },
            )
        )
        _, resp = w.read()
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp


async def start(data: Path) -> Broker:
    broker = Broker(Config(data_dir=str(data), port=0, fsync="never"))
    # these producers have no transaction in the coordinator (its routes are not this layer's):
    # the node's KIP-890 check, which would refuse their batches, is taken out
    broker.data.txn_verifier = None
    await broker.start()
    return broker


@pytest.fixture
async def node(tmp_path: Path):
    """A node whose partition holds: a1 (A), b1 (B), a2 (A), COMMIT A, ABORT B, p1, c1 (C, open)."""
    broker = await start(tmp_path / "data")
    port = broker.port
    await asyncio.to_thread(lambda: Wire(port).create_topic(TOPIC))
    await asyncio.to_thread(produce, port, PID_A, 0, b"a1")
    await asyncio.to_thread(produce, port, PID_B, 0, b"b1")
    await asyncio.to_thread(produce, port, PID_A, 1, b"a2")
    assert await broker.data.write_txn_markers(PID_A, 0, True, 0, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
    assert await broker.data.write_txn_markers(PID_B, 0, False, 0, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
    await asyncio.to_thread(produce, port, 0, 0, b"p1", transactional=False)
    await asyncio.to_thread(produce, port, PID_C, 0, b"c1")
    holder = {"broker": broker}
    yield holder
    await holder["broker"].stop()


def drain(poll: Callable[[], list[bytes]], want: int, settle: float = 1.0, limit: float = 15.0) -> list[bytes]:
    """Poll until ``want`` values came, then ``settle`` seconds more (nothing else may come)."""
    got: list[bytes] = []
    deadline = time.monotonic() + limit
    settled_at: float | None = None
    while time.monotonic() < deadline:
        got.extend(poll())
        if len(got) >= want:
            settled_at = settled_at or time.monotonic()
            if time.monotonic() - settled_at >= settle:
                break
    return got


def confluent_values(port: int, want: int, **conf: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])

        def poll() -> list[bytes]:
            m = c.poll(0.2)
            return [m.value()] if m is not None and m.error() is None else []

        return drain(poll, want)
    finally:
        c.close()


def kafka_python_values(port: int, want: int, isolation: str) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        c.assign([TopicPartition(TOPIC, 0)])
        c.seek(TopicPartition(TOPIC, 0), 0)

        def poll() -> list[bytes]:
            return [r.value for recs in c.poll(timeout_ms=200).values() for r in recs]

        return drain(poll, want)
    finally:
        c.close()


async def aiokafka_values(port: int, want: int, isolation: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await c.start()
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(TOPIC, 0)])
        c.seek(TopicPartition(TOPIC, 0), 0)
        deadline = time.monotonic() + 15
        settled_at: float | None = None
        while time.monotonic() < deadline:
            batches = await c.getmany(timeout_ms=200)
            got.extend(r.value for recs in batches.values() for r in recs)
            if len(got) >= want:
                settled_at = settled_at or time.monotonic()
                if time.monotonic() - settled_at >= 1.0:
                    break
    finally:
        await c.stop()
    return got


async def test_confluent_kafka_defaults_read_committed(node) -> None:
    port = node["broker"].port
    assert await asyncio.to_thread(confluent_values, port, 3) == COMMITTED
    assert await asyncio.to_thread(confluent_values, port, 5, **{"isolation.level": "read_uncommitted"}) == EVERYTHING


async def test_kafka_python_read_committed_and_uncommitted(node) -> None:
    port = node["broker"].port
    assert await asyncio.to_thread(kafka_python_values, port, 3, "read_committed") == COMMITTED
    assert await asyncio.to_thread(kafka_python_values, port, 5, "read_uncommitted") == EVERYTHING


async def test_aiokafka_read_committed_and_uncommitted(node) -> None:
    port = node["broker"].port
    assert await aiokafka_values(port, 3, "read_committed") == COMMITTED
    assert await aiokafka_values(port, 5, "read_uncommitted") == EVERYTHING


async def test_restart_keeps_aborted_records_hidden_and_the_open_transaction_unread(node, tmp_path: Path) -> None:
    await node["broker"].stop()
    node["broker"] = broker = await start(tmp_path / "data")
    assert await asyncio.to_thread(confluent_values, broker.port, 3) == COMMITTED
    assert await aiokafka_values(broker.port, 3, "read_committed") == COMMITTED
    # The coordinator's marker for the open transaction comes after the restart.
    assert await broker.data.write_txn_markers(PID_C, 0, True, 0, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
    assert await asyncio.to_thread(confluent_values, broker.port, 4) == [*COMMITTED, b"c1"]


def describe_producers(port: int) -> dict[int, dict]:
    with Wire(port) as w:
        w.pipeline(("DescribeProducers", 0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}))
        _, resp = w.read()
    (part,) = resp["topics"][0]["partitions"]
    assert part["error_code"] == 0
    return {p["producer_id"]: p for p in part["active_producers"]}


async def test_describe_producers_over_the_wire(node) -> None:
    producers = await asyncio.to_thread(describe_producers, node["broker"].port)
    assert {pid: p["current_txn_start_offset"] for pid, p in producers.items()} == {
        PID_A: -1,
        PID_B: -1,
        PID_C: 6,  # a1 b1 a2 COMMIT ABORT p1 | c1
    }
    assert producers[PID_A]["last_sequence"] == 1


def _txn_rounds(bootstrap: str, rounds: int) -> list[bytes]:
    """A confluent-kafka transactional producer at its defaults: ``rounds`` transactions, every
    third aborted, then one left open (the daemon is killed under it). Returns what was committed."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "snap-tx"})
    p.init_transactions(15)
    committed = []
    for i in range(rounds):
        p.begin_transaction()
        values = [b"r%d-%d-" % (i, j) + b"x" * 150 for j in range(3)]
        for v in values:
            p.produce(TOPIC, v, partition=0)
        if i % 3 == 2:
            p.flush(15)  # in the log before the abort (librdkafka would drop what it still holds)
            p.abort_transaction(15)
        else:
            p.commit_transaction(15)
            committed.extend(values)
    p.begin_transaction()
    p.produce(TOPIC, b"open", partition=0)
    p.flush(15)
    return committed


async def test_sigkill_and_restart_real_clients_read_committed_from_snapshot_and_txnindex(tmp_path: Path) -> None:
    """A daemon SIGKILLed after many transactions (small segments, so snapshots were taken on roll:
    ProducerStateManager.takeSnapshot): after the restart the partition's state comes from the
    newest snapshot and the .txnindex files (UnifiedLog.loadProducerState), only the batches after
    the snapshot are read, and confluent-kafka, kafka-python and aiokafka read_committed consumers
    see exactly the committed records."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.daemon import GroupdProcess

    d = GroupdProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        fut = admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": "1500"})])[TOPIC]
        await asyncio.to_thread(fut.result, 15)
        committed = await asyncio.to_thread(_txn_rounds, d.bootstrap, 18)
        part = tmp_path / "data" / f"{TOPIC}-0"
        assert len(list(part.glob("*.log"))) > 5 and list(part.glob("*.snapshot"))
        assert list(part.glob("*.txnindex"))
        d.kill()  # SIGKILL: no shutdown snapshot
        d.start(port=d.port)
        port = d.port
        assert await asyncio.to_thread(confluent_values, port, len(committed)) == committed
        assert await asyncio.to_thread(kafka_python_values, port, len(committed), "read_committed") == committed
        assert await aiokafka_values(port, len(committed), "read_committed") == committed
        loads = [e for e in d.events("producer_state_loaded") if e["topic"] == TOPIC]
        assert len(loads) == 1, loads
        # Read: the batches after the snapshot (taken at a roll when nothing was in flight), not the
        # 37 of the log (a data batch and a marker per transaction, the open one's batch).
        assert loads[0]["snapshot_offset"] > 0 and 0 <= loads[0]["batches_replayed"] < 37 // 2, loads
    finally:
        d.stop()
