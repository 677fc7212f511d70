"""The regression guard: each figure of a ``bench.run`` as a ratio to a baseline measured in the same
run (the librdkafka mock wherever it runs the workload), compared with the ratios last committed in
``bench/history.json``.

On a shared machine absolute figures move with the host's load; a ratio to a baseline measured
minutes apart on the same host moves far less, so that is what is kept and compared. Each figure
is turned into a *score*, "how many times better than the baseline" (groupd / mock for a rate,
mock / groupd for a latency, a CPU cost or a size), and a score more than ``TOLERANCE`` below the
last committed one for the same mode (quick or full) is a REGRESSION. A figure with no baseline
(replay speed: the mock has no log to replay) is compared raw, and says so.

The history is appended to only on request (``python -m bench.run --record``, ``make bench-record``):
a run on a loaded host must not become the reference by accident. Commit the file with the change
that moved the figures.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HISTORY = Path(__file__).with_name("history.json")
TOLERANCE = 0.15  # a score more than 15% below its last committed value is a regression

# (figure name, workload, baseline, better, getter(results) -> (groupd value, baseline value))
Getter = Callable[[dict[str, Any]], tuple[Any, Any]]


def _pair(path: tuple[str, ...], base_kind: str, key: str, kind: str = "groupd") -> Getter:
    def get(results: dict[str, Any]) -> tuple[Any, Any]:
        node: Any = results
        for p in path:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            return None, None
        return (node.get(kind) or {}).get(key), (node.get(base_kind) or {}).get(key) if base_kind else None

    return get


def _commits(label: str, key: str) -> Getter:
    def get(results: dict[str, Any]) -> tuple[Any, Any]:
        c = results.get("commits", {})
        return (c.get(label) or {}).get(key), (c.get("mock") or {}).get(key)

    return get


def _consumer(m: int) -> Getter:
    def get(results: dict[str, Any]) -> tuple[Any, Any]:
        c = results.get("consumer", {})
        return (c.get(str(m)) or {}).get("server_us_per_req"), (c.get("classic") or {}).get(f"us_per_req_{m}")

    return get


def _replay(results: dict[str, Any]) -> tuple[Any, Any]:
    return results.get("startup", {}).get("replay_records_per_s"), None


FIGURES: list[tuple[str, str, str, str, Getter]] = []
for _m in (1000, 10000):
    FIGURES += [
        (f"heartbeats {_m:,} members: req/s", "heartbeats", "mock", "higher", _pair(("heartbeats", str(_m)), "mock", "rps")),
        (f"heartbeats {_m:,} members: p99 ms", "heartbeats", "mock", "lower", _pair(("heartbeats", str(_m)), "mock", "p99_ms")),
        (f"heartbeats {_m:,} members: server CPU us/req", "heartbeats", "mock", "lower",
         _pair(("heartbeats", str(_m)), "mock", "server_us_per_req")),
    ]  # fmt: skip
for _n in (10, 100, 1000, 5000):
    FIGURES += [
        (f"rebalance N={_n:,}: p50 ms", "rebalance", "mock", "lower", _pair(("rebalance", str(_n)), "mock", "p50_ms")),
        (f"rebalance N={_n:,}: server CPU ms", "rebalance", "mock", "lower",
         _pair(("rebalance", str(_n)), "mock", "server_cpu_ms")),
    ]  # fmt: skip
FIGURES += [
    ("soak: p99 heartbeat ms (steady)", "soak", "mock", "lower", _pair(("soak",), "mock", "hb_p99_ms")),
    ("soak: server RSS MiB", "soak", "mock", "lower", _pair(("soak",), "mock", "rss_mb")),
]
for _label, _name in (("groupd", "commits"), ("groupd_fsync_always", "commits fsync=always")):
    FIGURES += [
        (f"{_name} 50x100: commits/s", "commits", "mock", "higher", _commits(_label, "commits_per_s")),
        (f"{_name} 50x100: p99 ms", "commits", "mock", "lower", _commits(_label, "p99_ms")),
        (f"{_name} 50x100: server CPU us/commit", "commits", "mock", "lower", _commits(_label, "server_us_per_commit")),
        (f"{_name} 1 partition: p99 ms", "commits", "mock", "lower", _commits(_label, "single_p99_ms")),
    ]
FIGURES += [
    ("spawn -> first answer ms", "startup", "mock", "lower", _pair(("spawn",), "mock", "first_answer_ms")),
    ("idle RSS MiB", "startup", "mock", "lower", _pair(("spawn",), "mock", "idle_rss_mb")),
    ("replay records/s (raw, no baseline)", "startup", "", "higher", _replay),
    ("KIP-848 heartbeat 1,000: server CPU us/req", "consumer", "classic", "lower", _consumer(1000)),
    ("KIP-848 heartbeat 10,000: server CPU us/req", "consumer", "classic", "lower", _consumer(10000)),
    ("produce 100 B acks=all: messages/s", "produce", "mock", "higher", _pair(("produce",), "mock", "msgs_per_s")),
    ("produce 100 B acks=all: server CPU us/msg", "produce", "mock", "lower",
     _pair(("produce",), "mock", "server_us_per_msg")),
]  # fmt: skip


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) or v <= 0:
        return None
    return float(v)


def figures(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every figure the run produced: value, baseline value, ratio (groupd / baseline) and score."""
    out: dict[str, dict[str, Any]] = {}
    for name, _workload, base, better, get in FIGURES:
        g, b = get(results)
        g, b = _num(g), _num(b)
        if g is None or (base and b is None):
            continue
        if base:
            ratio = g / b  # type: ignore[operator]
            score = ratio if better == "higher" else 1 / ratio
        else:
            ratio = None
            score = g if better == "higher" else 1 / g
        out[name] = {"groupd": g, "baseline": base or None, "base_value": b, "ratio": ratio, "better": better,
                     "score": score}  # fmt: skip
    return out


