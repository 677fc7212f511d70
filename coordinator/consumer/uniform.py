"""The ``uniform`` assignor's two builders, ported from Kafka 4.2's ``UniformHomogeneousAssignmentBuilder``
and ``UniformHeterogeneousAssignmentBuilder`` step by step (their method names are kept), so that the
same group spec gives the same assignment, partition for partition.

Kafka's builders copy a member's assignment before changing it (``AssignorHelpers.deepCopyAssignment``);
here the members' assignments are copied up front into plain sets, which changes nothing of the result.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from .assignor_spec import GroupSpec, PartitionAssignorError
from .java_collections import JavaHashMap, copy_capacity, uuid_hash, uuid_order_key

TopicPartition = tuple[uuid.UUID, int]


def _missing(topic_id: uuid.UUID) -> PartitionAssignorError:
    return PartitionAssignorError(
        f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
    )


class UniformHomogeneousAssignmentBuilder:
    """Every member subscribes to the same topics: quotas of ``total // members`` with the remainder
    going one each to members in ``memberIds()`` order (to the earliest members that already hold
    enough to use it, else to the last ones), sticky up to the quota, then the unassigned partitions
    handed out in order, a contiguous run per unfilled member."""

    def __init__(self, spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]) -> None:
        self.spec = spec
        self.num_partitions = num_partitions
        first = next(iter(spec.members.values()))
        # new HashSet<>(memberSubscription(first).subscribedTopicIds()): sized by TopicIds.size()
        subscribed: JavaHashMap[uuid.UUID, None] = JavaHashMap(uuid_hash, copy_capacity(first.size()))
        for t in first.subscribed:
            subscribed.add(t)
        self.subscribed_topic_ids = subscribed
        self.unfilled_members: list[tuple[str, int]] = []
        self.unassigned_partitions: list[TopicPartition] = []
        self.target_assignment: dict[str, dict[uuid.UUID, set[int]]] = {}
        self.minimum_member_quota = 0
        self.remaining_members_to_get_an_extra_partition = 0

    def build(self) -> dict[str, dict[uuid.UUID, set[int]]]:
        if not len(self.subscribed_topic_ids):
            return {}
        total = 0
        for t in self.subscribed_topic_ids:
            n = self.num_partitions.get(t, -1)
            if n == -1:
                raise _missing(t)
            for p in range(n):
                if not self.spec.is_partition_assigned(t, p):
                    self.unassigned_partitions.append((t, p))
            total += n
        self.minimum_member_quota, self.remaining_members_to_get_an_extra_partition = divmod(
            total, len(self.spec.members)
        )
        self.maybe_revoke_partitions()
        self.assign_remaining_partitions()
        return self.target_assignment

    def maybe_revoke_partitions(self) -> None:
        """``maybeRevokePartitions``: drop topics no longer subscribed and, walking a member's current
        partitions in its map's order, whatever exceeds its quota."""
        member_count = len(self.spec.members)
        for member_index, (member_id, member) in enumerate(self.spec.members.items()):
            new_assignment: dict[uuid.UUID, set[int]] = {t: set(ps) for t, ps in member.assigned.items()}
            quota = self.minimum_member_quota
            quota_has_extra_partition = False
            if self.remaining_members_to_get_an_extra_partition > 0:
                quota += 1
                quota_has_extra_partition = True
            for topic_id, partitions in member.assigned.items():
                if topic_id in self.subscribed_topic_ids:
                    if len(partitions) <= quota:
                        quota -= len(partitions)
                    else:
                        for partition in partitions:
                            if quota > 0:
                                quota -= 1
                            else:
                                parts = new_assignment[topic_id]
                                parts.discard(partition)
                                if not parts:
                                    del new_assignment[topic_id]
                                self.unassigned_partitions.append((topic_id, partition))
                else:
                    new_assignment.pop(topic_id, None)
            if (
                quota > 0
                and quota_has_extra_partition
                and member_count - member_index > self.remaining_members_to_get_an_extra_partition
            ):
                # give the extra partition up for a later member, unless this one is among the last
                # remainingMembersToGetAnExtraPartition and must take it
                quota -= 1
                quota_has_extra_partition = False
            if quota > 0:
                self.unfilled_members.append((member_id, quota))
            if quota_has_extra_partition:
                self.remaining_members_to_get_an_extra_partition -= 1
            self.target_assignment[member_id] = new_assignment

    def assign_remaining_partitions(self) -> None:
        """``assignRemainingPartitions``: each unfilled member, in order, takes the next ``quota``
        unassigned partitions."""
        index = 0
        unassigned = self.unassigned_partitions
        for member_id, remaining_quota in self.unfilled_members:
            assignment = self.target_assignment[member_id]
            i = 0
            while i < remaining_quota and index < len(unassigned):
                topic_id, partition = unassigned[index]
                index += 1
                assignment.setdefault(topic_id, set()).add(partition)
                i += 1
        if index < len(unassigned):
            raise PartitionAssignorError("Partitions were left unassigned")


