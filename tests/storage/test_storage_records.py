"""Record batch v2 codec: round trips, an independent decoder (kafka-python) and hostile input."""

from __future__ import annotations

import struct

import pytest
from groupd.storage import records as R
from groupd.storage.errors import CorruptRecordError, UnsupportedCompressionError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3)
timestamps = st.integers(min_value=0, max_value=2**45)
record_lists = st.lists(st.tuples(keys, values, headers, timestamps), min_size=1, max_size=30)


def kafka_python_records(data: bytes) -> list[tuple]:
    """Decode with kafka-python, checking every CRC on the way."""
    out = []
    mr = MemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, st.integers(min_value=0, max_value=2**40))
def test_build_decode_round_trip_agrees_with_kafka_python(records, base_offset):
    data = R.build_batch(records, base_offset=base_offset)
    view = R.BatchView(data)
    view.validate()
    assert view.base_offset == base_offset
    assert view.last_offset == base_offset + len(records) - 1
    assert view.record_count == len(records)
    assert view.max_timestamp == max(r[3] for r in records)
    assert view.size == len(data)
    expected = [(base_offset + i, r[3], r[0], r[1], tuple((k, v) for k, v in r[2])) for i, r in enumerate(records)]
    ours = [tuple(r) for r in view.records()]
    assert ours == expected
    assert kafka_python_records(data) == expected
    assert view.records_kv() == [e[:4] for e in expected]
    assert list(R.iter_records(data, full=True)) == expected


@settings(max_examples=25, deadline=None)
@given(record_lists)
def test_we_decode_what_kafka_python_builds(records):
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=7,
        producer_epoch=1,
        base_sequence=3,
        batch_size=1 << 30,
    )
    for i, (k, v, h, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=k, value=v, headers=list(h))
    data = bytes(builder.build())
    view = R.BatchView(data)
    view.validate()
    assert (view.producer_id, view.producer_epoch, view.base_sequence) == (7, 1, 3)
    assert [tuple(r) for r in view.records()] == [(i, r[3], r[0], r[1], tuple(r[2])) for i, r in enumerate(records)]


def test_gzip_batches_from_kafka_python_decode_and_ours_encode():
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=DefaultRecordBatch.CODEC_GZIP,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i in range(50):
        builder.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * 100, headers=[])
    data = bytes(builder.build())
    view = R.BatchView(data)
    view.validate()
    assert view.compression == R.COMPRESSION_GZIP
    assert [r[2] for r in view.records_kv()] == [b"k%d" % i for i in range(50)]

    ours = R.build_batch([(b"a", b"x" * 500, [], 5)] * 20, compression=R.COMPRESSION_GZIP)
    assert len(ours) < 500
    assert [r[3] for r in kafka_python_records(ours)] == [b"x" * 500] * 20


def test_missing_codec_is_reported_as_unsupported():
    data = bytearray(R.build_batch([(b"k", b"v", [], 1)]))
    struct.pack_into(">h", data, R.ATTRIBUTES_OFFSET, R.COMPRESSION_ZSTD)
    with pytest.raises((UnsupportedCompressionError, CorruptRecordError)):
        R.BatchView(bytes(data)).records()
    struct.pack_into(">h", data, R.ATTRIBUTES_OFFSET, 7)  # no such codec
    with pytest.raises(UnsupportedCompressionError):
        R.BatchView(bytes(data)).records()


def test_gzip_bomb_is_bounded():
    data = R.build_batch([(b"k", b"\0" * 1_000_000, [], 1)], compression=R.COMPRESSION_GZIP)
    with pytest.raises(CorruptRecordError):
        R.BatchView(data).records(max_decompressed=10_000)


def test_set_base_offset_keeps_crc_valid():
    data = bytearray(R.build_batch([(b"k", b"v", [], 1), (None, None, [], 2)]))
    crc_before = bytes(data[R.ATTRIBUTES_OFFSET - 4 :])
    R.set_base_offset(data, 0, 123456789, partition_leader_epoch=9)
    assert bytes(data[R.ATTRIBUTES_OFFSET - 4 :]) == crc_before  # CRC and covered bytes untouched
    view = R.BatchView(bytes(data))
    assert view.crc_ok()
    assert (view.base_offset, view.partition_leader_epoch) == (123456789, 9)
    assert [r.offset for r in view.records()] == [123456789, 123456790]


