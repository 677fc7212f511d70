"""The share-group assignor ``simple`` (KIP-932), ported from Kafka 4.2's ``SimpleAssignor`` with its
``SimpleHomogeneousAssignmentBuilder`` and ``SimpleHeterogeneousAssignmentBuilder`` (method names kept).

Unlike a consumer group's, a share group's partition may go to several members: when there are fewer
partitions than members each partition is shared by ``ceil(members / partitions)`` of them. Only the
partitions ``GroupSpec.assignable`` allows (the initialised share partitions) are handed out.

The builders walk ``HashMap``s keyed by ``TopicIdPartition``, partition and member index and
``HashSet``s of them, and stop part-way through those walks, so their tables are modelled
(``java_collections.JavaHashMap``) to reach Kafka's choices.

Not a consumer-group assignor: ConsumerGroupHeartbeat never offers it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping

from .assignor_spec import Assignment, GroupSpec, PartitionAssignorError, SubscriptionType, result
from .java_collections import (
    JavaHashMap,
    capacity_for,
    int_hash,
    topic_partition_hash,
    uuid_hash,
)

TopicPartition = tuple[uuid.UUID, int]
MemberParts = dict[uuid.UUID, set[int]]

NAME = "simple"


def simple_assign(spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]) -> Assignment:
    """``SimpleAssignor.assign``."""
    if not spec.members:
        return {}
    if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
        return result(spec, SimpleHomogeneousAssignmentBuilder(spec, num_partitions).build())
    return result(spec, SimpleHeterogeneousAssignmentBuilder(spec, num_partitions).build())


def _missing(topic_id: uuid.UUID) -> PartitionAssignorError:
    return PartitionAssignorError(
        f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
    )


def _desired_counts(desired_sharing: int, num_partitions: int, num_members: int) -> list[int]:
    """Spread ``desired_sharing * num_partitions`` assignments over the members as evenly as the
    doubles of Kafka's ``Math.ceil(precise * (i + 1)) - Math.ceil(precise * i)`` do."""
    precise = desired_sharing * num_partitions / num_members
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(num_members)]


class _Iterator:
    """A ``HashSet`` iterator: the walk is fixed when it starts; ``remove`` drops the key last returned."""

    def __init__(self, table: JavaHashMap) -> None:
        self.table = table
        self.keys = table.keys()
        self.pos = 0

    def has_next(self) -> bool:
        return self.pos < len(self.keys)

    def next(self) -> int:
        if self.pos >= len(self.keys):
            raise PartitionAssignorError("NoSuchElementException")  # Kafka would throw here too
        self.pos += 1
        return self.keys[self.pos - 1]

    def remove(self) -> None:
        self.table.remove(self.keys[self.pos - 1])


class _Assignments:
    """``oldGroupAssignment`` and ``newGroupAssignment`` by member index: a member's assignment is
    copied (``AssignorHelpers.deepCopyAssignment``) the first time a builder changes it."""

    def __init__(self, spec: GroupSpec, member_ids: list[str]) -> None:
        self.member_ids = member_ids
        self.old = [spec.members[m].assigned for m in member_ids]
        self.new: dict[int, MemberParts] = {}

    def copy(self, member_index: int) -> MemberParts:
        new = self.new.get(member_index)
        if new is None:
            new = self.new[member_index] = {t: set(ps) for t, ps in self.old[member_index].items()}
        return new

    def final(self) -> dict[str, Mapping[uuid.UUID, object]]:
        out: dict[str, Mapping[uuid.UUID, object]] = {}
        for i, m in enumerate(self.member_ids):
            out[m] = self.new[i] if i in self.new else self.old[i]
        return out


