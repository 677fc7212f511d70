"""``groupd analyze``: its fixed cost and its cost per million records.

Writes two synthetic logs (``groupd.pipeline.synthetic``: 200 groups of 3-6 members, 12
partitions each, a rebalance every 50 rounds) of a small and a large record count, runs
``groupd analyze`` on each as a user would (a fresh process: JVM start, Spark session, tables,
report), and fits ``seconds = fixed + per_record * records`` through the two points:

    per million records = (t_large - t_small) / (n_large - n_small) * 1e6
    fixed               = t_small - per_record * n_small

Printed with the ratio t_large / t_small (1.0 would mean the fixed cost is everything), for
wall time and for the CPU time of the whole process tree (JVM and Python workers). The
phase lines ``analyze`` prints are kept, so where the time goes is visible. The host's load
average is printed too: on a shared machine it moves the figures more than anything here.

    python -m bench.analyze [--quick] [--small N] [--large N] [--master local[2]] [--conf K=V ...]

``--cluster`` instead runs the small log three ways in one go, as issue 29 compared them: locally
(``--master local[C]``), and with ``spark-submit`` on a real standalone Spark cluster (a master
and a worker of C cores started from pyspark's own distribution, ``tests/pipeline/cluster.py``)
once with Spark's default 200 shuffle partitions (what ``analyze`` left a cluster before) and
once with the partitions ``analyze`` sizes to its input. Wall time is the figure there (the
executor is the worker's child, outside the measured process tree); the ratios come from one run.

    python -m bench.analyze --cluster [--small N] [--cores C]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from groupd.pipeline import synthetic


def _tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Record the CPU seconds (user + system) of `root` and every descendant alive now, in `seen`
    (pid -> latest figure). The JVM and the Python workers are grandchildren that nobody here reaps,
    so RUSAGE_CHILDREN misses them: read /proc while they run."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
    tree = {root}
    grew = True
    while grew:
        more = {pid for pid, pp in parent.items() if pp in tree} - tree
        grew = bool(more)
        tree |= more
    for pid in tree:
        if pid in cpu:
            seen[pid] = max(seen.get(pid, 0.0), cpu[pid])


def _run(
    data: Path, out: Path, master: str, conf: list[str], *, submit: list[str] | None = None, env: dict | None = None
) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds of the process tree, seconds analyze reports after its session
    is up, the phase lines). ``submit``: run ``job.py`` under this spark-submit command instead."""
    if submit is None:
        cmd = [sys.executable, "-m", "groupd", "analyze", "--data-dir", str(data), "--out", str(out)]
        cmd += ["--master", master]
        for item in conf:
            cmd += ["--conf", item]
    else:
        from groupd.pipeline import job

        cmd = [*submit, *[a for item in conf for a in ("--conf", item)], job.__file__]
        cmd += ["--data-dir", str(data), "--out", str(out)]
    t0 = time.monotonic()
    seen: dict[int, float] = {}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        outputs: list[str] = []
        reader = threading.Thread(target=lambda: outputs.extend(proc.communicate()), daemon=True)
        reader.start()
        while reader.is_alive():
            _tree_cpu(proc.pid, seen)
            reader.join(0.5)
    wall = time.monotonic() - t0
    stdout, stderr = outputs
    if proc.returncode != 0:
        raise SystemExit(f"analyze failed ({proc.returncode}):\n{stderr[-3000:]}")
    m = re.search(r"analyzed (\d+) records .* in ([\d.]+)s", stdout)
    inner = float(m.group(2)) if m else float("nan")
    # spark-submit's PythonRunner merges the script's stderr into its stdout
    phases = "\n".join(line for line in (stderr + stdout).splitlines() if line.startswith(("[", "analyzed ")))
    # the last sample of each process (up to 0.5 s before it ended) undercounts a little
    return wall, sum(seen.values()), inner, phases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.analyze", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k and 100k records")
    ap.add_argument("--small", type=int, default=None, help="records in the small log (default 20000)")
    ap.add_argument("--large", type=int, default=None, help="records in the large log (default 500000)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--show-phases", action="store_true", help="print analyze's phase lines per run")
    ap.add_argument("--cluster", action="store_true", help="local vs a standalone Spark cluster, on the small log")
    ap.add_argument("--cores", type=int, default=2, help="--cluster: the worker's cores (and local[C])")
    args = ap.parse_args(argv)
    if args.cluster:
        return _cluster(args.small or 10_000, args.cores, args.show_phases)
    small = args.small or (10_000 if args.quick else 20_000)
    large = args.large or (100_000 if args.quick else 500_000)
    tmp = Path(tempfile.mkdtemp(prefix="groupd-bench-analyze-"))
    try:
        results = {}
        for n in (small, large):
            data = tmp / f"data-{n}"
            records = synthetic.generate(data, n)
            load = os.getloadavg()[0]
            wall, cpu, inner, phases = _run(data, tmp / f"out-{n}", args.master, args.conf)
            results[n] = (records, wall, cpu)
            print(
                f"analyze {records:>9} records: {wall:7.1f} s wall, {cpu:7.1f} s CPU "
                f"({inner:.1f} s wall after the session started), load average {load:.1f}",
                flush=True,
            )
            if args.show_phases:
                print(phases)
        (n1, w1, c1), (n2, w2, c2) = results[small], results[large]
        print(f"{'':22}{'wall':>9}{'CPU':>9}")
        per = [(w2 - w1) / (n2 - n1), (c2 - c1) / (n2 - n1)]
        fixed = [w1 - per[0] * n1, c1 - per[1] * n1]
        print(f"{'fixed cost':22}{fixed[0]:8.1f}s{fixed[1]:8.1f}s")
        print(f"{'per million records':22}{per[0] * 1e6:8.1f}s{per[1] * 1e6:8.1f}s")
        print(f"{'ratio large/small':22}{w2 / w1:9.2f}{c2 / c1:9.2f}  ({n2 / n1:.0f}x the records)")
        print("(on a loaded host trust the CPU column: wall time there is mostly waiting for a core)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _event_totals(events: Path) -> tuple[int, int, float, float]:
    """(stages, tasks, executor CPU seconds, executor run seconds) of the Spark event logs under
    `events`: what the run cost the executors, steadier than its wall time on a shared machine."""
    import json

    stages = tasks = 0
    cpu_ns = run_ms = 0
    # Spark 4 rolls its event log: a directory per application, files events_<n>_<app id> in it
    for log in sorted(f for f in events.rglob("events_*") if f.is_file()):
        for line in log.read_text().splitlines():
            ev = json.loads(line)
            kind = ev.get("Event")
            if kind == "SparkListenerStageCompleted":
                stages += 1
            elif kind == "SparkListenerTaskEnd":
                tasks += 1
                metrics = ev.get("Task Metrics") or {}
                cpu_ns += metrics.get("Executor CPU Time", 0)
                run_ms += metrics.get("Executor Run Time", 0)
    return stages, tasks, cpu_ns / 1e9, run_ms / 1e3


def _cluster(n: int, cores: int, show_phases: bool) -> int:
    from tests.pipeline.cluster import SPARK_HOME, standalone_cluster

    tmp = Path(tempfile.mkdtemp(prefix="groupd-bench-analyze-cluster-"))
    try:
        data = tmp / "data"
        records = synthetic.generate(data, n)
        runs: list[tuple[str, float, float]] = []

        def events_conf(label: str) -> list[str]:
            d = tmp / f"events-{len(runs)}"
            d.mkdir()
            return ["spark.eventLog.enabled=true", "spark.eventLog.compress=false", f"spark.eventLog.dir=file://{d}"]

        def report(label: str, wall: float, phases: str) -> None:
            stages, tasks, cpu, run = _event_totals(tmp / f"events-{len(runs)}")
            runs.append((label, wall, cpu))
            shuffles = re.search(r"(\d+) shuffle partitions", phases)
            print(
                f"{label:<38} {wall:6.1f} s wall, {shuffles.group(1) if shuffles else '?':>3} shuffle partitions, "
                f"{stages:3} stages, {tasks:4} tasks, executors {cpu:5.1f} s CPU / {run:6.1f} s running; "
                f"load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            if show_phases:
                print(phases)

        label = f"local[{cores}]"
        wall, _cpu, _inner, phases = _run(data, tmp / "out-local", label, events_conf(label))
        report(label, wall, phases)
        (tmp / "spark").mkdir()
        with standalone_cluster(tmp / "spark", cores=cores) as c:
            submit = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", c.url]
            submit += ["--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m"]
            submit += ["--conf", f"spark.pyspark.python={sys.executable}"]
            for label, conf in (
                ("cluster, Spark's default 200 (before)", ["spark.sql.shuffle.partitions=200"]),
                ("cluster, sized to the input (after)", []),
            ):
                conf = conf + events_conf(label)
                wall, _cpu, _inner, phases = _run(data, tmp / f"out-{len(runs)}", "", conf, submit=submit, env=c.env)
                report(label, wall, phases)
        _, local, local_cpu = runs[0]
        print(f"{records} records; cluster / local, wall and executor CPU:")
        for lb, w, cpu in runs[1:]:
            print(f"  {lb:<38} {w / local:5.2f} {cpu / local_cpu:5.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
