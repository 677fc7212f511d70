"""Declarative Kafka message schemas and their compilation into construct structs.

A message is described once, the way Kafka's JSON message specs are written: fields carry the
versions they exist in, the versions in which they may be null, an optional tag (tagged fields),
nested fields for arrays of structs, and the message carries its valid and flexible versions.
``MessageSchema.struct(version)`` derives the construct ``KStruct`` for one version and
``codec(version)`` compiles it once and caches the compiled parse/build functions. Adding an API
version is a change to the description, never new parsing code.

Field names are Kafka's, converted to snake_case (``SessionTimeoutMs`` -> ``session_timeout_ms``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import field
from struct import error as struct_error
from typing import Any

from construct import Construct
from groupd.protocol.frozen import DEFAULT_FACTORY, frozen_record, mutable_record

from . import _rt
from . import primitives as p

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

_UNSET: Any = object()


@frozen_record
class VersionRange:
    low: int
    high: int | None  # None = open ended

    def __init__(self, low: int, high: int | None) -> None:
        _set(self, "low", low)
        _set(self, "high", high)

    @classmethod
    def parse(cls, spec: str | None) -> VersionRange:
        # Cached: the dispatcher asks "is this version flexible?" for every request and
        # re-parsing the spec string cost ~1.5 us each time (profiled on the heartbeat path).
        r = _RANGES.get(spec)
        if r is None:
            r = _RANGES[spec] = cls._parse(spec)
        return r

    @classmethod
    def _parse(cls, spec: str | None) -> VersionRange:
        if spec is None or spec == "none":
            return cls(1, 0)  # empty
        spec = spec.strip()
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        if "-" in spec:
            lo, hi = spec.split("-")
            return cls(int(lo), int(hi))
        return cls(int(spec), int(spec))

    def __contains__(self, v: int) -> bool:
        return v >= self.low and (self.high is None or v <= self.high)


_RANGES: dict[str | None, VersionRange] = {}

_SCALARS: dict[str, tuple[Construct, Any]] = {
    "int8": (p.INT8, 0),
    "int16": (p.INT16, 0),
    "int32": (p.INT32, 0),
    "int64": (p.INT64, 0),
    "uint16": (p.UINT16, 0),
    "uint32": (p.UINT32, 0),
    "float64": (p.FLOAT64, 0.0),
    "bool": (p.BOOLEAN, False),
    "uuid": (p.UUID, _rt.ZERO_UUID),
}


@frozen_record
class Field:
    """One field of a message, in the vocabulary of Kafka's JSON message specs."""

    name: str
    # a scalar name, "string", "bytes", "records", "[]" + scalar, "[]" with ``fields`` (array of structs),
    # or a struct name with ``fields`` (one nested struct, e.g. Fetch's "LeaderIdAndEpoch")
    type: str
    versions: str = "0+"
    nullable: str | None = None  # nullableVersions
    default: Any = _UNSET
    tag: int | None = None
    tagged: str | None = None  # taggedVersions
    fields: tuple[Field, ...] = ()
    flexible: str | None = None  # field-level flexibleVersions override (only "none" is used by Kafka)

    def __init__(
        self,
        name: str,
        type: str,
        versions: str = "0+",
        nullable: str | None = None,
        default: Any = _UNSET,
        tag: int | None = None,
        tagged: str | None = None,
        fields: tuple[Field, ...] = (),
        flexible: str | None = None,
    ) -> None:
        _set(self, "name", name)
        _set(self, "type", type)
        _set(self, "versions", versions)
        _set(self, "nullable", nullable)
        _set(self, "default", default)
        _set(self, "tag", tag)
        _set(self, "tagged", tagged)
        _set(self, "fields", fields)
        _set(self, "flexible", flexible)

    def exists_in(self, v: int) -> bool:
        return v in VersionRange.parse(self.versions)

    def nullable_in(self, v: int) -> bool:
        return self.nullable is not None and v in VersionRange.parse(self.nullable)

    def tagged_in(self, v: int) -> bool:
        return self.tag is not None and v in VersionRange.parse(self.tagged or self.versions)

    @property
    def is_struct(self) -> bool:
        """A single nested struct (Kafka's ``"type": "LeaderIdAndEpoch"`` with ``fields``), not an array."""
        return bool(self.fields) and not self.type.startswith("[]")

    def default_value(self, v: int) -> Any:
        if self.default is not _UNSET:
            return list(self.default) if isinstance(self.default, list) else self.default
        if self.type.startswith("[]"):
            return []
        if self.is_struct:
            return {sub.name: sub.default_value(v) for sub in self.fields if sub.exists_in(v)}
        if self.type in ("string",):
            return ""
        if self.type in ("bytes",):
            return b""
        if self.type == "records":
            return None
        return _SCALARS[self.type][1]


