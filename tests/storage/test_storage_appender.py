"""Group commit: batching, fsync policies, and I/O errors that fail exactly the affected callers."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest
from groupd.storage import records as R
from groupd.storage.appender import Appender, FsyncPolicy
from groupd.storage.errors import CorruptRecordError, StorageError
from groupd.storage.log import FileOps, PartitionLog
from storage_helpers import CountingOps, records_via_kafka_python, small_config


def rec(i: int, ts: int = 1000):
    return [(b"k%d" % i, b"v%d" % i, [], ts)]


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FsyncSpy:
    """An injectable fsync that records calls, then does the log's real flush."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.events: list[str] = []

    def __call__(self, plog: PartitionLog) -> None:
        self.calls += 1
        self.events.append("fsync")
        if self.fail:
            raise OSError(errno.EIO, "injected fsync failure")
        plog.flush()


def test_fsync_policy_parsing():
    assert FsyncPolicy.parse("always") == FsyncPolicy("always")
    assert FsyncPolicy.parse(" Never ") == FsyncPolicy("never")
    assert FsyncPolicy.parse("interval:1000") == FsyncPolicy("interval", 1000)
    assert str(FsyncPolicy.parse("interval:250")) == "interval:250"
    for bad in ("sometimes", "interval:", "interval:x", "interval:-5", ""):
        with pytest.raises(ValueError):
            FsyncPolicy.parse(bad)


async def test_concurrent_appends_share_one_write_per_partition(tmp_path):
    logs = [PartitionLog.open(tmp_path / f"t-{p}", small_config(segment_bytes=10**6)) for p in range(3)]
    appender = Appender("never")
    results = await asyncio.gather(*(appender.append(logs[i % 3], rec(i)) for i in range(150)))
    assert appender.writes == 3  # 150 callers, 3 partitions, one loop iteration
    for p, plog in enumerate(logs):
        mine = [(r, i) for i, r in enumerate(results) if i % 3 == p]
        assert sorted(r for r, _ in mine) == [(o, o) for o in range(50)]
        got = {r[0]: r[2] for r in plog.iter_records()}
        for (off, _), i in mine:
            assert got[off] == b"k%d" % i  # each caller got the offset its record landed at
        assert len(list(plog.iter_batches())) == 1  # merged into a single batch
    await appender.close()
    for plog in logs:
        plog.close()


async def test_appends_arriving_during_a_write_form_the_next_group(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=10**6))
    appender = Appender("never")

    async def caller(i):
        out = []
        for j in range(10):
            out.append(await appender.append(plog, rec(i * 100 + j)))
        return out

    res = await asyncio.gather(*(caller(i) for i in range(20)))
    assert sorted(o for r in res for o, _ in r) == list(range(200))
    assert appender.writes < 200 / 5  # group commit, not one write per call
    await appender.close()
    plog.validate_all()
    plog.close()


async def test_always_fsyncs_before_releasing_any_caller(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(file_ops=FileOps()))
    spy = FsyncSpy()
    appender = Appender("always", fsync=spy)

    async def caller(i):
        r = await appender.append(plog, rec(i))
        spy.events.append("released")
        return r

    await asyncio.gather(*(caller(i) for i in range(20)))
    assert spy.calls == appender.writes == 1
    assert spy.events == ["fsync"] + ["released"] * 20
    await asyncio.gather(*(caller(i) for i in range(5)))
    assert spy.calls == 2
    await appender.close()
    assert spy.calls == 2  # nothing left dirty
    plog.close()


