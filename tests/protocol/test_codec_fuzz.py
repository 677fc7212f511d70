"""Every message schema, every version: round trips, path agreement, and malformed input.

Values are drawn from the schema itself (not from kio), so this also covers the versions kio lacks
and the ``__consumer_offsets`` records. For each valid encoding:

- the fast path (``decode``/``encode``), construct's ``Compiled`` object (``codec.construct``) and the
  interpreted struct (``codec.struct``) give the same value and the same bytes;
- every strict prefix fails with ``DecodeError`` (a truncated frame);
- random byte overwrites either decode or fail with ``DecodeError``, never another exception: this is
  what lets the server answer a bad frame by closing one connection instead of crashing.
"""

from __future__ import annotations

from typing import Any

import pytest
from construct import Construct
from groupd.protocol import _rt
from groupd.protocol import primitives as p
from groupd.protocol.messages import ALL_APIS
from groupd.protocol.messages.headers import REQUEST_HEADER, RESPONSE_HEADER
from groupd.protocol.messages.records import RECORD_SCHEMAS
from groupd.protocol.schema import MessageSchema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_FIXED = {
    "b": st.integers(-(2**7), 2**7 - 1),
    "h": st.integers(-(2**15), 2**15 - 1),
    "i": st.integers(-(2**31), 2**31 - 1),
    "q": st.integers(-(2**63), 2**63 - 1),
    "H": st.integers(0, 2**16 - 1),
    "I": st.integers(0, 2**32 - 1),
    "d": st.floats(allow_nan=False),
    "?": st.booleans(),
}


def value_strategy(con: Construct) -> st.SearchStrategy[Any]:
    """Values of one construct of a compiled schema, derived from the construct tree."""
    if isinstance(con, p.KStruct):
        return st.fixed_dictionaries({fld.name: _field_strategy(fld) for fld in [*con.fields, *(con.tagged or [])]})
    if isinstance(con, p.KNullableStruct):
        return st.one_of(st.none(), value_strategy(con.struct))
    if isinstance(con, p.KArray):
        items = st.lists(value_strategy(con.subcon), max_size=3)
        return st.one_of(st.none(), items) if con.nullable else items
    if isinstance(con, p.KPrimitive) and con.fmt is not None:
        return _FIXED[con.fmt]
    if isinstance(con, p.Uuid):
        return st.one_of(st.just(_rt.ZERO_UUID), st.uuids())
    if isinstance(con, p.VarInt):
        return st.integers(-(2**31), 2**31 - 1)
    if isinstance(con, p.VarLong):
        return st.integers(-(2**63), 2**63 - 1)
    if isinstance(con, p.UnsignedVarInt):
        return st.integers(0, 2**32 - 1)
    if isinstance(con, p._LenPrefixed):
        s = st.text(max_size=10) if con.text else st.binary(max_size=16)
        return st.one_of(st.none(), s) if con.nullable else s
    raise AssertionError(f"no strategy for {con!r}")


def _field_strategy(fld: p.KField) -> st.SearchStrategy[Any]:
    s = value_strategy(fld.subcon)
    # Tagged fields are written only when they differ from the default: draw the default often.
    return st.one_of(st.just(fld.fresh_default()), s) if fld.tag is not None else s


SCHEMAS: list[tuple[str, MessageSchema, int]] = []
for _api in ALL_APIS:
    for _v in range(_api.min_version, _api.max_version + 1):
        SCHEMAS.append((f"{_api.name}Request-v{_v}", _api.request, _v))
        SCHEMAS.append((f"{_api.name}Response-v{_v}", _api.response, _v))
for _schema in (REQUEST_HEADER, RESPONSE_HEADER, *RECORD_SCHEMAS):
    _r = _schema.version_range
    assert _r.high is not None
    for _v in range(_r.low, _r.high + 1):
        SCHEMAS.append((f"{_schema.name}-v{_v}", _schema, _v))


def _decode_or_decode_error(codec: Any, data: bytes) -> None:
    """All three decoding paths either agree on a value or all raise ``DecodeError``."""
    results = []
    for parse in (codec.decode, codec.construct.parse, codec.struct.parse):
        try:
            results.append(parse(data))
        except _rt.DecodeError:
            results.append(_rt.DecodeError)
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize(("schema", "version"), [s[1:] for s in SCHEMAS], ids=[s[0] for s in SCHEMAS])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_paths_agree_and_malformed_input_is_a_decode_error(
    schema: MessageSchema, version: int, data: st.DataObject
) -> None:
    codec = schema.codec(version)
    value = data.draw(value_strategy(codec.struct), label="value")
    encoded = codec.encode(value)

    decoded = codec.decode(encoded)
    assert decoded == value
    assert codec.decode_at(b"\x00\x00" + encoded + b"\xff", 2) == (value, 2 + len(encoded))
    assert codec.construct.parse(encoded) == decoded
    assert codec.struct.parse(encoded) == decoded
    assert codec.construct.build(value) == encoded
    assert codec.struct.build(value) == encoded
    assert codec.encode(decoded) == encoded

    for cut in range(len(encoded)):
        with pytest.raises(_rt.DecodeError):
            codec.decode(encoded[:cut])

    if encoded:
        flips = data.draw(
            st.lists(st.tuples(st.integers(0, len(encoded) - 1), st.integers(0, 255)), min_size=1, max_size=4),
            label="overwrites",
        )
        for i in range(len(flips)):
            corrupt = bytearray(encoded)
            for pos, byte in flips[: i + 1]:
                corrupt[pos] = byte
            _decode_or_decode_error(codec, bytes(corrupt))
        # The worst bytes for lengths and counts: all-ones (-1 / huge varints) and 0x7f runs.
        for pos, _ in flips:
            for filler in (b"\xff" * 5, b"\x7f\xff\xff\xff", b"\x80" * 11):
                _decode_or_decode_error(codec, encoded[:pos] + filler + encoded[pos + len(filler) :])


@pytest.mark.parametrize(("schema", "version"), [s[1:] for s in SCHEMAS], ids=[s[0] for s in SCHEMAS])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk=st.binary(max_size=64))
def test_random_bytes_decode_or_raise_decode_error(schema: MessageSchema, version: int, junk: bytes) -> None:
    _decode_or_decode_error(schema.codec(version), junk)


def test_tagged_string_longer_than_its_declared_size_is_a_decode_error_on_every_path() -> None:
    """Found by the fuzz test above: a tagged string field (FetchRequest v12's ``cluster_id``) declared
    with size 0 but followed by a one-byte string. The compiled parsers' string code reused the name
    of the tagged field's end, so their size check compared the string's end with itself and passed;
    the struct path refused it. Every path now refuses it (Kafka's generated reader would read past
    the field: the section is malformed either way)."""
    fetch = next(a for a in ALL_APIS if a.name == "Fetch")
    codec = fetch.request.codec(12)
    body = codec.encode({"topics": [], "forgotten_topics_data": [], "rack_id": "", "max_wait_ms": 0, "min_bytes": 0})
    assert body.endswith(b"\x01\x00")  # rack_id "" and an empty tagged section
    bad = body[:-1] + b"\x01\x00\x00\x01"  # one tagged field: tag 0, size 0, then the string ""
    for parse in (codec.decode, codec.construct.parse, codec.struct.parse):
        with pytest.raises(_rt.DecodeError, match="size mismatch"):
            parse(bad)
    good = body[:-1] + b"\x01\x00\x01\x01"  # size 1: the same string, declared right
    assert codec.decode(good)["cluster_id"] == "" == codec.struct.parse(good)["cluster_id"]
