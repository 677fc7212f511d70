"""The start-up replay of ``__consumer_offsets`` (GroupShell.load) over real partition logs with
damaged batches (issue 16 item 15): every partition finishes loading, damaged batches are skipped
and counted, valid records after them are replayed."""

from __future__ import annotations

from pathlib import Path

from groupd.broker.group_shell import GroupShell
from groupd.coordinator import GroupCoordinator, partition_for
from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue
from groupd.coordinator.serde import encode_records
from groupd.storage import LogManager, PartitionLog
from structlog.testing import capture_logs

OFFSETS = "__consumer_offsets"


def _group_in(partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(100_000) if partition_for(f"{prefix}-{i}") == partition)


def _commit(plog: PartitionLog, group: str, offset: int) -> None:
    record = (OffsetCommitKey(group, "orders", 0), OffsetCommitValue(offset, commit_timestamp=1))
    plog.append_records([(k, v, (), 1) for k, v in encode_records([record])])


def _fetch(core: GroupCoordinator, group: str) -> tuple[int, int]:
    """(error code, committed offset of orders-0) as OffsetFetch v7 answers them."""
    req = {"group_id": group, "topics": [{"name": "orders", "partition_indexes": [0]}]}
    ((_ctx, resp),) = core.handle(0, "OffsetFetch", 7, req, None).responses
    return resp["error_code"], resp["topics"][0]["partitions"][0]["committed_offset"]


async def test_damaged_batches_are_skipped_and_every_partition_loads(tmp_path: Path) -> None:
    a, b, c = _group_in(3, "a"), _group_in(3, "b"), _group_in(41, "c")
    logs = LogManager(tmp_path)
    logs.open_all()
    p3 = logs.get_or_create(OFFSETS, 3)
    for off in range(1, 80):
        _commit(p3, a, off)
    _commit(p3, a, 4242)
    _commit(p3, b, 10)
    _commit(logs.get_or_create(OFFSETS, 41), c, 7000)
    for p in range(50):
        logs.get_or_create(OFFSETS, p)
    logs.close()
    seg = tmp_path / f"{OFFSETS}-3" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[data.index(b"\x00\x03" + (4242).to_bytes(8, "big")) + 9] ^= 1  # 4242 -> 4243
    seg.write_bytes(bytes(data))

    logs = LogManager(tmp_path)
    logs.open_all()
    # Partition 5's log is unusable (closed under the loader): the load goes on past it.
    logs.get_or_create(OFFSETS, 5).close()
    reported: list[PartitionLog] = []
    logs.corruption_observer = reported.append
    core = GroupCoordinator()
    shell = GroupShell(core, lambda p: logs.get_or_create(OFFSETS, p), None)  # type: ignore[arg-type]
    partitions = list(range(50))
    shell.begin_load(partitions)
    with capture_logs() as events:
        await shell.load(partitions)
    try:
        fetched = {g: _fetch(core, g) for g in (a, b, c, _group_in(5, "e"))}
        assert fetched == {a: (0, 79), b: (0, 10), c: (0, 7000), _group_in(5, "e"): (0, -1)}
        assert shell.load_progress.partitions_loaded == 50 and shell.load_progress.corrupt_batches == 1
        assert reported == [logs.get(OFFSETS, 3)]
        (corrupt,) = [e for e in events if e["event"] == "storage.batch.corrupt"]
        assert (corrupt["topic"], corrupt["partition"], corrupt["offset"]) == (OFFSETS, 3, 79)
        (failed,) = [e for e in events if e["event"] == "offsets_partition_load_failed"]
        assert failed["partition"] == 5 and failed["log_level"] == "error"
        (loaded,) = [e for e in events if e["event"] == "offsets_loaded"]
        assert loaded["corrupt_batches"] == 1
    finally:
        logs.close()
