"""The KIP-932 share-group records of ``__consumer_offsets``, as dataclasses (Kafka 4.2's
``ShareGroup*Key/Value`` specs; the schemas are ``groupd.protocol.messages.share_groups``).

| type | key (fields) | value |
|---|---|---|
| 10 | ShareGroupMemberMetadataKey (group, member) | rack, client id and host, subscribed topic names |
| 11 | ShareGroupMetadataKey (group) | group epoch, metadata hash |
| 12 | ShareGroupTargetAssignmentMetadataKey (group) | assignment epoch |
| 13 | ShareGroupTargetAssignmentMemberKey (group, member) | the member's target partitions |
| 14 | ShareGroupCurrentMemberAssignmentKey (group, member) | epochs, state, assigned partitions |
| 15 | ShareGroupStatePartitionMetadataKey (group) | initializing / initialized / deleting share partitions |

A ``None`` value is a tombstone. Partition lists are tuples of ``(topic id, sorted partitions)`` sorted
by topic id, so equal assignments are equal records.
"""

from __future__ import annotations

import uuid
from typing import Any

from groupd.protocol.frozen import frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

TopicPartitionsTuple = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15


@frozen_record
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str
    version = SHARE_GROUP_MEMBER_METADATA

    def __init__(self, group_id: str, member_id: str) -> None:
        _set(self, "group_id", group_id)
        _set(self, "member_id", member_id)


@frozen_record
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]

    def __init__(
        self,
        rack_id: str | None,
        client_id: str,
        client_host: str,
        subscribed_topic_names: tuple[str, ...],
    ) -> None:
        _set(self, "rack_id", rack_id)
        _set(self, "client_id", client_id)
        _set(self, "client_host", client_host)
        _set(self, "subscribed_topic_names", subscribed_topic_names)


@frozen_record
class ShareGroupMetadataKey:
    group_id: str
    version = SHARE_GROUP_METADATA

    def __init__(self, group_id: str) -> None:
        _set(self, "group_id", group_id)


@frozen_record
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0

    def __init__(self, epoch: int, metadata_hash: int = 0) -> None:
        _set(self, "epoch", epoch)
        _set(self, "metadata_hash", metadata_hash)


@frozen_record
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str
    version = SHARE_GROUP_TARGET_ASSIGNMENT_METADATA

    def __init__(self, group_id: str) -> None:
        _set(self, "group_id", group_id)


@frozen_record
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int

    def __init__(self, assignment_epoch: int) -> None:
        _set(self, "assignment_epoch", assignment_epoch)


@frozen_record
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str
    version = SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER

    def __init__(self, group_id: str, member_id: str) -> None:
        _set(self, "group_id", group_id)
        _set(self, "member_id", member_id)


@frozen_record
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitionsTuple

    def __init__(self, topic_partitions: TopicPartitionsTuple) -> None:
        _set(self, "topic_partitions", topic_partitions)


@frozen_record
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str
    version = SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT

    def __init__(self, group_id: str, member_id: str) -> None:
        _set(self, "group_id", group_id)
        _set(self, "member_id", member_id)


@frozen_record
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's byte: a share member is always STABLE (0)
    assigned_partitions: TopicPartitionsTuple

    def __init__(
        self,
        member_epoch: int,
        previous_member_epoch: int,
        state: int,
        assigned_partitions: TopicPartitionsTuple,
    ) -> None:
        _set(self, "member_epoch", member_epoch)
        _set(self, "previous_member_epoch", previous_member_epoch)
        _set(self, "state", state)
        _set(self, "assigned_partitions", assigned_partitions)


@frozen_record
class ShareGroupStatePartitionMetadataKey:
    group_id: str
    version = SHARE_GROUP_STATE_PARTITION_METADATA

    def __init__(self, group_id: str) -> None:
        _set(self, "group_id", group_id)


@frozen_record
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]

    def __init__(self, topic_id: uuid.UUID, topic_name: str, partitions: tuple[int, ...]) -> None:
        _set(self, "topic_id", topic_id)
        _set(self, "topic_name", topic_name)
        _set(self, "partitions", partitions)


@frozen_record
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str

    def __init__(self, topic_id: uuid.UUID, topic_name: str) -> None:
        _set(self, "topic_id", topic_id)
        _set(self, "topic_name", topic_name)


@frozen_record
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicInfo, ...]

    def __init__(
        self,
        initializing_topics: tuple[TopicPartitionsInfo, ...],
        initialized_topics: tuple[TopicPartitionsInfo, ...],
        deleting_topics: tuple[TopicInfo, ...],
    ) -> None:
        _set(self, "initializing_topics", initializing_topics)
        _set(self, "initialized_topics", initialized_topics)
        _set(self, "deleting_topics", deleting_topics)


ShareRecordKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)
ShareRecordValue = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)
ShareRecord = tuple[ShareRecordKey, ShareRecordValue | None]

SHARE_KEY_TYPES: tuple[type, ...] = (
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupStatePartitionMetadataKey,
)
SHARE_KEYS: dict[int, type] = {k.version: k for k in SHARE_KEY_TYPES}  # type: ignore[attr-defined]


# --- dataclass <-> the schema's dict (serde.py encodes the dicts) -------------------------------------
def tps_out(tps: TopicPartitionsTuple) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": list(ps)} for t, ps in tps]


def tps_in(items: list[dict[str, Any]]) -> TopicPartitionsTuple:
    return tuple(sorted((d["topic_id"], tuple(sorted(d["partitions"]))) for d in items))


def _infos_out(infos: tuple[TopicPartitionsInfo, ...]) -> list[dict[str, Any]]:
    return [{"topic_id": i.topic_id, "topic_name": i.topic_name, "partitions": list(i.partitions)} for i in infos]


def _infos_in(items: list[dict[str, Any]]) -> tuple[TopicPartitionsInfo, ...]:
    return tuple(
        sorted(
            (TopicPartitionsInfo(d["topic_id"], d["topic_name"], tuple(sorted(d["partitions"]))) for d in items),
            key=lambda i: i.topic_id,
        )
    )


VALUE_TO_DICT: dict[type, Any] = {
    ShareGroupMemberMetadataValue: lambda v: {
        "rack_id": v.rack_id,
        "client_id": v.client_id,
        "client_host": v.client_host,
        "subscribed_topic_names": list(v.subscribed_topic_names),
    },
    ShareGroupMetadataValue: lambda v: {"epoch": v.epoch, "metadata_hash": v.metadata_hash},
    ShareGroupTargetAssignmentMetadataValue: lambda v: {"assignment_epoch": v.assignment_epoch},
    ShareGroupTargetAssignmentMemberValue: lambda v: {"topic_partitions": tps_out(v.topic_partitions)},
    ShareGroupCurrentMemberAssignmentValue: lambda v: {
        "member_epoch": v.member_epoch,
        "previous_member_epoch": v.previous_member_epoch,
        "state": v.state,
        "assigned_partitions": tps_out(v.assigned_partitions),
    },
    ShareGroupStatePartitionMetadataValue: lambda v: {
        "initializing_topics": _infos_out(v.initializing_topics),
        "initialized_topics": _infos_out(v.initialized_topics),
        "deleting_topics": [{"topic_id": i.topic_id, "topic_name": i.topic_name} for i in v.deleting_topics],
    },
}
VALUE_TYPE: dict[type, int] = {
    ShareGroupMemberMetadataValue: SHARE_GROUP_MEMBER_METADATA,
    ShareGroupMetadataValue: SHARE_GROUP_METADATA,
    ShareGroupTargetAssignmentMetadataValue: SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    ShareGroupTargetAssignmentMemberValue: SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    ShareGroupCurrentMemberAssignmentValue: SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    ShareGroupStatePartitionMetadataValue: SHARE_GROUP_STATE_PARTITION_METADATA,
}
VALUE_FROM_DICT: dict[int, Any] = {
    SHARE_GROUP_MEMBER_METADATA: lambda d: ShareGroupMemberMetadataValue(
        d["rack_id"], d["client_id"], d["client_host"], tuple(d["subscribed_topic_names"])
    ),
    SHARE_GROUP_METADATA: lambda d: ShareGroupMetadataValue(d["epoch"], d["metadata_hash"]),
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: lambda d: ShareGroupTargetAssignmentMetadataValue(d["assignment_epoch"]),
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: lambda d: ShareGroupTargetAssignmentMemberValue(
        tps_in(d["topic_partitions"])
    ),
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: lambda d: ShareGroupCurrentMemberAssignmentValue(
        d["member_epoch"], d["previous_member_epoch"], d["state"], tps_in(d["assigned_partitions"])
    ),
    SHARE_GROUP_STATE_PARTITION_METADATA: lambda d: ShareGroupStatePartitionMetadataValue(
        _infos_in(d["initializing_topics"]),
        _infos_in(d["initialized_topics"]),
        tuple(
            sorted((TopicInfo(i["topic_id"], i["topic_name"]) for i in d["deleting_topics"]), key=lambda i: i.topic_id)
        ),
    ),
}
