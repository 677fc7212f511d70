"""Kafka protocol primitives as construct classes that compile.

Stock construct pieces (VarInt, Prefixed, Adapter, IfThenElse with lambdas) silently fall back to
interpreted calls when compiled, and a nullable compact string cannot be built from them at all
(design.md, "Codec"). Each class here therefore implements both the interpreted pair
``_parse``/``_build`` and the compiler pair ``_emitparse``/``_emitbuild``; the emitted code is a call
into ``_rt`` (one function call per field) and the compound classes (``KArray``, ``KStruct``) emit a
whole function each, so a compiled message is straight-line Python with no construct context objects.

Parsed structs are plain ``dict``s keyed by snake_case field names; building accepts any mapping and
fills absent keys with the field's default.
"""

from __future__ import annotations

import copy
from io import BytesIO
from typing import Any

from construct import Construct

from . import _rt

_RT_IMPORT = f"from {_rt.__name__} import *\n"


class KPrimitive(Construct):
    """A Kafka primitive.

    Standalone it parses/builds through one call into ``_rt``. Inside a compiled ``KStruct`` or
    ``KArray`` it is inlined instead: fixed-width fields become part of one fused ``struct`` format
    (``fmt``), variable-width ones emit the statements of ``parse_lines``/``build_lines``, which work on
    ``buf``/``pos`` (parsing) and ``w`` (an ``append`` of output parts) in the enclosing function.
    """

    reader: str = ""
    writer: str = ""
    fmt: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self._read = getattr(_rt, self.reader)
        self._write = getattr(_rt, self.writer)

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        return self._read(stream)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        return self._write(obj, stream)

    def _emitparse(self, code: Any) -> str:
        code.append(_RT_IMPORT)
        return f"{self.reader}(io)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_RT_IMPORT)
        return f"{self.writer}(obj, io)"

    def parse_lines(self, var: str) -> list[str]:
        raise NotImplementedError

    def build_lines(self, val: str) -> list[str]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


def _prim(name: str, reader: str, writer: str, fmt: str | None = None) -> type[KPrimitive]:
    return type(name, (KPrimitive,), {"reader": reader, "writer": writer, "fmt": fmt})


def _uvarint_lines(var: str) -> list[str]:
    # One-byte varints (every length under 127) take the short path without a call.
    return [
        f"{var} = buf[pos]",
        f"if {var} < 0x80:",
        "    pos += 1",
        "else:",
        f"    {var}, pos = uvarint_at(buf, pos)",
    ]


class _VarPrim(KPrimitive):
    at: str = ""
    to_bytes: str = ""

    def parse_lines(self, var: str) -> list[str]:
        if self.at == "uvarint_at":
            return _uvarint_lines(var)
        return [f"{var}, pos = {self.at}(buf, pos)"]

    def build_lines(self, val: str) -> list[str]:
        return [f"w({self.to_bytes}({val}))"]


class _UuidPrim(KPrimitive):
    def parse_lines(self, var: str) -> list[str]:
        return [f"{var} = uuid_at(buf, pos)", "pos += 16"]

    def build_lines(self, val: str) -> list[str]:
        return [f"w(uuid_bytes({val}))"]


class _LenPrefixed(KPrimitive):
    """STRING / BYTES in their four shapes: int16 or int32 length, or compact; nullable or not."""

    compact: bool = False
    nullable: bool = False
    text: bool = False

    def parse_lines(self, var: str) -> list[str]:
        if self.compact:
            lines = [*_uvarint_lines("n"), "n -= 1"]
        elif self.text:
            lines = ["n, = _u_h(buf, pos)", "pos += 2"]
        else:
            lines = ["n, = _u_i(buf, pos)", "pos += 4"]
        lines.append("if n < 0:")
        if self.nullable:
            lines.append(f"    {var} = None")
        else:
            lines.append("    raise DecodeError('null value for a non-nullable field')")
        lines.append("else:")
        lines.append("    end = pos + n")
        lines.append("    if end > len(buf):")
        lines.append("        raise short_read()")
        lines.append(f"    {var} = buf[pos:end]{'.decode()' if self.text else ''}")
        lines.append("    pos = end")
        return lines

    def build_lines(self, val: str) -> list[str]:
        null = "b'\\x00'" if self.compact else ("b'\\xff\\xff'" if self.text else "b'\\xff\\xff\\xff\\xff'")
        data = f"{val}.encode()" if self.text else val
        if self.compact:
            prefix = "w(uvarint_bytes(len(b) + 1))"
        elif self.text:
            prefix = "w(_p_h(len(b)))"
        else:
            prefix = "w(_p_i(len(b)))"
        body = [f"b = {data}", prefix, "w(b)"]
        if not self.nullable:
            return body
        return [f"if {val} is None:", f"    w({null})", "else:", *("    " + s for s in body)]


