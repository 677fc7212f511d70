"""The daemon's instructions per OffsetCommit of 100 partitions (issue 26), load-insensitive: one
``groupd serve --fsync never`` under callgrind, a raw client that joins a classic group and commits
its 100 partitions N times in a row (one in flight), the counters zeroed before and dumped after
the commits. What it counts is the server's whole cost of a commit one at a time (dispatch,
coordinator, appender, log write, answer), not the 50-committer load's (there appends are batched).
Compare two commits of the tree with it; the machine's load does not move the figure.

    python -m bench.commit_callgrind [N] [--out cg.out]   # prints Ir per commit
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import targets
from .targets import start_groupd


def _summary(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise ValueError(f"no summary in {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=300)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="groupd-commit-callgrind-"))
    out = args.out or root / "cg.out"
    spawn = targets._spawn

    def under_callgrind(cmd: list[str], **kw: Any) -> Any:
        return spawn(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd], **kw)

    targets._spawn = under_callgrind  # type: ignore[assignment]
    t, _ = start_groupd(root / "data", "--fsync", "never", timeout=300)
    try:
        from tests.support.raw_client import RawClient

        c = RawClient(int(t.bootstrap.rsplit(":", 1)[1]), timeout=60)
        topics = [f"t{i}" for i in range(25)]
        c.request(
            "CreateTopics",
            4,
            {
                "topics": [
                    {"name": n, "num_partitions": 4, "replication_factor": 1, "assignments": [], "configs": []}
                    for n in topics
                ],
                "timeout_ms": 5000,
                "validate_only": False,
            },
        )
        join: dict[str, Any] = {
            "group_id": "g",
            "session_timeout_ms": 30000,
            "rebalance_timeout_ms": 30000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }
        r = c.request("JoinGroup", 5, join)
        if r["error_code"] == 79:  # MEMBER_ID_REQUIRED
            join["member_id"] = r["member_id"]
            r = c.request("JoinGroup", 5, join)
        member, generation = r["member_id"], r["generation_id"]
        sync = {"group_id": "g", "generation_id": generation, "member_id": member, "group_instance_id": None}
        c.request("SyncGroup", 3, sync | {"assignments": [{"member_id": member, "assignment": b""}]})

        def commit(offset: int) -> None:
            body = {
                "group_id": "g",
                "generation_id_or_member_epoch": generation,
                "member_id": member,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": n,
                        "partitions": [
                            {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": 1}
                            | {"committed_metadata": ""}
                            for p in range(4)
                        ],
                    }
                    for n in topics
                ],
            }
            r = c.request("OffsetCommit", 8, body)
            assert all(p["error_code"] == 0 for tt in r["topics"] for p in tt["partitions"]), r

        for o in range(200):  # warm: caches, the log's first segment
            commit(o)
        subprocess.run(["callgrind_control", "-z", str(t.pid)], check=True, capture_output=True)
        for o in range(args.n):
            commit(1000 + o)
        subprocess.run(["callgrind_control", "-d", str(t.pid)], check=True, capture_output=True)
        dumped = sorted(out.parent.glob(out.name + ".*"))[-1]
        print(f"{_summary(dumped) / args.n:,.0f} instructions per commit ({args.n} commits, {dumped})")
    finally:
        t.proc.terminate()
        t.proc.wait(120)


if __name__ == "__main__":
    sys.exit(main())
