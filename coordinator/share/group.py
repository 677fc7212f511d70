"""A share group's state and its fold over records (Kafka 4.2's ``modern/share/ShareGroup``,
``ShareGroupMember`` and the share half of ``GroupMetadataManager.replay``).

Nothing here decides anything: ``ShareGroups.replay`` applies one record, the only way the persisted
state changes, both for the records the manager has just produced and for the records a load reads.

A share group has two states (``ShareGroup.maybeUpdateGroupState``): Empty without members, Stable
with. Its members never revoke: a share partition may be read by several members at once, so a
member takes its target assignment as soon as the target epoch moves (``ShareGroupAssignmentBuilder``)
and its state byte is always STABLE.
"""

from __future__ import annotations

import copy
import enum
import uuid
from dataclasses import field

from groupd.protocol.frozen import DEFAULT_FACTORY, frozen_record, mutable_record

from .records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareRecord,
    TopicPartitionsTuple,
)

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

PROTOCOL_TYPE = "share"  # ShareGroup.PROTOCOL_TYPE, what ListGroups reports
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
MEMBER_STATE_STABLE = 0  # MemberState.STABLE's byte

Partitions = dict[uuid.UUID, frozenset[int]]


def to_tuple(parts: Partitions) -> TopicPartitionsTuple:
    return tuple(sorted((t, tuple(sorted(ps))) for t, ps in parts.items() if ps))


def from_tuple(tps: TopicPartitionsTuple) -> Partitions:
    return {t: frozenset(ps) for t, ps in tps if ps}


class ShareGroupState(enum.Enum):
    """``ShareGroup.ShareGroupState``; ListGroups filters by the lower-cased name."""

    EMPTY = "Empty"
    STABLE = "Stable"


class IllegalShareRecord(Exception):
    """A record that cannot follow the state it is applied to (Kafka's IllegalStateException in replay)."""


@frozen_record
class ShareGroupMember:
    """``ShareGroupMember``: its subscription (names), its epochs and its assigned partitions."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Partitions = field(default_factory=dict)

    def __init__(
        self,
        member_id: str,
        member_epoch: int = 0,
        previous_member_epoch: int = 0,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        subscribed_topic_names: tuple[str, ...] = (),
        assigned: Partitions = DEFAULT_FACTORY,
    ) -> None:
        _set(self, "member_id", member_id)
        _set(self, "member_epoch", member_epoch)
        _set(self, "previous_member_epoch", previous_member_epoch)
        _set(self, "rack_id", rack_id)
        _set(self, "client_id", client_id)
        _set(self, "client_host", client_host)
        _set(self, "subscribed_topic_names", subscribed_topic_names)
        _set(self, "assigned", {} if assigned is DEFAULT_FACTORY else assigned)

    def metadata_value(self) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(
            self.rack_id, self.client_id, self.client_host, tuple(self.subscribed_topic_names)
        )

    def assignment_value(self) -> ShareGroupCurrentMemberAssignmentValue:
        return ShareGroupCurrentMemberAssignmentValue(
            self.member_epoch, self.previous_member_epoch, MEMBER_STATE_STABLE, to_tuple(self.assigned)
        )


@frozen_record
class InitValue:
    """``ShareGroup.InitMapValue``: a topic's share partitions in one state, and when it got there
    (the time of replay, as Kafka's: not persisted)."""

    name: str
    partitions: frozenset[int]
    timestamp: int

    def __init__(self, name: str, partitions: frozenset[int], timestamp: int) -> None:
        _set(self, "name", name)
        _set(self, "partitions", partitions)
        _set(self, "timestamp", timestamp)


@mutable_record
class StatePartitionMetadata:
    """``ShareGroupStatePartitionMetadataInfo``: which share partitions are being initialized in the
    share-state persister, which are initialized (only those are assigned), which are being deleted."""

    initializing: dict[uuid.UUID, InitValue] = field(default_factory=dict)
    initialized: dict[uuid.UUID, InitValue] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)

    def __init__(
        self,
        initializing: dict[uuid.UUID, InitValue] = DEFAULT_FACTORY,
        initialized: dict[uuid.UUID, InitValue] = DEFAULT_FACTORY,
        deleting: dict[uuid.UUID, str] = DEFAULT_FACTORY,
    ) -> None:
        self.initializing = {} if initializing is DEFAULT_FACTORY else initializing
        self.initialized = {} if initialized is DEFAULT_FACTORY else initialized
        self.deleting = {} if deleting is DEFAULT_FACTORY else deleting


