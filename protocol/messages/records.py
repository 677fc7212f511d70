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

from ..schema import MessageSchema, f

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
