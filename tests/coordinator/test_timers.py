"""coordinator/timers.py's Deadlines against the form it replaced (two dicts, kept here as the model,
issue 26): under random sets (later, earlier, again after a cancel), cancels, scans, wake-ups and
ticks, and heartbeats that move a deadline later through a held ``Slot`` as the classic short path
does, both fire the same keys in the same order at the same times, report the same next deadline
and push the same number of heap entries (the shells' wake-up version)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable

from groupd.coordinator.timers import Deadlines, Slot
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule


class ModelDeadlines:
    """coordinator/timers.py before issue 26's change: due times and live entries in two dicts."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._due: dict[Hashable, int] = {}
        self._live: dict[Hashable, tuple[int, int]] = {}
        self.seq = 0

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._due

    def get(self, key: Hashable) -> int | None:
        return self._due.get(key)

    def set(self, key: Hashable, deadline: int) -> None:
        self._due[key] = deadline
        live = self._live.get(key)
        if live is None or live[0] > deadline:
            self._push(key, deadline)

    def cancel(self, key: Hashable) -> None:
        self._due.pop(key, None)

    def cancel_where(self, predicate: Callable[[Hashable], bool]) -> int:
        keys = [key for key in self._due if predicate(key)]
        for key in keys:
            del self._due[key]
        return len(keys)

    def _push(self, key: Hashable, deadline: int) -> None:
        self.seq += 1
        self._live[key] = (deadline, self.seq)
        heapq.heappush(self._heap, (deadline, self.seq, key))

    def _drop_dead_top(self) -> None:
        heap = self._heap
        while heap:
            _deadline, seq, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq and key in self._due:
                return
            heapq.heappop(heap)
            if live is not None and live[1] == seq:
                del self._live[key]

    def next_deadline(self) -> int | None:
        self._drop_dead_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int, max_seq: int | None = None) -> Hashable | None:
        heap = self._heap
        while True:
            self._drop_dead_top()
            if not heap or heap[0][0] > now:
                return None
            _deadline, seq, key = heap[0]
            if max_seq is not None and seq > max_seq:
                return None
            heapq.heappop(heap)
            del self._live[key]
            due = self._due[key]
            if due > now:
                self._push(key, due)
                continue
            del self._due[key]
            return key


KEYS = [("hb", "g", m) for m in "abcde"] + [("join", "g"), ("sync", "g"), ("hb", "h", "a")]
keys = st.sampled_from(KEYS)
steps = st.integers(-50, 200)  # a deadline relative to now (a clock moving back: below now)


class TimersMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.new = Deadlines()
        self.model = ModelDeadlines()
        self.now = 0
        self.held: dict[Hashable, Slot] = {}  # slots a short path holds (Member.session)

    @rule(key=keys, delta=steps)
    def set(self, key: Hashable, delta: int) -> None:
        self.held[key] = self.new.set(key, self.now + delta)
        self.model.set(key, self.now + delta)

    @rule(key=keys, delta=steps)
    def extend_through_slot(self, key: Hashable, delta: int) -> None:
        # the classic heartbeat's short path (ClassicGroupManager.heartbeat_code)
        deadline = self.now + delta
        slot = self.held.get(key)
        if slot is not None and slot.due is not None and slot.live <= deadline:
            slot.due = deadline
        else:
            self.held[key] = self.new.set(key, deadline)
        self.model.set(key, deadline)

    @rule(key=keys)
    def cancel(self, key: Hashable) -> None:
        self.new.cancel(key)
        self.model.cancel(key)

    @rule(group=st.sampled_from(["g", "h"]))
    def cancel_where(self, group: str) -> None:
        def pred(k: Hashable) -> bool:
            return isinstance(k, tuple) and k[1] == group

        assert self.new.cancel_where(pred) == self.model.cancel_where(pred)

    @rule(dt=st.integers(0, 120))
    def advance(self, dt: int) -> None:
        self.now += dt

    @rule(rearm=st.booleans(), delta=st.integers(0, 30))
    def tick(self, rearm: bool, delta: int) -> None:
        # GroupCoordinator.tick: every key due before it started, some re-armed while firing
        horizon_new, horizon_model = self.new.seq, self.model.seq
        assert horizon_new == horizon_model
        while True:
            a = self.new.pop_due(self.now, horizon_new)
            b = self.model.pop_due(self.now, horizon_model)
            assert a == b
            if a is None:
                break
            if rearm and a[0] == "join":
                self.held[a] = self.new.set(a, self.now + delta)
                self.model.set(a, self.now + delta)

    @precondition(lambda self: len(self.model) > 0)
    @rule()
    def pop_without_horizon(self) -> None:
        assert self.new.pop_due(self.now) == self.model.pop_due(self.now)

    @invariant()
    def agree(self) -> None:
        assert self.new.next_deadline() == self.model.next_deadline()
        assert len(self.new) == len(self.model)
        assert self.new.seq == self.model.seq
        assert sorted(map(str, self.new.due_keys())) == sorted(map(str, self.model._due))
        for key in KEYS:
            assert (key in self.new) == (key in self.model)
            assert self.new.get(key) == self.model.get(key)


TimersMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
TestTimers = TimersMachine.TestCase


def test_a_held_slot_after_its_key_fired_is_not_current() -> None:
    d = Deadlines()
    slot = d.set(("hb", "g", "a"), 10)
    assert d.pop_due(10) == ("hb", "g", "a")
    assert slot.due is None  # a short path holding it goes back to set()
    again = d.set(("hb", "g", "a"), 30)
    assert again is not slot and again.due == 30 and d.next_deadline() == 30
