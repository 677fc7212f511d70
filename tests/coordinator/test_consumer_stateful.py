"""KIP-848 reconciliation under random joins, heartbeats, leaves, crashes, clock jumps and partition
growth (hypothesis stateful, fake clock). After every step: no partition is held by two members (the
group's partition-epoch map refuses it on replay, as Kafka's addPartitionEpochs does), what every
member's client believes it owns is what the coordinator has it owning or revoking, and the records
replayed into a fresh core give the same state. At the end, and whenever asked, every member
converges to the target assignment and the target covers every partition once."""

from __future__ import annotations

import os

from consumer_harness import GROUP, Client, Shell, image, topic_id
from groupd.coordinator.consumer import ConsumerGroupState, MemberState
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

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
