"""Server CPU per small Produce and per small Fetch request, on one broker and on three (issue 29
item 4: franz-go's TestGroupETL on three brokers sends ~6x the requests of one broker, each small,
so what one small request costs the server decides the three-broker run).

Each of ``--partitions`` partitions gets its own connection to its leader (as a client that splits
its work per broker does); every round sends one request on each connection and reads every
answer. Modes (``--modes``): ``produce`` one 64-byte record per request, acks=all, no producer id;
``produce_acks1`` the same with acks=1; ``produce_idem`` acks=all with a producer id from
InitProducerId and the next sequence each request; ``fetch`` v12 from offset 0 with
``partition_max_bytes`` 1024, ``max_wait_ms`` 0 and the partition's ``current_leader_epoch`` (as
franz-go sends it); ``fetch_parked`` a Fetch at the log end (parked, Kafka's DelayedFetch) woken by
a one-record produce on a second connection, the figure per pair. Figures: the daemon's CPU
microseconds per request over ``--rounds`` rounds of each, per broker count, in one run (the
client's own CPU is not counted). The librdkafka mock has no CreateTopics, so it is not measured
here.

    python -m bench.small_requests [--rounds 3000] [--partitions 6] [--brokers 1,3] [--modes ...] [--profile DIR]

Figures (2-core shared machine, --rounds 3000, two alternating rounds before/after the Produce path
lost its tasks, issue 29 item 4): Produce 57 -> 52-53 us (1 broker), 61-64 -> 56 us (3 brokers);
Fetch 42-43 -> 42 us (1), 45 -> 43 us (3). A py-spy profile of this load puts ~3/4 of the
daemon's samples in the event loop's own C code and socket system calls (one read and one write per
request): that, not the handlers, is the floor of a small request.

That py-spy figure overstates the socket write: py-spy samples wall time, and the write that wakes
the client on a loaded 2-core machine is often descheduled inside the call. ``perf record`` on the
daemon (CPU samples) puts 72% of a small Produce in libpython (the interpreter 24%, malloc/free 8%,
the cyclic GC 6-8%), 23% in the kernel and ~2% in uvloop. System calls per request (strace -c):
Produce one read, one write, one pwrite; Fetch one read, one write, two preads; epoll_wait once per
~4-5 requests. The GC share came from a reference cycle per Produce (the append's callbacks ->
the request's callback -> its PendingAppend -> the callbacks): ~26 objects a request left to the
young collections (167 of them in a 36,000-request run, 0.22 s). Broken (Settled empties its list as
it calls it), a 30,000-request run has 2, and perf's gc_collect_main + visit_decref + list_traverse
go from 7.2% of the daemon's samples to none, _PyObject_Malloc + _PyObject_Free from 7.6% to 3.9%. Three alternating rounds, --rounds 10000, medians
before -> after: 1 broker produce 44.2 -> 42.2 us, acks=1 41.8 -> 39.5, idempotent 48.7 -> 48.7,
fetch 36.0 -> 37.0, parked fetch + produce 119 -> 113; 3 brokers produce 46.0 -> 45.5, fetch 38 -> 36
(each figure moves by 10-15% between rounds on this shared machine).

The Produce path cut per request and per partition (issue 29 item 4, 2026-11-29): one checked batch
appended by ``PartitionLog._append_one_view`` (plan, write, commit in one), the answer packed by
``produce_wire``, one ``Settled`` per partition, no per-batch helper calls in the producer state or
the appender; 436 -> 282 Python calls per franz-shaped request under cProfile. Load-insensitive,
``python -m bench.produce_callgrind`` (daemon instructions per request, 40cdb3d -> after): small
1 broker 255k -> 190k, 3 brokers 270k -> 203k; franz shape (idempotent, 2 x 15 records) 479k ->
336k (1) and 479k -> 357k (3). Here, three alternating rounds of --rounds 10000, medians before ->
after: 1 broker produce 47.2 -> 34.5 us, idempotent 51.0 -> 36.3; 3 brokers produce 47.7 -> 37.8,
idempotent 52.5 -> 42.5 (a machine shared with other work: single rounds moved by up to 25%).

The Produce path's C steps and fewer calls per partition (issue 26, issue 29 item 4, 2026-11-29;
``bench.produce_callgrind``: small 185k -> 124k instructions, franz 331k -> 226k on 1 broker,
349k -> 243k on 3), here two alternating runs per build of --rounds 3000 (--modes
produce,produce_idem), 0b5b0a9 -> after: 1 broker produce 40.0, 29.4 -> 22.2, 25.6 us,
idempotent 40.6, 36.1 -> 31.1, 26.7; 3 brokers produce 33.9, 32.8 -> 24.4, 24.4, idempotent
42.2, 36.1 -> 27.8, 27.2 (a loaded machine: single figures move by 15-25%).

The Fetch path cut per request (issue 29 item 4, 2026-11-29, h/fetchc): the request read and the
answer written in C (``broker/data_plane/_fetch.c``), ``FetchHandler.read`` building each answer
once, a read at the log end taking no snapshot, parked fetches expiring under one loop timer (not a
uvloop timer each). Two alternating sittings of ``--modes fetch,fetch_parked --rounds 3000``
(before 0b5b0a9, its own venv; a machine shared with other work), before -> after: 1 broker fetch
28.3, 28.9 -> 22.8, 23.3 us, parked fetch + produce 116.7, 126.7 -> 108.3, 103.3 us; 3 brokers fetch
29.4, 27.2 -> 25.6, 25.6 us, parked pair 126.7, 136.7 -> 100.0, 100.0 us. Load-insensitive, with a
franz-go session: ``python -m bench.fetch_callgrind`` (281k -> 175k instructions per session
Fetch).

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


MODES = ("produce", "produce_acks1", "produce_idem", "fetch", "fetch_parked")


def _produce_frame(topic: str, p: int, batch: bytes, acks: int) -> bytes:
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}],
    }
    return _frame("Produce", 9, body)


def _fetch_frame(topic: str, p: int, epoch: int, offset: int, max_wait_ms: int) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
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
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1024,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return _frame("Fetch", 12, body)


def _with_sequence(frame: bytes, batch: bytes, seq: int) -> bytes:
    """``frame`` with its batch's base sequence set to ``seq`` (and its CRC recomputed)."""
    buf = bytearray(frame)
    at = frame.index(batch)
    struct.pack_into(">i", buf, at + 53, seq)  # baseSequence, after producerId/producerEpoch
    struct.pack_into(">I", buf, at + 17, rec.compute_crc(buf, at, len(batch)))
    return bytes(buf)


