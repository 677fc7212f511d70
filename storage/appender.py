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
visible, all under the log's I/O lock. The loop never waits on disk and readers never see a write
that could still be rolled back.

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
from dataclasses import dataclass
from functools import partial

import structlog

from . import records as rec
from .errors import StorageError
from .log import PartitionLog

log = structlog.get_logger("groupd.storage")

__all__ = ["Appender", "FsyncPolicy"]


@dataclass(frozen=True)
class FsyncPolicy:
    mode: str  # "always", "interval" or "never"
    interval_ms: int = 0

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
    ) -> None:
        self.policy = FsyncPolicy.parse(policy) if isinstance(policy, str) else policy
        self._executor = executor
        self._fsync = fsync if fsync is not None else PartitionLog.flush
        self._clock = clock
        self._states: dict[PartitionLog, _PartitionState] = {}
        self._drain_scheduled = False
        self._tasks: set[asyncio.Task] = set()
        self._closed = False
        self.writes = 0  # disk writes issued, for tests and metrics
        self.fsyncs = 0

    async def append(
        self,
        plog: PartitionLog,
        records_or_batch: Sequence[rec.RecordInput] | bytes | bytearray | memoryview,
        *,
        log_append_time_ms: int | None = None,
    ) -> tuple[int, int]:
        """Append records (a list of (key, value, headers, timestamp)) or a client's raw batch;
        returns (base_offset, last_offset) once written (and fsynced under ``always``)."""
        if self._closed:
            raise StorageError("appender is closed")
        item = records_or_batch
        if isinstance(item, bytearray | memoryview):
            item = bytes(item)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        state = self._states.get(plog)
        if state is None:
            state = self._states[plog] = _PartitionState()
        state.pending.append((item, log_append_time_ms, fut))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            loop.call_soon(self._drain)
        return await fut

    def _drain(self) -> None:
        self._drain_scheduled = False
        for plog, state in self._states.items():
            if state.pending and not state.writing:
                self._start_write(plog, state)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_write(self, plog: PartitionLog, state: _PartitionState) -> None:
        batch, state.pending = state.pending, []
        state.writing = True
        self._spawn(self._write(plog, state, batch))

    async def _write(self, plog: PartitionLog, state: _PartitionState, batch: list) -> None:
        loop = asyncio.get_running_loop()
        try:
            # One log-append time per distinct value; in practice all items share None or now.
            groups: dict[int | None, list] = {}
            for entry in batch:
                groups.setdefault(entry[1], []).append(entry)
            for lat, entries in groups.items():
                await self._write_group(loop, plog, state, lat, entries)
        finally:
            state.writing = False
            if state.pending and not self._closed_for(plog):
                self._start_write(plog, state)

    def _closed_for(self, plog: PartitionLog) -> bool:
        return plog.closed

    async def _write_group(self, loop, plog: PartitionLog, state: _PartitionState, lat, entries) -> None:
        futures = [e[2] for e in entries]
        sync = self.policy.mode == "always"
        after = (lambda: self._fsync(plog)) if sync else None
        self.writes += 1
        try:
            results = await loop.run_in_executor(
                self._executor, partial(plog.append_items, [e[0] for e in entries], log_append_time_ms=lat,
                                        after_write=after)
            )
        except StorageError as exc:
            log.error("storage.append.failed", path=str(plog.path), error=str(exc), callers=len(futures))
            _fail_all(futures, exc)
            return
        except Exception as exc:  # a bug must fail these callers, not wedge the partition
            log.exception("storage.append.crashed", path=str(plog.path))
            _fail_all(futures, StorageError(f"append failed: {exc!r}"))
            return
        wrote = any(not isinstance(r, BaseException) for r in results)
        if sync and wrote:
            self.fsyncs += 1
            state.last_fsync = self._clock()
        for fut, result in zip(futures, results):
            if fut.done():
                continue
            if isinstance(result, BaseException):
                fut.set_exception(result)
            else:
                fut.set_result(result)
        if self.policy.mode == "interval" and wrote:
            self._schedule_fsync(plog, state)

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
            state.last_fsync = self._clock()
            self.fsyncs += 1
            await loop.run_in_executor(self._executor, self._fsync, plog)
        except (StorageError, OSError) as exc:
            # Callers were already answered; the data stays dirty and the next interval retries.
            log.error("storage.fsync.failed", path=str(plog.path), error=str(exc))
        finally:
            state.flushing = False
        if plog.needs_flush and not plog.closed:
            self._schedule_fsync(plog, state)

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
                await loop.run_in_executor(self._executor, self._fsync, plog)
                state.last_fsync = self._clock()

    async def close(self) -> None:
        """Finish queued writes and fsync them; later appends raise StorageError."""
        self._closed = True
        await self.flush()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def forget(self, plog: PartitionLog) -> None:
        """Drop per-partition state of a log that was closed or deleted."""
        state = self._states.pop(plog, None)
        if state is not None and state.flush_handle is not None:
            state.flush_handle.cancel()


def _fail_all(futures: list[asyncio.Future], exc: BaseException) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_exception(exc)