def test_set_log_append_time_recomputes_crc_and_overrides_timestamps():
    data = bytearray(R.build_batch([(b"k", b"v", [], 1), (b"k2", b"v", [], 50)]))
    R.set_log_append_time(data, 0, 99_999)
    view = R.BatchView(bytes(data))
    assert view.crc_ok()
    assert view.timestamp_type == R.TIMESTAMP_LOG_APPEND_TIME
    assert view.max_timestamp == 99_999
    assert [r.timestamp for r in view.records()] == [99_999, 99_999]
    assert [r[1] for r in kafka_python_records(bytes(data))] == [99_999, 99_999]


def test_iter_batches_walks_concatenated_batches_and_ignores_a_partial_tail():
    a = R.build_batch([(b"a", b"1", [], 1)], base_offset=0)
    b = R.build_batch([(b"b", b"2", [], 2), (b"c", b"3", [], 3)], base_offset=1)
    views = list(R.iter_batches(a + b + b[:30]))
    assert [(v.base_offset, v.last_offset, v.position) for v in views] == [(0, 0, 0), (1, 2, len(a))]
    assert bytes(views[1].raw) == b
    with pytest.raises(CorruptRecordError):
        list(R.iter_batches(a + b[:30], strict=True))


def test_crc_detects_any_single_flip_in_covered_bytes():
    data = R.build_batch([(b"key", b"value", [("h", b"x")], 10)])
    for i in range(R.ATTRIBUTES_OFFSET, len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x40
        with pytest.raises(CorruptRecordError):
            R.BatchView(bytes(bad)).validate()


@settings(max_examples=120, deadline=None)
@given(st.binary(max_size=400), st.data())
def test_garbage_raises_only_corrupt_record_error(garbage, data):
    valid = R.build_batch([(b"k", b"v" * 30, [("h", b"1")], 7), (None, b"z", [], 9)])
    mutated = bytearray(valid)
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(0, len(mutated) - 1))
        mutated[i] = data.draw(st.integers(0, 255))
    for buf in (garbage, bytes(mutated), bytes(mutated[: data.draw(st.integers(0, len(mutated)))])):
        try:
            for view in R.iter_batches(buf, strict=True):
                view.crc_ok()
                view.records()
                view.records_kv()
            list(R.iter_records(buf))
            R.decode_records(buf, 0, len(buf), data.draw(st.integers(-5, 50)), 0, 0)
        except (CorruptRecordError, UnsupportedCompressionError):
            pass


def test_varint_encoding_matches_kafka_vectors():
    # Zig-zag vectors from Kafka's ByteUtilsTest.
    assert R.encode_varint(0) == b"\x00"
    assert R.encode_varint(-1) == b"\x01"
    assert R.encode_varint(1) == b"\x02"
    assert R.encode_varint(63) == b"\x7e"
    assert R.encode_varint(-64) == b"\x7f"
    assert R.encode_varint(64) == b"\x80\x01"
    assert R.encode_varint(2**31 - 1) == b"\xfe\xff\xff\xff\x0f"
    assert R.encode_varint(-(2**63)) == b"\xff" * 9 + b"\x01"
    for n in (0, 1, -1, 300, -300, 2**62, -(2**63), 2**63 - 1):
        assert R.decode_varint(R.encode_varint(n), 0) == (n, len(R.encode_varint(n)))
    with pytest.raises(CorruptRecordError):
        R.decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError):
        R.decode_varint(b"\xff" * 11, 0)


def test_negative_timestamp_deltas_and_header_keys_round_trip():
    records = [(b"a", b"1", [("κλειδί", None)], 5000), (b"b", b"2", [], 10), (b"c", b"3", [], 2**40)]
    view = R.BatchView(R.build_batch(records))
    assert [r.timestamp for r in view.records()] == [5000, 10, 2**40]
    assert view.records()[0].headers == (("κλειδί", None),)
    assert view.base_timestamp == 5000 and view.max_timestamp == 2**40


def test_small_varint_table_is_the_zigzag_encoding_of_each_index() -> None:
    # The table is built arithmetically (start-up time); every entry must still be what the
    # general encoder writes, including the 2- and 3-byte ones.
    table = R._zz_table()
    assert len(table) == 1 << 14 and R._zz_table() is table  # built once
    assert all(table[n] == R._zigzag_encode(n) for n in range(1 << 14))
    assert table[64] == b"\x80\x01" and table[8192] == b"\x80\x80\x01"
