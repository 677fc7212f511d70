"""KIP-848 reconciliation under random joins, heartbeats, leaves, crashes, clock jumps and partition
growth (hypothesis stateful, fake clock). After every step: no partition is held by two members (the
group's partition-epoch map refuses it on replay, as Kafka's addPartitionEpochs does), what every
member's client believes it owns is what the coordinator has it owning or revoking, and the records
replayed into a fresh core give the same state. At the end, and whenever asked, every member
converges to the target assignment and the target covers every partition once."""

from __future__ import annotations

import os

import harness
from consumer_harness import GROUP, Client, Shell, image, topic_id
from groupd.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupState, MemberState
from groupd.coordinator.consumer_protocol import decode_assignment
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from test_consumer_group_coordinator import hb as consumer_hb

NAMES = ["a", "b", "c", "d", "s"]  # "s" is static
T = topic_id("t")


class ReconciliationMachine(RuleBasedStateMachine):
    @initialize(partitions=st.integers(1, 8))
    def setup(self, partitions: int) -> None:
        self.partitions = partitions
        self.version = 1
        self.shell = Shell(topics=image(1, t=partitions))
        self.clients: dict[str, Client] = {}
        self.rejoins = 0

    def _client(self, name: str) -> Client:
        self.rejoins += 1
        return self.shell.client(f"{name}-{self.rejoins}", instance_id="inst-s" if name == "s" else None)

    def _beat(self, name: str) -> None:
        c = self.clients[name]
        r = c.heartbeat()
        if r["error_code"] in (25, 110):  # fenced or forgotten: drop everything and rejoin (as librdkafka)
            self.clients[name] = c = self._client(name)
            c.heartbeat()

    @rule(name=st.sampled_from(NAMES))
    def join(self, name: str) -> None:
        if name not in self.clients:
            self.clients[name] = c = self._client(name)
            r = c.heartbeat()
            assert r["error_code"] in (0, 111), r  # 111: the static id is still held by its crashed owner
            if r["error_code"]:
                del self.clients[name]

    @rule(name=st.sampled_from(NAMES), data=st.data())
    def heartbeat(self, name: str, data: st.DataObject) -> None:
        if name in self.clients:
            self._beat(name)

    @rule(name=st.sampled_from(NAMES), static_leave=st.booleans())
    def leave(self, name: str, static_leave: bool) -> None:
        c = self.clients.pop(name, None)
        if c is not None and c.epoch > 0:
            c.leave(epoch=-2 if name == "s" and static_leave else -1)

    @rule(name=st.sampled_from(NAMES))
    def crash(self, name: str) -> None:
        self.clients.pop(name, None)  # never heard from again: its session expires

    @rule(ms=st.sampled_from([1000, 5000, 20000, 46000]))
    def advance(self, ms: int) -> None:
        self.shell.advance(ms)

    @rule()
    def grow_topic(self) -> None:
        if self.partitions < 12:
            self.partitions += 1
            self.version += 1
            self.shell.set_topics(image(self.version, t=self.partitions))

    @rule()
    def converge(self) -> None:
        for _ in range(8):
            for name in list(self.clients):
                self._beat(name)
        g = self.shell.group()
        if g is None or not self.clients:
            return
        live = {c.member_id for c in self.clients.values()}
        assert live <= set(g.members)
        if set(g.members) != live:
            return  # crashed members still hold their partitions until their sessions expire
        assert g.state == ConsumerGroupState.STABLE, g.state
        for m in g.members.values():
            assert m.state == MemberState.STABLE and m.member_epoch == g.target_epoch
            assert m.assigned == g.target.get(m.member_id, {})
        everything = sorted(p for c in self.clients.values() for p in c.owned.get(T, ()))
        assert everything == list(range(self.partitions))

    @invariant()
    def owners_agree(self) -> None:
        if not hasattr(self, "shell"):
            return
        g = self.shell.group()
        if g is None:
            return
        seen: set[int] = set()
        for c in self.clients.values():
            m = g.members.get(c.member_id)
            if m is None or c.epoch != m.member_epoch:
                continue  # a fenced client learns it on its next heartbeat and drops everything
            mine = set(c.owned.get(T, ()))
            held = set(m.assigned.get(T, ())) | set(m.pending_revocation.get(T, ()))
            assert mine <= held, (c.member_id, mine, held)
            assert not (mine & seen), "a partition owned by two members"
            seen |= mine
        epochs = g.partition_epochs
        assert all(
            g.members[mid].member_epoch == epochs[(t, p)]
            for mid in g.members
            for t, ps in g.members[mid].assigned.items()
            for p in ps
        )

    @invariant()
    def recovered_state_equals_state_before(self) -> None:
        if not hasattr(self, "shell"):
            return
        before = self.shell.group()
        after = self.shell.recovered().get(GROUP)
        assert (before is None) == (after is None)
        if before is not None:
            assert after.persisted() == before.persisted()

    def teardown(self) -> None:
        if hasattr(self, "shell"):
            self.shell.advance(50000)  # every crashed member's session has expired
            self.converge()


ReconciliationMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "150")),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestReconciliation = ReconciliationMachine.TestCase


# -- classic and consumer-protocol members mixed (KIP-848 migration) ---------------------------------


class ClassicMember:
    """An eager classic consumer (kafka-python's way) driven step by step: JoinGroup, SyncGroup (the
    leader assigns round robin), then heartbeats; told to rejoin, it drops everything first."""

    def __init__(self, client: harness.Client, partitions: int) -> None:
        self.c = client
        self.partitions = partitions
        self.held: set[int] = set()
        self.phase = "idle"

    def act(self) -> None:
        c = self.c
        c.shell.deliver()
        if self.phase == "joining" and c.pending_join is None:
            if c.last_join and c.last_join["error_code"] == 0:
                members = [m["member_id"] for m in c.members] if c.is_leader else []
                plan = {m: [p for p in range(self.partitions) if p % len(members) == i] for i, m in enumerate(members)}
                c.sync({m: harness.assignment("t", *ps) for m, ps in plan.items()})
                self.phase = "syncing"
            else:
                self.rejoin()
        elif self.phase == "syncing" and c.pending_sync is None:
            if c.last_sync and c.last_sync["error_code"] == 0:
                self.held = {p for tp in decode_assignment(c.assignment).assigned_partitions for p in tp.partitions}
                self.phase = "stable"
            else:
                self.rejoin()
        elif self.phase == "stable":
            if c.heartbeat() != 0:
                self.rejoin()
        elif self.phase == "idle":
            self.rejoin()

    def rejoin(self) -> None:
        self.held = set()  # eager: everything is revoked before the JoinGroup
        if self.c.last_join and self.c.last_join["error_code"] == 25:
            self.c.member_id = ""
        self.c.join()
        self.phase = "joining"


class ModernMember:
    """A consumer-protocol member: owns what its last heartbeat answer gave it, acknowledges revocations
    in its next heartbeat, rejoins at epoch 0 when fenced or forgotten."""

    def __init__(self, shell: harness.Shell, member_id: str) -> None:
        self.shell, self.member_id = shell, member_id
        self.epoch = 0
        self.owned: set[int] = set()

    def beat(self, epoch: int | None = None) -> None:
        e = self.epoch if epoch is None else epoch
        r = consumer_hb(self.shell, self.member_id, e, sorted(self.owned), group="g")
        if r["error_code"] in (25, 110, 69):  # dropped, fenced, or the group went classic: start over
            self.epoch, self.owned = 0, set()
            return
        assert r["error_code"] == 0, r
        if e >= 0:
            self.epoch = r["member_epoch"]
            if r["assignment"] is not None:
                self.owned = {p for tp in r["assignment"]["topic_partitions"] for p in tp["partitions"]}


