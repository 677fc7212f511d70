"""Deadlines in a heap with lazy deletion (design principle 4).

Each key (a member's session, a group's join or sync phase, the retention check) has one *due*
time in a dict and at most one *live* heap entry at or before it. Moving a deadline later -- what
every heartbeat does -- is a dict write: no heap push, no cancellation. When a live entry pops, the
key's current due time is re-read: if it moved later, one entry is pushed for it; if it was
cancelled, the entry is dropped. Moving a deadline earlier pushes a new live entry and orphans the
old one, which is recognised by its sequence number and dropped when it surfaces.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._due: dict[Hashable, int] = {}
        self._live: dict[Hashable, tuple[int, int]] = {}  # key -> (deadline, seq) of its live entry
        # Bumped by every push: a plain attribute, read after every heartbeat (the shells' wake-up
        # version), where a property's call cost ~0.05 us a read.
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
        """Cancel every deadline whose key satisfies ``predicate`` (a partition unloading: a scan,
        which is rare); returns how many were cancelled."""
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
        """The next key whose deadline has passed, removed; None when nothing is due.

        ``max_seq`` limits firing to entries pushed before the caller started, so that a handler
        re-arming a timer at ``now`` cannot spin one tick forever.
        """
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
