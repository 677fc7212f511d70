"""What ``group.initial.rebalance.delay.ms`` costs and buys, measured with real clients.

For each delay, one groupd is started with ``--group-initial-rebalance-delay-ms DELAY`` (127.0.0.1,
port 0, stopped by pid) and one topic of ``--partitions`` partitions is created before any member
starts. Then, for each client library and each repetition, a fresh group is formed twice:

* ``10 together``: ``--members`` members, each a process of its own (``bench.rebalance_member`` for
  the Python libraries, ``bench/rebalance_member.js`` under node for kafkajs), at the library's
  default settings. Every member imports its library first and says ``ready``; then all are told
  ``go`` at once, so what is measured is the group forming, not interpreter start-up.
* ``1 alone``: one member the same way.

Figures per run: **generations** -- the JoinGroup phases groupd completed for the group (its
``join_phase_completed`` log events) until every member holds its final assignment; **last
assignment** -- seconds from ``go`` to the last assignment a member received (rebalance listener /
``on_assign`` / kafkajs ``GROUP_JOIN``); a run in which the members do not all hold disjoint
assignments covering the topic within ``--run-timeout`` is counted as **stuck**. A run ends when
the assignments have covered the topic for ``--quiet`` seconds without a change.

    python -m bench.rebalance_delay [--delays 0,100,300,1000,3000] [--reps 3] [--members 10]
        [--libraries kafka-python,aiokafka,confluent-kafka,kafkajs] [--node-path DIR] [--json out.json]
    python -m bench.rebalance_delay --report out.json[,more.json]   # the tables of saved runs again

Each run's line also says how far apart the members' JoinGroups arrived (groupd's ``member_joined``
events) and why any later rebalance started (a new member, or a member's own rejoin); a second table
gives, per library, how often the longest wait between two arrivals reached each delay.

kafkajs is used when node can load it: ``--node-path`` (or ``NODE_PATH``) names the
``node_modules`` directory holding it, e.g. after ``npm install --prefix /tmp/kjs kafkajs@2``,
``--node-path /tmp/kjs/node_modules``; without it kafkajs is skipped with a note.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .targets import Target, _spawn, _stop_proc, start_groupd, workdir

LIBRARIES = ("kafka-python", "aiokafka", "confluent-kafka", "kafkajs")
JS_MEMBER = Path(__file__).with_name("rebalance_member.js")
_MEMBER_ID = re.compile(r"member \S+")


@dataclass
class RunResult:
    library: str
    delay_ms: int
    members: int
    generations: int
    last_assignment_s: float | None  # None: stuck
    assigned_members: int
    assignments: int  # assignment callbacks over all members
    load: float
    join_spread_s: float  # first to last new member's JoinGroup (groupd's member_joined events)
    join_max_gap_s: float  # the longest wait between two consecutive new members' JoinGroups
    # Why each rebalance after the first started (groupd's rebalance_started reason, member ids cut)
    later_rebalances: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Member:
    """One member process; a thread turns its standard output into (time, partitions) events."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.proc = _spawn(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.ready = threading.Event()
        self.events: queue.Queue[tuple[float, tuple[int, ...]]] = queue.Queue()
        self.assignments: list[tuple[float, tuple[int, ...]]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line == "ready":
                self.ready.set()
            elif line.startswith("assigned "):
                parts = line.split(" ")
                at = float(parts[1])
                owned = tuple(int(p) for p in parts[2].split(",")) if len(parts) > 2 and parts[2] else ()
                self.events.put((at, owned))

    def drain(self) -> bool:
        changed = False
        while True:
            try:
                self.assignments.append(self.events.get_nowait())
            except queue.Empty:
                return changed
            changed = True

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass


def _member_cmd(library: str, bootstrap: str, group: str, topic: str) -> list[str]:
    if library == "kafkajs":
        return ["node", str(JS_MEMBER), bootstrap, group, topic]
    return [sys.executable, "-m", "bench.rebalance_member", library, bootstrap, group, topic]


def _covered(members: list[Member], partitions: int) -> bool:
    owned: list[int] = []
    for m in members:
        if not m.assignments:
            return False
        owned.extend(m.assignments[-1][1])
    return sorted(owned) == list(range(partitions))


def _unix(event: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(str(event["timestamp"])).timestamp()


def _load() -> float:
    return os.getloadavg()[0]


def run_once(
    target: Target,
    library: str,
    n: int,
    topic: str,
    partitions: int,
    delay_ms: int,
    env: dict[str, str],
    run_timeout: float,
    quiet: float,
) -> RunResult:
    group = f"rd-{library}-{n}-{uuid.uuid4().hex[:8]}"
    load = _load()
    members = [Member(_member_cmd(library, target.bootstrap, group, topic), env) for _ in range(n)]
    notes: list[str] = []
    try:
        ready_by = time.monotonic() + 60
        for m in members:
            m.ready.wait(max(ready_by - time.monotonic(), 0))
        if not all(m.ready.is_set() for m in members):
            notes.append("members not ready in 60 s")
        t0 = time.time()
        for m in members:
            m.tell("go")
        deadline = time.monotonic() + run_timeout
        last_change = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if any([m.drain() for m in members]):
                last_change = time.monotonic()
            if _covered(members, partitions) and time.monotonic() - last_change >= quiet:
                break
        # Counted before the members leave: their LeaveGroups start generations of their own.
        generations = sum(1 for ev in target.events("join_phase_completed") if ev.get("group") == group)
        joined = sorted(_unix(ev) for ev in target.events("member_joined") if ev.get("group") == group)
        gaps = [b - a for a, b in itertools.pairwise(joined)]
        started = [ev for ev in target.events("rebalance_started") if ev.get("group") == group]
        later = [f"{ev.get('from_state')}: {_MEMBER_ID.sub('member', str(ev.get('reason')))}" for ev in started[1:]]
        done = _covered(members, partitions)
        if not done:
            notes.append(f"stuck: {sum(1 for m in members if m.assignments)}/{n} members assigned")
        times = [m.assignments[-1][0] for m in members if m.assignments]
        return RunResult(
            library=library,
            delay_ms=delay_ms,
            members=n,
            generations=generations,
            last_assignment_s=(max(times) - t0) if done else None,
            assigned_members=sum(1 for m in members if m.assignments),
            assignments=sum(len(m.assignments) for m in members),
            load=load,
            join_spread_s=(joined[-1] - joined[0]) if joined else 0.0,
            join_max_gap_s=max(gaps, default=0.0),
            later_rebalances=later,
            notes=notes,
        )
    finally:
        for m in members:
            m.tell("stop")
        stop_by = time.monotonic() + 10
        for m in members:
            with contextlib.suppress(subprocess.TimeoutExpired):
                m.proc.wait(max(stop_by - time.monotonic(), 0.1))
            _stop_proc(m.proc, timeout=2)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        if topic in md.topics and len(md.topics[topic].partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} not visible with {partitions} partitions")


def kafkajs_env(node_path: str | None) -> tuple[dict[str, str] | None, str]:
    """The environment under which node loads kafkajs, or None and why not."""
    if shutil.which("node") is None:
        return None, "node not found"
    env = dict(os.environ)
    if node_path:
        env["NODE_PATH"] = node_path
    probe = subprocess.run(
        ["node", "-e", "console.log(require('kafkajs/package.json').version)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return None, "kafkajs not loadable by node (npm install --prefix DIR kafkajs@2; --node-path DIR/node_modules)"
    return env, f"kafkajs {probe.stdout.strip()}"


def _spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if min(values) == max(values):
        return fmt.format(med)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def table(results: list[RunResult], libraries: list[str], delays: list[int], sizes: list[int]) -> str:
    head = (
        "| library | members | delay ms | runs | generations | last assignment s | joins spread s "
        "| later rebalances: new member / member rejoined | stuck |"
    )
    rows = [head, "|---|---|---|---|---|---|---|---|---|"]
    for library in libraries:
        for n in sizes:
            for delay in delays:
                rs = [r for r in results if (r.library, r.members, r.delay_ms) == (library, n, delay)]
                if not rs:
                    continue
                gens = _spread([float(r.generations) for r in rs], "{:g}")
                secs = _spread([r.last_assignment_s for r in rs if r.last_assignment_s is not None], "{:.2f}")
                spread = _spread([r.join_spread_s for r in rs], "{:.2f}")
                stuck = sum(1 for r in rs if r.last_assignment_s is None)
                later = [why for r in rs for why in r.later_rebalances]
                arrivals = sum(1 for why in later if "new member" in why)
                cause = f"{arrivals} / {len(later) - arrivals}"
                rows.append(
                    f"| {library} | {n} | {delay} | {len(rs)} | {gens} | {secs} | {spread} | {cause} | {stuck} |"
                )
    return "\n".join(rows)


def gap_table(results: list[RunResult], libraries: list[str], thresholds_ms: list[int]) -> str:
    """How far apart the JoinGroups of members started together arrive, over every delay: the first
    join phase waits ``delay`` after the first new member and again for as long as each step saw a
    new one, so a group forms in one generation when no wait between arrivals reaches the delay."""
    head = "| library | runs | longest wait between two arrivals, median [max] s | " + " | ".join(
        f"runs with a wait >= {t} ms" for t in thresholds_ms
    )
    rows = [head + " |", "|---|---|---|" + "---|" * len(thresholds_ms)]
    for library in libraries:
        gaps = [r.join_max_gap_s for r in results if r.library == library and r.members > 1]
        if not gaps:
            continue
        counts = " | ".join(str(sum(1 for g in gaps if g * 1000 >= t)) for t in thresholds_ms)
        rows.append(f"| {library} | {len(gaps)} | {statistics.median(gaps):.2f} [{max(gaps):.2f}] | {counts} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delays", default="0,100,300,1000,3000")
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--run-timeout", type=float, default=60.0, help="seconds from go until a run is stuck")
    ap.add_argument("--quiet", type=float, default=2.0, help="seconds without a change that end a run")
    ap.add_argument("--node-path", default=os.environ.get("NODE_PATH"), help="node_modules holding kafkajs")
    ap.add_argument("--json", help="write every run's figures here")
    ap.add_argument("--report", help="print the tables of runs saved with --json (several: comma-separated)")
    args = ap.parse_args(argv)
    delays = [int(d) for d in args.delays.split(",")]
    libraries = [lib for lib in args.libraries.split(",") if lib]
    sizes = [args.members, 1]
    if args.report:
        saved = [RunResult(**r) for path in args.report.split(",") for r in json.loads(Path(path).read_text())]
        print_tables(saved, libraries, sorted({r.delay_ms for r in saved}), sizes)
        return 0
    envs: dict[str, dict[str, str]] = {}
    for library in libraries:
        if library == "kafkajs":
            env, why = kafkajs_env(args.node_path)
            print(f"# {why}", flush=True)
            if env is not None:
                envs[library] = env
        elif library in LIBRARIES:
            envs[library] = dict(os.environ)
        else:
            ap.error(f"unknown library {library}")
    libraries = [lib for lib in libraries if lib in envs]
    print(f"# {os.cpu_count()} CPUs, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    results: list[RunResult] = []
    base = workdir("groupd-rebalance-delay-")
    try:
        for delay in delays:
            target, _ = start_groupd(base / f"d{delay}", "--group-initial-rebalance-delay-ms", str(delay))
            with target:
                topic = f"rd-{delay}"
                create_topic(target.bootstrap, topic, args.partitions)
                for _rep in range(args.reps):
                    for library in libraries:
                        for n in sizes:
                            r = run_once(
                                target,
                                library,
                                n,
                                topic,
                                args.partitions,
                                delay,
                                envs[library],
                                args.run_timeout + 2 * delay / 1000,
                                args.quiet,
                            )
                            results.append(r)
                            took = "stuck" if r.last_assignment_s is None else f"{r.last_assignment_s:.2f}s"
                            extra = "".join(f"; rebalance from {why}" for why in r.later_rebalances)
                            extra += "".join(f"; {note}" for note in r.notes)
                            print(
                                f"# delay {delay} {library} x{n}: {r.generations} gen, {took}, joins spread "
                                f"{r.join_spread_s:.2f}s (max gap {r.join_max_gap_s:.2f}s), load {r.load:.2f}{extra}",
                                flush=True,
                            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"# load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    print_tables(results, libraries, delays, sizes)
    return 0


def print_tables(results: list[RunResult], libraries: list[str], delays: list[int], sizes: list[int]) -> None:
    print(table(results, libraries, delays, sizes))
    print()
    print(gap_table(results, libraries, [d for d in delays if d > 0]))


if __name__ == "__main__":
    sys.exit(main())
