"""The ``__consumer_offsets`` record formats (Kafka's ``group-coordinator/.../common/message/*.json``).

These are data schemas, not APIs: no headers, and on disk each key and value is preceded by an int16
version that selects the schema version (handled by the coordinator's record layer). Key version 0/1
is an offset commit, key version 2 is group metadata; a null value is a tombstone.

- ``OFFSET_COMMIT_KEY`` v0-1: (group, topic, partition).
- ``OFFSET_COMMIT_VALUE`` v0-4: offset, leader epoch (v3+), metadata, commit timestamp, expire
  timestamp (v1 only). v4 is flexible.
- ``GROUP_METADATA_KEY`` v2: (group).
- ``GROUP_METADATA_VALUE`` v0-4: protocol type, generation, protocol, leader, current state
  timestamp (v2+), members. v4 is flexible.
"""

from __future__ import annotations

from ..schema import Field, MessageSchema, f

OFFSET_COMMIT_KEY = MessageSchema(
    "OffsetCommitKey",
    valid="0-1",
    flexible="none",
    fields=(
        f("group", "string", "0-1"),
        f("topic", "string", "0-1"),
        f("partition", "int32", "0-1"),
    ),
)

OFFSET_COMMIT_VALUE = MessageSchema(
    "OffsetCommitValue",
    valid="0-4",
    flexible="4+",
    fields=(
        f("offset", "int64", "0+"),
        f("leader_epoch", "int32", "3+", default=-1),
        f("metadata", "string", "0+"),
        f("commit_timestamp", "int64", "0+"),
        f("expire_timestamp", "int64", "1", default=-1),
    ),
)

GROUP_METADATA_KEY = MessageSchema(
    "GroupMetadataKey",
    valid="2",
    flexible="none",
    fields=(f("group", "string", "2"),),
)

GROUP_METADATA_VALUE = MessageSchema(
    "GroupMetadataValue",
    valid="0-4",
    flexible="4+",
    fields=(
        f("protocol_type", "string", "0+"),
        f("generation", "int32", "0+"),
        f("protocol", "string", "0+", nullable="0+"),
        f("leader", "string", "0+", nullable="0+"),
        f("current_state_timestamp", "int64", "2+", default=-1),
        f(
            "members",
            "[]",
            "0+",
            f("member_id", "string", "0+"),
            f("group_instance_id", "string", "3+", nullable="3+", default=None),
            f("client_id", "string", "0+"),
            f("client_host", "string", "0+"),
            f("rebalance_timeout", "int32", "1+"),
            f("session_timeout", "int32", "0+"),
            f("subscription", "bytes", "0+"),
            f("assignment", "bytes", "0+"),
        ),
    ),
)

RECORD_SCHEMAS: tuple[MessageSchema, ...] = (
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
)


# --- KIP-848 consumer groups (Kafka 4). The int16 before a key is the record type (the spec's apiKey):
# 3 group metadata, 4 partition metadata, 5 member metadata, 6 target assignment metadata, 7 target
# assignment member, 8 current member assignment, 16 regular expression. Every value is version 0,
# flexible; tagged fields Kafka added later (MetadataHash in 4.1, ClassicMemberMetadata) are read.


def _key(name: str, type_: int, *names: str) -> MessageSchema:
    v = str(type_)
    return MessageSchema(name, valid=v, flexible="none", fields=tuple(f(n, "string", v) for n in names))


def _value(name: str, *fields: Field) -> MessageSchema:
    return MessageSchema(name, valid="0", flexible="0+", fields=fields)


def _topic_partitions(name: str) -> Field:
    return f(name, "[]", "0+", f("topic_id", "uuid", "0+"), f("partitions", "[]int32", "0+"))


CONSUMER_GROUP_METADATA_KEY = _key("ConsumerGroupMetadataKey", 3, "group_id")
CONSUMER_GROUP_METADATA_VALUE = _value(
    "ConsumerGroupMetadataValue",
    f("epoch", "int32", "0+"),
    f("metadata_hash", "int64", "0+", default=0, tag=0, tagged="0+"),
)
CONSUMER_GROUP_PARTITION_METADATA_KEY = _key("ConsumerGroupPartitionMetadataKey", 4, "group_id")
CONSUMER_GROUP_PARTITION_METADATA_VALUE = _value(
    "ConsumerGroupPartitionMetadataValue",
    f(
        "topics",
        "[]",
        "0+",
        f("topic_id", "uuid", "0+"),
        f("topic_name", "string", "0+"),
        f("num_partitions", "int32", "0+"),
        f("partition_racks", "[]", "0+", f("partition", "int32", "0+"), f("racks", "[]string", "0+")),
    ),
)
CONSUMER_GROUP_MEMBER_METADATA_KEY = _key("ConsumerGroupMemberMetadataKey", 5, "group_id", "member_id")
CONSUMER_GROUP_MEMBER_METADATA_VALUE = _value(
    "ConsumerGroupMemberMetadataValue",
    f("instance_id", "string", "0+", nullable="0+"),
    f("rack_id", "string", "0+", nullable="0+"),
    f("client_id", "string", "0+"),
    f("client_host", "string", "0+"),
    f("subscribed_topic_names", "[]string", "0+"),
    f("subscribed_topic_regex", "string", "0+", nullable="0+"),
    f("rebalance_timeout_ms", "int32", "0+", default=-1),
    f("server_assignor", "string", "0+", nullable="0+"),
    f(
        "classic_member_metadata",
        "ClassicMemberMetadata",
        "0+",
        f("session_timeout_ms", "int32", "0+"),
        f("supported_protocols", "[]", "0+", f("name", "string", "0+"), f("metadata", "bytes", "0+")),
        nullable="0+",
        default=None,
        tag=0,
        tagged="0+",
    ),
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _key("ConsumerGroupTargetAssignmentMetadataKey", 6, "group_id")
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _value(
    "ConsumerGroupTargetAssignmentMetadataValue", f("assignment_epoch", "int32", "0+")
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _key("ConsumerGroupTargetAssignmentMemberKey", 7, "group_id", "member_id")
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _value(
    "ConsumerGroupTargetAssignmentMemberValue", _topic_partitions("topic_partitions")
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _key(
    "ConsumerGroupCurrentMemberAssignmentKey", 8, "group_id", "member_id"
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _value(
    "ConsumerGroupCurrentMemberAssignmentValue",
    f("member_epoch", "int32", "0+"),
    f("previous_member_epoch", "int32", "0+"),
    f("state", "int8", "0+"),
    _topic_partitions("assigned_partitions"),
    _topic_partitions("partitions_pending_revocation"),
)
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY = _key("ConsumerGroupRegularExpressionKey", 16, "group_id", "regular_expression")
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = _value(
    "ConsumerGroupRegularExpressionValue",
    f("topics", "[]string", "0+"),
    f("version", "int64", "0+"),
    f("timestamp", "int64", "0+"),
)

# record type -> (key schema, value schema)
CONSUMER_GROUP_RECORD_SCHEMAS: dict[int, tuple[MessageSchema, MessageSchema]] = {
    3: (CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_METADATA_VALUE),
    4: (CONSUMER_GROUP_PARTITION_METADATA_KEY, CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: (CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: (CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    16: (CONSUMER_GROUP_REGULAR_EXPRESSION_KEY, CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
}

RECORD_SCHEMAS += tuple(s for pair in CONSUMER_GROUP_RECORD_SCHEMAS.values() for s in pair)
