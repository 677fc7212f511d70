"""Produce side by side: confluent-kafka producing to groupd and to the librdkafka mock cluster, in
one run, rounds alternating (mock, groupd, mock, groupd), ratio of the mean rates.

    python -m bench.produce [--messages 300000] [--size 100] [--linger-ms 5] [--acks all]
                            [--profile groupd.txt]

Each round: a fresh target, a 6-partition topic, one producer (``bench.dataplane._produce``: no
compression, values of ``--size`` random bytes), timed from the first ``produce()`` to the end of
``flush()`` (an undelivered message ends the run). The server's CPU per message (/proc/<pid>/stat, utime + stime) is printed too; the
client shares the machine's CPUs, so rates are noisy: compare ratios of one run. ``--profile``
samples groupd's last round with py-spy (collapsed stacks). Every process listens on 127.0.0.1 and
is stopped by pid. ``python -m bench.run --only produce`` runs the same rounds (100,000 messages
under ``--quick``) and scores the ratio in the regression guard (``bench/history.py``).

Figures (2026-11-29, 2-core machine shared with other jobs, one sitting, runs alternating the
source before/after; ``python -m bench.produce --messages 300000``, each run its own mock rounds):
before (2586db9: the CRC computed twice, records framed byte by byte) server CPU 0.57, 0.60, 0.53,
0.53 us/msg, groupd/mock 0.84x, 0.86x; after (the CRC once, framing through a step table) 0.43,
0.50, 0.43, 0.40 us/msg, groupd/mock 0.78x, 0.91x. The mock spends 0.07-0.13 us/msg. The rates are
bound by the one Python producer loop that both targets share, so the ratio moves less than the
server's CPU does.

Issue 26 (2026-11-29, same machine, loaded by four other sessions; ``--messages 300000``, three
runs alternating the builds): before (69728ef) server CPU 0.50-0.60 us/msg (median 0.57),
groupd/mock 0.58x, 0.74x, 0.92x; after (the framing walk of a produced batch in C,
storage/_native.c ``frame_records``, which py-spy had at 16% of the daemon's samples) 0.33-0.43
us/msg (median 0.415), 0.85x, 0.82x, 0.96x. The mock's own rate moved 320k-660k msg/s within one
run. What the daemon still spends per message is the log write (pwrite, ~20% of its samples), the
answer's socket write (~16%) and the loop's reads: a 600,000-message run keeps it busy a quarter
of the time, so the rate is the client's and the machine's.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from .dataplane import _produce
from .targets import start_groupd, start_mock, workdir


def run(
    quick: bool = False,
    *,
    messages: int | None = None,
    size: int = 100,
    linger_ms: int = 5,
    acks: str = "all",
    profile: Path | None = None,
) -> dict[str, Any]:
    """The side-by-side rounds; per target the mean rate and server CPU per message (what
    ``bench.run``'s ``produce`` workload records and ``bench.history`` scores against the mock)."""
    n = messages or (100_000 if quick else 300_000)
    base = workdir("groupd-produce-")
    rates: dict[str, list[float]] = {"mock": [], "groupd": []}
    cpus: dict[str, list[float]] = {"mock": [], "groupd": []}
    try:
        for i, kind in enumerate(("mock", "groupd", "mock", "groupd")):
            if kind == "mock":
                t = start_mock(base)
            else:
                t, _ = start_groupd(base / f"data{i}")
            try:
                admin = AdminClient({"bootstrap.servers": t.bootstrap})
                try:
                    admin.create_topics([NewTopic("b", num_partitions=6, replication_factor=1)])["b"].result(15)
                except Exception as e:  # the mock creates topics on first use
                    print(f"   {kind}: create_topics: {e}")
                if profile and kind == "groupd" and i == 3:
                    t.profile(profile)
                c0 = t.cpu_s() or 0.0
                secs, _ = _produce(t.bootstrap, "b", n, size, linger_ms, acks)
                c1 = t.cpu_s() or 0.0
                rates[kind].append(n / secs)
                cpus[kind].append((c1 - c0) / n * 1e6)
                print(f"   {kind:7s} {n / secs:10,.0f} msg/s  server CPU {cpus[kind][-1]:5.2f} us/msg", flush=True)
            finally:
                t.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out: dict[str, Any] = {"messages": n, "size": size, "linger_ms": linger_ms, "acks": acks}
    for kind in ("groupd", "mock"):
        out[kind] = {
            "msgs_per_s": sum(rates[kind]) / len(rates[kind]),
            "server_us_per_msg": sum(cpus[kind]) / len(cpus[kind]),
        }
    return out


def print_results(out: dict[str, Any], print_figures: Callable[..., None]) -> None:
    g, m = out["groupd"], out["mock"]
    print_figures(
        f"produce (confluent-kafka, {out['messages']:,} x {out['size']} B, acks={out['acks']}, "
        f"linger.ms={out['linger_ms']}, 6 partitions; rounds mock, groupd, mock, groupd)",
        [
            ("messages/s", {"groupd": g["msgs_per_s"], "mock": m["msgs_per_s"]}),
            ("server CPU us/msg", {"groupd": g["server_us_per_msg"], "mock": m["server_us_per_msg"]}),
        ],
        ("mock",),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--profile", help="py-spy collapsed stacks of groupd's last round into this file")
    args = ap.parse_args()
    out = run(
        messages=args.messages,
        size=args.size,
        linger_ms=args.linger_ms,
        acks=args.acks,
        profile=Path(args.profile) if args.profile else None,
    )
    ratio = out["groupd"]["msgs_per_s"] / out["mock"]["msgs_per_s"]
    print(f"groupd/mock: {ratio:.2f}x ({args.size} B, acks={args.acks}, linger.ms={args.linger_ms})")


if __name__ == "__main__":
    main()
