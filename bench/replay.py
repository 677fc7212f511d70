"""The start-up replay of ``__consumer_offsets`` in process: ``GroupShell.load`` over a log written
by ``bench.logdata`` (CRCs checked, as at every start), records per second of process CPU (the
machine is shared: CPU time is steadier than wall time). ``--alternate`` runs the native path and
the pure-Python one (``GROUPD_NO_NATIVE=1``) in turn, each in a fresh process.

    python -m bench.replay --records 1000000 --rounds 3 --alternate

``--compare PYTHON...`` adds loads by other interpreters (another checkout's venv) to the rotation.
``--startup PYTHON...``: ``groupd serve`` (run by each of these interpreters in turn, e.g. two
checkouts' venvs) on a copy of the log: spawn -> first ApiVersions answer, spawn -> offsets_loaded,
and the slowest of the ApiVersions answers asked back to back while the log loads (what a large log
costs other requests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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


def _one(data_dir: Path, native: bool, python: str = sys.executable) -> dict[str, float]:
    """One load in a fresh process of ``python`` (another checkout's venv: its own groupd), run
    as a script from a neutral directory so that it imports that interpreter's groupd."""
    env = dict(os.environ)
    if native:
        env.pop("GROUPD_NO_NATIVE", None)
    else:
        env["GROUPD_NO_NATIVE"] = "1"
    out = subprocess.run(
        [python, str(Path(__file__).resolve()), "--child", str(data_dir)],
        env=env,
        capture_output=True,
        text=True,
        cwd=data_dir.parent,
    )
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _startup(python: str, src: Path, work: Path) -> dict[str, float]:
    import shutil
    import socket

    from bench.targets import _API_VERSIONS_FRAME, _spawn, _stop_proc, first_answer_s, free_port

    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(src, data)
    port = free_port()
    log_path = work / "groupd.log"
    cmd = [python, "-m", "groupd", "serve", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--data-dir", str(data), "--log-format", "json"]
    with log_path.open("wb") as log:
        t0 = time.perf_counter()
        proc = _spawn(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=work)
    try:
        first = first_answer_s(port, t0, 120, proc)
        worst = 0.0
        loaded = None
        with socket.create_connection(("127.0.0.1", port)) as sock:
            while loaded is None and time.perf_counter() - t0 < 120:
                a = time.perf_counter()
                sock.sendall(_API_VERSIONS_FRAME)
                (size,) = struct.unpack(">i", _recv(sock, 4))
                _recv(sock, size)
                worst = max(worst, time.perf_counter() - a)
                for line in log_path.read_text().splitlines():
                    if '"offsets_loaded"' in line:
                        loaded = json.loads(line)
        return {
            "first_api_versions_ms": first * 1000,
            "loaded_s": time.perf_counter() - t0,
            "replay_s": loaded["seconds"] if loaded else float("nan"),
            "worst_api_versions_during_load_ms": worst * 1000,
        }
    finally:
        _stop_proc(proc)


def _recv(sock: Any, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        more = sock.recv(n - len(buf))
        if not more:
            raise ConnectionError("closed")
        buf += more
    return buf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir", help="an existing data dir (default: generate one in a temp dir)")
    ap.add_argument("--alternate", action="store_true", help="native and pure Python in turn")
    ap.add_argument("--startup", nargs="+", metavar="PYTHON", help="start-up figures with these interpreters")
    ap.add_argument("--compare", nargs="+", metavar="PYTHON", help="also load with these interpreters (checkouts)")
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
        if args.startup:
            from bench.run import _compile_groupd

            # measure the start a user sees, with bytecode (this interpreter's groupd; compile the
            # other checkouts the same way before comparing)
            _compile_groupd()
            for r in range(args.rounds):
                for py in args.startup:
                    res = _startup(py, data, Path(tmp) / "startup")
                    print(f"round {r + 1} {py}: " + "  ".join(f"{k} {v:.3f}" for k, v in res.items()))
            return
        kinds = ["native", "python"] if args.alternate else ["native"]
        kinds += [f"compare:{py}" for py in args.compare or ()]
        rates: dict[str, list[float]] = {k: [] for k in kinds}
        for r in range(args.rounds):
            for k in kinds:
                py = k.removeprefix("compare:") if k.startswith("compare:") else sys.executable
                res = _one(data, k != "python", py)
                rates[k].append(res["records_per_cpu_s"])
                print(
                    f"round {r + 1} {k} {res['records']:,} records  cpu {res['cpu_s']:.3f} s  "
                    f"wall {res['wall_s']:.3f} s  {res['records_per_cpu_s'] / 1e6:.2f} M records/cpu-s"
                )
        for k, v in rates.items():
            print(f"median {k} {statistics.median(v) / 1e6:.2f} M records/cpu-s")


if __name__ == "__main__":
    main()
