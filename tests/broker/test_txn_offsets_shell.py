"""Transactional offset commits through a real node over real TCP: TxnOffsetCommit sent by the raw
client, the transaction's end written by ``GroupShell.write_txn_marker`` (what the transaction
coordinator's marker channel calls), OffsetFetch with and without ``require_stable``, and a restart
of the data dir: committed stays committed, pending stays pending until its marker, aborted is gone
(the start-up load folds transactional batches and markers, Kafka's CoordinatorLoaderImpl)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from groupd.broker.node import Broker
from groupd.coordinator import partition_for
from groupd.storage.markers import read_end_txn_marker

from groupd.config import Config
from tests.support.raw_client import RawClient

GROUP = "my-group"
PARTITION = 12  # partition_for("my-group")
TOPIC = "events"


async def start(data: Path) -> Broker:
    broker = Broker(Config(data_dir=str(data), port=0, fsync="never"))
    # these TxnOffsetCommits come from producers the transaction coordinator does not know (its
    # routes are not this layer's): the node's KIP-890 check, which would refuse them, is taken out
    broker.groups.txn_verifier = None
    await broker.start()
    await broker.groups.loaded.wait()
    return broker


async def call(port: int, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
    def go() -> dict[str, Any]:
        client = RawClient(port)
        try:
            return client.request(api, version, body)
        finally:
            client.close()

    return await asyncio.to_thread(go)


async def txn_commit(port: int, pid: int, offsets: dict[int, int]) -> dict[int, int]:
    body = {
        "transactional_id": f"tx-{pid}",
        "group_id": GROUP,
        "producer_id": pid,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p, o in offsets.items()
                ],
            }
        ],
    }
    resp = await call(port, "TxnOffsetCommit", 3, body)
    return {p["partition_index"]: p["error_code"] for t in resp["topics"] for p in t["partitions"]}


async def fetch(port: int, *, stable: bool) -> dict[int, tuple[int, int]]:
    """partition -> (error code, committed offset) of partitions 0-3, OffsetFetch v7."""
    body = {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0, 1, 2, 3]}], "require_stable": stable}
    resp = await call(port, "OffsetFetch", 7, body)
    assert resp["error_code"] == 0
    return {p["partition_index"]: (p["error_code"], p["committed_offset"]) for p in resp["topics"][0]["partitions"]}


async def test_txn_offsets_commit_abort_and_survive_a_restart(tmp_path: Path) -> None:
    assert partition_for(GROUP) == PARTITION
    data = tmp_path / "data"
    broker = await start(data)
    try:
        port = broker.port
        created = await call(
            port,
            "CreateTopics",
            4,
            {
                "topics": [
                    {"name": TOPIC, "num_partitions": 4, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 10_000,
            },
        )
        assert created["topics"][0]["error_code"] == 0
        assert await txn_commit(port, 5000, {0: 42}) == {0: 0}
        assert await fetch(port, stable=True) == {0: (88, -1), 1: (0, -1), 2: (0, -1), 3: (0, -1)}
        assert (await fetch(port, stable=False))[0] == (0, -1)
        assert await broker.groups.write_txn_marker(PARTITION, 5000, 0, True, 0) == 0
        assert (await fetch(port, stable=True))[0] == (0, 42)

        assert await txn_commit(port, 5001, {1: 77}) == {1: 0}  # open at the restart
        assert await txn_commit(port, 5002, {2: 99}) == {2: 0}
        assert await broker.groups.write_txn_marker(PARTITION, 5002, 0, False, 0) == 0
        assert await txn_commit(port, 5003, {0: 1}) == {0: 0}  # later aborted, after the restart
        assert await broker.groups.write_txn_marker(7, 5000, 0, True, 0) == 0  # nothing pending there
        # the __consumer_offsets log holds the producers' transactional batches and the markers
        plog = broker.logs.get("__consumer_offsets", PARTITION)
        assert plog is not None
        batches = [(b.producer_id, b.is_transactional, read_end_txn_marker(b)) for b in plog.iter_batches()]
        assert (5000, True, None) in batches and (5002, True, None) in batches
        assert [(pid, m.committed) for pid, _t, m in batches if m is not None] == [(5000, True), (5002, False)]
    finally:
        await broker.stop()

    broker = await start(data)
    try:
        port = broker.port
        before = {0: (88, -1), 1: (88, -1), 2: (0, -1), 3: (0, -1)}
        assert await fetch(port, stable=True) == before
        assert await fetch(port, stable=False) == {0: (0, 42), 1: (0, -1), 2: (0, -1), 3: (0, -1)}
        # the transaction coordinator finishes what was open: 5001 commits, 5003 aborts
        assert await broker.groups.write_txn_marker(PARTITION, 5001, 0, True, 0) == 0
        assert await broker.groups.write_txn_marker(PARTITION, 5003, 0, False, 0) == 0
        assert await fetch(port, stable=True) == {0: (0, 42), 1: (0, 77), 2: (0, -1), 3: (0, -1)}
        # a zombie of 5003 (older epoch than the marker's) cannot write again
        assert await broker.groups.write_txn_marker(PARTITION, 5003, 1, False, 0) == 0
        assert await txn_commit(port, 5003, {3: 5}) == {3: 47}
    finally:
        await broker.stop()


class _Answer:
    def __init__(self) -> None:
        self.response: dict[str, Any] | None = None

    def respond(self, response: dict[str, Any]) -> None:
        self.response = response


async def test_compacted_offsets_log_reloads_to_the_same_state(tmp_path: Path) -> None:
    """Superseded and aborted transactional records compacted away, open ones kept: the load of the
    cleaned __consumer_offsets partition gives what the live coordinator had (LogCleaner + load)."""
    from groupd.broker.group_shell import GroupShell
    from groupd.coordinator import GroupCoordinator
    from groupd.storage import Appender, LogConfig, LogManager
    from groupd.storage.compaction import compact

    logs = LogManager(tmp_path)
    logs.open_all()
    config = LogConfig(cleanup_policy="compact", retention_ms=None, delete_retention_ms=0)

    def plog_of(p: int) -> Any:
        return logs.get_or_create("__consumer_offsets", p, config)

    appender = Appender("never")
    core = GroupCoordinator()
    shell = GroupShell(core, plog_of, appender)

    async def send(api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        answer = _Answer()
        tasks = shell.apply(core.handle(shell.clock(), api, version, body, answer))
        await asyncio.gather(*tasks)
        assert answer.response is not None
        return answer.response

    def commit_body(pid: int | None, partition: int, offset: int) -> dict[str, Any]:
        parts = [{"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}]
        body: dict[str, Any] = {"group_id": GROUP, "topics": [{"name": TOPIC, "partitions": parts}]}
        if pid is None:
            return {**body, "generation_id_or_member_epoch": -1, "member_id": ""}
        return {**body, "transactional_id": f"tx-{pid}", "producer_id": pid, "producer_epoch": 0}

    try:
        for i in range(5):
            await send("OffsetCommit", 8, commit_body(None, 0, i))  # superseded plain commits
        await send("TxnOffsetCommit", 3, commit_body(1, 0, 100))
        assert await shell.write_txn_marker(PARTITION, 1, 0, True, 0) == 0  # 0 -> 100
        await send("OffsetCommit", 8, commit_body(None, 1, 7))
        await send("TxnOffsetCommit", 3, commit_body(2, 1, 200))
        assert await shell.write_txn_marker(PARTITION, 2, 0, False, 0) == 0  # aborted: 7 stays
        await send("TxnOffsetCommit", 3, commit_body(3, 2, 300))
        plog = plog_of(PARTITION)
        plog.roll()  # everything so far is inactive, the open transaction of 3 included
        await send("OffsetCommit", 8, commit_body(None, 3, 9))
        result = compact(plog, now=shell.clock() + 1)
        # nothing at or after producer 3's open batch is cleaned: the first group is left as is
        assert result.records_dropped == 0
        assert await shell.write_txn_marker(PARTITION, 3, 0, True, 0) == 0
        plog.roll()
        result = compact(plog, now=shell.clock() + 1)
        assert result.records_dropped >= 6  # 5 superseded plain commits, the aborted one
        fresh = GroupCoordinator()
        loader = GroupShell(fresh, plog_of, appender)
        loader.begin_load([PARTITION])
        await loader.load([PARTITION])
        assert fresh.offsets == core.offsets
        assert {tp: v.offset for tp, v in fresh.offsets[GROUP].items()} == {
            (TOPIC, 0): 100,
            (TOPIC, 1): 7,
            (TOPIC, 2): 300,
            (TOPIC, 3): 9,
        }
        assert fresh.offset_manager.pending == core.offset_manager.pending == {}
    finally:
        await appender.close()
        logs.close()
