"""A consume-transform-produce member in its own process (exactly-once), so a test can SIGKILL it.

    python -m tests.support.eos_member CLIENT BOOTSTRAP GROUP INPUT OUTPUT TRANSACTIONAL_ID

CLIENT is ``confluent`` (confluent-kafka), ``aiokafka`` or ``kafka-python``. Each transaction reads a
batch from INPUT (read_committed), writes every record to OUTPUT with the same key and the value
prefixed ``out:``, sends the batch's next offsets to the transaction (TxnOffsetCommit) and commits.
It prints ``open`` once a transaction's records are in the broker (flushed, not yet committed: the
moment a test SIGKILLs it), and ``committed <total>`` after each commit. ``EOS_PAUSE_MS`` (default
30) is how long a flushed transaction stays open before its commit.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

PAUSE_S = int(os.environ.get("EOS_PAUSE_MS", "30")) / 1000
BATCH = 200
TXN_TIMEOUT_MS = 4000  # a killed member's transaction is aborted by the coordinator this soon
SESSION_TIMEOUT_MS = 6000


def say(line: str) -> None:
    print(line, flush=True)


def confluent(bootstrap: str, group: str, source: str, sink: str, txn_id: str) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 1000,
        }
    )
    # librdkafka 2.16 re-bootstraps when every broker is down (a one-node cluster being restarted)
    # and a TxnOffsetCommit queued meanwhile stays bound to the decommissioned broker handle for
    # ever ("Handle is terminating in state TRY_CONNECT"): send_offsets_to_transaction never returns
    extra: dict[str, Any] = {"metadata.recovery.strategy": "none"}
    if os.environ.get("EOS_DEBUG"):
        extra["debug"] = os.environ["EOS_DEBUG"]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": TXN_TIMEOUT_MS, **extra}
    )
    producer.init_transactions(60)
    consumer.subscribe([source])
    total = 0
    while True:
        msgs = [m for m in consumer.consume(BATCH, 0.2) if not m.error()]
        if not msgs:
            continue
        positions: dict[int, int] = {}
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, key=m.key(), value=b"out:" + m.value())
                positions[m.partition()] = max(positions.get(m.partition(), 0), m.offset() + 1)
            producer.flush(60)
            say("open")
            time.sleep(PAUSE_S)
            offsets = [TopicPartition(source, p, o) for p, o in sorted(positions.items())]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
            _retry_commit(producer, KafkaException)
        except KafkaException as e:
            err = e.args[0]
            if not err.txn_requires_abort():
                raise
            say(f"aborting {err}")
            producer.abort_transaction(60)
            # back to what the group committed: the aborted batch is read again
            for tp in consumer.committed(consumer.assignment(), 60):
                consumer.seek(TopicPartition(source, tp.partition, tp.offset if tp.offset >= 0 else 0))
            continue
        total += len(msgs)
        say(f"committed {total}")


def _retry_commit(producer: Any, error: type[Exception]) -> None:
    """librdkafka: a retriable commit error means "call commit_transaction again"."""
    for _ in range(30):
        try:
            producer.commit_transaction(60)
            return
        except error as e:
            if not e.args[0].retriable():
                raise
            time.sleep(0.2)
    producer.commit_transaction(60)


class _Watchdog:
    """Ends the process (exit 3) when a block takes longer than ``seconds``: kafka-python 3.0.12's
    transactional calls wait without a timeout, and after a broker restart its sender can stay
    "not ready" for the coordinator node for good; a supervisor starts the member again."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        import threading

        def expire() -> None:
            say("stuck")
            os._exit(3)

        self.timer = threading.Timer(self.seconds, expire)
        self.timer.daemon = True
        self.timer.start()

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()


