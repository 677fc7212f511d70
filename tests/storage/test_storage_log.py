"""PartitionLog: appends, segment rolls, reads, indexes, timestamps, truncation and retention."""

from __future__ import annotations

import os
import struct

import pytest
from groupd.storage import records as R
from groupd.storage.errors import CorruptRecordError, OffsetOutOfRangeError, RecordTooLargeError
from groupd.storage.log import FileOps, PartitionLog
from kafka.record.default_records import DefaultRecordBatchBuilder
from storage_helpers import fill, records_via_kafka_python, small_config


def test_append_read_round_trip_and_offsets(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(file_ops=FileOps()))  # real fsyncs
    assert (plog.log_start_offset, plog.log_end_offset) == (0, 0)
    assert plog.append_records([(b"a", b"1", [], 10)]) == (0, 0)
    assert plog.append_records([(b"b", b"2", [], 11), (None, None, [("h", b"x")], 12)]) == (1, 2)
    assert plog.log_end_offset == 3
    assert list(plog.iter_records()) == [(0, 10, b"a", b"1"), (1, 11, b"b", b"2"), (2, 12, None, None)]
    assert next(iter(plog.iter_records(2, full=True))).headers == (("h", b"x"),)
    assert next(iter(plog.iter_records(1)))[0] == 1
    assert list(plog.iter_records(3)) == []
    plog.close()


def test_segments_roll_at_segment_bytes_and_are_named_by_base_offset(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=2000))
    expected = fill(plog, 200)
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert len(names) > 5
    bases = [s.base_offset for s in plog.segments]
    assert names == [f"{b:020d}.log" for b in bases]
    for seg in plog.segments[:-1]:
        assert 0 < seg.size <= 2000
    # Each segment starts where the previous one ended.
    for prev, nxt in zip(plog.segments, plog.segments[1:]):
        assert prev.read_next_offset() == nxt.base_offset
    assert list(plog.iter_records()) == expected
    assert records_via_kafka_python(tmp_path / "t-0") == expected
    plog.validate_all()
    plog.close()


def test_segment_ms_rolls_on_record_timestamps(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=10**6, segment_ms=1000))
    plog.append_records([(b"k", b"v", [], 10_000)])
    plog.append_records([(b"k", b"v", [], 10_900)])
    assert len(plog.segments) == 1
    plog.append_records([(b"k", b"v", [], 11_001)])
    assert [s.base_offset for s in plog.segments] == [0, 2]
    plog.close()


def test_offset_index_and_time_index_files_use_kafka_entry_formats(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=10**6, index_interval_bytes=500))
    fill(plog, 100)
    plog.close()
    seg = tmp_path / "t-0" / "00000000000000000000"
    idx = seg.with_suffix(".index").read_bytes()
    tix = seg.with_suffix(".timeindex").read_bytes()
    assert len(idx) % 8 == 0 and len(idx) // 8 >= 5
    assert len(tix) % 12 == 0 and len(tix) >= 12
    data = seg.with_suffix(".log").read_bytes()
    starts = {v.position: v for v in R.iter_batches(data)}
    prev_pos = 0
    for rel, pos in struct.iter_unpack(">ii", idx):
        view = starts[pos]  # every entry points at a batch start...
        assert view.last_offset == rel  # ...and maps that batch's last offset to it, as Kafka does
        assert pos - prev_pos > 0
        prev_pos = pos
    ts_entries = list(struct.iter_unpack(">qi", tix))
    assert [t for t, _ in ts_entries] == sorted({t for t, _ in ts_entries})
    assert ts_entries[-1][0] == max(v.max_timestamp for v in starts.values())


def test_read_returns_whole_batches_and_honours_max_bytes(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1500))
    expected = fill(plog, 80)
    sizes = [v.size for v in plog.iter_batches()]
    batch_of = {}
    for v in plog.iter_batches():
        for o in range(v.base_offset, v.last_offset + 1):
            batch_of[o] = v
    for offset in range(0, plog.log_end_offset, 7):
        for max_bytes in (1, 200, 1000, 5000):
            data = plog.read(offset, max_bytes)
            views = list(R.iter_batches(data, strict=True))
            assert views, "at least one batch is always returned"
            assert views[0].base_offset == batch_of[offset].base_offset
            assert len(data) <= max(max_bytes, views[0].size)
            if len(views) > 1:
                assert len(data) <= max_bytes
            got = [r for v in views for r in v.records_kv()]
            assert got == [r for r in expected if views[0].base_offset <= r[0] <= views[-1].last_offset]
    assert plog.read(0, 1, min_one_batch=False) == b""
    assert plog.read(plog.log_end_offset, 100) == b""
    everything = plog.read(0, 10**9)
    assert len(everything) == sum(sizes)  # reads span segments
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(plog.log_end_offset + 1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 100)
    plog.close()


