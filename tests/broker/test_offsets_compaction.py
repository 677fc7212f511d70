"""The broker compacts ``__consumer_offsets`` itself, as a Kafka broker's LogCleaner does (the topic
is cleanup.policy=compact): a group committing over and over leaves one record per key behind, not
one per commit, so neither the partition nor the start-up replay grows without bound.

An in-process node over real TCP, confluent-kafka committing at its defaults while the data plane's
cleaner passes run beside the group shell's appends, then a restart on the compacted data dir:
the replayed state (a fold over the records) is the live one, every acknowledged commit is there,
and a deleted group stays deleted once its tombstones are gone too (past delete.retention.ms).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from groupd.broker.node import Broker
from groupd.coordinator import partition_for
from groupd.storage import PartitionLog
from groupd.storage import records as rec

from groupd.config import Config
from tests.support.groups import admin_for, forget_admin
from tests.support.wire import Wire

OFFSETS = "__consumer_offsets"
TOPIC = "orders"
PARTITIONS = 4
GROUP = "my-group"  # partition 12
COMMITS = 2400


def _group_in(partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(100_000) if partition_for(f"{prefix}-{i}") == partition)


GONE = _group_in(partition_for(GROUP), "gone")  # deleted, in the same partition as GROUP


async def start(data: Path, **settings: Any) -> Broker:
    # Small segments so a few thousand commits roll many; delete.retention.ms 0 so tombstones go
    # at the first pass that sees them in an inactive segment.
    settings = {"delete_retention_ms": 0, **settings}
    config = Config(data_dir=str(data), port=0, fsync="never", segment_bytes=8192, **settings)
    broker = Broker(config)
    await broker.start()
    await broker.groups.loaded.wait()
    return broker


def persisted(broker: Broker) -> tuple[dict[str, Any], dict[str, Any]]:
    """The coordinator's persisted state, the fold over the records (group metadata, offsets)."""
    core = broker.core
    return dict(core.group_records), {g: dict(o) for g, o in core.offsets.items() if o}


def consumer(port: int, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": group, "enable.auto.commit": False})


def commit_many(port: int, group: str, commits: int, stop: threading.Event | None = None) -> dict[int, int]:
    """A subscribed confluent-kafka consumer commits ``commits`` times round-robin over the topic's
    partitions; returns the last acknowledged offset per partition."""
    from confluent_kafka import TopicPartition

    c = consumer(port, group)
    c.subscribe([TOPIC])
    deadline = time.monotonic() + 15
    while len(c.assignment()) < PARTITIONS and time.monotonic() < deadline:
        c.poll(0.1)
    assert len(c.assignment()) == PARTITIONS
    acked: dict[int, int] = {}
    try:
        for i in range(commits):
            p, offset = i % PARTITIONS, i + 1
            (tp,) = c.commit(offsets=[TopicPartition(TOPIC, p, offset)], asynchronous=False)
            assert tp.error is None, tp.error
            acked[p] = offset
    finally:
        c.close()  # leaves the group: the last group metadata record is its Empty state
        if stop is not None:
            stop.set()
    return acked


def committed(port: int, group: str) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    c = consumer(port, group)
    try:
        tps = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        c.close()


def delete_group(port: int, group: str) -> None:
    bootstrap = f"127.0.0.1:{port}"
    try:
        for future in admin_for(bootstrap).delete_consumer_groups([group], request_timeout=10).values():
            future.result()
    finally:
        forget_admin(bootstrap)


def on_disk(plog: PartitionLog) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(plog.path.glob("*.log")))


async def clean_until(broker: Broker, stop: threading.Event) -> int:
    """Cleaner passes while the commits go on (safety beside the appends); how many compacted."""
    passes = 0
    while not stop.is_set():
        passes += bool(await broker.data.run_cleaner())
        await asyncio.sleep(0.02)
    return passes


