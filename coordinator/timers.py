"""Deadlines in a heap with lazy deletion (design principle 4).

Each key (a member's session, a group's join or sync phase, the retention check) has one *due*
time and at most one *live* heap entry at or before it, both kept in the key's ``Slot`` (one dict
entry per key). Moving a deadline later -- what every heartbeat does -- is one dict lookup and an
attribute write: no heap push, no cancellation, as Kafka's own coordinator does not re-schedule a
session on each heartbeat in its timing wheel but only re-checks it when it is due. When a live
entry pops, the key's current due time is re-read: if it moved later, one entry is pushed for it;
if it was cancelled, the entry is dropped. Moving a deadline earlier pushes a new live entry and
orphans the old one, which is recognised by its sequence number and dropped when it surfaces.

Issue 26: the previous form kept the due times and the live entries in two dicts, two lookups of a
tuple key per heartbeat (~9% of a classic heartbeat's daemon time at 1,000 members, py-spy).
tests/coordinator/test_timers.py checks this against that form, kept there as the model: the same
keys fire in the same order at the same times.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator

# A slot's ``live`` when it has no live heap entry: later than any deadline, so that ``set``'s one
# comparison (``live > deadline``: push) covers both cases.
_NO_ENTRY = 1 << 62


class Slot:
    """One key's due time (None: cancelled or fired) and its live heap entry (deadline, seq).

    A hot path may hold the slot ``set`` returned and move the deadline later itself, as
    ``set`` would, with ``if slot.due is not None and slot.live <= deadline: slot.due = deadline``
    (else ``set`` again): a slot whose due time is not None is the key's current one.
    """

    __slots__ = ("due", "key", "live", "live_seq")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.due: int | None = None
        self.live = _NO_ENTRY
        self.live_seq = 0  # seq starts at 1: 0 matches no heap entry


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Slot]] = []
        # key -> its slot, while it has a due time or a live heap entry
        self._slots: dict[Hashable, Slot] = {}
        self._n = 0  # keys with a due time
        # Bumped by every push: a plain attribute, read after every heartbeat (the shells' wake-up
        # version), where a property's call cost ~0.05 us a read.
        self.seq = 0

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key: Hashable) -> bool:
        slot = self._slots.get(key)
        return slot is not None and slot.due is not None

    def due_keys(self) -> Iterator[Hashable]:
        """The keys with a deadline."""
        return (key for key, slot in self._slots.items() if slot.due is not None)

    def get(self, key: Hashable) -> int | None:
        slot = self._slots.get(key)
        return None if slot is None else slot.due

    def set(self, key: Hashable, deadline: int) -> Slot:
        """Set ``key``'s deadline; returns its slot (see ``Slot``)."""
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = Slot(key)
        if slot.due is None:
            self._n += 1
        slot.due = deadline
        if slot.live > deadline:
            self._push(slot, deadline)
        return slot

    def cancel(self, key: Hashable) -> None:
        slot = self._slots.get(key)
        if slot is not None and slot.due is not None:
            self._cancel(slot)

    def _cancel(self, slot: Slot) -> None:
        slot.due = None
        self._n -= 1
        if slot.live_seq == 0:
            del self._slots[slot.key]
        # else: the slot stays until its live entry surfaces (_drop_dead_top), as a set() before
        # then may reuse that entry

    def cancel_where(self, predicate: Callable[[Hashable], bool]) -> int:
        """Cancel every deadline whose key satisfies ``predicate`` (a partition unloading: a scan,
        which is rare); returns how many were cancelled."""
        slots = [slot for key, slot in self._slots.items() if slot.due is not None and predicate(key)]
        for slot in slots:
            self._cancel(slot)
        return len(slots)

    def _push(self, slot: Slot, deadline: int) -> None:
        self.seq += 1
        slot.live, slot.live_seq = deadline, self.seq
        heapq.heappush(self._heap, (deadline, self.seq, slot))

    def _drop_dead_top(self) -> None:
        heap = self._heap
        while heap:
            _deadline, seq, slot = heap[0]
            live = slot.live_seq == seq
            if live and slot.due is not None:
                return
            heapq.heappop(heap)
            if live:  # the live entry of a cancelled key: the key is gone
                slot.live, slot.live_seq = _NO_ENTRY, 0
                del self._slots[slot.key]

    def next_deadline(self) -> int | None:
        self._drop_dead_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int, max_seq: int | None = None) -> Hashable | None:
        """The next key whose deadline has passed, removed; None when nothing is due.

        ``max_seq`` limits firing to entries pushed before the caller started, so that a handler
        re-arming a timer at ``now`` cannot spin one tick forever.
        """
        heap = self._heap
        while True:
            self._drop_dead_top()
            if not heap or heap[0][0] > now:
                return None
            _deadline, seq, slot = heap[0]
            if max_seq is not None and seq > max_seq:
                return None
            heapq.heappop(heap)
            slot.live, slot.live_seq = _NO_ENTRY, 0
            due = slot.due
            assert due is not None  # a live entry on top: _drop_dead_top kept it
            if due > now:
                self._push(slot, due)
                continue
            slot.due = None
            self._n -= 1
            del self._slots[slot.key]
            return slot.key
