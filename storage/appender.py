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
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import Any, Protocol

import structlog
from groupd.protocol.frozen import frozen_record
from groupd.protocol.ratelimit import LogLimiter

from . import records as rec
from .errors import StorageError
from .log import PartitionLog

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

log = structlog.get_logger("groupd.storage")
limited_log = LogLimiter(log)

__all__ = ["AppendObserver", "Appender", "FsyncPolicy", "OnSettled"]

# Called with an append's future as soon as the appender has settled it (``append_future``).
OnSettled = Callable[[asyncio.Future], None]


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
        # (item, log_append_time_ms, future, on_settled)
        self.pending: list[tuple[Sequence[rec.RecordInput] | bytes, int | None, asyncio.Future, OnSettled | None]] = []
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
        self._own_executor: ThreadPoolExecutor | None = None  # made by _submit if none was given
        self._jobs = 0  # _submit's jobs in flight (flush waits for them)
        self._idle: asyncio.Event | None = None
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
        self._loop: asyncio.AbstractEventLoop | None = None  # append_future's
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
        on_settled: OnSettled | None = None,
    ) -> asyncio.Future[tuple[int, int]]:
        """``append`` queued now, its outcome a plain future: no task per append (Produce's hot
        path: a task costs two more loop callbacks and ~10 us per partition), and items queued by
        successive calls reach the log in call order. A closed appender fails the future.

        ``on_settled(future)`` is called right after the future is settled, by the appender, in
        the same loop iteration as the write, where a done callback of the future would run from
        the next iteration. Produce answers its request and wakes the partition's parked fetches
        from it: under load every iteration first reads every ready connection (~10 ms with three
        brokers' connections on one loop), so each iteration saved shortens a producer's round
        trip by that much (issue 29, item 4). Kafka's request handler thread likewise completes the
        delayed fetches and hands the answer over right after its append
        (``ReplicaManager.appendRecords``, the action queue run by ``KafkaApis.handle``)."""
        # The loop of the last call while it runs: asyncio.get_running_loop costs a getpid()
        # syscall on Python 3.11 (one per OffsetCommit).
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if self._closed:
            fut.set_exception(StorageError("appender is closed"))
            if on_settled is not None:
                loop.call_soon(_run_hook, on_settled, fut)  # after the caller has used the future
            return fut
        item = records_or_batch
        if isinstance(item, (bytearray, memoryview)):  # a tuple: quicker than a union
            item = bytes(item)
        state = self._states.get(plog)
        if state is None:
            state = self._states[plog] = _PartitionState()
        state.pending.append((item, log_append_time_ms, fut, on_settled))
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
        ready = []  # a loop, not a comprehension: a comprehension is a call of its own on 3.11
        for plog, state in candidates.items():
            if state.pending and not state.writing:
                ready.append((plog, state))
        if not ready:
            return
        units = []
        writes = 0
        for plog, state in ready:
            batch, state.pending = state.pending, []
            state.writing = True
            if len(batch) == 1:  # the common case under a latency-bound load: one item, one run
                units.append((plog, state, [(batch[0][1], batch)]))
                writes += 1
                continue
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
            writes += len(groups)
        if self.policy.mode == "always":
            # A bare executor job whose end is one call_soon_threadsafe (a task awaiting
            # run_in_executor cost a task, a chained future and two more loop callbacks per
            # commit, ~40 us of a 350 us commit under ``--fsync always``).
            # All partitions of a drain in one job: their writes first, then their fsyncs (see
            # _job), so that the file system commits them together, the group commit a single
            # partition's queue cannot give when each committer's group has its own partition.
            self._submit(asyncio.get_running_loop(), units)
        elif self.inline:
            # A write to the page cache costs a few microseconds; the executor hop (future, thread
            # wake-up, self-pipe, GIL hand-over) cost ~150 us per drain of a 50-committer load.
            # Kafka's request handler threads append to the page cache themselves, too.
            self.writes += writes
            self._settle(units, self._job(units))
        else:
            # Plain writes are quick: one executor hop for every partition of this iteration.
            self._spawn(self._run_job(units))

    def _submit(self, loop: asyncio.AbstractEventLoop, units: list) -> None:
        """``_run_job`` without a task: the job runs in the executor, its outcome is settled by
        one callback on the loop (or every caller failed if the executor is gone)."""
        executor = self._executor
        if executor is None:
            executor = self._executor = self._own_executor = ThreadPoolExecutor(
                min(32, (os.cpu_count() or 1) + 4),  # the size of asyncio's default executor
                thread_name_prefix="groupd-append",
            )
        self.writes += sum(len(groups) for _, _, groups in units)
        self._jobs += 1
        try:
            cf = executor.submit(self._job, units)
        except BaseException as exc:  # shut down: nobody may be left waiting
            self._jobs -= 1
            self._job_failed(units, exc)
            return

        def finished(cf: Any) -> None:  # executor thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to answer
                loop.call_soon_threadsafe(self._job_done, units, cf)

        cf.add_done_callback(finished)

    def _job_done(self, units: list, cf: Any) -> None:
        self._jobs -= 1
        try:
            exc = cf.exception()
            if exc is not None:
                self._job_failed(units, exc)
                log.error("storage.task.failed", error=repr(exc), exc_info=exc)
            else:
                self._settle(units, cf.result())
        finally:
            if not self._jobs and self._idle is not None:
                self._idle.set()

    def _job_failed(self, units: list, exc: BaseException) -> None:
        for plog, state, groups in units:
            for _lat, entries in groups:
                _fail_all(entries, StorageError(f"append failed: {exc!r}"))
            state.writing = False
            if state.pending:
                self._ready[plog] = state

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
        if sync and len(units) > 1:
            return self._synced_job(units)
        observer = self.observer
        out = []
        for plog, _state, groups in units:
            after = partial(self._timed_fsync, plog) if sync else None
            unit_results = []
            for lat, entries in groups:
                t0 = time.perf_counter() if observer is not None else 0.0
                items = [entries[0][0]] if len(entries) == 1 else [e[0] for e in entries]
                try:
                    res: list | BaseException = plog.append_items(items, log_append_time_ms=lat, after_write=after)
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

    def _synced_job(self, units: list) -> list:
        """``always`` with several partitions: every partition's write (``write_items``), then
        each one's fsync and only then its data made visible (``finish_items``), so a caller is
        still answered only after the fsync of its own partition, and a failed fsync still rolls
        back only that partition's write. A partition with several groups (log-append times)
        takes the one-by-one path of ``_job``."""
        observer = self.observer
        out: list = [None] * len(units)
        written: list = []  # (unit index, plog, prepared, t0)
        try:
            for n, (plog, _state, groups) in enumerate(units):
                if len(groups) != 1:
                    continue
                lat, entries = groups[0]
                t0 = time.perf_counter()
                try:
                    written.append((n, plog, plog.write_items([e[0] for e in entries], log_append_time_ms=lat), t0))
                except StorageError as exc:
                    out[n] = [exc]
                except Exception as exc:  # a bug must fail these callers, not wedge the partition
                    log.exception("storage.append.crashed", path=str(plog.path))
                    out[n] = [StorageError(f"append failed: {exc!r}")]
        finally:
            # every write_items that returned holds its log's lock until finish_items
            for n, plog, prepared, t0 in written:
                try:
                    res: list | BaseException = plog.finish_items(prepared, partial(self._timed_fsync, plog))
                except StorageError as exc:
                    res = exc
                except Exception as exc:
                    log.exception("storage.append.crashed", path=str(plog.path))
                    res = StorageError(f"append failed: {exc!r}")
                if observer is not None:
                    ok = not isinstance(res, BaseException)
                    observer.write_done(plog, time.perf_counter() - t0, len(units[n][2][0][1]), ok)
                out[n] = [res]
        for n, unit in enumerate(units):
            if out[n] is None:
                out[n] = self._job([unit])[0]
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
                    _fail_all(entries, StorageError(f"append failed: {exc!r}"))
                state.writing = False
                if state.pending:
                    self._ready[plog] = state
            raise
        self._settle(units, outcome)

    def _settle(self, units: list, outcome: list) -> None:
        """Loop side: answer the callers of a job's writes, schedule fsyncs, wake the listeners;
        then run the callers' ``on_settled`` hooks, once every partition's bookkeeping is done
        (they may answer requests and append again)."""
        hooks: list[tuple] = []
        for (plog, state, groups), unit_results in zip(units, outcome):
            wrote = False
            for (_lat, entries), res in zip(groups, unit_results):
                if isinstance(res, BaseException):
                    # A failing disk fails every write (3,037 lines in 6 s): one line per log per interval.
                    limited_log.error(
                        "storage.append.failed",
                        key=plog.path,
                        path=str(plog.path),
                        error=str(res),
                        callers=len(entries),
                    )
                    hooks.extend(_fail(entries, res))
                    continue
                for entry, result in zip(entries, res):
                    fut = entry[2]
                    if fut.done():
                        continue
                    if isinstance(result, BaseException):
                        fut.set_exception(result)
                    else:
                        wrote = True
                        fut.set_result(result)
                    if entry[3] is not None:
                        hooks.append(entry)
            state.writing = False
            if state.pending:
                self._ready[plog] = state
            if wrote and self.policy.mode == "always":
                self.fsyncs += len(groups)
                state.last_fsync = self._clock()
            elif wrote and self.policy.mode == "interval" and not state.flushing:
                handle = state.flush_handle
                # a timer set and not late: nothing to do (_schedule_fsync's answer, without its call)
                if handle is None or state.last_fsync + self.policy.interval_ms / 1000.0 <= self._clock():
                    self._schedule_fsync(plog, state)
            if wrote:
                for fn in self._listeners:
                    try:
                        fn(plog, plog.log_end_offset)
                    except Exception:
                        log.exception("storage.append.listener_failed", path=str(plog.path))
        for entry in hooks:
            try:  # _run_hook, inline: one call fewer per append
                entry[3](entry[2])
            except Exception:  # as the loop reports a failing callback: the other callers are still answered
                log.exception("storage.append.callback_failed")
        for _, state, _ in units:
            if state.pending:  # queued meanwhile (by the hooks, say): written now, not next iteration
                self._drain()
                break

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
            if self._jobs:
                self._idle = asyncio.Event()
                await self._idle.wait()
                self._idle = None
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
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=False)

    def forget(self, plog: PartitionLog) -> None:
        """Drop per-partition state of a log that was closed or deleted."""
        state = self._states.pop(plog, None)
        self._ready.pop(plog, None)
        if state is not None and state.flush_handle is not None:
            state.flush_handle.cancel()


def _fail(entries: list[tuple], exc: BaseException) -> list[tuple]:
    """Fail the futures of pending ``entries`` (item, time, future, on_settled); the entries whose
    hooks are to run."""
    failed = []
    for entry in entries:
        if not entry[2].done():
            entry[2].set_exception(exc)
            if entry[3] is not None:
                failed.append(entry)
    return failed


def _fail_all(entries: list[tuple], exc: BaseException) -> None:
    for entry in _fail(entries, exc):
        _run_hook(entry[3], entry[2])


def _run_hook(hook: OnSettled, fut: asyncio.Future) -> None:
    try:
        hook(fut)
    except Exception:  # as the loop reports a failing callback: the other callers are still answered
        log.exception("storage.append.callback_failed")
