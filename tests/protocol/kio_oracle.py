"""kio as an independent oracle for the codec: strategies for kio messages and a kio <-> dict adapter.

kio (a package generated from Kafka's JSON specs, with a native reader) has one frozen dataclass
per (message, version). Its field metadata carries ``kafka_type``; everything here is derived from
that by introspection, so no message is special-cased:

- kio drops the ``_ms`` suffix of ``*_ms`` fields and types them ``timedelta_i32``/``timedelta_i64``
  (durations) or ``datetime_i64`` (instants, ``None`` for Kafka's -1); our dicts keep Kafka's name
  and the plain int.
- ``error_code`` fields are ``ErrorCode`` (an ``IntEnum``); ours are ints.
- kio reads an all-zero UUID as ``None``; we read it as ``ZERO_UUID``.
- arrays are tuples in kio, lists in our dicts; nested structs are dataclasses vs dicts.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import types
import typing
from dataclasses import fields
from functools import cache
from typing import Any

from groupd.protocol._rt import ZERO_UUID
from groupd.protocol.schema import snake_case
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i32Timedelta, i64Timedelta

_MS_TYPES = {"timedelta_i32", "timedelta_i64", "datetime_i64"}

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


# --- locating kio classes --------------------------------------------------------------------------


def kio_class(api_name: str, version: int, kind: str) -> type | None:
    """kio's dataclass for ``<api_name><Kind>`` at ``version``, or None when kio lacks that version."""
    try:
        module = importlib.import_module(f"kio.schema.{snake_case(api_name)}.v{version}")
    except ModuleNotFoundError:
        return None
    return getattr(module, f"{api_name}{kind.capitalize()}", None)


# --- field introspection ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _FieldInfo:
    name: str  # kio's attribute name
    ours: str  # our dict key
    kafka_type: str | None  # None for struct / array-of-struct fields
    optional: bool
    is_array: bool
    entity: type | None  # the nested dataclass, if any
    default: Any  # kio's default, or dataclasses.MISSING


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, tp
        return args[0], True
    return tp, False


@cache
def field_infos(cls: type) -> tuple[_FieldInfo, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for fl in fields(cls):
        tp, optional = _unwrap_optional(hints[fl.name])
        is_array = typing.get_origin(tp) is tuple
        if is_array:
            tp = typing.get_args(tp)[0]
        entity = tp if dataclasses.is_dataclass(tp) else None
        kafka_type = fl.metadata.get("kafka_type")
        ours = fl.name + "_ms" if kafka_type in _MS_TYPES else fl.name
        out.append(_FieldInfo(fl.name, ours, kafka_type, optional, is_array, entity, fl.default))
    return tuple(out)


# --- kio -> our dicts ------------------------------------------------------------------------------


def _scalar_to_ours(kafka_type: str, value: Any) -> Any:
    if kafka_type == "error_code":
        return int(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return value // datetime.timedelta(milliseconds=1)
    if kafka_type == "datetime_i64":
        if value is None:
            return -1
        return (value - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)) // datetime.timedelta(milliseconds=1)
    if kafka_type == "uuid":
        return ZERO_UUID if value is None else value
    if kafka_type in _INT_RANGES:
        return int(value)
    if kafka_type == "bool":
        return bool(value)
    if kafka_type == "string":
        return None if value is None else str(value)
    if kafka_type in ("bytes", "records"):
        return None if value is None else bytes(value)
    if kafka_type == "float64":
        return float(value)
    raise AssertionError(f"unhandled kio kafka_type {kafka_type!r}")


def to_ours(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fi in field_infos(type(obj)):
        value = getattr(obj, fi.name)
        if value is None and (fi.is_array or fi.entity is not None):
            out[fi.ours] = None
        elif fi.entity is not None:
            out[fi.ours] = [to_ours(v) for v in value] if fi.is_array else to_ours(value)
        elif fi.is_array:
            out[fi.ours] = [_scalar_to_ours(fi.kafka_type, v) for v in value]  # type: ignore[arg-type]
        else:
            out[fi.ours] = _scalar_to_ours(fi.kafka_type, value)  # type: ignore[arg-type]
    return out


# --- strategies for kio instances ------------------------------------------------------------------

_TEXT = st.text(max_size=12)
_BYTES = st.binary(max_size=24)


def _scalar_strategy(kafka_type: str, optional: bool) -> st.SearchStrategy[Any]:
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        s: st.SearchStrategy[Any] = st.integers(lo, hi)
    elif kafka_type == "bool":
        s = st.booleans()
    elif kafka_type == "string":
        s = _TEXT
    elif kafka_type in ("bytes", "records"):
        s = _BYTES
    elif kafka_type == "uuid":
        # kio decodes the zero UUID as None, so None is the canonical spelling of it.
        return st.one_of(st.none(), st.uuids())
    elif kafka_type == "error_code":
        s = st.sampled_from(list(ErrorCode))
    elif kafka_type == "timedelta_i32":
        s = st.integers(-(2**31), 2**31 - 1).map(lambda ms: i32Timedelta.parse(datetime.timedelta(milliseconds=ms)))
    elif kafka_type == "timedelta_i64":
        # kio converts through float seconds: stay where that is exact.
        s = st.integers(-(2**42), 2**42).map(lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms)))
    elif kafka_type == "datetime_i64":
        s = st.integers(0, 2**42).map(tz_aware_from_i64)
    elif kafka_type == "float64":
        s = st.floats(allow_nan=False, allow_infinity=False)
    else:
        raise AssertionError(f"unhandled kio kafka_type {kafka_type!r}")
    return st.one_of(st.none(), s) if optional else s


