"""``__transaction_state`` is compacted like ``__consumer_offsets`` (Kafka's transaction state log is
cleanup.policy=compact): a transactional id that commits over and over leaves its latest record
behind, and the transaction coordinator replayed from the compacted log is the live one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from groupd.broker.topics import TRANSACTION_STATE_TOPIC
from groupd.transactions.coordinator import partition_for

from tests.broker.test_offsets_compaction import on_disk, start

TXNS = 300


def transactions(port: int, txn_id: str, topic: str) -> None:
    from confluent_kafka import Producer

    p: Any = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(30)
    for i in range(TXNS):
        p.begin_transaction()
        p.produce(topic, str(i).encode())
        p.commit_transaction(30)


async def test_the_transaction_log_is_compacted_and_replays_the_same_state(tmp_path: Path) -> None:
    data, txn_id = tmp_path / "data", "compacted-txn"
    broker = await start(data)
    try:
        broker.admin.topics.create("out", 1)
        for cb in broker.admin.on_topic_created:
            cb(broker.topics.get("out"))
        await asyncio.to_thread(transactions, broker.port, txn_id, "out")
        await broker.txns.loaded.wait()
        plog = broker.logs.get(TRANSACTION_STATE_TOPIC, partition_for(txn_id))
        assert plog is not None
        before = len(on_disk(plog))
        assert len(plog.segments) > 2  # a few hundred transactions rolled 8 KiB segments
        assert await broker.data.run_cleaner()
        after = len(on_disk(plog))
        assert after < before / 4, (before, after)
        live = broker.txn_core.snapshot()
    finally:
        await broker.stop()
    again = await start(data)
    try:
        await again.txns.loaded.wait()
        assert again.txn_core.snapshot() == live
        assert live[txn_id].state.name == "COMPLETE_COMMIT"
    finally:
        await again.stop()
