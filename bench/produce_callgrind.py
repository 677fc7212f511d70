"""The daemon's instructions per small Produce request (issue 29 item 4, issue 26), load-insensitive:
one ``groupd serve`` under callgrind, a raw client sending N Produce requests one at a time, the
counters zeroed before and dumped after them. What it counts is the server's whole cost of one
request (read, decode, dispatch, checks, producer state, append, answer, write), the figure the
three-broker pipelines multiply by their request count. Compare two commits of the tree with it;
the machine's load does not move the figure (wall-clock benches on a shared 2-core machine move by
10-15% between rounds).

Shapes (``--shape``):
  small  bench.small_requests' produce: one 64-byte record, one partition, acks=all, no producer id.
  plain  what confluent-kafka's default producer sends in bench/produce.py (no producer id, 100
         random bytes keyed by a number), ``--parts`` partitions (default 4) of ``--records`` each.
  franz  what franz-go sends on three brokers in TestGroupETL (bench/cluster_group.py: ~29 records
         over 1.7 partitions per request): an idempotent producer (producer id, epoch, the next
         sequence per partition), 2 partitions of 15 records each, acks=all, Produce v9.

    python -m bench.produce_callgrind [N] [--shape small|franz|plain] [--parts P] [--records R] [--pipeline K]
                                      [--brokers 1] [--out cg.out] [--annotate 25]
    python -m bench.produce_callgrind [N] --cprofile out.prof   # the same load under cProfile instead:
                                                                # Python functions, calls per request

Figures (1,000 requests, 2026-11-29), before (40cdb3d) -> after the Produce path's cuts (issue 29
item 4): small 255,102 -> 189,586 (1 broker), 269,531 -> 202,613 (3 brokers); franz 478,695 ->
336,252 (1), 478,596 -> 356,864 (3); 6 partitions of 500 records (--shape franz --parts 6
--records 500) 3,971,363 -> 3,174,408. What is left is the interpreter itself (ceval ~38% of the
instructions, allocation and frames most of the rest), spread over ~280 Python-level calls of a
two-partition request (cProfile; 436 before): the socket path, dispatch and the cluster guard
(~20k of the 3-broker figure) are outside the Produce handler.

``--pipeline K`` sends K requests back to back before reading their answers, as a producer with
requests in flight does: the daemon then reads several in one go, which one request at a time
never shows. Issue 26 (bench/produce.py's load: ``--shape plain --parts 4 --records 200
--pipeline 4``, 200 requests): 8a315cd 1,067,400 instructions per request, memcpy 493k of them
(valgrind counts a ``rep movsb`` byte by byte: ~5.4 copies of the ~92 KB request); after the read
buffer keeps only the rest of a split frame and the log writes a batch with pwritev instead of
copying it to stamp its offset, 893,273 (-16%), memcpy 316k (~3.4 copies).

The per-request cost cut again (issue 26, issue 29 item 4; 2026-11-29, 0b5b0a9 -> h/prodc, all
in one sitting, the base measured by checking its files out in the same tree): franz 331,458 ->
225,801 (-32%, 1 broker), 348,788 -> 243,323 (-30%, 3 brokers); small 185,470 -> 124,229 (-33%),
196,763 -> 135,187 (-31%); plain (--parts 4 --records 200 --pipeline 4) 912,570 -> 623,237
(-32%). What went: (1) the generic decoder's walk of the request, the header checks of each batch
(``check_batch``, a ``BatchView``, the CRC through a memoryview, the transactional test) and the
answer's packing, each now one C call (``broker/data_plane/_produce.c``: the profile showed ~20%
of a franz request in those Python calls, work of a few fields each that no Python rewrite gets
below a call per field); (2) the records of a partition of 4 KiB or more are a memoryview of the
request frame instead of a copy (plain: ~88k instructions of memcpy per request), the C check's
``BatchView`` pointing into the frame; (3) in Python, the calls around each partition: one
``PendingAppend`` that is also its append's ``on_settled``, a request's answer counted down
inline, the log's one-batch append tracking its index entries and deciding a roll in locals and
calling ``os.pwritev`` directly for the plain ``FileOps``, no fsync-schedule call while a timer
is set, no property calls for the answer's log start offset or a non-transactional batch's end
offset. cProfile of the franz shape (3,000 requests, 1 broker): 760,651 -> 488,437 Python-level
calls (~253 -> ~163 per request), 1.62 -> 1.10 s of profiled thread CPU. ``GROUPD_NO_NATIVE=1`` runs the Python path (the reference:
tests/broker/test_produce_native.py checks the C steps against it).
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from groupd.storage import records as rec

from . import targets
from .targets import start_groupd


def _summary(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise ValueError(f"no summary in {path}")


def spawner(out: Path, cprofile: Path | None) -> Any:
    """A replacement for ``targets._spawn`` that starts the daemon under callgrind (its counters
    written to ``out``) or, with ``cprofile``, under cProfile (enabled by SIGUSR1, dumped to that
    file at a clean exit). Shared by the callgrind benches of Produce and Fetch."""
    spawn = targets._spawn

    def under_callgrind(cmd: list[str], **kw: Any) -> Any:
        # uncompressed names: each dump then reads on its own (callgrind_annotate)
        cg = ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no"]
        return spawn([*cg, f"--callgrind-out-file={out}", *cmd], **kw)

    def under_cprofile(cmd: list[str], **kw: Any) -> Any:
        # the daemon's main under a profiler that is enabled by SIGUSR1 and dumps at a clean exit
        code = (
            "import cProfile, signal, sys\n"
            "from groupd.cli import main\n"
            "import time\n"
            # CPU time of the loop's thread: a wall clock charges the socket write with the time
            # the process is descheduled after waking the client (a loaded 2-core machine)
            "p = cProfile.Profile(time.thread_time)\n"
            "signal.signal(signal.SIGUSR1, lambda *_: p.enable())\n"
            "sys.argv = ['groupd', *sys.argv[1:]]\n"
            "try:\n    rc = main()\nfinally:\n    p.disable()\n"
            f"    p.dump_stats({str(cprofile)!r})\n"
            "sys.exit(rc)\n"
        )
        assert cmd[1:3] == ["-m", "groupd"], cmd
        return spawn([cmd[0], "-c", code, *cmd[3:]], **kw)

    return under_cprofile if cprofile else under_callgrind


def topic_leaders(port: int, topic: str) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """Create ``topic`` (6 partitions) through the broker at ``port``; its brokers' ports by node id
    and each partition's (leader, leader epoch)."""
    from tests.support.raw_client import RawClient

    admin = RawClient(port, timeout=60)
    r = admin.request(
        "CreateTopics",
        4,
        {
            "topics": [{"name": topic, "num_partitions": 6, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000,
            "validate_only": False,
        },
    )
    assert r["topics"][0]["error_code"] == 0, r
    md = admin.request(
        "Metadata",
        9,
        {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        | {"include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
    )
    admin.close()
    ports = {b["node_id"]: b["port"] for b in md["brokers"]}
    return ports, {p["partition_index"]: (p["leader_id"], p["leader_epoch"]) for p in md["topics"][0]["partitions"]}


def measure(t: Any, out: Path, rounds: int, step: Any, cprofile: Path | None, top: int) -> Path | None:
    """Run ``step`` ``rounds`` times against the daemon ``t`` started by ``spawner``: under cProfile
    (enabled by SIGUSR1, its top ``top`` functions printed; returns None) or with callgrind's
    counters zeroed before and dumped after (returns the dump; ``top`` > 0 prints its top
    functions)."""
    if cprofile:
        os.kill(t.pid, signal.SIGUSR1)
        time.sleep(0.5)  # the handler runs on the loop's next wake-up: the sleep lets it in
        for _ in range(rounds):
            step()
        t.proc.terminate()
        t.proc.wait(120)
        pstats.Stats(str(cprofile)).sort_stats("tottime").print_stats(top or 40)
        return None
    subprocess.run(["callgrind_control", "-z", str(t.pid)], check=True, capture_output=True)
    for _ in range(rounds):
        step()
    subprocess.run(["callgrind_control", "-d", str(t.pid)], check=True, capture_output=True)
    dumped = sorted(out.parent.glob(out.name + ".*"))[-1]
    if top:
        ann = subprocess.run(
            ["callgrind_annotate", "--threshold=100", str(dumped)], capture_output=True, text=True
        ).stdout.splitlines()
        start = next((i for i, ln in enumerate(ann) if "file:function" in ln), 0)
        for ln in ann[start + 2 : start + 2 + top]:
            print(ln)
    return dumped


def _with_sequence(batch: bytes, seq: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 53, seq)  # baseSequence
    struct.pack_into(">I", buf, 17, rec.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def common_options(ap: argparse.ArgumentParser) -> None:
    """The options every callgrind bench takes: the request count first, the rest after its own."""
    ap.add_argument("n", nargs="?", type=int, default=1000)
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--annotate", type=int, default=0, help="print the top N functions (callgrind_annotate)")
    ap.add_argument("--cprofile", type=Path, default=None, help="run the daemon under cProfile, stats to this file")


def start_profiled(args: argparse.Namespace, prefix: str) -> tuple[Any, Path]:
    """``groupd serve`` under callgrind (or cProfile, ``--cprofile``) in a fresh directory: the
    target and the callgrind output file."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    out = args.out or root / "cg.out"
    targets._spawn = spawner(out, args.cprofile)  # type: ignore[assignment]
    t, _ = start_groupd(root / "data", "--brokers", str(args.brokers), timeout=300)
    return t, out


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.produce_callgrind", description=__doc__.split("\n\n")[0])
    common_options(ap)
    ap.add_argument("--shape", choices=("small", "franz", "plain"), default="small")
    ap.add_argument("--parts", type=int, default=None, help="partitions per request (default: small 1, franz 2)")
    ap.add_argument("--records", type=int, default=15, help="records per batch of the franz and plain shapes")
    ap.add_argument(
        "--pipeline", type=int, default=1, help="requests sent back to back before their answers are read (>= 1)"
    )
    args = ap.parse_args()
    t, out = start_profiled(args, "groupd-produce-callgrind-")
    try:
        from tests.support.raw_client import RawClient

        port = int(t.bootstrap.rsplit(":", 1)[1])
        ports, led = topic_leaders(port, "p")
        leaders = {p: leader for p, (leader, _) in led.items()}
        admin = RawClient(port, timeout=60)  # InitProducerId (franz), then closed
        now = int(time.time() * 1000)
        if args.shape == "small":
            lead = leaders[0]
            parts = [p for p in sorted(leaders) if leaders[p] == lead][: args.parts or 1]
            pid, epoch = -1, -1
            batches = {p: rec.build_batch([(b"k", b"v" * 64, (), now)]) for p in parts}
        elif args.shape == "plain":
            # confluent-kafka's default producer (no idempotence): records of 100 random bytes keyed
            # by a number, no producer id (bench/produce.py's messages)
            lead = leaders[0]
            parts = [p for p in sorted(leaders) if leaders[p] == lead][: args.parts or 4]
            pid, epoch = -1, -1
            batches = {
                p: rec.build_batch([(b"%d" % (i % 1000), os.urandom(100), (), now + i) for i in range(args.records)])
                for p in parts
            }
        else:
            # two partitions of one broker on its connection (franz-go sends per broker)
            lead = leaders[0]
            parts = [p for p in sorted(leaders) if leaders[p] == lead][: args.parts or 2]
            ip = admin.request(
                "InitProducerId",
                4,
                {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
            )
            pid, epoch = ip["producer_id"], ip["producer_epoch"]
            batches = {
                p: rec.build_batch(
                    [(str(i).encode(), b"v" * 100, (), now + i) for i in range(args.records)],
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=0,
                )
                for p in parts
            }
        admin.close()
        c = RawClient(ports[leaders[parts[0]]], timeout=60)
        seq = 0

        def produce() -> None:
            corrs = [send() for _ in range(args.pipeline)]
            for corr in corrs:
                r = c.receive("Produce", 9, corr)
                assert all(pr["error_code"] == 0 for tr in r["responses"] for pr in tr["partition_responses"]), r

        def send() -> int:
            nonlocal seq
            data = []
            for p in parts:
                b = batches[p] if pid < 0 else _with_sequence(batches[p], seq)
                data.append({"index": p, "records": b})
            if pid >= 0:
                seq += args.records
            body = {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30000,
                "topic_data": [{"name": "p", "partition_data": data}],
            }
            return c.send("Produce", 9, body)

        for _ in range(max(1, 200 // args.pipeline)):  # warm: codecs, the logs' first segments, the producer state
            produce()
        rounds = max(1, args.n // args.pipeline)
        dumped = measure(t, out, rounds, produce, args.cprofile, args.annotate)
        if dumped is None:
            print(f"{args.n} requests ({args.shape}, {args.brokers} broker(s)); cProfile stats in {args.cprofile}")
            return
        print(
            f"{_summary(dumped) / (rounds * args.pipeline):,.0f} instructions per Produce ({args.shape}, "
            f"{args.brokers} broker(s), {rounds * args.pipeline} requests, {args.pipeline} at a time, {dumped})",
            flush=True,
        )
    finally:
        t.proc.terminate()
        t.proc.wait(120)


if __name__ == "__main__":
    sys.exit(main())
