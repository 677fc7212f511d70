"""Server CPU per Fetch with and without a fetch session (KIP-227): the same P partitions, every
one at its log end (nothing to read, nothing changed), fetched ``--rounds`` times one after the
other on one connection as a sessionless full fetch (epoch -1, every partition named and answered,
librdkafka's way) and as an incremental fetch of an open session (nothing named, nothing answered,
kafka-python's and franz-go's way). Figures: the daemon's CPU microseconds per Fetch, per P.

    python -m bench.fetch_sessions [--rounds 3000] [--partitions 4,20,100] [--repeat 2]

Figures (2-core shared machine, --rounds 3000, two rounds each, 2026-11-29): P=4 43-50 us
sessionless vs 40-43 us incremental; P=20 110-143 vs 93-103; P=100 470-477 vs 327. The
incremental fetch still reads every session partition (Kafka's ReplicaManager does too: that is
how it finds what changed); a py-spy profile at P=100 puts the session's own work
(``IncrementalContext.request_topics`` and ``finish``) at ~7% of the request, the reads at ~75%.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import time
from typing import Any

from groupd.protocol.messages import API_BY_NAME
from groupd.storage import records as rec

from .small_requests import _frame, _recv_frame
from .targets import start_groupd, workdir

FETCH = API_BY_NAME["Fetch"]


def _request(sock: socket.socket, name: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
    sock.sendall(_frame(name, version, body))
    frame = _recv_frame(sock)
    api = API_BY_NAME[name]
    pos = 4 + (1 if api.is_flexible(version) else 0)
    return api.response.codec(version).decode(frame, pos)  # type: ignore[no-any-return]


def _fetch_body(session_id: int, epoch: int, parts: dict[tuple[str, int], int]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), offset in parts.items():
        topics.setdefault(t, []).append(
            {
                "partition": p,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
            }
        )
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fetch_sessions", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3000, help="fetches of each kind per measurement")
    ap.add_argument("--partitions", default="4,20,100", help="comma-separated partition counts")
    ap.add_argument("--repeat", type=int, default=2, help="alternating measurements of each kind")
    args = ap.parse_args(argv)
    root = workdir("groupd-bench-fetch-sessions-")
    t, _ = start_groupd(root / "data")
    host, port = t.bootstrap.rsplit(":", 1)
    try:
        sock = socket.create_connection((host, int(port)))
        for n in (int(x) for x in args.partitions.split(",")):
            topic = f"fs{n}-{time.time_ns()}"
            created = _request(
                sock,
                "CreateTopics",
                5,
                {
                    "topics": [
                        {"name": topic, "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": []}
                    ],
                    "timeout_ms": 10000,
                    "validate_only": False,
                },
            )
            assert created["topics"][0]["error_code"] == 0, created
            batch = rec.build_batch([(None, b"x" * 100, (), 1_700_000_000_000)])
            for p in range(n):
                body = {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout_ms": 10000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}],
                }
                _request(sock, "Produce", 9, body)
            parts = {(topic, p): 1 for p in range(n)}  # the log end
            full = _fetch_body(0, -1, parts)
            for r in range(args.repeat):
                c0 = t.cpu_s() or 0.0
                for _ in range(args.rounds):
                    _request(sock, "Fetch", 12, full)
                c1 = t.cpu_s() or 0.0
                sid = _request(sock, "Fetch", 12, _fetch_body(0, 0, parts))["session_id"]
                if sid == 0:
                    print("no session opened (--max-incremental-fetch-session-cache-slots?)", file=sys.stderr)
                    return 1
                c2 = t.cpu_s() or 0.0
                for e in range(1, args.rounds + 1):
                    _request(sock, "Fetch", 12, _fetch_body(sid, e, {}))
                c3 = t.cpu_s() or 0.0
                _request(sock, "Fetch", 12, _fetch_body(sid, -1, {}))  # closes it
                print(
                    f"P={n:4d} round {r}: sessionless {1e6 * (c1 - c0) / args.rounds:7.1f} us/fetch, "
                    f"incremental {1e6 * (c3 - c2) / args.rounds:7.1f} us/fetch",
                    flush=True,
                )
        sock.close()
    finally:
        t.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
