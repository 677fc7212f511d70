"""Group commit: many concurrent `await append(...)` calls, one write (and fsync) per partition.

Theory of operation
-------------------
`append()` queues its item on the partition and returns a future. The first append of a loop
iteration schedules a drain with `call_soon`, so everything queued during that iteration goes out
together. Per partition at most one write is in flight; whatever queues up meanwhile forms the
next write, which starts as soon as the previous one is done (so under load the batches grow
by themselves, the classic group commit).

Each write is one `PartitionLog.append_items` call in the executor: it plans (offsets, bytes,
index entries), writes, runs the fsync if the policy wants one, and only then makes the data
visible, all under the log's I/O lock, so readers never see a write that could still be rolled
back. Under ``always`` every partition gets its own executor job so that their fsyncs overlap and
the loop never waits on a disk flush. Under the other policies a write only reaches the page cache
(microseconds, less than the thread hop costs): the writes of all partitions drained together run
on the loop itself (``inline``; ``inline=False`` keeps them in one executor job).

fsync policy:
* ``always``       the fsync runs inside the same executor job, after the write and before any
                   caller of that write is released; if it fails the write is rolled back too.
* ``interval:<ms>`` callers are released after the write; a partition is fsynced at most once per
                   interval (immediately if the last fsync is older than that, else by a timer).
* ``never``        no fsync except at `close()`.

An OSError fails exactly the callers of that write with StorageError (their data is truncated
away and never became visible) and the next write proceeds as usual. A caller whose own item is
invalid (bad CRC, too large, empty) gets that item's exception; the rest of the write goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from functools import partial
from typing import Protocol

import structlog
from groupd.protocol.frozen import frozen_record
from groupd.protocol.ratelimit import LogLimiter

from . import records as rec
from .errors import StorageError
from .log import PartitionLog

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

log = structlog.get_logger("groupd.storage")
limited_log = LogLimiter(log)

__all__ = ["AppendObserver", "Appender", "FsyncPolicy"]


class AppendObserver(Protocol):
    """Timings of disk writes and fsyncs (metrics). Called on the executor thread that did the
    work, right after it, so it must be thread-safe and quick."""

    def write_done(self, plog: PartitionLog, seconds: float, items: int, ok: bool) -> None:
        """One ``append_items`` call: ``items`` callers' records or batches in one write (under
        ``always`` the time includes the fsync, which is also reported on its own)."""

    def fsync_done(self, plog: PartitionLog, seconds: float, ok: bool) -> None: ...


@frozen_record
class FsyncPolicy:
    mode: str  # "always", "interval" or "never"
    interval_ms: int = 0

    def __init__(self, mode: str, interval_ms: int = 0) -> None:
        _set(self, "mode", mode)
        _set(self, "interval_ms", interval_ms)

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        """Parse ``always``, ``never`` or ``interval:<ms>`` (as given to ``--fsync``)."""
        t = text.strip().lower()
        if t in ("always", "never"):
            return cls(t)
        if t.startswith("interval:"):
            try:
                ms = int(t.split(":", 1)[1])
            except ValueError:
                raise ValueError(f"bad fsync interval in {text!r}") from None
            if ms < 0:
                raise ValueError(f"fsync interval must be >= 0 in {text!r}")
            return cls("interval", ms)
        raise ValueError(f"fsync policy must be always, never or interval:<ms>, not {text!r}")

    def __str__(self) -> str:
        return f"interval:{self.interval_ms}" if self.mode == "interval" else self.mode


class _PartitionState:
    __slots__ = ("flush_handle", "flushing", "last_fsync", "pending", "writing")

    def __init__(self) -> None:
        # (item, log_append_time_ms, future)
        self.pending: list[tuple[Sequence[rec.RecordInput] | bytes, int | None, asyncio.Future]] = []
        self.writing = False
        self.flushing = False
        self.flush_handle: asyncio.TimerHandle | None = None
        self.last_fsync = float("-inf")


class Appender:
    def __init__(
        self,
        policy: FsyncPolicy | str = "interval:1000",
        *,
        executor: Executor | None = None,
        fsync: Callable[[PartitionLog], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        inline: bool | None = None,
    ) -> None:
        self.policy = FsyncPolicy.parse(policy) if isinstance(policy, str) else policy
        # Without an fsync before the answer, writes run on the loop (see _drain); None: inline
        # unless the policy is ``always``, whose fsyncs must never stall the loop.
        self.inline = self.policy.mode != "always" if inline is None else inline
        self._executor = executor
        self._fsync = fsync if fsync is not None else PartitionLog.flush
        self._clock = clock
        self._states: dict[PartitionLog, _PartitionState] = {}
        # Partitions with pending items and no write in flight, for the next drain.
        self._ready: dict[PartitionLog, _PartitionState] = {}
        self._drain_scheduled = False
        self._tasks: set[asyncio.Task] = set()
        self._closed = False
        self.writes = 0  # disk writes issued, for tests and metrics
        self.fsyncs = 0
        self._listeners: list[Callable[[PartitionLog, int], None]] = []
        self.observer: AppendObserver | None = None

    def add_listener(self, fn: Callable[[PartitionLog, int], None]) -> None:
        """Call fn(log, log_end_offset) on the event loop after each write that added data (and
        after its callers were released), e.g. to wake Fetch requests waiting for new data."""
        self._listeners.append(fn)

    async def append(
        self,
        plog: PartitionLog,
        records_or_batch: Sequence[rec.RecordInput] | bytes | bytearray | memoryview,
        *,
        log_append_time_ms: int | None = None,
    ) -> tuple[int, int]:
        """Append records (a list of (key, value, headers, timestamp)) or a client's raw batch;
        returns (base_offset, last_offset) once written (and fsynced under ``always``)."""
        return await self.append_future(plog, records_or_batch, log_append_time_ms=log_append_time_ms)

    def append_future(
        self,
        plog: PartitionLog,
        records_or_batch: Sequence[rec.RecordInput] | bytes | bytearray | memoryview | rec.BatchView,
        *,
        log_append_time_ms: int | None = None,
    ) -> asyncio.Future[tuple[int, int]]:
        """``append`` queued now, its outcome a plain future: no task per append (Produce's hot
        path: a task costs two more loop callbacks and ~10 us per partition), and items queued by
        successive calls reach the log in call order. A closed appender fails the future."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if self._closed:
            fut.set_exception(StorageError("appender is closed"))
            return fut
        item = records_or_batch
        if isinstance(item, bytearray | memoryview):
            item = bytes(item)
        state = self._states.get(plog)
        if state is None:
            state = self._states[plog] = _PartitionState()
        state.pending.append((item, log_append_time_ms, fut))
        if not state.writing:
            self._ready[plog] = state
        if not self._drain_scheduled:
            self._drain_scheduled = True
            loop.call_soon(self._drain)
        return fut

    def _drain(self) -> None:
        self._drain_scheduled = False
        # Only the partitions queued to since the last drain (not every partition ever written:
        # a drain per loop iteration walked them all); dict order is queue order.
        candidates, self._ready = self._ready, {}
        ready = [(plog, state) for plog, state in candidates.items() if state.pending and not state.writing]
        if not ready:
            return
        units = []
        for plog, state in ready:
            batch, state.pending = state.pending, []
            state.writing = True
            # One write per run of items with the same log-append time (in practice all share None
            # or now): runs, not a grouping, because queue order is log order (a partition's
            # produce batches and transaction markers are checked in that order).
            groups: list[tuple[int | None, list]] = []
            for entry in batch:
                if groups and groups[-1][0] == entry[1]:
                    groups[-1][1].append(entry)
                else:
                    groups.append((entry[1], [entry]))
            units.append((plog, state, groups))
        if self.policy.mode == "always":
            # Separate jobs so the partitions' fsyncs overlap in the executor's threads.
            for unit in units:
                self._spawn(self._run_job([unit]))
        elif self.inline:
            # A write to the page cache costs a few microseconds; the executor hop (future, thread
            # wake-up, self-pipe, GIL hand-over) cost ~150 us per drain of a 50-committer load.
            # Kafka's request handler threads append to the page cache themselves, too.
            self.writes += sum(len(groups) for _, _, groups in units)
            self._settle(units, self._job(units))
        else:
            # Plain writes are quick: one executor hop for every partition of this iteration.
            self._spawn(self._run_job(units))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        """Nobody awaits these tasks: an exception is retrieved and logged here, or asyncio prints
        it raw ("Task exception was never retrieved") whenever the task is collected."""
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("storage.task.failed", error=repr(exc), exc_info=exc)

    def _job(self, units: list) -> list:
        """Executor side: every unit's writes (and fsyncs), each failing on its own."""
        sync = self.policy.mode == "always"
        observer = self.observer
        out = []
        for plog, _state, groups in units:
            after = partial(self._timed_fsync, plog) if sync else None
            unit_results = []
            for lat, entries in groups:
                t0 = time.perf_counter()
                try:
                    res: list | BaseException = plog.append_items(
                        [e[0] for e in entries], log_append_time_ms=lat, after_write=after
                    )
                except StorageError as exc:
                    res = exc  # logged on the loop's side (_run_job), rate-limited
                except Exception as exc:  # a bug must fail these callers, not wedge the partition
                    log.exception("storage.append.crashed", path=str(plog.path))
                    res = StorageError(f"append failed: {exc!r}")
                if observer is not None:
                    ok = not isinstance(res, BaseException)
                    observer.write_done(plog, time.perf_counter() - t0, len(entries), ok)
                unit_results.append(res)
            out.append(unit_results)
        return out

    async def _run_job(self, units: list) -> None:
        loop = asyncio.get_running_loop()
        self.writes += sum(len(groups) for _, _, groups in units)
        try:
            outcome = await loop.run_in_executor(self._executor, self._job, units)
        except BaseException as exc:
            # Cancelled or the executor is gone: nobody may be left waiting.
            for plog, state, groups in units:
                for _lat, entries in groups:
                    _fail_all([e[2] for e in entries], StorageError(f"append failed: {exc!r}"))
                state.writing = False
                if state.pending:
                    self._ready[plog] = state
            raise
        self._settle(units, outcome)

    def _settle(self, units: list, outcome: list) -> None:
        """Loop side: answer the callers of a job's writes, schedule fsyncs, wake the listeners."""
        for (plog, state, groups), unit_results in zip(units, outcome):
            wrote = False
            for (_lat, entries), res in zip(groups, unit_results):
                futures = [e[2] for e in entries]
                if isinstance(res, BaseException):
                    # A failing disk fails every write (3,037 lines in 6 s): one line per log per interval.
                    limited_log.error(
                        "storage.append.failed",
                        key=plog.path,
                        path=str(plog.path),
                        error=str(res),
                        callers=len(entries),
                    )
                    _fail_all(futures, res)
                    continue
                for fut, result in zip(futures, res):
                    if fut.done():
                        continue
                    if isinstance(result, BaseException):
                        fut.set_exception(result)
                    else:
                        wrote = True
                        fut.set_result(result)
            state.writing = False
            if state.pending:
                self._ready[plog] = state
            if wrote and self.policy.mode == "always":
                self.fsyncs += len(groups)
                state.last_fsync = self._clock()
            elif wrote and self.policy.mode == "interval":
                self._schedule_fsync(plog, state)
            if wrote:
                for fn in self._listeners:
                    try:
                        fn(plog, plog.log_end_offset)
                    except Exception:
                        log.exception("storage.append.listener_failed", path=str(plog.path))
        if any(state.pending for _, state, _ in units):
            self._drain()

    def _schedule_fsync(self, plog: PartitionLog, state: _PartitionState) -> None:
        if state.flushing:
            return
        due = state.last_fsync + self.policy.interval_ms / 1000.0
        delay = due - self._clock()
        if delay <= 0:
            # Also covers a timer that is late (a busy loop): the interval is what counts.
            if state.flush_handle is not None:
                state.flush_handle.cancel()
                state.flush_handle = None
            state.flushing = True
            self._spawn(self._background_fsync(plog, state))
        elif state.flush_handle is None:
            loop = asyncio.get_running_loop()
            state.flush_handle = loop.call_later(delay, self._fsync_timer, plog, state)

    def _fsync_timer(self, plog: PartitionLog, state: _PartitionState) -> None:
        state.flush_handle = None
        if not state.flushing and not plog.closed:
            state.flushing = True
            self._spawn(self._background_fsync(plog, state))

    async def _background_fsync(self, plog: PartitionLog, state: _PartitionState) -> None:
        loop = asyncio.get_running_loop()
        try:
            if plog.closed:
                return  # closed (shutdown: flushed) or abandoned (its topic deleted) since scheduled
            state.last_fsync = self._clock()
            self.fsyncs += 1
            await loop.run_in_executor(self._executor, self._timed_fsync, plog)
        except (StorageError, OSError, ValueError) as exc:
            # The log closed while the fsync waited in the executor's queue: nothing to report
            # (PartitionLog.flush skips a closed log; an injected fsync may not).
            if plog.closed:
                return
            # Callers were already answered; the data stays dirty and the next interval retries.
            limited_log.error("storage.fsync.failed", key=plog.path, path=str(plog.path), error=str(exc))
        finally:
            state.flushing = False
        if plog.needs_flush and not plog.closed:
            self._schedule_fsync(plog, state)

    def _timed_fsync(self, plog: PartitionLog) -> None:
        """Executor side: the fsync, reported to the observer (if any) with its duration."""
        observer = self.observer
        if observer is None:
            self._fsync(plog)
            return
        t0 = time.perf_counter()
        ok = False
        try:
            self._fsync(plog)
            ok = True
        finally:
            observer.fsync_done(plog, time.perf_counter() - t0, ok)

    async def flush(self) -> None:
        """Wait for queued writes, then fsync every partition this appender wrote to."""
        while any(s.pending or s.writing for s in self._states.values()) or self._drain_scheduled:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
            await asyncio.sleep(0)  # let a scheduled drain start its writes
        loop = asyncio.get_running_loop()
        for plog, state in list(self._states.items()):
            if state.flush_handle is not None:
                state.flush_handle.cancel()
                state.flush_handle = None
            if not plog.closed and plog.needs_flush:
                self.fsyncs += 1
                await loop.run_in_executor(self._executor, self._timed_fsync, plog)
                state.last_fsync = self._clock()

    async def close(self) -> None:
        """Finish queued writes and fsync them; later appends raise StorageError."""
        self._closed = True
        await self.flush()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def forget(self, plog: PartitionLog) -> None:
        """Drop per-partition state of a log that was closed or deleted."""
        state = self._states.pop(plog, None)
        self._ready.pop(plog, None)
        if state is not None and state.flush_handle is not None:
            state.flush_handle.cancel()


def _fail_all(futures: list[asyncio.Future], exc: BaseException) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_exception(exc)
