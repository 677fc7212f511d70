"""py-spy over the bench's 50 committers x 100 partitions against one groupd (issue 26): the
measured phase sampled with ``py-spy record -f raw`` attached to the daemon, and the commits/s and
server CPU per commit of the run printed (py-spy costs the daemon little: still compare runs with
each other).

    python -m bench.commit_profile [--fsync always] [--seconds 4] [--out profile.txt] [--perf perf.data]

``--perf``: ``perf record -e cpu-clock`` instead (the daemon's C and kernel functions, flat:
``perf report -i perf.data --no-children``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from .run import CpuProbe
from .simulator import SimConfig, Simulator
from .targets import start_groupd


async def main(fsync: str | None, seconds: float, out: Path | None, perf: Path | None = None) -> None:
    root = Path(tempfile.mkdtemp(prefix="groupd-commit-profile-"))
    t, _ = start_groupd(root / "data", *(("--fsync", fsync) if fsync else ()))
    spy: subprocess.Popen[bytes] | None = None
    try:
        sim = Simulator(SimConfig(bootstrap=t.bootstrap, client_id="profile", **t.sim_kwargs(), conns=50, join_conns=8))
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
            nonlocal spy
            probe(name)
            if name == "start" and (out is not None or perf is not None):
                if perf is not None:
                    cmd = ["perf", "record", "-e", "cpu-clock", "-p", str(t.pid), "-o", str(perf)]
                else:
                    py_spy = str(Path(sys.executable).with_name("py-spy"))
                    cmd = [py_spy, "record", "--pid", str(t.pid), "-f", "raw", "-r", "200", "-o", str(out)]
                spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elif name == "end" and spy is not None:
                spy.send_signal(signal.SIGINT)

        r = await sim.drive_commits(members, seconds, check=True, on_phase=phase)
        if spy is not None:
            spy.wait(20)
        await sim.close()
        n = r["commits"]
        print(
            f"commits {n}, {r['commits_per_s']:,.0f}/s, p99 {r['p99_ms']:.1f} ms, "
            f"server CPU {probe.per(n) or 0:.1f} us/commit, errors {r['partition_errors']}"
        )
    finally:
        t.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsync", default=None, help="groupd's --fsync policy (default: its default)")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--out", type=Path, default=None, help="py-spy raw output (none: no py-spy)")
    ap.add_argument("--perf", type=Path, default=None, help="perf record output instead of py-spy")
    a = ap.parse_args()
    asyncio.run(main(a.fsync, a.seconds, a.out, a.perf))
