"""KIP-848 consumer-group APIs (Kafka 4's ``ConsumerGroupHeartbeatRequest/Response.json`` and
``ConsumerGroupDescribeRequest/Response.json``): ConsumerGroupHeartbeat (68) v0-1 and
ConsumerGroupDescribe (69) v0-1, flexible from v0. v1 of the heartbeat adds the regex subscription
and makes the client generate its member id (KIP-1082); v1 of describe adds the member type."""

from __future__ import annotations

from ..schema import Field, api, f


def _topic_partitions(*extra: Field) -> Field:
    return f("topic_partitions", "[]", "0+", f("topic_id", "uuid"), *extra, f("partitions", "[]int32"))


CONSUMER_GROUP_HEARTBEAT = api(
    68,
    "ConsumerGroupHeartbeat",
    valid="0-1",
    flexible="0+",
    request=[
        f("group_id", "string"),
        f("member_id", "string"),
        f("member_epoch", "int32"),
        f("instance_id", "string", nullable="0+", default=None),
        f("rack_id", "string", nullable="0+", default=None),
        f("rebalance_timeout_ms", "int32", default=-1),
        f("subscribed_topic_names", "[]string", nullable="0+", default=None),
        f("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        f("server_assignor", "string", nullable="0+", default=None),
        f(
            "topic_partitions",
            "[]",
            "0+",
            f("topic_id", "uuid"),
            f("partitions", "[]int32"),
            nullable="0+",  # null: unchanged since the last heartbeat (the spec gives no default)
        ),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+", default=None),
        f("member_epoch", "int32"),
        f("heartbeat_interval_ms", "int32"),
        f("assignment", "Assignment", "0+", _topic_partitions(), nullable="0+", default=None),
    ],
)

CONSUMER_GROUP_DESCRIBE = api(
    69,
    "ConsumerGroupDescribe",
    valid="0-1",
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
                f("instance_id", "string", nullable="0+", default=None),
                f("rack_id", "string", nullable="0+", default=None),
                f("member_epoch", "int32"),
                f("client_id", "string"),
                f("client_host", "string"),
                f("subscribed_topic_names", "[]string"),
                f("subscribed_topic_regex", "string", nullable="0+", default=None),
                f("assignment", "Assignment", "0+", _topic_partitions(f("topic_name", "string"))),
                f("target_assignment", "Assignment", "0+", _topic_partitions(f("topic_name", "string"))),
                f("member_type", "int8", "1+", default=-1),
            ),
            f("authorized_operations", "int32", default=-(2**31)),
        ),
    ],
)
