"""Produced batches are framed in place (``records.check_record_frames``), not decoded: every batch
``build_batch`` makes passes, and a batch whose CRC matches but whose records do not tile it
(count, lengths, trailing bytes) is refused by the append as the decoder refused it (issue 26)."""

from __future__ import annotations

import struct

import pytest
from groupd.storage import records as rec
from groupd.storage.errors import CorruptRecordError
from groupd.storage.log import LogConfig, PartitionLog
from hypothesis import given, settings
from hypothesis import strategies as st

RECORD = st.tuples(
    st.none() | st.binary(max_size=300),
    st.none() | st.binary(max_size=300),
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=20)), max_size=3).map(tuple),
    st.integers(0, 2**40),
)


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into(">i", buf, 8, len(buf) - 12)  # batch length
    struct.pack_into(">I", buf, rec.CRC_OFFSET, rec.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def _with_count(raw: bytes, count: int) -> bytes:
    buf = bytearray(raw)
    struct.pack_into(">i", buf, rec.HEADER_SIZE - 4, count)
    struct.pack_into(">i", buf, 23, count - 1)  # lastOffsetDelta, so that the header stays coherent
    return _recrc(buf)


@settings(max_examples=200, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=40))
def test_frames_agree_with_the_decoder(records):
    raw = rec.build_batch(records)
    view = rec.BatchView(raw, 0)
    rec.check_record_frames(raw, rec.HEADER_SIZE, len(raw), view.record_count)
    assert len(view.records_kv()) == len(records)
    for count in (len(records) - 1, len(records) + 1):
        with pytest.raises(CorruptRecordError):
            rec.check_record_frames(raw, rec.HEADER_SIZE, len(raw), count)
    with pytest.raises(CorruptRecordError):
        rec.check_record_frames(raw + b"\x00", rec.HEADER_SIZE, len(raw) + 1, view.record_count)
    with pytest.raises(CorruptRecordError):  # the last record cut short, inside a longer buffer
        rec.check_record_frames(raw + b"\x00" * 400, rec.HEADER_SIZE, len(raw) - 1, view.record_count)


def test_append_refuses_batches_whose_records_do_not_tile_them(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    try:
        good = rec.build_batch([(b"k", b"v" * 10, (), 5), (None, b"w", (), 6)])
        negative = bytearray(good)
        negative[rec.HEADER_SIZE] = 0x01  # zig-zag -1: a negative record length
        bad = {
            "count above the records": _with_count(good, 3),
            "count below the records": _with_count(good, 1),
            "trailing bytes": _recrc(bytearray(good + b"\x02\x00")),
            "negative length": _recrc(negative),
        }
        results = plog.append_items([good, *bad.values()])
        assert results[0] == (0, 1)
        for what, r in zip(bad, results[1:]):
            assert isinstance(r, CorruptRecordError), what
        assert plog.log_end_offset == 2
    finally:
        plog.close()


def test_a_checked_view_is_framed_and_sized_but_its_crc_is_not_recomputed(tmp_path):
    """Produce checks a batch's CRC and header once (``check_batch``) and hands the log its
    ``BatchView``: the log still refuses bad framing and a batch over the size limit, and takes
    the CRC as checked (raw bytes still get the full check)."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(max_message_bytes=200))
    try:
        good = rec.build_batch([(b"k", b"v" * 10, (), 5), (None, b"w", (), 6)])
        stale_crc = bytearray(good)
        stale_crc[-1] ^= 0xFF  # a value byte: the CRC no longer matches, the framing still does
        big = rec.build_batch([(None, b"x" * 300, (), 5)])
        views = [rec.BatchView(b, 0) for b in (good, _with_count(good, 3), big, bytes(stale_crc))]
        results = plog.append_items([*views, bytes(stale_crc)])
        assert results[0] == (0, 1)
        assert isinstance(results[1], CorruptRecordError)
        assert type(results[2]).__name__ == "RecordTooLargeError"
        assert results[3] == (2, 3)  # the caller vouched for this CRC
        assert isinstance(results[4], CorruptRecordError)  # the same bytes unchecked: refused
        assert plog.log_end_offset == 4
    finally:
        plog.close()


def test_our_own_batch_is_only_sized_and_a_clients_same_bytes_get_every_check(tmp_path, monkeypatch):
    """The coordinator's commit batch (``OwnBatch``: built by our encoder a moment before) is
    appended without a frame walk or CRC check; the size limit still holds, and the same bytes from
    a client (raw bytes or a checked ``BatchView``) are walked and refused as before."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(max_message_bytes=200))
    walks: list[int] = []
    real_walk = rec.check_record_frames

    def counting_walk(*args: object) -> None:
        walks.append(1)
        real_walk(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(rec, "check_record_frames", counting_walk)
    try:
        good = rec.build_batch([(b"k", b"v" * 10, (), 5), (None, b"w", (), 6)])
        big = rec.build_batch([(None, b"x" * 300, (), 5)])
        assert plog.append_items([rec.OwnBatch(good)]) == [(0, 1)]
        assert walks == []  # nothing walked
        (too_big,) = plog.append_items([rec.OwnBatch(big)])
        assert type(too_big).__name__ == "RecordTooLargeError"
        mis_framed = _with_count(good, 3)  # CRC right, records do not tile the batch
        results = plog.append_items([mis_framed, rec.BatchView(mis_framed, 0), good])
        assert isinstance(results[0], CorruptRecordError)
        assert isinstance(results[1], CorruptRecordError)
        assert results[2] == (2, 3)
        assert walks  # a client's batches were walked
        assert [r.value for b in plog.iter_batches(0) for r in b.records()] == [b"v" * 10, b"w"] * 2
    finally:
        plog.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=20), st.data())
