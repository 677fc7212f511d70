"""The daemon's cost per steady heartbeat (issue 26), classic Heartbeat and KIP-848
ConsumerGroupHeartbeat, as ``bench.run``'s heartbeats and consumer workloads drive them (one group of
M members, 4 connections x 16 in flight, closed loop), measured on the daemon alone:

- ``--tool callgrind`` (the default): ``groupd serve`` under callgrind with instrumentation off until
  the measured phase (``callgrind_control -i on``, then ``-d`` at its end): instructions per
  heartbeat, load-insensitive (the figure to compare two trees with on a busy machine); the dump
  (``callgrind_annotate``) says where they go, C functions of the interpreter, uvloop and libc;
- ``--tool perf``: ``perf record -g`` of the daemon over the measured phase (its report: where the
  CPU goes by shared object and symbol, the kernel's socket work included);
- ``--tool py-spy``: ``py-spy record --native -f raw`` over the measured phase (Python functions).

    python -m bench.heartbeat_callgrind [--kind classic|consumer] [--members 1000] [--seconds 3]
        [--tool callgrind|perf|py-spy|none] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import consumer_groups as cg
from . import targets
from .simulator import SimConfig, Simulator
from .targets import Target, start_groupd


def _summary(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"no summary in {path}")


class Phase:
    """Starts and stops the measuring tool around the measured phase (the drivers' ``on_phase``)."""

    def __init__(self, tool: str, t: Target, out: Path) -> None:
        self.tool, self.t, self.out = tool, t, out
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu0 = 0.0
        self.cpu_s = 0.0

    def __call__(self, phase: str) -> None:
        pid = str(self.t.pid)
        if phase == "start":
            if self.tool == "callgrind":
                subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
            elif self.tool == "perf":
                cmd = ["perf", "record", "-g", "-F", "2000", "-o", str(self.out / "perf.data"), "-p", pid]
                self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elif self.tool == "py-spy":
                exe = Path(sys.executable).with_name("py-spy")
                cmd = [str(exe), "record", "--native", "-r", "500", "-f", "raw", "-o", str(self.out / "py-spy.txt")]
                self.proc = subprocess.Popen([*cmd, "--pid", pid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.cpu0 = self.t.cpu_s() or 0.0
        else:
            self.cpu_s = (self.t.cpu_s() or 0.0) - self.cpu0
            if self.tool == "callgrind":
                subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
                subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
            elif self.proc is not None:
                self.proc.send_signal(2)  # SIGINT: both write their output and exit
                self.proc.wait(60)


async def classic(t: Target, members: int, seconds: float, on_phase: Callable[[str], None]) -> int:
    conns, inflight = 4, 16
    sim = Simulator(
        SimConfig(
            bootstrap=t.bootstrap,
            client_id="bench-groupd",
            **t.sim_kwargs(),
            conns=conns,
            join_conns=max(conns, math.ceil(members / 250)),
        )
    )
    await sim.start()
    await sim.ensure_topics({"hb-topic": 16})
    g = sim.add_group(f"hb-{members}-{uuid.uuid4().hex[:6]}", members, ("hb-topic",))
    await sim.attach([g])
    await sim.join_all([g], concurrency=1, timeout=600)
    r = await sim.drive_heartbeats(g.members, seconds, inflight, on_phase=on_phase)
    await sim.close()
    return int(r["requests"])


async def consumer(t: Target, members: int, seconds: float, on_phase: Callable[[str], None], topic: str) -> int:
    group = t.extra["group"]
    driver = cg.CgDriver("127.0.0.1", int(t.bootstrap.rsplit(":", 1)[1]), group, topic, 4, 16)
    from groupd.ops.kafka_client import KafkaClient

    with KafkaClient(t.bootstrap, timeout=60) as client:
        client.create_topic(topic, 1024, 1, {})
    await driver.start()
    ms = [cg.CgMember(mid, cg.EPOCH_AT_LOAD) for mid in t.extra["ids"]]
    await driver.closed_loop(ms, lambda: ms[0].epoch > cg.EPOCH_AT_LOAD and cg.settled(ms), 600)
    on_phase("start")
    r = await cg.heartbeat_throughput(driver, ms, seconds)
    on_phase("end")
    driver.close()
    if r["errors"]:
        print("errors:", r["errors"])
    return int(r["requests"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=("classic", "consumer"), default="classic")
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--tool", choices=("callgrind", "perf", "py-spy", "none"), default="callgrind")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="groupd-hb-profile-"))
    out = args.out or root
    out.mkdir(parents=True, exist_ok=True)
    spawn = targets._spawn
    if args.tool == "callgrind":
        cg_out = out / "callgrind.out"

        def under_callgrind(cmd: list[str], **kw: Any) -> Any:
            vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={cg_out}"]
            return spawn([*vg, *cmd], **kw)

        targets._spawn = under_callgrind  # type: ignore[assignment]
    data = root / "data"
    extra: dict[str, Any] = {}
    topic = "cg-topic"
    if args.kind == "consumer":
        extra["group"] = f"cg-{uuid.uuid4().hex[:6]}"
        extra["ids"] = cg.preload(data, extra["group"], topic, args.members)
    t, _ = start_groupd(data, timeout=600)
    t.extra.update(extra)
    phase = Phase(args.tool, t, out)
    try:
        t0 = time.perf_counter()
        if args.kind == "classic":
            n = asyncio.run(classic(t, args.members, args.seconds, phase))
        else:
            n = asyncio.run(consumer(t, args.members, args.seconds, phase, topic))
        print(f"{args.kind} {args.members} members: {n} heartbeats, {phase.cpu_s / n * 1e6:.2f} us server CPU each")
        if args.tool == "callgrind":
            dumped = sorted(out.glob("callgrind.out.*"))[-1]
            print(f"{_summary(dumped) / n:,.0f} instructions per heartbeat ({dumped})")
        elif args.tool != "none":
            print(f"profile in {out} ({time.perf_counter() - t0:.0f} s)")
    finally:
        t.proc.terminate()
        t.proc.wait(120)


if __name__ == "__main__":
    sys.exit(main())