def _assign_remaining(
    unfilled: JavaHashMap[int, None],
    by_partition: JavaHashMap,
    desired_sharing: int,
    desired: list[int],
    count_of: Callable[[int], int],
    give: Callable[[object, int], None],
) -> None:
    """``assignRemainingPartitions`` (both builders): one pass over the partitions, cycling through the
    unfilled members; a partition that none of them can take (they all have it) is left short."""
    member_iterator = _Iterator(unfilled)
    assigned_this_iterator = False
    for key, members_assigned in by_partition.items():
        if len(members_assigned) < desired_sharing:
            to_make = desired_sharing - len(members_assigned)
            while to_make > 0:
                if not member_iterator.has_next():
                    if not assigned_this_iterator:
                        break
                    member_iterator = _Iterator(unfilled)
                    assigned_this_iterator = False
                member_index = member_iterator.next()
                # membersAssigned is not updated as members are added: Kafka checks the set as it was
                if member_index not in members_assigned:
                    give(key, member_index)
                    to_make -= 1
                    assigned_this_iterator = True
                    if count_of(member_index) >= desired[member_index]:
                        member_iterator.remove()
        if not len(unfilled):
            break


class SimpleHomogeneousAssignmentBuilder:
    """Every member subscribes to the same topics."""

    def __init__(self, spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]) -> None:
        first = next(iter(spec.members.values()))
        self.subscribed_topic_ids = list(first.subscribed)  # the member's TopicIds, not a copy
        self.subscribed = set(self.subscribed_topic_ids)
        self.member_ids = list(spec.members)
        m = self.num_group_members = len(self.member_ids)
        self.target_partitions: list[TopicPartition] = []  # computeTargetPartitions
        for t in self.subscribed_topic_ids:
            n = num_partitions.get(t, -1)
            if n == -1:
                raise _missing(t)
            self.target_partitions += [(t, p) for p in range(n) if spec.is_partition_assignable(t, p)]
        p = len(self.target_partitions)
        self.desired_sharing = 0 if p == 0 else (m + p - 1) // p
        self.desired_assignment_count = _desired_counts(self.desired_sharing, p, m)
        self.assignments = _Assignments(spec, self.member_ids)
        self.final_assignment_by_partition: JavaHashMap[TopicPartition, JavaHashMap[int, None]] = JavaHashMap(
            topic_partition_hash, capacity_for(p)
        )
        self.final_assignment_by_member: JavaHashMap[int, JavaHashMap[TopicPartition, None]] = JavaHashMap(
            int_hash, capacity_for(m)
        )
        self.unfilled_members: JavaHashMap[int, None] = JavaHashMap(int_hash, capacity_for(m))
        self.overfilled_members: JavaHashMap[int, None] = JavaHashMap(int_hash, capacity_for(m))

    def _members_of(self, tp: TopicPartition) -> JavaHashMap[int, None]:
        return self.final_assignment_by_partition.compute_if_absent(tp, lambda: JavaHashMap(int_hash))

    def _partitions_of(self, member_index: int) -> JavaHashMap[TopicPartition, None]:
        return self.final_assignment_by_member.compute_if_absent(
            member_index, lambda: JavaHashMap(topic_partition_hash)
        )

    def build(self) -> dict[str, Mapping[uuid.UUID, object]]:
        if not self.subscribed_topic_ids:
            return {}
        self.revoke_unassignable_partitions()
        self.revoke_overfilled_members()
        self.revoke_overshared_partitions()
        for tp in self.target_partitions:  # partitions nobody holds yet
            self._members_of(tp)
        self.assign_remaining_partitions()
        return self.assignments.final()

    def revoke_unassignable_partitions(self) -> None:
        """``revokeUnassignablePartitions``: drop topics no longer subscribed; count what each holds."""
        for member_index in range(self.num_group_members):  # oldGroupAssignment: Integer keys in order
            count = 0
            desired = self.desired_assignment_count[member_index]
            for topic_id, partitions in self.assignments.old[member_index].items():
                if topic_id in self.subscribed:
                    for partition in partitions:
                        tp = (topic_id, partition)
                        count += 1
                        self._members_of(tp).add(member_index)
                        self._partitions_of(member_index).add(tp)
                        if count >= desired:
                            self.assignments.copy(member_index)
                else:
                    self.assignments.copy(member_index).pop(topic_id, None)
            if count < desired:
                self.unfilled_members.add(member_index)
            elif count > desired:
                self.overfilled_members.add(member_index)

    def revoke_overfilled_members(self) -> None:
        """``revokeOverfilledMembers``: a member over its count gives up partitions in its set's order."""
        for member_index in self.overfilled_members:
            desired = self.desired_assignment_count[member_index]
            held = self.final_assignment_by_member[member_index]
            if len(held) > desired:
                it = _Iterator(held)
                while it.has_next():
                    tp = it.next()
                    self.assignments.copy(member_index)[tp[0]].discard(tp[1])
                    self.final_assignment_by_partition[tp].remove(member_index)
                    it.remove()
                    if len(held) == desired:
                        break

    def revoke_overshared_partitions(self) -> None:
        """``revokeOversharedPartitions``: a partition held by more than the desired sharing loses the
        members first in its set's order."""
        for tp, assigned_members in self.final_assignment_by_partition.items():
            count = len(assigned_members)
            if count > self.desired_sharing:
                it = _Iterator(assigned_members)
                while it.has_next():
                    member_index = it.next()
                    partitions = self.assignments.copy(member_index).get(tp[0])
                    if partitions is not None and tp[1] in partitions:
                        partitions.discard(tp[1])
                        count -= 1
                        it.remove()
                        self.final_assignment_by_member[member_index].remove(tp)
                        self.unfilled_members.add(member_index)
                    if count <= self.desired_sharing:
                        break

    def assign_remaining_partitions(self) -> None:
        if not len(self.unfilled_members):
            return

        def give(tp: object, member_index: int) -> None:
            t, p = tp  # type: ignore[misc]
            self.assignments.copy(member_index).setdefault(t, set()).add(p)
            self._partitions_of(member_index).add((t, p))

        _assign_remaining(
            self.unfilled_members,
            self.final_assignment_by_partition,
            self.desired_sharing,
            self.desired_assignment_count,
            lambda i: len(self.final_assignment_by_member[i]),
            give,
        )