def kafka_python(bootstrap: str, group: str, source: str, sink: str, txn_id: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
    )
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=txn_id, transaction_timeout_ms=TXN_TIMEOUT_MS
    )
    producer.init_transactions()
    consumer.subscribe([source])
    total = 0
    while True:
        batch = consumer.poll(timeout_ms=200, max_records=BATCH)
        if not batch:
            continue
        try:
            with _Watchdog(15):
                producer.begin_transaction()
                for msgs in batch.values():
                    for m in msgs:
                        producer.send(sink, key=m.key, value=b"out:" + m.value)
                producer.flush()
                say("open")
                time.sleep(PAUSE_S)
                offsets = {tp: OffsetAndMetadata(msgs[-1].offset + 1, "", -1) for tp, msgs in batch.items()}
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                producer.commit_transaction()
        except KafkaError as e:
            if getattr(e, "fatal", False) or type(e).__name__ in ("ProducerFencedError", "InvalidProducerEpochError"):
                raise
            say(f"aborting {e!r}")
            producer.abort_transaction()
            for tp in consumer.assignment():
                consumer.seek(tp, consumer.committed(tp) or 0)
            continue
        total += sum(len(msgs) for msgs in batch.values())
        say(f"committed {total}")


def aiokafka(bootstrap: str, group: str, source: str, sink: str, txn_id: str) -> None:
    """aiokafka reads committed offsets with OffsetFetch v3, without KIP-447's require_stable: from a
    transaction's commit until the coordinator has written its markers, it reads the offsets before
    it (so does Kafka's OffsetMetadataManager.fetchOffsets). A rebalance in that window made the member
    process its last committed batch again (runs under load: the same 200 records committed twice). So, as an
    application of a pre-KIP-447 client must: a rebalance waits for the transaction under way, then
    until what it committed reads back, before the member rejoins; a batch fetched before a
    rebalance is not processed, its partitions are read again from where it started."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError, ProducerFenced

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=1000,
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=txn_id, transaction_timeout_ms=TXN_TIMEOUT_MS
        )
        in_txn = asyncio.Lock()
        acked: dict[TopicPartition, int] = {}  # offsets of this member's committed transactions
        rebalances = 0

        class Readback(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                nonlocal rebalances
                async with in_txn:
                    rebalances += 1
                    deadline = time.monotonic() + 30
                    for tp in revoked:
                        while tp in acked and (await consumer.committed(tp) or 0) < acked[tp]:
                            if time.monotonic() > deadline:
                                return
                            await asyncio.sleep(0.05)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        await producer.start()
        await consumer.start()
        consumer.subscribe([source], listener=Readback())
        total = 0
        while True:
            seen = rebalances
            batch = await consumer.getmany(timeout_ms=200, max_records=BATCH)
            if not batch:
                continue
            async with in_txn:
                if rebalances != seen:
                    for tp, msgs in batch.items():
                        if tp in consumer.assignment():
                            consumer.seek(tp, max(msgs[0].offset, await consumer.committed(tp) or 0))
                    continue
                try:
                    async with producer.transaction():
                        for msgs in batch.values():
                            for m in msgs:
                                await producer.send(sink, key=m.key, value=b"out:" + m.value)
                        await producer.flush()
                        say("open")
                        await asyncio.sleep(PAUSE_S)
                        offsets = {tp: msgs[-1].offset + 1 for tp, msgs in batch.items()}
                        await producer.send_offsets_to_transaction(offsets, group)
                except ProducerFenced:
                    raise
                except KafkaError as e:
                    # the transaction() context aborted it: read the batch again
                    say(f"aborted {e!r}")
                    for tp in consumer.assignment():
                        consumer.seek(tp, max(await consumer.committed(tp) or 0, acked.get(tp, 0)))
                    continue
                acked.update(offsets)
            total += sum(len(msgs) for msgs in batch.values())
            say(f"committed {total}")

    asyncio.run(run())


def main() -> None:
    client, bootstrap, group, source, sink, txn_id = sys.argv[1:7]
    if os.environ.get("EOS_DEBUG"):
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    runners = {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}
    runners[client](bootstrap, group, source, sink, txn_id)


if __name__ == "__main__":
    main()
