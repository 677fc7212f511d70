"""Random TxnOffsetCommit / OffsetCommit / OffsetDelete / end markers / producer fences / appends
landing or failing / crash + reload, checked after every step against an independent fold of the
durable log written the way Kafka's OffsetMetadataManager reads it (record offsets decide between a
transaction's offset and a plain commit): pending offsets are never visible, a committed
transaction's offsets are visible exactly once its marker is durable, require_stable answers
UNSTABLE_OFFSET_COMMIT exactly where a transaction is open, and a reload equals the live state."""

from __future__ import annotations

import os
from typing import Any

from groupd.coordinator import CoordinatorConfig
from groupd.coordinator.records import OffsetCommitKey
from groupd.coordinator.result import Append
from harness import Ctx, Shell
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from test_txn_offsets import assert_reload_equal

GROUPS = {"my-group": 12, "polygenelubricants": 0}
PIDS = [1, 2]
TPS = [("t", 0), ("u", 0)]
CONFIG = CoordinatorConfig(offsets_retention_check_interval_ms=10**12)

TP = tuple[str, int]


def reference(
    batches: list[Append], skipped: list[tuple[str, TP]] | None = None
) -> tuple[dict[str, dict[TP, int]], dict[str, set[TP]]]:
    """Kafka's replay over the durable batches, with record offsets = positions in the log:
    (committed offsets per group, partitions with an open transaction per group). ``skipped`` gets
    the offsets a commit marker did not materialize because a later plain commit won."""
    skipped = [] if skipped is None else skipped
    committed: dict[tuple[str, TP], tuple[int, int]] = {}  # -> (offset, record offset)
    pending: dict[int, dict[tuple[str, TP], tuple[int, int]]] = {}
    position = 0
    for a in batches:
        if a.marker is not None:
            mine = pending.get(a.producer_id, {})
            for gtp in [k for k in mine if GROUPS[k[0]] == a.partition]:
                offset, at = mine.pop(gtp)
                if a.marker[0] and (gtp not in committed or at > committed[gtp][1]):
                    committed[gtp] = (offset, at)
                elif a.marker[0]:
                    skipped.append(gtp)
            position += 1
            continue
        for key, value in a.records:
            position += 1
            if not isinstance(key, OffsetCommitKey):
                continue
            gtp = (key.group, (key.topic, key.partition))
            if value is None:
                committed.pop(gtp, None)
                for mine in pending.values():
                    mine.pop(gtp, None)
            elif a.producer_id >= 0:
                pending.setdefault(a.producer_id, {})[gtp] = (value.offset, position)
            else:
                committed[gtp] = (value.offset, position)
    visible: dict[str, dict[TP, int]] = {}
    for (g, tp), (offset, _at) in committed.items():
        visible.setdefault(g, {})[tp] = offset
    open_: dict[str, set[TP]] = {}
    for mine in pending.values():
        for g, tp in mine:
            open_.setdefault(g, set()).add(tp)
    return visible, open_


class TxnOffsetsMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.shell = Shell(config=CONFIG, auto_append=False)
        self.epochs = dict.fromkeys(PIDS, 0)
        self.next_offset = 1
        self.markers: dict[Ctx, tuple[int, int, bool]] = {}
        self.txn_commits: dict[Ctx, int] = {}

    def offset(self) -> int:
        self.next_offset += 1
        return self.next_offset

    # -- rules ----------------------------------------------------------------------------------

    @rule(
        group=st.sampled_from(sorted(GROUPS)),
        pid=st.sampled_from(PIDS),
        tps=st.sets(st.sampled_from(TPS), min_size=1),
        land=st.booleans(),
    )
    def txn_commit(self, group: str, pid: int, tps: set[TP], land: bool) -> None:
        self.send_txn_commit(group, pid, self.epochs[pid], tps)
        self.land(land)

    def land(self, land: bool) -> None:
        """Most writes land at once (then the next rule sees them durable); the others wait."""
        if land:
            self.shell.flush()

    @rule(group=st.sampled_from(sorted(GROUPS)), pid=st.sampled_from(PIDS), tp=st.sampled_from(TPS))
    def zombie_commit(self, group: str, pid: int, tp: TP) -> None:
        if self.epochs[pid] > 0:
            self.send_txn_commit(group, pid, self.epochs[pid] - 1, {tp})

    def send_txn_commit(self, group: str, pid: int, epoch: int, tps: set[TP]) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in sorted(tps):
            topics.setdefault(t, []).append(
                {"partition_index": p, "committed_offset": self.offset(), "committed_metadata": ""}
            )
        req = {
            "transactional_id": f"tx{pid}",
            "group_id": group,
            "producer_id": pid,
            "producer_epoch": epoch,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        self.txn_commits[self.shell.send("TxnOffsetCommit", 3, req)] = epoch

    @rule(group=st.sampled_from(sorted(GROUPS)), tp=st.sampled_from(TPS), land=st.booleans())
    def plain_commit(self, group: str, tp: TP, land: bool) -> None:
        req = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": tp[0], "partitions": [{"partition_index": tp[1], "committed_offset": self.offset()}]}],
        }
        self.shell.send("OffsetCommit", 8, req)
        self.land(land)

    @rule(group=st.sampled_from(sorted(GROUPS)), tp=st.sampled_from(TPS))
    def offset_delete(self, group: str, tp: TP) -> None:
        req = {"group_id": group, "topics": [{"name": tp[0], "partitions": [{"partition_index": tp[1]}]}]}
        self.shell.send("OffsetDelete", 0, req)

    @rule(
        pid=st.sampled_from(PIDS),
        partition=st.sampled_from(sorted(GROUPS.values())),
        committed=st.booleans(),
        land=st.booleans(),
    )
    def marker(self, pid: int, partition: int, committed: bool, land: bool) -> None:
        self.write_marker(pid, self.epochs[pid], partition, committed)
        self.land(land)

    @rule(pid=st.sampled_from(PIDS), committed=st.booleans(), land=st.booleans())
    def end_transaction(self, pid: int, committed: bool, land: bool) -> None:
        """EndTxn of a transaction that added both groups' partitions: a marker in each."""
        for partition in sorted(GROUPS.values()):
            self.write_marker(pid, self.epochs[pid], partition, committed)
        self.land(land)

    @rule(pid=st.sampled_from(PIDS))
    def fence(self, pid: int) -> None:
        """InitProducerId of a new instance: the epoch goes up and the coordinator aborts with it."""
        self.epochs[pid] += 1
        for partition in sorted(GROUPS.values()):
            self.write_marker(pid, self.epochs[pid], partition, False)

    def write_marker(self, pid: int, epoch: int, partition: int, committed: bool) -> None:
        ctx = Ctx(len(self.markers) + 10**6, "marker")
        self.markers[ctx] = (pid, epoch, committed)
        self.shell.absorb(self.shell.coord.write_txn_marker(self.shell.now, ctx, partition, pid, epoch, committed, 0))

    @rule(fail=st.booleans(), count=st.integers(1, 4))
    def complete_appends(self, fail: bool, count: int) -> None:
        if self.shell.queued:
            fail = fail and count == 1  # mostly landing: a failed write changes nothing
            self.shell.flush(error=56 if fail else None, count=count)
            event("append failed" if fail else "append landed")

    @rule()
    def crash_and_reload(self) -> None:
        """The process dies: what was not durable is gone, the log is loaded by a fresh coordinator."""
        if self.shell.queued:
            event("crash with appends in flight")
        self.shell.queued.clear()
        self.shell.coord = self.shell.reloaded()
        self.markers.clear()
        self.txn_commits.clear()

    # -- invariants -------------------------------------------------------------------------------

    @invariant()
    def tally_answers(self) -> None:
        for ctx, resp in list(self.shell.answers.items()):
            if ctx in self.txn_commits:
                codes = {p["error_code"] for t in resp["topics"] for p in t["partitions"]}
                event(f"txn commit answered {sorted(codes)}")
                self.txn_commits.pop(ctx)
            elif ctx in self.markers:
                event(f"marker answered {resp['error_code']}")
                self.markers.pop(ctx)

    @invariant()
    def visible_offsets_are_the_reference_fold_of_the_durable_log(self) -> None:
        skipped: list[tuple[str, TP]] = []
        visible, open_ = reference(self.shell.batches, skipped)
        if skipped:
            event("a later plain commit won over a committed transaction")
        for group in GROUPS:
            req = {
                "group_id": group,
                "topics": [{"name": "t", "partition_indexes": [0]}, {"name": "u", "partition_indexes": [0]}],
            }
            plain = self.shell.answer(self.shell.send("OffsetFetch", 7, req))
            stable = self.shell.answer(self.shell.send("OffsetFetch", 7, {**req, "require_stable": True}))
            assert plain is not None and stable is not None
            got = {
                (t["name"], p["partition_index"]): p["committed_offset"]
                for t in plain["topics"]
                for p in t["partitions"]
            }
            want = {tp: visible.get(group, {}).get(tp, -1) for tp in TPS}
            assert got == want, (group, got, want)
            unstable = {
                (t["name"], p["partition_index"])
                for t in stable["topics"]
                for p in t["partitions"]
                if p["error_code"] == 88
            }
            assert unstable == open_.get(group, set()), (group, unstable, open_)
            if unstable:
                event("a partition was unstable")

    @invariant()
    def reload_equals_live(self) -> None:
        assert_reload_equal(self.shell)


TxnOffsetsMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "60")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTxnOffsetsMachine = TxnOffsetsMachine.TestCase
