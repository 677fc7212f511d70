"""How long ten KIP-848 members (``group.protocol=consumer``) take to cover a topic, per
``group.consumer.heartbeat.interval.ms``: what groupd's default interval was chosen from.

A consumer-protocol member learns of a new target assignment only in a heartbeat's answer, and a
member that must give up partitions first learns that, revokes, and says so in its next heartbeat
before the partitions are handed on (``ConsumerGroupHeartbeat``, KIP-848): a group forming from
members started together converges in a few heartbeat intervals, where a classic group converges in
one JoinGroup/SyncGroup round after the initial rebalance delay.

For each interval one groupd is started with ``--group-consumer-heartbeat-interval-ms INTERVAL``
(and the minimum bound lowered to admit it), 127.0.0.1, port 0, stopped by pid; a topic of
``--partitions`` partitions is created. Then per repetition a fresh group of ``--members`` members,
each a process of its own (confluent-kafka; ``python -m bench.consumer_heartbeat member ...``), is
told ``go`` at once, as in ``bench.rebalance_delay``; **cover s** is the time from ``go`` to the
first moment the members' assignments (``on_assign`` / ``on_revoke``) are disjoint and cover the
topic. With ``--classic`` a classic group (``group.protocol=classic``, groupd's default initial
rebalance delay) is run beside each for comparison.

    python -m bench.consumer_heartbeat [--intervals 100,250,500,1000,5000] [--reps 5] [--members 10]
        [--partitions 12] [--classic] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .rebalance_delay import Member, create_topic
from .targets import Target, _stop_proc, start_groupd, workdir


@dataclass
class Run:
    protocol: str
    interval_ms: int
    members: int
    cover_s: float | None  # None: not covered within the run timeout
    load: float


def member(bootstrap: str, group: str, topic: str, protocol: str) -> None:
    """One member: prints ``ready``, waits for ``go``, then reports its whole assignment after each change."""
    import threading

    from confluent_kafka import Consumer

    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    stop = threading.Event()

    def watch() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    owned: set[int] = set()

    def report() -> None:
        print(f"assigned {time.time():.6f} {','.join(str(p) for p in sorted(owned))}", flush=True)

    def on_assign(_c: Any, parts: list[Any]) -> None:
        owned.update(p.partition for p in parts)
        report()

    def on_revoke(_c: Any, parts: list[Any]) -> None:
        owned.difference_update(p.partition for p in parts)
        report()

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol}
    if protocol == "classic":
        # incremental callbacks, as the consumer protocol's: owned stays the whole assignment
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    consumer = Consumer(conf)
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while not stop.is_set():
            consumer.poll(0.1)
    finally:
        consumer.close()


def _covered(members: list[Member], partitions: int) -> bool:
    owned: list[int] = []
    for m in members:
        if not m.assignments:
            return False
        owned.extend(m.assignments[-1][1])
    return sorted(owned) == list(range(partitions))


def run_once(target: Target, protocol: str, n: int, topic: str, partitions: int, timeout: float) -> float | None:
    group = f"hb-{protocol}-{uuid.uuid4().hex[:8]}"
    cmd = [sys.executable, "-m", "bench.consumer_heartbeat", "member", target.bootstrap, group, topic, protocol]
    members = [Member(cmd, dict(os.environ)) for _ in range(n)]
    try:
        ready_by = time.monotonic() + 60
        for m in members:
            m.ready.wait(max(ready_by - time.monotonic(), 0))
        t0 = time.time()
        for m in members:
            m.tell("go")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.02)
            for m in members:
                m.drain()
            if _covered(members, partitions):
                return max(m.assignments[-1][0] for m in members) - t0
        return None
    finally:
        for m in members:
            m.tell("stop")
        stop_by = time.monotonic() + 15
        for m in members:
            with contextlib.suppress(subprocess.TimeoutExpired):
                m.proc.wait(max(stop_by - time.monotonic(), 0.1))
            _stop_proc(m.proc, timeout=2)


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def table(runs: list[Run]) -> str:
    rows = [
        "| protocol | daemon's heartbeat interval ms | members | runs | cover s, median [min-max] | not covered |",
        "|---|---|---|---|---|---|",
    ]
    keys = sorted({(r.protocol, r.interval_ms, r.members) for r in runs}, key=lambda k: (k[0] != "consumer", k[1]))
    for protocol, interval, n in keys:
        rs = [r for r in runs if (r.protocol, r.interval_ms, r.members) == (protocol, interval, n)]
        secs = [r.cover_s for r in rs if r.cover_s is not None]
        rows.append(f"| {protocol} | {interval} | {n} | {len(rs)} | {_spread(secs)} | {len(rs) - len(secs)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["member"]:
        member(*argv[1:5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--intervals", default="100,250,500,1000,5000")
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--classic", action="store_true", help="also run classic groups (once per interval and rep)")
    ap.add_argument("--run-timeout", type=float, default=60.0)
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args(argv)
    print(f"# {os.cpu_count()} CPUs, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    runs: list[Run] = []
    base = workdir("groupd-consumer-heartbeat-")
    try:
        for interval in (int(i) for i in args.intervals.split(",")):
            target, _ = start_groupd(
                base / f"i{interval}",
                "--group-consumer-heartbeat-interval-ms",
                str(interval),
                "--group-consumer-min-heartbeat-interval-ms",
                str(min(interval, 5000)),
            )
            with target:
                topic = f"hb-{interval}"
                create_topic(target.bootstrap, topic, args.partitions)
                for _rep in range(args.reps):
                    for protocol in ("consumer", "classic") if args.classic else ("consumer",):
                        load = os.getloadavg()[0]
                        took = run_once(target, protocol, args.members, topic, args.partitions, args.run_timeout)
                        runs.append(Run(protocol, interval, args.members, took, load))
                        shown = "not covered" if took is None else f"{took:.2f}s"
                        print(f"# interval {interval} {protocol} x{args.members}: {shown}, load {load:.2f}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in runs], indent=1))
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
