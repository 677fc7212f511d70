"""Kafka record batch v2 (magic 2): the unit that is written to, stored in and read from a log.

Theory of operation
-------------------
A batch is a 61-byte header followed by its records::

    offset  size  field
     0       8    baseOffset             assigned by the broker, not covered by the CRC
     8       4    batchLength            bytes after this field (so the batch is 12 + batchLength long)
    12       4    partitionLeaderEpoch   assigned by the broker, not covered by the CRC
    16       1    magic                  always 2 here
    17       4    crc                    CRC-32C of bytes 21..end
    21       2    attributes             bits 0-2 codec, 3 timestampType, 4 transactional, 5 control
    23       4    lastOffsetDelta
    27       8    baseTimestamp
    35       8    maxTimestamp
    43       8    producerId
    51       2    producerEpoch
    53       4    baseSequence
    57       4    recordsCount
    61       ...  records (compressed as one blob when the codec bits are set)

Because the CRC starts at `attributes`, a broker assigns offsets to a client's batch by
overwriting the first 8 bytes (and the epoch) in place; the client's CRC stays valid. Only
LogAppendTime, which rewrites attributes and maxTimestamp, needs the CRC recomputed.

Each record is varint-framed, every integer zig-zag encoded::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint |
    (headerKeyLength varint | headerKey utf-8 | headerValueLength varint | headerValue)*

Decoding is the hot path of a log replay (a million records must decode in a few seconds),
so the record loop below is written out by hand: plain `bytes` indexing, inline one- and two-byte
varint fast paths, tuples instead of objects. Anything malformed surfaces as
`CorruptRecordError`, never as IndexError/struct.error/UnicodeDecodeError.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from . import codecs
from .errors import CorruptRecordError, UnsupportedCompressionError
from .native import native as _native

# storage/_native.c's twin of _decode_into (full=False), None without the extension: it declines
# (returns False, `out` untouched) any batch body it does not cover, and _decode_into decodes it.
_native_decode: Callable[..., bool] | None = None if _native is None else _native.decode_records
# storage/_native.c's framing walk (check_record_frames' common case), None without the extension.
_native_frames: Callable[[bytes, int, int, int], bool] | None = getattr(_native, "frame_records", None)

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BATCH_OVERHEAD",
    "COMPRESSION_GZIP",
    "COMPRESSION_LZ4",
    "COMPRESSION_NONE",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_ZSTD",
    "CONTROL_FLAG",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_TYPE_FLAG",
    "TRANSACTIONAL_FLAG",
    "TXN_BATCH_END",
    "BadBatch",
    "BatchView",
    "OwnBatch",
    "Record",
    "RecordInput",
    "TxnBatch",
    "build_batch",
    "check_record_frames",
    "compute_crc",
    "decode_records",
    "decode_window_verified",
    "find_next_batch",
    "iter_batches",
    "iter_records",
    "set_base_offset",
    "set_log_append_time",
]


def _load_crc32c() -> Callable[..., int]:
    """The ``crc32c`` package's C function. Its ``__init__`` imports importlib.metadata (and with
    it email, zipfile...) only to set ``__version__``: ~8 ms of every daemon start. The extension
    module is loaded by itself, under the name the package gives it (a later ``import crc32c``
    finds it in sys.modules); anything unexpected falls back to the package."""
    import importlib.machinery
    import importlib.util
    import sys

    try:
        mod = sys.modules.get("crc32c._crc32c")
        if mod is None:
            pkg = importlib.util.find_spec("crc32c")
            spec = importlib.machinery.PathFinder.find_spec("crc32c._crc32c", pkg.submodule_search_locations or [])  # type: ignore[union-attr]
            if spec is None or spec.loader is None:
                raise ImportError("crc32c._crc32c not found")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules["crc32c._crc32c"] = mod
        return mod.crc32c  # type: ignore[no-any-return]
    except (ImportError, AttributeError):
        import crc32c

        return crc32c.crc32c


_crc32c = _load_crc32c()

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted by batchLength
BATCH_OVERHEAD = HEADER_SIZE - LOG_OVERHEAD  # smallest legal batchLength (a batch with no records)
MAGIC = 2

_LEN_MAGIC = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

# Decompression output is bounded so a tiny hostile batch cannot make us allocate gigabytes.
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

# (key, value, headers, timestamp); headers are (str key, bytes-or-None value) pairs.
RecordInput = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# --------------------------------------------------------------------------------------------
# varints


def _zigzag_encode(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _SMALL_VARINTS[z]
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL_VARINTS = [bytes((i,)) for i in range(0x80)]
# Zig-zag varints of 0..16383 (z = 2n < 2**15: at most three bytes), built without the loop of
# _zigzag_encode (that was 8 ms of every start), and by the first encode (_zz_table), not at
# import: 16,384 bytes objects are 0.7 MiB of a daemon's resident memory (issue 26).
_ZZ_CACHE: list[bytes] = []


def _zz_table() -> list[bytes]:
    if not _ZZ_CACHE:
        _ZZ_CACHE.extend(
            bytes((z,))
            if z < 0x80
            else bytes((z & 0x7F | 0x80, z >> 7))
            if z < 0x4000
            else bytes((z & 0x7F | 0x80, (z >> 7) & 0x7F | 0x80, z >> 14))
            for z in range(0, 1 << 15, 2)
        )
    return _ZZ_CACHE


_ZZ_MINUS_ONE = _zigzag_encode(-1)


def _zz(n: int) -> bytes:
    if 0 <= n < 16384:
        return (_ZZ_CACHE or _zz_table())[n]
    return _zigzag_encode(n)


def encode_varint(n: int) -> bytes:
    """Zig-zag varint/varlong encoding as used inside records."""
    if not -(1 << 63) <= n < (1 << 63):
        raise ValueError(f"varint out of int64 range: {n}")
    return _zigzag_encode(n)


def _uvarint_slow(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode one zig-zag varint at `pos`; returns (value, next position)."""
    try:
        v, pos = _uvarint_slow(data, pos)
    except IndexError:
        raise CorruptRecordError("truncated varint") from None
    return (v >> 1) ^ -(v & 1), pos