class SimpleHeterogeneousAssignmentBuilder:
    """Members subscribe to different topics: each topic is balanced among its own subscribers
    (``TopicAssignmentPartialBuilder``), topic by topic."""

    def __init__(self, spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]) -> None:
        subscribed: JavaHashMap[uuid.UUID, None] = JavaHashMap(uuid_hash)
        for member in spec.members.values():
            for t in member.subscribed:
                subscribed.add(t)
        self.subscribed_topic_ids = subscribed
        self.member_ids = list(spec.members)
        self.num_group_members = len(self.member_ids)
        self.target_partitions_by_topic: dict[uuid.UUID, list[int]] = {}  # computeTargetPartitions
        for t in subscribed:
            n = num_partitions.get(t, -1)
            if n == -1:
                raise _missing(t)
            self.target_partitions_by_topic[t] = [p for p in range(n) if spec.is_partition_assignable(t, p)]
        self.subscribed_members_by_topic: dict[uuid.UUID, list[int]] = {}  # computeSubscribedMembers
        for member_index, member_id in enumerate(self.member_ids):
            for t in spec.members[member_id].subscribed:
                self.subscribed_members_by_topic.setdefault(t, []).append(member_index)
        self.assignments = _Assignments(spec, self.member_ids)

    def build(self) -> dict[str, Mapping[uuid.UUID, object]]:
        if not len(self.subscribed_topic_ids):
            return {}
        for topic_id in self.subscribed_topic_ids:
            _TopicAssignmentPartialBuilder(self, topic_id).build()
        return self.assignments.final()


