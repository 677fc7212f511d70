"""Produce side by side: confluent-kafka producing to groupd and to the librdkafka mock cluster, in
one run, rounds alternating, ratio of the median rates.

    python -m bench.produce [--messages 300000] [--rounds 11] [--size 100] [--linger-ms 5] [--acks all]
                            [--profile groupd.txt]

Both targets are started once and stay up for the whole run, each with the same topic (the mock's
default partition count, 4: it has no CreateTopics and creates a topic on first use); then
``--rounds`` rounds per target, alternating in pairs whose order flips each time (mock, groupd;
groupd, mock; ...), so a load that drifts over the run weighs on both alike. Each round is one
fresh producer (no compression, values of ``--size`` random bytes, ``acks`` and ``linger.ms`` as
given), warmed first (a message to every partition, flushed: connection, ApiVersions, Metadata and
a first Produce answered), then timed from the first of ``--messages`` ``produce()`` calls to the end
of ``flush()`` (an undelivered message ends the run). A target's rate is the median of its rounds;
its server CPU per message (/proc/<pid>/stat, utime + stime) is its CPU over every timed window
divided by every message it took. Every process listens on 127.0.0.1 and is stopped by pid.
``python -m bench.run --only produce`` runs the same rounds (150,000 messages x 11 rounds per target
under ``--quick``) and scores the ratio of the medians in the regression guard (``bench/history.py``,
keys unchanged: groupd's ``msgs_per_s`` over the mock's). ``--profile`` samples groupd's last round
with py-spy (collapsed stacks).

What the figure measures (2026-11-29, issue 26; the phases of a round timed per target, the
producing thread's schedstat read around its loop). The rate is the client's: ``produce()`` is
never refused (the queue holds 500,000 messages), so the producing Python thread runs flat out
through its loop, ~1.4-1.7 us of its own CPU per message whichever target answers (groupd/mock
1.01-1.07x), and the loop is ~98% of a round; ``flush()`` then waits for the last answers (a
linger and a round trip: medians 3-10 ms for groupd, 3-6 ms for the mock, 1-2% of a round).
What moves a round is how long that thread waits for a CPU: its run-queue wait was 0.01-0.35 s
in 0.25-0.5 s rounds on this 2-core machine shared with other sessions. The target weighs in
through the CPU it takes from that machine, groupd ~0.23 us/msg against the mock's ~0.07: in one
quiet run groupd's rounds waited 0.072-0.083 s, the mock's 0.040-0.053 s, most of the difference
between their rates (0.86x). So on a loaded machine the ratio is roughly 1 - (groupd's server CPU
- the mock's) / the client's CPU per message, and only the server's CPU per message moves it.

The bench this replaces (until 8a315cd) started a fresh target per round, 4 rounds of 100,000
messages (0.15-0.45 s each) with the producer's start, connect and first Metadata inside the
timed window (its first answer came 7-144 ms after the first ``produce()``, right after the
target's own start-up burst of CPU), and scored the ratio of the means of two rounds per target:
one slow round moved it by 20-50% (three runs of one build, 8a315cd, in one sitting: 0.44x,
0.75x, 0.72x; the issue's 0.92x, 1.10x, 0.79x). Its topics differed too: groupd's had 6
partitions, the mock's 4 (the mock answers no CreateTopics: the request waited out its 15 s
timeout, twice a run, and the mock made the topic on first use). Now: no start-up in a timed
window, 11 rounds per target, the same topic, medians; each round's loop/flush split and run-queue
wait printed, and the pairs' ratios (their spread says how loaded the sitting was). Runs
alternating the builds: in the same sitting as the old scheme's figures above (pairs' ratios
0.25-2.1: four other sessions at work) 8a315cd 0.96x, 0.89x, 0.79x, with the produce path's
copies cut (next paragraph) 0.72x, 0.92x, 0.86x; in a quieter one (pairs 0.47-1.38) 0.89x, 0.89x,
0.86x against 0.97x, 0.87x, 0.93x; server CPU 0.22-0.29 us/msg for both, the mock's 0.06-0.09. A
5-10% change of the server's CPU is below what three runs resolve on this machine: compare server
CPU (``bench.produce_callgrind``: instructions per request, load-insensitive) for that.

The copies (issue 26): requests of 4 partitions x 200 records of this bench's shape, 4 sent back
to back (``python -m bench.produce_callgrind 200 --shape plain --parts 4 --records 200
--pipeline 4``): 1,067,400 -> 893,273 daemon instructions per request (-16%), memcpy's share
493k -> 316k bytes, i.e. ~5.4 -> ~3.4 copies of each ~92 KB request. The read buffer took a
producer's whole 256 KiB reads and each frame left it in two copies (protocol/server.py); the
log copied each batch to stamp its offset and epoch (storage/log.py, now one pwritev). Left: the
read itself (uvloop's bytes), the frame's bytes and the decoder's slice of each batch.

The per-request cut of the Produce path (issue 26, 2026-11-29: the body, batch checks and answer
in C, large records not copied, fewer Python calls per partition; ``bench.produce_callgrind``'s
plain shape 912,570 -> 623,237 daemon instructions per request, -32%), two alternating runs per
build in one sitting (pairs' medians 0.91-0.97x: a loaded machine): 0b5b0a9 0.85x, 0.92x; after
0.96x, 0.93x; server CPU 0.24, 0.19 -> 0.20, 0.20 us/msg (the mock's 0.06-0.07). The CPU
counters read utime + stime, and the system time (the socket reads, the page-cache copy of each
write) did not shrink with the instructions: per message the daemon still spends ~3x the mock's.

Earlier figures (same machine; ``--messages 300000``, the old scheme): before (2586db9: the CRC
computed twice, records framed byte by byte) server CPU 0.57, 0.60, 0.53, 0.53 us/msg, groupd/mock
0.84x, 0.86x; after (the CRC once, framing through a step table) 0.43, 0.50, 0.43, 0.40 us/msg,
0.78x, 0.91x. Issue 26: before (69728ef) server CPU median 0.57 us/msg, 0.58x, 0.74x, 0.92x; after
(the framing walk of a produced batch in C, storage/_native.c ``frame_records``) median 0.415
us/msg, 0.85x, 0.82x, 0.96x.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .dataplane import BenchProducer
from .targets import Target, start_groupd, start_mock, workdir

TOPIC = "b"


def _schedstat() -> tuple[float, float] | None:
    """(seconds on a CPU, seconds waiting for one) of the calling thread (Linux schedstat)."""
    try:
        with open("/proc/thread-self/schedstat") as fh:
            on, wait, _ = fh.read().split()
        return int(on) / 1e9, int(wait) / 1e9
    except (OSError, ValueError):
        return None


def _mock_topic(t: Target) -> int:
    """The mock has no CreateTopics (librdkafka's mock answers none: a request waits out its
    timeout) and creates a topic on first use with its default partition count: made so, and that
    count returned, which groupd's topic then gets too (same batching on both sides)."""
    p = Producer({"bootstrap.servers": t.bootstrap})
    p.produce(TOPIC, value=b"x")
    if p.flush(30):
        raise SystemExit("produce to mock: the topic was not created")
    return len(p.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)