class UniformHeterogeneousAssignmentBuilder:
    """Members subscribe to different topics: keep what is still subscribed, hand out the rest topic by
    topic (most partitions per subscriber first) to the least loaded subscribers, then move partitions
    from the most to the least loaded subscribers of each topic until balanced (or 16 rounds).

    Members are numbered in ``memberIds()`` order; ties between equally loaded members go to the lower
    number."""

    MAX_ITERATION_COUNT = 16

    def __init__(self, spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]) -> None:
        self.spec = spec
        self.num_partitions = num_partitions
        self.member_ids = list(spec.members)
        self.topic_subscribers: dict[uuid.UUID, list[int]] = {}
        self.member_target_assignment_sizes = [0] * len(self.member_ids)
        self.target_assignment: dict[str, dict[uuid.UUID, set[int]]] = {}
        for member_index, member_id in enumerate(self.member_ids):
            for topic_id in spec.members[member_id].subscribed:
                if num_partitions.get(topic_id, -1) == -1:
                    raise _missing(topic_id)
                self.topic_subscribers.setdefault(topic_id, []).append(member_index)
        # targetAssignmentPartitionOwners: member index per partition, -1 for none
        self.owners: dict[uuid.UUID, list[int]] = {t: [-1] * num_partitions[t] for t in self.topic_subscribers}

    # -- ordering ---------------------------------------------------------------------------------

    def _topic_key(self, topic_id: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        """``topicComparator``: partitions per subscriber descending (a double, as Kafka divides), then
        subscriber count ascending, then topic id ascending (``Uuid.compareTo``)."""
        subscribers = len(self.topic_subscribers[topic_id])
        return (-(self.num_partitions[topic_id] / subscribers), subscribers, uuid_order_key(topic_id))

    def sort_topic_ids(self, topic_ids: list[uuid.UUID]) -> list[uuid.UUID]:
        return sorted(topic_ids, key=self._topic_key)

    def _member_key(self, member_index: int) -> tuple[int, int]:
        """``memberComparator``: assigned partitions ascending, then member index."""
        return (self.member_target_assignment_sizes[member_index], member_index)

    # -- the steps --------------------------------------------------------------------------------

    def build(self) -> dict[str, dict[uuid.UUID, set[int]]]:
        if not self.topic_subscribers:
            return {}
        self.maybe_revoke_partitions()
        self.assign_remaining_partitions(self.compute_unassigned_partitions())
        self.balance()
        return self.target_assignment

    def maybe_revoke_partitions(self) -> None:
        """``maybeRevokePartitions``: keep the partitions of topics the member still subscribes to."""
        for member_index, member_id in enumerate(self.member_ids):
            member = self.spec.members[member_id]
            subscribed = set(member.subscribed)
            new_assignment: dict[uuid.UUID, set[int]] = {}
            for topic_id, partitions in member.assigned.items():
                if topic_id in subscribed:
                    new_assignment[topic_id] = set(partitions)
                    self.member_target_assignment_sizes[member_index] += len(partitions)
                    for partition in partitions:
                        self.owners[topic_id][partition] = member_index
            self.target_assignment[member_id] = new_assignment

    def compute_unassigned_partitions(self) -> dict[uuid.UUID, list[int]]:
        """``computeUnassignedPartitions``."""
        out: dict[uuid.UUID, list[int]] = {}
        for topic_id, owners in self.owners.items():
            free = [p for p, owner in enumerate(owners) if owner == -1]
            if free:
                out[topic_id] = free
        return out

    def assign_remaining_partitions(self, partitions: dict[uuid.UUID, list[int]]) -> None:
        """``assignRemainingPartitions``: topic by topic, each partition to the least loaded subscriber."""
        balancer = _MemberAssignmentBalancer(self)
        for topic_id in self.sort_topic_ids(list(partitions)):
            balancer.initialize(self.topic_subscribers[topic_id])
            for partition in partitions[topic_id]:
                self.assign_partition(topic_id, partition, balancer.next_least_loaded_member())

    def balance(self) -> None:
        """``balance``: only topics with two or more subscribers can move."""
        topic_ids = [t for t, subscribers in self.topic_subscribers.items() if len(subscribers) >= 2]
        if topic_ids:
            self.balance_topics(topic_ids)

    def balance_topics(self, topic_ids: list[uuid.UUID]) -> None:
        """``balanceTopics``: round after round over the topics until a whole round moves nothing, at
        most ``MAX_ITERATION_COUNT`` rounds."""
        sorted_topic_ids = self.sort_topic_ids(topic_ids)
        last_rebalance_topic_index = -1
        balancer = _MemberAssignmentBalancer(self)
        for _ in range(self.MAX_ITERATION_COUNT):
            for topic_index, topic_id in enumerate(sorted_topic_ids):
                if topic_index == last_rebalance_topic_index:
                    return  # a whole round since the last move
                reassigned = self.balance_topic(topic_id, balancer)
                if reassigned > 0 or last_rebalance_topic_index == -1:
                    last_rebalance_topic_index = topic_index

    def balance_topic(self, topic_id: uuid.UUID, balancer: _MemberAssignmentBalancer) -> int:
        """``balanceTopic``: move a topic's partitions, each most loaded subscriber giving up its
        highest-placed one, to the least loaded subscribers until their counts differ by one or less."""
        reassigned = 0
        owners = self.owners[topic_id]
        if balancer.initialize(self.topic_subscribers[topic_id]) <= 1:
            return reassigned
        # the partitions grouped by owner, then by number
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}  # exclusive
        for i, partition in enumerate(partitions):
            owner = owners[partition]
            start.setdefault(owner, i)
            end[owner] = i + 1
        while not balancer.is_balanced():
            while True:  # a most loaded member that has partitions of this topic to give up
                most_loaded = balancer.next_most_loaded_member()
                if most_loaded == -1:
                    break
                if most_loaded not in end or end[most_loaded] - start[most_loaded] <= 0:
                    balancer.exclude_most_loaded_member()
                    continue
                break
            if most_loaded == -1:
                break
            partition = partitions[end[most_loaded] - 1]
            end[most_loaded] -= 1
            least_loaded = balancer.next_least_loaded_member()
            if balancer.is_balanced():
                break
            self.assign_partition(topic_id, partition, least_loaded)
            reassigned += 1
        return reassigned

    def assign_partition(self, topic_id: uuid.UUID, partition: int, member_index: int) -> None:
        """``assignPartition``: ``removePartitionFromTargetAssignment`` from the old owner, then
        ``addPartitionToTargetAssignment``."""
        old = self.owners[topic_id][partition]
        if old != -1:
            parts = self.target_assignment[self.member_ids[old]].get(topic_id)
            if parts is not None:
                parts.discard(partition)
                if not parts:
                    del self.target_assignment[self.member_ids[old]][topic_id]
            self.member_target_assignment_sizes[old] -= 1
        self.target_assignment[self.member_ids[member_index]].setdefault(topic_id, set()).add(partition)
        self.owners[topic_id][partition] = member_index
        self.member_target_assignment_sizes[member_index] += 1