def test_read_gives_one_oversized_batch(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=10**6))
    plog.append_records([(b"k", b"x" * 5000, [], 1)])
    plog.append_records([(b"k", b"y", [], 2)])
    data = plog.read(0, 100)
    assert [v.base_offset for v in R.iter_batches(data, strict=True)] == [0]
    assert len(data) > 5000
    plog.close()


def test_offset_for_timestamp_matches_brute_force(tmp_path):
    import random

    rnd = random.Random(7)
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=3000, index_interval_bytes=300))
    expected = []
    for _ in range(150):
        # Out-of-order timestamps, as clients with skewed clocks produce.
        recs = [(b"k", b"v" * rnd.randint(0, 50), [], rnd.randint(0, 10_000)) for _ in range(rnd.randint(1, 4))]
        base, _ = plog.append_records(recs)
        expected.extend((base + i, r[3]) for i, r in enumerate(recs))

    def brute(ts):
        for off, t in expected:
            if t >= ts:
                return off, t
        return None

    for ts in [-5, 0, 1, 5000, 9999, 10_000, 10_001, *rnd.sample(range(10_000), 60)]:
        assert plog.offset_for_timestamp(ts) == brute(ts), ts
    top = max(t for _, t in expected)
    assert plog.max_timestamp() == (top, next(o for o, t in expected if t == top))
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=3000, index_interval_bytes=300))
    for ts in rnd.sample(range(10_000), 30):
        assert plog.offset_for_timestamp(ts) == brute(ts), ts
    assert plog.max_timestamp() == (top, next(o for o, t in expected if t == top))
    plog.close()


def kafka_python_batch(n: int, *, ts0: int = 1000, producer_id: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 30,
    )
    for i in range(n):
        builder.append(i, timestamp=ts0 + i, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    return bytes(builder.build())


def test_append_batch_assigns_offsets_without_touching_the_crc(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    plog.append_records([(b"x", b"y", [], 1)])
    raw = kafka_python_batch(5, producer_id=42)
    assert plog.append_batch(raw) == (1, 5)
    stored = plog.read(1, 10**6)
    assert stored[R.ATTRIBUTES_OFFSET - 4 :] == raw[R.ATTRIBUTES_OFFSET - 4 :]
    view = next(R.iter_batches(stored))
    assert view.crc_ok() and view.base_offset == 1 and view.producer_id == 42
    assert [r[0] for r in view.records_kv()] == [1, 2, 3, 4, 5]
    assert records_via_kafka_python(tmp_path / "t-0")[1:] == [
        (1 + i, 1000 + i, b"k%d" % i, b"v%d" % i) for i in range(5)
    ]
    plog.close()


def test_append_batch_with_log_append_time(tmp_path):
    plog = PartitionLog.open(
        tmp_path / "t-0", small_config(message_timestamp_type="LogAppendTime"), clock=lambda: 777_000
    )
    plog.append_batch(kafka_python_batch(3))
    plog.append_records([(b"k", b"v", [], 5)])
    assert [r[1] for r in plog.iter_records()] == [777_000] * 4
    assert all(r[1] == 777_000 for r in records_via_kafka_python(tmp_path / "t-0"))
    plog.append_batch(kafka_python_batch(1), log_append_time_ms=888_000)
    assert plog.max_timestamp() == (888_000, 4)
    plog.close()


def test_append_batch_rejects_bad_batches_and_leaves_the_log_alone(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(max_message_bytes=2000))
    good = kafka_python_batch(3)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        plog.append_batch(bytes(bad_crc))
    with pytest.raises(CorruptRecordError):
        plog.append_batch(good[:-3])
    with pytest.raises(CorruptRecordError):
        plog.append_batch(b"")
    miscounted = bytearray(good)
    struct.pack_into(">i", miscounted, 23, 5)  # lastOffsetDelta says 6 records, count says 3
    struct.pack_into(">I", miscounted, 17, R.compute_crc(miscounted, 0, len(miscounted)))
    with pytest.raises(CorruptRecordError):
        plog.append_batch(bytes(miscounted))
    with pytest.raises(RecordTooLargeError):
        plog.append_batch(R.build_batch([(b"k", b"x" * 3000, [], 1)]))
    assert plog.log_end_offset == 0 and plog.size_in_bytes == 0
    assert plog.append_batch(good) == (0, 2)
    plog.close()


def test_truncate_to_drops_the_batch_holding_the_offset_and_everything_after(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1500))
    expected = fill(plog, 100)
    batch_bases = [v.base_offset for v in plog.iter_batches()]
    target = batch_bases[len(batch_bases) // 2] + 1  # inside a batch (or the next one's start)
    cut = max(b for b in batch_bases if b <= target)
    plog.truncate_to(target)
    assert plog.log_end_offset == cut
    assert list(plog.iter_records()) == [r for r in expected if r[0] < cut]
    plog.validate_all()
    plog.append_records([(b"new", b"v", [], 5)])
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1500))
    assert list(plog.iter_records())[-1] == (cut, 5, b"new", b"v")
    plog.truncate_to(0)
    assert (plog.log_start_offset, plog.log_end_offset, list(plog.iter_records())) == (0, 0, [])
    plog.close()