def _one(t: Any, partitions: int, rounds: int, modes: list[str]) -> dict[str, float]:
    """Each mode of ``modes`` against the running target ``t``: server CPU us per request."""
    import socket

    from tests.support.raw_client import RawClient

    socks: list[socket.socket] = []
    try:
        port = int(t.bootstrap.rsplit(":", 1)[1])
        admin = RawClient(port)
        av = admin.request("ApiVersions", 0, {})
        top = {k["api_key"]: k["max_version"] for k in av["api_keys"]}

        def version(name: str, want: int) -> int:
            return min(want, top.get(API_BY_NAME[name].key, -1))

        topic = "small"
        r = admin.request(
            "CreateTopics",
            version("CreateTopics", 5),
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
            version("Metadata", 12),
            {
                "topics": [{"topic_id": b"\0" * 16, "name": topic}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        ports = {b["node_id"]: b["port"] for b in md["brokers"]}
        leaders = {p["partition_index"]: (p["leader_id"], p["leader_epoch"]) for p in md["topics"][0]["partitions"]}
        ip = admin.request(
            "InitProducerId",
            version("InitProducerId", 4),
            {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
        )
        assert ip["error_code"] == 0, ip
        admin.close()
        now = int(time.time() * 1000)
        batch = rec.build_batch([(b"k", b"v" * 64, (), now)])
        idem = rec.build_batch(
            [(b"k", b"v" * 64, (), now)],
            producer_id=ip["producer_id"],
            producer_epoch=ip["producer_epoch"],
            base_sequence=0,
        )
        conns, extra = [], []
        for p in range(partitions):
            leader = leaders[p][0]
            for group in (conns, extra):
                s = socket.create_connection(("127.0.0.1", ports[leader]))
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                socks.append(s)
                group.append(s)
        produce = [_produce_frame(topic, p, batch, -1) for p in range(partitions)]
        produce1 = [_produce_frame(topic, p, batch, 1) for p in range(partitions)]
        idem_base = [_produce_frame(topic, p, idem, -1) for p in range(partitions)]
        seq = [0] * partitions
        leo = [0] * partitions

        def run(name: str, frames: list[bytes], n_rounds: int) -> None:
            cpu0 = t.cpu_s()
            t0 = time.perf_counter()
            for _ in range(n_rounds):
                for s, f in zip(conns, frames):
                    s.sendall(f)
                for s in conns:
                    _recv_frame(s)
            wall = time.perf_counter() - t0
            cpu1 = t.cpu_s()
            assert cpu0 is not None and cpu1 is not None
            n = n_rounds * partitions
            out[f"{name}_cpu_us"] = (cpu1 - cpu0) / n * 1e6
            out[f"{name}_per_s"] = n / wall
            out[f"{name}_n"] = n

        out: dict[str, float] = {}
        for s, f in zip(conns, produce):  # warm-up: codecs compiled, first appends done
            s.sendall(f)
            _recv_frame(s)
        for p in range(partitions):
            leo[p] += 1

        def _mode(mode: str) -> None:
            if mode == "produce":
                run(mode, produce, rounds)
                leo[:] = [x + rounds for x in leo]
            elif mode == "produce_acks1":
                run(mode, produce1, rounds)
                leo[:] = [x + rounds for x in leo]
            elif mode == "produce_idem":
                # one request per partition in flight, each with the next sequence: frames made
                # ahead (the client's CPU is not counted, but keep the loop tight anyway)
                cpu = 0.0
                wall = 0.0
                chunk = 500
                left = rounds
                while left > 0:
                    k = min(chunk, left)
                    left -= k
                    frames = [
                        [_with_sequence(idem_base[p], idem, seq[p] + i) for p in range(partitions)] for i in range(k)
                    ]
                    for p in range(partitions):
                        seq[p] += k
                    cpu0 = t.cpu_s()
                    t0 = time.perf_counter()
                    for fr in frames:
                        for s, f in zip(conns, fr):
                            s.sendall(f)
                        for s in conns:
                            resp = _recv_frame(s)
                    wall += time.perf_counter() - t0
                    cpu += t.cpu_s() - cpu0
                leo[:] = [x + rounds for x in leo]
                out[f"{mode}_cpu_us"] = cpu / (rounds * partitions) * 1e6
                out[f"{mode}_per_s"] = rounds * partitions / wall
                out[f"{mode}_n"] = rounds * partitions
                assert resp  # the last answers were read
            elif mode == "fetch":
                fetch = [_fetch_frame(topic, p, leaders[p][1], 0, 0) for p in range(partitions)]
                for s, f in zip(conns, fetch):
                    s.sendall(f)
                    _recv_frame(s)
                run(mode, fetch, rounds)
            elif mode == "fetch_parked":
                # A Fetch at the log end (parked: DelayedFetch), woken by a one-record Produce on a
                # second connection; the figure is per pair (the parked fetch and its produce).
                n_rounds = max(1, rounds // 3)
                cpu = 0.0
                wall = 0.0
                for _ in range(n_rounds):
                    fetch = [_fetch_frame(topic, p, leaders[p][1], leo[p], 5000) for p in range(partitions)]
                    cpu0 = t.cpu_s()
                    t0 = time.perf_counter()
                    for s, f in zip(conns, fetch):
                        s.sendall(f)
                    time.sleep(0.0005)  # parked before the produce arrives (the wait is idle)
                    for s, f in zip(extra, produce):
                        s.sendall(f)
                    for s in extra:
                        _recv_frame(s)
                    for s in conns:
                        _recv_frame(s)
                    wall += time.perf_counter() - t0
                    cpu += t.cpu_s() - cpu0
                    leo[:] = [x + 1 for x in leo]
                out[f"{mode}_cpu_us"] = cpu / (n_rounds * partitions) * 1e6
                out[f"{mode}_per_s"] = n_rounds * partitions / wall
                out[f"{mode}_n"] = n_rounds * partitions

        for mode in modes:
            _mode(mode)
        return out
    finally:
        for s in socks:
            s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.small_requests", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--brokers", default="1,3")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy profiles (collapsed stacks) into this folder")
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        ap.error(f"unknown modes: {sorted(unknown)}")
    root = workdir("groupd-bench-small-requests-")
    targets: list[tuple[str, Any]] = []
    for b in (int(x) for x in args.brokers.split(",")):
        targets.append(
            (f"groupd {b} broker(s)", lambda b=b: start_groupd(root / f"b{b}" / "data", "--brokers", str(b))[0])
        )
    try:
        for label, start in targets:
            t = start()
            try:
                if args.profile is not None and not t.mock:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    t.profile(args.profile / f"small-requests-{label.split()[1]}.txt", rate=250)
                r = _one(t, args.partitions, args.rounds, modes)
            finally:
                t.stop()
            line = ", ".join(f"{m} {r[m + '_cpu_us']:.1f} us" + f" ({r[m + '_per_s']:.0f}/s)" for m in modes)
            print(f"{label}: server CPU per request: {line}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
