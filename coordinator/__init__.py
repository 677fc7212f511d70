"""groupd's sans-IO consumer-group coordinator (Kafka's classic group protocol and committed offsets)."""

from .config import CoordinatorConfig
from .coordinator import HANDLED_APIS, GroupCoordinator
from .group import ClassicGroup, GroupState, IllegalStateTransition, Member
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from .result import Append, Result
from .routing import Node, PartitionOwnership, java_string_hashcode, partition_for

__all__ = [
    "HANDLED_APIS",
    "Append",
    "ClassicGroup",
    "CoordinatorConfig",
    "GroupCoordinator",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupState",
    "IllegalStateTransition",
    "Member",
    "MemberMetadata",
    "Node",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionOwnership",
    "Record",
    "Result",
    "java_string_hashcode",
    "partition_for",
]