def _lp(name: str, reader: str, writer: str, *, compact: bool, nullable: bool, text: bool) -> type[KPrimitive]:
    attrs = {"reader": reader, "writer": writer, "compact": compact, "nullable": nullable, "text": text}
    return type(name, (_LenPrefixed,), attrs)


def _vp(name: str, reader: str, writer: str, at: str, to_bytes: str) -> type[KPrimitive]:
    attrs = {"reader": reader, "writer": writer, "at": at, "to_bytes": to_bytes}
    return type(name, (_VarPrim,), attrs)


Int8 = _prim("Int8", "read_int8", "write_int8", "b")
Int16 = _prim("Int16", "read_int16", "write_int16", "h")
Int32 = _prim("Int32", "read_int32", "write_int32", "i")
Int64 = _prim("Int64", "read_int64", "write_int64", "q")
UInt16 = _prim("UInt16", "read_uint16", "write_uint16", "H")
UInt32 = _prim("UInt32", "read_uint32", "write_uint32", "I")
Float64 = _prim("Float64", "read_float64", "write_float64", "d")
Boolean = _prim("Boolean", "read_bool", "write_bool", "?")
Uuid = type("Uuid", (_UuidPrim,), {"reader": "read_uuid", "writer": "write_uuid"})
UnsignedVarInt = _vp("UnsignedVarInt", "read_uvarint", "write_uvarint", "uvarint_at", "uvarint_bytes")
VarInt = _vp("VarInt", "read_varint", "write_varint", "varint_at", "varint_bytes")
VarLong = _vp("VarLong", "read_varlong", "write_varlong", "varlong_at", "varlong_bytes")
String = _lp("String", "read_string", "write_string", compact=False, nullable=False, text=True)
NullableString = _lp(
    "NullableString", "read_nullable_string", "write_nullable_string", compact=False, nullable=True, text=True
)
CompactString = _lp(
    "CompactString", "read_compact_string", "write_compact_string", compact=True, nullable=False, text=True
)
CompactNullableString = _lp(
    "CompactNullableString",
    "read_compact_nullable_string",
    "write_compact_nullable_string",
    compact=True,
    nullable=True,
    text=True,
)
Bytes = _lp("Bytes", "read_bytes", "write_bytes", compact=False, nullable=False, text=False)
NullableBytes = _lp(
    "NullableBytes", "read_nullable_bytes", "write_nullable_bytes", compact=False, nullable=True, text=False
)
CompactBytes = _lp(
    "CompactBytes", "read_compact_bytes", "write_compact_bytes", compact=True, nullable=False, text=False
)
CompactNullableBytes = _lp(
    "CompactNullableBytes",
    "read_compact_nullable_bytes",
    "write_compact_nullable_bytes",
    compact=True,
    nullable=True,
    text=False,
)

INT8 = Int8()
INT16 = Int16()
INT32 = Int32()
INT64 = Int64()
UINT16 = UInt16()
UINT32 = UInt32()
FLOAT64 = Float64()
BOOLEAN = Boolean()
UUID = Uuid()
UNSIGNED_VARINT = UnsignedVarInt()
VARINT = VarInt()
VARLONG = VarLong()
STRING = String()
NULLABLE_STRING = NullableString()
COMPACT_STRING = CompactString()
COMPACT_NULLABLE_STRING = CompactNullableString()
BYTES = Bytes()
NULLABLE_BYTES = NullableBytes()
COMPACT_BYTES = CompactBytes()
COMPACT_NULLABLE_BYTES = CompactNullableBytes()


