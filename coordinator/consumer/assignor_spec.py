"""What Kafka's assignors are handed (``GroupSpec``, ``MemberSubscriptionAndAssignment``,
``SubscriptionType``) and the Java iteration orders ``TargetAssignmentBuilder`` gives them.

The assignors' results depend on the iteration order of the Java collections they are handed, so a
``GroupSpec`` carries them: members in the order of ``GroupSpecImpl.memberIds()`` (a ``HashMap`` keyed
by member id), each member's topic ids in the order of its ``TopicIds``, and its current assignment in
the order of its ``Assignment`` map. ``java_member_spec`` builds a member's orders as Kafka's
``TargetAssignmentBuilder`` does (``java_collections.py`` models the tables).

Three inputs of those orders groupd does not keep, so ties between keys that share a bucket can still
fall differently from a given Kafka broker: the order of a member's topic names in its request
(groupd stores them sorted), the order of a target-assignment record's topics and partitions (read
back ascending), and the largest size a group's members map ever had (its current size is used).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from groupd.protocol.frozen import frozen_record

from .java_collections import JavaHashMap, int_hash, java_hashmap_order, string_hash, timeline_order, uuid_hash
from .member import Partitions

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


class PartitionAssignorError(Exception):
    """Kafka's ``PartitionAssignorException``."""


