"""A KIP-848 consumer group's state and its fold over records (Kafka's ``modern/consumer/ConsumerGroup``
and the consumer-group half of ``GroupMetadataManager.replay``).

Nothing here decides anything: ``ConsumerGroups.replay`` applies one record, the only way state
changes, both for records the manager just produced and for records loaded from the log.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import field, replace

from groupd.protocol.frozen import DEFAULT_FACTORY, frozen_record, mutable_record

from .. import errors
from .member import LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroupMember, MemberState, Partitions, from_tuple
from .records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecord,
    IllegalRecord,
    TopicMetadata,
)

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


class ConsumerGroupState(enum.Enum):
    """``ConsumerGroup.ConsumerGroupState`` (the names DescribeGroups/ListGroups give)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@frozen_record
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int

    def __init__(self, topics: frozenset[str], version: int, timestamp: int) -> None:
        _set(self, "topics", topics)
        _set(self, "version", version)
        _set(self, "timestamp", timestamp)


@mutable_record
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target_epoch: int = 0
    target: dict[str, Partitions] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    resolved_regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    # (topic id, partition) -> epoch of the member that holds it (assigned or pending revocation)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # Kafka's ConsumerGroup tracks whether the group's metadata must be refreshed; not persisted
    metadata_refresh_needed: bool = False
    # how many members subscribe with each regex (ConsumerGroup.subscribedRegularExpressions), derived
    regex_counts: dict[str, int] = field(default_factory=dict)

    def __init__(
        self,
        group_id: str,
        group_epoch: int = 0,
        members: dict[str, ConsumerGroupMember] = DEFAULT_FACTORY,
        static_members: dict[str, str] = DEFAULT_FACTORY,
        target_epoch: int = 0,
        target: dict[str, Partitions] = DEFAULT_FACTORY,
        subscription_metadata: dict[str, TopicMetadata] = DEFAULT_FACTORY,
        resolved_regexes: dict[str, ResolvedRegex] = DEFAULT_FACTORY,
        partition_epochs: dict[tuple[uuid.UUID, int], int] = DEFAULT_FACTORY,
        metadata_refresh_needed: bool = False,
        regex_counts: dict[str, int] = DEFAULT_FACTORY,
    ) -> None:
        self.group_id = group_id
        self.group_epoch = group_epoch
        self.members = {} if members is DEFAULT_FACTORY else members
        self.static_members = {} if static_members is DEFAULT_FACTORY else static_members
        self.target_epoch = target_epoch
        self.target = {} if target is DEFAULT_FACTORY else target
        self.subscription_metadata = {} if subscription_metadata is DEFAULT_FACTORY else subscription_metadata
        self.resolved_regexes = {} if resolved_regexes is DEFAULT_FACTORY else resolved_regexes
        self.partition_epochs = {} if partition_epochs is DEFAULT_FACTORY else partition_epochs
        self.metadata_refresh_needed = metadata_refresh_needed
        self.regex_counts = {} if regex_counts is DEFAULT_FACTORY else regex_counts

    @property
    def state(self) -> ConsumerGroupState:
        """``ConsumerGroup.maybeUpdateGroupState``, computed rather than stored."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.target_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_reconciled_to(self.target_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def copy(self) -> ConsumerGroup:
        """A copy to roll back to (members and assignments are immutable, so the containers suffice)."""
        return replace(
            self,
            members=dict(self.members),
            static_members=dict(self.static_members),
            target=dict(self.target),
            subscription_metadata=dict(self.subscription_metadata),
            resolved_regexes=dict(self.resolved_regexes),
            partition_epochs=dict(self.partition_epochs),
            regex_counts=dict(self.regex_counts),
        )

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def persisted(self) -> tuple:
        """What the records say of this group (for 'recovered == before' checks)."""
        return (
            self.group_epoch,
            self.target_epoch,
            dict(sorted(self.members.items())),
            {m: dict(t) for m, t in sorted(self.target.items())},
            dict(sorted(self.subscription_metadata.items())),
            dict(sorted(self.resolved_regexes.items())),
            dict(sorted(self.partition_epochs.items())),
            dict(sorted(self.static_members.items())),
        )

    # -- partition epochs: ConsumerGroup.addPartitionEpochs / removePartitionEpochs -----------------

    def _remove_epochs(self, parts: Partitions, epoch: int) -> None:
        for t, ps in parts.items():
            for p in ps:
                if self.partition_epochs.get((t, p)) != epoch:
                    raise IllegalRecord(f"cannot remove the epoch {epoch} of {t}-{p}: it is not owned at it")
                del self.partition_epochs[(t, p)]

    def _add_epochs(self, parts: Partitions, epoch: int) -> None:
        for t, ps in parts.items():
            for p in ps:
                prev = self.partition_epochs.get((t, p))
                if prev is not None:
                    raise IllegalRecord(f"cannot set the epoch of {t}-{p} to {epoch}: still owned at epoch {prev}")
                self.partition_epochs[(t, p)] = epoch

    def _count_regex(self, m: ConsumerGroupMember | None, delta: int) -> None:
        rx = m.subscribed_topic_regex if m is not None else None
        if rx:
            n = self.regex_counts.get(rx, 0) + delta
            if n:
                self.regex_counts[rx] = n
            else:
                self.regex_counts.pop(rx, None)

    def update_member(self, new: ConsumerGroupMember) -> None:
        """``ConsumerGroup.updateMember``: keeps the static index and partition epochs in step."""
        old = self.members.get(new.member_id)
        # refuse before changing anything, so that a refused record leaves the group as it was
        for parts in (new.assigned, new.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    if (t, p) in self.partition_epochs and not (
                        old is not None and (p in old.assigned.get(t, ()) or p in old.pending_revocation.get(t, ()))
                    ):
                        prev = self.partition_epochs[(t, p)]
                        raise IllegalRecord(
                            f"cannot set the epoch of {t}-{p} to {new.member_epoch}: still owned at epoch {prev}"
                        )
        if old is not None:
            self._remove_epochs(old.assigned, old.member_epoch)
            self._remove_epochs(old.pending_revocation, old.member_epoch)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self._add_epochs(new.assigned, new.member_epoch)
        self._add_epochs(new.pending_revocation, new.member_epoch)
        self._count_regex(old, -1)
        self._count_regex(new, 1)
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._count_regex(old, -1)
        self._remove_epochs(old.assigned, old.member_epoch)
        self._remove_epochs(old.pending_revocation, old.member_epoch)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def validate_offset_commit(
        self,
        member_id: str,
        member_epoch: int,
        api_version: int,
        *,
        transactional: bool = False,
        instance_id: str | None = None,
    ) -> int:
        """``ConsumerGroup.validateOffsetCommit``: without an epoch only an empty group takes commits
        (admin tools, consumers managing their own partitions); a transactional commit that names
        no member at all (generation -1, no member id, no instance id: TxnOffsetCommit v0-2, or a
        producer given only the group id) is taken as it is, since TxnOffsetCommit does not require
        those fields; otherwise the member must exist, speak OffsetCommit v9+ (KIP-848 members; any
        TxnOffsetCommit version), and commit at its current epoch (STALE_MEMBER_EPOCH, which
        ``validateTransactionalOffsetCommit`` answers as ILLEGAL_GENERATION). The error code, NONE
        when the commit may go ahead."""
        if member_epoch < 0 and not self.members:
            return errors.NONE
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return errors.NONE
        member = self.members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        if transactional or member.uses_classic_protocol:
            # a transactional commit, and a classic member's at any version, carry the generation
            # (= the member epoch): ILLEGAL_GENERATION when stale
            return errors.ILLEGAL_GENERATION if member_epoch != member.member_epoch else errors.NONE
        if api_version < 9:
            return errors.UNSUPPORTED_VERSION
        return errors.STALE_MEMBER_EPOCH if member_epoch != member.member_epoch else errors.NONE


class ConsumerGroups:
    """All consumer groups of one coordinator, and ``replay``."""

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroup] = {}

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def _group(self, group_id: str) -> ConsumerGroup:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = ConsumerGroup(group_id)
        return g

    def tombstones(self, group_id: str) -> list[ConsumerRecord]:
        """``ConsumerGroup.createGroupTombstoneRecords``: the records that delete the group, in an order
        replay accepts (members first, the group epoch last)."""
        g = self.groups[group_id]
        out: list[ConsumerRecord] = []
        for mid in sorted(g.members):
            out += [
                (ConsumerGroupCurrentMemberAssignmentKey(group_id, mid), None),
                (ConsumerGroupTargetAssignmentMemberKey(group_id, mid), None),
                (ConsumerGroupMemberMetadataKey(group_id, mid), None),
            ]
        out += [(ConsumerGroupRegularExpressionKey(group_id, rx), None) for rx in sorted(g.resolved_regexes)]
        out += [
            (ConsumerGroupTargetAssignmentMetadataKey(group_id), None),
            (ConsumerGroupPartitionMetadataKey(group_id), None),
            (ConsumerGroupMetadataKey(group_id), None),
        ]
        return out

    def replay(self, record: ConsumerRecord) -> None:
        """``GroupMetadataManager.replay`` for the consumer-group record types."""
        key, value = record
        gid = key.group_id
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is None:
                g = self.groups.get(gid)
                if g is not None and g.members:
                    raise IllegalRecord(f"group {gid} deleted while it still has members")
                self.groups.pop(gid, None)
                return
            assert isinstance(value, ConsumerGroupMetadataValue)
            self._group(gid).group_epoch = value.epoch
            return
        if isinstance(key, ConsumerGroupPartitionMetadataKey):
            g = self._group(gid) if value is not None else self.groups.get(gid)
            if g is None:
                return
            if value is None:
                g.subscription_metadata = {}
            else:
                assert isinstance(value, ConsumerGroupPartitionMetadataValue)
                g.subscription_metadata = {t.topic_name: t for t in value.topics}
            return
        if isinstance(key, ConsumerGroupMemberMetadataKey):
            g = self._group(gid) if value is not None else self.groups.get(gid)
            if g is None:
                return
            old = g.members.get(key.member_id)
            if value is None:
                if old is not None and old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                    raise IllegalRecord(
                        f"member {key.member_id} of {gid} deleted before its current assignment tombstone"
                    )
                g.remove_member(key.member_id)
                return
            assert isinstance(value, ConsumerGroupMemberMetadataValue)
            base = old if old is not None else ConsumerGroupMember(key.member_id)
            g.update_member(
                replace(
                    base,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=tuple(value.subscribed_topic_names),
                    subscribed_topic_regex=value.subscribed_topic_regex,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    server_assignor=value.server_assignor,
                    classic=value.classic_member_metadata,
                )
            )
            return
        if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            g = self._group(gid) if value is not None else self.groups.get(gid)
            if g is None:
                return
            if value is None:
                g.target_epoch = 0
            else:
                assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
                g.target_epoch = value.assignment_epoch
            return
        if isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            g = self._group(gid) if value is not None else self.groups.get(gid)
            if g is None:
                return
            if value is None:
                g.target.pop(key.member_id, None)
            else:
                assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                g.target[key.member_id] = from_tuple(value.topic_partitions)
            return
        if isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            g = self._group(gid) if value is not None else self.groups.get(gid)
            if g is None:
                return
            old = g.members.get(key.member_id)
            if value is None:
                if old is not None:
                    # Kafka: the member stays, at epoch -1 with nothing, until its metadata tombstone
                    g.update_member(
                        replace(
                            old,
                            member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                            previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                            state=MemberState.STABLE,
                            assigned={},
                            pending_revocation={},
                        )
                    )
                return
            assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
            base = old if old is not None else ConsumerGroupMember(key.member_id)
            g.update_member(
                replace(
                    base,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=MemberState.of(value.state),
                    assigned=from_tuple(value.assigned_partitions),
                    pending_revocation=from_tuple(value.partitions_pending_revocation),
                )
            )
            return
        if isinstance(key, ConsumerGroupRegularExpressionKey):
            g = self._group(gid) if value is not None else self.groups.get(gid)
            if g is None:
                return
            if value is None:
                g.resolved_regexes.pop(key.regular_expression, None)
            else:
                assert isinstance(value, ConsumerGroupRegularExpressionValue)
                g.resolved_regexes[key.regular_expression] = ResolvedRegex(
                    frozenset(value.topics), value.version, value.timestamp
                )
            return
        raise TypeError(f"not a consumer-group record: {key!r}")
