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
from typing import Any

from groupd.coordinator import ClassicGroup, GroupCoordinator, Member
from groupd.coordinator.consumer import ConsumerGroup
from groupd.coordinator.consumer.member import Partitions
from groupd.coordinator.consumer_protocol import ConsumerProtocolError, decode_assignment
from groupd.coordinator.share import ShareGroup
from groupd.coordinator.share_partition.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE
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
    return set(core.groups) | set(core.offsets) | set(core.consumer.groups.groups) | set(core.share.groups.groups)


def consumer_group(core: GroupCoordinator, group_id: str) -> ConsumerGroup | None:
    """The KIP-848 consumer group of that id, if it is one."""
    return core.consumer.group(group_id)


def share_group(core: GroupCoordinator, group_id: str) -> ShareGroup | None:
    """The KIP-932 share group of that id, if it is one."""
    return core.share.group(group_id)


def group_type(core: GroupCoordinator, group_id: str) -> str:
    """ListGroups v5's type: "consumer" for a KIP-848 group, "share" for a KIP-932 one, "classic"
    for the others."""
    if core.consumer.group(group_id) is not None:
        return "consumer"
    return "share" if core.share.group(group_id) is not None else "classic"


@dataclass
class InFlight:
    """One share-partition's window (``SharePartition``'s cached state): its start and end offsets
    and its records by delivery state."""

    topic: str
    partition: int
    start: int
    end: int
    available: int
    acquired: int
    acknowledged: int
    archived: int
    log_end: int | None


def share_in_flight(share: Any, logs: LogManager | None, group_id: str, names: dict[Any, str]) -> list[InFlight]:
    """The share-partitions of a group this broker holds in memory (`share`: the broker's
    ``SharePartitions``; `names`: topic id -> name). Counted from ``SharePartition.record`` over the
    window, which ``share.max.inflight.records`` bounds."""
    out = []
    for key, sp in list(share.partitions.items()):
        if key.group_id != group_id:
            continue
        counts = dict.fromkeys((AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED), 0)
        for off in range(sp.start_offset, sp.end_offset):
            r = sp.record(off)
            if r is not None:
                counts[r[0]] = counts.get(r[0], 0) + 1
        topic = names.get(key.topic_id, str(key.topic_id))
        plog = logs.get(topic, key.partition) if logs is not None else None
        out.append(
            InFlight(
                topic,
                key.partition,
                sp.start_offset,
                sp.end_offset,
                counts[AVAILABLE],
                counts[ACQUIRED],
                counts[ACKNOWLEDGED],
                counts[ARCHIVED],
                plog.log_end_offset if plog is not None else None,
            )
        )
    out.sort(key=lambda f: (f.topic, f.partition))
    return out


def consumer_assignment(
    core: GroupCoordinator, parts: Partitions, names: dict[Any, str] | None = None
) -> list[tuple[str, list[int]]]:
    """A consumer (or share) group's partitions (by topic id) by topic name (`names`: topic id ->
    name, else the consumer groups' topics image); a deleted topic's id stays an id."""
    if names is None:
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
    modern = core.consumer.group(group_id) or core.share.group(group_id)
    return modern.state.value if modern is not None else EMPTY


def size_of(core: GroupCoordinator, group_id: str) -> int:
    group = core.groups.get(group_id) or core.consumer.group(group_id) or core.share.group(group_id)
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
