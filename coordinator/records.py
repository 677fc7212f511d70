"""The ``__consumer_offsets`` record types, as dataclasses.

These mirror Kafka's ``GroupMetadataKey``/``GroupMetadataValue`` and ``OffsetCommitKey``/
``OffsetCommitValue`` message specs (group-coordinator/src/main/resources/common/message/). Byte
serialization lives with the wire codec; the coordinator only produces and replays these objects.
A record is ``(key, value)``; a ``None`` value is a tombstone.
"""

from __future__ import annotations

from dataclasses import field
from typing import NamedTuple

from groupd.protocol.frozen import frozen_record

from .consumer.records import ConsumerRecordKey, ConsumerRecordValue
from .share.records import ShareRecordKey, ShareRecordValue

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


@frozen_record
class GroupMetadataKey:
    group: str

    def __init__(self, group: str) -> None:
        _set(self, "group", group)


@frozen_record
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout: int,
        session_timeout: int,
        subscription: bytes,
        assignment: bytes,
    ) -> None:
        _set(self, "member_id", member_id)
        _set(self, "group_instance_id", group_instance_id)
        _set(self, "client_id", client_id)
        _set(self, "client_host", client_host)
        _set(self, "rebalance_timeout", rebalance_timeout)
        _set(self, "session_timeout", session_timeout)
        _set(self, "subscription", subscription)
        _set(self, "assignment", assignment)


@frozen_record
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)

    def __init__(
        self,
        protocol_type: str,
        generation: int,
        protocol: str | None,
        leader: str | None,
        current_state_timestamp: int,
        members: tuple[MemberMetadata, ...] = (),
    ) -> None:
        _set(self, "protocol_type", protocol_type)
        _set(self, "generation", generation)
        _set(self, "protocol", protocol)
        _set(self, "leader", leader)
        _set(self, "current_state_timestamp", current_state_timestamp)
        _set(self, "members", members)

    @property
    def version(self) -> int:
        # Kafka writes v3 (the first version with group instance ids).
        return 3


# The two offset-commit classes are made once per committed partition (and once per record at
# start-up), and one value per committed partition stays in memory: named tuples, one object of
# 80 bytes each, where a frozen dataclass is an object and its dict (~170 bytes, two objects for
# the cyclic GC to go over). Equality, hashing, repr and immutability are what the dataclasses
# had; unlike them they compare equal to a plain tuple of the same fields (nothing relies on either).
class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int

    @property
    def version(self) -> int:
        return 1


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: none; only value v1 can carry one

    @property
    def version(self) -> int:
        # Kafka writes v1 when an explicit expire timestamp must survive, v3 otherwise.
        return 1 if self.expire_timestamp != -1 else 3


RecordKey = GroupMetadataKey | OffsetCommitKey | ConsumerRecordKey | ShareRecordKey
RecordValue = GroupMetadataValue | OffsetCommitValue | ConsumerRecordValue | ShareRecordValue
Record = tuple[RecordKey, RecordValue | None]
