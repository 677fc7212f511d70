"""One wake-up for a sans-IO core's next deadline (design principle 4: timers are deadlines).

The group and transaction coordinators keep their deadlines themselves; their shells arm a single
``loop.call_at`` for the earliest one after every call into the core, and call ``tick`` when it
fires. A core that counts changes to its deadline heap (``deadline_version``) lets the shell skip
asking for the top of the heap on the hot path: nearly every heartbeat only moves a deadline later,
so the armed wake-up is still early enough.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable

# Deadlines fire outside any request: without a context of their own, the timer would run in the
# context of whichever request armed it and its log events would carry that request's client_id.
_TIMER_CONTEXT = contextvars.Context()


class Wakeup:
    def __init__(
        self,
        next_deadline: Callable[[], int | None],
        fire: Callable[[int], None],
        clock: Callable[[], int],
        *,
        version: Callable[[], int] | None = None,
    ) -> None:
        self._next_deadline = next_deadline
        self._fire_at = fire  # called with the clock's now when the deadline is reached
        self._clock = clock
        self._version = version
        self._armed_version = -1  # version() when the timer was last (re)armed
        self._timer: asyncio.TimerHandle | None = None
        self._at: int | None = None

    def arm(self) -> None:
        if self._version is not None:
            version = self._version()
            if version == self._armed_version:
                return
            self._armed_version = version
        deadline = self._next_deadline()
        if deadline == self._at:
            return
        self.cancel()
        self._at = deadline
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, (deadline - self._clock()) / 1000)
        self._timer = loop.call_at(loop.time() + delay, self._fired, context=_TIMER_CONTEXT)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._at = None

    def _fired(self) -> None:
        self._timer = None
        self._at = None
        self._armed_version = -1  # the tick popped deadlines: look at the heap again
        self._fire_at(self._clock())
