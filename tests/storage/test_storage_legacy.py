"""Message sets v0/v1 (``storage/legacy.py``) against kafka-python's independent implementation.

kafka-python's ``LegacyRecordBatchBuilder`` writes the message sets its clients send (and Kafka's
``LegacyRecord`` layout), its ``MemoryRecords`` reads what a Fetch v0-3 client receives: our parser
reads the first, our down-conversion must be readable by the second, byte for byte where the bytes
are deterministic (uncompressed).
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from groupd.storage import codecs, legacy
from groupd.storage import records as rec
from groupd.storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

T = 1_700_000_000_000
GZIP = rec.COMPRESSION_GZIP


def message_set(magic: int, codec: int, records: list[tuple[int, int | None, bytes | None, bytes | None]]) -> bytes:
    """What kafka-python's producer sends: (offset, timestamp, key, value) as one message set."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for offset, ts, key, value in records:
        b.append(offset, timestamp=ts, key=key, value=value)
    return bytes(b.build())


def read_legacy(data: bytes) -> list[tuple[int, int, int, int, bytes | None, bytes | None]]:
    """(magic, codec, offset, timestamp, key, value) of every record, as a Fetch v0-3 client reads it."""
    out = []
    mr = MemoryRecords(data)
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            out.append((batch.magic, batch.compression_type, r.offset, r.timestamp, r.key, r.value))
    return out


RECORDS = [(0, T, b"k0", b"v0"), (1, T + 5, None, b"v1"), (2, T + 2, b"k2", None)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [rec.COMPRESSION_NONE, GZIP])
def test_client_message_sets_become_one_v2_batch_with_the_source_codec(magic: int, codec: int) -> None:
    parsed = legacy.parse_message_set(message_set(magic, codec, RECORDS))
    assert (parsed.magic, parsed.codec) == (magic, codec)
    # Magic 1 wrappers carry relative inner offsets; magic 0 has no timestamps (NO_TIMESTAMP).
    want_ts = [r[1] if magic == 1 else -1 for r in RECORDS]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in parsed.records] == [
        (o, ts, k, v) for (o, _t, k, v), ts in zip(RECORDS, want_ts)
    ]
    batch = legacy.to_v2(parsed)
    view = rec.BatchView(batch)
    view.validate()
    assert (view.compression, view.base_offset, view.producer_id, view.record_count) == (codec, 0, -1, 3)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in view.records()] == [
        (o, ts, k, v, ()) for (o, _t, k, v), ts in zip(RECORDS, want_ts)
    ]


def test_several_messages_and_wrappers_in_one_set() -> None:
    raw = message_set(1, 0, RECORDS[:1]) + message_set(1, GZIP, RECORDS[1:]) + message_set(1, 0, [(3, T, b"x", b"y")])
    parsed = legacy.parse_message_set(raw)
    assert parsed.codec == GZIP  # LogValidator's sourceCompression: the codec of the wrappers
    assert [r.value for r in parsed.records] == [b"v0", b"v1", None, b"y"]


def _entry(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes) -> bytes:
    """One message set entry written out field by field (the protocol guide's layout)."""
    body = bytes([magic, attributes]) + (timestamp.to_bytes(8, "big") if magic == 1 else b"")
    body += b"\xff\xff\xff\xff" if key is None else len(key).to_bytes(4, "big") + key
    body += len(value).to_bytes(4, "big") + value
    msg = zlib.crc32(body).to_bytes(4, "big") + body
    return offset.to_bytes(8, "big") + len(msg).to_bytes(4, "big") + msg


def test_log_append_time_wrapper_stamps_every_inner_message() -> None:
    inner = message_set(1, 0, [(0, T, b"a", b"1"), (1, T + 1, b"b", b"2")])
    raw = _entry(1, 1, GZIP | legacy.TIMESTAMP_TYPE_FLAG, T + 99, None, rec._compress(GZIP, inner))
    assert [r.timestamp for r in legacy.parse_message_set(raw).records] == [T + 99, T + 99]
    # The builder writes the same layout as the hand-written entry.
    assert legacy.build_message_set(1, [(7, T, b"k", b"v")]) == _entry(7, 1, 0, T, b"k", b"v")
    assert legacy.build_message_set(0, [(7, -1, None, b"v")]) == _entry(7, 0, 0, -1, None, b"v")


def _corrupt(raw: bytes, pos: int) -> bytes:
    b = bytearray(raw)
    b[pos] ^= 0xFF
    return bytes(b)


