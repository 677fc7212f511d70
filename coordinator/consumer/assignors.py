"""Server-side assignors ``uniform`` and ``range`` (Kafka's ``group-coordinator/.../assignor/``).

Both take the members' subscriptions (topic ids) and current target assignments and return the new
target assignment, sticky: a member keeps what it had as far as balance allows.

- ``uniform`` (``UniformAssignor``): when every member subscribes to the same topics, Kafka's
  ``OptimizedUniformAssignmentBuilder`` is followed step by step: quotas ``total // members`` with
  ``total % members`` members getting one more; each member first keeps up to its quota of its
  current (still subscribed) partitions, then the unassigned partitions, sorted by (topic id,
  partition), go round-robin to members under quota. With different subscriptions Kafka uses
  ``UniformHeterogeneousAssignmentBuilder``; groupd's heterogeneous builder (below) keeps the same
  properties -- every subscribed partition assigned to one subscriber, stickiness, the counts of
  members who could trade differ by at most one -- but not Kafka's exact choice of movers.
- ``range`` (``RangeAssignor``): per topic, quota ``partitions // subscribers`` and one extra for the
  first ``partitions % subscribers``; members keep their lowest-numbered current partitions up to
  quota (sticky), the rest are handed out in ascending ranges.

Where Kafka iterates a ``HashMap`` of member ids, groupd iterates member ids sorted: the same
properties, possibly a different member for a given partition.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from .member import Partitions


class PartitionAssignorError(Exception):
    """Kafka's ``PartitionAssignorException``."""


@dataclass(frozen=True)
class MemberSpec:
    subscribed: frozenset[uuid.UUID]
    assigned: Partitions  # the member's current target assignment


Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]


def _add(out: dict[str, dict[uuid.UUID, set[int]]], member: str, topic: uuid.UUID, partition: int) -> None:
    out.setdefault(member, {}).setdefault(topic, set()).add(partition)


def _frozen(out: dict[str, dict[uuid.UUID, set[int]]], members: Mapping[str, MemberSpec]) -> Assignment:
    return {m: {t: frozenset(ps) for t, ps in out.get(m, {}).items() if ps} for m in members}


def _check_topics(members: Mapping[str, MemberSpec], num_partitions: Mapping[uuid.UUID, int]) -> None:
    for spec in members.values():
        for t in spec.subscribed:
            if t not in num_partitions:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {t} which doesn't exist in the topic metadata."
                )