def _create_topic(t: Target, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": t.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)])[TOPIC].result(15)


def _round(t: Target, n: int, size: int, linger_ms: int, acks: str, partitions: int) -> dict[str, float]:
    """One warmed producer, ``n`` messages timed (``bench.dataplane._produce``'s loop)."""
    bp = BenchProducer(t.bootstrap, size, linger_ms, acks)
    p = bp.producer

    # Warm-up, outside the timed window: the connection, ApiVersions, Metadata and one answered
    # Produce per partition (what a round would otherwise spend its first 10-140 ms on).
    for part in range(partitions):
        p.produce(TOPIC, value=bp.payloads[0], partition=part, on_delivery=bp.report)
    if p.flush(30) or bp.failed:
        raise SystemExit(f"produce to {t.name}: the warm-up was not delivered")
    c0 = t.cpu_s() or 0.0
    s0 = _schedstat()
    t0 = time.perf_counter()
    bp.produce_n(TOPIC, n)
    t1 = time.perf_counter()
    s1 = _schedstat()
    left = p.flush(120)
    t2 = time.perf_counter()
    c1 = t.cpu_s() or 0.0
    if left or bp.failed:
        raise SystemExit(f"produce to {t.name}: {left} undelivered, {bp.failed} failed")
    out = {"secs": t2 - t0, "loop_s": t1 - t0, "flush_s": t2 - t1, "server_cpu_s": c1 - c0}
    if s0 is not None and s1 is not None:
        out["loop_on_cpu_s"] = s1[0] - s0[0]
        out["loop_runq_wait_s"] = s1[1] - s0[1]
    return out


def run(
    quick: bool = False,
    *,
    messages: int | None = None,
    rounds: int | None = None,
    size: int = 100,
    linger_ms: int = 5,
    acks: str = "all",
    profile: Path | None = None,
) -> dict[str, Any]:
    """The alternating rounds; per target the median rate and the server CPU per message (what
    ``bench.run``'s ``produce`` workload records and ``bench.history`` scores against the mock)."""
    n = messages or (150_000 if quick else 300_000)
    r = rounds or 11
    base = workdir("groupd-produce-")
    per: dict[str, list[dict[str, float]]] = {"mock": [], "groupd": []}
    targets: dict[str, Target] = {}
    partitions = 0
    try:
        targets["mock"] = start_mock(base)
        targets["groupd"], _ = start_groupd(base / "data")
        partitions = _mock_topic(targets["mock"])
        _create_topic(targets["groupd"], partitions)
        for i in range(r):
            for kind in ("mock", "groupd") if i % 2 == 0 else ("groupd", "mock"):
                t = targets[kind]
                if profile and kind == "groupd" and i == r - 1:
                    t.profile(profile)
                x = _round(t, n, size, linger_ms, acks, partitions)
                per[kind].append(x)
                wait = f"  run-queue wait {x['loop_runq_wait_s']:5.3f} s" if "loop_runq_wait_s" in x else ""
                print(
                    f"   {i + 1}/{r} {kind:7s} {n / x['secs']:10,.0f} msg/s  loop {x['loop_s']:5.3f} s  flush "
                    f"{x['flush_s'] * 1000:5.1f} ms{wait}  server CPU {x['server_cpu_s'] / n * 1e6:5.2f} us/msg",
                    flush=True,
                )
    finally:
        for t in targets.values():
            t.stop()
        shutil.rmtree(base, ignore_errors=True)
    out: dict[str, Any] = {"messages": n, "rounds": r, "size": size, "linger_ms": linger_ms, "acks": acks}
    out["partitions"] = partitions
    for kind in ("groupd", "mock"):
        xs = per[kind]
        out[kind] = {
            "msgs_per_s": statistics.median(n / x["secs"] for x in xs),
            "server_us_per_msg": sum(x["server_cpu_s"] for x in xs) / (n * len(xs)) * 1e6,
            "round_msgs_per_s": [n / x["secs"] for x in xs],
            "median_flush_ms": statistics.median(x["flush_s"] for x in xs) * 1000,
        }
        if all("loop_runq_wait_s" in x for x in xs):
            out[kind]["median_loop_on_cpu_us_per_msg"] = statistics.median(x["loop_on_cpu_s"] for x in xs) / n * 1e6
    # each pair's ratio too: how far one pair of neighbouring rounds may stray from the median
    out["pair_ratios"] = [n / g["secs"] / (n / m["secs"]) for g, m in zip(per["groupd"], per["mock"])]
    return out


def print_results(out: dict[str, Any], print_figures: Callable[..., None]) -> None:
    g, m = out["groupd"], out["mock"]
    rows = [
        ("messages/s (median of rounds)", {"groupd": g["msgs_per_s"], "mock": m["msgs_per_s"]}),
        ("server CPU us/msg", {"groupd": g["server_us_per_msg"], "mock": m["server_us_per_msg"]}),
        ("flush ms (median)", {"groupd": g["median_flush_ms"], "mock": m["median_flush_ms"]}),
    ]
    if "median_loop_on_cpu_us_per_msg" in g and "median_loop_on_cpu_us_per_msg" in m:
        rows.append(
            (
                "producing thread's CPU us/msg (median)",
                {"groupd": g["median_loop_on_cpu_us_per_msg"], "mock": m["median_loop_on_cpu_us_per_msg"]},
            )
        )
    pairs = sorted(out["pair_ratios"])
    print_figures(
        f"produce (confluent-kafka, {out['rounds']} x {out['messages']:,} x {out['size']} B per target, "
        f"acks={out['acks']}, linger.ms={out['linger_ms']}, {out['partitions']} partitions; rounds alternating)",
        rows,
        ("mock",),
        note=f"pairs' groupd/mock: {', '.join(f'{x:.2f}' for x in pairs)} (median {statistics.median(pairs):.2f})",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=11, help="rounds per target")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--profile", help="py-spy collapsed stacks of groupd's last round into this file")
    args = ap.parse_args()
    out = run(
        messages=args.messages,
        rounds=args.rounds,
        size=args.size,
        linger_ms=args.linger_ms,
        acks=args.acks,
        profile=Path(args.profile) if args.profile else None,
    )
    ratio = out["groupd"]["msgs_per_s"] / out["mock"]["msgs_per_s"]
    pairs = statistics.median(out["pair_ratios"])
    print(
        f"groupd/mock: {ratio:.2f}x, ratio of medians (pairs' median {pairs:.2f}x; {args.size} B, acks={args.acks}, "
        f"linger.ms={args.linger_ms}); server CPU {out['groupd']['server_us_per_msg']:.2f} vs "
        f"{out['mock']['server_us_per_msg']:.2f} us/msg"
    )


if __name__ == "__main__":
    main()
