"""Group coordination APIs (classic protocol): FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from ..schema import api, f

JOIN_GROUP = api(
    11,
    "JoinGroup",
    valid="0-9",
    flexible="6+",
    request=[
        f("group_id", "string"),
        f("session_timeout_ms", "int32"),
        f("rebalance_timeout_ms", "int32", "1+", default=-1),
        f("member_id", "string"),
        f("group_instance_id", "string", "5+", nullable="5+", default=None),
        f("protocol_type", "string"),
        f("protocols", "[]", "0+", f("name", "string"), f("metadata", "bytes")),
        f("reason", "string", "8+", nullable="8+", default=None),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
        f("error_code", "int16"),
        f("generation_id", "int32", default=-1),
        f("protocol_type", "string", "7+", nullable="7+", default=None),
        f("protocol_name", "string", nullable="7+"),
        f("leader", "string"),
        f("skip_assignment", "bool", "9+", default=False),
        f("member_id", "string"),
        f(
            "members",
            "[]",
            "0+",
            f("member_id", "string"),
            f("group_instance_id", "string", "5+", nullable="5+", default=None),
            f("metadata", "bytes"),
        ),
    ],
)

HEARTBEAT = api(
    12,
    "Heartbeat",
    valid="0-4",
    flexible="4+",
    request=[
        f("group_id", "string"),
        f("generation_id", "int32"),
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
    ],
)
