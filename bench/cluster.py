"""What cluster mode costs: one broker vs three brokers in one process on the same heartbeat and
commit load (``groupd serve --brokers 1`` and ``--brokers 3``, run alternately, several rounds).

The load is spread over many groups so that with three brokers each broker coordinates about a
third of them: the simulator finds each group's coordinator (FindCoordinator) and talks to that
broker, as real clients do. Figures per round and the medians, with the ratio three / one:

  heartbeats  G groups x M members, 6 connections in all (6 to one broker, 2 to each of three)
              x 16 heartbeats in flight, closed loop: heartbeats/s, p50/p99 latency, server CPU us
              per heartbeat
  commits     50 single-member groups, one OffsetCommit of 100 partitions in flight each:
              commits/s, p50/p99 latency, server CPU us per commit

    python -m bench.cluster [--rounds 3] [--seconds 4] [--json out.json]

Every process runs on 127.0.0.1 and is stopped by pid; every load is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

from groupd.coordinator.routing import partition_for

from .run import CpuProbe
from .simulator import SimConfig, Simulator
from .targets import Target, start_groupd, workdir


def _group_ids(prefix: str, n: int, first_broker_only: bool) -> list[str]:
    """``n`` fresh group ids; with ``first_broker_only``, only ids whose __consumer_offsets partition
    the first broker leads (partition p is led by broker p % 3 of three), whatever the broker count."""
    out: list[str] = []
    while len(out) < n:
        gid = f"{prefix}-{len(out)}-{uuid.uuid4().hex[:6]}"
        if not first_broker_only or partition_for(gid) % 3 == 0:
            out.append(gid)
    return out


async def _heartbeats(
    t: Target, groups: int, members: int, seconds: float, conns: int, first_broker_only: bool = False
) -> dict[str, Any]:
    sim = Simulator(SimConfig(bootstrap=t.bootstrap, client_id="bench-cluster", conns=conns, join_conns=4))
    await sim.start()
    try:
        await sim.ensure_topics({"hb-topic": 16})
        gs = [sim.add_group(gid, members, ("hb-topic",)) for gid in _group_ids("hb", groups, first_broker_only)]
        await sim.attach(gs)
        await sim.join_all(gs, concurrency=groups, timeout=120)
        if sim.long_poll_pools:
            sim.release_long_polls()
        probe = CpuProbe(t)
        r = await sim.drive_heartbeats([m for g in gs for m in g.members], seconds, 16, on_phase=probe)
        r["server_us_per_req"] = probe.per(r["requests"])
        r["coordinators"] = len(set(sim.coordinators.values()))
        return r
    finally:
        await sim.close()


async def _commits(t: Target, seconds: float) -> dict[str, Any]:
    topics = {f"commit-t{i}": 4 for i in range(25)}
    sim = Simulator(SimConfig(bootstrap=t.bootstrap, client_id="bench-cluster", conns=50, join_conns=8))
    await sim.start()
    try:
        await sim.ensure_topics(topics)
        gs = [sim.add_group(f"commit-{i}-{uuid.uuid4().hex[:6]}", 1, tuple(topics)) for i in range(50)]
        await sim.attach(gs)
        await sim.join_all(gs, concurrency=50, timeout=60)
        sim.release_long_polls()
        members = [m for g in gs for m in g.members]
        probe = CpuProbe(t)
        r = await sim.drive_commits(members, seconds, on_phase=probe)
        r["server_us_per_commit"] = probe.per(r["commits"])
        r["coordinators"] = len(set(sim.coordinators.values()))
        return r
    finally:
        await sim.close()


async def amain(args: argparse.Namespace) -> int:
    root = workdir("groupd-bench-cluster-")
    rounds: list[dict[str, Any]] = []
    try:
        for rnd in range(args.rounds):
            row: dict[str, Any] = {}
            for brokers in (1, 3):
                t, _ = start_groupd(root / f"b{brokers}-{rnd}" / "data", "--brokers", str(brokers))
                try:
                    # The same load: 6 connections x 16 heartbeats in flight in all, spread over
                    # the coordinators (the simulator opens `conns` to each one).
                    conns = 6 if args.one_coordinator else 6 // brokers
                    row[f"hb{brokers}"] = await _heartbeats(
                        t, args.groups, args.members, args.seconds, conns, args.one_coordinator
                    )
                    row[f"commit{brokers}"] = await _commits(t, args.seconds)
                finally:
                    t.stop()
            rounds.append(row)
            print(
                f"round {rnd + 1}: heartbeats/s 1={row['hb1']['rps']:.0f} 3={row['hb3']['rps']:.0f}  "
                f"commits/s 1={row['commit1']['commits_per_s']:.0f} 3={row['commit3']['commits_per_s']:.0f}",
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = [
        ("heartbeats/s", "hb", "rps"),
        ("heartbeat p50 ms", "hb", "p50_ms"),
        ("heartbeat p99 ms", "hb", "p99_ms"),
        ("server CPU us/heartbeat", "hb", "server_us_per_req"),
        ("commits/s", "commit", "commits_per_s"),
        ("commit p50 ms", "commit", "p50_ms"),
        ("commit p99 ms", "commit", "p99_ms"),
        ("server CPU us/commit", "commit", "server_us_per_commit"),
    ]
    print(
        f"\n1 vs 3 brokers in one process, medians of {args.rounds} rounds "
        f"(heartbeats: {args.groups} groups x {args.members} members; commits: 50 committers x 100 partitions)"
    )
    print(f"{'':28}{'1 broker':>12}{'3 brokers':>12}{'3 / 1':>8}")
    summary: dict[str, Any] = {}
    for label, kind, key in figures:
        one = statistics.median(r[f"{kind}1"][key] for r in rounds)
        three = statistics.median(r[f"{kind}3"][key] for r in rounds)
        summary[label] = {"1": one, "3": three, "ratio": three / one if one else None}
        print(f"{label:28}{one:>12.1f}{three:>12.1f}{three / one if one else float('nan'):>8.2f}")
    coordinators = {r["hb3"]["coordinators"] for r in rounds}
    print(f"(with 3 brokers the groups had {sorted(coordinators)} distinct coordinators)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--groups", type=int, default=30)
    ap.add_argument("--members", type=int, default=20)
    ap.add_argument(
        "--one-coordinator",
        action="store_true",
        help="heartbeats: only groups the first broker coordinates, 6 connections to it in both cases "
        "(what a cluster costs a broker, without the load being split)",
    )
    ap.add_argument("--json")
    return asyncio.run(amain(ap.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
