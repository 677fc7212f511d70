"""Share groups (KIP-932) under random joins, heartbeats, subscription changes, leaves, crashes
(members that stop heartbeating), clock jumps, failed share-state initializations and coordinator
restarts and topics growing (hypothesis stateful, fake clock), against a simple model of who is a member.

After every step: the group's members are the model's; a member's epoch is never above the group
epoch nor the target epoch above it; a member holds only partitions of topics it subscribes to, and
its target's (``ShareGroupAssignmentBuilder``); only initialized share partitions are assigned; the
records replayed into a fresh coordinator give the same persisted state (the fold). When every member
has heartbeated twice in a row with nothing changing (``settle``), every member holds its target and
the targets together cover every initialized partition of the subscribed topics (``SimpleAssignor``
assigns them all, sharing them when members outnumber partitions)."""

from __future__ import annotations

import os
import uuid
from typing import Any

from groupd.coordinator import GroupCoordinator
from groupd.coordinator import errors as err
from groupd.coordinator.consumer import TopicsImage
from harness import Shell, quiet_logger, replay_batches
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

G = "sg"
NAMES = ["a", "b", "c", "d", "e"]
TOPIC_SETS = [("t",), ("u",), ("t", "u")]


def tid(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


class ShareGroupMachine(RuleBasedStateMachine):
    @initialize(t=st.integers(1, 4), u=st.integers(1, 3))
    def setup(self, t: int, u: int) -> None:
        self.image = TopicsImage(1, {"t": (tid("t"), t), "u": (tid("u"), u)})
        self.shell = Shell(topics_image=lambda: self.image)
        self.epochs: dict[str, int] = {}  # the model: member -> the epoch its client last got
        self.topics: dict[str, tuple[str, ...]] = {}
        self.held: dict[str, dict[uuid.UUID, list[int]]] = {}
        self.n = 0
        self.ids: dict[str, str] = {}

    # -- the client ----------------------------------------------------------------------------
    def _send(self, name: str, epoch: int, topics: tuple[str, ...] | None) -> dict[str, Any]:
        req = {
            "group_id": G,
            "member_id": self.ids[name],
            "member_epoch": epoch,
            "rack_id": None,
            "subscribed_topic_names": list(topics) if topics is not None else None,
        }
        ans = self.shell.answer(self.shell.send("ShareGroupHeartbeat", 1, req))
        assert ans is not None
        return ans

    def _beat(self, name: str, topics: tuple[str, ...] | None = None) -> dict[str, Any]:
        ans = self._send(name, self.epochs[name], topics)
        if ans["error_code"] in (err.UNKNOWN_MEMBER_ID, err.FENCED_MEMBER_EPOCH):
            # fenced (its session expired): it rejoins with epoch 0 and its full subscription
            # (as the share consumer does)
            assert self.epochs[name] >= 0
            self.epochs[name] = 0
            self.held[name] = {}
            ans = self._send(name, 0, topics or self.topics[name])
        assert ans["error_code"] == 0, ans
        self.epochs[name] = ans["member_epoch"]
        if topics is not None:
            self.topics[name] = topics
        if ans["assignment"] is not None:
            self.held[name] = {tp["topic_id"]: tp["partitions"] for tp in ans["assignment"]["topic_partitions"]}
        return ans

    # -- rules ---------------------------------------------------------------------------------
    @rule(name=st.sampled_from(NAMES), topics=st.sampled_from(TOPIC_SETS))
    def join(self, name: str, topics: tuple[str, ...]) -> None:
        if name in self.epochs:
            return
        self.n += 1
        self.ids[name] = f"{name}-{self.n}"
        self.epochs[name] = 0
        self.held[name] = {}
        self._beat(name, topics)

    @rule(name=st.sampled_from(NAMES))
    def heartbeat(self, name: str) -> None:
        if name in self.epochs:
            self._beat(name)

    @rule(name=st.sampled_from(NAMES), topics=st.sampled_from(TOPIC_SETS))
    def resubscribe(self, name: str, topics: tuple[str, ...]) -> None:
        if name in self.epochs:
            self._beat(name, topics)

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        if name not in self.epochs:
            return
        ans = self._send(name, -1, None)
        if ans["error_code"] == 0:
            assert ans["member_epoch"] == -1
        else:  # its session had expired already
            assert ans["error_code"] == err.UNKNOWN_MEMBER_ID
        del self.epochs[name], self.topics[name], self.held[name]

    @rule(name=st.sampled_from(NAMES))
    def crash(self, name: str) -> None:
        """The client dies: the coordinator forgets it after the session timeout."""
        if name in self.epochs:
            del self.epochs[name], self.topics[name], self.held[name]
            self.crashed = getattr(self, "crashed", set()) | {self.ids[name]}

    @rule(ms=st.sampled_from([1000, 20000, 46000]))
    def advance(self, ms: int) -> None:
        """Time passes; the live members heartbeat as they should (every 5 s) on the way."""
        left = ms
        while left > 0:
            step = min(left, 5000)
            self.shell.advance(step)
            left -= step
            for name in list(self.epochs):
                self._beat(name)
        g = self.shell.coord.share.group(G)
        if ms >= 46000 and g is not None:
            assert not (set(g.members) & getattr(self, "crashed", set()))

    @rule(topic=st.sampled_from(["t", "u"]))
    def grow(self, topic: str) -> None:
        """CreatePartitions: the group's metadata hash changes, the new share partitions are
        initialized and assigned."""
        topics = dict(self.image.topics)
        tid_, n = topics[topic]
        if n < 6:
            topics[topic] = (tid_, n + 1)
            self.image = TopicsImage(self.image.version + 1, topics)

    @rule()
    def failing_state_store(self) -> None:
        """One heartbeat whose share-partition initialization fails (the store answers an error):
        the partitions leave initializing and are asked for again later."""
        if not self.epochs:
            return
        state = self.shell.coord.share_requests.state
        state.fail_with = err.COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]
        try:
            self._beat(sorted(self.epochs)[0])
        finally:
            state.fail_with = None  # type: ignore[attr-defined]

    @rule(name=st.sampled_from(NAMES), topics=st.sampled_from([None, *TOPIC_SETS]))
    def failed_write(self, name: str, topics: tuple[str, ...] | None) -> None:
        """A heartbeat whose records fail to be written: answered with the error, and the group is
        as it was before (the runtime reverts to the last committed state; the fold over the log,
        checked after every step, has not seen them)."""
        if name not in self.epochs:
            return
        req = {
            "group_id": G,
            "member_id": self.ids[name],
            "member_epoch": self.epochs[name],
            "rack_id": None,
            "subscribed_topic_names": list(topics) if topics is not None else None,
        }
        sh = self.shell
        sh.auto_append = False
        try:
            ctx = sh.send("ShareGroupHeartbeat", 1, req)
            sh.flush(error=err.NOT_COORDINATOR)
        finally:
            sh.auto_append = True
            sh.flush()
        ans = sh.answer(ctx)
        assert ans is not None
        if ans["error_code"] == 0:  # nothing to write: answered at once
            self.epochs[name] = ans["member_epoch"]
            if topics is not None:
                self.topics[name] = topics
            if ans["assignment"] is not None:
                self.held[name] = {tp["topic_id"]: tp["partitions"] for tp in ans["assignment"]["topic_partitions"]}
        else:  # the write failed (or it was fenced already: its next heartbeat rejoins)
            assert ans["error_code"] in (err.NOT_COORDINATOR, err.UNKNOWN_MEMBER_ID, err.FENCED_MEMBER_EPOCH), ans

    @rule()
    def restart(self) -> None:
        """The coordinator restarts from its log: members carry on with the epochs they have."""
        old = self.shell.coord
        fresh = self._reloaded()
        fresh.share_requests.state = old.share_requests.state
        self.shell.coord = fresh

    @rule()
    def settle(self) -> None:
        for _ in range(3):
            for name in sorted(self.epochs):
                self._beat(name)
        g = self.shell.coord.share.group(G)
        if g is None or not g.members or not self.epochs:
            return  # with only crashed members nobody heartbeats: nothing is assigned anew (as Kafka)
        for name in self.epochs:
            m = g.members[self.ids[name]]
            assert m.member_epoch == g.target_epoch == g.group_epoch
            assert dict(m.assigned) == {t: ps for t, ps in g.target.get(m.member_id, {}).items() if ps}
        subscribed = {n for m in g.members.values() for n in m.subscribed_topic_names}
        covered: dict[uuid.UUID, set[int]] = {}
        for parts in g.target.values():
            for t, ps in parts.items():
                covered.setdefault(t, set()).update(ps)
        init = g.initialized_partitions()
        want = {tid(n): set(init.get(tid(n), ())) for n in subscribed if init.get(tid(n))}
        assert covered == want

    # -- invariants ----------------------------------------------------------------------------
    def _reloaded(self) -> GroupCoordinator:
        img = self.image
        fresh = GroupCoordinator(self.shell.config, logger=quiet_logger(), topics_image=lambda: img)
        parts = list(fresh.ownership.local_partitions())
        for p in parts:
            fresh.begin_load(p)
        replay_batches(fresh, self.shell.batches)
        for p in parts:
            fresh.end_load(p, self.shell.now)
        return fresh

    @invariant()
    def consistent(self) -> None:
        if not hasattr(self, "shell"):
            return
        g = self.shell.coord.share.group(G)
        live = {self.ids[n] for n in self.epochs}
        members = set(g.members) if g is not None else set()
        assert live <= members and members - live <= getattr(self, "crashed", set())
        if g is None:
            return
        assert g.target_epoch <= g.group_epoch
        counts: dict[str, int] = {}  # the derived subscription counts are the members' subscriptions
        for m in g.members.values():
            for n in set(m.subscribed_topic_names):
                counts[n] = counts.get(n, 0) + 1
        assert g.subscribed_counts == counts
        init = g.initialized_partitions()
        for m in g.members.values():
            assert 0 < m.member_epoch <= g.group_epoch
            ids = {tid(n) for n in m.subscribed_topic_names}
            for t, ps in m.assigned.items():
                assert t in ids and ps <= init.get(t, frozenset())
                assert ps <= g.target.get(m.member_id, {}).get(t, frozenset()) or m.member_epoch < g.target_epoch
        for name in self.epochs:  # what each client believes it holds is what the coordinator has
            m = g.members[self.ids[name]]
            assert {t: sorted(ps) for t, ps in m.assigned.items()} == {t: ps for t, ps in self.held[name].items() if ps}
        before = self.shell.coord.share.groups.groups
        after = self._reloaded().share.groups.groups
        assert set(before) == set(after)
        for gid, a in after.items():
            b = before[gid]
            assert (a.group_epoch, a.target_epoch, a.members, a.target) == (
                b.group_epoch,
                b.target_epoch,
                b.members,
                b.target,
            )
            assert a.initialized_partitions() == b.initialized_partitions()


ShareGroupMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "100")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestShareGroupMachine = ShareGroupMachine.TestCase
