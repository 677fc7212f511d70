"""The random walk of ``test_stateful`` with the group's ``__consumer_offsets`` partition moving under it.

Three brokers share the core; the clients talk to the broker they last found as coordinator. Between
joins, syncs, heartbeats, commits, crashes, clock steps and append completions, the partition is
resigned (``onResignation``), elected on any broker (``onElection``: loading, then loaded) and the
clients rediscover the coordinator (FindCoordinator after NOT_COORDINATOR). After every step:

- no answer is lost: a resignation answers everything that waited (parked JoinGroup/SyncGroup,
  commits whose write was in flight) with NOT_COORDINATOR; none is answered twice (the harness);
- no acknowledged commit is lost: OffsetFetch on the coordinator returns, for each partition, the
  last acknowledged offset or a later one whose answer was NOT_COORDINATOR (a write that reached the
  log after all -- never acknowledged-and-lost);
- the state loaded after an election equals the state before the resignation (when no write was in
  flight at the resignation; otherwise the fold of the log, which then has the extra writes).
"""

from __future__ import annotations

import os
from typing import Any

from groupd.coordinator import Node, PartitionOwnership, partition_for
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule
from test_stateful import GroupMachine

P = partition_for("g")
NODES = {1: Node(1, "b1", 9092), 2: Node(2, "b2", 9093), 3: Node(3, "b3", 9094)}


