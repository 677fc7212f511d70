"""What clients that never read cost the daemon (issue 29, item 7): N connections each pipeline
64 Fetches of a ~4.8 MB partition and read nothing; the daemon's RSS growth per such connection,
and how long another client then waits for a Metadata answer.

With the default limits a connection holds its answers while any of them is unsent (Kafka keeps
a channel muted while a response send is in flight): one answer per connection, ~4.6 MiB here.

    python -m bench.noread [--connections 60] [--quick]

Every process runs on 127.0.0.1 and is stopped by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import sys
import time

from groupd.storage.records import build_batch

from tests.support.wire import Wire, fetch_body, request_frame

from .targets import rss_kb, start_groupd, workdir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.noread", description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=60)
    ap.add_argument("--fetches", type=int, default=64, help="pipelined Fetches per connection")
    ap.add_argument("--quick", action="store_true", help="10 connections")
    args = ap.parse_args(argv)
    n = 10 if args.quick else args.connections
    root = workdir("groupd-bench-noread-")
    t, _ = start_groupd(root / "data")
    socks: list[socket.socket] = []
    try:
        port = int(t.bootstrap.rsplit(":", 1)[1])
        with Wire(port) as w:
            w.create_topic("big")
            for b in range(5):
                records = [(None, bytes([b, i]) * 60_000, (), 1_700_000_000_000) for i in range(8)]  # 960 KB
                body = {
                    "transactional_id": None,
                    "acks": 1,
                    "timeout_ms": 10_000,
                    "topic_data": [{"name": "big", "partition_data": [{"index": 0, "records": build_batch(records)}]}],
                }
                w.pipeline(("Produce", 7, body))
                w.read()
        time.sleep(0.5)
        before = rss_kb(t.pid) or 0
        fetch = fetch_body("big", max_wait_ms=0, min_bytes=1, max_bytes=50 * 1024 * 1024)
        frames = b"".join(request_frame("Fetch", 11, fetch, i) for i in range(args.fetches))
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.send(frames)
            socks.append(s)
        peak = before
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            peak = max(peak, rss_kb(t.pid) or 0)
            time.sleep(0.05)
        t0 = time.perf_counter()
        with Wire(port) as other:
            other.pipeline(("Metadata", 1, {"topics": None}))
            other.read()
        other_ms = (time.perf_counter() - t0) * 1000
        grown = (peak - before) / 1024
        print(
            f"{n} connections x {args.fetches} unread Fetches of ~4.8 MB: daemon RSS {before / 1024:.0f} -> "
            f"{peak / 1024:.0f} MiB, {grown / n:.1f} MiB per connection; another client's Metadata: {other_ms:.0f} ms",
            flush=True,
        )
    finally:
        for s in socks:
            s.close()
        t.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