class MigrationMachine(RuleBasedStateMachine):
    """Classic members join and leave a group beside consumer-protocol members: it upgrades and
    downgrades (group.consumer.migration.policy=bidirectional). No partition is ever held by two
    members the coordinator still counts, everyone converges, and the log reloads to the live state."""

    @initialize(
        partitions=st.integers(1, 6),
        policy=st.sampled_from(["bidirectional", "bidirectional", "upgrade", "downgrade", "disabled"]),
    )
    def setup(self, partitions: int, policy: str) -> None:
        self.partitions = partitions
        self.policy = policy
        img = image(1, t=partitions)
        self.shell = harness.Shell(
            topics_image=lambda: img, consumer_config=ConsumerGroupConfig(migration_policy=policy)
        )
        self.classic: dict[str, ClassicMember] = {}
        self.modern: dict[str, ModernMember] = {}
        self.n = 0

    @rule(name=st.sampled_from(["k1", "k2", "k3"]))
    def classic_join(self, name: str) -> None:
        if name not in self.classic:
            self.n += 1
            self.classic[name] = m = ClassicMember(self.shell.client(f"{name}-{self.n}"), self.partitions)
            m.act()

    @rule(name=st.sampled_from(["m1", "m2"]))
    def modern_join(self, name: str) -> None:
        if name not in self.modern:
            self.n += 1
            self.modern[name] = m = ModernMember(self.shell, f"{name}-{self.n}")
            m.beat()

    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        names = sorted(self.classic) + sorted(self.modern)
        if names:
            name = data.draw(st.sampled_from(names))
            if name in self.classic:
                self.classic[name].act()
            else:
                self.modern[name].beat()

    @rule(data=st.data(), crash=st.booleans())
    def leave(self, data: st.DataObject, crash: bool) -> None:
        names = sorted(self.classic) + sorted(self.modern)
        if not names:
            return
        name = data.draw(st.sampled_from(names))
        if name in self.classic:
            m = self.classic.pop(name)
            if not crash and m.c.member_id:
                m.c.leave()
        else:
            mm = self.modern.pop(name)
            if not crash and mm.epoch > 0:
                mm.beat(-1)

    @rule(ms=st.sampled_from([1000, 5000, 12000, 46000]))
    def advance(self, ms: int) -> None:
        self.shell.advance(ms)

    def _counted(self) -> list[tuple[str, set[int]]]:
        """What each client holds, for the clients the coordinator still counts at their epoch."""
        out = []
        cg, classic = self.shell.coord.consumer.group("g"), self.shell.coord.group("g")
        for name, m in self.classic.items():
            if m.phase != "stable":
                continue
            if (
                cg is not None
                and m.c.member_id in cg.members
                and cg.members[m.c.member_id].member_epoch == m.c.generation
            ):
                assert m.held <= set(cg.members[m.c.member_id].assigned.get(T, ())), name
                out.append((name, m.held))
            elif classic is not None and m.c.member_id in classic.members and classic.generation == m.c.generation:
                out.append((name, m.held))
        for name, mm in self.modern.items():
            if cg is not None and mm.member_id in cg.members and cg.members[mm.member_id].member_epoch == mm.epoch:
                out.append((name, mm.owned))
        return out

    @invariant()
    def no_partition_held_twice(self) -> None:
        if hasattr(self, "shell"):
            held = [p for _name, ps in self._counted() for p in ps]
            assert len(held) == len(set(held)), self._counted()

    @invariant()
    def reload_equals_live(self) -> None:
        if not hasattr(self, "shell"):
            return
        fresh = harness.Shell(topics_image=self.shell.topics_image, consumer_config=self.shell.consumer_config)
        fresh.log = list(self.shell.log)
        p = fresh.coord.partition_for("g")
        fresh.coord.begin_load(p)
        fresh.end_load(p)
        live, loaded = self.shell.coord.consumer.group("g"), fresh.coord.consumer.group("g")
        assert (live is None) == (loaded is None)
        if live is not None:
            assert loaded.persisted() == live.persisted()
        assert fresh.coord.group_records.get("g") == self.shell.coord.group_records.get("g")

    @rule()
    def converge(self) -> None:
        for _ in range(12):
            for m in list(self.classic.values()):
                m.act()
            for mm in list(self.modern.values()):
                mm.beat()
        cg, classic = self.shell.coord.consumer.group("g"), self.shell.coord.group("g")
        if cg is not None and any(m.uses_classic_protocol for m in cg.members.values()):
            event("converged with classic members in a consumer group")
        if classic is not None and classic.generation > 0:
            event("converged as a classic group")
        live = {m.c.member_id for m in self.classic.values()} | {mm.member_id for mm in self.modern.values()}
        members = set(cg.members) if cg is not None else set(classic.members) if classic is not None else set()
        if not live or members != live:
            return  # crashed members still count until their sessions expire
        if cg is not None:
            assert cg.state == ConsumerGroupState.STABLE, cg.state
            assert all(m.member_epoch == cg.target_epoch for m in cg.members.values())
            # a consumer group keeps a consumer-protocol member unless the policy forbids the downgrade
            assert classic is None
            assert any(not m.uses_classic_protocol for m in cg.members.values()) or self.policy in (
                "upgrade",
                "disabled",
            )
        else:
            assert not self.modern and classic is not None and str(classic.state) == "Stable"
        held = sorted(p for _name, ps in self._counted() for p in ps)
        assert held == list(range(self.partitions)), (held, self._counted())

    def teardown(self) -> None:
        if hasattr(self, "shell"):
            self.shell.advance(50000)
            self.converge()


MigrationMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "120")),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMigration = MigrationMachine.TestCase