class MovingGroupMachine(GroupMachine):
    @initialize(delay=st.sampled_from([0, 0, 3000]))
    def setup(self, delay: int) -> None:
        super().setup(delay)
        self.coord.ownership = PartitionOwnership(NODES[1], 50, nodes=NODES.values())
        self.shell.node_id = 1
        self.acked: dict[tuple[str, int], int] = {}
        self.unacked: dict[tuple[str, int], set[int]] = {}  # answered NOT_COORDINATOR: durable or not
        self.before_unload: tuple[Any, Any] | None = None
        self.writes_at_unload = 0

    # -- helpers ---------------------------------------------------------------------------------

    def persisted(self) -> tuple[Any, Any]:
        return self.coord.group_records.get("g"), dict(self.coord.offsets.get("g", {}))

    def served_here(self) -> bool:
        """The partition is loaded and led by the broker the clients talk to."""
        return self.coord.partition_state(P) == "active" and self.coord.ownership.owner_ids[P] == self.shell.node_id

    def check_answers(self) -> None:
        for ctx in [c for c in self.commits if c not in self.checked and c in self.shell.answers]:
            offsets, _client_gen, _group_gen = self.commits[ctx]
            for t in self.shell.answers[ctx]["topics"]:
                for p in t["partitions"]:
                    key = (t["name"], p["partition_index"])
                    if p["error_code"] == 0:
                        self.acked[key] = offsets[key]
                    elif p["error_code"] == 16:
                        self.unacked.setdefault(key, set()).add(offsets[key])
        super().check_answers()

    def everything_answered(self) -> None:
        missing = [c for c in self.shell.sent if c not in self.shell.answers]
        assert not missing, f"not answered after the resignation: {missing}"

    def forget_generations_after(self, generation: int) -> None:
        """A generation completed in memory but not in the log is lost with the partition, as in
        Kafka (the assignment record is written at SyncGroup): its number is given out again."""
        self.leader_of = {g: leader for g, leader in self.leader_of.items() if g <= generation}
        self.assigned = {k: v for k, v in self.assigned.items() if k[0] <= generation}
        self.syncs = {c: gk for c, gk in self.syncs.items() if gk[0] <= generation or c in self.checked}
        self.last_generation = generation

    # -- the partition moving --------------------------------------------------------------------

    @rule()
    def resign(self) -> None:
        """onResignation: nobody leads the partition until the next election."""
        if self.coord.partition_state(P) == "unloaded":
            return
        if self.coord.partition_state(P) == "active":
            self.before_unload = self.persisted()
            self.writes_at_unload = self.coord.pending_appends
        self.shell.unload(P)
        self.shell.deliver()
        self.everything_answered()
        event("resigned")

    @rule(to=st.sampled_from([1, 2, 3]), finish=st.booleans())
    def elect(self, to: int, finish: bool) -> None:
        """onElection on broker ``to``: an active partition is unloaded first (a leader change)."""
        state = self.coord.partition_state(P)
        if state == "active":
            self.before_unload = self.persisted()
            self.writes_at_unload = self.coord.pending_appends
        self.shell.begin_load(P, node=NODES[to])
        self.shell.deliver()
        self.everything_answered()
        assert self.coord.partition_state(P) == "loading"
        event(f"elected from {state}")
        if finish:
            self.finish_load()

    @rule()
    def finish_load(self) -> None:
        if self.coord.partition_state(P) != "loading":
            return
        self.shell.finish_load(P)
        self.shell.deliver()
        assert self.coord.partition_state(P) == "active"
        if self.before_unload is not None and self.writes_at_unload == 0:
            # nothing was being written: the partition comes back exactly as it went
            assert self.persisted() == self.before_unload
            event("reload == before the unload")
        group = self.coord.group("g")
        self.forget_generations_after(group.generation if group is not None else 0)
        self.before_unload = None

    @rule()
    def rediscover(self) -> None:
        """The clients' FindCoordinator: they talk to the new leader from now on."""
        resp = self.shell.answer(self.shell.send("FindCoordinator", 1, {"key": "g", "key_type": 0}))
        assert resp is not None
        if resp["error_code"] == 0:
            self.shell.node_id = resp["node_id"]
        else:
            assert resp["error_code"] == 15 and self.coord.partition_state(P) == "unloaded"

    # -- the base machine's rules and invariants where the partition may be away ---------------------

    @rule(name=st.sampled_from(["a", "b", "c", "s"]))
    def heartbeat(self, name: str) -> None:
        c = self.clients[name]
        if not c.member_id:
            return
        code = c.heartbeat()
        if self.served_here() and code in (0, 27):
            assert c.generation == self.group_generation()
        elif not self.served_here():
            # NOT_COORDINATOR from a broker not leading it; NONE while it loads (the member keeps its session)
            loading_here = self.coord.partition_state(P) == "loading" and self._leads()
            assert code == (0 if loading_here else 16), code
        event(f"heartbeat {code}")
        if code in (22, 25):
            c.member_id = "" if code == 25 else c.member_id
            c.generation = -1

    @invariant()
    def generations_only_increase(self) -> None:
        if self.served_here():
            super().generations_only_increase()

    @invariant()
    def fetch_returns_exactly_the_acknowledged_commits(self) -> None:
        resp = self.shell.answer(self.shell.send("OffsetFetch", 7, {"group_id": "g", "topics": None}))
        assert resp is not None
        if not self.served_here():
            expected = 14 if self.coord.partition_state(P) == "loading" and self._leads() else 16
            assert resp["error_code"] == expected, (resp["error_code"], expected)
            return
        fetched = {
            (t["name"], p["partition_index"]): p["committed_offset"] for t in resp["topics"] for p in t["partitions"]
        }
        for key in set(fetched) | set(self.acked):
            got, acked = fetched.get(key), self.acked.get(key)
            if got == acked:
                continue
            # never an acknowledged commit lost; a later one answered NOT_COORDINATOR may have landed
            assert got is not None and got in self.unacked.get(key, ()) and got > (acked or -1), (key, got, acked)
            event("a commit answered NOT_COORDINATOR reached the log")

    def _leads(self) -> bool:
        return self.coord.ownership.owner_ids[P] == self.shell.node_id

    @invariant()
    def replay_reproduces_persisted_state(self) -> None:
        if self.coord.partition_state(P) == "active":
            super().replay_reproduces_persisted_state()


MovingGroupMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "100")),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMovingGroupMachine = MovingGroupMachine.TestCase
