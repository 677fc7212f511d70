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
from dataclasses import dataclass

TopicPartitionsTuple = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16


@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group_id: str
    version = CONSUMER_GROUP_METADATA


@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int
    # tagged (Kafka 4.1, KIP-1101); groupd writes Kafka 4.0's form (0, absent) and keeps what it reads
    metadata_hash: int = 0


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str
    version = CONSUMER_GROUP_PARTITION_METADATA


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    # (partition, racks) pairs; groupd's single node has no racks, so it writes none
    partition_racks: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str
    version = CONSUMER_GROUP_MEMBER_METADATA


@dataclass(frozen=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group brought in its JoinGroup
    (KIP-848's upgrade path): its session timeout and its (name, subscription) protocols."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str
    version = CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str
    version = CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitionsTuple


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str
    version = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's byte
    assigned_partitions: TopicPartitionsTuple
    partitions_pending_revocation: TopicPartitionsTuple


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str
    version = CONSUMER_GROUP_REGULAR_EXPRESSION


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int  # the topics image version it was resolved against
    timestamp: int


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