class UniformAssignor:
    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], num_partitions: Mapping[uuid.UUID, int]) -> Assignment:
        if not members:
            return {}
        _check_topics(members, num_partitions)
        subs = {spec.subscribed for spec in members.values()}
        if len(subs) == 1:
            return self._homogeneous(members, num_partitions, next(iter(subs)))
        return self._heterogeneous(members, num_partitions)

    @staticmethod
    def _homogeneous(
        members: Mapping[str, MemberSpec], num_partitions: Mapping[uuid.UUID, int], topics: frozenset[uuid.UUID]
    ) -> Assignment:
        """``OptimizedUniformAssignmentBuilder.buildAssignment``."""
        out: dict[str, dict[uuid.UUID, set[int]]] = {}
        if not topics:
            return _frozen(out, members)
        total = sum(num_partitions[t] for t in topics)
        min_quota, extra = divmod(total, len(members))
        unassigned = {(t, p) for t in topics for p in range(num_partitions[t])}
        unfilled: dict[str, int] = {}
        for m in sorted(members):  # assignStickyPartitions
            # validCurrentMemberAssignment; a partition beyond the topic's count is gone (shrunk or re-created)
            valid = [
                (t, p)
                for t in sorted(members[m].assigned)
                if t in topics
                for p in sorted(members[m].assigned[t])
                if p < num_partitions[t]
            ]
            remaining = min_quota - len(valid)
            if valid:
                kept = min(len(valid), min_quota)
                for tp in valid[:kept]:
                    _add(out, m, *tp)
                    unassigned.discard(tp)
                if remaining < 0 and extra > 0:
                    tp = valid[kept]
                    _add(out, m, *tp)
                    unassigned.discard(tp)
                    extra -= 1
            if remaining >= 0:
                unfilled[m] = remaining
        # unassignedPartitionsRoundRobinAssignment
        queue = deque(unfilled)
        for tp in sorted(unassigned):
            for _ in range(len(queue)):
                m = queue.popleft()
                assigned = False
                remaining = unfilled.get(m)
                if remaining is not None:
                    if remaining > 0:  # maybeAssignPartitionToMember
                        remaining -= 1
                        unfilled[m] = remaining
                        assigned = True
                        if remaining == 0 and extra == 0:
                            del unfilled[m]
                    elif remaining == 0 and extra > 0:
                        extra -= 1
                        del unfilled[m]
                        assigned = True
                    if assigned:
                        _add(out, m, *tp)
                if m in unfilled:
                    queue.append(m)
                if assigned:
                    break
            else:
                raise PartitionAssignorError("Partitions were left unassigned")
        return _frozen(out, members)

    @staticmethod
    def _heterogeneous(members: Mapping[str, MemberSpec], num_partitions: Mapping[uuid.UUID, int]) -> Assignment:
        """Different subscriptions: keep current partitions still subscribed (each partition once), give
        the rest to the least-loaded subscriber, then move partitions from a subscriber with two or more
        than another subscriber of that topic until no such pair remains."""
        owner: dict[tuple[uuid.UUID, int], str] = {}
        load = dict.fromkeys(members, 0)
        for m in sorted(members):
            spec = members[m]
            for t in sorted(spec.assigned):
                if t not in spec.subscribed:
                    continue
                for p in sorted(spec.assigned[t]):
                    if p < num_partitions[t] and (t, p) not in owner:
                        owner[(t, p)] = m
                        load[m] += 1
        subscribers: dict[uuid.UUID, list[str]] = {}
        for m in sorted(members):
            for t in members[m].subscribed:
                subscribers.setdefault(t, []).append(m)
        # topics with fewer subscribers first, as Kafka's builder does, so constrained partitions go first
        for t in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
            for p in range(num_partitions[t]):
                if (t, p) not in owner:
                    m = min(subscribers[t], key=lambda m: (load[m], m))
                    owner[(t, p)] = m
                    load[m] += 1
        moved = True
        while moved:  # balance: each move lowers the sum of squared loads, so this ends
            moved = False
            for (t, p), m in sorted(owner.items()):
                target = min(subscribers[t], key=lambda x: (load[x], x))
                if load[m] - load[target] >= 2:
                    owner[(t, p)] = target
                    load[m] -= 1
                    load[target] += 1
                    moved = True
        out: dict[str, dict[uuid.UUID, set[int]]] = {}
        for (t, p), m in owner.items():
            _add(out, m, t, p)
        return _frozen(out, members)


class RangeAssignor:
    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], num_partitions: Mapping[uuid.UUID, int]) -> Assignment:
        """``RangeAssignor.assign``."""
        _check_topics(members, num_partitions)
        out: dict[str, dict[uuid.UUID, set[int]]] = {}
        per_topic: dict[uuid.UUID, list[str]] = {}
        for m in sorted(members):
            for t in members[m].subscribed:
                per_topic.setdefault(t, []).append(m)
        for t in sorted(per_topic):
            subscribers = per_topic[t]
            n = num_partitions[t]
            min_quota, with_extra = divmod(n, len(subscribers))
            sticky: set[int] = set()
            unfilled: list[tuple[str, int]] = []
            for m in subscribers:
                current = sorted(p for p in members[m].assigned.get(t, ()) if p < n)
                for p in current[: min(len(current), min_quota)]:
                    sticky.add(p)
                    _add(out, m, t, p)
                remaining = min_quota - len(current)
                if remaining < 0 and with_extra > 0:
                    with_extra -= 1
                    sticky.add(current[min_quota])
                    _add(out, m, t, current[min_quota])
                else:
                    unfilled.append((m, remaining))
            free = [p for p in range(n) if p not in sticky]
            start = 0
            for m, remaining in unfilled:
                if with_extra > 0:
                    remaining += 1
                    with_extra -= 1
                if remaining > 0:
                    for p in free[start : start + remaining]:
                        _add(out, m, t, p)
                    start += remaining
        return _frozen(out, members)


ASSIGNORS = {"uniform": UniformAssignor(), "range": RangeAssignor()}
