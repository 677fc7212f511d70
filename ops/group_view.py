"""Read-only views of the live groups, their committed offsets and the logs' end offsets.

Shared by the metrics (lag gauges) and the dashboard. Everything here is read when asked (at scrape
time, at a dashboard tick), on the event loop, from the coordinator's and the log manager's own
dicts: nothing is kept, nothing is hooked into the request path.

Lag is Kafka's consumer lag as ``kafka-consumer-groups.sh --describe`` shows it: the partition's
log end offset minus the group's committed offset (``ConsumerGroupCommand``'s
``getLogEndOffset - offset``), for partitions the group has committed. A committed offset past the
end (a topic deleted and created again) counts as 0, not as negative lag.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

from groupd.coordinator import ClassicGroup, GroupCoordinator, Member
from groupd.coordinator.consumer import ConsumerGroup
from groupd.coordinator.consumer.member import Partitions
from groupd.coordinator.consumer_protocol import ConsumerProtocolError, decode_assignment
from groupd.storage import LogManager

# Groups the core knows only from committed offsets (not yet restored as a ClassicGroup) are what
# DescribeGroups would answer for them: Empty.
EMPTY = "Empty"


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed: int
    end: int | None  # None: the partition has no log here (its topic was deleted)

    @property
    def lag(self) -> int | None:
        return None if self.end is None else max(self.end - self.committed, 0)


@dataclass
class GroupLag:
    group_id: str
    partitions: list[PartitionLag] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    def by_topic(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.partitions:
            out[p.topic] = out.get(p.topic, 0) + (p.lag or 0)
        return out


def group_ids(core: GroupCoordinator) -> set[str]:
    """Every group the core knows: live ones (classic and KIP-848 consumer groups) and those that
    only have committed offsets."""
    return set(core.groups) | set(core.offsets) | set(core.consumer.groups.groups)


def consumer_group(core: GroupCoordinator, group_id: str) -> ConsumerGroup | None:
    """The KIP-848 consumer group of that id, if it is one."""
    return core.consumer.group(group_id)


def group_type(core: GroupCoordinator, group_id: str) -> str:
    """ListGroups v5's type: "consumer" for a KIP-848 group, "classic" for the others."""
    return "consumer" if core.consumer.group(group_id) is not None else "classic"


def consumer_assignment(core: GroupCoordinator, parts: Partitions) -> list[tuple[str, list[int]]]:
    """A consumer group's partitions (by topic id) by topic name; a deleted topic's id stays an id."""
    names = {tid: name for name, (tid, _n) in core.consumer.topics.topics.items()}
    return sorted((names.get(t, str(t)), sorted(ps)) for t, ps in parts.items())


def lag_of(core: GroupCoordinator, logs: LogManager | None, group_id: str) -> GroupLag:
    out = GroupLag(group_id)
    for (topic, partition), value in core.offsets.get(group_id, {}).items():
        plog = logs.get(topic, partition) if logs is not None else None
        out.partitions.append(
            PartitionLag(topic, partition, value.offset, plog.log_end_offset if plog is not None else None)
        )
    out.partitions.sort(key=lambda p: (p.topic, p.partition))
    return out


def all_lags(core: GroupCoordinator, logs: LogManager | None) -> Iterator[GroupLag]:
    for gid in core.offsets:
        yield lag_of(core, logs, gid)


def state_of(core: GroupCoordinator, group_id: str) -> str:
    group = core.groups.get(group_id)
    if group is not None:
        return str(group.state)
    modern = core.consumer.group(group_id)
    return modern.state.value if modern is not None else EMPTY


def size_of(core: GroupCoordinator, group_id: str) -> int:
    group = core.groups.get(group_id) or core.consumer.group(group_id)
    return len(group.members) if group is not None else 0


def assignment_of(group: ClassicGroup, member: Member) -> list[tuple[str, list[int]]]:
    """The member's partitions, decoded from the consumer protocol; [] for other protocol types
    (connect, a custom one) or bytes that are not a consumer assignment."""
    if not member.assignment or not group.uses_consumer_protocol():
        return []
    return [(topic, list(parts)) for topic, parts in _decoded(member.assignment)]


@functools.lru_cache(maxsize=4096)
def _decoded(data: bytes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    # Decoding was two thirds of a dashboard view's cost; an assignment only changes per rebalance,
    # and bytes cache their hash, so a view of unchanged groups decodes nothing.
    try:
        decoded = decode_assignment(data)
    except ConsumerProtocolError:
        return ()
    return tuple((tp.topic, tuple(sorted(tp.partitions))) for tp in decoded.assigned_partitions)
