"""KIP-848 consumer-group members heartbeating through the coordinator while the group's
``__consumer_offsets`` partition is resigned and elected again, with writes in flight, failing or not.

After every step: a resignation answers every heartbeat waiting for its write (NOT_COORDINATOR) and
none is answered twice; with no write in flight, the group in memory is the fold of the log (records
are applied when written and rolled back when their write fails, as Kafka's runtime does); and a
partition elected again comes back exactly as it was at the resignation when nothing was being
written then (``GroupMetadataManager.onLoaded``: the persisted group, sessions re-armed).
"""

from __future__ import annotations

import os
from typing import Any

from consumer_harness import image, topic_id
from groupd.coordinator import CoordinatorConfig, partition_for
from groupd.coordinator.consumer import ConsumerGroups
from groupd.coordinator.consumer.records import CONSUMER_KEY_TYPES
from harness import Ctx, Shell
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

GROUP = "cg"
P = partition_for(GROUP)
T = topic_id("t")
IMAGE = image(1, t=6)
NAMES = ["m1", "m2", "m3"]


class ConsumerMoveMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        config = CoordinatorConfig(offsets_retention_check_interval_ms=10**12)
        self.shell = Shell(config=config, auto_append=False, topics_image=lambda: IMAGE)
        self.epoch = dict.fromkeys(NAMES, 0)
        self.owned: dict[str, list[int]] = {n: [] for n in NAMES}
        self.pending: dict[str, Ctx] = {}
        self.before: Any = None
        self.writes_at_unload = 0

    # -- helpers ---------------------------------------------------------------------------------

    def persisted(self) -> Any:
        g = self.shell.coord.consumer.group(GROUP)
        return None if g is None else g.persisted()

    def collect(self) -> None:
        for name, ctx in list(self.pending.items()):
            resp = self.shell.answer(ctx)
            if resp is None:
                continue
            del self.pending[name]
            code = resp["error_code"]
            event(f"heartbeat answered {code}")
            if code == 0 and resp["member_epoch"] >= 0:
                self.epoch[name] = resp["member_epoch"]
                if resp["assignment"] is not None:
                    self.owned[name] = sorted(
                        p for tp in resp["assignment"]["topic_partitions"] for p in tp["partitions"]
                    )
            elif code == 0 or code in (25, 110):  # left, unknown or fenced: start over
                self.epoch[name], self.owned[name] = 0, []

    # -- members ---------------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), leave=st.booleans())
    def heartbeat(self, name: str, leave: bool) -> None:
        if name in self.pending:
            return
        epoch = self.epoch[name]
        full = epoch == 0
        req = {
            "group_id": GROUP,
            "member_id": name,
            "member_epoch": -1 if leave and epoch > 0 else epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 5000 if full else -1,
            "subscribed_topic_names": ["t"] if full else None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [] if full else [{"topic_id": T, "partitions": self.owned[name]}],
        }
        self.pending[name] = self.shell.send("ConsumerGroupHeartbeat", 1, req, client_id=name)
        self.collect()

    @rule(fail=st.booleans(), count=st.integers(1, 3))
    def complete_appends(self, fail: bool, count: int) -> None:
        if self.shell.queued:
            self.shell.flush(error=56 if fail else None, count=count)
            self.collect()

    @rule(ms=st.sampled_from([1000, 5001, 46000]))
    def advance(self, ms: int) -> None:
        self.shell.advance(ms)
        self.collect()

    # -- the partition moving --------------------------------------------------------------------

    @rule()
    def resign(self) -> None:
        state = self.shell.coord.partition_state(P)
        if state == "unloaded":
            return
        if state == "active":
            self.before, self.writes_at_unload = self.persisted(), len(self.shell.queued)
        self.shell.unload(P)
        missing = [c for c in self.shell.sent if c not in self.shell.answers]
        assert not missing, f"not answered after the resignation: {missing}"
        assert not list(self.shell.coord.consumer.deadlines.due_keys())
        self.collect()

    @rule()
    def elect(self) -> None:
        if self.shell.coord.partition_state(P) == "active":
            self.resign()
        self.shell.begin_load(P)
        self.shell.finish_load(P)
        self.collect()
        if self.writes_at_unload == 0:
            assert self.persisted() == self.before
            event("reload == before the unload")
        g = self.shell.coord.consumer.group(GROUP)
        members = set() if g is None else set(g.members)
        assert {k[1] for k in self.shell.coord.consumer.deadlines.due_keys() if k[2] == "session"} == members

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def memory_is_the_fold_of_the_log(self) -> None:
        if self.shell.queued or self.shell.coord.partition_state(P) != "active":
            return
        fold = ConsumerGroups()
        for _p, (key, value) in self.shell.log:
            if isinstance(key, CONSUMER_KEY_TYPES):
                fold.replay((key, value))  # type: ignore[arg-type]
        g = fold.get(GROUP)
        assert (None if g is None else g.persisted()) == self.persisted()


ConsumerMoveMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "100")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestConsumerMoveMachine = ConsumerMoveMachine.TestCase
