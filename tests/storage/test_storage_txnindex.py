"""Kafka's transaction index and producer-state snapshot files (storage/txnindex.py): their byte
layout (TransactionIndex/AbortedTxn, ProducerStateManager.writeSnapshot/readSnapshot), damage
detection, and their life with the segments (retention, DeleteRecords, truncation, recovery,
compaction's crash-safe swap)."""

from __future__ import annotations

import struct
from dataclasses import replace

import crc32c
import pytest
from groupd.storage import records as R
from groupd.storage import txnindex as txi
from groupd.storage.compaction import compact
from groupd.storage.log import PartitionLog
from groupd.storage.markers import end_txn_marker_batch
from storage_helpers import small_config

T0 = 1_000_000


def test_aborted_txn_entry_is_kafkas_34_byte_layout() -> None:
    # AbortedTxn: version int16 0, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64.
    raw = txi.encode_entry(txi.TxnIndexEntry(0x0102030405060708, 5, 9, 7))
    assert raw == bytes.fromhex(
        "0000" "0102030405060708" "0000000000000005" "0000000000000009" "0000000000000007"
    )  # fmt: skip
    assert txi.decode_entries(raw, 0, 10) == [txi.TxnIndexEntry(0x0102030405060708, 5, 9, 7)]


def test_transaction_index_sanity_check_and_torn_tail() -> None:
    a, b = txi.TxnIndexEntry(1, 100, 105, 106), txi.TxnIndexEntry(2, 101, 107, 108)
    data = txi.encode_entry(a) + txi.encode_entry(b)
    assert txi.decode_entries(data + data[:20], 100, 200) == [a, b]  # a torn last entry is left out
    with pytest.raises(txi.CorruptIndexError):
        txi.decode_entries(data, 106, 200)  # a marker below the segment (TransactionIndex.sanityCheck)
    with pytest.raises(txi.CorruptIndexError):
        txi.decode_entries(data, 100, 107)  # a marker past the segment's end
    with pytest.raises(txi.CorruptIndexError):
        txi.decode_entries(txi.encode_entry(b) + txi.encode_entry(a), 100, 200)  # out of order
    with pytest.raises(txi.CorruptIndexError):
        txi.decode_entries(b"\x00\x01" + data[2:], 100, 200)  # unknown version


def test_producer_snapshot_is_kafkas_layout_with_crc32c_of_the_rest() -> None:
    e = txi.SnapshotEntry(
        producer_id=7,
        epoch=3,
        last_sequence=41,
        last_offset=1000,
        offset_delta=9,
        timestamp=1_700_000_000_000,
        coordinator_epoch=2,
        current_txn_first_offset=-1,
    )
    raw = txi.encode_snapshot([e])
    body = bytes.fromhex(
        "00000001"  # entries array length
        "0000000000000007" "0003" "00000029" "00000000000003e8" "00000009"
        "0000018bcfe56800" "00000002" "ffffffffffffffff"
    )  # fmt: skip
    assert raw == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert txi.decode_snapshot(raw) == [e]
    assert txi.decode_snapshot(txi.encode_snapshot([])) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-1],  # torn
        lambda b: b[:4],
        lambda b: b[:-3] + bytes([b[-3] ^ 1]) + b[-2:],  # a flipped bit: CRC
        lambda b: b"\x00\x02" + b[2:],  # unknown version
    ],
)
def test_a_damaged_snapshot_is_refused(damage) -> None:
    raw = txi.encode_snapshot([txi.SnapshotEntry(1, 0, 5, 10, 5, T0, 0, 3)])
    with pytest.raises(txi.CorruptSnapshotError):
        txi.decode_snapshot(damage(raw))


def test_loading_falls_back_to_the_previous_snapshot_and_drops_bad_or_out_of_range_ones(tmp_path) -> None:
    good = txi.encode_snapshot([txi.SnapshotEntry(1, 0, 5, 10, 5, T0, 0, -1)])
    for offset in (10, 20, 30, 40):
        txi.snapshot_path(tmp_path, offset).write_bytes(good)
    txi.snapshot_path(tmp_path, 30).write_bytes(good[:-1])
    # 40 is past the log end (35), 30 is torn: ProducerStateManager.loadFromSnapshot deletes both.
    assert txi.read_latest_snapshot(tmp_path, 0, 35) == (20, txi.decode_snapshot(good))
    assert txi.list_snapshots(tmp_path) == [10, 20]
    assert txi.read_latest_snapshot(tmp_path, 21, 35) is None  # below the log start: deleteSnapshotsBefore
    assert txi.list_snapshots(tmp_path) == []


def test_write_snapshot_keeps_the_newest_two(tmp_path) -> None:
    for offset in (5, 10, 15, 20):
        txi.write_snapshot(tmp_path, offset, txi.encode_snapshot([]), [])
    assert txi.list_snapshots(tmp_path) == [15, 20]
    assert not list(tmp_path.glob("*.tmp"))


