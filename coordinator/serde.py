"""Bytes of ``__consumer_offsets`` records, in Kafka's own formats.

A key is an int16 version followed by the key struct; a value is an int16 version followed by the
value struct; a null value is a tombstone. The version of the key tells the record type: 0 and 1
are offset commits, 2 is group metadata (Kafka's ``GroupCoordinatorRecordSerde``). Values are
read in every version Kafka ever wrote (offset commit 0-4, group metadata 0-4), so a log written by
an older groupd or copied from a Kafka broker loads.
"""

from __future__ import annotations

import struct

from ..protocol._rt import DecodeError
from ..protocol.messages.records import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
)
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordKey,
    RecordValue,
)

_VERSION = struct.Struct(">h")
_OFFSET_KEY_V1 = OFFSET_COMMIT_KEY.codec(1)
_GROUP_KEY_V2 = GROUP_METADATA_KEY.codec(2)
_GROUP_VALUE_V3 = GROUP_METADATA_VALUE.codec(3)


class RecordDecodeError(ValueError):
    """A ``__consumer_offsets`` record that is not in any known format."""


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return _VERSION.pack(1) + _OFFSET_KEY_V1.encode(
            {"group": key.group, "topic": key.topic, "partition": key.partition}
        )
    if isinstance(key, GroupMetadataKey):
        return _VERSION.pack(2) + _GROUP_KEY_V2.encode({"group": key.group})
    raise TypeError(f"not a record key: {key!r}")


def encode_value(value: RecordValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        v = value.version
        return _VERSION.pack(v) + OFFSET_COMMIT_VALUE.codec(v).encode(
            {
                "offset": value.offset,
                "leader_epoch": value.leader_epoch,
                "metadata": value.metadata,
                "commit_timestamp": value.commit_timestamp,
                "expire_timestamp": value.expire_timestamp,
            }
        )
    if isinstance(value, GroupMetadataValue):
        return _VERSION.pack(3) + _GROUP_VALUE_V3.encode(
            {
                "protocol_type": value.protocol_type,
                "generation": value.generation,
                "protocol": value.protocol,
                "leader": value.leader,
                "current_state_timestamp": value.current_state_timestamp,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "rebalance_timeout": m.rebalance_timeout,
                        "session_timeout": m.session_timeout,
                        "subscription": m.subscription,
                        "assignment": m.assignment,
                    }
                    for m in value.members
                ],
            }
        )
    raise TypeError(f"not a record value: {value!r}")


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    key, value = record
    return encode_key(key), encode_value(value)


def decode_key(data: bytes) -> RecordKey:
    if len(data) < 2:
        raise RecordDecodeError("record key shorter than its version")
    (v,) = _VERSION.unpack_from(data, 0)
    try:
        if v in (0, 1):
            k = OFFSET_COMMIT_KEY.codec(v).decode(data, 2)
            return OffsetCommitKey(k["group"], k["topic"], k["partition"])
        if v == 2:
            return GroupMetadataKey(_GROUP_KEY_V2.decode(data, 2)["group"])
    except DecodeError as e:
        raise RecordDecodeError(f"bad record key v{v}: {e}") from None
    raise RecordDecodeError(f"unknown record key version {v}")


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    if data is None:
        return None
    if len(data) < 2:
        raise RecordDecodeError("record value shorter than its version")
    (v,) = _VERSION.unpack_from(data, 0)
    try:
        if isinstance(key, OffsetCommitKey):
            if not 0 <= v <= 4:
                raise RecordDecodeError(f"unknown offset commit value version {v}")
            o = OFFSET_COMMIT_VALUE.codec(v).decode(data, 2)
            return OffsetCommitValue(
                offset=o["offset"],
                leader_epoch=o.get("leader_epoch", -1),
                metadata=o["metadata"],
                commit_timestamp=o["commit_timestamp"],
                expire_timestamp=o.get("expire_timestamp", -1),
            )
        if not 0 <= v <= 4:
            raise RecordDecodeError(f"unknown group metadata value version {v}")
        g = GROUP_METADATA_VALUE.codec(v).decode(data, 2)
    except DecodeError as e:
        raise RecordDecodeError(f"bad record value v{v}: {e}") from None
    return GroupMetadataValue(
        protocol_type=g["protocol_type"],
        generation=g["generation"],
        protocol=g["protocol"],
        leader=g["leader"],
        current_state_timestamp=g.get("current_state_timestamp", -1),
        members=tuple(
            MemberMetadata(
                member_id=m["member_id"],
                group_instance_id=m.get("group_instance_id"),
                client_id=m["client_id"],
                client_host=m["client_host"],
                rebalance_timeout=m.get("rebalance_timeout", m["session_timeout"]),
                session_timeout=m["session_timeout"],
                subscription=m["subscription"],
                assignment=m["assignment"],
            )
            for m in g["members"]
        ),
    )


def decode_record(key: bytes, value: bytes | None) -> Record:
    k = decode_key(key)
    return k, decode_value(k, value)