class _MemberAssignmentBalancer:
    """``UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer``: the subscribers of one topic
    sorted by load, a least loaded range growing rightwards and a most loaded range growing leftwards."""

    def __init__(self, builder: UniformHeterogeneousAssignmentBuilder) -> None:
        self.builder = builder
        self.sizes = builder.member_target_assignment_sizes  # shared: moves update it
        self.sorted_members: list[int] = []
        self.least_loaded_range_end = 0  # exclusive
        self.least_loaded_range_partition_count = -1
        self.next_least_loaded = 0
        self.most_loaded_range_start = 0  # inclusive
        self.most_loaded_range_end = 0  # exclusive
        self.most_loaded_range_partition_count = 1
        self.next_most_loaded = -1

    def initialize(self, members: list[int]) -> int:
        """``initialize``: returns the spread between the most and the least loaded member."""
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        self.sorted_members = sorted(members, key=self.builder._member_key)
        sizes, order = self.sizes, self.sorted_members
        self.least_loaded_range_end = 0
        self.least_loaded_range_partition_count = sizes[order[0]] - 1
        self.next_least_loaded = 0
        self.most_loaded_range_start = len(order)
        self.most_loaded_range_end = len(order)
        self.most_loaded_range_partition_count = sizes[order[-1]] + 1
        self.next_most_loaded = len(order) - 1
        return sizes[order[-1]] - sizes[order[0]]

    def next_least_loaded_member(self) -> int:
        """``nextLeastLoadedMember``: round-robin over the least loaded range; once each has had one,
        its level rises by one and it takes in the members now at that level."""
        sizes, order = self.sizes, self.sorted_members
        if self.next_least_loaded >= self.least_loaded_range_end:
            self.least_loaded_range_partition_count += 1
            while (
                self.least_loaded_range_end < len(order)
                and sizes[order[self.least_loaded_range_end]] == self.least_loaded_range_partition_count
            ):
                self.least_loaded_range_end += 1
            self.next_least_loaded = 0
        member = order[self.next_least_loaded]
        self.next_least_loaded += 1
        return member

    def next_most_loaded_member(self) -> int:
        """``nextMostLoadedMember``: round-robin backwards over the most loaded range, widening it as
        its level falls; -1 when no member is left to give anything up."""
        sizes, order = self.sizes, self.sorted_members
        if self.next_most_loaded < self.most_loaded_range_start:
            if self.most_loaded_range_end <= self.most_loaded_range_start and self.most_loaded_range_start > 0:
                # emptied by exclusions: restart the level from the member below so the range grows
                self.most_loaded_range_partition_count = sizes[order[self.most_loaded_range_start - 1]]
            else:
                self.most_loaded_range_partition_count -= 1
            while (
                self.most_loaded_range_start > 0
                and sizes[order[self.most_loaded_range_start - 1]] == self.most_loaded_range_partition_count
            ):
                self.most_loaded_range_start -= 1
            self.next_most_loaded = self.most_loaded_range_end - 1
        if self.next_most_loaded < 0:
            return -1
        member = order[self.next_most_loaded]
        self.next_most_loaded -= 1
        return member

    def exclude_most_loaded_member(self) -> None:
        """``excludeMostLoadedMember``: swap the member last returned to the end of the range and shrink it."""
        order = self.sorted_members
        i, last = self.next_most_loaded + 1, self.most_loaded_range_end - 1
        order[i], order[last] = order[last], order[i]
        self.most_loaded_range_end -= 1

    def is_balanced(self) -> bool:
        return self.most_loaded_range_partition_count - self.least_loaded_range_partition_count <= 1