def test_the_step_table_agrees_with_the_exact_walk(records, data):
    """``check_record_frames`` frames through a table of two-byte steps and falls back to the exact
    walk only to word a refusal: on any bytes both accept and refuse alike, with the same message
    (non-minimal and long varints, zero and negative lengths, bytes past the batch)."""
    raw = bytearray(rec.build_batch(records))
    for _ in range(data.draw(st.integers(0, 3))):
        raw[data.draw(st.integers(rec.HEADER_SIZE, len(raw) - 1))] = data.draw(
            st.sampled_from([0x00, 0x01, 0x80, 0xFF, 0x02, 0x7F])
        )
    tail = data.draw(st.binary(max_size=4))
    buf = bytes(raw) + tail
    end = data.draw(st.integers(rec.HEADER_SIZE, len(buf)))
    count = data.draw(st.integers(0, min(len(records) + 2, end - rec.HEADER_SIZE)))  # more: refused first
    outcomes = []
    for check in (rec.check_record_frames, rec._check_frames_exactly):
        try:
            check(buf, rec.HEADER_SIZE, end, count)
            outcomes.append(None)
        except CorruptRecordError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]


def test_a_long_record_and_a_non_minimal_zero_length():
    long = rec.build_batch([(None, b"x" * 20_000, (), 5), (b"k", b"v", (), 6)])
    rec.check_record_frames(long, rec.HEADER_SIZE, len(long), 2)
    zero = bytearray(rec.build_batch([(None, b"v", (), 5)]))
    # the record's length, 0x80 0x00 (zero, in two bytes) in place of its one-byte varint
    zero[rec.HEADER_SIZE : rec.HEADER_SIZE + 1] = b"\x80\x00"
    with pytest.raises(CorruptRecordError, match="not positive"):
        rec.check_record_frames(bytes(zero), rec.HEADER_SIZE, len(zero), 1)


def test_a_write_of_own_batches_only_is_what_the_general_path_writes(tmp_path):
    """An append of nothing but ``OwnBatch`` items (``PartitionLog._prepare_own``: the coordinator's
    commits) assigns offsets, stamps the leader epoch and refuses an oversized item exactly as the
    general path does with the same batches as checked ``BatchView``s: same results, same bytes."""
    batches = [
        rec.build_batch([(b"k%d" % i, b"v" * (10 + 40 * i), (), 5 + i) for _ in range(1 + i % 3)]) for i in range(6)
    ]
    logs = {}
    for kind in ("own", "general"):
        plog = PartitionLog.open(tmp_path / kind / "t-0", LogConfig(max_message_bytes=250, index_interval_bytes=100))
        wrap = rec.OwnBatch if kind == "own" else rec.BatchView
        first = plog.append_items([wrap(b) for b in batches[:4]])
        second = plog.append_items([wrap(batches[4]), wrap(batches[5])])
        logs[kind] = (
            [type(r).__name__ if isinstance(r, Exception) else r for r in first + second],
            [s.read_bytes() for s in sorted((tmp_path / kind / "t-0").glob("*.log"))],
            [(list(s.idx_offsets), list(s.idx_positions)) for s in plog.segments],
        )
        plog.close()
    assert logs["own"] == logs["general"]
    results = logs["own"][0]
    assert "RecordTooLargeError" in results and any(type(r) is tuple for r in results)