async def test_compaction_shrinks_the_offsets_partition_and_the_restart_replays_the_same_state(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker = await start(data, log_cleaner_backoff_ms=0)  # passes driven by the test
    port = broker.port
    try:
        await asyncio.to_thread(lambda: Wire(port).create_topic(TOPIC, PARTITIONS))
        gone = await asyncio.to_thread(commit_many, port, GONE, 40)
        assert await asyncio.to_thread(committed, port, GONE) == gone
        await asyncio.to_thread(delete_group, port, GONE)  # tombstones, then GROUP's commits roll past them

        stop = threading.Event()
        acked, passes = await asyncio.gather(
            asyncio.to_thread(commit_many, port, GROUP, COMMITS, stop), clean_until(broker, stop)
        )
        assert passes >= 1  # the cleaner did compact while the group shell appended
        await broker.groups.drain()
        plog = broker.logs.get(OFFSETS, partition_for(GROUP))
        assert plog is not None and len(plog.segments) > 1
        plog.roll()  # the last commits and the consumer's leave become cleanable too
        before = plog.size_in_bytes
        broker.data.cleaner.forget(plog)  # a last pass over everything inactive, dirty or not
        result = (await broker.data.run_cleaner())[(OFFSETS, partition_for(GROUP))]
        after = plog.size_in_bytes
        assert after < before and result.records_dropped > 0
        # Uncleaned, every commit is at least one batch header on disk; cleaned, one record per key
        # and the active segment (never cleaned) are left.
        assert after * 10 < (COMMITS + 80) * rec.HEADER_SIZE
        assert GONE.encode() not in on_disk(plog)  # its offsets, then its tombstones, are gone
        live = persisted(broker)
        assert GONE not in live[0] and GONE not in live[1] and GROUP in live[1]
    finally:
        await broker.stop()

    broker = await start(data)
    try:
        assert persisted(broker) == live
        assert await asyncio.to_thread(committed, broker.port, GROUP) == acked
        assert await asyncio.to_thread(committed, broker.port, GONE) == {}
        assert GONE not in broker.core.groups
    finally:
        await broker.stop()


async def test_the_daemon_compacts_the_offsets_partition_on_the_cleaners_cadence(tmp_path: Path) -> None:
    """log.cleaner.backoff.ms: nobody calls the cleaner, the node's own task shrinks the partition.
    A group deleted within delete.retention.ms (Kafka's default, a day) keeps its tombstones on disk
    and stays deleted after a restart, its offsets compacted away under them."""
    data = tmp_path / "data"
    broker = await start(data, log_cleaner_backoff_ms=100, delete_retention_ms=24 * 3600 * 1000)
    port = broker.port
    try:
        await asyncio.to_thread(lambda: Wire(port).create_topic(TOPIC, PARTITIONS))
        await asyncio.to_thread(commit_many, port, GONE, 40)
        await asyncio.to_thread(delete_group, port, GONE)
        acked = await asyncio.to_thread(commit_many, port, GROUP, 800)
        plog = broker.logs.get(OFFSETS, partition_for(GROUP))
        assert plog is not None
        deadline = time.monotonic() + 10
        while plog.size_in_bytes * 5 > 800 * rec.HEADER_SIZE and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert plog.size_in_bytes * 5 <= 800 * rec.HEADER_SIZE
        # Kept for delete.retention.ms: its tombstones (4 offsets, the group), nothing under them.
        gone = [value for _o, _t, key, value in plog.iter_records() if key is not None and GONE.encode() in key]
        assert gone == [None] * (PARTITIONS + 1)
        assert await asyncio.to_thread(committed, port, GROUP) == acked
    finally:
        await broker.stop()
    broker = await start(data)
    try:
        assert await asyncio.to_thread(committed, broker.port, GROUP) == acked
        assert await asyncio.to_thread(committed, broker.port, GONE) == {}
        assert GONE not in broker.core.groups and GONE not in broker.core.offsets
    finally:
        await broker.stop()
