"""Kafka's message sets v0 and v1 (magic 0 and 1): the formats before record batch v2.

Theory of operation
-------------------
Clients older than Kafka 0.11's protocol (Produce v0-2, Fetch v0-3) speak message sets. A message
set is a sequence of entries, each one message with its offset::

    offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 |
    [timestamp int64, magic 1 only] | key bytes(int32 length, -1 = null) | value bytes

``crc`` is CRC-32 (zlib's, not CRC-32C) of everything from ``magic`` to the end. Attributes bits 0-2
are the codec (gzip 1, snappy 2, lz4 3), bit 3 (magic 1) the timestamp type. A compressed entry is a
*wrapper*: its key is null and its value is a whole message set, compressed, of the inner messages.
In magic 1 the inner offsets are relative (0..n-1) and the wrapper carries the absolute offset of the
last inner message; in magic 0 they are absolute. A magic 1 wrapper's timestamp is the largest inner
timestamp (CreateTime) or the broker's append time, which then replaces every inner one
(LogAppendTime). Magic 0 has no timestamps at all: its records read as ``NO_TIMESTAMP`` (-1).

groupd stores only record batches v2, as Kafka 3.x did for topics whose ``message.format.version``
was the default: ``LogValidator`` converted a client's magic 0/1 messages to one v2 batch on append
(``convertAndAssignOffsetsNonCompressed``, or ``buildRecordsAndAssignOffsets`` for compressed input,
keeping the source codec as ``compression.type=producer`` does), and ``RecordsUtil.downConvert``
turned stored v2 batches back into messages of the magic a Fetch v0-3 client reads (magic 0 for
Fetch v0-1, magic 1 for Fetch v2-3), each batch compressed with its own codec, headers dropped
(magic 0/1 cannot carry them), control batches left out, and records before the fetch offset
skipped. ``to_v2`` and ``down_convert`` are those two conversions.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from . import codecs
from . import records as rec
from .errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError

__all__ = ["LegacySet", "build_message_set", "down_convert", "is_legacy", "parse_message_set", "to_v2"]

_ENTRY = struct.Struct(">qi")  # offset, message size
_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
LOG_OVERHEAD = _ENTRY.size  # 12
MIN_MESSAGE = {0: 14, 1: 22}  # crc + magic + attributes (+ timestamp) + key and value lengths
CODEC_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
CODEC_LZ4 = 3


class LegacyRecord(NamedTuple):
    offset: int  # as sent: relative inside a magic 1 wrapper, whatever the client wrote otherwise
    timestamp: int
    key: bytes | None
    value: bytes | None


class LegacySet(NamedTuple):
    """The messages of a client's message set, wrappers opened."""

    magic: int  # the highest magic of its entries
    codec: int  # the last non-zero codec of a wrapper (Kafka's sourceCompression), 0 if none
    records: list[LegacyRecord]


def is_legacy(raw: bytes | bytearray | memoryview) -> bool:
    """Whether a Produce partition's data is a message set (magic 0/1) rather than record batches.

    Both formats put the magic byte at position 16 (offset 8, length 4, then a CRC or an epoch)."""
    return len(raw) > rec.MAGIC_OFFSET and raw[rec.MAGIC_OFFSET] in (0, 1)


