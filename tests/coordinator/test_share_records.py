"""The share-group records of ``__consumer_offsets`` in Kafka 4.2's formats (the
``ShareGroup*Key/Value`` JSON specs: a key is the int16 record type then a non-flexible struct, a
value is int16 version 0 then a flexible struct), byte for byte, and their round trip."""

from __future__ import annotations

import struct
import uuid

import pytest
from groupd.coordinator.serde import decode_record, encode_record
from groupd.coordinator.share import records as sr

T = uuid.UUID("00000000-0000-0000-0000-0000000000ab")


def s16(s: str) -> bytes:  # non-flexible string
    return struct.pack(">h", len(s)) + s.encode()


def cs(s: str) -> bytes:  # compact string
    return bytes([len(s) + 1]) + s.encode()


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


TAGS = b"\x00"  # no tagged fields

VECTORS = [
    (
        (sr.ShareGroupMetadataKey("g"), sr.ShareGroupMetadataValue(3, -2)),
        struct.pack(">h", 11) + s16("g"),
        struct.pack(">hiq", 0, 3, -2) + TAGS,
    ),
    (
        (
            sr.ShareGroupMemberMetadataKey("g", "m"),
            sr.ShareGroupMemberMetadataValue(None, "c", "/h", ("t",)),
        ),
        struct.pack(">h", 10) + s16("g") + s16("m"),
        struct.pack(">h", 0) + b"\x00" + cs("c") + cs("/h") + b"\x02" + cs("t") + TAGS,
    ),
    (
        (sr.ShareGroupTargetAssignmentMetadataKey("g"), sr.ShareGroupTargetAssignmentMetadataValue(4)),
        struct.pack(">h", 12) + s16("g"),
        struct.pack(">h", 0) + i32(4) + TAGS,
    ),
    (
        (
            sr.ShareGroupTargetAssignmentMemberKey("g", "m"),
            sr.ShareGroupTargetAssignmentMemberValue(((T, (0, 2)),)),
        ),
        struct.pack(">h", 13) + s16("g") + s16("m"),
        struct.pack(">h", 0) + b"\x02" + T.bytes + b"\x03" + i32(0) + i32(2) + TAGS + TAGS,
    ),
    (
        (
            sr.ShareGroupCurrentMemberAssignmentKey("g", "m"),
            sr.ShareGroupCurrentMemberAssignmentValue(5, 4, 0, ((T, (1,)),)),
        ),
        struct.pack(">h", 14) + s16("g") + s16("m"),
        struct.pack(">hiib", 0, 5, 4, 0) + b"\x02" + T.bytes + b"\x02" + i32(1) + TAGS + TAGS,
    ),
    (
        (
            sr.ShareGroupStatePartitionMetadataKey("g"),
            sr.ShareGroupStatePartitionMetadataValue(
                (sr.TopicPartitionsInfo(T, "t", (1,)),),
                (sr.TopicPartitionsInfo(T, "t", (0,)),),
                (sr.TopicInfo(T, "t"),),
            ),
        ),
        struct.pack(">h", 15) + s16("g"),
        struct.pack(">h", 0)
        + (b"\x02" + T.bytes + cs("t") + b"\x02" + i32(1) + TAGS)
        + (b"\x02" + T.bytes + cs("t") + b"\x02" + i32(0) + TAGS)
        + (b"\x02" + T.bytes + cs("t") + TAGS)
        + TAGS,
    ),
]


@pytest.mark.parametrize(("record", "key", "value"), VECTORS, ids=[type(v[0][0]).__name__ for v in VECTORS])
def test_bytes_as_kafka_writes_them(record, key: bytes, value: bytes) -> None:  # type: ignore[no-untyped-def]
    assert encode_record(record) == (key, value)
    assert decode_record(key, value) == record
    assert decode_record(key, None) == (record[0], None)  # a tombstone


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("earliest", ("earliest", None)),
        ("latest", ("latest", None)),
        ("by_duration:PT1H", ("by_duration", 3_600_000)),
        ("by_duration:P1DT2H3M4.5S", ("by_duration", ((24 + 2) * 60 + 3) * 60_000 + 4500)),
        ("by_duration:pt0.001s", ("by_duration", 1)),
        ("by_duration:PT0S", ("by_duration", 0)),
    ],
)
def test_share_auto_offset_reset_parses_as_kafka(value: str, parsed: tuple[str, int | None]) -> None:
    from groupd.coordinator.share.state import parse_auto_offset_reset

    assert parse_auto_offset_reset(value) == parsed


@pytest.mark.parametrize(
    "value",
    ["none", "by_duration", "by_duration:", "by_duration:PT", "by_duration:-PT1H", "Earliest", "by_duration:1H"],
)
def test_share_auto_offset_reset_refuses_as_kafka(value: str) -> None:
    from groupd.coordinator.share.state import parse_auto_offset_reset

    with pytest.raises(ValueError):
        parse_auto_offset_reset(value)
