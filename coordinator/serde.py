"""Bytes of ``__consumer_offsets`` records, in Kafka's own formats.

A key is an int16 version followed by the key struct; a value is an int16 version followed by the
value struct; a null value is a tombstone. The version of the key tells the record type: 0 and 1
are offset commits, 2 is group metadata (Kafka's ``GroupCoordinatorRecordSerde``). Values are
read in every version Kafka ever wrote (offset commit 0-4, group metadata 0-4), so a log written by
an older groupd or copied from a Kafka broker loads.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any

from ..protocol._rt import DecodeError
from ..protocol.messages.records import (
    CONSUMER_GROUP_RECORD_SCHEMAS,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
)
from ..protocol.messages.share_groups import SHARE_GROUP_RECORD_SCHEMAS
from .consumer import records as cr
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
from .share import records as sr

_VERSION = struct.Struct(">h")
# The codecs are compiled by their first use (``MessageSchema.codec`` caches them): compiling the
# three this module uses cost ~5 ms of every start, and the offset-commit fast paths below rarely
# need one (issue 26, start-up).


class RecordDecodeError(ValueError):
    """A ``__consumer_offsets`` record that is not in any known format."""


# --- fast paths for offset commits ---------------------------------------------------------------
# An OffsetCommit of 100 partitions writes 100 records, and start-up replays millions: through the
# generic codec (a dict per record, a call per field) a record cost ~3 us to encode and ~5 us to
# decode. Offset-commit keys and values (v0-3) are two strings and fixed-width ints, so they are
# packed/unpacked here with precompiled structs. Anything the fast path does not cover (v4 values,
# strings over 32767 bytes, wrong types, malformed bytes) falls back to the codec, which gives the
# same bytes, values and errors; tests/coordinator/test_serde.py checks both paths agree.
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_V1_HEAD = struct.Struct(">hq")  # version 1, offset
_V3_HEAD = struct.Struct(">hqi")  # version 3, offset, leader epoch
_V3_NO_METADATA = struct.Struct(">hqihq")  # version 3, offset, leader epoch, "" (length 0), commit timestamp
_V3_BODY = struct.Struct(">qih")  # offset, leader epoch, metadata length
_V0_BODY = struct.Struct(">qh")  # offset, metadata length (v0-2)
_EMPTY_STR = b"\x00\x00"
# key bytes up to the partition, per (group, topic): a group commits the same topics again and again
_KEY_PREFIXES: dict[tuple[str, str], bytes] = {}
_KEY_PREFIX_V1 = _VERSION.pack(1)
# decoded keys by their bytes: a log repeats each (group, topic, partition) once per commit
_DECODED_KEYS: dict[bytes, OffsetCommitKey] = {}
_CACHE_MAX = 1 << 16


def _str16(s: str) -> bytes:
    if type(s) is not str:
        raise TypeError("not a string")
    if not s:
        return _EMPTY_STR
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ValueError("string too long for the fast path")
    return _I16.pack(len(b)) + b


def _encode_offset_key(key: OffsetCommitKey) -> bytes:
    gt = (key.group, key.topic)
    prefix = _KEY_PREFIXES.get(gt)
    if prefix is None:
        prefix = _KEY_PREFIX_V1 + _str16(gt[0]) + _str16(gt[1])
        if len(_KEY_PREFIXES) >= _CACHE_MAX:
            _KEY_PREFIXES.clear()
        _KEY_PREFIXES[gt] = prefix
    return prefix + _I32.pack(key.partition)


def _encode_offset_value(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp != -1:  # version 1
        return (
            _V1_HEAD.pack(1, value.offset)
            + _str16(value.metadata)
            + _QQ.pack(value.commit_timestamp, value.expire_timestamp)
        )
    return _V3_HEAD.pack(3, value.offset, value.leader_epoch) + _str16(value.metadata) + _Q.pack(value.commit_timestamp)


def _decode_offset_key(data: bytes) -> OffsetCommitKey:
    """Key v0/v1 (same layout); raises ValueError/struct.error on anything the codec should judge."""
    (gl,) = _I16.unpack_from(data, 2)
    if gl < 0:
        raise ValueError("null group")
    p = 4 + gl
    (tl,) = _I16.unpack_from(data, p)
    if tl < 0:
        raise ValueError("null topic")
    q = p + 2 + tl
    (partition,) = _I32.unpack_from(data, q)
    return OffsetCommitKey(data[4:p].decode("utf-8"), data[p + 2 : q].decode("utf-8"), partition)


def _decode_offset_value(data: bytes, v: int) -> OffsetCommitValue:
    """Value v0-3; raises ValueError/struct.error on anything the codec should judge."""
    if v == 3:
        offset, leader_epoch, ml = _V3_BODY.unpack_from(data, 2)
        pos = 14
    else:
        offset, ml = _V0_BODY.unpack_from(data, 2)
        leader_epoch = -1
        pos = 10
    if ml < 0:
        raise ValueError("null metadata")
    end = pos + 2 + ml
    if v == 1:
        commit_ts, expire_ts = _QQ.unpack_from(data, end)
    else:
        (commit_ts,) = _Q.unpack_from(data, end)
        expire_ts = -1
    metadata = data[pos + 2 : end].decode("utf-8") if ml else ""
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


# --- the record layer ------------------------------------------------------------------------------
def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        try:
            return _encode_offset_key(key)
        except (TypeError, ValueError, struct.error):
            pass  # the codec decides (and words the error)
        return _VERSION.pack(1) + OFFSET_COMMIT_KEY.codec(1).encode(
            {"group": key.group, "topic": key.topic, "partition": key.partition}
        )
    if isinstance(key, GroupMetadataKey):
        return _VERSION.pack(2) + GROUP_METADATA_KEY.codec(2).encode({"group": key.group})
    if isinstance(key, _CONSUMER_KEY_TYPES):
        return _VERSION.pack(key.version) + CONSUMER_GROUP_RECORD_SCHEMAS[key.version][0].codec(key.version).encode(
            vars(key)
        )
    if isinstance(key, sr.SHARE_KEY_TYPES):
        return _VERSION.pack(key.version) + SHARE_GROUP_RECORD_SCHEMAS[key.version][0].codec(key.version).encode(
            vars(key)
        )
    raise TypeError(f"not a record key: {key!r}")


def encode_value(value: RecordValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        try:
            return _encode_offset_value(value)
        except (TypeError, ValueError, struct.error):
            pass  # the codec decides (and words the error)
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
        return _VERSION.pack(3) + GROUP_METADATA_VALUE.codec(3).encode(
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
    to_dict = _CONSUMER_VALUE_TO_DICT.get(type(value))
    if to_dict is not None:
        key_type = _CONSUMER_VALUE_TYPE[type(value)]
        return _VERSION.pack(0) + CONSUMER_GROUP_RECORD_SCHEMAS[key_type][1].codec(0).encode(to_dict(value))
    to_dict = sr.VALUE_TO_DICT.get(type(value))
    if to_dict is not None:
        key_type = sr.VALUE_TYPE[type(value)]
        return _VERSION.pack(0) + SHARE_GROUP_RECORD_SCHEMAS[key_type][1].codec(0).encode(to_dict(value))
    raise TypeError(f"not a record value: {value!r}")


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    key, value = record
    return encode_key(key), encode_value(value)


def encode_records(records: Iterable[Record]) -> list[tuple[bytes, bytes | None]]:
    """``encode_record`` of each record."""
    return [(k, v) for k, v, _, _ in encode_log_records(records, -1)]


def encode_log_records(records: Iterable[Record], timestamp: int) -> list[tuple[bytes, bytes | None, tuple, int]]:
    """The records as the log appends them, ``(key bytes, value bytes, (), timestamp)``. An
    OffsetCommit of 100 partitions hands over 100 records at once; the usual one (a v3 value) is
    packed inline here, without the four calls per record of ``encode_key``/``encode_value``, and
    the key prefix of the previous record (same group and topic) is reused; anything else goes
    through ``encode_record``."""
    out: list[tuple[bytes, bytes | None, tuple, int]] = []
    append = out.append
    prefixes = _KEY_PREFIXES
    pack_partition = _I32.pack
    pack_head = _V3_HEAD.pack
    pack_empty = _V3_NO_METADATA.pack
    pack_ts = _Q.pack
    no_headers = ()
    last_group = last_topic = prefix = None
    for record in records:
        key, value = record
        if type(key) is OffsetCommitKey and type(value) is OffsetCommitValue and value.expire_timestamp == -1:
            try:
                group, topic = key.group, key.topic
                if group is not last_group or topic is not last_topic:
                    prefix = prefixes.get((group, topic))
                    if prefix is None:
                        prefix = _encode_offset_key(key)[:-4]
                    last_group, last_topic = group, topic
                kb = prefix + pack_partition(key.partition)  # type: ignore[operator]
                metadata = value.metadata
                if metadata == "":  # what nearly every consumer commits: one pack
                    vb = pack_empty(3, value.offset, value.leader_epoch, 0, value.commit_timestamp)
                else:
                    vb = (
                        pack_head(3, value.offset, value.leader_epoch)
                        + _str16(metadata)
                        + pack_ts(value.commit_timestamp)
                    )
            except (TypeError, ValueError, struct.error):
                kb, vb = encode_record(record)  # the codec decides (and words the error)
                last_group = last_topic = None
            append((kb, vb, no_headers, timestamp))
        else:
            kb, vb = encode_record(record)
            append((kb, vb, no_headers, timestamp))
    return out


def decode_key(data: bytes) -> RecordKey:
    if len(data) < 2:
        raise RecordDecodeError("record key shorter than its version")
    (v,) = _VERSION.unpack_from(data, 0)
    if (v == 1 or v == 0) and type(data) is bytes:
        key = _DECODED_KEYS.get(data)
        if key is not None:
            return key
        try:
            key = _decode_offset_key(data)
        except (ValueError, struct.error):
            pass  # malformed: the codec words the error below
        else:
            if len(_DECODED_KEYS) >= _CACHE_MAX:
                _DECODED_KEYS.clear()
            _DECODED_KEYS[data] = key
            return key
    try:
        if v in (0, 1):
            k = OFFSET_COMMIT_KEY.codec(v).decode(data, 2)
            return OffsetCommitKey(k["group"], k["topic"], k["partition"])
        if v == 2:
            return GroupMetadataKey(GROUP_METADATA_KEY.codec(2).decode(data, 2)["group"])
        if v in _CONSUMER_KEYS:
            return _CONSUMER_KEYS[v](**CONSUMER_GROUP_RECORD_SCHEMAS[v][0].codec(v).decode(data, 2))
        if v in sr.SHARE_KEYS:
            return sr.SHARE_KEYS[v](**SHARE_GROUP_RECORD_SCHEMAS[v][0].codec(v).decode(data, 2))
    except DecodeError as e:
        raise RecordDecodeError(f"bad record key v{v}: {e}") from None
    raise RecordDecodeError(f"unknown record key version {v}")


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    if data is None:
        return None
    if len(data) < 2:
        raise RecordDecodeError("record value shorter than its version")
    (v,) = _VERSION.unpack_from(data, 0)
    if isinstance(key, _CONSUMER_KEY_TYPES):
        if v != 0:
            raise RecordDecodeError(f"unknown {type(key).__name__[:-3]}Value version {v}")
        try:
            d = CONSUMER_GROUP_RECORD_SCHEMAS[key.version][1].codec(0).decode(data, 2)
        except DecodeError as e:
            raise RecordDecodeError(f"bad record value v{v}: {e}") from None
        return _CONSUMER_VALUE_FROM_DICT[key.version](d)
    if isinstance(key, sr.SHARE_KEY_TYPES):
        if v != 0:
            raise RecordDecodeError(f"unknown {type(key).__name__[:-3]}Value version {v}")
        try:
            d = SHARE_GROUP_RECORD_SCHEMAS[key.version][1].codec(0).decode(data, 2)
        except DecodeError as e:
            raise RecordDecodeError(f"bad record value v{v}: {e}") from None
        return sr.VALUE_FROM_DICT[key.version](d)  # type: ignore[no-any-return]
    try:
        if isinstance(key, OffsetCommitKey):
            if not 0 <= v <= 4:
                raise RecordDecodeError(f"unknown offset commit value version {v}")
            if v != 4:
                try:
                    return _decode_offset_value(data, v)
                except (ValueError, struct.error):
                    pass  # malformed: the codec words the error below
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
    # Replay's hot path: an offset-commit key seen before (the cache holds only those) with a
    # v0-3 value goes straight to the struct decoder.
    k = _DECODED_KEYS.get(key) if type(key) is bytes else None
    if k is None:
        k = decode_key(key)
    elif type(value) is bytes and len(value) >= 2:
        (v,) = _VERSION.unpack_from(value, 0)
        if 0 <= v <= 3:
            try:
                return k, _decode_offset_value(value, v)
            except (ValueError, struct.error):
                pass  # malformed: decode_value words the error
    return k, decode_value(k, value)


# --- KIP-848 consumer-group records: dataclass <-> the schema's dict ---------------------------------
_CONSUMER_KEYS: dict[int, type] = {k.version: k for k in cr.CONSUMER_KEY_TYPES}
_CONSUMER_KEY_TYPES = cr.CONSUMER_KEY_TYPES


def _tps_out(tps: cr.TopicPartitionsTuple) -> list[dict]:
    return [{"topic_id": t, "partitions": list(ps)} for t, ps in tps]


def _tps_in(items: list[dict]) -> cr.TopicPartitionsTuple:
    return tuple((i["topic_id"], tuple(i["partitions"])) for i in items)


def _member_out(v: cr.ConsumerGroupMemberMetadataValue) -> dict:
    d = {
        k: getattr(v, k)
        for k in (
            "instance_id",
            "rack_id",
            "client_id",
            "client_host",
            "subscribed_topic_regex",
            "rebalance_timeout_ms",
            "server_assignor",
        )
    }
    d["subscribed_topic_names"] = list(v.subscribed_topic_names)
    c = v.classic_member_metadata
    d["classic_member_metadata"] = (
        None
        if c is None
        else {
            "session_timeout_ms": c.session_timeout_ms,
            "supported_protocols": [{"name": p.name, "metadata": p.metadata} for p in c.supported_protocols],
        }
    )
    return d


def _member_in(d: dict) -> cr.ConsumerGroupMemberMetadataValue:
    classic = d.get("classic_member_metadata")
    return cr.ConsumerGroupMemberMetadataValue(
        instance_id=d["instance_id"],
        rack_id=d["rack_id"],
        client_id=d["client_id"],
        client_host=d["client_host"],
        subscribed_topic_names=tuple(d["subscribed_topic_names"]),
        subscribed_topic_regex=d["subscribed_topic_regex"],
        rebalance_timeout_ms=d["rebalance_timeout_ms"],
        server_assignor=d["server_assignor"],
        classic_member_metadata=None
        if classic is None
        else cr.ClassicMemberMetadata(
            classic["session_timeout_ms"],
            tuple(cr.ClassicProtocol(p["name"], p["metadata"]) for p in classic["supported_protocols"]),
        ),
    )


def _partition_metadata_out(v: cr.ConsumerGroupPartitionMetadataValue) -> dict:
    return {
        "topics": [
            {
                "topic_id": t.topic_id,
                "topic_name": t.topic_name,
                "num_partitions": t.num_partitions,
                "partition_racks": [{"partition": p, "racks": list(r)} for p, r in t.partition_racks],
            }
            for t in v.topics
        ]
    }


def _partition_metadata_in(d: dict) -> cr.ConsumerGroupPartitionMetadataValue:
    return cr.ConsumerGroupPartitionMetadataValue(
        tuple(
            cr.TopicMetadata(
                t["topic_id"],
                t["topic_name"],
                t["num_partitions"],
                tuple((p["partition"], tuple(p["racks"])) for p in t["partition_racks"]),
            )
            for t in d["topics"]
        )
    )


def _current_out(v: cr.ConsumerGroupCurrentMemberAssignmentValue) -> dict:
    return {
        "member_epoch": v.member_epoch,
        "previous_member_epoch": v.previous_member_epoch,
        "state": v.state,
        "assigned_partitions": _tps_out(v.assigned_partitions),
        "partitions_pending_revocation": _tps_out(v.partitions_pending_revocation),
    }


def _current_in(d: dict) -> cr.ConsumerGroupCurrentMemberAssignmentValue:
    return cr.ConsumerGroupCurrentMemberAssignmentValue(
        d["member_epoch"],
        d["previous_member_epoch"],
        d["state"],
        _tps_in(d["assigned_partitions"]),
        _tps_in(d["partitions_pending_revocation"]),
    )


_CONSUMER_VALUE_TO_DICT: dict[type, Callable[[Any], dict]] = {
    cr.ConsumerGroupMetadataValue: lambda v: {"epoch": v.epoch, "metadata_hash": v.metadata_hash},
    cr.ConsumerGroupPartitionMetadataValue: _partition_metadata_out,
    cr.ConsumerGroupMemberMetadataValue: _member_out,
    cr.ConsumerGroupTargetAssignmentMetadataValue: lambda v: {"assignment_epoch": v.assignment_epoch},
    cr.ConsumerGroupTargetAssignmentMemberValue: lambda v: {"topic_partitions": _tps_out(v.topic_partitions)},
    cr.ConsumerGroupCurrentMemberAssignmentValue: _current_out,
    cr.ConsumerGroupRegularExpressionValue: lambda v: {
        "topics": list(v.topics),
        "version": v.version,
        "timestamp": v.timestamp,
    },
}
_CONSUMER_VALUE_TYPE: dict[type, int] = {
    cr.ConsumerGroupMetadataValue: cr.CONSUMER_GROUP_METADATA,
    cr.ConsumerGroupPartitionMetadataValue: cr.CONSUMER_GROUP_PARTITION_METADATA,
    cr.ConsumerGroupMemberMetadataValue: cr.CONSUMER_GROUP_MEMBER_METADATA,
    cr.ConsumerGroupTargetAssignmentMetadataValue: cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    cr.ConsumerGroupTargetAssignmentMemberValue: cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    cr.ConsumerGroupCurrentMemberAssignmentValue: cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    cr.ConsumerGroupRegularExpressionValue: cr.CONSUMER_GROUP_REGULAR_EXPRESSION,
}
_CONSUMER_VALUE_FROM_DICT: dict[int, Callable[[dict], Any]] = {
    cr.CONSUMER_GROUP_METADATA: lambda d: cr.ConsumerGroupMetadataValue(d["epoch"], d.get("metadata_hash", 0)),
    cr.CONSUMER_GROUP_PARTITION_METADATA: _partition_metadata_in,
    cr.CONSUMER_GROUP_MEMBER_METADATA: _member_in,
    cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: lambda d: cr.ConsumerGroupTargetAssignmentMetadataValue(
        d["assignment_epoch"]
    ),
    cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: lambda d: cr.ConsumerGroupTargetAssignmentMemberValue(
        _tps_in(d["topic_partitions"])
    ),
    cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: _current_in,
    cr.CONSUMER_GROUP_REGULAR_EXPRESSION: lambda d: cr.ConsumerGroupRegularExpressionValue(
        tuple(d["topics"]), d["version"], d["timestamp"]
    ),
}