def test_load_indexes_cuts_what_the_replay_will_rebuild(tmp_path) -> None:
    a, b, c = txi.TxnIndexEntry(1, 0, 4, 5), txi.TxnIndexEntry(2, 1, 8, 9), txi.TxnIndexEntry(1, 12, 14, 15)
    txi.append_entry(tmp_path, 0, a)
    txi.append_entry(tmp_path, 0, b)
    txi.append_entry(tmp_path, 10, c)
    with open(txi.txn_index_path(tmp_path, 10), "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn append
    assert txi.load_indexes(tmp_path, [(0, 10), (10, 20)], 20) == ([a, b, c], True)
    assert txi.load_indexes(tmp_path, [(0, 10), (10, 20)], 8) == ([a], True)
    assert txi.txn_index_path(tmp_path, 0).stat().st_size == 34
    assert not txi.txn_index_path(tmp_path, 10).exists()
    # The next append after a torn one starts at the entry boundary.
    txi.txn_index_path(tmp_path, 0).write_bytes(txi.encode_entry(a) + b"\x00\x00\x00")
    txi.append_entry(tmp_path, 0, b)
    assert txi.read_index(tmp_path, 0, 10) == [a, b]
    # The marker of an entry past the log end was lost with the log's tail: cut, like the others
    # past the snapshot.
    txi.txn_index_path(tmp_path, 0).write_bytes(txi.encode_entry(a) + txi.encode_entry(txi.TxnIndexEntry(1, 5, 44, 45)))
    assert txi.load_indexes(tmp_path, [(0, 10)], 10) == ([a], True)
    # A marker below the snapshot but outside its segment: nothing can be trusted.
    txi.txn_index_path(tmp_path, 0).write_bytes(txi.encode_entry(txi.TxnIndexEntry(1, 0, 44, 45)))
    assert txi.load_indexes(tmp_path, [(0, 10), (10, 50)], 50) == ([], False)


# --- with the log ---------------------------------------------------------------------------------
def txn(plog: PartitionLog, pid: int, n: int = 3) -> int:
    return plog.append_batch(
        R.build_batch([(b"k", b"v" * 200, [], T0)] * n, producer_id=pid, producer_epoch=0, transactional=True)
    )[0]


def abort(plog: PartitionLog, pid: int, first: int) -> txi.TxnIndexEntry:
    """An aborted transaction's marker and its index entry, as the broker writes them."""
    base = plog.append_batch(end_txn_marker_batch(pid, 0, False, 0, T0))[0]
    entry = txi.TxnIndexEntry(pid, first, base, base + 1)
    seg = max(s.base_offset for s in plog.segments if s.base_offset <= base)
    txi.append_entry(plog.path, seg, entry)
    return entry


def aborted_log(path, n: int = 12, **kw) -> tuple[PartitionLog, list[txi.TxnIndexEntry]]:
    plog = PartitionLog.open(path, small_config(segment_bytes=1500, **kw))
    plog.note_transactions()
    entries = []
    for i in range(n):
        first = txn(plog, 1 + i % 2)
        entries.append(abort(plog, 1 + i % 2, first))
        plog.append_records([(b"k%d" % i, b"x" * 100, [], T0)])
    assert len(plog.segments) > n // 3
    return plog, entries


def all_entries(plog: PartitionLog) -> list[txi.TxnIndexEntry]:
    bounds = txi.segment_bounds([s.base_offset for s in plog.segments], plog.log_end_offset)
    entries, ok = txi.load_indexes(plog.path, bounds, plog.log_end_offset)
    assert ok
    return entries


def test_retention_and_delete_records_drop_the_index_and_older_snapshots_with_segments(tmp_path) -> None:
    plog, entries = aborted_log(tmp_path / "t-0")
    first_seg = plog.segments[0].base_offset
    txi.write_snapshot(plog.path, 2, txi.encode_snapshot([]), [])
    txi.write_snapshot(plog.path, plog.segments[3].base_offset, txi.encode_snapshot([]), [])
    assert txi.txn_index_path(plog.path, first_seg).exists()
    cut = plog.segments[2].base_offset
    plog.delete_records_before(cut)
    assert not txi.txn_index_path(plog.path, first_seg).exists()  # LogSegment.deleteIfExists
    assert all_entries(plog) == [e for e in entries if e.last_offset >= cut]
    assert txi.list_snapshots(plog.path) == [plog.segments[1].base_offset]  # deleteSnapshotsBefore
    plog.close()


def test_truncation_cuts_the_index_and_drops_snapshots_past_it(tmp_path) -> None:
    plog, entries = aborted_log(tmp_path / "t-0")
    cut = entries[-3].last_offset  # inside the log: the marker at `cut` goes
    txi.write_snapshot(plog.path, cut + 1, txi.encode_snapshot([]), [])
    txi.write_snapshot(plog.path, cut - 1, txi.encode_snapshot([]), [])
    plog.truncate_to(cut)
    assert all_entries(plog) == entries[:-3]  # LogSegment.truncateTo's txnIndex.truncateTo
    assert txi.list_snapshots(plog.path) == [cut - 1]  # ProducerStateManager.truncateAndReload
    plog.truncate_to(0)
    assert all_entries(plog) == [] and txi.list_snapshots(plog.path) == []
    plog.close()


def test_recovery_that_cuts_a_torn_tail_drops_snapshots_past_the_new_end(tmp_path) -> None:
    plog, _entries = aborted_log(tmp_path / "t-0", n=3)
    end = plog.log_end_offset
    active = plog.active_segment
    txi.write_snapshot(plog.path, end, txi.encode_snapshot([]), [])
    txi.write_snapshot(plog.path, active.base_offset, txi.encode_snapshot([]), [])
    plog.abandon()
    with open(active.log_path, "r+b") as f:  # the last batch is torn
        f.truncate(active.size - 10)
    reopened = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1500))
    assert reopened.log_end_offset < end
    assert txi.list_snapshots(reopened.path) == [active.base_offset]
    reopened.close()