async def test_interval_fsyncs_at_most_once_per_interval(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    spy = FsyncSpy()
    clock = FakeClock()
    appender = Appender("interval:1000", fsync=spy, clock=clock)
    await appender.append(plog, rec(0))  # first write: nothing fsynced for ages, so fsync now
    await asyncio.gather(*list(appender._tasks))
    assert spy.calls == 1
    for i in range(30):
        clock.t += 0.01
        await appender.append(plog, rec(i))
    await asyncio.gather(*list(appender._tasks))
    assert spy.calls == 1  # 300 ms of appends: the next fsync waits on a timer
    clock.t += 1.0
    await appender.append(plog, rec(99))
    await asyncio.gather(*list(appender._tasks))
    assert spy.calls == 2  # interval elapsed: the timer's job is done right away
    await appender.append(plog, rec(100))
    assert spy.calls == 2 and plog.needs_flush
    await appender.close()  # close flushes what the pending timer would have
    assert spy.calls == 3 and not plog.needs_flush
    plog.close()


async def test_interval_releases_callers_before_the_fsync(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    gate = threading.Event()

    def slow_fsync(p: PartitionLog) -> None:
        assert gate.wait(5)
        p.flush()

    appender = Appender("interval:0", fsync=slow_fsync)
    assert await appender.append(plog, rec(1)) == (0, 0)  # returns while the fsync is blocked
    assert await appender.append(plog, rec(2)) == (1, 1)
    gate.set()
    await appender.close()
    plog.close()


async def test_never_only_fsyncs_at_close(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    spy = FsyncSpy()
    appender = Appender(FsyncPolicy("never"), fsync=spy)
    for i in range(10):
        await appender.append(plog, rec(i))
    assert spy.calls == 0
    await appender.close()
    assert spy.calls == 1
    with pytest.raises(StorageError):
        await appender.append(plog, rec(0))
    plog.close()


class FailingOps(CountingOps):
    """Writes half of the data, then fails with ENOSPC, while `failing` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def pwrite(self, fd: int, data, offset: int) -> int:
        if self.failing:
            os.pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().pwrite(fd, data, offset)


async def test_io_error_fails_exactly_the_affected_callers_and_later_appends_work(tmp_path):
    ops = FailingOps()
    bad = PartitionLog.open(tmp_path / "t-0", small_config(file_ops=ops))
    good = PartitionLog.open(tmp_path / "t-1", small_config())
    appender = Appender("never")
    assert await appender.append(bad, rec(0)) == (0, 0)
    size = bad.size_in_bytes
    ops.failing = True
    results = await asyncio.gather(
        *(appender.append(bad if i % 2 else good, rec(i)) for i in range(20)), return_exceptions=True
    )
    for i, r in enumerate(results):
        if i % 2:
            assert isinstance(r, StorageError)
        else:
            assert isinstance(r, tuple)
    # Nothing of the failed write is visible or left on disk, and offsets were not consumed.
    assert bad.log_end_offset == 1 and bad.size_in_bytes == size
    assert os.path.getsize(bad.active_segment.log_path) == size
    ops.failing = False
    assert await appender.append(bad, rec(100)) == (1, 1)
    await appender.close()
    assert [r[2] for r in bad.iter_records()] == [b"k0", b"k100"]
    bad.close()
    good.close()
    reopened = PartitionLog.open(tmp_path / "t-0", small_config())
    reopened.validate_all()
    assert records_via_kafka_python(tmp_path / "t-0") == list(reopened.iter_records())
    reopened.close()


async def test_failed_fsync_under_always_rolls_the_write_back(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    spy = FsyncSpy()
    appender = Appender("always", fsync=spy)
    await appender.append(plog, rec(0))
    spy.fail = True
    results = await asyncio.gather(*(appender.append(plog, rec(i)) for i in range(5)), return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results)
    assert plog.log_end_offset == 1
    assert os.path.getsize(plog.active_segment.log_path) == plog.size_in_bytes
    spy.fail = False
    assert await appender.append(plog, rec(7)) == (1, 1)
    await appender.close()
    plog.close()


async def test_a_bad_client_batch_fails_only_its_caller(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    appender = Appender("never")
    good = R.build_batch([(b"a", b"1", [], 5), (b"b", b"2", [], 6)])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    results = await asyncio.gather(
        appender.append(plog, rec(0)),
        appender.append(plog, bytes(corrupt)),
        appender.append(plog, good),
        appender.append(plog, []),
        appender.append(plog, rec(1)),
        appender.append(plog, [(b"k", "not bytes", [], 1)]),  # would poison a merged batch
        appender.append(plog, rec(2)),
        return_exceptions=True,
    )
    assert results[0] == (0, 0)
    assert isinstance(results[1], CorruptRecordError)
    assert results[2] == (1, 2)
    assert isinstance(results[3], ValueError)
    assert results[4] == (3, 3)
    assert isinstance(results[5], ValueError)
    assert results[6] == (4, 4)
    assert appender.writes == 1
    assert [r[2] for r in plog.iter_records()] == [b"k0", b"a", b"b", b"k1", b"k2"]
    await appender.close()
    plog.close()


async def test_group_write_that_rolls_a_segment(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=600))
    appender = Appender("always")
    for round_ in range(5):
        await asyncio.gather(*(appender.append(plog, rec(round_ * 10 + i)) for i in range(10)))
    assert len(plog.segments) > 1
    assert [r[0] for r in plog.iter_records()] == list(range(50))
    await appender.close()
    plog.validate_all()
    plog.close()


async def test_cleanup_racing_with_appends_keeps_the_log_consistent(tmp_path):
    from groupd.storage.compaction import run_cleanup
    from structlog.testing import capture_logs

    cfg = small_config(segment_bytes=700, retention_ms=1, cleanup_policy="compact,delete")
    plog = PartitionLog.open(tmp_path / "t-0", cfg)
    appender = Appender("never")
    loop = asyncio.get_running_loop()
    acked = []

    async def producer(n):
        for i in range(60):
            # Old timestamps: time retention wants every segment gone, even the active one.
            acked.append(await appender.append(plog, [(b"p%d-%d" % (n, i), b"v" * 30, [], 1)]))

    async def cleaner():
        for _ in range(30):
            await loop.run_in_executor(None, run_cleanup, plog)

    await asyncio.gather(producer(0), producer(1), producer(2), cleaner())
    assert sorted(a for a, _ in acked) == list(range(180))
    assert plog.log_end_offset == 180
    await appender.close()
    plog.validate_all()
    plog.abandon()
    with capture_logs() as logs:
        reopened = PartitionLog.open(tmp_path / "t-0", cfg)
    assert not [e for e in logs if e["event"] == "storage.recovery.truncated"]
    assert reopened.log_end_offset == 180
    assert [r[0] for r in reopened.iter_records()] == list(range(reopened.log_start_offset, 180))
    reopened.close()


async def test_listeners_hear_about_each_write_that_added_data(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    appender = Appender("never")
    heard = []
    appender.add_listener(lambda log, end: heard.append((log, end)))
    appender.add_listener(lambda log, end: 1 / 0)  # a broken listener must not hurt the others
    await asyncio.gather(*(appender.append(plog, rec(i)) for i in range(4)))
    assert heard == [(plog, 4)]
    with pytest.raises(ValueError):
        await appender.append(plog, [])
    assert heard == [(plog, 4)]
    await appender.close()
    plog.close()


async def test_appends_with_different_log_append_times_keep_queue_order(tmp_path):
    # Produce batches and transaction markers of one partition are queued in the order the
    # producer state saw them; a write split by log-append time must not reorder them.
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=10**6))
    appender = Appender("never")
    stamps = [5000, None, 5000, 6000, None]
    results = await asyncio.gather(
        *(appender.append(plog, rec(i), log_append_time_ms=ts) for i, ts in enumerate(stamps))
    )
    assert [base for base, _last in results] == [0, 1, 2, 3, 4]
    assert [(r[0], r[2]) for r in plog.iter_records()] == [(i, b"k%d" % i) for i in range(5)]
    await appender.close()
    plog.close()


@pytest.mark.parametrize("policy", ["never", "interval:60000", "always"])
async def test_on_settled_runs_in_the_drain_that_wrote_the_append(tmp_path, policy):
    # Produce answers its request and wakes the partition's parked fetches from on_settled: in the
    # loop iteration of the write, not from the next one as a done callback (issue 29 item 4: under
    # load every iteration first reads every ready connection). The marker is queued right behind
    # the drain: it runs in the drain's iteration, after it; a done callback runs after the marker.
    plogs = [PartitionLog.open(tmp_path / f"t-{p}", small_config()) for p in range(2)]
    appender = Appender(policy)
    order: list[str] = []
    heard: list[int] = []
    appender.add_listener(lambda log, end: heard.append(end))

    def hook(i: int):
        # every write of the drain is done and heard of before any caller's hook runs
        return lambda f: order.append(f"hook {i} {f.result()} {sorted(heard)}")

    futures = [appender.append_future(plogs[i % 2], rec(i), on_settled=hook(i)) for i in range(4)]
    futures[0].add_done_callback(lambda f: order.append("done callback"))
    if policy == "always":  # written and fsynced in the executor: settled when that job ends
        # (one job per partition: each partition's callers are settled when its own job ends)
        await asyncio.gather(*futures)
        hooks = [h.rsplit(" [", 1)[0] for h in order if h.startswith("hook")]
        assert sorted(hooks) == [f"hook {i} {(i // 2, i // 2)}" for i in range(4)]
        assert order.index("done callback") > 0  # future 0's hook ran first
    else:
        asyncio.get_running_loop().call_soon(order.append, "marker")
        await asyncio.sleep(0)
        # partition by partition, each in queue order
        assert order[:4] == [f"hook {i} {(i // 2, i // 2)} [2, 2]" for i in (0, 2, 1, 3)]
        assert order[4:] == ["marker"]
        await asyncio.sleep(0)
        assert order[5:] == ["done callback"]  # an ordinary future's callbacks keep asyncio's timing
    await appender.close()
    for plog in plogs:
        plog.close()


async def test_a_failing_on_settled_hook_is_logged_and_the_others_still_run(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    appender = Appender("never")
    ran: list[object] = []
    futures = [
        appender.append_future(plog, rec(0), on_settled=lambda f: 1 / 0),
        appender.append_future(plog, [], on_settled=lambda f: ran.append(type(f.exception()))),
        appender.append_future(plog, rec(2), on_settled=lambda f: ran.append(f.result())),
    ]
    await asyncio.gather(*futures, return_exceptions=True)
    assert ran == [ValueError, (1, 1)]
    await appender.close()
    # a closed appender fails the append and still calls its hook, once the caller has returned
    late: list[object] = []
    fut = appender.append_future(plog, rec(3), on_settled=lambda f: late.append(type(f.exception())))
    assert late == []
    await asyncio.sleep(0)
    assert late == [StorageError] and fut.done()
    plog.close()


async def test_always_answers_after_the_fsync_and_flush_waits_for_the_job_in_flight(tmp_path):
    """``always`` runs each write+fsync as a bare executor job (no task): a caller is answered
    only once the fsync that covers it returned, and ``flush``/``close`` wait for such a job."""
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    entered, release = threading.Event(), threading.Event()

    def slow_fsync(p: PartitionLog) -> None:
        entered.set()
        release.wait(10)
        p.flush()

    appender = Appender("always", fsync=slow_fsync)
    first = asyncio.ensure_future(appender.append(plog, rec(0)))
    second = asyncio.ensure_future(appender.append(plog, rec(1)))
    await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
    flushing = asyncio.ensure_future(appender.flush())
    await asyncio.sleep(0.05)
    assert not first.done() and not second.done() and not flushing.done()
    assert plog.log_end_offset == 0  # not visible before its fsync
    release.set()
    assert await first == (0, 0) and await second == (1, 1)  # one write, one fsync for both
    await flushing
    assert appender.writes == 1
    await appender.close()
    plog.close()


async def test_always_writes_the_partitions_of_a_drain_then_fsyncs_each_and_rolls_back_only_a_failed_one(
    tmp_path,
):
    """Partitions queued in one loop iteration share one job: every write first, then each
    partition's fsync (the file system commits them together), each answered after its own
    fsync; a failed fsync rolls back that partition's write alone."""
    logs = [PartitionLog.open(tmp_path / f"t-{i}", small_config()) for i in range(3)]
    events: list[str] = []

    class Ops(FileOps):
        def pwrite(self, fd: int, data, offset: int) -> int:
            events.append("write")
            return super().pwrite(fd, data, offset)

    for plog in logs:
        plog._ops = Ops()
    sizes = [plog.size_in_bytes for plog in logs]

    def fsync(plog: PartitionLog) -> None:
        events.append("fsync")
        assert plog.log_end_offset == 0  # nothing visible before its fsync
        if plog is logs[1] and events.count("fsync") <= 3:  # its first fsync only
            raise OSError(errno.EIO, "injected fsync failure")
        plog.flush()

    appender = Appender("always", fsync=fsync)
    results = await asyncio.gather(
        *(appender.append(plog, rec(i)) for i, plog in enumerate(logs)), return_exceptions=True
    )
    assert results[0] == (0, 0) and results[2] == (0, 0)
    assert isinstance(results[1], StorageError)
    data_writes = [e for e in events if e == "fsync" or e == "write"]
    assert data_writes.index("fsync") >= 3  # the three log writes came before the first fsync
    assert events.count("fsync") == 3
    assert logs[1].log_end_offset == 0 and os.path.getsize(logs[1].active_segment.log_path) == sizes[1]
    assert await appender.append(logs[1], rec(7)) == (0, 0)  # its lock was released
    await appender.close()
    assert [[r[2] for r in plog.iter_records()] for plog in logs] == [[b"k0"], [b"k7"], [b"k2"]]
    for plog in logs:
        plog.close()


async def test_always_with_its_executor_gone_fails_every_caller_and_runs_their_hooks(tmp_path):
    # A job that cannot be submitted (executor shut down) fails its callers at once and still runs
    # their on_settled hooks (the merge of the hooks with the bare executor jobs passed futures
    # where entries were expected: the callers were never answered).
    from concurrent.futures import ThreadPoolExecutor

    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    executor = ThreadPoolExecutor(1)
    executor.shutdown()
    appender = Appender("always", executor=executor)
    heard: list[object] = []
    futures = [
        appender.append_future(plog, rec(i), on_settled=lambda f: heard.append(type(f.exception()))) for i in range(2)
    ]
    done, _ = await asyncio.wait(futures, timeout=5)
    assert len(done) == 2 and all(isinstance(f.exception(), StorageError) for f in futures)
    assert heard == [StorageError, StorageError]
    plog.close()
