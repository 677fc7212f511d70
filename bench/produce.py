"""Produce side by side: confluent-kafka producing to groupd and to the librdkafka mock cluster, in
one run, rounds alternating (mock, groupd, mock, groupd), ratio of the mean rates.

    python -m bench.produce [--messages 300000] [--size 100] [--linger-ms 5] [--acks all]
                            [--profile groupd.txt]

Each round: a fresh target, a 6-partition topic, one producer (``bench.dataplane._produce``: no
compression, values of ``--size`` random bytes), timed from the first ``produce()`` to the end of
``flush()`` (an undelivered message ends the run). The server's CPU per message (/proc/<pid>/stat, utime + stime) is printed too; the
client shares the machine's CPUs, so rates are noisy: compare ratios of one run. ``--profile``
samples groupd's last round with py-spy (collapsed stacks). Every process listens on 127.0.0.1 and
is stopped by pid.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from .dataplane import _produce
from .targets import start_groupd, start_mock, workdir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--profile", help="py-spy collapsed stacks of groupd's last round into this file")
    args = ap.parse_args()
    n = args.messages
    base = workdir("groupd-produce-")
    rates: dict[str, list[float]] = {"mock": [], "groupd": []}
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
                if args.profile and kind == "groupd" and i == 3:
                    t.profile(Path(args.profile))
                c0 = t.cpu_s() or 0.0
                secs, _ = _produce(t.bootstrap, "b", n, args.size, args.linger_ms, args.acks)
                c1 = t.cpu_s() or 0.0
                rates[kind].append(n / secs)
                print(f"{kind:7s} {n / secs:10,.0f} msg/s  server CPU {(c1 - c0) / n * 1e6:5.2f} us/msg", flush=True)
            finally:
                t.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    g, m = (sum(rates[k]) / len(rates[k]) for k in ("groupd", "mock"))
    print(f"groupd/mock: {g / m:.2f}x ({args.size} B, acks={args.acks}, linger.ms={args.linger_ms})")


if __name__ == "__main__":
    main()
