"""What the asyncio shells of the sans-IO coordinators share: apply a result, write its appends, drain.

The group coordinator (``group_shell.py``) and the transaction coordinator (``txn_shell.py``) are
driven the same way, the shell side of Kafka's ``CoordinatorRuntime`` (its event processor and its
``PartitionWriter``):

- :meth:`CoordinatorShell.apply` sends a result's answers (``ctx.respond``), starts one task per
  append (plus whatever else the shell's result carries: :meth:`CoordinatorShell._start_more`) and
  re-arms the one wake-up at ``core.next_deadline()`` (``tick`` when it fires);
- each append is serialized by the shell (:meth:`CoordinatorShell._write`) and written to its
  partition's log through the group-commit ``Appender``; only once it is durable (or failed:
  KAFKA_STORAGE_ERROR) does ``core.append_done(now, token, error)`` hear of it (error None when
  durable), and the result of that is applied in turn, so no answer depends on a record that
  could still be lost;
- appends to one partition reach its log in the order the core handed them out, and
  :meth:`CoordinatorShell._settle_writes` waits for those of a partition (a load reads the log only
  after them);
- :meth:`CoordinatorShell.drain` stops as ``CoordinatorRuntime.close`` does: the timer first, then
  what ``_cancel_first`` holds; the appends in flight get a while to settle, then ``_cancel_last``
  (loads) is cancelled.

A core is anything with ``next_deadline()``, ``tick(now)`` and ``append_done(now, token, error)``
returning a result with ``responses`` and ``appends`` (each append with ``token`` and
``partition``); ``deadline_version()``, when the core has it, spares the timer a look at the heap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.ratelimit import LogLimiter
from groupd.storage import Appender, PartitionLog, StorageError

from .wakeup import Wakeup

__all__ = ["CoordinatorShell", "ShellAppend", "ShellCore", "ShellResult", "wall_ms"]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class ShellAppend(Protocol):
    """An entry of ``result.appends``: records for one partition, reported back under ``token``."""

    token: int
    partition: int


class ShellResult(Protocol):
    responses: list[tuple[Any, dict[str, Any]]]
    appends: Any  # a list of ShellAppend (the core's own Append type)


class ShellCore(Protocol):
    def next_deadline(self) -> int | None: ...

    def tick(self, now_ms: int) -> Any: ...

    def append_done(self, now_ms: int, token: int, error: Any = ...) -> Any: ...


C = TypeVar("C", bound=ShellCore)
R = TypeVar("R", bound=ShellResult)
A = TypeVar("A", bound=ShellAppend)


class CoordinatorShell(Generic[C, R, A]):
    """The shared part of a coordinator's shell. A subclass supplies :meth:`_write` (how an append
    becomes bytes in its log) and, when its results carry more than answers and appends,
    :meth:`_start_more`; ``append_failed`` names the log event of a failed append, logged to
    ``_log`` (a storage error through ``_limited_log``, keyed by partition)."""

    append_failed = "coordinator_append_failed"
    _log: Any = structlog.get_logger("groupd.coordinator_shell")
    _limited_log: LogLimiter = LogLimiter(_log)

    def __init__(
        self,
        core: C,
        partition_logs: Callable[[int], PartitionLog],
        appender: Appender,
        *,
        clock: Callable[[], int],
    ) -> None:
        self.core = core
        self.partition_logs = partition_logs
        self.appender = appender
        self.clock = clock
        # A core without deadline_version (the transaction core, test stubs) gets the heap asked on
        # every call.
        self._wakeup = Wakeup(
            core.next_deadline,
            lambda now: self.apply(self.core.tick(now)),
            clock,
            version=getattr(core, "deadline_version", None),
        )
        self._arm = self._wakeup.arm
        # Every task drain waits for: the appends, and what _start_more starts.
        self._tasks: set[asyncio.Future[None]] = set()
        # Appends in flight per partition: a load waits for them, so that what was written before
        # an unload is in the log before the log is read again.
        self._writes: dict[int, set[asyncio.Future[None]]] = {}
        # Appends per partition written by a task (_append) that are not done: while one is, the
        # partition's appends all take that path (see _start_append).
        self._queued: dict[int, int] = {}
        # Cancelled by drain before it waits (tasks of _tasks that would not end by themselves, e.g.
        # writes retried until they land: _spawn(cancel_first=True)), and after it waited (tasks it
        # does not wait for, e.g. loads still replaying, which would read logs about to close: _track).
        self._cancel_first: set[asyncio.Task[None]] = set()
        self._cancel_last: set[asyncio.Task[Any]] = set()
        self.loaded = asyncio.Event()  # set once the start-up load is over
        self.load_stats: dict[str, float] = {}

    # --- a result -----------------------------------------------------------------------------
    def apply(self, result: R) -> list[asyncio.Future[None]]:
        """Send the answers, start the appends and the rest (their tasks are returned) and re-arm
        the timer."""
        for ctx, response in result.responses:
            ctx.respond(response)
        tasks = [self._start_append(append) for append in result.appends]
        self._start_more(result, tasks)
        self._arm()
        return tasks

    def _start_more(self, result: R, tasks: list[asyncio.Future[None]]) -> None:
        """Start what else ``result`` carries (appending each task to ``tasks``); nothing here."""

    def _spawn(self, coro: Coroutine[Any, Any, None], *, cancel_first: bool = False) -> asyncio.Task[None]:
        """Run ``coro`` as a task drain waits for (cancelled first when ``cancel_first``: it would
        not end by itself). Tasks start in creation order, so two started by one result run their
        first steps in that order."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if cancel_first:
            self._cancel_first.add(task)
            task.add_done_callback(self._cancel_first.discard)
        return task

    def _track(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task drain does not wait for but cancels once the appends settled."""
        task = asyncio.ensure_future(coro)
        self._cancel_last.add(task)
        task.add_done_callback(self._cancel_last.discard)
        return task

    # --- appends (Kafka's PartitionWriter) ----------------------------------------------------
    def _start_append(self, append: A) -> asyncio.Future[None]:
        # Tasks start in creation order and enqueue in the appender before their first suspension
        # (``_write`` awaits nothing before ``appender.append``), so appends reach a partition in
        # the order the core handed them out. An append queued at once (_direct) is queued in
        # that order too as long as no task of its partition is still to run: so only then.
        partition = append.partition
        if not self._queued.get(partition):
            done = self._direct(append)
            if done is not None:
                return done
        task = self._spawn(self._append(append))
        writes = self._writes.setdefault(partition, set())
        writes.add(task)
        task.add_done_callback(writes.discard)
        self._queued[partition] = self._queued.get(partition, 0) + 1
        task.add_done_callback(lambda _t: self._unqueue(partition))
        return task

    def _unqueue(self, partition: int) -> None:
        n = self._queued.get(partition, 0) - 1
        if n > 0:
            self._queued[partition] = n
        else:
            self._queued.pop(partition, None)

    def _direct(self, append: A) -> asyncio.Future[None] | None:
        """``_append`` without a task, for the appends a subclass can queue in the appender at once
        (:meth:`_direct_item`): the append's future settles through the appender's ``on_settled``
        hook, which tells the core in the loop iteration of the write. A task, its coroutines and
        the callbacks of its steps and ends cost ~8 us of a ~100 us OffsetCommit of 100 partitions
        (issue 26). The future returned (what drain and a load wait for) is done once the core
        heard of the outcome; it never fails. None: the append takes the task path."""
        item = self._direct_item(append)
        if item is None:
            return None
        plog, payload = item
        writes = self._writes.setdefault(append.partition, set())
        tasks = self._tasks

        def settled(fut: asyncio.Future[Any]) -> None:
            tasks.discard(done)
            writes.discard(done)
            try:
                self._report(append.partition, append.token, fut)
            finally:
                if not done.done():  # cancelled by a waiter (a cancelled gather cancels its futures)
                    done.set_result(None)

        written = self.appender.append_future(plog, payload, on_settled=settled)
        # on the appender's loop (asyncio.get_running_loop costs a getpid() syscall on 3.11)
        done: asyncio.Future[None] = written.get_loop().create_future()
        tasks.add(done)
        writes.add(done)
        return done

    def _report(self, partition: int, token: int, fut: asyncio.Future[Any]) -> None:
        """Tell the core the outcome of the append ``token`` queued without a task (``fut``, settled)
        and apply what it answers: the end of :meth:`_direct` and of the shells' short paths."""
        error: int | None = None
        exc = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
        if isinstance(exc, StorageError):
            self._limited_log.error(self.append_failed, key=partition, partition=partition, error=str(exc))
            error = ErrorCode.KAFKA_STORAGE_ERROR
        elif exc is not None:
            self._log.error(self.append_failed, partition=partition, exc_info=exc)
            error = ErrorCode.KAFKA_STORAGE_ERROR
        self.apply(self.core.append_done(self.clock(), token, error))

    def _direct_item(self, append: A) -> tuple[PartitionLog, Any] | None:
        """The log and the item to queue for an append that needs no serializing step that could
        fail or wait (e.g. a batch built already); None: the task path (``_write``)."""
        return None

    async def _settle_writes(self, partition: int) -> None:
        """Until every append to ``partition`` handed out so far is durable or failed."""
        while writes := self._writes.get(partition):
            await asyncio.wait(list(writes))

    async def _append(self, append: A) -> None:
        error: int | None = None
        try:
            plog = self.partition_logs(append.partition)
            await self._write(plog, append, self.clock())
        except StorageError as e:
            self._limited_log.error(self.append_failed, key=append.partition, partition=append.partition, error=str(e))
            error = ErrorCode.KAFKA_STORAGE_ERROR
        except Exception:
            self._log.exception(self.append_failed, partition=append.partition)
            error = ErrorCode.KAFKA_STORAGE_ERROR
        self.apply(self.core.append_done(self.clock(), append.token, error))

    async def _write(self, plog: PartitionLog, append: A, now_ms: int) -> None:
        """Serialize ``append`` and hand it to ``self.appender`` for ``plog``: awaiting nothing
        before that (the order of appends), returning once durable, raising when it failed."""
        raise NotImplementedError

    # --- stopping -----------------------------------------------------------------------------
    async def drain(self, timeout: float = 10.0) -> None:
        """Graceful stop, in ``CoordinatorRuntime.close``'s order: the timer stops (no deadline
        starts new work), ``_cancel_first`` is cancelled, the tasks in flight get up to ``timeout``
        to settle (what was written is acknowledged), then the timer stops again (an append
        settling re-arms it) and ``_cancel_last`` is cancelled."""
        self._wakeup.cancel()
        for task in list(self._cancel_first):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
        self._wakeup.cancel()
        for task in list(self._cancel_last):
            task.cancel()