def test_delete_records_before_advances_and_persists_log_start(tmp_path):
    cfg = small_config(segment_bytes=1500)
    plog = PartitionLog.open(tmp_path / "t-0", cfg)
    expected = fill(plog, 100)
    n_segments = len(plog.segments)
    assert plog.delete_records_before(150) == 150
    assert plog.log_start_offset == 150
    assert len(plog.segments) < n_segments
    assert plog.segments[0].base_offset <= 150
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(149, 100)
    assert list(plog.iter_records()) == [r for r in expected if r[0] >= 150]
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(plog.log_end_offset + 1)
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", cfg)
    assert plog.log_start_offset == 150
    assert next(iter(plog.iter_records()))[0] == 150
    plog.close()


def test_retention_by_time_and_by_size(tmp_path):
    cfg = small_config(segment_bytes=1000, retention_ms=1000, retention_bytes=None)
    plog = PartitionLog.open(tmp_path / "t-0", cfg)
    for i in range(60):
        plog.append_records([(b"k%d" % i, b"v" * 50, [], 10_000 + i * 100)])  # 6 s of data
    before = list(plog.iter_records())
    n = len(plog.segments)
    now = 10_000 + 59 * 100 + 500
    deleted = plog.apply_retention(now=now)
    assert deleted > 0 and len(plog.segments) == n - deleted
    start = plog.log_start_offset
    assert start == plog.segments[0].base_offset
    # Whole segments went, each only because its newest record was older than retention_ms...
    assert all(now - r[1] > 1000 for r in before if r[0] < start)
    # ...and the oldest survivor was kept because it still holds a young enough record.
    assert now - plog.segments[0].max_timestamp <= 1000
    assert list(plog.iter_records()) == [r for r in before if r[0] >= start]
    # Everything expired: even the active segment goes, and appends continue at the same offsets.
    leo = plog.log_end_offset
    plog.apply_retention(now=10**9)
    assert (plog.log_start_offset, plog.log_end_offset) == (leo, leo)
    assert list(plog.iter_records()) == []
    assert plog.append_records([(b"k", b"v", [], 10**9)]) == (leo, leo)
    plog.close()

    cfg = small_config(segment_bytes=1000, retention_ms=None, retention_bytes=2500)
    plog = PartitionLog.open(tmp_path / "t-1", cfg)
    fill(plog, 120)
    assert plog.size_in_bytes > 5000
    assert plog.apply_retention() > 0
    sizes = [s.size for s in plog.segments]
    assert sum(sizes) >= 2500 > sum(sizes) - sizes[0]  # deleting one more would go below the limit
    assert plog.log_start_offset == plog.segments[0].base_offset
    plog.close()


def test_operations_on_a_closed_log_fail_cleanly(tmp_path):
    from groupd.storage.errors import LogClosedError

    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    plog.append_records([(b"k", b"v", [], 1)])
    plog.close()
    with pytest.raises(LogClosedError):
        plog.append_records([(b"k", b"v", [], 1)])
    with pytest.raises(LogClosedError):
        plog.read(0, 10)
    assert os.path.exists(tmp_path / "t-0" / "clean-shutdown")


def test_note_transactions_is_durable_and_survives_reopen(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    assert not plog.has_transactions
    plog.note_transactions()
    plog.note_transactions()  # once is enough
    assert plog.has_transactions
    plog.close()
    assert PartitionLog.open(tmp_path / "t-0", small_config()).has_transactions
    assert not PartitionLog.open(tmp_path / "t-1", small_config()).has_transactions