@mutable_record
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_epoch: int = 0
    target: dict[str, Partitions] = field(default_factory=dict)
    state_metadata: StatePartitionMetadata | None = None
    # soft state (not persisted): when the subscribed topics' metadata is next compared
    # (``setMetadataRefreshDeadline``); 0: at the next heartbeat
    metadata_refresh_deadline: int = 0
    # derived by replay, so that a steady heartbeat costs O(its own topics), not O(members):
    # how many members subscribe to each name (``ShareGroup.subscribedTopicNames``), and the union
    # of the target assignment (None: to be computed again)
    subscribed_counts: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    target_union: dict[uuid.UUID, frozenset[int]] | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        group_id: str,
        group_epoch: int = 0,
        metadata_hash: int = 0,
        members: dict[str, ShareGroupMember] = DEFAULT_FACTORY,
        target_epoch: int = 0,
        target: dict[str, Partitions] = DEFAULT_FACTORY,
        state_metadata: StatePartitionMetadata | None = None,
        metadata_refresh_deadline: int = 0,
        subscribed_counts: dict[str, int] = DEFAULT_FACTORY,
        target_union: dict[uuid.UUID, frozenset[int]] | None = None,
    ) -> None:
        self.group_id = group_id
        self.group_epoch = group_epoch
        self.metadata_hash = metadata_hash
        self.members = {} if members is DEFAULT_FACTORY else members
        self.target_epoch = target_epoch
        self.target = {} if target is DEFAULT_FACTORY else target
        self.state_metadata = state_metadata
        self.metadata_refresh_deadline = metadata_refresh_deadline
        self.subscribed_counts = {} if subscribed_counts is DEFAULT_FACTORY else subscribed_counts
        self.target_union = target_union

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> dict[str, int]:
        """``subscribedTopicNames``: each topic name some member subscribes to, with how many do."""
        return dict(self.subscribed_counts)

    def assigned_union(self) -> dict[uuid.UUID, frozenset[int]]:
        """Every partition some member's target holds."""
        if self.target_union is None:
            union: dict[uuid.UUID, set[int]] = {}
            for parts in self.target.values():
                for t, ps in parts.items():
                    union.setdefault(t, set()).update(ps)
            self.target_union = {t: frozenset(ps) for t, ps in union.items()}
        return self.target_union

    def _count(self, names: tuple[str, ...], delta: int) -> None:
        for n in set(names):
            left = self.subscribed_counts.get(n, 0) + delta
            if left > 0:
                self.subscribed_counts[n] = left
            else:
                self.subscribed_counts.pop(n, None)

    def initialized_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        """``initializedShareGroupPartitions``."""
        if self.state_metadata is None:
            return {}
        return {t: v.partitions for t, v in self.state_metadata.initialized.items()}

    def copy(self) -> ShareGroup:
        return copy.deepcopy(self)


