"""Random join/sync/heartbeat/leave/crash/commit/clock/append interleavings, invariants after every step."""

from __future__ import annotations

import os
from typing import Any

from groupd.coordinator import CoordinatorConfig, GroupCoordinator
from groupd.coordinator.classic.group import GroupState
from harness import Ctx, Shell
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

NAMES = ["a", "b", "c", "s"]  # "s" is a static member
CONFIG = CoordinatorConfig(offsets_retention_check_interval_ms=10**12)


class GroupMachine(RuleBasedStateMachine):
    @initialize(delay=st.sampled_from([0, 0, 3000]))
    def setup(self, delay: int) -> None:
        config = CoordinatorConfig(group_initial_rebalance_delay_ms=delay, offsets_retention_check_interval_ms=10**12)
        self.shell = Shell(config=config, auto_append=False)
        self.clients = {
            n: self.shell.client(
                n,
                instance_id="inst-s" if n == "s" else None,
                session_timeout_ms=10000,
                rebalance_timeout_ms=15000 if n != "c" else 20000,
            )
            for n in NAMES
        }
        self.last_generation = 0
        self.leader_of: dict[int, str] = {}
        self.assigned: dict[tuple[int, str], bytes] = {}
        self.syncs: dict[Ctx, tuple[int, str]] = {}  # SyncGroup ctx -> (generation, member key) at send
        self.joins: set[Ctx] = set()
        self.commits: dict[Ctx, tuple[dict[tuple[str, int], int], int, int]] = {}
        self.checked: set[Ctx] = set()
        self.model_offsets: dict[tuple[str, int], int] = {}
        self.next_offset = 1

    # -- helpers ---------------------------------------------------------------------------------

    @property
    def coord(self) -> GroupCoordinator:
        return self.shell.coord

    def group_generation(self) -> int:
        g = self.coord.group("g")
        return -1 if g is None else g.generation

    @staticmethod
    def key(member_id: str, instance_id: str | None) -> str:
        return instance_id if instance_id is not None else member_id

    def check_answers(self) -> None:
        for ctx, resp in self.shell.answers.items():
            if ctx in self.checked:
                continue
            self.checked.add(ctx)
            if ctx in self.joins and resp["error_code"] == 0:
                gen = resp["generation_id"]
                # A static leader replaced within a generation keeps its instance: compare instances.
                leader = "inst-s" if resp["leader"].startswith("inst-s-") else resp["leader"]
                assert self.leader_of.setdefault(gen, leader) == leader, (gen, self.leader_of[gen], leader)
                event("join succeeded")
            elif ctx in self.syncs and resp["error_code"] == 0:
                gen, key = self.syncs[ctx]
                expected = self.assigned.get((gen, key), b"")
                assert resp["assignment"] == expected, (gen, key, resp["assignment"], expected)
                event("sync succeeded" + (" with an assignment" if expected else ""))
            elif ctx in self.commits:
                offsets, client_gen, group_gen = self.commits[ctx]
                for t in resp["topics"]:
                    for p in t["partitions"]:
                        if p["error_code"] == 0:
                            # Only a member of the current generation may have its commit accepted.
                            assert client_gen == group_gen, (client_gen, group_gen)
                            event("commit acknowledged")
                            self.model_offsets[(t["name"], p["partition_index"])] = offsets[
                                (t["name"], p["partition_index"])
                            ]

    # -- rules -------------------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), version=st.sampled_from([3, 5, 7, 9]))
    def join(self, name: str, version: int) -> None:
        c = self.clients[name]
        if c.pending_join is not None:
            return
        if c.instance_id is not None and version < 5:
            version = 5
        ctx = c.join(version=version)
        self.joins.add(ctx)

    @rule(name=st.sampled_from(NAMES))
    def sync(self, name: str) -> None:
        c = self.clients[name]
        if c.generation < 0 or c.pending_sync is not None or c.pending_join is not None:
            return
        plan: dict[str, bytes] | None = None
        if c.is_leader and c.members:
            plan = {}
            for m in c.members:
                k = self.key(m["member_id"], m["group_instance_id"])
                plan[m["member_id"]] = f"{c.generation}/{k}".encode()
                self.assigned.setdefault((c.generation, k), plan[m["member_id"]])
        ctx = c.sync(plan)
        self.syncs[ctx] = (c.generation, self.key(c.member_id, c.instance_id))
        self.shell.deliver()

    @rule(name=st.sampled_from(NAMES))
    def heartbeat(self, name: str) -> None:
        c = self.clients[name]
        if not c.member_id:
            return
        code = c.heartbeat()
        if code in (0, 27):
            assert c.generation == self.group_generation()
        event(f"heartbeat {code}")
        if code in (22, 25):
            # The client rejoins from scratch after these, as real clients do.
            c.member_id = "" if code == 25 else c.member_id
            c.generation = -1

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        c = self.clients[name]
        if not c.member_id or c.pending_join is not None:
            return
        c.leave(version=4 if c.instance_id else 1)
        c.member_id, c.generation = "", -1

    @rule(name=st.sampled_from(NAMES))
    def crash(self, name: str) -> None:
        """The process dies: it forgets its ids, its parked requests go nowhere."""
        c = self.clients[name]
        c.member_id, c.generation, c.leader, c.members = "", -1, "", []
        c.pending_join = c.pending_sync = None

    @rule(name=st.sampled_from(NAMES), partition=st.integers(0, 2))
    def commit(self, name: str, partition: int) -> None:
        c = self.clients[name]
        if c.generation < 0 or not c.member_id:
            return
        offset = self.next_offset
        self.next_offset += 1
        ctx = c.commit({("t", partition): offset})
        self.commits[ctx] = ({("t", partition): offset}, c.generation, self.group_generation())

    @rule(version=st.sampled_from([5, 9]))
    def well_behaved_round(self, version: int) -> None:
        """Every client does what a healthy consumer would next; lets the random walk reach Stable."""
        for _ in range(3):
            for name, c in self.clients.items():
                g = self.coord.group("g")
                rebalancing = g is not None and g.state is GroupState.PREPARING_REBALANCE
                if c.pending_join is None and (
                    not c.member_id or c.generation != self.group_generation() or rebalancing
                ):
                    self.join(name, version)
            self.shell.flush()
            self.shell.deliver()
            for name, _ in sorted(self.clients.items(), key=lambda kv: not kv[1].is_leader):
                self.sync(name)
            self.shell.flush()
            self.shell.deliver()
        for name in self.clients:
            self.heartbeat(name)

    @rule(ms=st.sampled_from([100, 1000, 4000, 9000, 16000]))
    def advance(self, ms: int) -> None:
        self.shell.advance(ms)

    @rule(fail=st.booleans(), count=st.integers(1, 3))
    def complete_appends(self, fail: bool, count: int) -> None:
        if not self.shell.queued:
            return
        self.shell.flush(error=OSError("injected") if fail and count == 1 else None, count=count)
        self.shell.deliver()

    # -- invariants -------------------------------------------------------------------------------

    @invariant()
    def answers_are_consistent(self) -> None:
        self.check_answers()

    @invariant()
    def generations_only_increase(self) -> None:
        gen = self.group_generation()
        assert gen >= self.last_generation or gen == -1
        self.last_generation = max(gen, self.last_generation)

    @invariant()
    def leader_is_a_member(self) -> None:
        g = self.coord.group("g")
        if g is None:
            return
        if g.members:
            assert g.leader_id in g.members
        else:
            assert g.leader_id is None
        assert g.num_awaiting_join == sum(1 for m in g.members.values() if m.awaiting_join)

    @invariant()
    def fetch_returns_exactly_the_acknowledged_commits(self) -> None:
        resp = self.shell.answer(self.shell.send("OffsetFetch", 7, {"group_id": "g", "topics": None}))
        assert resp is not None
        fetched = {
            (t["name"], p["partition_index"]): p["committed_offset"] for t in resp["topics"] for p in t["partitions"]
        }
        assert fetched == self.model_offsets

    @invariant()
    def replay_reproduces_persisted_state(self) -> None:
        if self.shell.queued:
            return  # writes in flight: the log legitimately lags
        fresh = GroupCoordinator(CONFIG)
        fresh.load(self.shell.now, self.shell.records())
        assert fresh.offsets == self.coord.offsets
        live, loaded = self.coord.group("g"), fresh.group("g")
        if live is None:
            return
        event(f"replay checked in {live.state}")
        record = self.coord.group_records.get("g")
        if live.state is GroupState.EMPTY and record is not None and record.generation != live.generation:
            # Kafka accepts losing the write of an emptied group: the log keeps the previous
            # generation, whose members will simply time out after a restart.
            assert loaded is not None and loaded.generation < live.generation
            return
        if live.state is GroupState.STABLE or (live.state is GroupState.EMPTY and record is not None):
            assert loaded is not None
            assert (loaded.generation, loaded.protocol_type, loaded.protocol_name) == (
                live.generation,
                live.protocol_type,
                live.protocol_name,
            )
            assert loaded.state is live.state
            if live.state is GroupState.STABLE:
                assert loaded.leader_id == live.leader_id

                def summary(g: Any) -> set[tuple[Any, ...]]:
                    return {
                        (
                            m.member_id,
                            m.group_instance_id,
                            m.client_id,
                            m.client_host,
                            m.rebalance_timeout_ms,
                            m.session_timeout_ms,
                            m.metadata(g.protocol_name),
                            m.assignment,
                        )
                        for m in g.members.values()
                    }

                assert summary(loaded) == summary(live)
            else:
                assert loaded.state_timestamp == live.state_timestamp
        elif loaded is not None:
            assert loaded.generation <= live.generation


GroupMachine.TestCase.settings = settings(
    # Raise GROUPD_STATEFUL_EXAMPLES for a longer bug hunt; the default keeps the suite fast.
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "100")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGroupMachine = GroupMachine.TestCase