class SubscriptionType(enum.Enum):
    """``org.apache.kafka.coordinator.group.api.assignor.SubscriptionType``."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


@frozen_record
class MemberSpec:
    """``MemberSubscriptionAndAssignmentImpl``. ``subscribed`` and ``assigned`` (topics, then each
    topic's partitions) are iterated as given: give them in Java's order (``java_member_spec``)."""

    subscribed: Collection[uuid.UUID]
    assigned: Partitions | Mapping[uuid.UUID, Sequence[int]]  # the member's current target assignment
    instance_id: str | None = None
    # TopicIds.size(): the subscribed names, resolved or not (a HashSet copy is sized by it)
    subscribed_count: int | None = None

    def __init__(
        self,
        subscribed: Collection[uuid.UUID],
        assigned: Partitions | Mapping[uuid.UUID, Sequence[int]],
        instance_id: str | None = None,
        subscribed_count: int | None = None,
    ) -> None:
        _set(self, "subscribed", subscribed)
        _set(self, "assigned", assigned)
        _set(self, "instance_id", instance_id)
        _set(self, "subscribed_count", subscribed_count)

    def size(self) -> int:
        return len(self.subscribed) if self.subscribed_count is None else self.subscribed_count


@dataclass(frozen=True)
class GroupSpec:
    """``GroupSpecImpl``: ``members`` iterate in ``memberIds()`` order."""

    members: Mapping[str, MemberSpec]
    subscription_type: SubscriptionType
    # GroupSpecImpl.topicPartitionAllowedMap (share groups): None is Optional.empty(), all assignable
    assignable: Mapping[uuid.UUID, Collection[int]] | None = None
    _assigned: frozenset[tuple[uuid.UUID, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # invertedMemberAssignment: which partitions some member holds
        held = frozenset((t, p) for s in self.members.values() for t, ps in s.assigned.items() for p in ps)
        object.__setattr__(self, "_assigned", held)

    def is_partition_assigned(self, topic_id: uuid.UUID, partition: int) -> bool:
        return (topic_id, partition) in self._assigned

    def is_partition_assignable(self, topic_id: uuid.UUID, partition: int) -> bool:
        if self.assignable is None:
            return True
        allowed = self.assignable.get(topic_id)
        return allowed is not None and partition in allowed


Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]


def subscription_type(members: Mapping[str, MemberSpec]) -> SubscriptionType:
    """HOMOGENEOUS when every member subscribes to the same topics (``ModernGroup.subscriptionType``
    counts names; the caller that has them should pass its own answer)."""
    subs = {frozenset(s.subscribed) for s in members.values()}
    return SubscriptionType.HOMOGENEOUS if len(subs) <= 1 else SubscriptionType.HETEROGENEOUS


def result(spec: GroupSpec, assignment: Mapping[str, Mapping[uuid.UUID, Iterable[int]]]) -> Assignment:
    """Every member of the spec, with its non-empty topics (Kafka writes an absent member as empty)."""
    out: Assignment = {}
    for m in spec.members:
        parts = assignment.get(m, {})
        out[m] = {t: frozenset(ps) for t, ps in parts.items() if ps}
    return out


# -- Kafka's collection orders, as TargetAssignmentBuilder hands them over ----------------------------


def topic_ids(names: Iterable[str], topic_id_of: Callable[[str], uuid.UUID | None]) -> list[uuid.UUID]:
    """A member's ``TopicIds``: its subscribed names in the order of ``new HashSet<>(names)``
    (``ConsumerGroupMember.Builder.setSubscribedTopicNames``), each resolved to its id, unknown names
    skipped (``TopicIdIterator``)."""
    return _resolve(_hash_set_order(names), topic_id_of)


def _hash_set_order(names: Iterable[str]) -> list[str]:
    return JavaHashMap.copy_of(string_hash, list(dict.fromkeys(names))).keys()


def _resolve(names: Iterable[str], topic_id_of: Callable[[str], uuid.UUID | None]) -> list[uuid.UUID]:
    return [tid for tid in (topic_id_of(n) for n in names) if tid is not None]


def java_assignment(parts: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, list[int]]:
    """An ``Assignment`` as ``Assignment.fromRecord`` rebuilds it from a target-assignment record:
    topics into ``new HashMap<>()`` in the record's order, each partition list into
    ``new HashSet<>(partitions)``. The topics come in the order given (groupd's records list them
    sorted, Kafka's in the order of its assignor result's map) and the partitions ascending; either only
    matters for keys sharing a bucket."""
    topics: JavaHashMap[uuid.UUID, list[int]] = JavaHashMap(uuid_hash)
    for t, ps in parts.items():
        topics.put(t, JavaHashMap.copy_of(int_hash, sorted(ps)).keys())
    return dict(topics.items())


def java_member_spec(
    names: Iterable[str],
    topic_id_of: Callable[[str], uuid.UUID | None],
    assigned: Mapping[uuid.UUID, Iterable[int]],
    instance_id: str | None = None,
    regex_topics: Iterable[str] | None = None,
) -> MemberSpec:
    """A member as ``ConsumerTargetAssignmentBuilder.newMemberSubscriptionAndAssignment`` hands it over:
    its names, or what its regex resolved to when it has no names, or both as a ``UnionSet`` (the
    larger set first, then the other's topics not in it)."""
    by_name = _hash_set_order(names)
    by_regex = _hash_set_order(regex_topics) if regex_topics is not None else []
    if not by_name:
        subscriptions = by_regex
    elif not by_regex:
        subscriptions = by_name
    else:
        large, small = (by_name, by_regex) if len(by_name) > len(by_regex) else (by_regex, by_name)
        in_large = set(large)
        subscriptions = large + [n for n in small if n not in in_large]
    return MemberSpec(_resolve(subscriptions, topic_id_of), java_assignment(assigned), instance_id, len(subscriptions))


def target_assignment_member_order(
    group_member_ids: Iterable[str], updated_member_id: str, removed_member_id: str | None = None
) -> list[str]:
    """``GroupSpecImpl.memberIds()`` as ``TargetAssignmentBuilder.build`` fills it: the group's members
    in their ``TimelineHashMap``'s order, put into ``new HashMap<>()``; the updated member put after
    them (in place when already there); a static member it replaces removed last (its table stays
    sized for it).

    The timeline table is sized for the group's members now; Kafka's keeps the size of the largest the
    group has been, which only moves members that share a slot."""
    members = list(group_member_ids)
    keys = timeline_order(members)
    if updated_member_id not in set(members):
        keys.append(updated_member_id)
    return [m for m in java_hashmap_order(keys) if m != removed_member_id]


def consumer_subscription_type(
    members: Iterable[tuple[Collection[str], str | None]], resolved: Mapping[str, Collection[str]]
) -> SubscriptionType:
    """``ConsumerGroup.subscriptionType`` from each member's (topic names, regex): without regexes,
    HOMOGENEOUS when every subscribed name is subscribed by every member; with one regex used by every
    member, HOMOGENEOUS when no member also subscribes by name; else HETEROGENEOUS."""
    subs = [(frozenset(names), regex or None) for names, regex in members]
    n = len(subs)
    by_name: dict[str, int] = {}
    regexes: dict[str, int] = {}
    for names, regex in subs:
        for t in names:
            by_name[t] = by_name.get(t, 0) + 1
        if regex is not None:
            regexes[regex] = regexes.get(regex, 0) + 1
    by_regex: dict[str, int] = {}
    for regex in regexes:
        for t in resolved.get(regex, ()):
            by_regex[t] = by_regex.get(t, 0) + 1
    topics = by_name.keys() | by_regex.keys()
    if not regexes:
        homogeneous = all(by_name.get(t, 0) == n for t in topics)
    elif len(regexes) == 1 and next(iter(regexes.values())) == n:
        homogeneous = all(by_regex.get(t, 0) == 1 and by_name.get(t, 0) == 0 for t in topics)
    else:
        homogeneous = False
    return SubscriptionType.HOMOGENEOUS if homogeneous else SubscriptionType.HETEROGENEOUS
