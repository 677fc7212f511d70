"""OffsetCommit's C path through an in-process node over real TCP (confluent-kafka at its defaults):
the commit's batch is what reaches ``__consumer_offsets`` (one batch, the records the Python path
writes), and a batch the partition's ``max.message.bytes`` would refuse is written as records
instead, as the Python path writes any commit; a restart reads the same offsets back."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from groupd.broker.node import Broker
from groupd.coordinator import native, partition_for
from groupd.coordinator.serde import decode_record

from groupd.config import Config
from tests.support.wire import Wire

pytestmark = pytest.mark.skipif(not native.available(), reason="the C module is not built (or GROUPD_NO_NATIVE=1)")

OFFSETS = "__consumer_offsets"
TOPIC = "orders"
PARTITIONS = 12
GROUP = "native-group"


async def start(data: Path) -> Broker:
    broker = Broker(Config(data_dir=str(data), port=0, fsync="always"))
    await broker.start()
    await broker.groups.loaded.wait()
    return broker


def commit(port: int, offsets: dict[int, int]) -> dict[int, int]:
    """A consumer managing its own partitions commits them all in one OffsetCommit."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
        assert all(tp.error is None for tp in tps), tps
        got = c.committed([TopicPartition(TOPIC, p) for p in offsets], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def offset_records(broker: Broker) -> list[tuple[str, int, int]]:
    plog = broker.logs.get(OFFSETS, partition_for(GROUP))
    assert plog is not None
    out = []
    for _o, _t, key, value in plog.iter_records():
        k, v = decode_record(key, value)
        if getattr(k, "group", None) == GROUP and v is not None:
            out.append((k.topic, k.partition, v.offset))
    return out


@pytest.mark.parametrize("oversize", [False, True])
async def test_a_commit_built_in_c_is_durable_and_read_back_after_a_restart(tmp_path: Path, oversize: bool) -> None:
    data = tmp_path / "data"
    broker = await start(data)
    offsets = {p: 100 + p for p in range(PARTITIONS)}
    try:
        await asyncio.to_thread(lambda: Wire(broker.port).create_topic(TOPIC, PARTITIONS))
        # The offsets partition's log is made by its first append; made here first, for the oversize config.
        plog = broker.groups.partition_logs(partition_for(GROUP))
        if oversize:
            # smaller than the commit's one batch: the records go as the log's own batch instead
            plog.config = dataclasses.replace(plog.config, max_message_bytes=200)
        assert await asyncio.to_thread(commit, broker.port, offsets) == offsets
        written = offset_records(broker)
        assert sorted(written) == sorted((TOPIC, p, o) for p, o in offsets.items())
    finally:
        await broker.stop()
    broker = await start(data)
    try:
        assert {tp: v.offset for tp, v in broker.core.offsets[GROUP].items()} == {
            (TOPIC, p): o for p, o in offsets.items()
        }
    finally:
        await broker.stop()


async def test_a_commit_built_in_c_whose_write_fails_is_answered_with_the_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """The C commit's append is queued without a task (CoordinatorShell._direct): a write the disk
    refuses still reaches the core (every partition answered as Kafka maps KAFKA_STORAGE_ERROR, the
    offsets left as they were), and the next commit, with the disk back, is written."""
    from groupd.coordinator.errors import append_error_to_response_error
    from groupd.protocol.errors import ErrorCode
    from groupd.storage.files import FileOps

    broker = await start(tmp_path / "data")
    shell = broker.groups
    tasks: list[object] = []
    task_append = shell._append
    shell._append = lambda append: (tasks.append(append), task_append(append))[1]  # type: ignore[method-assign]
    try:
        await asyncio.to_thread(lambda: Wire(broker.port).create_topic(TOPIC, PARTITIONS))
        first = {p: 10 + p for p in range(PARTITIONS)}
        assert await asyncio.to_thread(commit, broker.port, first) == first
        plog = shell.partition_logs(partition_for(GROUP))
        healthy = plog._ops

        class Refusing(FileOps):
            def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
                raise OSError(5, "Input/output error")

        plog._ops = Refusing()

        def raw_commit() -> dict:
            with Wire(broker.port) as w:
                parts = [
                    {
                        "partition_index": p,
                        "committed_offset": 500,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in range(PARTITIONS)
                ]
                body = {
                    "group_id": GROUP,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [{"name": TOPIC, "partitions": parts}],
                }
                w.pipeline(("OffsetCommit", 8, body))
                return w.read()[1]

        answer = await asyncio.to_thread(raw_commit)
        expected = append_error_to_response_error(ErrorCode.KAFKA_STORAGE_ERROR)
        assert [p["error_code"] for t in answer["topics"] for p in t["partitions"]] == [expected] * PARTITIONS
        assert {tp: v.offset for tp, v in broker.core.offsets[GROUP].items()} == {
            (TOPIC, p): o for p, o in first.items()
        }
        assert GROUP not in broker.core.offset_manager.inflight  # no commit counts as being written
        plog._ops = healthy
        second = {p: 20 + p for p in range(PARTITIONS)}
        assert await asyncio.to_thread(commit, broker.port, second) == second
        assert tasks == []  # every commit took the task-less path
        assert not shell._tasks and not any(shell._writes.values())
    finally:
        await broker.stop()
    broker = await start(tmp_path / "data")
    try:
        assert {tp: v.offset for tp, v in broker.core.offsets[GROUP].items()} == {
            (TOPIC, p): 20 + p for p in range(PARTITIONS)
        }
    finally:
        await broker.stop()
