"""Server-side assignors ``uniform`` and ``range``, ports of Kafka 4.2's ``group-coordinator/.../assignor/``.

Both give exactly what Kafka's classes give for the same group spec, member order included:

- ``uniform`` (``UniformAssignor``, the default): ``UniformHomogeneousAssignmentBuilder`` when every
  member subscribes to the same topics, else ``UniformHeterogeneousAssignmentBuilder`` (``uniform.py``).
- ``range`` (``RangeAssignor``): members sorted static first (by instance id), then by member id; each
  topic cut into contiguous ranges among its subscribers in that order, the first ``n % k`` one
  partition longer. Current assignments play no part.

What the assignors are handed, and the Java iteration orders that decide Kafka's ties, are in
``assignor_spec.py``.

``simple.py`` has the share-group assignor (``SimpleAssignor``, KIP-932), which is not offered to
consumer groups.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace

from .assignor_spec import (
    Assignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    SubscriptionType,
    java_member_spec,
    result,
    subscription_type,
)
from .java_collections import java_string_key
from .uniform import UniformHeterogeneousAssignmentBuilder, UniformHomogeneousAssignmentBuilder


def existing_partitions_only(spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]) -> GroupSpec:
    """The spec without current partitions past their topic's partition count. Kafka never has one
    (partitions are only ever added, a re-created topic has a new id) and its builders would index past
    an array for it; groupd's topics image can shrink, so they are dropped here, before the port runs."""

    def stale(parts: Mapping[uuid.UUID, Iterable[int]]) -> bool:
        return any(p >= num_partitions[t] for t, ps in parts.items() if t in num_partitions for p in ps)

    if not any(stale(m.assigned) for m in spec.members.values()):
        return spec
    members: dict[str, MemberSpec] = {}
    for mid, m in spec.members.items():
        if stale(m.assigned):
            kept = {
                t: [p for p in ps if t not in num_partitions or p < num_partitions[t]] for t, ps in m.assigned.items()
            }
            m = replace(m, assigned={t: ps for t, ps in kept.items() if ps})
        members[mid] = m
    return GroupSpec(members, spec.subscription_type, spec.assignable)


class _Assignor:
    name = ""

    def assign(
        self,
        members: Mapping[str, MemberSpec] | GroupSpec,
        num_partitions: Mapping[uuid.UUID, int],
        subscription: SubscriptionType | None = None,
    ) -> Assignment:
        """``assign(GroupSpec, SubscribedTopicDescriber)``. ``members`` iterate in Kafka's member order;
        without a ``subscription`` type it is computed from the members' topic ids."""
        if isinstance(members, GroupSpec):
            spec = members
        else:
            sub = subscription if subscription is not None else subscription_type(members)
            spec = GroupSpec(members, sub)
        if not spec.members:
            return {}
        return result(spec, self.build(existing_partitions_only(spec, num_partitions), num_partitions))

    def build(
        self, spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]
    ) -> Mapping[str, Mapping[uuid.UUID, Iterable[int]]]:
        raise NotImplementedError


class UniformAssignor(_Assignor):
    """``UniformAssignor``: picks the homogeneous or the heterogeneous builder by subscription type."""

    name = "uniform"

    def build(
        self, spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]
    ) -> Mapping[str, Mapping[uuid.UUID, Iterable[int]]]:
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return UniformHomogeneousAssignmentBuilder(spec, num_partitions).build()
        return UniformHeterogeneousAssignmentBuilder(spec, num_partitions).build()


class RangeAssignor(_Assignor):
    """``RangeAssignor``."""

    name = "range"

    @staticmethod
    def sort_member_ids(spec: GroupSpec) -> list[str]:
        """``sortMemberIds``: static members first, by instance id, then the others by member id
        (``String.compareTo``, UTF-16 code units)."""

        def key(mid: str) -> tuple[int, bytes]:
            iid = spec.members[mid].instance_id
            return (0, java_string_key(iid)) if iid is not None else (1, java_string_key(mid))

        return sorted(spec.members, key=key)

    def build(
        self, spec: GroupSpec, num_partitions: Mapping[uuid.UUID, int]
    ) -> Mapping[str, Mapping[uuid.UUID, Iterable[int]]]:
        member_ids = self.sort_member_ids(spec)

        def partitions_of(t: uuid.UUID) -> int:
            n = num_partitions.get(t, -1)
            if n == -1:
                raise PartitionAssignorError("Member is subscribed to a non-existent topic")
            return n

        # TopicMetadata: [partitions, subscribers, minQuota, extraPartitions, nextRange]
        topics: dict[uuid.UUID, list[int]] = {}
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:  # assignHomogeneousGroup
            for t in spec.members[member_ids[0]].subscribed:
                topics[t] = [partitions_of(t), len(member_ids), -1, -1, 0]
        else:  # assignHeterogeneousGroup
            for m in member_ids:
                for t in spec.members[m].subscribed:
                    if t not in topics:
                        topics[t] = [partitions_of(t), 0, -1, -1, 0]
                    topics[t][1] += 1
        out: dict[str, dict[uuid.UUID, range]] = {}
        for m in member_ids:
            mine: dict[uuid.UUID, range] = {}
            subscribed = (
                spec.members[member_ids[0]].subscribed
                if spec.subscription_type is SubscriptionType.HOMOGENEOUS
                else spec.members[m].subscribed
            )
            for t in subscribed:
                meta = topics[t]
                if meta[2] == -1:  # maybeComputeQuota
                    meta[2], meta[3] = divmod(meta[0], meta[1])
                # addPartitionsToAssignment
                start, quota = meta[4], meta[2]
                if meta[3] > 0:
                    quota += 1
                    meta[3] -= 1
                end = min(start + quota, meta[0])
                meta[4] = end
                if start < end:
                    mine[t] = range(start, end)
            out[m] = mine
        return out


ASSIGNORS: dict[str, _Assignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}


__all__ = [
    "ASSIGNORS",
    "Assignment",
    "GroupSpec",
    "MemberSpec",
    "PartitionAssignorError",
    "RangeAssignor",
    "SubscriptionType",
    "UniformAssignor",
    "java_member_spec",
]
