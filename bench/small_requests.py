"""Server CPU per small Produce and per small Fetch request, on one broker and on three (issue 29
item 4: franz-go's TestGroupETL on three brokers sends ~6x the requests of one broker, each small,
so what one small request costs the server decides the three-broker run).

Each of ``--partitions`` partitions gets its own connection to its leader (as a client that splits
its work per broker does); every round sends one request on each connection and reads every
answer. Produce: one 64-byte record per request, acks=all, no producer id. Fetch: v12 from offset
0 with ``partition_max_bytes`` 1024, ``max_wait_ms`` 0 and the partition's ``current_leader_epoch``
(as franz-go sends it). Figures: the daemon's CPU microseconds per request over ``--rounds``
rounds of each, per broker count, in one run (the client's own CPU is not counted).

    python -m bench.small_requests [--rounds 3000] [--partitions 6] [--brokers 1,3] [--profile DIR]

Figures (2-core shared machine, --rounds 3000, two alternating rounds before/after the Produce path
lost its tasks, issue 29 item 4): Produce 57 -> 52-53 us (1 broker), 61-64 -> 56 us (3 brokers);
Fetch 42-43 -> 42 us (1), 45 -> 43 us (3). A py-spy profile of this load puts ~3/4 of the
daemon's samples in the event loop's own C code and socket system calls (one read and one write per
request): that, not the handlers, is the floor of a small request.

The daemon runs on 127.0.0.1 with its own data directory and is stopped by pid at the end.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import sys
import time
from pathlib import Path
from typing import Any

from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER
from groupd.storage import records as rec

from .targets import start_groupd, workdir


def _frame(api_name: str, version: int, body: dict[str, Any]) -> bytes:
    api = API_BY_NAME[api_name]
    header = {"request_api_key": api.key, "request_api_version": version, "correlation_id": 1, "client_id": "bench"}
    flexible = api.is_flexible(version)
    payload = REQUEST_HEADER.codec(2 if flexible else 1).encode(header) + api.request.codec(version).encode(body)
    return struct.pack(">i", len(payload)) + payload


def _recv_frame(sock: Any) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the daemon")
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def _one(root: Any, brokers: int, partitions: int, rounds: int, profile: Path | None) -> dict[str, float]:
    import socket

    from tests.support.raw_client import RawClient

    t, _ = start_groupd(root / f"b{brokers}" / "data", "--brokers", str(brokers))
    socks: list[socket.socket] = []
    try:
        port = int(t.bootstrap.rsplit(":", 1)[1])
        admin = RawClient(port)
        topic = "small"
        r = admin.request(
            "CreateTopics",
            5,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
        assert r["topics"][0]["error_code"] == 0, r
        md = admin.request(
            "Metadata",
            12,
            {
                "topics": [{"topic_id": b"\0" * 16, "name": topic}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        admin.close()
        ports = {b["node_id"]: b["port"] for b in md["brokers"]}
        leaders = {p["partition_index"]: (p["leader_id"], p["leader_epoch"]) for p in md["topics"][0]["partitions"]}
        batch = rec.build_batch([(b"k", b"v" * 64, (), int(time.time() * 1000))])
        produce, fetch = [], []
        for p in range(partitions):
            leader, epoch = leaders[p]
            socks.append(socket.create_connection(("127.0.0.1", ports[leader])))
            socks[-1].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            produce.append(
                _frame(
                    "Produce",
                    9,
                    {
                        "transactional_id": None,
                        "acks": -1,
                        "timeout_ms": 30000,
                        "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}],
                    },
                )
            )
            fetch.append(
                _frame(
                    "Fetch",
                    12,
                    {
                        "replica_id": -1,
                        "max_wait_ms": 0,
                        "min_bytes": 1,
                        "max_bytes": 1 << 20,
                        "isolation_level": 0,
                        "session_id": 0,
                        "session_epoch": -1,
                        "topics": [
                            {
                                "topic": topic,
                                "partitions": [
                                    {
                                        "partition": p,
                                        "current_leader_epoch": epoch,
                                        "fetch_offset": 0,
                                        "last_fetched_epoch": -1,
                                        "log_start_offset": -1,
                                        "partition_max_bytes": 1024,
                                    }
                                ],
                            }
                        ],
                        "forgotten_topics_data": [],
                        "rack_id": "",
                    },
                )
            )
        out: dict[str, float] = {}
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            t.profile(profile / f"small-requests-b{brokers}.txt", rate=250)
        for name, frames in (("produce", produce), ("fetch", fetch)):
            for s, f in zip(socks, frames):  # warm-up: codecs compiled, first appends done
                s.sendall(f)
                _recv_frame(s)
            cpu0 = t.cpu_s()
            t0 = time.perf_counter()
            for _ in range(rounds):
                for s, f in zip(socks, frames):
                    s.sendall(f)
                for s in socks:
                    _recv_frame(s)
            wall = time.perf_counter() - t0
            cpu1 = t.cpu_s()
            assert cpu0 is not None and cpu1 is not None
            n = rounds * partitions
            out[f"{name}_cpu_us"] = (cpu1 - cpu0) / n * 1e6
            out[f"{name}_per_s"] = n / wall
        return out
    finally:
        for s in socks:
            s.close()
        t.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.small_requests", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--brokers", default="1,3")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy profiles (collapsed stacks) into this folder")
    args = ap.parse_args(argv)
    root = workdir("groupd-bench-small-requests-")
    try:
        for b in (int(x) for x in args.brokers.split(",")):
            r = _one(root, b, args.partitions, args.rounds, args.profile)
            print(
                f"{b} broker(s): Produce {r['produce_cpu_us']:.0f} us server CPU/request ({r['produce_per_s']:.0f}/s), "
                f"Fetch {r['fetch_cpu_us']:.0f} us/request ({r['fetch_per_s']:.0f}/s)",
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
