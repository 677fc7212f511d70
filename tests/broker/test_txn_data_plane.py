"""The data plane's side of transactions, in-process against real logs: transactional Produce,
``write_txn_markers``, the last stable offset, read_committed Fetch and ListOffsets, the aborted
index across a restart (Kafka's ProducerStateManager / UnifiedLog / KafkaApis behaviour)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from groupd.broker.producer_state import AbortedTxn, OpenTxn, PartitionProducers
from groupd.broker.topics import OFFSETS_TOPIC
from groupd.storage import records as rec

from tests.broker.test_data_plane import NOW, E, FakeRequest, Harness, batch, call

PID = 7


def txn_batch(values: list[bytes], seq: int, *, pid: int = PID, epoch: int = 0, ts: int = NOW) -> bytes:
    return batch(values, pid=pid, epoch=epoch, seq=seq, transactional=True, ts=ts)


async def txn_produce(h: Harness, values: list[bytes], seq: int, *, partition: int = 0, **kw) -> dict:
    version = kw.pop("version", 9)
    return await h.produce("t", txn_batch(values, seq, **kw), partition, txn_id="tx", version=version)


def values_in(data: bytes, aborted: list[dict] | None = None) -> list[bytes]:
    """What a read_committed consumer keeps (Kafka's Fetcher: skip aborted producers' batches
    from their first offset to their ABORT marker, and every control batch)."""
    aborted = sorted(aborted or [], key=lambda a: a["first_offset"])
    skipping: set[int] = set()
    out = []
    for v in rec.iter_batches(data):
        while aborted and aborted[0]["first_offset"] <= v.last_offset:
            skipping.add(aborted.pop(0)["producer_id"])
        if v.is_control:
            skipping.discard(v.producer_id)
            continue
        if v.is_transactional and v.producer_id in skipping:
            continue
        out.extend(r.value for r in v.records())
    return out


async def read(h: Harness, isolation: int, offset: int = 0, partition: int = 0) -> dict:
    resp = await h.fetch([("t", partition, offset)], isolation_level=isolation)
    return resp["responses"][0]["partitions"][0]


@pytest.fixture
async def h(tmp_path: Path):
    harness = Harness(tmp_path / "data")
    harness.create("t", 2)
    yield harness
    await harness.close()


async def test_open_transaction_holds_the_lso_and_a_commit_releases_it(h: Harness) -> None:
    assert (await h.produce("t", batch([b"plain"])))["base_offset"] == 0
    r = await txn_produce(h, [b"a", b"b"], 0)
    assert r["error_code"] == E.NONE and r["base_offset"] == 1
    committed = await read(h, 1)
    assert committed["high_watermark"] == 3 and committed["last_stable_offset"] == 1
    assert values_in(committed["records"]) == [b"plain"]
    uncommitted = await read(h, 0)
    assert uncommitted["last_stable_offset"] == 1  # LogReadResult carries the LSO at every isolation level
    assert values_in(uncommitted["records"]) == [b"plain", b"a", b"b"]

    assert await h.dp.write_txn_markers(PID, 0, True, 5, [("t", 0)]) == {("t", 0): E.NONE}
    after = await read(h, 1)
    assert after["high_watermark"] == after["last_stable_offset"] == 4
    assert values_in(after["records"], after["aborted_transactions"]) == [b"plain", b"a", b"b"]
    assert after["aborted_transactions"] == []


async def test_an_aborted_transaction_is_listed_for_the_fetched_range(h: Harness) -> None:
    await txn_produce(h, [b"x"], 0)
    await h.produce("t", batch([b"plain"]))
    await h.dp.write_txn_markers(PID, 0, False, 0, [("t", 0)])
    p = await read(h, 1)
    assert p["last_stable_offset"] == 3
    assert p["aborted_transactions"] == [{"producer_id": PID, "first_offset": 0}]
    assert values_in(p["records"], p["aborted_transactions"]) == [b"plain"]
    # collectAbortedTxns(fetchOffset, upper): a fetch past the ABORT marker gets no entry.
    assert (await read(h, 1, offset=3))["aborted_transactions"] == []
    assert (await read(h, 0))["aborted_transactions"] is None


async def test_a_second_transaction_after_the_marker_is_open_again(h: Harness) -> None:
    await txn_produce(h, [b"a"], 0)
    await h.dp.write_txn_markers(PID, 0, True, 0, [("t", 0)])
    r = await txn_produce(h, [b"b"], 1)
    assert r["base_offset"] == 2
    assert (await read(h, 1))["last_stable_offset"] == 2


async def test_marker_and_next_transaction_queued_together_keep_log_order(h: Harness) -> None:
    # TV1: EndTxn is answered before the markers are written, so the producer's next transaction
    # can reach the partition while the marker is still queued.
    await txn_produce(h, [b"a"], 0)
    marker = asyncio.ensure_future(h.dp.write_txn_markers(PID, 0, True, 0, [("t", 0)]))
    while h.dp.state.producers[("t", 0)].producers[PID].txn is not None:
        await asyncio.sleep(0)  # until the marker is queued
    r = await txn_produce(h, [b"b"], 1)
    assert (await marker)[("t", 0)] == E.NONE
    assert r["base_offset"] == 2
    p = await read(h, 1)
    assert p["last_stable_offset"] == 2
    assert values_in(p["records"]) == [b"a"]


async def test_plain_batch_during_a_transaction_is_invalid_txn_state(h: Harness) -> None:
    # ProducerAppendInfo.appendDataBatch: "Expected transactional write from producer".
    await txn_produce(h, [b"a"], 0)
    r = await h.produce("t", batch([b"b"], pid=PID, epoch=0, seq=1))
    assert r["error_code"] == E.INVALID_TXN_STATE


async def test_fenced_epoch_for_data_and_markers(h: Harness) -> None:
    await txn_produce(h, [b"a"], 0, epoch=3)
    # The coordinator's fencing abort carries the bumped epoch.
    assert await h.dp.write_txn_markers(PID, 4, False, 0, [("t", 0)]) == {("t", 0): E.NONE}
    r = await txn_produce(h, [b"late"], 1, epoch=3)
    assert r["error_code"] == E.INVALID_PRODUCER_EPOCH  # checkProducerEpoch, every Produce version
    assert await h.dp.write_txn_markers(PID, 3, True, 0, [("t", 0)]) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert await h.dp.write_txn_markers(PID, 4, False, -1, [("t", 0)]) == {("t", 0): E.TRANSACTION_COORDINATOR_FENCED}
    p = await read(h, 1)
    assert p["aborted_transactions"] == [{"producer_id": PID, "first_offset": 0}]
    assert values_in(p["records"], p["aborted_transactions"]) == []


async def test_markers_for_unknown_and_offsets_partitions(h: Harness) -> None:
    out = await h.dp.write_txn_markers(PID, 0, True, 0, [("gone", 0), ("t", 9), (OFFSETS_TOPIC, 3), ("t", 1)])
    assert out == {
        ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
        (OFFSETS_TOPIC, 3): E.INVALID_TOPIC_EXCEPTION,
        ("t", 1): E.NONE,
    }
    # A marker with no data in the partition is written but leaves no index entry.
    assert h.logs.get("t", 1).log_end_offset == 1
    assert (await read(h, 1, partition=1))["aborted_transactions"] == []


@pytest.mark.parametrize(
    ("answer", "version", "expected"),
    [
        (E.INVALID_TXN_STATE, 9, E.INVALID_TXN_STATE),
        (E.TRANSACTION_ABORTABLE, 10, E.INVALID_TXN_STATE),
        (E.TRANSACTION_ABORTABLE, 11, E.TRANSACTION_ABORTABLE),
        (E.PRODUCER_FENCED, 9, E.INVALID_PRODUCER_EPOCH),
    ],
)
async def test_verification_answers_as_add_partitions_to_txn_manager_maps_them(
    h: Harness, answer: int, version: int, expected: int
) -> None:
    calls = []

    def verifier(txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> int:
        calls.append((txn_id, pid, epoch, topic, partition))
        return answer

    h.dp.txn_verifier = verifier
    r = await txn_produce(h, [b"a"], 0, version=version)
    assert r["error_code"] == expected
    assert calls == [("tx", PID, 0, "t", 0)]
    assert h.logs.get("t", 0).log_end_offset == 0


async def test_verification_is_asked_once_per_transaction_and_partition(h: Harness) -> None:
    calls = []
    h.dp.txn_verifier = lambda *a: calls.append(a) or E.NONE
    await txn_produce(h, [b"a"], 0)
    await txn_produce(h, [b"b"], 1)
    assert len(calls) == 1  # hasOngoingTransaction: no verification needed
    await h.dp.write_txn_markers(PID, 0, True, 0, [("t", 0)])
    await txn_produce(h, [b"c"], 2)
    assert len(calls) == 2


async def test_list_offsets_read_committed_answers_the_lso(h: Harness) -> None:
    await h.produce("t", batch([b"p"], ts=NOW))
    await txn_produce(h, [b"a"], 0, ts=NOW + 5)
    assert (await h.list_offsets("t", 0, -1, isolation_level=1))["offset"] == 1
    assert (await h.list_offsets("t", 0, -1, isolation_level=0))["offset"] == 2
    # Partition.fetchOffsetForTimestamp: lookups only count below the last fetchable offset.
    assert (await h.list_offsets("t", 0, NOW + 1, isolation_level=1))["offset"] == -1
    assert (await h.list_offsets("t", 0, NOW + 1, isolation_level=0))["offset"] == 1
    assert (await h.list_offsets("t", 0, -3, isolation_level=1))["offset"] == -1
    assert (await h.list_offsets("t", 0, -2, isolation_level=1))["offset"] == 0


async def test_parked_read_committed_fetch_wakes_on_the_marker_not_the_data(h: Harness) -> None:
    await txn_produce(h, [b"a"], 0)
    # min_bytes above the marker's own size: what the marker made readable is what counts.
    req = h.fetch_request([("t", 0, 0)], max_wait_ms=5000, min_bytes=100, isolation_level=1)
    result = h.dp.fetch(req)
    assert result is None  # parked: nothing stable yet
    await txn_produce(h, [b"b"], 1)
    await asyncio.sleep(0.05)
    assert not req.answered.done()
    await h.dp.write_txn_markers(PID, 0, True, 0, [("t", 0)])
    resp = await asyncio.wait_for(req.answered, 1)
    p = resp["responses"][0]["partitions"][0]
    assert values_in(p["records"]) == [b"a", b"b"]


async def test_restart_keeps_the_open_transaction_and_the_aborted_index(h: Harness) -> None:
    await txn_produce(h, [b"aborted"], 0)
    await h.dp.write_txn_markers(PID, 0, False, 0, [("t", 0)])
    await h.produce("t", batch([b"plain"]))
    await txn_produce(h, [b"open"], 0, pid=PID + 1)
    await h.restart()
    p = await read(h, 1)
    assert p["last_stable_offset"] == 3
    assert p["aborted_transactions"] == [{"producer_id": PID, "first_offset": 0}]
    assert values_in(p["records"], p["aborted_transactions"]) == [b"plain"]
    # The producer state came back too: the fenced epoch and the open transaction.
    assert (await txn_produce(h, [b"x"], 5, pid=PID + 1))["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await h.dp.write_txn_markers(PID + 1, 0, True, 0, [("t", 0)]) == {("t", 0): E.NONE}
    p = await read(h, 1)
    assert p["last_stable_offset"] == 5
    assert values_in(p["records"], p["aborted_transactions"]) == [b"plain", b"open"]


async def test_delete_records_drops_index_entries_below_the_log_start(h: Harness) -> None:
    await txn_produce(h, [b"a"], 0)
    await h.dp.write_txn_markers(PID, 0, False, 0, [("t", 0)])
    await h.produce("t", batch([b"p"]))
    h.logs.get("t", 0).delete_records_before(2)
    await h.dp.run_retention()
    assert h.dp.state.producers[("t", 0)].aborted == []


async def describe(h: Harness, topics: list[tuple[str, list[int]]]) -> list[dict]:
    body = {"topics": [{"name": n, "partition_indexes": ps} for n, ps in topics]}
    resp = await call(h.dp.describe_producers, FakeRequest("DescribeProducers", 0, body))
    assert resp is not None
    return [p for t in resp["topics"] for p in t["partitions"]]


async def test_describe_producers_answers_each_partitions_producers_also_after_a_restart(h: Harness) -> None:
    await h.produce("t", batch([b"i"], pid=3, epoch=2, seq=0))  # idempotent
    await txn_produce(h, [b"a", b"b"], 0)  # open at offset 1
    await h.dp.write_txn_markers(9, 1, False, 4, [("t", 1)])  # a marker alone
    asked = [("t", [0, 1, 5]), ("nope", [0]), ("bad/name", [0])]
    before = await describe(h, asked)
    p0, p1, p5, unknown, invalid = before
    assert sorted(p0["active_producers"], key=lambda p: p["producer_id"]) == [
        {
            "producer_id": 3,
            "producer_epoch": 2,
            "last_sequence": 0,
            "last_timestamp": NOW,
            "coordinator_epoch": -1,
            "current_txn_start_offset": -1,
        },
        {
            "producer_id": PID,
            "producer_epoch": 0,
            "last_sequence": 1,
            "last_timestamp": NOW + 1,
            "coordinator_epoch": -1,
            "current_txn_start_offset": 1,
        },
    ]
    assert p1["active_producers"] == [
        {
            "producer_id": 9,
            "producer_epoch": 1,
            "last_sequence": -1,
            "last_timestamp": NOW,
            "coordinator_epoch": 4,
            "current_txn_start_offset": -1,
        }
    ]
    assert [p["error_code"] for p in (p0, p1, p5, unknown, invalid)] == [
        E.NONE,
        E.NONE,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.INVALID_TOPIC_EXCEPTION,
    ]
    await h.restart()
    after = await describe(h, asked)
    for p in (*before, *after):
        p["active_producers"].sort(key=lambda x: x["producer_id"])
    assert after == before


async def test_compaction_never_lets_an_aborted_or_open_transaction_supersede_committed_data(h: Harness) -> None:
    h.create("c", 1, cleanup_policy="compact")
    plog = h.logs.get("c", 0)

    async def put(value: bytes, *, pid: int = -1, seq: int = 0) -> None:
        raw = batch([value], keys=[b"k"], pid=pid, epoch=0 if pid >= 0 else -1, seq=seq, transactional=pid >= 0)
        r = await h.produce("c", raw, txn_id="tx" if pid >= 0 else None)
        assert r["error_code"] == E.NONE

    async def committed_values() -> list[bytes]:
        p = (await h.fetch([("c", 0, plog.log_start_offset)], isolation_level=1))["responses"][0]["partitions"][0]
        return values_in(p["records"], p["aborted_transactions"])

    await put(b"v1")
    await put(b"aborted", pid=PID)
    await h.dp.write_txn_markers(PID, 0, False, 0, [("c", 0)])
    plog.roll()
    await h.dp.run_cleaner()
    assert await committed_values() == [b"v1"]
    for seq in range(4):  # enough to make the log dirty enough for a pass
        await put(b"open%d" % seq, pid=PID + 1, seq=seq)
    plog.roll()
    await h.dp.run_cleaner()
    assert await committed_values() == [b"v1"]
    await h.dp.write_txn_markers(PID + 1, 0, True, 0, [("c", 0)])
    plog.roll()
    await h.dp.run_cleaner()
    # LogCleaner: the aborted record is gone and superseded nothing; the committed one won.
    assert await committed_values() == [b"open3"]
    kept = [v for v in rec.iter_batches(plog.read(0, 1 << 20)) if not v.is_control]
    assert [r.value for v in kept for r in v.records()] == [b"open3"]


def test_collect_aborted_finds_a_long_transaction_that_ends_after_a_short_one() -> None:
    # Kafka's TransactionIndex.collectAbortedTxns stops at the first entry ending past the fetch's
    # upper bound; a longer transaction ending later but starting inside the range is listed here.
    pp = PartitionProducers()
    for pid, first, last in ((3, 2, 5), (1, 0, 10)):
        txn = OpenTxn(pid, first, provisional=False)
        pp.unstable.append(txn)
        pp.marker_written(txn, False, last)
    assert pp.collect_aborted(0, 3) == [AbortedTxn(3, 2, 5), AbortedTxn(1, 0, 10)]
    assert pp.collect_aborted(6, 8) == [AbortedTxn(1, 0, 10)]
    assert pp.collect_aborted(11, 20) == []
    pp.truncate_head(6)
    assert pp.aborted == [AbortedTxn(1, 0, 10)]


DAY_MS = 24 * 3600 * 1000


async def test_a_transaction_older_than_producer_expiry_still_holds_the_lso_after_a_restart(h: Harness) -> None:
    # Only logs that never held a transaction are rebuilt from their recent segments.
    await txn_produce(h, [b"old"], 0, ts=NOW - 30 * DAY_MS)
    h.logs.get("t", 0).roll()
    await h.produce("t", batch([b"new"], ts=NOW))
    await h.restart()
    p = await read(h, 1)
    assert (p["last_stable_offset"], p["high_watermark"]) == (0, 2)


async def test_a_log_without_transactions_is_rebuilt_from_its_recent_segments(h: Harness) -> None:
    await h.produce("t", batch([b"old"], pid=3, epoch=0, seq=0, ts=NOW - 30 * DAY_MS))
    h.logs.get("t", 0).roll()
    await h.produce("t", batch([b"new"], pid=4, epoch=0, seq=0, ts=NOW))
    await h.restart()
    plog = h.logs.get("t", 0)
    assert not plog.has_transactions
    starts = []
    real = plog.iter_batches
    plog.iter_batches = lambda start=None: starts.append(start) or real(start)  # type: ignore[method-assign]
    assert (await h.produce("t", batch([b"n2"], pid=4, epoch=0, seq=1)))["error_code"] == E.NONE
    assert starts == [1]  # the expired producer's segment is not read
    assert list(h.dp.state.producers[("t", 0)].producers) == [4]


async def crash_restart(h: Harness) -> None:
    """The process dies: no DataPlane.close (no shutdown snapshot), no clean-shutdown marker."""
    for topic, p in h.logs.partitions():
        h.logs.get(topic, p).abandon()
    os.close(h.logs._lock_fd)  # the dead process's lock goes with it
    h.logs._lock_fd = None
    h.open()


@pytest.mark.parametrize("restart", ["clean", "crash"])
async def test_restart_after_many_transactions_reads_only_the_batches_after_the_latest_snapshot(
    tmp_path: Path, restart: str
) -> None:
    """UnifiedLog.loadProducerState: the state comes from the newest snapshot (taken on segment
    roll, ProducerStateManager.takeSnapshot, and at a clean shutdown) and the .txnindex files;
    only the batches after the snapshot are read."""
    h = Harness(tmp_path / "data")
    h.create("s", 1, segment_bytes="800")
    for i in range(40):
        pid = PID + i % 3
        r = await h.produce("s", txn_batch([b"v%d" % i], i // 3, pid=pid), txn_id="tx")
        assert r["error_code"] == E.NONE
        assert await h.dp.write_txn_markers(pid, 0, i % 4 != 0, 0, [("s", 0)]) == {("s", 0): E.NONE}
    await h.produce("s", txn_batch([b"open"], 14, pid=PID), txn_id="tx")  # an open transaction holds the LSO
    before = (await h.fetch([("s", 0, 0)], isolation_level=1))["responses"][0]["partitions"][0]
    plog = h.logs.get("s", 0)
    total = sum(1 for _ in plog.iter_batches(0))
    assert len(plog.segments) > 6
    if restart == "clean":
        await h.restart()
    else:
        while h.dp.producer_states.snapshot_writes:  # the process dies once the snapshot of the last roll is written
            await asyncio.gather(*h.dp.producer_states.snapshot_writes)
        await crash_restart(h)
    after = (await h.fetch([("s", 0, 0)], isolation_level=1))["responses"][0]["partitions"][0]
    producers = h.dp.state.producers[("s", 0)]
    plog = h.logs.get("s", 0)
    assert producers.loaded_from > 0
    # Read: the batches after the snapshot only (a crash loses the shutdown snapshot: the last
    # segment's batches are read again).
    assert producers.replayed == sum(1 for _ in plog.iter_batches(producers.loaded_from)) < total // 4
    if restart == "clean":
        assert producers.replayed == 0
    for key in ("last_stable_offset", "aborted_transactions", "records", "high_watermark"):
        assert after[key] == before[key], key
    assert len(after["aborted_transactions"]) == 10
    assert values_in(after["records"], after["aborted_transactions"]) == [b"v%d" % i for i in range(40) if i % 4 != 0]
    # The producers carry on: the open transaction commits, sequences continue.
    assert await h.dp.write_txn_markers(PID, 0, True, 0, [("s", 0)]) == {("s", 0): E.NONE}
    assert (await h.produce("s", txn_batch([b"x"], 15, pid=PID), txn_id="tx"))["error_code"] == E.NONE
    await h.close()