class ShareGroups:
    """Every share group of the shard, changed only by ``replay``. ``now_ms`` is the time replay
    stamps on the share partitions' initialization states (Kafka's ``time.milliseconds()`` there)."""

    def __init__(self) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self.now_ms = 0

    def get(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def _group(self, group_id: str, create: bool) -> ShareGroup | None:
        g = self.groups.get(group_id)
        if g is None and create:
            g = self.groups[group_id] = ShareGroup(group_id)
        return g

    def replay(self, record: ShareRecord) -> None:
        key, value = record
        gid = key.group_id
        if isinstance(key, ShareGroupMemberMetadataKey):
            g = self._group(gid, value is not None)
            if g is None:
                return
            old = g.members.get(key.member_id)
            if value is not None:
                assert isinstance(value, ShareGroupMemberMetadataValue)
                base = old or ShareGroupMember(key.member_id)
                g._count(base.subscribed_topic_names, -1)
                g._count(tuple(value.subscribed_topic_names), 1)
                g.members[key.member_id] = ShareGroupMember(
                    key.member_id,
                    base.member_epoch,
                    base.previous_member_epoch,
                    value.rack_id,
                    value.client_id,
                    value.client_host,
                    tuple(value.subscribed_topic_names),
                    base.assigned,
                )
            elif old is not None:
                if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                    raise IllegalShareRecord(
                        f"Received a tombstone record to delete member {key.member_id} with invalid leave group epoch."
                    )
                if key.member_id in g.target:
                    raise IllegalShareRecord(
                        f"Received a tombstone record to delete member {key.member_id} "
                        "but member exists in target assignment."
                    )
                g._count(old.subscribed_topic_names, -1)
                del g.members[key.member_id]
        elif isinstance(key, ShareGroupMetadataKey):
            if value is not None:
                assert isinstance(value, ShareGroupMetadataValue)
                g = self._group(gid, True)
                assert g is not None
                g.group_epoch, g.metadata_hash = value.epoch, value.metadata_hash
            else:
                g = self.groups.get(gid)
                if g is None:
                    return
                if g.members:
                    raise IllegalShareRecord(
                        f"Received a tombstone record to delete group {gid} but the group still has "
                        f"{len(g.members)} members."
                    )
                del self.groups[gid]
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            if value is not None:
                assert isinstance(value, ShareGroupTargetAssignmentMetadataValue)
                g = self._group(gid, True)
                assert g is not None
                g.target_epoch = value.assignment_epoch
            else:
                g = self.groups.get(gid)
                if g is not None:
                    g.target_epoch = -1
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            g = self._group(gid, value is not None)
            if g is None:
                return
            if value is not None:
                assert isinstance(value, ShareGroupTargetAssignmentMemberValue)
                g.target[key.member_id] = from_tuple(value.topic_partitions)
            else:
                g.target.pop(key.member_id, None)
            g.target_union = None
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
            g = self._group(gid, value is not None)
            if g is None:
                return
            old = g.members.get(key.member_id)
            if value is not None:
                assert isinstance(value, ShareGroupCurrentMemberAssignmentValue)
                base = old or ShareGroupMember(key.member_id)
                g.members[key.member_id] = ShareGroupMember(
                    key.member_id,
                    value.member_epoch,
                    value.previous_member_epoch,
                    base.rack_id,
                    base.client_id,
                    base.client_host,
                    base.subscribed_topic_names,
                    from_tuple(value.assigned_partitions),
                )
            elif old is not None:
                # the member is leaving: its epoch says so until its metadata tombstone removes it
                g.members[key.member_id] = ShareGroupMember(
                    key.member_id,
                    LEAVE_GROUP_MEMBER_EPOCH,
                    LEAVE_GROUP_MEMBER_EPOCH,
                    old.rack_id,
                    old.client_id,
                    old.client_host,
                    old.subscribed_topic_names,
                    {},
                )
        elif isinstance(key, ShareGroupStatePartitionMetadataKey):
            g = self._group(gid, value is not None)
            if g is None:
                return
            if value is None:
                g.state_metadata = None
            else:
                assert isinstance(value, ShareGroupStatePartitionMetadataValue)
                now = self.now_ms
                g.state_metadata = StatePartitionMetadata(
                    {
                        i.topic_id: InitValue(i.topic_name, frozenset(i.partitions), now)
                        for i in value.initializing_topics
                    },
                    {
                        i.topic_id: InitValue(i.topic_name, frozenset(i.partitions), now)
                        for i in value.initialized_topics
                    },
                    {i.topic_id: i.topic_name for i in value.deleting_topics},
                )
        else:
            raise TypeError(f"not a share-group record key: {key!r}")

    def tombstones(self, group_id: str) -> list[ShareRecord]:
        """``ShareGroup.createGroupTombstoneRecords``: what deletes an empty group, in Kafka's order."""
        g = self.groups.get(group_id)
        if g is None:
            return []
        out: list[ShareRecord] = []
        out += [(ShareGroupCurrentMemberAssignmentKey(group_id, mid), None) for mid in g.members]
        out += [(ShareGroupTargetAssignmentMemberKey(group_id, mid), None) for mid in g.members]
        out.append((ShareGroupTargetAssignmentMetadataKey(group_id), None))
        out += [(ShareGroupMemberMetadataKey(group_id, mid), None) for mid in g.members]
        out.append((ShareGroupStatePartitionMetadataKey(group_id), None))
        out.append((ShareGroupMetadataKey(group_id), None))
        return out
