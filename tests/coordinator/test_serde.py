"""The struct-packed fast paths of ``coordinator.serde`` agree with the declarative codec: the same
bytes for every offset-commit key and value it writes, the same objects (or a RecordDecodeError)
for every key and value it reads, well-formed or not."""

from __future__ import annotations

import struct

import pytest
from groupd.coordinator import serde
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from groupd.protocol._rt import DecodeError
from groupd.protocol.messages.records import OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE
from hypothesis import given, settings
from hypothesis import strategies as st

_V = struct.Struct(">h")
names = st.text(max_size=40)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


def codec_key(key: OffsetCommitKey) -> bytes:
    return _V.pack(1) + OFFSET_COMMIT_KEY.codec(1).encode(
        {"group": key.group, "topic": key.topic, "partition": key.partition}
    )


def codec_value(value: OffsetCommitValue) -> bytes:
    v = value.version
    return _V.pack(v) + OFFSET_COMMIT_VALUE.codec(v).encode(
        {
            "offset": value.offset,
            "leader_epoch": value.leader_epoch,
            "metadata": value.metadata,
            "commit_timestamp": value.commit_timestamp,
            "expire_timestamp": value.expire_timestamp,
        }
    )


def codec_decode_value(data: bytes) -> OffsetCommitValue:
    (v,) = _V.unpack_from(data, 0)
    o = OFFSET_COMMIT_VALUE.codec(v).decode(data, 2)
    return OffsetCommitValue(
        o["offset"], o.get("leader_epoch", -1), o["metadata"], o["commit_timestamp"], o.get("expire_timestamp", -1)
    )


@settings(max_examples=300, deadline=None)
@given(names, names, int32)
def test_offset_key_bytes_match_the_codec(group: str, topic: str, partition: int) -> None:
    key = OffsetCommitKey(group, topic, partition)
    data = serde.encode_key(key)
    assert data == codec_key(key)
    assert serde.decode_key(data) == key
    assert serde.decode_key(data) == key  # and again, from the decoded-key cache


@settings(max_examples=300, deadline=None)
@given(int64, int32, names, int64, st.one_of(st.just(-1), int64))
def test_offset_value_bytes_match_the_codec(
    offset: int, epoch: int, metadata: str, commit_ts: int, expire_ts: int
) -> None:
    value = OffsetCommitValue(offset, epoch if expire_ts == -1 else -1, metadata, commit_ts, expire_ts)
    data = serde.encode_value(value)
    assert data == codec_value(value)
    assert serde.decode_value(OffsetCommitKey("g", "t", 0), data) == value


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4), int64, names, int64)
def test_every_value_version_decodes_like_the_codec(v: int, offset: int, metadata: str, ts: int) -> None:
    data = _V.pack(v) + OFFSET_COMMIT_VALUE.codec(v).encode(
        {"offset": offset, "leader_epoch": 7, "metadata": metadata, "commit_timestamp": ts, "expire_timestamp": ts}
    )
    assert serde.decode_value(OffsetCommitKey("g", "t", 0), data) == codec_decode_value(data)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=40), st.sampled_from([0, 1, 3]))
def test_malformed_bytes_are_judged_like_the_codec(tail: bytes, v: int) -> None:
    data = _V.pack(v) + tail
    key_codec = OFFSET_COMMIT_KEY.codec(min(v, 1))
    try:
        k = key_codec.decode(data, 2)
        expected_key: object = OffsetCommitKey(k["group"], k["topic"], k["partition"])
    except DecodeError:
        expected_key = RecordDecodeError
    if v in (0, 1):
        try:
            got: object = serde.decode_key(data)
        except serde.RecordDecodeError:
            got = RecordDecodeError
        assert got == expected_key
    try:
        expected_value: object = codec_decode_value(data)
    except DecodeError:
        expected_value = RecordDecodeError
    try:
        got = serde.decode_value(OffsetCommitKey("g", "t", 0), data)
    except serde.RecordDecodeError:
        got = RecordDecodeError
    assert got == expected_value


RecordDecodeError = serde.RecordDecodeError


@pytest.mark.parametrize(
    "key",
    [OffsetCommitKey("g" * 40_000, "t", 0), OffsetCommitKey("g", "t", 2**31)],
)
def test_what_the_fast_path_cannot_write_fails_as_the_codec_does(key: OffsetCommitKey) -> None:
    with pytest.raises(Exception) as fast:
        serde.encode_key(key)
    with pytest.raises(Exception) as slow:
        codec_key(key)
    assert type(fast.value) is type(slow.value)


def test_non_string_metadata_is_left_to_the_codec() -> None:
    value = OffsetCommitValue(1, -1, None, 0, -1)  # type: ignore[arg-type]
    assert serde.encode_value(value) == codec_value(value)


def test_group_metadata_keys_still_round_trip() -> None:
    key = GroupMetadataKey("my-group")
    assert serde.decode_key(serde.encode_key(key)) == key


@settings(max_examples=300, deadline=None)
@given(names, int32, st.binary(max_size=30), st.sampled_from([0, 1, 2, 3, 4]))
def test_decode_record_with_a_cached_key_judges_values_like_decode_value(
    topic: str, partition: int, tail: bytes, v: int
) -> None:
    key = OffsetCommitKey("g", topic, partition)
    kb = serde.encode_key(key)
    serde.decode_key(kb)  # now cached: decode_record takes its fast path
    data = _V.pack(v) + tail
    try:
        expected: object = (key, serde.decode_value(key, data))
    except serde.RecordDecodeError:
        expected = RecordDecodeError
    try:
        got: object = serde.decode_record(kb, data)
    except serde.RecordDecodeError:
        got = RecordDecodeError
    assert got == expected
    assert serde.decode_record(kb, None) == (key, None)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(names, names, int32, int64, int32, st.one_of(names, st.none()), int64, st.one_of(st.just(-1), int64)),
        max_size=8,
    ),
    st.booleans(),
)
def test_encode_records_is_encode_record_of_each(rows: list[tuple], tombstones: bool) -> None:
    records: list = []
    for group, topic, partition, offset, epoch, metadata, ts, expire in rows:
        key = OffsetCommitKey(group, topic, partition)
        value = None if tombstones and partition % 2 else OffsetCommitValue(offset, epoch, metadata, ts, expire)  # type: ignore[arg-type]
        records.append((key, value))
    records.append((GroupMetadataKey("g"), None))
    assert serde.encode_records(records) == [serde.encode_record(r) for r in records]
