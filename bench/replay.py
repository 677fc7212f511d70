"""The start-up replay of ``__consumer_offsets`` in process: ``GroupShell.load`` over a log written
by ``bench.logdata`` (CRCs checked, as at every start), records per second of process CPU (the
machine is shared: CPU time is steadier than wall time). ``--alternate`` runs the native path and
the pure-Python one (``GROUPD_NO_NATIVE=1``) in turn, each in a fresh process.

    python -m bench.replay --records 1000000 --rounds 3 --alternate
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OFFSETS = "__consumer_offsets"


async def _load(data_dir: Path) -> dict[str, float]:
    from groupd.broker.group_shell import GroupShell
    from groupd.coordinator import GroupCoordinator
    from groupd.storage import LogConfig, LogManager

    config = LogConfig(cleanup_policy="compact", retention_ms=None)
    logs = LogManager(data_dir, config, topic_config=lambda t: config if t == OFFSETS else None)
    logs.open_all()
    try:
        core = GroupCoordinator()
        shell = GroupShell(core, lambda p: logs.get_or_create(OFFSETS, p), None)  # type: ignore[arg-type]
        partitions = list(range(50))
        shell.begin_load(partitions)
        c0, w0 = time.process_time(), time.perf_counter()
        await shell.load(partitions)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        n = shell.load_stats["records"]
        return {"records": n, "cpu_s": cpu, "wall_s": wall, "records_per_cpu_s": n / cpu, "groups": len(core.groups)}
    finally:
        logs.close()


def _one(data_dir: Path, native: bool) -> dict[str, float]:
    env = dict(os.environ)
    if native:
        env.pop("GROUPD_NO_NATIVE", None)
    else:
        env["GROUPD_NO_NATIVE"] = "1"
    out = subprocess.run(
        [sys.executable, "-m", "bench.replay", "--child", str(data_dir)], env=env, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir", help="an existing data dir (default: generate one in a temp dir)")
    ap.add_argument("--alternate", action="store_true", help="native and pure Python in turn")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        import structlog

        structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
        print(json.dumps(asyncio.run(_load(Path(args.child)))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data_dir) if args.data_dir else Path(tmp) / "data"
        if not args.data_dir:
            from bench import logdata

            gen = logdata.generate(data, args.records)
            print(f"wrote {gen['records']:,} records in {gen['seconds']:.1f} s", file=sys.stderr)
        kinds = ["native", "python"] if args.alternate else ["native"]
        rates: dict[str, list[float]] = {k: [] for k in kinds}
        for r in range(args.rounds):
            for k in kinds:
                res = _one(data, k == "native")
                rates[k].append(res["records_per_cpu_s"])
                print(
                    f"round {r + 1} {k:7} {res['records']:,} records  cpu {res['cpu_s']:.3f} s  "
                    f"wall {res['wall_s']:.3f} s  {res['records_per_cpu_s'] / 1e6:.2f} M records/cpu-s"
                )
        for k, v in rates.items():
            print(f"median {k:7} {statistics.median(v) / 1e6:.2f} M records/cpu-s")


if __name__ == "__main__":
    main()
