"""Random appends / acquisitions by three members / acknowledgements of every type / lock expiries /
RENEW / members leaving / restarts from the persisted records, on one ``SharePartition``, checked
after every step against a plain per-offset model of KIP-932's record states
(``SharePartition`` / ``InFlightState`` / ``RecordState``):

- a record is held by at most one member, and only an AVAILABLE record is acquired, each time with
  its delivery count one higher;
- an ACCEPTed or REJECTed record is never handed out again, nor one archived at the delivery limit;
- an acknowledgement is applied exactly when every offset it names is held by its member
  (INVALID_RECORD_STATE otherwise, and nothing of it is applied);
- the start offset is the first offset still deliverable;
- a restart from the records written so far (their bytes replayed into a fresh fold) keeps every
  acknowledged record done and hands out again everything else, with the delivery count last written.
"""

from __future__ import annotations

import os
import uuid

from groupd.coordinator.share_partition import (
    ACCEPT,
    ACQUIRED,
    AVAILABLE,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    BatchInfo,
    SharePartition,
    SharePartitionConfig,
    SharePartitionKey,
    ShareStateStore,
    decode_record,
    encode_record,
)
from groupd.coordinator.share_partition.partition import AckError
from groupd.protocol.errors import ErrorCode
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

MEMBERS = ["a", "b", "c"]
LOCK_MS = 1000
KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)
DONE = "done"


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(limit=st.integers(2, 4), max_in_flight=st.integers(4, 12))
    def start(self, limit: int, max_in_flight: int) -> None:
        self.cfg = SharePartitionConfig(delivery_count_limit=limit, max_in_flight=max_in_flight)
        self.sp = SharePartition(self.cfg, 0)
        self.now = 0
        self.batches: list[tuple[int, int]] = []  # the log: (base, last)
        self.log_end = 0
        # the model, per offset: state (AVAILABLE, member name, DONE), count, lock deadline
        self.state: dict[int, str | int] = {}
        self.count: dict[int, int] = {}
        self.deadline: dict[int, int] = {}
        self.written: list[tuple[bytes, bytes | None]] = []  # the __share_group_state records
        self.store = ShareStateStore(snapshot_every=4)
        self.pcount: dict[int, int] = {}  # delivery count as last written

    # --- helpers ------------------------------------------------------------------------------------
    def _persist(self, batches: list) -> None:
        rec = self.store.write(KEY, self.sp.start_offset, batches, self.now)
        self.store.replay(rec)
        self.written.append(encode_record(rec))
        for b in batches:
            for off in range(b.first_offset, b.last_offset + 1):
                self.pcount[off] = b.delivery_count

    def _release(self, off: int) -> None:
        self.state[off] = DONE if self.count[off] >= self.cfg.delivery_count_limit else AVAILABLE
        self.deadline.pop(off, None)

    # --- rules --------------------------------------------------------------------------------------
    @rule(n=st.integers(1, 4))
    def append(self, n: int) -> None:
        self.batches.append((self.log_end, self.log_end + n - 1))
        for off in range(self.log_end, self.log_end + n):
            self.state[off] = AVAILABLE
            self.count[off] = 0
        self.log_end += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 6))
    def acquire(self, member: str, max_records: int) -> None:
        offset = self.sp.next_fetch_offset()
        read = [BatchInfo(b, last) for b, last in self.batches if last >= offset]
        got = self.sp.acquire(member, self.now, LOCK_MS, read, max_records, offset)
        total = 0
        for r in got:
            for off in range(r.first_offset, r.last_offset + 1):
                assert self.state[off] == AVAILABLE, (off, self.state[off])
                self.count[off] += 1
                assert r.delivery_count == self.count[off]
                assert self.count[off] <= self.cfg.delivery_count_limit
                event(f"delivery {self.count[off]} of {self.cfg.delivery_count_limit}")
                self.state[off] = member
                self.deadline[off] = self.now + LOCK_MS
                total += 1
        # liveness: something deliverable and the window has room -> something is handed out
        deliverable = [o for o, s in self.state.items() if s == AVAILABLE and o >= self.sp.start_offset]
        in_window = [o for o in deliverable if o < self.sp.end_offset]
        if not got and in_window:
            raise AssertionError(f"nothing acquired though {in_window} are available")

    @rule(
        member=st.sampled_from(MEMBERS),
        first=st.integers(0, 40),
        span=st.integers(0, 4),
        kind=st.sampled_from([ACCEPT, RELEASE, REJECT, RENEW, "mixed"]),
        data=st.data(),
    )
    def acknowledge(self, member: str, first: int, span: int, kind: object, data: st.DataObject) -> None:
        held = sorted(o for o, s in self.state.items() if s == member)
        if held and data.draw(st.booleans()):
            # mostly what the member holds (a random range is mostly refused)
            first = data.draw(st.sampled_from(held))
            span = data.draw(st.integers(0, 2))
        last = first + span
        if last >= self.sp.end_offset or first < 0:
            return  # past the window: INVALID_REQUEST, covered by the unit tests
        if kind == "mixed":
            types = data.draw(
                st.lists(st.sampled_from([ACCEPT, RELEASE, REJECT]), min_size=span + 1, max_size=span + 1)
            )
        else:
            types = [kind]
        names = range(max(first, self.sp.start_offset), last + 1)
        ok = all(self.state.get(o) == member for o in names)
        try:
            batches = self.sp.acknowledge(member, [AckBatch(first, last, types)], self.now, LOCK_MS)
        except AckError as e:
            assert not ok, (member, first, last, {o: self.state.get(o) for o in names})
            assert e.code == ErrorCode.INVALID_RECORD_STATE
            return
        assert ok
        event(f"acknowledged {kind}")
        for o in names:
            t = types[0] if len(types) == 1 else types[o - first]
            if t in (ACCEPT, REJECT):
                self.state[o] = DONE
                self.deadline.pop(o, None)
            elif t == RELEASE:
                self._release(o)
            else:
                self.deadline[o] = self.now + LOCK_MS
        self._persist(batches)

    @rule(dt=st.integers(1, 1500))
    def time_passes(self, dt: int) -> None:
        self.now += dt
        due = self.sp.next_deadline()
        if due is None or due > self.now:
            return
        batches = self.sp.expire_locks(self.now)
        for o, d in list(self.deadline.items()):
            if d <= self.now and isinstance(self.state[o], str) and self.state[o] in MEMBERS:
                self._release(o)
        self._persist(batches)

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        batches = self.sp.release_member(member)
        for o, s in list(self.state.items()):
            if s == member:
                self._release(o)
        self._persist(batches)

    @rule()
    def restart(self) -> None:
        """A crash: only what was written survives, read back from its bytes."""
        store = ShareStateStore(snapshot_every=4)
        for k, v in self.written:
            store.replay(decode_record(k, v))
        persisted = store.get(KEY)
        start = persisted.start_offset if persisted is not None else 0
        self.sp = SharePartition(self.cfg, start, persisted.batches() if persisted is not None else [])
        self.store = store
        for o, s in self.state.items():
            if s in MEMBERS:
                self.state[o] = AVAILABLE
                self.count[o] = self.pcount.get(o, 0)
        self.deadline.clear()

    # --- invariants ---------------------------------------------------------------------------------
    @invariant()
    def agrees_with_the_model(self) -> None:
        sp = getattr(self, "sp", None)
        if sp is None:
            return
        live = [o for o in sorted(self.state) if self.state[o] != DONE]
        expected_start = live[0] if live else self.log_end
        # the start is the first deliverable offset, or the window's end when all is done
        assert sp.start_offset == min(expected_start, sp.end_offset), (sp.start_offset, expected_start)
        for o in range(sp.start_offset, sp.end_offset):
            got = sp.record(o)
            assert got is not None
            state, count, holder = got
            want = self.state[o]
            if want == DONE:
                assert state not in (AVAILABLE, ACQUIRED), (o, got)
            elif want == AVAILABLE:
                assert state == AVAILABLE and count == self.count[o], (o, got, self.count[o])
            else:
                assert state == ACQUIRED and holder == want and count == self.count[o], (o, got, want)
        for o in range(sp.end_offset, self.log_end):
            assert (self.state[o] == AVAILABLE and self.count[o] == 0) or self.state[o] != AVAILABLE, o


SharePartitionMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SHARE_STATEFUL_EXAMPLES", "400")),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSharePartitionStateful = SharePartitionMachine.TestCase