def f(
    name: str,
    type: str,
    versions: str = "0+",
    *fields: Field,
    nullable: str | None = None,
    default: Any = _UNSET,
    tag: int | None = None,
    tagged: str | None = None,
    flexible: str | None = None,
) -> Field:
    """Shorthand used by the schema tables: ``f("members", "[]", "0+", f("member_id", "string"))``."""
    return Field(name, type, versions, nullable, default, tag, tagged, tuple(fields), flexible)


def _leaf(type_: str, *, compact: bool, nullable: bool) -> Construct:
    if type_ in _SCALARS:
        return _SCALARS[type_][0]
    if type_ == "string":
        if compact:
            return p.COMPACT_NULLABLE_STRING if nullable else p.COMPACT_STRING
        return p.NULLABLE_STRING if nullable else p.STRING
    if type_ in ("bytes", "records"):
        nullable = nullable or type_ == "records"
        if compact:
            return p.COMPACT_NULLABLE_BYTES if nullable else p.COMPACT_BYTES
        return p.NULLABLE_BYTES if nullable else p.BYTES
    raise ValueError(f"unknown field type {type_!r}")


def build_struct(fields: Sequence[Field], version: int, flexible: bool) -> p.KStruct:
    regular: list[p.KField] = []
    tagged: list[p.KField] = []
    for fld in fields:
        if not fld.exists_in(version):
            continue
        compact = flexible and fld.flexible != "none"
        nullable = fld.nullable_in(version)
        if fld.type.startswith("[]"):
            if fld.fields:
                inner: Construct = build_struct(fld.fields, version, flexible)
            else:
                inner = _leaf(fld.type[2:], compact=compact, nullable=False)
            sub: Construct = p.KArray(inner, compact=compact, nullable=nullable)
        elif fld.is_struct:
            sub = build_struct(fld.fields, version, flexible)
            if nullable:
                sub = p.KNullableStruct(sub)
        else:
            sub = _leaf(fld.type, compact=compact, nullable=nullable)
        default = fld.default_value(version)
        if flexible and fld.tagged_in(version):
            tagged.append(p.KField(fld.name, sub, default, nullable=True, tag=fld.tag))
        else:
            regular.append(p.KField(fld.name, sub, default, nullable=nullable))
    return p.KStruct(regular, tagged if flexible else None)


