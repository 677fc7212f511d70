"""snappy and LZ4 as Kafka clients frame them, over python-snappy and lz4 (required dependencies).

Old clients compress message sets (magic 0/1) with snappy or lz4, and a v2 batch stored compressed
must be opened to down-convert it for a Fetch v0-3 client, so groupd reads both codecs and writes
them back. The libraries do the compression; this module adds only Kafka's framing around them:

- snappy: Java clients wrap it in snappy-java's xerial framing (a 16-byte header, then
  int32-length-prefixed raw blocks), which Kafka's ``SnappyOutputStream`` writes and every client
  reads; ``snappy_compress`` writes it too, ``snappy_decompress`` reads both that and raw snappy.
- LZ4 frame: Kafka's magic 0 messages computed the frame header checksum over the magic number too
  (KAFKA-3160, ``KafkaLZ4BlockOutputStream.useBrokenFlagDescriptorChecksum``), which the lz4 library
  refuses. ``lz4_decompress`` puts the standard checksum in place before decoding (the message CRC
  already covers the bytes), ``lz4_compress(broken_checksum=True)`` writes Kafka's for magic 0
  readers. Only that one byte needs xxHash32, of the 2-byte frame descriptor: ``xxh32`` below.

Every reader stops at ``limit`` output bytes, so a small hostile input cannot make it allocate
without bound.
"""

from __future__ import annotations

import functools
import struct
from types import ModuleType

from .errors import CorruptRecordError

__all__ = ["lz4_compress", "lz4_decompress", "snappy_compress", "snappy_decompress", "xxh32"]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_U32 = 0xFFFFFFFF


# The libraries are imported on the first compressed batch: a daemon whose clients never compress
# (most of them) does not pay their import at start-up nor keep them resident (issue 26).
@functools.cache
def _snappy() -> ModuleType:
    import snappy

    return snappy


@functools.cache
def _lz4_frame() -> ModuleType:
    import lz4.frame

    return lz4.frame


# --------------------------------------------------------------------------------------------
# snappy


def snappy_compress(data: bytes) -> bytes:
    """snappy in xerial framing, as Kafka's Java clients write it."""
    parts = [_XERIAL_HEADER]
    for pos in range(0, len(data), _XERIAL_BLOCK):
        block = _snappy().compress(data[pos : pos + _XERIAL_BLOCK])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_length(data: bytes) -> int:
    """The uncompressed length a raw snappy stream declares (its leading varint), checked before
    the library allocates it."""
    n = shift = 0
    for pos in range(min(len(data), 5)):
        n |= (data[pos] & 0x7F) << shift
        if not data[pos] & 0x80:
            return n
        shift += 7
    raise CorruptRecordError("bad snappy length")


def _snappy_raw(data: bytes, limit: int) -> bytes:
    if _snappy_length(data) > limit:
        raise CorruptRecordError(f"snappy block declares more than {limit} bytes")
    try:
        return _snappy().decompress(data)
    except Exception as exc:  # python-snappy's (cramjam's) own error types
        raise CorruptRecordError(f"cannot decompress snappy: {exc}") from None


def snappy_decompress(data: bytes, limit: int) -> bytes:
    """Raw snappy, or xerial-framed blocks (what Java clients send)."""
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_raw(data, limit)
    out = bytearray()
    pos = 16
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError("bad xerial snappy block length")
        out += _snappy_raw(data[pos : pos + n], limit - len(out))
        pos += n
    return bytes(out)


# --------------------------------------------------------------------------------------------
# LZ4 frames

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _U32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (for LZ4 frame header checksums: a few bytes, so speed does not matter)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _U32, (seed + _P2) & _U32, seed & _U32, (seed - _P1) & _U32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _U32, 13) * _P1) & _U32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _U32
    else:
        h = (seed + _P5) & _U32
    h = (h + n) & _U32
    while pos + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _U32, 17) * _P4) & _U32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _U32, 11) * _P1) & _U32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _U32
    h ^= h >> 13
    h = (h * _P3) & _U32
    h ^= h >> 16
    return h


def _header_checksum(descriptor: bytes, broken: bool) -> int:
    return (xxh32((_LZ4_MAGIC if broken else b"") + descriptor) >> 8) & 0xFF


def lz4_compress(data: bytes, *, broken_checksum: bool = False) -> bytes:
    """An LZ4 frame as Kafka's ``KafkaLZ4BlockOutputStream`` writes it (independent 64 KB blocks, no
    content size or checksum); ``broken_checksum`` for Kafka's magic 0 readers (KAFKA-3160)."""
    frame = _lz4_frame().compress(
        data,
        block_size=_lz4_frame().BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if not broken_checksum:
        return frame
    out = bytearray(frame)
    out[6] = _header_checksum(bytes(out[4:6]), True)  # the descriptor is FLG, BD: no optional fields
    return bytes(out)


def lz4_decompress(data: bytes, limit: int) -> bytes:
    """An LZ4 frame, Kafka's magic 0 header checksum accepted too."""
    if not data.startswith(_LZ4_MAGIC) or len(data) < 7:
        raise CorruptRecordError("not an lz4 frame")
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # FLG, BD, content size, dict id
    if len(data) <= end:
        raise CorruptRecordError("truncated lz4 frame header")
    descriptor = data[4:end]
    if data[end] == _header_checksum(descriptor, True) != _header_checksum(descriptor, False):
        data = data[:end] + bytes((_header_checksum(descriptor, False),)) + data[end + 1 :]
    try:
        out = _lz4_frame().LZ4FrameDecompressor().decompress(data, max_length=limit + 1)
    except Exception as exc:  # the lz4 library raises RuntimeError for damaged frames
        raise CorruptRecordError(f"cannot decompress lz4: {exc}") from None
    if len(out) > limit:
        raise CorruptRecordError(f"lz4 frame exceeds {limit} bytes")
    return out
