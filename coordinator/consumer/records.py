"""The KIP-848 consumer-group records of ``__consumer_offsets``, as dataclasses.

They mirror Kafka 4's specs in ``group-coordinator/src/main/resources/common/message/``. The int16
that precedes a key on disk is the record type (the spec's ``apiKey``: Kafka's
``CoordinatorRecordType``), and every value here is version 0, flexible:

| type | key (fields) | value |
|---|---|---|
| 3 | ConsumerGroupMetadataKey (group) | ConsumerGroupMetadataValue: group epoch |
| 4 | ConsumerGroupPartitionMetadataKey (group) | ConsumerGroupPartitionMetadataValue: subscribed topics' metadata |
| 5 | ConsumerGroupMemberMetadataKey (group, member) | ConsumerGroupMemberMetadataValue: a member's subscription |
| 6 | ConsumerGroupTargetAssignmentMetadataKey (group) | ConsumerGroupTargetAssignmentMetadataValue: assignment epoch |
| 7 | ConsumerGroupTargetAssignmentMemberKey (group, member) | ConsumerGroupTargetAssignmentMemberValue: a member's target |
| 8 | ConsumerGroupCurrentMemberAssignmentKey (group, member) | ConsumerGroupCurrentMemberAssignmentValue: epochs, state, owned and pending-revocation partitions |
| 16 | ConsumerGroupRegularExpressionKey (group, regex) | ConsumerGroupRegularExpressionValue: the topics it resolved to |

A ``None`` value is a tombstone. Assignments are tuples of ``(topic id, sorted partitions)`` sorted by
topic id so that equal assignments are equal records.
"""

from __future__ import annotations

import uuid

from groupd.protocol.frozen import frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

TopicPartitionsTuple = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16


@frozen_record
class ConsumerGroupMetadataKey:
    group_id: str
    version = CONSUMER_GROUP_METADATA

    def __init__(self, group_id: str) -> None:
        _set(self, "group_id", group_id)


@frozen_record
class ConsumerGroupMetadataValue:
    epoch: int
    # tagged (Kafka 4.1, KIP-1101); groupd writes Kafka 4.0's form (0, absent) and keeps what it reads
    metadata_hash: int = 0

    def __init__(self, epoch: int, metadata_hash: int = 0) -> None:
        _set(self, "epoch", epoch)
        _set(self, "metadata_hash", metadata_hash)


@frozen_record
class ConsumerGroupPartitionMetadataKey:
    group_id: str
    version = CONSUMER_GROUP_PARTITION_METADATA

    def __init__(self, group_id: str) -> None:
        _set(self, "group_id", group_id)


@frozen_record
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    # (partition, racks) pairs; groupd's single node has no racks, so it writes none
    partition_racks: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def __init__(
        self,
        topic_id: uuid.UUID,
        topic_name: str,
        num_partitions: int,
        partition_racks: tuple[tuple[int, tuple[str, ...]], ...] = (),
    ) -> None:
        _set(self, "topic_id", topic_id)
        _set(self, "topic_name", topic_name)
        _set(self, "num_partitions", num_partitions)
        _set(self, "partition_racks", partition_racks)


@frozen_record
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]

    def __init__(self, topics: tuple[TopicMetadata, ...]) -> None:
        _set(self, "topics", topics)


@frozen_record
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str
    version = CONSUMER_GROUP_MEMBER_METADATA

    def __init__(self, group_id: str, member_id: str) -> None:
        _set(self, "group_id", group_id)
        _set(self, "member_id", member_id)


@frozen_record
class ClassicProtocol:
    name: str
    metadata: bytes

    def __init__(self, name: str, metadata: bytes) -> None:
        _set(self, "name", name)
        _set(self, "metadata", metadata)


@frozen_record
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group brought in its JoinGroup
    (KIP-848's upgrade path): its session timeout and its (name, subscription) protocols."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]

    def __init__(self, session_timeout_ms: int, supported_protocols: tuple[ClassicProtocol, ...]) -> None:
        _set(self, "session_timeout_ms", session_timeout_ms)
        _set(self, "supported_protocols", supported_protocols)


@frozen_record
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # tagged: set only for a member speaking the classic protocol in a consumer group
    classic_member_metadata: ClassicMemberMetadata | None = None

    def __init__(
        self,
        instance_id: str | None,
        rack_id: str | None,
        client_id: str,
        client_host: str,
        subscribed_topic_names: tuple[str, ...],
        subscribed_topic_regex: str | None,
        rebalance_timeout_ms: int,
        server_assignor: str | None,
        classic_member_metadata: ClassicMemberMetadata | None = None,
    ) -> None:
        _set(self, "instance_id", instance_id)
        _set(self, "rack_id", rack_id)
        _set(self, "client_id", client_id)
        _set(self, "client_host", client_host)
        _set(self, "subscribed_topic_names", subscribed_topic_names)
        _set(self, "subscribed_topic_regex", subscribed_topic_regex)
        _set(self, "rebalance_timeout_ms", rebalance_timeout_ms)
        _set(self, "server_assignor", server_assignor)
        _set(self, "classic_member_metadata", classic_member_metadata)


@frozen_record
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str
    version = CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA

    def __init__(self, group_id: str) -> None:
        _set(self, "group_id", group_id)


@frozen_record
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int

    def __init__(self, assignment_epoch: int) -> None:
        _set(self, "assignment_epoch", assignment_epoch)


@frozen_record
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str
    version = CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER

    def __init__(self, group_id: str, member_id: str) -> None:
        _set(self, "group_id", group_id)
        _set(self, "member_id", member_id)


@frozen_record
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitionsTuple

    def __init__(self, topic_partitions: TopicPartitionsTuple) -> None:
        _set(self, "topic_partitions", topic_partitions)


@frozen_record
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str
    version = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT

    def __init__(self, group_id: str, member_id: str) -> None:
        _set(self, "group_id", group_id)
        _set(self, "member_id", member_id)


@frozen_record
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's byte
    assigned_partitions: TopicPartitionsTuple
    partitions_pending_revocation: TopicPartitionsTuple

    def __init__(
        self,
        member_epoch: int,
        previous_member_epoch: int,
        state: int,
        assigned_partitions: TopicPartitionsTuple,
        partitions_pending_revocation: TopicPartitionsTuple,
    ) -> None:
        _set(self, "member_epoch", member_epoch)
        _set(self, "previous_member_epoch", previous_member_epoch)
        _set(self, "state", state)
        _set(self, "assigned_partitions", assigned_partitions)
        _set(self, "partitions_pending_revocation", partitions_pending_revocation)


@frozen_record
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str
    version = CONSUMER_GROUP_REGULAR_EXPRESSION

    def __init__(self, group_id: str, regular_expression: str) -> None:
        _set(self, "group_id", group_id)
        _set(self, "regular_expression", regular_expression)


@frozen_record
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int  # the topics image version it was resolved against
    timestamp: int

    def __init__(self, topics: tuple[str, ...], version: int, timestamp: int) -> None:
        _set(self, "topics", topics)
        _set(self, "version", version)
        _set(self, "timestamp", timestamp)


ConsumerRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)
ConsumerRecord = tuple[ConsumerRecordKey, ConsumerRecordValue | None]

CONSUMER_KEY_TYPES: tuple[type, ...] = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)


class IllegalRecord(Exception):
    """A record that cannot follow the state it is applied to (Kafka's IllegalStateException in replay)."""