def test_bad_message_sets() -> None:
    good = message_set(1, 0, RECORDS)
    with pytest.raises(CorruptRecordError, match="corrupt"):
        legacy.parse_message_set(_corrupt(good, 30))  # a key byte: LegacyRecord.ensureValid
    with pytest.raises(CorruptRecordError, match="no whole message"):
        legacy.parse_message_set(good[:20])  # ByteBufferLogInputStream stops at a partial entry
    # ... and a partial entry after whole ones is ignored, as Kafka trims it.
    assert len(legacy.parse_message_set(good + good[:20]).records) == 3
    inner = _entry(0, 1, GZIP, T, None, rec._compress(GZIP, good))
    nested = _entry(0, 1, GZIP, T, None, rec._compress(GZIP, inner))
    with pytest.raises(InvalidRecordError, match="inner record with a compression"):
        legacy.parse_message_set(nested)
    with pytest.raises(CorruptRecordError, match="message size"):
        legacy.parse_message_set((0).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\0" * 10)
    with pytest.raises(CorruptRecordError, match="lz4"):
        legacy.parse_message_set(_entry(0, 0, legacy.CODEC_LZ4, -1, None, b"\x04\x22\x4d\x18"))


def test_lz4_magic_0_with_kafkas_broken_frame_checksum_is_read() -> None:
    # KAFKA-3160: magic 0 lz4 frames hash the magic number into the header checksum.
    inner = message_set(0, 0, RECORDS)
    frame = codecs.lz4_compress(inner, broken_checksum=True)
    parsed = legacy.parse_message_set(_entry(2, 0, legacy.CODEC_LZ4, -1, None, frame))
    assert (parsed.codec, [r.value for r in parsed.records]) == (legacy.CODEC_LZ4, [b"v0", b"v1", None])
    # ... and down-converting to magic 0 writes that checksum back; magic 1 the standard one.
    stored = legacy.to_v2(parsed)
    for magic, broken in ((0, True), (1, False)):
        out = legacy.down_convert(stored, magic, 0)
        value = legacy.parse_message_set(out).records
        assert [r.value for r in value] == [b"v0", b"v1", None]
        assert codecs.lz4_compress(b"", broken_checksum=broken)[4:7] in out


def _stored(*batches: bytes) -> bytes:
    """v2 batches as a log stores them: consecutive base offsets."""
    out, offset = [], 0
    for b in batches:
        buf = bytearray(b)
        rec.set_base_offset(buf, 0, offset)
        offset += rec.BatchView(bytes(buf)).record_count
        out.append(bytes(buf))
    return b"".join(out)


def v2(records: list[tuple[Any, ...]], **kw: Any) -> bytes:
    return rec.build_batch([(k, v, h, ts) for ts, k, v, h in records], **kw)


@pytest.mark.parametrize("magic", [0, 1])
def test_down_conversion_is_what_kafka_python_reads(magic: int) -> None:
    stored = _stored(
        v2([(T, b"a", b"1", ()), (T + 1, b"b", b"2", (("h", b"x"),))]),  # headers are dropped
        v2([(T + 2, None, b"3", ()), (T + 3, b"d", None, ())], compression=GZIP),
        v2([(T + 4, b"ctl", b"", ())], control=True),  # never reaches an old client
        v2([(T + 5, b"e", b"5", ())], timestamp_type=rec.TIMESTAMP_LOG_APPEND_TIME),
    )
    out = legacy.down_convert(stored, magic, 1)  # the fetch offset is inside the first batch
    ts = (lambda t: t) if magic == 1 else (lambda t: None)  # kafka-python: magic 0 has no timestamp
    assert read_legacy(out) == [
        (magic, 0, 1, ts(T + 1), b"b", b"2"),
        (magic, GZIP, 2, ts(T + 2), None, b"3"),
        (magic, GZIP, 3, ts(T + 3), b"d", None),
        (magic, 0, 5, ts(T + 5), b"e", b"5"),
    ]
    # Uncompressed messages are byte-identical to kafka-python's (and Kafka's) encoding.
    plain = legacy.down_convert(_stored(v2([(T, b"a", b"1", ()), (T + 1, None, b"2", ())])), magic, 0)
    assert plain == message_set(magic, 0, [(0, T, b"a", b"1"), (1, T + 1, None, b"2")])


def test_down_converted_wrapper_uses_relative_offsets_in_magic_1_and_absolute_in_magic_0() -> None:
    stored = _stored(
        v2([(T, b"a", b"1", ())] * 3), v2([(T, b"b", b"2", ()), (T + 9, b"c", b"3", ())], compression=GZIP)
    )
    for magic, inner_offsets in ((1, [0, 1]), (0, [3, 4])):
        out = legacy.down_convert(stored, magic, 3)
        wrapper_offset = int.from_bytes(out[:8], "big")
        assert wrapper_offset == 4  # the wrapper carries the last inner offset
        assert [r.offset for r in legacy.parse_message_set(out).records] == inner_offsets
        if magic == 1:
            assert int.from_bytes(out[18:26], "big") == T + 9  # wrapper timestamp: the max inner one


def test_zstd_batches_are_not_down_converted() -> None:
    batch = bytearray(v2([(T, b"a", b"1", ())]))
    batch[22] |= rec.COMPRESSION_ZSTD
    batch[17:21] = rec.compute_crc(batch, 0, len(batch)).to_bytes(4, "big")
    with pytest.raises(UnsupportedCompressionError, match="zstd"):
        legacy.down_convert(bytes(batch), 1, 0)


def test_is_legacy() -> None:
    assert legacy.is_legacy(message_set(0, 0, RECORDS)) and legacy.is_legacy(message_set(1, 0, RECORDS))
    assert not legacy.is_legacy(v2([(T, b"a", b"1", ())]))
    assert not legacy.is_legacy(b"\0" * 10)
