"""The ``__consumer_offsets`` record types, as dataclasses.

These mirror Kafka's ``GroupMetadataKey``/``GroupMetadataValue`` and ``OffsetCommitKey``/
``OffsetCommitValue`` message specs (group-coordinator/src/main/resources/common/message/). Byte
serialization lives with the wire codec; the coordinator only produces and replays these objects.
A record is ``(key, value)``; a ``None`` value is a tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .consumer.records import ConsumerRecordKey, ConsumerRecordValue
from .share.records import ShareRecordKey, ShareRecordValue


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)

    @property
    def version(self) -> int:
        # Kafka writes v3 (the first version with group instance ids).
        return 3


# The two offset-commit classes are made once per committed partition (and once per record at
# start-up), so they get a hand-written __init__: the generated one of a frozen dataclass goes
# through object.__setattr__ per field and cost ~1.2 us for a value, ~0.5 us once written into the
# instance dict directly. Everything else (eq, hash, repr, frozenness, fields()) stays dataclass.
@dataclass(frozen=True, init=False)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def __init__(self, group: str, topic: str, partition: int) -> None:
        d = self.__dict__
        d["group"] = group
        d["topic"] = topic
        d["partition"] = partition

    @property
    def version(self) -> int:
        return 1


@dataclass(frozen=True, init=False)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: none; only value v1 can carry one

    def __init__(
        self,
        offset: int,
        leader_epoch: int = -1,
        metadata: str = "",
        commit_timestamp: int = -1,
        expire_timestamp: int = -1,
    ) -> None:
        d = self.__dict__
        d["offset"] = offset
        d["leader_epoch"] = leader_epoch
        d["metadata"] = metadata
        d["commit_timestamp"] = commit_timestamp
        d["expire_timestamp"] = expire_timestamp

    @property
    def version(self) -> int:
        # Kafka writes v1 when an explicit expire timestamp must survive, v3 otherwise.
        return 1 if self.expire_timestamp != -1 else 3


RecordKey = GroupMetadataKey | OffsetCommitKey | ConsumerRecordKey | ShareRecordKey
RecordValue = GroupMetadataValue | OffsetCommitValue | ConsumerRecordValue | ShareRecordValue
Record = tuple[RecordKey, RecordValue | None]
