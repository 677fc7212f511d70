"""The Kafka primitives, one by one: boundaries, null vs empty, tagged fields, lying lengths.

Every primitive is checked on all three paths the codec has: the stream helpers in ``_rt``, the
construct classes (interpreted ``parse``/``build`` and construct's own ``compile()``), and the inlined
position-based code a compiled message uses (through small one-field schemas).
"""

from __future__ import annotations

from typing import Any

import pytest
from construct import Construct
from groupd.protocol import _rt
from groupd.protocol import primitives as p
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.schema import MessageSchema, f
from hypothesis import given
from hypothesis import strategies as st

# --- varints ---------------------------------------------------------------------------------------

UVARINT_VECTORS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**21 - 1, "ffff7f"),
    (2**21, "80808001"),
    (2**28 - 1, "ffffff7f"),
    (2**28, "8080808001"),
    (2**32 - 1, "ffffffff0f"),
]

# zigzag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ...
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-64, "7f"),
    (63, "7e"),
    (64, "8001"),
    (-65, "8101"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]

VARLONG_VECTORS = [
    *VARINT_VECTORS[:-2],
    (2**31 - 1, "feffffff0f"),
    (2**31, "8080808010"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


def _all_paths(con: Construct, value: Any, data: bytes) -> None:
    compiled = con.compile()
    assert con.parse(data) == value
    assert con.build(value) == data
    assert compiled.parse(data) == value
    assert compiled.build(value) == data


@pytest.mark.parametrize(("value", "hexdata"), UVARINT_VECTORS)
def test_unsigned_varint(value: int, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    _all_paths(p.UNSIGNED_VARINT, value, data)
    assert _rt.uvarint_at(b"\xee" + data, 1) == (value, 1 + len(data))
    assert _rt.uvarint_bytes(value) == data


@pytest.mark.parametrize(("value", "hexdata"), VARINT_VECTORS)
def test_varint(value: int, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    _all_paths(p.VARINT, value, data)
    assert _rt.varint_at(data, 0) == (value, len(data))
    assert _rt.varint_bytes(value) == data


@pytest.mark.parametrize(("value", "hexdata"), VARLONG_VECTORS)
def test_varlong(value: int, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    _all_paths(p.VARLONG, value, data)
    assert _rt.varlong_at(data, 0) == (value, len(data))
    assert _rt.varlong_bytes(value) == data


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    data = _rt.varint_bytes(n)
    assert _rt.varint_at(data, 0) == (n, len(data))
    assert p.VARINT.parse(data) == n


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    data = _rt.varlong_bytes(n)
    assert _rt.varlong_at(data, 0) == (n, len(data))
    assert p.VARLONG.parse(data) == n
    assert len(data) <= 10


@pytest.mark.parametrize(
    ("con", "value"),
    [
        (p.UNSIGNED_VARINT, -1),
        (p.UNSIGNED_VARINT, 2**32),
        (p.VARINT, 2**31),
        (p.VARINT, -(2**31) - 1),
        (p.VARLONG, 2**63),
        (p.VARLONG, -(2**63) - 1),
        (p.INT8, 128),
        (p.INT16, -(2**15) - 1),
        (p.INT32, 2**31),
        (p.INT64, 2**63),
        (p.UINT16, -1),
        (p.UINT32, 2**32),
    ],
)
def test_out_of_range_values_raise_encode_error(con: Construct, value: int) -> None:
    with pytest.raises(_rt.EncodeError):
        con.build(value)
    with pytest.raises(_rt.EncodeError):
        con.compile().build(value)


@pytest.mark.parametrize(
    ("con", "hexdata"),
    [
        (p.UNSIGNED_VARINT, "80808080808080808080"),  # 10 continuation bytes: longer than any varint
        (p.UNSIGNED_VARINT, "8080"),  # ends inside the varint
        (p.VARINT, "8080808010"),  # 2**32 after zigzag: more than 32 bits
        (p.VARLONG, "ffffffffffffffffff03"),  # more than 64 bits
        (p.VARLONG, ""),
    ],
)
def test_malformed_varints_raise_decode_error(con: Construct, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    with pytest.raises(_rt.DecodeError):
        con.parse(data)
    with pytest.raises(_rt.DecodeError):
        con.compile().parse(data)


# --- strings and bytes -----------------------------------------------------------------------------

STRING_VECTORS = [
    (p.STRING, "", "0000"),
    (p.STRING, "abc", "0003 616263"),
    (p.STRING, "é", "0002 c3a9"),  # the length counts UTF-8 bytes, not characters
    (p.NULLABLE_STRING, None, "ffff"),
    (p.NULLABLE_STRING, "", "0000"),
    (p.NULLABLE_STRING, "abc", "0003 616263"),
    (p.COMPACT_STRING, "", "01"),
    (p.COMPACT_STRING, "abc", "04 616263"),
    (p.COMPACT_STRING, "x" * 127, "8001" + "78" * 127),  # length + 1 = 128 takes two varint bytes
    (p.COMPACT_NULLABLE_STRING, None, "00"),
    (p.COMPACT_NULLABLE_STRING, "", "01"),
    (p.COMPACT_NULLABLE_STRING, "abc", "04 616263"),
    (p.BYTES, b"", "00000000"),
    (p.BYTES, b"\x00\xff", "00000002 00ff"),
    (p.NULLABLE_BYTES, None, "ffffffff"),
    (p.NULLABLE_BYTES, b"", "00000000"),
    (p.COMPACT_BYTES, b"", "01"),
    (p.COMPACT_BYTES, b"\x00\xff", "03 00ff"),
    (p.COMPACT_NULLABLE_BYTES, None, "00"),
    (p.COMPACT_NULLABLE_BYTES, b"", "01"),
    (p.UUID, _rt.ZERO_UUID, "00" * 16),
    (p.BOOLEAN, True, "01"),
    (p.BOOLEAN, False, "00"),
    (p.INT8, -1, "ff"),
    (p.INT16, -2, "fffe"),
    (p.INT32, 2**31 - 1, "7fffffff"),
    (p.INT64, -(2**63), "8000000000000000"),
    (p.UINT16, 65535, "ffff"),
    (p.UINT32, 2**32 - 1, "ffffffff"),
    (p.FLOAT64, 1.5, "3ff8000000000000"),
]

_KAFKA_TYPE = {
    p.String: ("string", False, False),
    p.NullableString: ("string", False, True),
    p.CompactString: ("string", True, False),
    p.CompactNullableString: ("string", True, True),
    p.Bytes: ("bytes", False, False),
    p.NullableBytes: ("bytes", False, True),
    p.CompactBytes: ("bytes", True, False),
    p.CompactNullableBytes: ("bytes", True, True),
}


def _one_field_schema(con: Construct) -> tuple[MessageSchema, int]:
    """A message with only this primitive, so the inlined (in-struct) code path is exercised too.

    Version 1 is flexible (compact encodings, and a trailing empty tagged-field section ``00``).
    """
    if type(con) in _KAFKA_TYPE:
        type_, compact, nullable = _KAFKA_TYPE[type(con)]
    else:
        type_ = {
            p.Uuid: "uuid",
            p.Boolean: "bool",
            p.Int8: "int8",
            p.Int16: "int16",
            p.Int32: "int32",
            p.Int64: "int64",
            p.UInt16: "uint16",
            p.UInt32: "uint32",
            p.Float64: "float64",
        }[type(con)]
        compact, nullable = False, False
    schema = MessageSchema(
        "OneField", valid="0-1", flexible="1+", fields=(f("v", type_, nullable="0+" if nullable else None),)
    )
    return schema, 1 if compact else 0


@pytest.mark.parametrize(("con", "value", "hexdata"), STRING_VECTORS, ids=lambda x: repr(x)[:20])
def test_primitive_vectors(con: Construct, value: Any, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    _all_paths(con, value, data)
    schema, version = _one_field_schema(con)
    codec = schema.codec(version)
    suffix = b"\x00" if schema.is_flexible(version) else b""
    assert codec.decode(data + suffix) == {"v": value}
    assert codec.encode({"v": value}) == data + suffix


@pytest.mark.parametrize(
    ("con", "hexdata"),
    [
        (p.STRING, "ffff"),
        (p.COMPACT_STRING, "00"),
        (p.BYTES, "ffffffff"),
        (p.COMPACT_BYTES, "00"),
    ],
)
def test_null_for_a_non_nullable_field_raises_decode_error(con: Construct, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    with pytest.raises(_rt.DecodeError):
        con.parse(data)
    schema, version = _one_field_schema(con)
    with pytest.raises(_rt.DecodeError):
        schema.codec(version).decode(data + b"\x00")


@pytest.mark.parametrize(
    ("con", "hexdata"),
    [
        (p.STRING, "0005 6162"),  # says 5 bytes, has 2
        (p.NULLABLE_STRING, "7fff 61"),
        (p.COMPACT_STRING, "7f 61"),
        (p.COMPACT_NULLABLE_STRING, "ffffffff0f 61"),  # a length near 2**32
        (p.BYTES, "7fffffff 00"),
        (p.NULLABLE_BYTES, "00000002 00"),
        (p.COMPACT_BYTES, "03 00"),
        (p.COMPACT_NULLABLE_BYTES, "8080808008"),
        (p.STRING, "0002 c328"),  # invalid UTF-8
        (p.COMPACT_STRING, "03 ff61"),
        (p.UUID, "00" * 15),
        (p.INT32, "000000"),
        (p.INT64, ""),
    ],
)
def test_lying_lengths_and_bad_bytes_raise_decode_error(con: Construct, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    with pytest.raises(_rt.DecodeError):
        con.parse(data)
    with pytest.raises(_rt.DecodeError):
        con.compile().parse(data)
    schema, version = _one_field_schema(con)
    with pytest.raises(_rt.DecodeError):
        schema.codec(version).decode(data)


@given(st.text(max_size=40), st.booleans())
def test_string_round_trip(s: str, compact: bool) -> None:
    con = p.COMPACT_STRING if compact else p.STRING
    assert con.parse(con.build(s)) == s


# --- arrays ----------------------------------------------------------------------------------------

ARRAYS = MessageSchema(
    "Arrays",
    valid="0-1",
    flexible="1+",
    fields=(
        f("nullable", "[]int32", "0+", nullable="0+"),
        f("plain", "[]", "0+", f("s", "string")),
    ),
)


@pytest.mark.parametrize(
    ("version", "value", "hexdata"),
    [
        (0, {"nullable": None, "plain": []}, "ffffffff 00000000"),
        (0, {"nullable": [], "plain": [{"s": "a"}]}, "00000000 00000001 0001 61"),
        (0, {"nullable": [1, -1], "plain": []}, "00000002 00000001 ffffffff 00000000"),
        (1, {"nullable": None, "plain": []}, "00 01 00"),
        (1, {"nullable": [], "plain": [{"s": "a"}]}, "01 02 02 61 00 00"),
        (1, {"nullable": [7], "plain": []}, "02 00000007 01 00"),
    ],
)
def test_arrays_null_vs_empty(version: int, value: dict[str, Any], hexdata: str) -> None:
    codec = ARRAYS.codec(version)
    data = bytes.fromhex(hexdata)
    assert codec.decode(data) == value
    assert codec.encode(value) == data
    assert codec.struct.parse(data) == value
    assert codec.struct.build(value) == data


@pytest.mark.parametrize(
    ("version", "hexdata"),
    [
        (0, "00000000 ffffffff"),  # null for the non-nullable array
        (1, "01 00 00"),
        (0, "00000000 7fffffff 0001 61"),  # claims 2**31-1 elements, has one
        (1, "01 ffffffff07 00"),  # compact count near 2**31
        (0, "00000002 00000001"),  # two int32 promised, one present
    ],
)
def test_bad_arrays_raise_decode_error(version: int, hexdata: str) -> None:
    codec = ARRAYS.codec(version)
    data = bytes.fromhex(hexdata)
    with pytest.raises(_rt.DecodeError):
        codec.decode(data)
    with pytest.raises(_rt.DecodeError):
        codec.struct.parse(data)


# --- tagged fields ---------------------------------------------------------------------------------

API_VERSIONS = API_BY_NAME["ApiVersions"]
FETCH = API_BY_NAME["Fetch"]


def test_unknown_tagged_fields_are_skipped() -> None:
    codec = API_VERSIONS.request.codec(3)
    plain = bytes.fromhex("02 61 02 31 00")  # client_software_name "a", version "1", no tags
    with_unknown = bytes.fromhex(
        "02 61 02 31"
        "02"  # two tagged fields
        "05 03 78797a"  # tag 5, 3 bytes "xyz"
        "9601 00"  # tag 150 (a two-byte varint), empty
    )
    expected = {"client_software_name": "a", "client_software_version": "1"}
    for data in (plain, with_unknown):
        assert codec.decode(data) == expected
        assert codec.struct.parse(data) == expected
        assert codec.construct.parse(data) == expected
    assert codec.encode(expected) == plain  # unknown tags are not written back


def test_known_and_unknown_tagged_fields_mix() -> None:
    codec = API_VERSIONS.response.codec(3)
    data = bytes.fromhex(
        "0000"  # error_code
        "01"  # api_keys: empty
        "00000000"  # throttle_time_ms
        "02"  # two tagged fields
        "01 08 0000000000000007"  # tag 1 finalized_features_epoch = 7
        "04 01 ff"  # tag 4: unknown to us, skipped
    )
    value = codec.decode(data)
    assert value["finalized_features_epoch"] == 7
    assert value["supported_features"] == []  # absent tag: the default
    assert value["zk_migration_ready"] is False
    assert codec.struct.parse(data) == value
    # Re-encoding writes only the known tag that differs from its default.
    assert codec.encode(value) == bytes.fromhex("0000 01 00000000 01 01 08 0000000000000007")


def test_unknown_tags_in_nested_structs_are_skipped() -> None:
    codec = FETCH.response.codec(12)
    value = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 10,
                        "last_stable_offset": 10,
                        "log_start_offset": 0,
                        "diverging_epoch": {"epoch": -1, "end_offset": -1},
                        "current_leader": {"leader_id": 1, "leader_epoch": 2},
                        "snapshot_id": {"end_offset": -1, "epoch": -1},
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": b"",
                    }
                ],
            }
        ],
    }
    data = codec.encode(value)
    # The partition's tagged section is [tag 1 (current_leader), 9 bytes]; add an unknown tag 9 to it.
    section = bytes.fromhex("01 01 09 00000001 00000002 00")
    assert section in data
    patched = data.replace(section, bytes.fromhex("02 01 09 00000001 00000002 00 09 02 abcd"))
    assert codec.decode(patched) == value
    assert codec.struct.parse(patched) == value


@pytest.mark.parametrize(
    "hexdata",
    [
        "0000 01 00000000 01 01 09 0000000000000007 00",  # tag 1 says 9 bytes, int64 reads 8
        "0000 01 00000000 01 01 07 00000000000000",  # tag 1 says 7 bytes: reads past its end
        "0000 01 00000000 01 04 05 ff",  # unknown tag 4 claims 5 bytes, 1 present
        "0000 01 00000000 02 04 00",  # two tags promised, one present
        "0000 01 00000000",  # the tagged section is missing
    ],
)
def test_bad_tagged_sections_raise_decode_error(hexdata: str) -> None:
    codec = API_VERSIONS.response.codec(3)
    with pytest.raises(_rt.DecodeError):
        codec.decode(bytes.fromhex(hexdata))
    with pytest.raises(_rt.DecodeError):
        codec.struct.parse(bytes.fromhex(hexdata))


def test_tagged_struct_written_only_when_not_default() -> None:
    codec = API_BY_NAME["Produce"].response.codec(10)
    partition = {"index": 0, "error_code": 0, "base_offset": 5}
    base = codec.encode({"responses": [{"name": "t", "partition_responses": [partition]}]})
    moved = codec.encode(
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [{**partition, "current_leader": {"leader_id": 3, "leader_epoch": 4}}],
                }
            ]
        }
    )
    assert len(moved) == len(base) + 1 + 1 + 9  # tag, size, two int32 + the struct's own empty tag section
    decoded = codec.decode(base)["responses"][0]["partition_responses"][0]
    assert decoded["current_leader"] == {"leader_id": -1, "leader_epoch": -1}
    assert codec.decode(moved)["responses"][0]["partition_responses"][0]["current_leader"] == {
        "leader_id": 3,
        "leader_epoch": 4,
    }
