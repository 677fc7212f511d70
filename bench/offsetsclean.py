"""What compacting ``__consumer_offsets`` buys: one group commits N times (round robin over a few
partitions, one batch per commit as the group shell appends them); the partition's bytes and its
start-up replay (``GroupShell.load`` into a fresh coordinator, the daemon's path) before and after
one pass of the data plane's cleaner (``storage.compaction.Cleaner``). The replayed offsets are
checked equal.

    python -m bench.offsetsclean --commits 100000 --segment-bytes 1048576
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from pathlib import Path

import structlog
from groupd.broker.group_shell import GroupShell
from groupd.coordinator import GroupCoordinator, partition_for
from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue
from groupd.coordinator.serde import encode_record
from groupd.storage import LogConfig, LogManager, PartitionLog
from groupd.storage.compaction import Cleaner

OFFSETS_TOPIC = "__consumer_offsets"
GROUP = "my-group"


def replay(plog: PartitionLog) -> tuple[float, dict]:
    core = GroupCoordinator()
    shell = GroupShell(core, lambda _p: plog, None)  # type: ignore[arg-type]
    p = partition_for(GROUP)

    async def load() -> None:
        shell.begin_load([p])
        await shell.load([p])

    t0 = time.perf_counter()
    asyncio.run(load())
    return time.perf_counter() - t0, {g: dict(o) for g, o in core.offsets.items()}


def run(data_dir: Path, commits: int, partitions: int, segment_bytes: int) -> list[tuple[str, int, float]]:
    config = LogConfig(segment_bytes=segment_bytes, cleanup_policy="compact", retention_ms=None)
    logs = LogManager(data_dir, config, topic_config=lambda t: config if t == OFFSETS_TOPIC else None)
    logs.open_all()
    plog = logs.get_or_create(OFFSETS_TOPIC, partition_for(GROUP))
    now = int(time.time() * 1000)
    for i in range(commits):
        key, value = encode_record(
            (OffsetCommitKey(GROUP, "orders", i % partitions), OffsetCommitValue(i + 1, commit_timestamp=now))
        )
        plog.append_records([(key, value, (), now)])
    rows = []
    seconds, before = replay(plog)
    rows.append(("before", plog.size_in_bytes, seconds))
    t0 = time.perf_counter()
    Cleaner().clean(plog)
    clean_s = time.perf_counter() - t0
    seconds, after = replay(plog)
    assert after == before, "the replay of the compacted log differs"
    rows.append(("after", plog.size_in_bytes, seconds))
    rows.append(("cleaner pass", 0, clean_s))
    logs.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-bytes", type=int, default=1 << 20)
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as d:
        rows = run(Path(d), args.commits, args.partitions, args.segment_bytes)
    print(f"{args.commits} commits over {args.partitions} partitions, segment.bytes {args.segment_bytes}")
    print(f"{'':<14}{'log bytes':>12}{'replay s':>10}")
    for name, size, seconds in rows:
        print(f"{name:<14}{size if size else '':>12}{seconds:>10.3f}")


if __name__ == "__main__":
    main()