def test_stray_index_of_a_vanished_segment_is_removed_at_open(tmp_path) -> None:
    plog, _ = aborted_log(tmp_path / "t-0", n=3)
    plog.close()
    stray = txi.txn_index_path(tmp_path / "t-0", 999_999)
    stray.write_bytes(txi.encode_entry(txi.TxnIndexEntry(1, 0, 999_999, 0)))
    PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1500)).close()
    assert not stray.exists()


COMPACT = dict(cleanup_policy="compact", delete_retention_ms=10**12)


def compacted_log(path) -> tuple[PartitionLog, list[txi.TxnIndexEntry]]:
    """Small segments that the cleaner merges, several to a group."""
    plog, entries = aborted_log(path, **COMPACT)
    plog.config = replace(plog.config, segment_bytes=4000)
    return plog, entries


def test_compaction_writes_the_merged_index_of_the_cleaned_segments(tmp_path) -> None:
    """LogCleaner.cleanInto: the cleaned segment's .txnindex holds the aborted transactions whose
    markers it keeps (every one: markers stay)."""
    plog, entries = compacted_log(tmp_path / "t-0")
    before = len(plog.segments)
    result = compact(plog, now=T0)
    assert result.groups_cleaned and len(plog.segments) < before
    assert all_entries(plog) == entries
    names = {p.name for p in plog.path.iterdir()}
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))]
    plog.close()


def _crash_points(tmp_path) -> list[str]:
    seen: list[str] = []
    plog, _ = compacted_log(tmp_path / "dry")
    compact(plog, now=T0, crash_hook=seen.append)
    plog.close()
    return seen[: seen.index("deleted_removed") + 1]


def test_a_crash_at_every_point_of_a_compaction_swap_keeps_every_index_entry(tmp_path) -> None:
    class Crash(Exception):
        pass

    points = _crash_points(tmp_path)
    assert any(p.endswith(".txnindex.swap") for p in points)
    for n, point in enumerate(points):

        def hook(name: str, point: str = point) -> None:
            if name == point:
                raise Crash(name)

        path = tmp_path / f"t-{n}"
        plog, entries = compacted_log(path)
        with pytest.raises(Crash):
            compact(plog, now=T0, crash_hook=hook)
        plog.abandon()
        reopened = PartitionLog.open(path, small_config(segment_bytes=1500, **COMPACT))
        assert all_entries(reopened) == entries, point
        compact(reopened, now=T0)
        assert all_entries(reopened) == entries, point
        reopened.close()


def test_compaction_drops_aborted_data_only_once_its_abort_marker_is_durable(tmp_path) -> None:
    """The data plane's aborts (from its producer state) may rest on a marker in the active
    segment, not yet fsynced: the cleaner makes it durable before dropping the data (a crash that
    lost the marker would leave the transaction open in the log with its data gone)."""
    plog = PartitionLog.open(tmp_path / "t-0", small_config(**COMPACT))
    plog.note_transactions()
    txn(plog, 1)
    plog.roll()
    marker = abort(plog, 1, 0)
    assert plog.needs_flush
    result = compact(plog, now=T0, stable_offset=plog.log_end_offset, aborted=lambda pid, base: pid == 1 and base == 0)
    assert result.records_dropped == 3
    assert not plog.needs_flush
    point = plog._recovery_point  # what a crash cannot take: up to the marker's end
    assert point is not None and point[2] == marker.last_offset + 1
    plog.close()