# --------------------------------------------------------------------------------------------
# batch views


class BatchView:
    """A parsed batch header plus where the batch lives; records are decoded only on demand."""

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "buffer",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "record_count",
        "size",
    )

    def __init__(self, buffer: bytes | bytearray | memoryview, position: int = 0) -> None:
        end = len(buffer)
        if end - position < HEADER_SIZE:
            raise CorruptRecordError(f"{end - position} bytes are too few for a batch header")
        (
            self.base_offset,
            length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = HEADER.unpack_from(buffer, position)
        if self.magic != MAGIC:
            raise CorruptRecordError(f"unsupported magic {self.magic} (only record batch v2)")
        if length < BATCH_OVERHEAD:
            raise CorruptRecordError(f"batchLength {length} is smaller than a batch header")
        if end - position < LOG_OVERHEAD + length:
            raise CorruptRecordError(f"batch of {LOG_OVERHEAD + length} bytes is truncated")
        self.size = LOG_OVERHEAD + length
        self.buffer = buffer
        self.position = position

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_FLAG else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def raw(self) -> memoryview:
        """The batch's bytes (a view into the buffer it was parsed from, no copy)."""
        return memoryview(self.buffer)[self.position : self.position + self.size]

    def crc_ok(self) -> bool:
        return compute_crc(self.buffer, self.position, self.size) == self.crc

    def validate(self) -> None:
        """Raise CorruptRecordError unless the CRC matches and header fields are coherent."""
        if not self.crc_ok():
            raise CorruptRecordError(f"CRC mismatch in batch at base offset {self.base_offset}")
        if self.last_offset_delta < 0:
            raise CorruptRecordError(f"negative lastOffsetDelta {self.last_offset_delta}")
        if self.record_count < 0:
            raise CorruptRecordError(f"negative record count {self.record_count}")

    def records(self, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
        """Decode every record (with headers), decompressing if needed."""
        return _decode_batch(self.buffer, self.position, self.size, True, max_decompressed)

    def records_kv(self, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[tuple]:
        """Decode records as lean (offset, timestamp, key, value) tuples, headers skipped."""
        return _decode_batch(self.buffer, self.position, self.size, False, max_decompressed)

    def __repr__(self) -> str:
        return (
            f"BatchView(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.record_count}, size={self.size}, attributes={self.attributes:#x}, "
            f"max_timestamp={self.max_timestamp}, producer_id={self.producer_id})"
        )


class OwnBatch(BatchView):
    """One batch groupd's own encoder just built (``build_batch``, the coordinator's C commit
    builder) and handed to the log in the same process: the log appends it after the size check
    alone, without walking its record framing. Kafka too trusts its coordinators' batches more than
    a client's (``LogValidator.validateBatch`` checks offsets and record counts only for
    ``AppendOrigin.CLIENT``; the group coordinator appends as ``AppendOrigin.COORDINATOR``); its
    re-check of the CRC in ``UnifiedLog.analyzeAndValidateRecords`` is skipped here because these
    bytes never left memory between the encoder and the log. Never wrap bytes that came from the
    wire in it: a client's batch is bytes or a plain ``BatchView`` and gets the full check."""

    __slots__ = ()


def iter_batches(
    buffer: bytes | bytearray | memoryview, position: int = 0, end: int | None = None, *, strict: bool = False
) -> Iterator[BatchView]:
    """Yield each complete batch in buffer[position:end].

    A partial batch at the very end is silently ignored unless `strict` (Fetch responses may end
    with one); any other malformation raises CorruptRecordError. CRCs are not checked here —
    call `BatchView.validate()` where the bytes come from outside.
    """
    if end is None:
        end = len(buffer)
    unpack = _LEN_MAGIC.unpack_from
    view_buffer = buffer if end == len(buffer) else memoryview(buffer)[:end]
    while position < end:
        if end - position < HEADER_SIZE:
            if strict:
                raise CorruptRecordError(f"{end - position} trailing bytes are not a whole batch")
            return
        _, length, _, magic = unpack(buffer, position)
        if length < BATCH_OVERHEAD or magic != MAGIC:
            raise CorruptRecordError(f"bad batch at byte {position}: length {length}, magic {magic}")
        size = LOG_OVERHEAD + length
        if end - position < size:
            if strict:
                raise CorruptRecordError(f"batch at byte {position} is truncated")
            return
        yield BatchView(view_buffer, position)
        position += size


def is_transactional_batch(raw: bytes | None) -> bool:
    """Whether ``raw`` starts with a magic-2 batch whose transactional flag is set (read from the
    header only, as Kafka's ``ProduceRequest.hasTransactionalRecords`` looks at each batch)."""
    return (
        bool(raw)
        and len(raw) >= HEADER_SIZE  # type: ignore[arg-type]
        and raw[MAGIC_OFFSET] == MAGIC  # type: ignore[index]
        and bool(raw[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG)  # type: ignore[index]
    )


def compute_crc(buffer: bytes | bytearray | memoryview, position: int, size: int) -> int:
    return _crc32c(memoryview(buffer)[position + ATTRIBUTES_OFFSET : position + size])


# --------------------------------------------------------------------------------------------
# in-place rewrites


def set_base_offset(
    buffer: bytearray | memoryview, position: int, base_offset: int, partition_leader_epoch: int | None = None
) -> None:
    """Assign a broker offset (and leader epoch) to a batch without touching CRC-covered bytes."""
    if len(buffer) - position < HEADER_SIZE:
        raise CorruptRecordError("too few bytes for a batch header")
    _INT64.pack_into(buffer, position, base_offset)
    if partition_leader_epoch is not None:
        _INT32.pack_into(buffer, position + EPOCH_OFFSET, partition_leader_epoch)


def set_log_append_time(buffer: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with the given time, as a broker does; recomputes the CRC."""
    if len(buffer) - position < HEADER_SIZE:
        raise CorruptRecordError("too few bytes for a batch header")
    (length,) = _INT32.unpack_from(buffer, position + 8)
    size = LOG_OVERHEAD + length
    if length < BATCH_OVERHEAD or len(buffer) - position < size:
        raise CorruptRecordError(f"batchLength {length} does not fit the buffer")
    (attributes,) = _INT16.unpack_from(buffer, position + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buffer, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_FLAG)
    _INT64.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buffer, position + CRC_OFFSET, compute_crc(buffer, position, size))


# --------------------------------------------------------------------------------------------
# building


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str | bytes, bytes | None]],
) -> bytes:
    parts = [b"\x00", _zz(timestamp_delta), _zz(offset_delta)]
    if key is None:
        parts.append(_ZZ_MINUS_ONE)
    else:
        parts.append(_zz(len(key)))
        parts.append(key)
    if value is None:
        parts.append(_ZZ_MINUS_ONE)
    else:
        parts.append(_zz(len(value)))
        parts.append(value)
    if headers:
        headers = list(headers)
        parts.append(_zz(len(headers)))
        for hkey, hvalue in headers:
            hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
            parts.append(_zz(len(hk)))
            parts.append(hk)
            if hvalue is None:
                parts.append(_ZZ_MINUS_ONE)
            else:
                parts.append(_zz(len(hvalue)))
                parts.append(hvalue)
    else:
        parts.append(b"\x00")
    body = b"".join(parts)
    return _zz(len(body)) + body


def _encode_records(records: Sequence[RecordInput], base_ts: int) -> bytes:
    """The records part of a batch. A coordinator append is 100 records of a commit with keys and
    values under 16 KiB, no headers and one timestamp: their varints come from the table and every
    piece goes into one join, without a list and a join per record (``_encode_record``)."""
    zz = _ZZ_CACHE or _zz_table()
    out: list[bytes] = []
    add = out.append
    for i, (key, value, headers, ts) in enumerate(records):
        if headers or key is None or value is None or i >= 16384 or ts != base_ts:
            add(_encode_record(i, ts - base_ts, key, value, headers))
            continue
        lk, lv = len(key), len(value)
        if lk >= 16384 or lv >= 16384:
            add(_encode_record(i, 0, key, value, headers))
            continue
        zi, zk, zv = zz[i], zz[lk], zz[lv]
        # attributes, timestamp delta 0, offset delta, key, value, no headers
        size = 3 + len(zi) + len(zk) + lk + len(zv) + lv
        add(zz[size] if size < 16384 else _zigzag_encode(size))
        add(b"\x00\x00")
        add(zi)
        add(zk)
        add(key)
        add(zv)
        add(value)
        add(b"\x00")
    return b"".join(out)


def _assemble(
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
    payload: bytes,
) -> bytes:
    header = bytearray(
        HEADER.pack(
            base_offset,
            BATCH_OVERHEAD + len(payload),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = _crc32c(payload, _crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _UINT32.pack_into(header, CRC_OFFSET, crc)
    return bytes(header) + payload


def _compress(codec: int, payload: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return payload
    if codec == COMPRESSION_GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(payload) + c.flush()
    # Up-converted message sets keep their snappy or lz4 codec, in Kafka's framing (codecs.py).
    if codec == COMPRESSION_SNAPPY:
        return codecs.snappy_compress(payload)
    if codec == COMPRESSION_LZ4:
        return codecs.lz4_compress(payload)
    raise UnsupportedCompressionError(f"building batches with codec {codec} is not supported")


def build_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    transactional: bool = False,
    control: bool = False,
    compression: int = COMPRESSION_NONE,
) -> bytes:
    """Encode records (key, value, headers, timestamp) as one batch with consecutive offsets."""
    if not records:
        raise ValueError("a batch needs at least one record")
    timestamps = [r[3] for r in records]
    base_ts = timestamps[0]
    payload = _encode_records(records, base_ts)
    attributes = compression
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_FLAG
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    return _assemble(
        base_offset,
        partition_leader_epoch,
        attributes,
        len(records) - 1,
        base_ts,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
        _compress(compression, payload),
    )


def build_sparse_batch(
    template: BatchView,
    records: Sequence[Record],
) -> bytes:
    """Re-encode some records of `template` keeping their offsets and the template's header.

    Used by compaction: the batch keeps its baseOffset and lastOffsetDelta (so the log's offset
    ranges do not move) and its producer fields, but holds only the surviving records, written
    uncompressed. An empty `records` yields a valid zero-record batch.
    """
    base = template.base_offset
    if records:
        base_ts = records[0].timestamp
        max_ts = max(r.timestamp for r in records)
    else:
        base_ts = template.base_timestamp
        max_ts = template.max_timestamp
    if template.timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        # Every record of a LogAppendTime batch reads the batch's maxTimestamp; keep it intact.
        max_ts = template.max_timestamp
    payload = b"".join(
        [_encode_record(r.offset - base, r.timestamp - base_ts, r.key, r.value, r.headers) for r in records]
    )
    return _assemble(
        base,
        template.partition_leader_epoch,
        template.attributes & ~COMPRESSION_MASK,
        template.last_offset_delta,
        base_ts,
        max_ts,
        template.producer_id,
        template.producer_epoch,
        template.base_sequence,
        len(records),
        payload,
    )


# --------------------------------------------------------------------------------------------
# decoding


def _decompress(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    try:
        if codec == COMPRESSION_GZIP:
            d = zlib.decompressobj(47)  # 32 + 15: accept a gzip or zlib header
            out = d.decompress(data, limit)
            if d.unconsumed_tail:
                raise CorruptRecordError(f"decompressed batch exceeds {limit} bytes")
            return out
        if codec == COMPRESSION_SNAPPY:
            return codecs.snappy_decompress(bytes(data), limit)
        if codec == COMPRESSION_LZ4:
            return codecs.lz4_decompress(bytes(data), limit)
        if codec == COMPRESSION_ZSTD:
            out = _zstd_decompress(bytes(data), limit)
        else:
            raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
    except (CorruptRecordError, UnsupportedCompressionError):
        raise
    except Exception as exc:  # each codec library has its own error types
        raise CorruptRecordError(f"cannot decompress batch (codec {codec}): {exc}") from None
    if len(out) > limit:
        raise CorruptRecordError(f"decompressed batch exceeds {limit} bytes")
    return out


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14+

        return zstd.decompress(data)
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        raise UnsupportedCompressionError("zstd batches need the 'zstandard' package") from None
    reader = zstandard.ZstdDecompressor().stream_reader(data)
    out = reader.read(limit + 1)
    return out


def _decode_batch(
    buffer: bytes | bytearray | memoryview, position: int, size: int, full: bool, max_decompressed: int
) -> list:
    try:
        (
            base_offset,
            _length,
            _epoch,
            _magic,
            _crc,
            attributes,
            _lod,
            base_ts,
            max_ts,
            _pid,
            _pepoch,
            _seq,
            count,
        ) = HEADER.unpack_from(buffer, position)
    except struct.error:
        raise CorruptRecordError("truncated batch header") from None
    codec = attributes & COMPRESSION_MASK
    fixed_ts = max_ts if attributes & TIMESTAMP_TYPE_FLAG else None
    if codec == COMPRESSION_NONE:
        if isinstance(buffer, bytes):
            data, start, end = buffer, position + HEADER_SIZE, position + size
        else:
            data = bytes(memoryview(buffer)[position + HEADER_SIZE : position + size])
            start, end = 0, len(data)
    else:
        data = _decompress(codec, memoryview(buffer)[position + HEADER_SIZE : position + size], max_decompressed)
        start, end = 0, len(data)
    return decode_records(data, start, end, count, base_offset, base_ts, fixed_ts, full=full)


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
    *,
    full: bool = True,
    out: list | None = None,
) -> list:
    """Decode `count` uncompressed records in data[pos:end], appending them to `out` (or a new
    list), which is returned.

    Records are `Record`s when `full`, else (offset, timestamp, key, value) tuples without headers.
    `fixed_timestamp` (a LogAppendTime batch's maxTimestamp) overrides every record's timestamp.
    """
    if out is None:
        out = []
    _decode_into(out, data, pos, end, count, base_offset, base_timestamp, fixed_timestamp, full)
    return out


def _decode_into(
    out: list,
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None,
    full: bool,
) -> None:
    # Positional-only on purpose: this is called once per batch on the replay path.
    if count < 0 or count > end - pos:
        raise CorruptRecordError(f"record count {count} does not fit in {end - pos} bytes")
    append = out.append
    slow = _uvarint_slow
    try:
        for _ in range(count):
            # record length
            b = data[pos]
            if b < 0x80:
                v = b
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    v = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos)
            rec_end = pos + ((v >> 1) ^ -(v & 1))
            if rec_end > end or rec_end <= pos:
                raise CorruptRecordError("record length runs past the batch")
            pos += 1  # record attributes: unused by Kafka
            # timestamp delta
            b = data[pos]
            if b < 0x80:
                v = b
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    v = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos)
            if fixed_timestamp is None:
                ts = base_timestamp + ((v >> 1) ^ -(v & 1))
            else:
                ts = fixed_timestamp
            # offset delta
            b = data[pos]
            if b < 0x80:
                v = b
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    v = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos)
            offset = base_offset + ((v >> 1) ^ -(v & 1))
            # key
            b = data[pos]
            if b < 0x80:
                v = b
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    v = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos)
            n = (v >> 1) ^ -(v & 1)
            if n >= 0:
                key = data[pos : pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise CorruptRecordError(f"negative key length {n}")
            # value
            b = data[pos]
            if b < 0x80:
                v = b
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    v = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos)
            n = (v >> 1) ^ -(v & 1)
            if n >= 0:
                value = data[pos : pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise CorruptRecordError(f"negative value length {n}")
            # headers
            b = data[pos]
            if b == 0:
                pos += 1
                headers: tuple = ()
            else:
                headers, pos = _decode_headers(data, pos, rec_end)
            if pos != rec_end:
                raise CorruptRecordError("record length does not match its fields")
            if full:
                append(Record(offset, ts, key, value, headers))
            else:
                append((offset, ts, key, value))
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} unexpected bytes after the last record")


def _decode_headers(data: bytes, pos: int, rec_end: int) -> tuple[tuple, int]:
    count, pos = decode_varint(data, pos)
    if count < 0 or count > rec_end - pos:
        raise CorruptRecordError(f"bad header count {count}")
    headers = []
    for _ in range(count):
        n, pos = decode_varint(data, pos)
        if n < 0 or pos + n > rec_end:
            raise CorruptRecordError(f"bad header key length {n}")
        try:
            hkey = bytes(data[pos : pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        pos += n
        n, pos = decode_varint(data, pos)
        if n >= 0:
            if pos + n > rec_end:
                raise CorruptRecordError("header value runs past the record")
            hvalue = data[pos : pos + n]
            pos += n
        elif n == -1:
            hvalue = None
        else:
            raise CorruptRecordError(f"bad header value length {n}")
        headers.append((hkey, hvalue))
    return tuple(headers), pos


_STEPS: list[int] = []  # see _frame_steps; built on the first produced batch, not at import


def _frame_steps() -> list[int]:
    """A record's whole size (its length varint included) from its first two bytes, read as
    ``b0 | b1 << 8``; 0 where they do not start a valid record of under 8 KiB (a negative or zero
    length, or a longer varint). One list index per record instead of a branch per varint byte:
    framing a produced batch was a fifth of a 100 B produce load's CPU."""
    if not _STEPS:
        steps = [0] * 65536
        for b in range(2, 0x80, 2):  # one-byte varints: even (zig-zag non-negative), not zero
            steps[b::256] = [1 + (b >> 1)] * 256
        for b in range(0x80, 0x100, 2):
            low = b & 0x7F
            for b2 in range(0 if low else 1, 0x80):  # 0x80 0x00 is a (non-minimal) zero
                steps[b | b2 << 8] = 2 + ((low | b2 << 7) >> 1)
        _STEPS[:] = steps
    return _STEPS


def _long_frame(data: bytes, pos: int) -> int:
    """The size of a record whose length varint the step table does not cover (8 KiB or more)."""
    v, after = _uvarint_slow(data, pos)
    if v & 1 or not v:
        raise CorruptRecordError("record length is not positive")
    return after - pos + (v >> 1)


def check_record_frames(data: bytes, pos: int, end: int, count: int) -> None:
    """Check in place that `count` uncompressed records exactly tile data[pos:end], each with a
    positive length, reading one varint per record and creating no objects (Kafka's record
    iterator: "Incorrect declared batch size", "Invalid record size"). A produced batch is framed
    with this and appended as it came (``LogValidator.assignOffsetsNonCompressed`` validates in
    place too); decoding every field in Python cost a third of a produce-heavy daemon's CPU, so the
    fields inside a record whose CRC matched are read only where a setting needs them (keys on
    compacted topics, timestamps under limits: ``broker/data_plane/batch_checks.py``)."""
    if _native_frames is not None and type(data) is bytes and _native_frames(data, pos, end, count):
        return  # well framed (the C walk declines all else, which the walk below then words)
    if count < 0 or count > end - pos:
        raise CorruptRecordError(f"record count {count} does not fit in {end - pos} bytes")
    steps = _STEPS or _frame_steps()
    start = pos
    try:
        for _ in range(count):
            pos += steps[data[pos] | data[pos + 1] << 8] or _long_frame(data, pos)
    except (IndexError, CorruptRecordError):
        pos = -1
    if pos == end:
        return
    # Not a well-framed batch: the exact walk below says why, in the words it always has (reading
    # past `end` above only ever sends a batch here).
    _check_frames_exactly(data, start, end, count)
    raise CorruptRecordError("record runs past the end of the batch")  # unreachable: the walk agrees


def _check_frames_exactly(data: bytes, pos: int, end: int, count: int) -> None:
    if end != len(data):
        data = data[:end]  # so that running past the batch is an IndexError
    slow = _uvarint_slow
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                if b & 1 or not b:
                    raise CorruptRecordError("record length is not positive")
                pos += 1 + (b >> 1)
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:  # records of 64 B to 8 KiB
                    v = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos)
                if v & 1 or not v:
                    raise CorruptRecordError("record length is not positive")
                pos += v >> 1
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    if pos != end:
        raise CorruptRecordError(
            "record runs past the end of the batch"
            if pos > end
            else f"{end - pos} unexpected bytes after the last record"
        )


def decode_window(
    buffer: bytes,
    position: int = 0,
    end: int | None = None,
    *,
    full: bool = False,
    skip_control: bool = True,
) -> tuple[list, int]:
    """Decode every record of every complete batch in buffer[position:end] into one list.

    Returns (records, position after the last complete batch). Records are (offset, timestamp,
    key, value) tuples, or `Record`s with headers when `full`. This is the replay path: one header
    unpack per batch, one list for the whole window, no generator per record. Control batches
    (transaction markers) are skipped by default, as Kafka consumers do.
    """
    if end is None:
        end = len(buffer)
    out: list = []
    unpack = HEADER.unpack_from
    plain = isinstance(buffer, bytes)
    while end - position >= HEADER_SIZE:
        (
            base_offset,
            length,
            _epoch,
            magic,
            _crc,
            attributes,
            _lod,
            base_ts,
            max_ts,
            _pid,
            _pepoch,
            _seq,
            count,
        ) = unpack(buffer, position)
        size = LOG_OVERHEAD + length
        if magic != MAGIC or length < BATCH_OVERHEAD:
            raise CorruptRecordError(f"bad batch at byte {position}: length {length}, magic {magic}")
        if end - position < size:
            break
        if skip_control and attributes & CONTROL_FLAG:
            pass
        elif attributes & COMPRESSION_MASK or not plain:
            out += _decode_batch(buffer, position, size, full, DEFAULT_MAX_DECOMPRESSED)
        else:
            fixed = max_ts if attributes & TIMESTAMP_TYPE_FLAG else None
            body = position + HEADER_SIZE
            if (
                full
                or _native_decode is None
                or not _native_decode(out, buffer, body, position + size, count, base_offset, base_ts, fixed)
            ):
                _decode_into(out, buffer, body, position + size, count, base_offset, base_ts, fixed, full)
        position += size
    return out, position


class BadBatch(NamedTuple):
    """A batch that `decode_window_verified` skipped: where it starts in the buffer, the offsets
    its header claims, and why."""

    position: int
    base_offset: int
    last_offset: int
    reason: str


class TxnBatch(NamedTuple):
    """What ``decode_window_verified(txn=True)`` puts in the record stream, as the value of an entry
    whose key is None, around the records of a transactional batch: before its records (``control``
    False) a start with the producer, after them ``TXN_BATCH_END``; a control batch (a transaction
    marker) is one entry with its first record's key and value. Readers that replay a log whose
    meaning depends on transactions (``__consumer_offsets``) fold these; the others never ask."""

    producer_id: int
    producer_epoch: int
    control: bool
    key: bytes | None = None
    value: bytes | None = None


TXN_BATCH_END = TxnBatch(-1, -1, False)


def decode_window_verified(
    buffer: bytes, position: int = 0, end: int | None = None, *, full: bool = False, txn: bool = False
) -> tuple[list, int, list[BadBatch], bool]:
    """decode_window for data that must be trusted (the start-up replay): every batch's CRC is
    checked, and a batch whose CRC does not match, or whose records cannot be decoded although it
    does, is skipped and listed instead of decoded. Control batches are skipped, unless ``txn``:
    then transactional and control batches are delimited by ``TxnBatch`` entries (see there).

    Returns (records, position after the last batch looked at, bad batches, header_damaged).
    `header_damaged` means the batch at the returned position has an impossible length or magic:
    its end, and so the next batch's start, is unknown (the caller must resynchronise)."""
    if end is None:
        end = len(buffer)
    out: list = []
    bad: list[BadBatch] = []
    unpack = HEADER.unpack_from
    view = memoryview(buffer)
    native_decode = _native_decode if type(buffer) is bytes else None
    while end - position >= HEADER_SIZE:
        (base_offset, length, _epoch, magic, crc, attributes, lod, base_ts, max_ts, _p, _e, _s, count) = unpack(
            buffer, position
        )
        if magic != MAGIC or length < BATCH_OVERHEAD:
            return out, position, bad, True
        size = LOG_OVERHEAD + length
        if end - position < size:
            break
        if _crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != crc:
            bad.append(BadBatch(position, base_offset, base_offset + lod, "CRC mismatch"))
        elif not attributes & CONTROL_FLAG or (txn and attributes & TRANSACTIONAL_FLAG):
            mark = len(out)
            delimit = txn and attributes & TRANSACTIONAL_FLAG
            if delimit and not attributes & CONTROL_FLAG:
                out.append((base_offset, base_ts, None, TxnBatch(_p, _e, False)))
            try:
                if attributes & COMPRESSION_MASK:
                    out += _decode_batch(buffer, position, size, full, DEFAULT_MAX_DECOMPRESSED)
                else:
                    fixed = max_ts if attributes & TIMESTAMP_TYPE_FLAG else None
                    body = position + HEADER_SIZE
                    if (
                        full
                        or native_decode is None
                        or not native_decode(out, buffer, body, position + size, count, base_offset, base_ts, fixed)
                    ):
                        _decode_into(out, buffer, body, position + size, count, base_offset, base_ts, fixed, full)
            except (CorruptRecordError, UnsupportedCompressionError) as exc:
                del out[mark:]
                bad.append(BadBatch(position, base_offset, base_offset + lod, str(exc)))
            else:
                if delimit and attributes & CONTROL_FLAG:
                    first = out[mark] if len(out) > mark else None
                    del out[mark:]
                    key = first[2] if first is not None else None
                    value = first[3] if first is not None else None
                    out.append((base_offset, base_ts, None, TxnBatch(_p, _e, True, key, value)))
                elif delimit:
                    out.append((base_offset + lod, max_ts, None, TXN_BATCH_END))
        position += size
    return out, position, bad, False


_MAX_SKIP = 2**31 - 1  # offsets a segment can span (relative offsets are int32)


def intact_batch_at(read: Callable[[int, int], bytes], position: int, end: int, min_base_offset: int) -> int | None:
    """Base offset of the batch at `position` if its header is plausible, it ends by `end`, its base
    offset is at least `min_base_offset` and its CRC matches; else None. `read` as in find_next_batch."""
    head = read(HEADER_SIZE, position)
    if len(head) < HEADER_SIZE:
        return None
    base, length, _epoch, magic = _LEN_MAGIC.unpack_from(head)
    size = LOG_OVERHEAD + length
    if (
        magic != MAGIC
        or length < BATCH_OVERHEAD
        or not 0 <= base - min_base_offset <= _MAX_SKIP
        or position + size > end
    ):
        return None
    data = read(size, position)
    if len(data) != size or compute_crc(data, 0, size) != _UINT32.unpack_from(data, CRC_OFFSET)[0]:
        return None
    return base


def find_next_batch(read: Callable[[int, int], bytes], position: int, end: int, min_base_offset: int) -> int | None:
    """Start of the first batch after `position` (and before `end`) whose header is plausible and
    whose CRC matches, found by trying every byte that could be a magic byte; None if there is none.

    `read(size, offset)` reads the underlying file. This is how a reader gets past a batch whose
    length field (which the CRC does not cover) was damaged: a CRC-32C match by chance is a 1 in
    2**32 event, so a batch found this way is a real one."""
    q = position + 1
    magic = bytes([MAGIC])
    while end - q >= HEADER_SIZE:
        window = read(min(1 << 20, end - q), q)
        i = window.find(magic, MAGIC_OFFSET)
        while i != -1 and len(window) - (i - MAGIC_OFFSET) >= HEADER_SIZE:
            start = q + i - MAGIC_OFFSET
            base, length, _epoch, _magic = _LEN_MAGIC.unpack_from(window, i - MAGIC_OFFSET)
            size = LOG_OVERHEAD + length
            # A segment spans at most 2**31 offsets: random bytes rarely pass for a base offset,
            # so few candidates cost a read of their whole claimed length.
            if length >= BATCH_OVERHEAD and 0 <= base - min_base_offset <= _MAX_SKIP and start + size <= end:
                data = read(size, start)
                if len(data) == size and compute_crc(data, 0, size) == _UINT32.unpack_from(data, CRC_OFFSET)[0]:
                    return start
            i = window.find(magic, i + 1)
        if len(window) < HEADER_SIZE:
            break
        # Overlap the windows so that a header straddling two of them is still seen.
        q += len(window) - HEADER_SIZE + 1
    return None


def iter_records(
    buffer: bytes,
    position: int = 0,
    end: int | None = None,
    *,
    full: bool = False,
    skip_control: bool = True,
) -> Iterator[tuple]:
    """Yield the records of every complete batch in buffer[position:end] (see decode_window)."""
    yield from decode_window(buffer, position, end, full=full, skip_control=skip_control)[0]
