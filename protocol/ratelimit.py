"""Rate-limited log events: one line per key per interval, and a count of the lines held back.

A refused-connection storm, a disk that fails every write or a client retrying a wrong password
would otherwise log thousands of identical lines a second (3,518 refused connections in one
second, 3,037 failed writes in 6 s, 117 lines for one wrong password in 6 s), burying everything
else and costing the loop more than the failures themselves.

Theory of operation: the first event of a key (the event name plus what the caller says makes it
the same event again: a peer host, a log path) is logged at once and opens a window of
``interval_s``. Events of that key inside the window are counted, not logged. When the window
ends with events held back, the last of them is logged with ``suppressed=<count of the others>``,
and that line opens the next window: a flood that goes on gives one line per interval, and one
that stops still has its count reported. The window's end is an event-loop timer when a loop runs
in the calling thread; without one (a thread, a test), the key's next line after the window carries
the count of all those held back. Either way every line stands for ``1 + suppressed`` events.
``flush_all()`` (at shutdown) logs every pending count.

Floor 1: ``protocol`` and ``storage`` both use it, and neither may import anything above.
Used from the event-loop thread only (the storage appender logs its failures there).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["LogLimiter", "flush_all"]

# Every limiter, for flush_all() at shutdown.
_limiters: weakref.WeakSet[LogLimiter] = weakref.WeakSet()


class _Window:
    __slots__ = ("ends", "held", "last", "logged", "timer")

    def __init__(self, ends: float) -> None:
        self.ends = ends
        self.logged = 1  # the line that opened it
        self.held = 0
        self.last: tuple[str, dict[str, Any]] = ("", {})
        self.timer: asyncio.TimerHandle | None = None


class LogLimiter:
    """Log through ``logger`` at most ``burst`` lines per (event, key) per ``interval_s`` (one by
    default; a few when each of a short series is worth seeing, as the closes of a handful of bad
    connections are, while a flood of them is still a few lines and a count)."""

    def __init__(
        self,
        logger: Any,
        interval_s: float = 10.0,
        *,
        burst: int = 1,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.burst = burst
        self.max_keys = max_keys
        self.clock = clock
        self._windows: dict[tuple[str, Hashable], _Window] = {}
        _limiters.add(self)

    def log(self, level: str, event: str, key: Hashable = None, **fields: Any) -> bool:
        """Log ``event`` at ``level`` unless its key logged within the interval; True if logged."""
        k = (event, key)
        w = self._windows.get(k)
        if w is None and len(self._windows) >= self.max_keys:
            # Many distinct keys at once (a storm from many hosts): they share one window.
            k = (event, "<other keys>")
            w = self._windows.get(k)
        now = self.clock()
        if w is not None and now < w.ends and w.logged < self.burst and not w.held:
            w.logged += 1
            self._emit(level, event, fields, 0)
            return True
        if w is not None and now < w.ends:
            w.held += 1
            w.last = (level, fields)
            if w.timer is None:
                w.timer = _call_at_end(w.ends - now, self._window_ended, k)
            return False
        held = 0
        if w is not None:
            held = w.held
            if w.timer is not None:
                w.timer.cancel()
        self._windows[k] = _Window(now + self.interval_s)
        self._emit(level, event, fields, held)
        return True

    def warning(self, event: str, key: Hashable = None, **fields: Any) -> bool:
        return self.log("warning", event, key, **fields)

    def error(self, event: str, key: Hashable = None, **fields: Any) -> bool:
        return self.log("error", event, key, **fields)

    def flush(self) -> None:
        """Log the count of every window that held events back (shutdown), and forget them all."""
        windows, self._windows = self._windows, {}
        for (event, _key), w in windows.items():
            if w.timer is not None:
                w.timer.cancel()
            if w.held:
                level, fields = w.last
                self._emit(level, event, fields, w.held - 1)

    def _window_ended(self, k: tuple[str, Hashable]) -> None:
        w = self._windows.pop(k, None)
        if w is None or not w.held:
            return
        level, fields = w.last
        # The closing line opens the next window: a flood that goes on logs once per interval.
        self._windows[k] = _Window(self.clock() + self.interval_s)
        self._emit(level, k[0], fields, w.held - 1)

    def _emit(self, level: str, event: str, fields: dict[str, Any], held: int) -> None:
        if held:
            fields = {**fields, "suppressed": held, "suppressed_window_s": self.interval_s}
        getattr(self.logger, level)(event, **fields)


def _call_at_end(delay: float, fn: Callable[[tuple[str, Hashable]], None], k: tuple[str, Hashable]) -> Any:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None  # no loop in this thread: the count goes out with the key's next line
    return loop.call_later(delay, fn, k)


def flush_all() -> None:
    """Log every pending count of every limiter (at shutdown, so no count is lost)."""
    for limiter in list(_limiters):
        limiter.flush()
