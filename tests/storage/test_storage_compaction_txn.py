"""Compaction of a log with transactions (``__consumer_offsets`` holds TxnOffsetCommit batches and
their end markers): Kafka's LogCleaner drops aborted transactions' records without letting them
supersede anything and does not clean past the first open transaction. Here the log itself says
which transactions aborted and which are open (no producer state is kept for these partitions)."""

from __future__ import annotations

from groupd.storage import records as R
from groupd.storage.compaction import compact
from groupd.storage.log import PartitionLog
from groupd.storage.markers import end_txn_marker_batch, read_end_txn_marker
from storage_helpers import small_config

DAY = 24 * 3600 * 1000
T0 = 1_000_000
CFG = small_config(segment_bytes=1 << 20, cleanup_policy="compact", delete_retention_ms=DAY)


def plain(plog: PartitionLog, key: bytes, value: bytes | None) -> None:
    plog.append_records([(key, value, [], T0)])


def txn(plog: PartitionLog, pid: int, key: bytes, value: bytes | None) -> None:
    plog.append_batch(R.build_batch([(key, value, [], T0)], producer_id=pid, producer_epoch=0, transactional=True))


def end(plog: PartitionLog, pid: int, committed: bool) -> None:
    plog.append_batch(end_txn_marker_batch(pid, 0, committed, 0, T0))


def replayed(plog: PartitionLog) -> dict[bytes, bytes]:
    """key -> value as a replay that honours transactions builds it (pending kept aside)."""
    state: dict[bytes, bytes] = {}
    pending: dict[int, dict[bytes, bytes | None]] = {}
    for view in plog.iter_batches():
        if view.is_control:
            marker = read_end_txn_marker(view)
            decided = pending.pop(view.producer_id, {})
            if marker is not None and marker.committed:
                for k, v in decided.items():
                    if v is None:
                        state.pop(k, None)
                    else:
                        state[k] = v
            continue
        for r in view.records():
            if view.is_transactional:
                pending.setdefault(view.producer_id, {})[r.key] = r.value
            elif r.value is None:
                state.pop(r.key, None)
            else:
                state[r.key] = r.value
    return state


def batches(plog: PartitionLog) -> list[tuple[int, bool, bool, int]]:
    return [(v.producer_id, v.is_transactional, v.is_control, v.record_count) for v in plog.iter_batches()]


def test_aborted_records_supersede_nothing_and_are_dropped(tmp_path) -> None:
    plog = PartitionLog.open(tmp_path / "__consumer_offsets-3", CFG)
    plain(plog, b"a", b"committed")
    txn(plog, 7, b"a", b"aborted")
    end(plog, 7, False)
    plog.roll()
    before = replayed(plog)
    assert before == {b"a": b"committed"}
    result = compact(plog, now=T0)
    assert replayed(plog) == before
    assert result.records_dropped == 1
    assert (7, True, True, 1) in batches(plog)  # the marker stays


def test_nothing_is_cleaned_from_the_first_open_transaction_on(tmp_path) -> None:
    plog = PartitionLog.open(tmp_path / "__consumer_offsets-3", CFG)
    plain(plog, b"x", b"old")
    plain(plog, b"x", b"new")  # cleanable: before the open transaction
    plog.roll()
    plain(plog, b"b", b"committed")
    txn(plog, 8, b"b", b"pending")  # its marker is not written yet
    plain(plog, b"y", b"1")
    plog.roll()
    plain(plog, b"y", b"2")
    plog.roll()
    result = compact(plog, now=T0 + 2 * DAY)
    assert result.records_dropped == 1  # x=old only
    assert [(k, v) for _o, _t, k, v in plog.iter_records()] == [
        (b"x", b"new"),
        (b"b", b"committed"),
        (b"b", b"pending"),
        (b"y", b"1"),
        (b"y", b"2"),
    ]
    end(plog, 8, False)  # aborted: b stays committed
    assert replayed(plog) == {b"x": b"new", b"b": b"committed", b"y": b"2"}


def test_markers_stay_even_when_their_data_is_gone(tmp_path) -> None:
    # groupd keeps markers (Kafka drops them after delete.retention.ms once their data is gone):
    # a few bytes each, and no reader can then take a batch left behind for an open transaction.
    plog = PartitionLog.open(tmp_path / "__consumer_offsets-3", CFG)
    txn(plog, 9, b"c", b"txn")
    end(plog, 9, True)
    plain(plog, b"c", b"later")  # supersedes the transaction's only record
    plog.roll()
    result = compact(plog, now=T0 + 2 * DAY)
    assert result.records_dropped == 1
    assert [b for b in batches(plog) if b[2]] == [(9, True, True, 1)]
    assert replayed(plog) == {b"c": b"later"}