@cache
def kio_strategy(cls: type) -> st.SearchStrategy[Any]:
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for fi in field_infos(cls):
        if fi.entity is not None:
            inner: st.SearchStrategy[Any] = st.deferred(lambda e=fi.entity: kio_strategy(e))
        else:
            inner = _scalar_strategy(fi.kafka_type, fi.optional and not fi.is_array)  # type: ignore[arg-type]
        if fi.is_array:
            inner = st.lists(inner, max_size=3).map(tuple)
        if fi.optional and (fi.is_array or fi.entity is not None):
            inner = st.one_of(st.none(), inner)
        if fi.default is not dataclasses.MISSING:
            # Defaults matter on the wire (a tagged field equal to its default is omitted): hit them often.
            inner = st.one_of(st.just(fi.default), inner)
        kwargs[fi.name] = inner
    return st.builds(cls, **kwargs)


# --- kio serialization -----------------------------------------------------------------------------


def kio_encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def kio_decode(cls: type, data: bytes) -> Any:
    value, size = entity_reader(cls)(data, 0)
    assert size == len(data), f"kio consumed {size} of {len(data)} bytes"
    return value


# --- defaults --------------------------------------------------------------------------------------

_IMPLICIT = {"bool": False, "string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID, "float64": 0.0}


def kio_defaults(cls: type) -> dict[str, Any]:
    """Our expected default per field of ``cls`` (nested: ``"topics.partitions.leader_epoch"``).

    kio keeps Kafka's explicit ``"default"``; a field without one has the type's implicit default
    (0, "", false, empty array, zero UUID; null for ``records``), as in Kafka's generated code.
    """
    out: dict[str, Any] = {}
    for fi in field_infos(cls):
        if fi.default is not dataclasses.MISSING:
            d = fi.default
            if d is None:
                value: Any = -1 if fi.kafka_type == "datetime_i64" else None
            elif fi.entity is not None:
                value = [to_ours(x) for x in d] if fi.is_array else to_ours(d)
            elif fi.is_array:
                value = [_scalar_to_ours(fi.kafka_type, x) for x in d]  # type: ignore[arg-type]
            else:
                value = _scalar_to_ours(fi.kafka_type, d)  # type: ignore[arg-type]
        elif fi.is_array:
            value = []
        elif fi.entity is not None:
            value = _struct_default(fi.entity)
        else:
            value = _IMPLICIT.get(fi.kafka_type, 0)  # type: ignore[arg-type]
        out[fi.ours] = value
        if fi.entity is not None:
            for k, v in kio_defaults(fi.entity).items():
                out[f"{fi.ours}.{k}"] = v
    return out


def _struct_default(cls: type) -> dict[str, Any]:
    return {k: v for k, v in kio_defaults(cls).items() if "." not in k}
