"""Syscalls per OffsetCommit: the bench's 50 committers x 100 partitions against one groupd, with
``strace -c -f`` attached to the daemon for the measured phase (issue 26: what one commit costs
the kernel, e.g. the log write, the index entry, the fsync and its thread hand-overs).

    python -m bench.commit_syscalls [--fsync always] [--seconds 3]

Prints the commits/s and server CPU per commit of the run (strace slows the daemon: compare
runs with each other, not with ``bench.run``) and the calls of each syscall per commit."""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

from .run import CpuProbe
from .simulator import SimConfig, Simulator
from .targets import start_groupd


def _per_commit(strace_out: Path, commits: int) -> dict[str, float]:
    calls: dict[str, int] = {}
    for line in strace_out.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            calls[parts[-1]] = int(parts[3])
    return {name: n / commits for name, n in sorted(calls.items(), key=lambda kv: -kv[1])}


async def main(fsync: str | None, seconds: float) -> None:
    root = Path(tempfile.mkdtemp(prefix="groupd-syscalls-"))
    t, _ = start_groupd(root / "data", *(("--fsync", fsync) if fsync else ()))
    out = root / "strace.txt"
    tracer: subprocess.Popen[bytes] | None = None
    try:
        sim = Simulator(
            SimConfig(bootstrap=t.bootstrap, client_id="syscalls", **t.sim_kwargs(), conns=50, join_conns=8)
        )
        await sim.start()
        topics = {f"commit-t{i}": 4 for i in range(25)}  # 100 partitions, as bench.run's commits
        await sim.ensure_topics(topics)
        groups = [sim.add_group(f"commit-{i}-{uuid.uuid4().hex[:6]}", 1, tuple(topics)) for i in range(50)]
        await sim.attach(groups)
        await sim.join_all(groups, concurrency=50, timeout=60)
        sim.release_long_polls()
        members = [m for g in groups for m in g.members]
        probe = CpuProbe(t)

        def phase(name: str) -> None:
            nonlocal tracer
            probe(name)
            if name == "start":
                cmd = ["strace", "-c", "-f", "-p", str(t.pid), "-o", str(out)]
                tracer = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
            elif name == "end" and tracer is not None:
                tracer.send_signal(signal.SIGINT)

        r = await sim.drive_commits(members, seconds, check=True, on_phase=phase)
        if tracer is not None:
            tracer.wait(10)
        await sim.close()
        n = r["commits"]
        print(f"commits {n}, {r['commits_per_s']:,.0f}/s, server CPU {probe.per(n) or 0:.0f} us/commit (under strace)")
        per = _per_commit(out, n) if n else {}
        print(f"syscalls per commit: {sum(per.values()):.2f}")
        for name, v in per.items():
            if v >= 0.005:
                print(f"   {name:<14} {v:6.2f}")
    finally:
        t.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsync", default=None, help="groupd's --fsync policy (default: its default)")
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    asyncio.run(main(a.fsync, a.seconds))