def load(path: Path = HISTORY) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return list(json.loads(path.read_text()).get("entries", []))


def last_scores(entries: list[dict[str, Any]], quick: bool) -> dict[str, tuple[float, str]]:
    """Per figure, the score of the latest committed entry of the same mode that has it (and when)."""
    out: dict[str, tuple[float, str]] = {}
    for e in entries:
        if bool(e.get("quick")) != quick:
            continue
        for name, f in e.get("figures", {}).items():
            if isinstance(f.get("score"), int | float):
                out[name] = (float(f["score"]), str(e.get("recorded", "?")))
    return out


def compare(current: dict[str, dict[str, Any]], entries: list[dict[str, Any]], quick: bool) -> list[str]:
    """Print the table; returns the names of the figures that regressed."""
    last = last_scores(entries, quick)
    mode = "quick" if quick else "full"
    print(f"\n== regression guard ({mode} run against the last committed {mode} figures in {HISTORY.name}) ==")
    print("   score = how many times better than the baseline of the same run (rate: groupd/base, cost: base/groupd)")
    print(f"   {'figure':50} {'groupd':>10} {'baseline':>10} {'score':>8} {'last':>8} {'change':>8}")
    regressed = []
    for name, f in current.items():
        prev = last.get(name)
        change = f["score"] / prev[0] - 1 if prev else None
        flag = ""
        if change is not None and change < -TOLERANCE:
            flag = "  REGRESSION"
            regressed.append(name)
        base = f"{f['base_value']:,.4g} {f['baseline'][:5]}" if f["baseline"] else "-"
        print(
            f"   {name:50} {f['groupd']:>10,.4g} {base:>10} {f['score']:>8.3g} "
            f"{(f'{prev[0]:.3g}' if prev else '-'):>8} {(f'{change:+.0%}' if change is not None else 'new'):>8}{flag}"
        )
    if regressed:
        print(f"   {len(regressed)} figure(s) more than {TOLERANCE:.0%} below their last committed score: "
              "rerun them (--only) before believing it, the host is shared")  # fmt: skip
    elif last:
        print(f"   no figure more than {TOLERANCE:.0%} below its last committed score")
    return regressed


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(HISTORY.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def record(current: dict[str, dict[str, Any]], quick: bool, path: Path = HISTORY, commit: str | None = None) -> None:
    """Append this run's figures to the history file (commit it to make them the reference)."""
    entries = load(path)
    entries.append(
        {
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "commit": commit or _git_commit(),
            "quick": quick,
            "host": {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2)},
            "figures": current,
        }
    )
    path.write_text(json.dumps({"entries": entries}, indent=1, sort_keys=True) + "\n")
    print(f"   recorded {len(current)} figures in {path} (commit it to make them the reference)")


def main(argv: list[str] | None = None) -> int:
    """Compare (and with --record append) the figures of a run saved with ``bench.run --json``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench.history", description=main.__doc__)
    ap.add_argument("results", help="a file written by python -m bench.run --json")
    ap.add_argument("--record", action="store_true", help=f"append its figures to {HISTORY.name}")
    ap.add_argument("--commit", help="the commit the run measured (default: this checkout's HEAD)")
    args = ap.parse_args(argv)
    results = json.loads(Path(args.results).read_text())
    quick = bool(results.get("quick"))
    figs = figures(results)
    compare(figs, load(), quick)
    if args.record:
        record(figs, quick, commit=args.commit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
