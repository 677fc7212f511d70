"""CPU per ``PartitionLog.read`` (what Fetch calls) over a log of small batches: the first sweep
after opening (each batch that was on disk is CRC-checked once, issue 29 item 1) and later ones.
Run it on two checkouts to compare; figures are process CPU, so a busy machine matters less.

    python -m bench.storage_read --batches 20000 --max-bytes 1048576 16384
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from groupd.storage import LogConfig, PartitionLog
from groupd.storage import records as rec


def sweep(plog: PartitionLog, max_bytes: int, offsets: list[int]) -> float:
    t = time.process_time()
    for o in offsets:
        plog.read(o, max_bytes)
    return (time.process_time() - t) / len(offsets) * 1e6


def fetch_offsets(plog: PartitionLog, max_bytes: int) -> list[int]:
    out, off = [], 0
    while off < plog.log_end_offset:
        out.append(off)
        *_, last = rec.iter_batches(plog.read(off, max_bytes))
        off = last.last_offset + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=20000)
    ap.add_argument("--max-bytes", type=int, nargs="+", default=[1 << 20, 16384])
    args = ap.parse_args()
    config = LogConfig(segment_ms=None, retention_ms=None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t-0"
        plog = PartitionLog.open(path, config)
        for b in range(args.batches):  # three 40-byte records a batch, about 200 bytes
            plog.append_records([(b"k%d" % i, os.urandom(40), [], 1000 + b) for i in range(3)])
        plog.close()
        for max_bytes in args.max_bytes:
            plog = PartitionLog.open(path, config)
            offsets = fetch_offsets(plog, max_bytes)  # a consumer's fetch offsets, start to end
            plog.close()
            plog = PartitionLog.open(path, config)  # every batch is on disk at open: unchecked
            first = sweep(plog, max_bytes, offsets)
            later = min(sweep(plog, max_bytes, offsets) for _ in range(5))
            print(f"max_bytes={max_bytes}: first sweep {first:.0f} us/read, later {later:.0f} us/read")
            plog.close()


if __name__ == "__main__":
    main()
