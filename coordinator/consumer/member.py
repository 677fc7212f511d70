"""A consumer-group member and the reconciliation engine (Kafka's ``modern/consumer/CurrentAssignmentBuilder``).

A member owns ``assigned`` partitions at ``member_epoch``. When the group's target assignment moves to a
newer epoch the member converges to it in steps, each one a new (immutable) member:

- partitions it must give up move to ``pending_revocation`` and the member stays at its epoch in
  UNREVOKED_PARTITIONS until a heartbeat no longer lists them as owned;
- then it moves to the target epoch and is given the target partitions that nobody else still
  holds; partitions still held by a previous owner (assigned or pending revocation) are *unreleased*
  and the member waits for them in UNRELEASED_PARTITIONS;
- with everything in hand it is STABLE at the target epoch.

So a partition is never owned by two members at once: the group's partition-epoch map (one owner per
partition, see ``group.py``) refuses a second owner on replay, as Kafka's ``addPartitionEpochs`` does.

This is Kafka 4.0's form, where an assignment is a set of partitions per topic id (Kafka's trunk has
since added the epoch each partition was assigned at, KIP-1251; not modelled here).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field, replace

from groupd.protocol.frozen import DEFAULT_FACTORY, frozen_record

from .records import ClassicMemberMetadata, TopicPartitionsTuple

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

Partitions = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Partitions = {}

# ConsumerGroupHeartbeat member epochs with a meaning (Kafka's ConsumerGroupHeartbeatRequest constants)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's ``modern/MemberState`` and its on-disk bytes."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class FencedMemberEpoch(Exception):
    """Kafka's ``FencedMemberEpochException``: the member must drop its partitions and rejoin at epoch 0."""


def freeze(parts: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """A partitions map without empty topics (Kafka never keeps an empty set under a topic)."""
    return {t: frozenset(ps) for t, ps in parts.items() if ps}


def to_tuple(parts: Partitions) -> TopicPartitionsTuple:
    return tuple((t, tuple(sorted(parts[t]))) for t in sorted(parts))


def from_tuple(tps: TopicPartitionsTuple) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for t, ps in tps:
        out[t] = out.get(t, frozenset()) | frozenset(ps)
    return freeze(out)


def is_subset(owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None, assigned: Partitions) -> bool:
    """Kafka's ``GroupMetadataManager.isSubset``: every owned partition is in ``assigned``."""
    if owned is None:
        return False
    for topic_id, partitions in owned:
        have = assigned.get(topic_id)
        if have is None or any(p not in have for p in partitions):
            return False
    return True


@frozen_record
class ConsumerGroupMember:
    """Kafka's ``modern/consumer/ConsumerGroupMember``: subscription (from the member-metadata record)
    plus epochs, state and partitions (from the current-assignment record)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # set while the member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a consumer group
    classic: ClassicMemberMetadata | None = None

    def __init__(
        self,
        member_id: str,
        instance_id: str | None = None,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        subscribed_topic_names: tuple[str, ...] = (),
        subscribed_topic_regex: str | None = None,
        rebalance_timeout_ms: int = -1,
        server_assignor: str | None = None,
        member_epoch: int = 0,
        previous_member_epoch: int = -1,
        state: MemberState = MemberState.STABLE,
        assigned: Partitions = DEFAULT_FACTORY,
        pending_revocation: Partitions = DEFAULT_FACTORY,
        classic: ClassicMemberMetadata | None = None,
    ) -> None:
        _set(self, "member_id", member_id)
        _set(self, "instance_id", instance_id)
        _set(self, "rack_id", rack_id)
        _set(self, "client_id", client_id)
        _set(self, "client_host", client_host)
        _set(self, "subscribed_topic_names", subscribed_topic_names)
        _set(self, "subscribed_topic_regex", subscribed_topic_regex)
        _set(self, "rebalance_timeout_ms", rebalance_timeout_ms)
        _set(self, "server_assignor", server_assignor)
        _set(self, "member_epoch", member_epoch)
        _set(self, "previous_member_epoch", previous_member_epoch)
        _set(self, "state", state)
        _set(self, "assigned", {} if assigned is DEFAULT_FACTORY else assigned)
        _set(self, "pending_revocation", {} if pending_revocation is DEFAULT_FACTORY else pending_revocation)
        _set(self, "classic", classic)

    @property
    def uses_classic_protocol(self) -> bool:
        """``ConsumerGroupMember.useClassicProtocol``."""
        return self.classic is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """``ConsumerGroupMember.isReconciledTo``."""
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """``Builder.updateMemberEpoch``: the previous epoch is remembered for a lost response."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)


def subscribed_topic_ids(
    member: ConsumerGroupMember,
    resolved_regexes: Mapping[str, frozenset[str]],
    topic_id_of: Callable[[str], uuid.UUID | None],
) -> set[uuid.UUID]:
    """``CurrentAssignmentBuilder.subscribedTopicIds``: names plus what the member's regex resolved to
    (an unresolved regex counts as matching nothing), restricted to topics that exist."""
    names: set[str] = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names |= resolved_regexes.get(member.subscribed_topic_regex, frozenset())
    out: set[uuid.UUID] = set()
    for n in names:
        tid = topic_id_of(n)
        if tid is not None:
            out.add(tid)
    return out


def _owns_any(owned: list[tuple[uuid.UUID, list[int]]] | None, parts: Partitions) -> bool:
    """``CurrentAssignmentBuilder.ownsRevokedPartitions``: an absent owned list means 'maybe'."""
    if owned is None:
        return True
    for topic_id, partitions in owned:
        pending = parts.get(topic_id)
        if pending and any(p in pending for p in partitions):
            return True
    return False


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    current_partition_epoch: Callable[[uuid.UUID, int], int],
    owned: list[tuple[uuid.UUID, list[int]]] | None,
    subscribed: set[uuid.UUID],
) -> ConsumerGroupMember:
    """``CurrentAssignmentBuilder.build`` (Kafka 4.0): the member's next state, or itself."""
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(
                member, member.member_epoch, target_epoch, target, current_partition_epoch, owned, subscribed
            )
        return member
    if state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(
            member, member.member_epoch, target_epoch, target, current_partition_epoch, owned, subscribed
        )
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(
            member, member.member_epoch, target_epoch, target, current_partition_epoch, owned, subscribed
        )
    # UNKNOWN: written by a newer coordinator; Kafka fences unless the member already dropped everything.
    if owned is None or owned:
        raise FencedMemberEpoch("The consumer group member is in a unknown state.")
    return _next_assignment(member, target_epoch, target_epoch, target, current_partition_epoch, owned, subscribed)


