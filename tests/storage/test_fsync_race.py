"""The background fsync of a partition whose log is closed under it (issue 29, item 6): deleting a
topic abandons its logs while an interval fsync may be queued in the executor. The fsync ran on the
closed files' fd -1 and its task died with ``ValueError('file descriptor cannot be a negative
integer (-1)')``, which nobody retrieved: a raw "Task exception was never retrieved" traceback in
the daemon's output (3 of 8 runs)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from groupd.storage.appender import Appender
from groupd.storage.log import FileOps, PartitionLog
from storage_helpers import small_config


def _open(tmp_path: Any) -> PartitionLog:
    # Real fsyncs (the helpers' CountingOps only count them): the race is in the system call.
    return PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=10**6, file_ops=FileOps()))


class GateExecutor(Executor):
    """Runs jobs at once on the calling thread, or holds them while ``hold`` is set: what a
    busy executor does to an fsync queued behind other jobs, made deterministic."""

    def __init__(self) -> None:
        self.hold = False
        self.held: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        if self.hold:
            self.held.append((fut, fn, args))
        else:
            _run(fut, fn, args)
        return fut

    def release(self) -> None:
        held, self.held, self.hold = self.held, [], False
        for fut, fn, args in held:
            _run(fut, fn, args)


def _run(fut: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        fut.set_result(fn(*args))
    except BaseException as exc:
        fut.set_exception(exc)


async def _fsync_queued_then_log_closed(tmp_path: Any, close: Callable[[PartitionLog], None]) -> None:
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    plog = _open(tmp_path)
    gate = GateExecutor()
    appender = Appender("interval:1000", executor=gate)
    await appender.append(plog, [(b"k", b"v", [], 1000)])
    gate.hold = True  # the interval fsync the write scheduled waits in the executor's queue
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(gate.held) == 1 and plog.needs_flush
    tasks = list(appender._tasks)
    close(plog)  # the topic is deleted (StorageManager.delete abandons the log), or shut down
    appender.forget(plog)
    gate.release()  # the fsync runs on the closed files
    done, _ = await asyncio.wait(tasks, timeout=5)
    assert done == set(tasks)
    assert [t.exception() for t in tasks if not t.cancelled()] == [None] * len(tasks)
    del tasks, done
    gc.collect()
    await asyncio.sleep(0)
    assert unhandled == []
    await appender.close()


async def test_a_queued_fsync_of_a_deleted_topics_log_is_skipped(tmp_path: Any) -> None:
    await _fsync_queued_then_log_closed(tmp_path, PartitionLog.abandon)


async def test_a_queued_fsync_of_a_log_closed_at_shutdown_is_skipped(tmp_path: Any) -> None:
    await _fsync_queued_then_log_closed(tmp_path, PartitionLog.close)


def test_flush_of_a_closed_log_does_nothing(tmp_path: Any) -> None:
    plog = _open(tmp_path)
    plog.append_items([[(b"k", b"v", [], 1000)]])
    assert plog.needs_flush
    plog.abandon()
    plog.flush()  # was os.fsync(-1): ValueError