class TaggedFields(Construct):
    """An empty-or-unknown tagged-field section: skipped on read, written as zero fields."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> None:
        _rt.skip_tagged(stream)
        return None

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        stream.write(b"\x00")
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_RT_IMPORT)
        return "skip_tagged(io)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_RT_IMPORT)
        return "(io.write(b'\\x00'), obj)[1]"


TAGGED_FIELDS = TaggedFields()


_FIXED_SIZES = {"b": 1, "h": 2, "i": 4, "q": 8, "H": 2, "I": 4, "d": 8, "?": 1}


def _fmt_names(code: Any, fmt: str) -> tuple[str, str]:
    """Module-level unpack_from/pack for a fused big-endian format, defined once per generated module."""
    code.append("from struct import Struct as _Struct\n")
    suffix = fmt.replace("?", "o")
    code.append(f"_u_{suffix} = _Struct('>{fmt}').unpack_from\n_p_{suffix} = _Struct('>{fmt}').pack\n")
    return f"_u_{suffix}", f"_p_{suffix}"


def _prelude(code: Any) -> None:
    code.append(_RT_IMPORT)
    _fmt_names(code, "h")
    _fmt_names(code, "i")


def _indent(lines: list[str], n: int) -> list[str]:
    pad = " " * n
    return [pad + s for s in lines]


class _Node(Construct):
    """A compound construct (array or struct) that emits position-based functions.

    ``emit_parse_fn`` returns the name of ``f(buf, pos) -> (value, pos)`` and ``emit_build_fn`` the name
    of ``f(value, w)`` that appends encoded parts with ``w``. The construct-level ``_emitparse`` /
    ``_emitbuild`` wrap them for streams, so these nodes also compile when nested in stock constructs.
    """

    def emit_parse_fn(self, code: Any) -> str:
        raise NotImplementedError

    def emit_build_fn(self, code: Any) -> str:
        raise NotImplementedError

    def _emitparse(self, code: Any) -> str:
        fn = self.emit_parse_fn(code)
        # The position-based code lets struct.error / IndexError / UnicodeDecodeError escape on
        # malformed input (``Codec.decode_at`` translates them); do the same for construct's own
        # Compiled entry points, so DecodeError stays the only error for bad bytes on every path.
        code.append("from struct import error as _StructError\n")
        code.append(f"""
            def {fn}_io(io, this):
                start = io.tell()
                buf = io.read()
                try:
                    value, pos = {fn}(buf, 0)
                except DecodeError:
                    raise
                except (_StructError, IndexError, UnicodeDecodeError, ValueError) as e:
                    raise DecodeError(f"malformed message: {{e}}") from None
                io.seek(start + pos)
                return value
        """)
        return f"{fn}_io(io, this)"

    def _emitbuild(self, code: Any) -> str:
        fn = self.emit_build_fn(code)
        code.append(f"""
            def {fn}_io(obj, io, this):
                parts = []
                {fn}(obj, parts.append)
                io.write(b''.join(parts))
                return obj
        """)
        return f"{fn}_io(obj, io, this)"


def _parse_value_lines(code: Any, sub: Construct, var: str) -> list[str]:
    if isinstance(sub, _Node):
        return [f"{var}, pos = {sub.emit_parse_fn(code)}(buf, pos)"]
    assert isinstance(sub, KPrimitive)
    if sub.fmt is not None:
        unpack, _ = _fmt_names(code, sub.fmt)
        return [f"{var}, = {unpack}(buf, pos)", f"pos += {_FIXED_SIZES[sub.fmt]}"]
    return sub.parse_lines(var)


def _build_value_lines(code: Any, sub: Construct, val: str) -> list[str]:
    if isinstance(sub, _Node):
        return [f"{sub.emit_build_fn(code)}({val}, w)"]
    assert isinstance(sub, KPrimitive)
    if sub.fmt is not None:
        _, pack = _fmt_names(code, sub.fmt)
        return [f"w({pack}({val}))"]
    return sub.build_lines(val)


class KArray(_Node):
    """ARRAY (int32 count) or COMPACT_ARRAY (unsigned varint count + 1), optionally nullable."""

    def __init__(self, subcon: Construct, *, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.subcon = subcon
        self.compact = compact
        self.nullable = nullable
        self._names: dict[int, tuple[str, str]] = {}

    def _read_count(self, stream: BytesIO) -> int:
        return _rt.read_uvarint(stream) - 1 if self.compact else _rt.read_int32(stream)

    def _parse(self, stream: BytesIO, context: Any, path: str) -> list[Any] | None:
        n = self._read_count(stream)
        if n < 0:
            if self.nullable:
                return None
            raise _rt.DecodeError("null value for a non-nullable array")
        # Every element consumes at least one byte, so a lying count fails on the first short read
        # instead of allocating: no separate bound is needed.
        return [self.subcon._parse(stream, context, path) for _ in range(n)]

    def _write_count(self, n: int | None, stream: BytesIO) -> None:
        if n is None:
            if not self.nullable:
                raise _rt.EncodeError("null value for a non-nullable array")
            stream.write(b"\x00" if self.compact else b"\xff\xff\xff\xff")
        elif self.compact:
            _rt.write_uvarint(n + 1, stream)
        else:
            _rt.write_int32(n, stream)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            self._write_count(None, stream)
            return obj
        self._write_count(len(obj), stream)
        for item in obj:
            self.subcon._build(item, stream, context, path)
        return obj

    def emit_parse_fn(self, code: Any) -> str:
        key = id(code)
        if key in self._names:
            return self._names[key][0]
        _prelude(code)
        uid = code.allocateId()
        fname = f"parse_karray_{uid}"
        self._names[key] = (fname, f"build_karray_{uid}")
        if self.compact:
            count = [*_uvarint_lines("n"), "n -= 1"]
        else:
            count = ["n, = _u_i(buf, pos)", "pos += 4"]
        on_null = "return None, pos" if self.nullable else "raise DecodeError('null value for a non-nullable array')"
        elem = _parse_value_lines(code, self.subcon, "v")
        lines = [
            f"def {fname}(buf, pos):",
            *_indent(count, 4),
            "    if n < 0:",
            f"        {on_null}",
            "    out = []",
            "    app = out.append",
            "    for _ in range(n):",
            *_indent(elem, 8),
            "        app(v)",
            "    return out, pos",
        ]
        code.append("\n".join(lines) + "\n")
        return fname

    def emit_build_fn(self, code: Any) -> str:
        self.emit_parse_fn(code)
        fname = self._names[id(code)][1]
        if self.nullable:
            null = "b'\\x00'" if self.compact else "b'\\xff\\xff\\xff\\xff'"
            on_null = [f"        w({null})", "        return"]
        else:
            on_null = ["        raise EncodeError('null value for a non-nullable array')"]
        count = "w(uvarint_bytes(len(items) + 1))" if self.compact else "w(_p_i(len(items)))"
        elem = _build_value_lines(code, self.subcon, "v")
        lines = [
            f"def {fname}(items, w):",
            "    if items is None:",
            *on_null,
            f"    {count}",
            "    for v in items:",
            *_indent(elem, 8),
        ]
        code.append("\n".join(lines) + "\n")
        return fname


class KField:
    """One member of a ``KStruct``: name, construct, default, and whether null is legal."""

    __slots__ = ("default", "name", "nullable", "subcon", "tag")

    def __init__(self, name: str, subcon: Construct, default: Any, *, nullable: bool, tag: int | None = None) -> None:
        self.name = name
        self.subcon = subcon
        self.default = default
        self.nullable = nullable
        self.tag = tag

    def fresh_default(self) -> Any:
        if isinstance(self.default, dict):
            return copy.deepcopy(self.default)
        return list(self.default) if isinstance(self.default, list) else self.default


def _default_literal(v: Any) -> str:
    if v == _rt.ZERO_UUID:
        return "ZERO_UUID"
    if isinstance(v, list):
        return "[]"
    if isinstance(v, dict):  # a nested struct's default: a fresh dict literal of its fields' defaults
        return "{" + ", ".join(f"{k!r}: {_default_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, bool | int | float | str | bytes) or v is None:
        return repr(v)
    raise TypeError(f"no literal for default {v!r}")


class KStruct(_Node):
    """A Kafka struct: ordered fields, then (in flexible versions) a tagged-field section.

    ``tagged`` is None for non-flexible versions. Known tags are decoded into the result; unknown
    tags are skipped. Tagged fields are written only when they differ from their default, as Kafka does.
    Runs of adjacent fixed-width fields are read and written with one fused ``struct`` format.
    """

    def __init__(self, fields: list[KField], tagged: list[KField] | None) -> None:
        super().__init__()
        self.fields = fields
        self.tagged = sorted(tagged, key=lambda f: f.tag or 0) if tagged is not None else None
        self._names: dict[int, tuple[str, str]] = {}

    # --- interpreted ----------------------------------------------------------------------------
    def _parse(self, stream: BytesIO, context: Any, path: str) -> dict[str, Any]:
        result = {f.name: f.subcon._parse(stream, context, path) for f in self.fields}
        if self.tagged is not None:
            by_tag = {f.tag: f for f in self.tagged}
            for f in self.tagged:
                result[f.name] = f.fresh_default()
            for _ in range(_rt.read_uvarint(stream)):
                tag = _rt.read_uvarint(stream)
                size = _rt.read_uvarint(stream)
                tf = by_tag.get(tag)
                if tf is None:
                    _rt.read_exact(stream, size)
                    continue
                start = stream.tell()
                result[tf.name] = tf.subcon._parse(stream, context, path)
                if stream.tell() - start != size:
                    raise _rt.tagged_size_mismatch(tf.name)
        return result

    def _value(self, obj: Any, f: KField) -> Any:
        v = obj.get(f.name, f.default) if f.nullable else obj.get(f.name)
        if v is None and not f.nullable:
            v = f.fresh_default()
        return v

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        for f in self.fields:
            f.subcon._build(self._value(obj, f), stream, context, path)
        if self.tagged is not None:
            present = []
            for f in self.tagged:
                v = self._value(obj, f)
                if v != f.default:
                    buf = BytesIO()
                    f.subcon._build(v, buf, context, path)
                    present.append((f.tag, buf.getvalue()))
            _rt.write_uvarint(len(present), stream)
            for tag, data in present:
                _rt.write_uvarint(tag, stream)
                _rt.write_uvarint(len(data), stream)
                stream.write(data)
        return obj

    # --- compiled -------------------------------------------------------------------------------
    def _runs(self) -> list[list[tuple[int, KField]]]:
        """Group field indexes into runs: adjacent fixed-width fields share a run."""
        runs: list[list[tuple[int, KField]]] = []
        for i, f in enumerate(self.fields):
            fixed = isinstance(f.subcon, KPrimitive) and f.subcon.fmt is not None
            if fixed and runs and len(runs[-1]) and _is_fixed(runs[-1][-1][1]):
                runs[-1].append((i, f))
            else:
                runs.append([(i, f)])
        return runs

    def emit_parse_fn(self, code: Any) -> str:
        key = id(code)
        if key in self._names:
            return self._names[key][0]
        _prelude(code)
        uid = code.allocateId()
        fname = f"parse_kstruct_{uid}"
        self._names[key] = (fname, f"build_kstruct_{uid}")
        body: list[str] = []
        for run in self._runs():
            if len(run) > 1:
                fmt = "".join(f.subcon.fmt for _, f in run)  # type: ignore[attr-defined]
                unpack, _ = _fmt_names(code, fmt)
                names = ", ".join(f"v{i}" for i, _ in run)
                body.append(f"{names} = {unpack}(buf, pos)")
                body.append(f"pos += {sum(_FIXED_SIZES[c] for c in fmt)}")
            else:
                i, f = run[0]
                body.extend(_parse_value_lines(code, f.subcon, f"v{i}"))
        items = ", ".join(f"{f.name!r}: v{i}" for i, f in enumerate(self.fields))
        body.append(f"r = {{{items}}}")
        if self.tagged is not None:
            for f in self.tagged:
                body.append(f"r[{f.name!r}] = {_default_literal(f.default)}")
            loop = [
                "nt, pos = uvarint_at(buf, pos)",
                "for _ in range(nt):",
                "    tag, pos = uvarint_at(buf, pos)",
                "    size, pos = uvarint_at(buf, pos)",
                # Not ``end``: a string or bytes value's own lines use that name.
                "    tag_end = pos + size",
                "    if tag_end > len(buf):",
                "        raise short_read()",
            ]
            branch = "if"
            for f in self.tagged:
                loop.append(f"    {branch} tag == {f.tag}:")
                loop.extend(_indent(_parse_value_lines(code, f.subcon, "t"), 8))
                loop.append(f"        r[{f.name!r}] = t")
                loop.append("        if pos != tag_end:")
                loop.append(f"            raise tagged_size_mismatch({f.name!r})")
                branch = "elif"
            loop.append("    else:" if self.tagged else "    if True:")
            loop.append("        pos = tag_end")
            # The empty section is the common case: one byte compare instead of the loop.
            body.append("if buf[pos] == 0:")
            body.append("    pos += 1")
            body.append("else:")
            body.extend(_indent(loop, 4))
        body.append("return r, pos")
        code.append("\n".join([f"def {fname}(buf, pos):", *_indent(body, 4)]) + "\n")
        return fname

    def _value_lines(self, f: KField, var: str) -> list[str]:
        lit = _default_literal(f.default)
        is_scalar = isinstance(f.subcon, KPrimitive) and (f.subcon.fmt is not None or isinstance(f.subcon, _VarPrim))
        if f.nullable or is_scalar:
            return [f"{var} = get({f.name!r}, {lit})"]
        # Kafka's responses substitute the default for a null in versions where the field is not
        # nullable (e.g. JoinGroup's protocol_name before v7); do the same rather than fail.
        return [f"{var} = get({f.name!r})", f"if {var} is None:", f"    {var} = {lit}"]

    def emit_build_fn(self, code: Any) -> str:
        self.emit_parse_fn(code)
        fname = self._names[id(code)][1]
        body = ["get = obj.get"]
        for run in self._runs():
            if len(run) > 1:
                fmt = "".join(f.subcon.fmt for _, f in run)  # type: ignore[attr-defined]
                _, pack = _fmt_names(code, fmt)
                for i, f in run:
                    body.extend(self._value_lines(f, f"v{i}"))
                body.append(f"w({pack}({', '.join(f'v{i}' for i, _ in run)}))")
            else:
                i, f = run[0]
                body.extend(self._value_lines(f, f"v{i}"))
                body.extend(_build_value_lines(code, f.subcon, f"v{i}"))
        if self.tagged is not None:
            if not self.tagged:
                body.append("w(b'\\x00')")
            else:
                body.append("tagged = []")
                for f in self.tagged:
                    body.extend(self._value_lines(f, "t"))
                    body.append(f"if t != {_default_literal(f.default)}:")
                    inner = ["outer = w", "parts = []", "w = parts.append"]
                    inner.extend(_build_value_lines(code, f.subcon, "t"))
                    inner.extend(["w = outer", f"tagged.append(({f.tag}, b''.join(parts)))"])
                    body.extend(_indent(inner, 4))
                body.extend(
                    [
                        "w(uvarint_bytes(len(tagged)))",
                        "for tag, data in tagged:",
                        "    w(uvarint_bytes(tag))",
                        "    w(uvarint_bytes(len(data)))",
                        "    w(data)",
                    ]
                )
        code.append("\n".join([f"def {fname}(obj, w):", *_indent(body, 4)]) + "\n")
        return fname

    def parse_fn_name(self, code: Any) -> str:
        return self.emit_parse_fn(code)


def _is_fixed(f: KField) -> bool:
    return isinstance(f.subcon, KPrimitive) and f.subcon.fmt is not None


class KNullableStruct(_Node):
    """A struct field with nullableVersions (e.g. ConsumerGroupHeartbeat's ``Assignment``): Kafka writes an
    int8 marker, -1 for null and 1 before a present struct."""

    def __init__(self, struct: KStruct) -> None:
        super().__init__()
        self.struct = struct
        self._names: dict[int, tuple[str, str]] = {}

    def _parse(self, stream: BytesIO, context: Any, path: str) -> dict[str, Any] | None:
        if _rt.read_int8(stream) < 0:
            return None
        return self.struct._parse(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            _rt.write_int8(-1, stream)
            return obj
        _rt.write_int8(1, stream)
        return self.struct._build(obj, stream, context, path)

    def emit_parse_fn(self, code: Any) -> str:
        key = id(code)
        if key in self._names:
            return self._names[key][0]
        _prelude(code)
        unpack, _ = _fmt_names(code, "b")
        uid = code.allocateId()
        fname = f"parse_knullable_{uid}"
        self._names[key] = (fname, f"build_knullable_{uid}")
        inner = self.struct.emit_parse_fn(code)
        lines = [
            f"def {fname}(buf, pos):",
            f"    marker, = {unpack}(buf, pos)",
            "    if marker < 0:",
            "        return None, pos + 1",
            f"    return {inner}(buf, pos + 1)",
        ]
        code.append("\n".join(lines) + "\n")
        return fname

    def emit_build_fn(self, code: Any) -> str:
        self.emit_parse_fn(code)
        fname = self._names[id(code)][1]
        inner = self.struct.emit_build_fn(code)
        lines = [
            f"def {fname}(obj, w):",
            "    if obj is None:",
            "        w(b'\\xff')",
            "        return",
            "    w(b'\\x01')",
            f"    {inner}(obj, w)",
        ]
        code.append("\n".join(lines) + "\n")
        return fname
