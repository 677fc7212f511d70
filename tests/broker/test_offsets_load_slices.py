"""The start-up replay in slices (issue 26): ``GroupShell.load`` over real partition logs leaves the
state that decoding and replaying every record in log order leaves (design principle 2, the fold),
however the log is cut into reads and slices and wherever the group-metadata records a slice does
not decode fall; and while it is held (``load_hold``) or between slices, the loop serves others.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from groupd.broker import group_shell
from groupd.broker.group_shell import GroupShell
from groupd.coordinator import GroupCoordinator, partition_for
from groupd.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from groupd.coordinator.serde import RecordDecodeError, decode_record, encode_record
from groupd.storage import LogManager
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.coordinator.harness import quiet_logger

OFFSETS = "__consumer_offsets"
P = 3


def _groups_in(partition: int, n: int) -> list[str]:
    return [g for g in (f"s-{i}" for i in range(10_000)) if partition_for(g) == partition][:n]


GROUPS = _groups_in(P, 3)
COMMIT = st.tuples(
    st.builds(OffsetCommitKey, st.sampled_from(GROUPS), st.sampled_from(["t", "u"]), st.integers(0, 2)),
    st.one_of(
        st.none(),
        st.builds(
            OffsetCommitValue, st.integers(0, 10**6), st.integers(-1, 3), st.just(""), st.integers(0, 9), st.just(-1)
        ),
        st.builds(
            OffsetCommitValue, st.integers(0, 99), st.just(-1), st.text(max_size=3), st.integers(0, 9), st.just(-1)
        ),
    ),
).map(encode_record)
GROUP_METADATA = st.tuples(
    st.builds(GroupMetadataKey, st.sampled_from(GROUPS)),
    st.one_of(
        st.none(),
        st.builds(
            GroupMetadataValue, st.just("consumer"), st.integers(0, 9), st.none(), st.none(), st.just(0), st.just(())
        ),
    ),
).map(encode_record)
# A group-metadata record whose CRC matches but whose value no version decodes (a writer's bug): the
# fold skips it and keeps what came before, so must the slices.
UNDECODABLE = st.builds(
    lambda g: (encode_record((GroupMetadataKey(g), None))[0], b"\x00\x09junk"), st.sampled_from(GROUPS)
)
RECORDS = st.lists(st.one_of(COMMIT, COMMIT, GROUP_METADATA, UNDECODABLE), min_size=1, max_size=60)


def _fold(pairs: list[tuple[bytes, bytes | None]]) -> GroupCoordinator:
    core = GroupCoordinator(logger=quiet_logger())
    for k, v in pairs:
        try:
            core.replay(*decode_record(k, v))
        except RecordDecodeError:
            continue
    return core


async def _load(data: Path, pairs: list[tuple[bytes, bytes | None]], batch: int) -> tuple[GroupCoordinator, GroupShell]:
    logs = LogManager(data)
    logs.open_all()
    plog = logs.get_or_create(OFFSETS, P)
    for i in range(0, len(pairs), batch):
        plog.append_records([(k, v, (), 1) for k, v in pairs[i : i + batch]])
    logs.close()
    logs = LogManager(data)
    logs.open_all()
    try:
        core = GroupCoordinator(logger=quiet_logger())
        shell = GroupShell(core, lambda p: logs.get_or_create(OFFSETS, p), None)  # type: ignore[arg-type]
        shell.begin_load([P])
        await shell.load([P])
        return core, shell
    finally:
        logs.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(RECORDS, st.integers(1, 7), st.sampled_from([64, 300, 1 << 18]), st.booleans())
def test_the_sliced_load_leaves_the_fold_of_the_log(
    monkeypatch: pytest.MonkeyPatch, pairs: list, batch: int, read_bytes: int, yield_always: bool
) -> None:
    # reads of a few batches and a slice per read (or one slice): the deferred group-metadata
    # records are replayed at every slice end, wherever that falls
    monkeypatch.setattr(group_shell, "_LOAD_READ_BYTES", read_bytes)
    monkeypatch.setattr(group_shell, "_LOAD_SLICE_S", 0.0 if yield_always else 60.0)
    with tempfile.TemporaryDirectory() as tmp:
        core, shell = asyncio.run(_load(Path(tmp), pairs, batch))
    ref = _fold(pairs)
    assert core.offsets == ref.offsets
    assert core.group_records == ref.group_records
    undecodable = sum(1 for k, v in pairs if v == b"\x00\x09junk")
    # superseded within a slice, an undecodable record is never decoded: at most all are counted
    assert shell.load_stats["skipped"] <= undecodable
    assert shell.load_stats["records"] + shell.load_stats["skipped"] == len(pairs)


async def test_a_held_load_answers_load_in_progress_and_serves_other_tasks(tmp_path: Path) -> None:
    """GROUPD_TEST_LOAD_HOLD's mechanism: the load waits in ``load_hold`` before each partition;
    the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS until it is let go."""
    (group,) = _groups_in(P, 1)
    logs = LogManager(tmp_path)
    logs.open_all()
    pairs = [encode_record((OffsetCommitKey(group, "t", 0), OffsetCommitValue(o, -1, "", 1, -1))) for o in range(50)]
    logs.get_or_create(OFFSETS, P).append_records([(k, v, (), 1) for k, v in pairs])
    core = GroupCoordinator(logger=quiet_logger())
    shell = GroupShell(core, lambda p: logs.get_or_create(OFFSETS, p), None)  # type: ignore[arg-type]
    reached, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        reached.set()
        await release.wait()

    shell.load_hold = hold
    shell.begin_load([P, P + 1])
    task = asyncio.create_task(shell.load([P, P + 1]))
    await reached.wait()

    def fetch() -> tuple[int, Any]:
        req = {"group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}]}
        ((_ctx, resp),) = core.handle(0, "OffsetFetch", 7, req, None).responses
        parts = [p["committed_offset"] for t in resp["topics"] for p in t["partitions"]]
        return resp["error_code"], parts

    assert fetch() == (14, []) and core.partition_state(P) == "loading"
    release.set()
    await task
    assert fetch() == (0, [49]) and core.partition_state(P + 1) == "active"
    logs.close()


async def test_a_long_load_yields_between_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices of zero seconds: the loop gets back between every read, so a request arriving during
    the load is served before it ends (a large log does not hold the first ApiVersions)."""
    monkeypatch.setattr(group_shell, "_LOAD_READ_BYTES", 1024)
    monkeypatch.setattr(group_shell, "_LOAD_SLICE_S", 0.0)
    (group,) = _groups_in(P, 1)
    logs = LogManager(tmp_path)
    logs.open_all()
    plog = logs.get_or_create(OFFSETS, P)
    for o in range(200):
        k, v = encode_record((OffsetCommitKey(group, "t", o % 5), OffsetCommitValue(o, -1, "", 1, -1)))
        plog.append_records([(k, v, (), 1)])
    core = GroupCoordinator(logger=quiet_logger())
    shell = GroupShell(core, lambda p: logs.get_or_create(OFFSETS, p), None)  # type: ignore[arg-type]
    shell.begin_load([P])
    task = asyncio.create_task(shell.load([P]))
    seen: list[int] = []
    while not task.done():
        seen.append(shell.load_progress.records)
        await asyncio.sleep(0)
    await task
    assert len(seen) > 10 and 0 < seen[5] < 200  # it was seen part way through, many times
    assert core.offsets[group][("t", 4)].offset == 199
    logs.close()
