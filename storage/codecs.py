"""Snappy and LZ4 in pure Python, for when python-snappy / lz4 are not installed.

Old clients compress message sets (magic 0/1) with snappy or lz4, and a v2 batch stored compressed
must be opened to down-convert it for a Fetch v0-3 client, so groupd must read both codecs and write
them back. The libraries are optional dependencies; these are the fallbacks, written from the format
descriptions (snappy's ``format_description.txt``, the LZ4 frame and block format documents):

- snappy: a varint of the uncompressed length, then literal and copy elements. Java clients wrap it
  in snappy-java's xerial framing (a 16-byte header, then int32-length-prefixed raw blocks), which
  Kafka's ``SnappyOutputStream`` writes and every client reads; ``snappy_compress`` writes it too.
- LZ4 frame: magic ``04 22 4D 18``, a frame descriptor and its header checksum (byte 2 of xxHash32
  of the descriptor), blocks (int32 little-endian size, high bit = stored uncompressed), an end mark.
  Kafka's magic 0 messages computed that checksum over the magic number too (KAFKA-3160,
  ``KafkaLZ4BlockOutputStream.useBrokenFlagDescriptorChecksum``); ``lz4_compress(broken_checksum=True)``
  writes that for magic 0 readers. The reader does not verify checksums (the message CRC already
  covers the bytes), so it reads both.

The writers do not search for matches: snappy output is literals only and LZ4 blocks are stored
uncompressed, both valid streams that any decoder reads (a little larger than the input). Every reader
stops at ``limit`` output bytes, so a small hostile input cannot make it allocate without bound.
"""

from __future__ import annotations

import struct

from .errors import CorruptRecordError

__all__ = ["lz4_compress", "lz4_decompress", "snappy_compress", "snappy_decompress", "xxh32"]

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024  # block maximum size code 4 (64 KB), what Kafka's KafkaLZ4BlockOutputStream uses
_U32 = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------
# snappy


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise CorruptRecordError("bad snappy length varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def snappy_raw_decompress(data: bytes, limit: int) -> bytes:
    n, pos = _uvarint(data, 0)
    if n > limit:
        raise CorruptRecordError(f"snappy block declares {n} bytes, more than {limit}")
    out = bytearray()
    end = len(data)
    while pos < end:
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # literal
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                length = int.from_bytes(data[pos : pos + extra], "little")
                pos += extra
            length += 1
            if pos + length > end:
                raise CorruptRecordError("snappy literal overruns its block")
            out += data[pos : pos + length]
            pos += length
        else:
            if kind == 1:
                length = ((tag >> 2) & 7) + 4
                offset = ((tag >> 5) << 8) | data[pos]
                pos += 1
            else:
                size = 2 if kind == 2 else 4
                length = (tag >> 2) + 1
                offset = int.from_bytes(data[pos : pos + size], "little")
                pos += size
            if offset <= 0 or offset > len(out):
                raise CorruptRecordError("snappy copy reaches before the start")
            _copy(out, offset, length)
        if len(out) > n:
            raise CorruptRecordError("snappy block longer than it declares")
    if len(out) != n:
        raise CorruptRecordError("snappy block shorter than it declares")
    return bytes(out)


def _copy(out: bytearray, offset: int, length: int) -> None:
    start = len(out) - offset
    if offset >= length:
        out += out[start : start + length]
        return
    while length > 0:  # overlapping copy: the pattern repeats
        chunk = out[start : start + min(offset, length)]
        out += chunk
        length -= len(chunk)


def _snappy_raw_compress(data: bytes) -> bytes:
    out = bytearray()
    n = len(data)
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            break
    for pos in range(0, len(data), 65536):
        chunk = data[pos : pos + 65536]
        length = len(chunk) - 1
        if length < 60:
            out.append(length << 2)
        elif length < 256:
            out += bytes((60 << 2, length))
        else:
            out.append(61 << 2)
            out += length.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def snappy_compress(data: bytes) -> bytes:
    """Xerial-framed snappy, as Kafka's SnappyOutputStream writes it."""
    parts = [_XERIAL_HEADER]
    for pos in range(0, max(len(data), 1), _XERIAL_BLOCK):
        block = _snappy_raw_compress(data[pos : pos + _XERIAL_BLOCK])
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_decompress(data: bytes, limit: int) -> bytes:
    """Raw or xerial-framed snappy."""
    if not data.startswith(_XERIAL_HEADER[:8]):
        return snappy_raw_decompress(data, limit)
    out = bytearray()
    pos = 16
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError("bad xerial snappy block length")
        out += snappy_raw_decompress(data[pos : pos + n], limit - len(out))
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


def lz4_compress(data: bytes, *, broken_checksum: bool = False) -> bytes:
    """An LZ4 frame of stored (uncompressed) blocks; ``broken_checksum`` for Kafka's magic 0 readers."""
    descriptor = bytes((0x60, 0x40))  # version 01, blocks independent; block maximum size 64 KB
    hc = (xxh32((_LZ4_MAGIC if broken_checksum else b"") + descriptor) >> 8) & 0xFF
    parts = [_LZ4_MAGIC, descriptor, bytes((hc,))]
    for pos in range(0, len(data), _LZ4_BLOCK):
        block = data[pos : pos + _LZ4_BLOCK]
        parts.append(struct.pack("<I", len(block) | 0x80000000))
        parts.append(block)
    parts.append(b"\0\0\0\0")
    return b"".join(parts)


def _lz4_block(data: bytes, pos: int, end: int, out: bytearray, limit: int) -> None:
    while pos < end:
        token = data[pos]
        pos += 1
        length = token >> 4
        if length == 15:
            while True:
                b = data[pos]
                pos += 1
                length += b
                if b != 255:
                    break
        if pos + length > end:
            raise CorruptRecordError("lz4 literals overrun their block")
        out += data[pos : pos + length]
        pos += length
        if pos >= end:
            break  # the last sequence has literals only
        offset = data[pos] | (data[pos + 1] << 8)
        pos += 2
        length = (token & 15) + 4
        if length == 19:
            while True:
                b = data[pos]
                pos += 1
                length += b
                if b != 255:
                    break
        if offset == 0 or offset > len(out):
            raise CorruptRecordError("lz4 match reaches before the start")
        if len(out) + length > limit:
            raise CorruptRecordError(f"lz4 frame exceeds {limit} bytes")
        _copy(out, offset, length)
        if len(out) > limit:
            raise CorruptRecordError(f"lz4 frame exceeds {limit} bytes")


def lz4_decompress(data: bytes, limit: int) -> bytes:
    """An LZ4 frame (checksums not verified, so Kafka's magic 0 frames read too)."""
    if not data.startswith(_LZ4_MAGIC) or len(data) < 7:
        raise CorruptRecordError("not an lz4 frame")
    flg = data[4]
    if flg >> 6 != 1:
        raise CorruptRecordError("unsupported lz4 frame version")
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1
    out = bytearray()
    while True:
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated lz4 frame")
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if size == 0:
            break
        stored = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        if pos + size > len(data):
            raise CorruptRecordError("lz4 block overruns its frame")
        if stored:
            out += data[pos : pos + size]
        else:
            _lz4_block(data, pos, pos + size, out, limit)
        if len(out) > limit:
            raise CorruptRecordError(f"lz4 frame exceeds {limit} bytes")
        pos += size + (4 if block_checksum else 0)
    if content_checksum and pos + 4 > len(data):
        raise CorruptRecordError("truncated lz4 content checksum")
    return bytes(out)