def _bytes_field(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("message truncated in a key or value length")
    (n,) = _INT32.unpack_from(data, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(f"message key or value of {n} bytes overruns the message")
    return data[pos : pos + n], pos + n


def _entries(data: bytes) -> Iterable[tuple[int, int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, timestamp, key, value) of each whole entry; CRCs checked.

    A partial entry at the end is ignored, as Kafka's ``ByteBufferLogInputStream`` ignores it."""
    pos, end = 0, len(data)
    while end - pos >= LOG_OVERHEAD:
        offset, size = _ENTRY.unpack_from(data, pos)
        start = pos + LOG_OVERHEAD
        if size < MIN_MESSAGE[0]:
            raise CorruptRecordError(f"message size {size} is smaller than the smallest message")
        if end - start < size:
            return
        stop = start + size
        crc, magic, attributes = _HEAD.unpack_from(data, start)
        if magic not in (0, 1):
            raise CorruptRecordError(f"magic {magic} inside a message set")
        if size < MIN_MESSAGE[magic]:
            raise CorruptRecordError(f"message size {size} is too small for magic {magic}")
        if zlib.crc32(memoryview(data)[start + 4 : stop]) != crc:
            # LegacyRecord.ensureValid
            raise CorruptRecordError(f"Record is corrupt (stored crc = {crc})")
        p = start + 6
        timestamp = rec.NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(data, p)
            p += 8
        key, p = _bytes_field(data, p, stop)
        value, p = _bytes_field(data, p, stop)
        if p != stop:
            raise CorruptRecordError(f"message has {stop - p} bytes after its value")
        yield offset, magic, attributes, timestamp, key, value
        pos = stop


def _decompress(codec: int, magic: int, data: bytes, limit: int) -> bytes:
    if codec == CODEC_LZ4 and magic == 0:
        # Kafka's KafkaLZ4BlockOutputStream wrote magic 0 frames with a header checksum computed
        # over the magic number too (KAFKA-3160); codecs.lz4_decompress accepts those.
        return codecs.lz4_decompress(data, limit)
    return rec._decompress(codec, data, limit)


def parse_message_set(raw: bytes, *, max_decompressed: int = rec.DEFAULT_MAX_DECOMPRESSED) -> LegacySet:
    """Every message of a client's message set, compressed wrappers opened (LogValidator's checks
    that do not depend on the topic: CRCs, no compressed message inside a wrapper)."""
    out: list[LegacyRecord] = []
    top_magic = 0
    source_codec = 0
    for offset, magic, attributes, timestamp, key, value in _entries(bytes(raw)):
        top_magic = max(top_magic, magic)
        codec = attributes & CODEC_MASK
        if codec == 0:
            out.append(LegacyRecord(offset, timestamp, key, value))
            continue
        source_codec = codec
        if value is None:
            raise CorruptRecordError("a compressed message has no value")
        inner = _decompress(codec, magic, value, max_decompressed)
        log_append_time = magic == 1 and bool(attributes & TIMESTAMP_TYPE_FLAG)
        for i_offset, i_magic, i_attributes, i_ts, i_key, i_value in _entries(inner):
            if i_attributes & CODEC_MASK:
                raise InvalidRecordError(
                    "Compressed outer record should not have an inner record with a compression attribute set"
                )
            if i_magic != magic:
                raise InvalidRecordError(f"inner message of magic {i_magic} inside a wrapper of magic {magic}")
            out.append(LegacyRecord(i_offset, timestamp if log_append_time else i_ts, i_key, i_value))
    if not out:
        raise CorruptRecordError("the message set holds no whole message")
    return LegacySet(top_magic, source_codec, out)


def to_v2(legacy: LegacySet, *, compression: int | None = None) -> bytes:
    """One v2 batch of the messages, offsets from 0 (the log assigns the real ones), no producer id,
    compressed with ``compression`` (default: the source codec, Kafka's ``compression.type=producer``)."""
    codec = legacy.codec if compression is None else compression
    return rec.build_batch(
        [(r.key, r.value, (), r.timestamp) for r in legacy.records],
        compression=codec,
    )


# --------------------------------------------------------------------------------------------
# writing message sets (down-conversion)


def _message(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_INT64.pack(timestamp))
    for b in (key, value):
        if b is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_INT32.pack(len(b)))
            parts.append(bytes(b))
    body = b"".join(parts)
    return struct.pack(">I", zlib.crc32(body)) + body


def _entry(offset: int, message: bytes) -> bytes:
    return _ENTRY.pack(offset, len(message)) + message


def _compress(codec: int, magic: int, payload: bytes) -> bytes:
    if codec == CODEC_LZ4:
        # Magic 0 readers (Kafka 0.8/0.9 clients) expect KAFKA-3160's checksum.
        return codecs.lz4_compress(payload, broken_checksum=magic == 0)
    if codec in (rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP, rec.COMPRESSION_SNAPPY):
        return rec._compress(codec, payload)
    raise UnsupportedCompressionError(f"codec {codec} does not exist in message format v0/v1")


def build_message_set(
    magic: int,
    records: Sequence[tuple[int, int, bytes | None, bytes | None]],
    *,
    codec: int = 0,
    log_append_time: bool = False,
) -> bytes:
    """Messages (offset, timestamp, key, value) as MemoryRecordsBuilder writes them for ``magic``:
    one entry per message, or one wrapper holding them all when compressed."""
    ts_flag = TIMESTAMP_TYPE_FLAG if log_append_time and magic == 1 else 0
    if codec == rec.COMPRESSION_NONE:
        return b"".join(_entry(o, _message(magic, ts_flag, ts, k, v)) for o, ts, k, v in records)
    first = records[0][0]
    inner = b"".join(
        _entry(o - first if magic == 1 else o, _message(magic, ts_flag, ts, k, v)) for o, ts, k, v in records
    )
    wrapper_ts = max(r[1] for r in records)
    return _entry(records[-1][0], _message(magic, codec | ts_flag, wrapper_ts, None, _compress(codec, magic, inner)))


def down_convert(
    data: bytes | memoryview, to_magic: int, first_offset: int, *, max_decompressed: int = rec.DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Stored v2 batches as message sets of ``to_magic`` (Kafka's ``RecordsUtil.downConvert``).

    A zstd batch raises UnsupportedCompressionError: zstd does not exist before magic 2 and Kafka
    answers UNSUPPORTED_COMPRESSION_TYPE rather than convert it."""
    out: list[bytes] = []
    for batch in rec.iter_batches(data):
        if batch.is_control:
            continue
        if batch.compression == rec.COMPRESSION_ZSTD:
            raise UnsupportedCompressionError("zstd batches cannot be down-converted for Fetch v0-9")
        kept = [
            (r[0], r[1], r[2], r[3])
            for r in batch.records_kv(max_decompressed=max_decompressed)
            if r[0] >= first_offset
        ]
        if kept:
            lat = batch.timestamp_type == rec.TIMESTAMP_LOG_APPEND_TIME
            out.append(build_message_set(to_magic, kept, codec=batch.compression, log_append_time=lat))
    return b"".join(out)