class _TopicAssignmentPartialBuilder:
    """``SimpleHeterogeneousAssignmentBuilder.TopicAssignmentPartialBuilder``: one topic's assignment."""

    def __init__(self, outer: SimpleHeterogeneousAssignmentBuilder, topic_id: uuid.UUID) -> None:
        self.outer = outer
        self.topic_id = topic_id
        self.target_partitions = outer.target_partitions_by_topic[topic_id]
        self.subscribed_members = outer.subscribed_members_by_topic[topic_id]
        p, s = len(self.target_partitions), len(self.subscribed_members)
        self.final_assignment_by_partition: JavaHashMap[int, JavaHashMap[int, None]] = JavaHashMap(
            int_hash, capacity_for(p)
        )
        self.final_assignment_by_member: JavaHashMap[int, JavaHashMap[int, None]] = JavaHashMap(
            int_hash, capacity_for(s)
        )
        self.desired_sharing = 0 if p == 0 else (s + p - 1) // p
        self.desired_assignment_counts = [0] * outer.num_group_members
        for i, count in enumerate(_desired_counts(self.desired_sharing, p, s)):
            self.desired_assignment_counts[self.subscribed_members[i]] = count

    def build(self) -> None:
        self.revoke_unassignable_partitions()
        self.revoke_overfilled_members()
        self.revoke_overshared_partitions()
        s = len(self.subscribed_members)
        for partition in self.target_partitions:
            self.final_assignment_by_partition.compute_if_absent(
                partition, lambda: JavaHashMap(int_hash, capacity_for(s))
            )
        self.assign_remaining_partitions()

    def revoke_unassignable_partitions(self) -> None:
        """``revokeUnassignablePartitions``: record who holds this topic's partitions now. The topic
        always is subscribed here (it comes from the subscribed set), so a topic nobody subscribes to any
        more is never taken away: Kafka's quirk, kept."""
        for member_index in range(self.outer.num_group_members):
            old = self.outer.assignments.old[member_index]
            if not old:
                continue
            partitions = old.get(self.topic_id)
            if partitions is not None:
                for partition in partitions:
                    self.final_assignment_by_partition.compute_if_absent(partition, lambda: JavaHashMap(int_hash)).add(
                        member_index
                    )
                    self.final_assignment_by_member.compute_if_absent(member_index, lambda: JavaHashMap(int_hash)).add(
                        partition
                    )

    def revoke_overfilled_members(self) -> None:
        """``revokeOverfilledMembers``: a member over its count for this topic (0 if it does not
        subscribe to it) gives up partitions in its set's order."""
        for member_index, assigned in self.final_assignment_by_member.items():
            desired = self.desired_assignment_counts[member_index]
            if len(assigned) > desired:
                it = _Iterator(assigned)
                while it.has_next() and len(assigned) > desired:
                    partition = it.next()
                    self.final_assignment_by_partition[partition].remove(member_index)
                    it.remove()
                    self.outer.assignments.copy(member_index)[self.topic_id].discard(partition)

    def revoke_overshared_partitions(self) -> None:
        """``revokeOversharedPartitions``."""
        for partition, assigned_members in self.final_assignment_by_partition.items():
            count = len(assigned_members)
            if count > self.desired_sharing:
                it = _Iterator(assigned_members)
                while it.has_next():
                    member_index = it.next()
                    partitions = self.outer.assignments.copy(member_index).get(self.topic_id)
                    if partitions is not None and partition in partitions:
                        partitions.discard(partition)
                        count -= 1
                        it.remove()
                        self.final_assignment_by_member[member_index].remove(partition)
                    if count <= self.desired_sharing:
                        break

    def assign_remaining_partitions(self) -> None:
        """``assignRemainingPartitions``: the subscribers under their count, in subscription order."""
        unfilled: JavaHashMap[int, None] = JavaHashMap(int_hash, capacity_for(self.outer.num_group_members))
        for member_index in self.outer.subscribed_members_by_topic[self.topic_id]:
            held = self.final_assignment_by_member.get(member_index)
            if (0 if held is None else len(held)) < self.desired_assignment_counts[member_index]:
                unfilled.add(member_index)

        def give(partition: object, member_index: int) -> None:
            self.outer.assignments.copy(member_index).setdefault(self.topic_id, set()).add(partition)  # type: ignore[arg-type]
            self.final_assignment_by_member.compute_if_absent(member_index, lambda: JavaHashMap(int_hash)).add(
                partition  # type: ignore[arg-type]
            )

        _assign_remaining(
            unfilled,
            self.final_assignment_by_partition,
            self.desired_sharing,
            self.desired_assignment_counts,
            lambda i: len(self.final_assignment_by_member[i]),
            give,
        )
