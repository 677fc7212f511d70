"""Runtime helpers that compiled codec code calls.

The construct classes in ``primitives`` emit calls to these functions from their ``_emitparse`` /
``_emitbuild``; the generated module star-imports this file so every call is a module-global lookup.
Readers take a ``BytesIO``; writers append to one and return the value (construct's convention).
Short reads raise ``DecodeError``: the only exception the codec lets escape for malformed input.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from io import BytesIO

__all__ = [
    "MAX_VARINT_BYTES",
    "DecodeError",
    "EncodeError",
    "read_bool",
    "read_bytes",
    "read_compact_bytes",
    "read_compact_nullable_bytes",
    "read_compact_nullable_string",
    "read_compact_string",
    "read_float64",
    "read_int8",
    "read_int16",
    "read_int32",
    "read_int64",
    "read_nullable_bytes",
    "read_nullable_string",
    "read_string",
    "read_uint16",
    "read_uint32",
    "read_uuid",
    "read_uvarint",
    "read_varint",
    "read_varlong",
    "skip_tagged",
    "write_bool",
    "write_bytes",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "write_compact_nullable_string",
    "write_compact_string",
    "write_float64",
    "write_int8",
    "write_int16",
    "write_int32",
    "write_int64",
    "write_nullable_bytes",
    "write_nullable_string",
    "write_string",
    "write_uint16",
    "write_uint32",
    "write_uuid",
    "write_uvarint",
    "write_varint",
    "write_varlong",
    "zigzag32",
    "zigzag64",
]


class DecodeError(ValueError):
    """Malformed bytes: a truncated field, a bad length, invalid UTF-8, an over-long varint."""


class EncodeError(ValueError):
    """A value that cannot be written in the requested version (out of range, wrong type, null not allowed)."""


MAX_VARINT_BYTES = 10

_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_u16 = struct.Struct(">H")
_i32 = struct.Struct(">i")
_u32 = struct.Struct(">I")
_i64 = struct.Struct(">q")
_f64 = struct.Struct(">d")

_u_i8 = _i8.unpack
_u_i16 = _i16.unpack
_u_u16 = _u16.unpack
_u_i32 = _i32.unpack
_u_u32 = _u32.unpack
_u_i64 = _i64.unpack
_u_f64 = _f64.unpack
_p_i8 = _i8.pack
_p_i16 = _i16.pack
_p_u16 = _u16.pack
_p_i32 = _i32.pack
_p_u32 = _u32.pack
_p_i64 = _i64.pack
_p_f64 = _f64.pack


def _short(n: int, got: int) -> DecodeError:
    return DecodeError(f"truncated: needed {n} bytes, got {got}")


# --- fixed width -----------------------------------------------------------------------------------


def read_int8(io: BytesIO) -> int:
    b = io.read(1)
    if len(b) != 1:
        raise _short(1, len(b))
    return _u_i8(b)[0]


def read_bool(io: BytesIO) -> bool:
    b = io.read(1)
    if len(b) != 1:
        raise _short(1, len(b))
    return b != b"\x00"


def read_int16(io: BytesIO) -> int:
    b = io.read(2)
    if len(b) != 2:
        raise _short(2, len(b))
    return _u_i16(b)[0]


def read_uint16(io: BytesIO) -> int:
    b = io.read(2)
    if len(b) != 2:
        raise _short(2, len(b))
    return _u_u16(b)[0]


def read_int32(io: BytesIO) -> int:
    b = io.read(4)
    if len(b) != 4:
        raise _short(4, len(b))
    return _u_i32(b)[0]


def read_uint32(io: BytesIO) -> int:
    b = io.read(4)
    if len(b) != 4:
        raise _short(4, len(b))
    return _u_u32(b)[0]


def read_int64(io: BytesIO) -> int:
    b = io.read(8)
    if len(b) != 8:
        raise _short(8, len(b))
    return _u_i64(b)[0]


def read_float64(io: BytesIO) -> float:
    b = io.read(8)
    if len(b) != 8:
        raise _short(8, len(b))
    return _u_f64(b)[0]


def read_uuid(io: BytesIO) -> _uuid.UUID:
    b = io.read(16)
    if len(b) != 16:
        raise _short(16, len(b))
    return _uuid.UUID(bytes=b)


def _range_error(kind: str, v: object) -> EncodeError:
    return EncodeError(f"{kind} out of range or wrong type: {v!r}")


def write_int8(v: int, io: BytesIO) -> int:
    try:
        io.write(_p_i8(v))
    except struct.error:
        raise _range_error("int8", v) from None
    return v


def write_bool(v: bool, io: BytesIO) -> bool:
    io.write(b"\x01" if v else b"\x00")
    return v


def write_int16(v: int, io: BytesIO) -> int:
    try:
        io.write(_p_i16(v))
    except struct.error:
        raise _range_error("int16", v) from None
    return v


def write_uint16(v: int, io: BytesIO) -> int:
    try:
        io.write(_p_u16(v))
    except struct.error:
        raise _range_error("uint16", v) from None
    return v


def write_int32(v: int, io: BytesIO) -> int:
    try:
        io.write(_p_i32(v))
    except struct.error:
        raise _range_error("int32", v) from None
    return v


def write_uint32(v: int, io: BytesIO) -> int:
    try:
        io.write(_p_u32(v))
    except struct.error:
        raise _range_error("uint32", v) from None
    return v


def write_int64(v: int, io: BytesIO) -> int:
    try:
        io.write(_p_i64(v))
    except struct.error:
        raise _range_error("int64", v) from None
    return v


def write_float64(v: float, io: BytesIO) -> float:
    try:
        io.write(_p_f64(v))
    except struct.error:
        raise _range_error("float64", v) from None
    return v


_ZERO_UUID = bytes(16)


def write_uuid(v: _uuid.UUID | bytes | None, io: BytesIO) -> _uuid.UUID | bytes | None:
    if v is None:
        io.write(_ZERO_UUID)
    elif isinstance(v, _uuid.UUID):
        io.write(v.bytes)
    elif isinstance(v, bytes | bytearray) and len(v) == 16:
        io.write(v)
    else:
        raise _range_error("uuid", v)
    return v


# --- varints ---------------------------------------------------------------------------------------


def read_uvarint(io: BytesIO) -> int:
    # One-byte values are by far the most common (lengths, counts, empty tagged sections).
    b = io.read(1)
    if not b:
        raise _short(1, 0)
    x = b[0]
    if x < 0x80:
        return x
    result = x & 0x7F
    shift = 7
    for _ in range(MAX_VARINT_BYTES - 1):
        b = io.read(1)
        if not b:
            raise _short(1, 0)
        x = b[0]
        result |= (x & 0x7F) << shift
        if x < 0x80:
            return result
        shift += 7
    raise DecodeError("varint longer than 10 bytes")


def zigzag32(n: int) -> int:
    return (n << 1) ^ (n >> 31)


def zigzag64(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def read_varint(io: BytesIO) -> int:
    u = read_uvarint(io)
    if u > 0xFFFFFFFF:
        raise DecodeError("varint does not fit in 32 bits")
    return (u >> 1) ^ -(u & 1)


def read_varlong(io: BytesIO) -> int:
    u = read_uvarint(io)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong does not fit in 64 bits")
    return (u >> 1) ^ -(u & 1)


_ONE_BYTE = [bytes([i]) for i in range(128)]


def _uvarint_bytes(v: int) -> bytes:
    if 0 <= v < 0x80:
        return _ONE_BYTE[v]
    if v < 0:
        raise _range_error("unsigned varint", v)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_uvarint(v: int, io: BytesIO) -> int:
    if v > 0xFFFFFFFF:
        raise _range_error("unsigned varint", v)
    io.write(_uvarint_bytes(v))
    return v


def write_varint(v: int, io: BytesIO) -> int:
    if not -(2**31) <= v < 2**31:
        raise _range_error("varint", v)
    io.write(_uvarint_bytes(zigzag32(v) & 0xFFFFFFFF))
    return v


def write_varlong(v: int, io: BytesIO) -> int:
    if not -(2**63) <= v < 2**63:
        raise _range_error("varlong", v)
    io.write(_uvarint_bytes(zigzag64(v) & 0xFFFFFFFFFFFFFFFF))
    return v


# --- strings and bytes -----------------------------------------------------------------------------


def _read_exact(io: BytesIO, n: int) -> bytes:
    if n > 0x7FFFFFFF:
        # A compact length is a varint and may decode to anything up to 2**70; no Kafka length is
        # over 2**31-1, and BytesIO.read() raises OverflowError past sys.maxsize.
        raise _short(n, 0)
    b = io.read(n)
    if len(b) != n:
        raise _short(n, len(b))
    return b


def _decode_utf8(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"invalid UTF-8 in string: {e.reason}") from None


def read_string(io: BytesIO) -> str:
    n = read_int16(io)
    if n < 0:
        raise DecodeError("null value for a non-nullable string")
    return _decode_utf8(_read_exact(io, n)) if n else ""


def read_nullable_string(io: BytesIO) -> str | None:
    n = read_int16(io)
    if n < 0:
        return None
    return _decode_utf8(_read_exact(io, n)) if n else ""


def read_compact_string(io: BytesIO) -> str:
    n = read_uvarint(io) - 1
    if n < 0:
        raise DecodeError("null value for a non-nullable compact string")
    return _decode_utf8(_read_exact(io, n)) if n else ""


def read_compact_nullable_string(io: BytesIO) -> str | None:
    n = read_uvarint(io) - 1
    if n < 0:
        return None
    return _decode_utf8(_read_exact(io, n)) if n else ""


def read_bytes(io: BytesIO) -> bytes:
    n = read_int32(io)
    if n < 0:
        raise DecodeError("null value for non-nullable bytes")
    return _read_exact(io, n)


def read_nullable_bytes(io: BytesIO) -> bytes | None:
    n = read_int32(io)
    if n < 0:
        return None
    return _read_exact(io, n)


def read_compact_bytes(io: BytesIO) -> bytes:
    n = read_uvarint(io) - 1
    if n < 0:
        raise DecodeError("null value for non-nullable compact bytes")
    return _read_exact(io, n)


def read_compact_nullable_bytes(io: BytesIO) -> bytes | None:
    n = read_uvarint(io) - 1
    if n < 0:
        return None
    return _read_exact(io, n)


def _utf8(v: str) -> bytes:
    if not isinstance(v, str):
        raise _range_error("string", v)
    return v.encode("utf-8")


def write_string(v: str, io: BytesIO) -> str:
    b = _utf8(v)
    if len(b) > 0x7FFF:
        raise _range_error("string length", len(b))
    io.write(_p_i16(len(b)))
    io.write(b)
    return v


def write_nullable_string(v: str | None, io: BytesIO) -> str | None:
    if v is None:
        io.write(b"\xff\xff")
        return v
    return write_string(v, io)


def write_compact_string(v: str, io: BytesIO) -> str:
    b = _utf8(v)
    io.write(_uvarint_bytes(len(b) + 1))
    io.write(b)
    return v


def write_compact_nullable_string(v: str | None, io: BytesIO) -> str | None:
    if v is None:
        io.write(b"\x00")
        return v
    return write_compact_string(v, io)


def _as_bytes(v: object) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    raise _range_error("bytes", v)


def write_bytes(v: bytes, io: BytesIO) -> bytes:
    b = _as_bytes(v)
    io.write(_p_i32(len(b)))
    io.write(b)
    return v


def write_nullable_bytes(v: bytes | None, io: BytesIO) -> bytes | None:
    if v is None:
        io.write(b"\xff\xff\xff\xff")
        return v
    return write_bytes(v, io)


def write_compact_bytes(v: bytes, io: BytesIO) -> bytes:
    b = _as_bytes(v)
    io.write(_uvarint_bytes(len(b) + 1))
    io.write(b)
    return v


def write_compact_nullable_bytes(v: bytes | None, io: BytesIO) -> bytes | None:
    if v is None:
        io.write(b"\x00")
        return v
    return write_compact_bytes(v, io)


# --- tagged fields ---------------------------------------------------------------------------------


def skip_tagged(io: BytesIO) -> None:
    """Read past a tagged-field section whose tags are all unknown to this version."""
    n = read_uvarint(io)
    for _ in range(n):
        read_uvarint(io)
        size = read_uvarint(io)
        _read_exact(io, size)


ZERO_UUID = _uuid.UUID(int=0)
__all__ += ["ZERO_UUID", "read_exact"]
read_exact = _read_exact


# --- position-based helpers used by compiled structs ------------------------------------------------
# Compiled structs parse from an immutable ``bytes`` and an integer position instead of a stream:
# ``struct.unpack_from`` and slicing avoid a method call and a bytes object per field.


def uvarint_at(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for i in range(MAX_VARINT_BYTES):
        x = buf[pos + i]
        result |= (x & 0x7F) << shift
        if x < 0x80:
            return result, pos + i + 1
        shift += 7
    raise DecodeError("varint longer than 10 bytes")


def varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    u, pos = uvarint_at(buf, pos)
    if u > 0xFFFFFFFF:
        raise DecodeError("varint does not fit in 32 bits")
    return (u >> 1) ^ -(u & 1), pos


def varlong_at(buf: bytes, pos: int) -> tuple[int, int]:
    u, pos = uvarint_at(buf, pos)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong does not fit in 64 bits")
    return (u >> 1) ^ -(u & 1), pos


def uuid_at(buf: bytes, pos: int) -> _uuid.UUID:
    b = buf[pos : pos + 16]
    if len(b) != 16:
        raise _short(16, len(b))
    return _uuid.UUID(bytes=b)


def uuid_bytes(v: _uuid.UUID | bytes | None) -> bytes:
    if v is None:
        return _ZERO_UUID
    if isinstance(v, _uuid.UUID):
        return v.bytes
    if isinstance(v, bytes | bytearray) and len(v) == 16:
        return bytes(v)
    raise _range_error("uuid", v)


def varint_bytes(v: int) -> bytes:
    if not -(2**31) <= v < 2**31:
        raise _range_error("varint", v)
    return _uvarint_bytes(zigzag32(v) & 0xFFFFFFFF)


def varlong_bytes(v: int) -> bytes:
    if not -(2**63) <= v < 2**63:
        raise _range_error("varlong", v)
    return _uvarint_bytes(zigzag64(v) & 0xFFFFFFFFFFFFFFFF)


def short_read() -> DecodeError:
    return DecodeError("truncated: a length points past the end of the message")


def tagged_size_mismatch(name: str) -> DecodeError:
    return DecodeError(f"tagged field {name} size mismatch")


ONE_BYTE = _ONE_BYTE
uvarint_bytes = _uvarint_bytes
__all__ += [
    "ONE_BYTE",
    "short_read",
    "tagged_size_mismatch",
    "uuid_at",
    "uuid_bytes",
    "uvarint_at",
    "uvarint_bytes",
    "varint_at",
    "varint_bytes",
    "varlong_at",
    "varlong_bytes",
]