class Codec:
    """The compiled parse/build pair for one (message, version).

    ``parse_at(buf, pos) -> (dict, pos)`` and ``build_parts(obj, append)`` are the generated
    position-based functions; the hot path calls them directly, skipping construct's per-call context.
    ``construct`` is the stock construct ``Compiled`` object for everything else.
    """

    __slots__ = ("build_parts", "construct", "parse_at", "struct")

    def __init__(self, struct: p.KStruct) -> None:
        self.struct = struct
        compiled = struct.compile()
        self.construct = compiled
        ((parse_name, build_name),) = struct._names.values()
        self.parse_at: Callable[[bytes, int], tuple[dict[str, Any], int]] = compiled.module.__dict__[parse_name]
        self.build_parts: Callable[[Any, Callable[[bytes], None]], None] = compiled.module.__dict__[build_name]

    def decode(self, data: bytes | bytearray | memoryview, pos: int = 0) -> dict[str, Any]:
        return self.decode_at(data, pos)[0]

    def decode_at(self, data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[dict[str, Any], int]:
        if type(data) is not bytes:
            data = bytes(data)
        try:
            return self.parse_at(data, pos)
        except _rt.DecodeError:
            raise
        except (struct_error, IndexError, UnicodeDecodeError, ValueError) as e:
            raise _rt.DecodeError(f"malformed message: {e}") from None

    def encode(self, obj: Any) -> bytes:
        parts: list[bytes] = []
        self.encode_into(obj, parts)
        return b"".join(parts)

    def encode_into(self, obj: Any, parts: list[bytes]) -> None:
        try:
            self.build_parts(obj, parts.append)
        except _rt.EncodeError:
            raise
        except (struct_error, AttributeError, TypeError, ValueError, OverflowError) as e:
            raise _rt.EncodeError(f"cannot encode: {e}") from None


@mutable_record
class MessageSchema:
    name: str
    valid: str  # validVersions
    flexible: str  # flexibleVersions
    fields: tuple[Field, ...]
    _cache: dict[int, Codec] = field(default_factory=dict, repr=False, compare=False)
    _flex: dict[int, bool] = field(default_factory=dict, repr=False, compare=False)

    def __init__(
        self,
        name: str,
        valid: str,
        flexible: str,
        fields: tuple[Field, ...],
        _cache: dict[int, Codec] = DEFAULT_FACTORY,
        _flex: dict[int, bool] = DEFAULT_FACTORY,
    ) -> None:
        self.name = name
        self.valid = valid
        self.flexible = flexible
        self.fields = fields
        self._cache = {} if _cache is DEFAULT_FACTORY else _cache
        self._flex = {} if _flex is DEFAULT_FACTORY else _flex

    @property
    def version_range(self) -> VersionRange:
        return VersionRange.parse(self.valid)

    def is_flexible(self, version: int) -> bool:
        flex = self._flex.get(version)
        if flex is None:
            flex = self._flex[version] = version in VersionRange.parse(self.flexible)
        return flex

    def struct(self, version: int) -> p.KStruct:
        return build_struct(self.fields, version, self.is_flexible(version))

    def codec(self, version: int) -> Codec:
        c = self._cache.get(version)
        if c is None:
            if version not in self.version_range:
                raise ValueError(f"{self.name} has no version {version}")
            c = self._cache[version] = Codec(self.struct(version))
        return c


@mutable_record
class ApiSchema:
    """A request/response pair as Kafka defines an API: one key, shared valid and flexible versions."""

    key: int
    name: str
    request: MessageSchema
    response: MessageSchema

    def __init__(self, key: int, name: str, request: MessageSchema, response: MessageSchema) -> None:
        self.key = key
        self.name = name
        self.request = request
        self.response = response

    @property
    def min_version(self) -> int:
        return self.request.version_range.low

    @property
    def max_version(self) -> int:
        hi = self.request.version_range.high
        assert hi is not None, "an API's valid versions are always closed"
        return hi

    def supports(self, version: int) -> bool:
        return version in self.request.version_range

    def is_flexible(self, version: int) -> bool:
        return self.request.is_flexible(version)


def api(
    key: int,
    name: str,
    *,
    valid: str,
    flexible: str,
    request: Sequence[Field],
    response: Sequence[Field],
) -> ApiSchema:
    return ApiSchema(
        key,
        name,
        MessageSchema(name + "Request", valid, flexible, tuple(request)),
        MessageSchema(name + "Response", valid, flexible, tuple(response)),
    )


def snake_case(camel: str) -> str:
    """Kafka's JSON field names to ours: ``ProtocolType`` -> ``protocol_type``."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", camel)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