def _next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Partitions,
    current_partition_epoch: Callable[[uuid.UUID, int], int],
    owned: list[tuple[uuid.UUID, list[int]]] | None,
    subscribed: set[uuid.UUID],
) -> ConsumerGroupMember:
    """``CurrentAssignmentBuilder.computeNextAssignment``."""
    has_unreleased = False
    new_assigned: dict[uuid.UUID, frozenset[int]] = {}
    new_pending_revocation: dict[uuid.UUID, frozenset[int]] = {}
    new_pending_assignment: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id in set(target) | set(member.assigned):
        # a topic the member no longer subscribes to has an empty target, whatever the assignor said
        tgt = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, frozenset())
        assigned = current & tgt
        revoking = current - assigned
        pending = tgt - assigned
        own_revoking = member.pending_revocation.get(topic_id, frozenset())
        # unreleased: still held by someone else (a partition this member itself is revoking is not)
        unreleased = {p for p in pending if current_partition_epoch(topic_id, p) != -1 and p not in own_revoking}
        if unreleased:
            has_unreleased = True
            pending = pending - unreleased
        if assigned:
            new_assigned[topic_id] = assigned
        if revoking:
            new_pending_revocation[topic_id] = revoking
        if pending:
            new_pending_assignment[topic_id] = pending
    if new_pending_revocation and _owns_any(owned, new_pending_revocation):
        # stay at the current epoch until the client confirms the revocation
        return replace(
            member.with_epoch(member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=new_assigned,
            pending_revocation=new_pending_revocation,
        )
    for topic_id, ps in new_pending_assignment.items():
        new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | ps
    return replace(
        member.with_epoch(target_epoch),
        state=MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE,
        assigned=new_assigned,
        pending_revocation={},
    )
