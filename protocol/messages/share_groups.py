"""KIP-932 share-group membership and admin APIs (Kafka 4.2's JSON specs), and the share-group records
of ``__consumer_offsets`` (``group-coordinator/src/main/resources/common/message/ShareGroup*``).

APIs, all flexible from their first version:

- ShareGroupHeartbeat (76) v1 and ShareGroupDescribe (77) v1: v0 was Kafka 4.0's early access and
  was removed in 4.1, so the specs' ``validVersions`` is "1".
- DescribeShareGroupOffsets (90) v0-1 (v1 adds ``lag``, KIP-1226), AlterShareGroupOffsets (91) v0,
  DeleteShareGroupOffsets (92) v0.

Records (the int16 before a key is the record type, every value version 0, flexible):
10 ShareGroupMemberMetadata, 11 ShareGroupMetadata, 12 ShareGroupTargetAssignmentMetadata,
13 ShareGroupTargetAssignmentMember, 14 ShareGroupCurrentMemberAssignment,
15 ShareGroupStatePartitionMetadata.
"""

from __future__ import annotations

from ..schema import Field, MessageSchema, api, f
from .records import _key, _value


def _assignment(*extra: Field) -> Field:
    return f("topic_partitions", "[]", "0+", f("topic_id", "uuid"), *extra, f("partitions", "[]int32"))


SHARE_GROUP_HEARTBEAT = api(
    76,
    "ShareGroupHeartbeat",
    valid="1",
    flexible="0+",
    request=[
        f("group_id", "string"),
        f("member_id", "string"),
        f("member_epoch", "int32"),
        f("rack_id", "string", nullable="0+", default=None),
        f("subscribed_topic_names", "[]string", nullable="0+", default=None),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+", default=None),
        f("member_epoch", "int32"),
        f("heartbeat_interval_ms", "int32"),
        f("assignment", "Assignment", "0+", _assignment(), nullable="0+", default=None),
    ],
)

SHARE_GROUP_DESCRIBE = api(
    77,
    "ShareGroupDescribe",
    valid="1",
    flexible="0+",
    request=[
        f("group_ids", "[]string"),
        f("include_authorized_operations", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "groups",
            "[]",
            "0+",
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
            f("group_id", "string"),
            f("group_state", "string"),
            f("group_epoch", "int32"),
            f("assignment_epoch", "int32"),
            f("assignor_name", "string"),
            f(
                "members",
                "[]",
                "0+",
                f("member_id", "string"),
                f("rack_id", "string", nullable="0+", default=None),
                f("member_epoch", "int32"),
                f("client_id", "string"),
                f("client_host", "string"),
                f("subscribed_topic_names", "[]string"),
                f("assignment", "Assignment", "0+", _assignment(f("topic_name", "string"))),
            ),
            f("authorized_operations", "int32", default=-(2**31)),
        ),
    ],
)

DESCRIBE_SHARE_GROUP_OFFSETS = api(
    90,
    "DescribeShareGroupOffsets",
    valid="0-1",
    flexible="0+",
    request=[
        f(
            "groups",
            "[]",
            "0+",
            f("group_id", "string"),
            # null: every topic partition the group has a start offset for
            f("topics", "[]", "0+", f("topic_name", "string"), f("partitions", "[]int32"), nullable="0+"),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "groups",
            "[]",
            "0+",
            f("group_id", "string"),
            f(
                "topics",
                "[]",
                "0+",
                f("topic_name", "string"),
                f("topic_id", "uuid"),
                f(
                    "partitions",
                    "[]",
                    "0+",
                    f("partition_index", "int32"),
                    f("start_offset", "int64"),
                    f("leader_epoch", "int32"),
                    f("lag", "int64", "1+", default=-1),
                    f("error_code", "int16"),
                    f("error_message", "string", nullable="0+", default=None),
                ),
            ),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
        ),
    ],
)

