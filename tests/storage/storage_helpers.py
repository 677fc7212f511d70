"""Shared helpers for the storage tests."""

from __future__ import annotations

import random
from pathlib import Path

from groupd.storage import records as R
from groupd.storage.log import FileOps, LogConfig, PartitionLog
from kafka.record.memory_records import MemoryRecords


class CountingOps(FileOps):
    """Counts fsyncs instead of doing them.

    The crashes these tests simulate are process deaths, after which the page cache still holds
    every write, so real fsyncs would only make the suite slow (a few ms each on this disk).
    """

    def __init__(self) -> None:
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1


def small_config(**kw) -> LogConfig:
    base = dict(
        segment_bytes=4096, index_interval_bytes=256, segment_ms=None, retention_ms=None, file_ops=CountingOps()
    )
    base.update(kw)
    return LogConfig(**base)


def fill(
    plog: PartitionLog, n_batches: int, *, seed: int = 0, keys: int = 50, ts0: int = 1_000_000
) -> list[tuple[int, int, bytes, bytes]]:
    """Append random-sized batches; returns every record as (offset, timestamp, key, value)."""
    rnd = random.Random(seed)
    out = []
    for b in range(n_batches):
        recs = []
        for _ in range(rnd.randint(1, 5)):
            k = b"key-%d" % rnd.randrange(keys)
            v = rnd.randbytes(rnd.randint(0, 120))
            recs.append((k, v, [], ts0 + b * 10 + rnd.randint(0, 5)))
        base, last = plog.append_records(recs)
        assert last - base + 1 == len(recs)
        out.extend((base + i, r[3], r[0], r[1]) for i, r in enumerate(recs))
    return out


def records_via_kafka_python(directory: Path) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Parse every segment file with kafka-python, validating every CRC."""
    out = []
    for seg in sorted(directory.glob("*.log")):
        mr = MemoryRecords(seg.read_bytes())
        while mr.has_next():
            batch = mr.next_batch()
            assert batch is not None
            assert batch.validate_crc(), f"bad CRC in {seg}"
            out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


def batch_bounds(path: Path) -> list[tuple[int, int, int, int]]:
    """(start position, end position, base offset, last offset) of each batch in a file."""
    data = path.read_bytes()
    return [(v.position, v.position + v.size, v.base_offset, v.last_offset) for v in R.iter_batches(data)]