ALTER_SHARE_GROUP_OFFSETS = api(
    91,
    "AlterShareGroupOffsets",
    valid="0",
    flexible="0+",
    request=[
        f("group_id", "string"),
        f(
            "topics",
            "[]",
            "0+",
            f("topic_name", "string"),
            f("partitions", "[]", "0+", f("partition_index", "int32"), f("start_offset", "int64")),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f(
            "responses",
            "[]",
            "0+",
            f("topic_name", "string"),
            f("topic_id", "uuid"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
            ),
        ),
    ],
)

DELETE_SHARE_GROUP_OFFSETS = api(
    92,
    "DeleteShareGroupOffsets",
    valid="0",
    flexible="0+",
    request=[
        f("group_id", "string"),
        f("topics", "[]", "0+", f("topic_name", "string")),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f(
            "responses",
            "[]",
            "0+",
            f("topic_name", "string"),
            f("topic_id", "uuid"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
        ),
    ],
)


# --- the share-group records of __consumer_offsets ---------------------------------------------------
def _tps(name: str) -> Field:
    return f(name, "[]", "0+", f("topic_id", "uuid", "0+"), f("partitions", "[]int32", "0+"))


def _topic_partitions_info(name: str) -> Field:
    return f(
        name,
        "[]",
        "0+",
        f("topic_id", "uuid", "0+"),
        f("topic_name", "string", "0+"),
        f("partitions", "[]int32", "0+"),
    )


SHARE_GROUP_MEMBER_METADATA_KEY = _key("ShareGroupMemberMetadataKey", 10, "group_id", "member_id")
SHARE_GROUP_MEMBER_METADATA_VALUE = _value(
    "ShareGroupMemberMetadataValue",
    f("rack_id", "string", "0+", nullable="0+"),
    f("client_id", "string", "0+"),
    f("client_host", "string", "0+"),
    f("subscribed_topic_names", "[]string", "0+"),
)
SHARE_GROUP_METADATA_KEY = _key("ShareGroupMetadataKey", 11, "group_id")
SHARE_GROUP_METADATA_VALUE = _value(
    "ShareGroupMetadataValue",
    f("epoch", "int32", "0+"),
    f("metadata_hash", "int64", "0+"),
)
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _key("ShareGroupTargetAssignmentMetadataKey", 12, "group_id")
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _value(
    "ShareGroupTargetAssignmentMetadataValue", f("assignment_epoch", "int32", "0+")
)
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _key("ShareGroupTargetAssignmentMemberKey", 13, "group_id", "member_id")
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _value("ShareGroupTargetAssignmentMemberValue", _tps("topic_partitions"))
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _key("ShareGroupCurrentMemberAssignmentKey", 14, "group_id", "member_id")
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _value(
    "ShareGroupCurrentMemberAssignmentValue",
    f("member_epoch", "int32", "0+"),
    f("previous_member_epoch", "int32", "0+"),
    f("state", "int8", "0+"),
    _tps("assigned_partitions"),
)
SHARE_GROUP_STATE_PARTITION_METADATA_KEY = _key("ShareGroupStatePartitionMetadataKey", 15, "group_id")
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = _value(
    "ShareGroupStatePartitionMetadataValue",
    _topic_partitions_info("initializing_topics"),
    _topic_partitions_info("initialized_topics"),
    f("deleting_topics", "[]", "0+", f("topic_id", "uuid", "0+"), f("topic_name", "string", "0+")),
)

# record type -> (key schema, value schema)
SHARE_GROUP_RECORD_SCHEMAS: dict[int, tuple[MessageSchema, MessageSchema]] = {
    10: (SHARE_GROUP_MEMBER_METADATA_KEY, SHARE_GROUP_MEMBER_METADATA_VALUE),
    11: (SHARE_GROUP_METADATA_KEY, SHARE_GROUP_METADATA_VALUE),
    12: (SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    13: (SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    14: (SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    15: (SHARE_GROUP_STATE_PARTITION_METADATA_KEY, SHARE_GROUP_STATE_PARTITION_METADATA_VALUE),
}
