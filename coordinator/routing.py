"""Where a group lives: its ``__consumer_offsets`` partition and the node owning that partition.

The hash itself (Java's ``String.hashCode`` and Kafka's ``Utils.abs``) lives in
``protocol/partitioning.py``, shared with the transaction coordinator; it is re-exported here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from groupd.protocol.frozen import frozen_record

from ..protocol.partitioning import coordinator_partition, java_string_hashcode, kafka_abs

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

__all__ = [
    "JAVA_HASHMAP_INITIAL_CAPACITY",
    "Node",
    "PartitionOwnership",
    "java_hashmap_capacity",
    "java_hashmap_order",
    "java_string_hashcode",
    "kafka_abs",
    "partition_for",
]


# java.util.HashMap: the table starts at 16 buckets (allocated by the first put) and doubles
# whenever the size goes past 3/4 of it; it never shrinks.
JAVA_HASHMAP_INITIAL_CAPACITY = 16


def java_hashmap_capacity(size: int, capacity: int = JAVA_HASHMAP_INITIAL_CAPACITY) -> int:
    """The table size of a ``java.util.HashMap`` of ``capacity`` buckets once it holds ``size`` entries."""
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def java_hashmap_order(keys: Iterable[str], capacity: int | None = None) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order a ``HashMap<String, ?>`` iterates them.

    The bucket of a key is ``(h ^ (h >>> 16)) & (capacity - 1)`` with ``h = String.hashCode()``;
    buckets are walked in index order and a bucket's chain in insertion order (a resize splits
    chains without reordering them). Bins of 8+ keys in a table of 64+ buckets become trees whose
    order this does not model; no group has that many colliding protocol names or members.
    """
    ordered = list(keys)
    mask = (capacity if capacity is not None else java_hashmap_capacity(len(ordered))) - 1
    # sorted() is stable: equal buckets keep insertion order.
    return sorted(ordered, key=lambda key: _spread_hash(key) & mask)


@functools.lru_cache(maxsize=1 << 16)
def _spread_hash(key: str) -> int:
    """HashMap.hash(key): the String hash code with its high half folded into the low one."""
    h = java_string_hashcode(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


# Every group request routes through here (NOT_COORDINATOR / load-in-progress checks), and the
# UTF-16 loop costs ~4 us for a 14-character id, ~10% of a heartbeat's server CPU. Bounded, so a
# client inventing group ids cannot grow it without limit.
@functools.lru_cache(maxsize=1 << 16)
def partition_for(group_id: str, num_partitions: int = 50) -> int:
    return coordinator_partition(group_id, num_partitions)


@frozen_record
class Node:
    node_id: int
    host: str
    port: int

    def __init__(self, node_id: int, host: str, port: int) -> None:
        _set(self, "node_id", node_id)
        _set(self, "host", host)
        _set(self, "port", port)


class PartitionOwnership:
    """Which node leads each ``__consumer_offsets`` partition, and at which leader epoch.

    ``local`` is the node of a single broker; ``nodes`` are every broker this process runs. A
    cluster in one process shares one coordinator core, so a partition is the core's to serve
    (``is_local``) when any of them leads it, while a request is served only by the broker that
    leads its group's partition (``owner_ids``: what the core compares with the receiving broker's
    node id, one list index per request). The leader epoch is bumped on every election, as KRaft
    bumps a partition's leader epoch on every leader change; the core fences stale loads and
    unloads with it (Kafka's ``CoordinatorRuntime`` context epoch).
    """

    def __init__(
        self,
        local: Node,
        num_partitions: int = 50,
        owners: dict[int, Node] | None = None,
        *,
        nodes: Iterable[Node] = (),
    ):
        self.local = local
        self.num_partitions = num_partitions
        self.nodes: dict[int, Node] = {local.node_id: local}
        for node in nodes:
            self.nodes[node.node_id] = node
        self._owners: dict[int, Node] = dict(owners) if owners else {p: local for p in range(num_partitions)}
        # -1: nobody leads the partition (between a resignation and the next election)
        self.owner_ids: list[int] = [-1] * num_partitions
        for p, node in self._owners.items():
            self.owner_ids[p] = node.node_id
        self.epochs: list[int] = [0] * num_partitions

    def owner(self, partition: int) -> Node | None:
        return self._owners.get(partition)

    def epoch(self, partition: int) -> int:
        return self.epochs[partition]

    def is_local(self, partition: int) -> bool:
        return self.owner_ids[partition] in self.nodes

    def is_owned_by(self, partition: int, node_id: int) -> bool:
        return self.owner_ids[partition] == node_id

    def local_partitions(self) -> Iterable[int]:
        return (p for p, n in self._owners.items() if n.node_id in self.nodes)

    def partitions_of(self, node_id: int) -> list[int]:
        return [p for p, owner in enumerate(self.owner_ids) if owner == node_id]

    def assign(self, partition: int, node: Node | None, epoch: int | None = None) -> int:
        """Make ``node`` (None: nobody) the leader of ``partition``; returns the new leader epoch,
        ``epoch`` when given (it must not go back), else the previous one + 1."""
        current = self.epochs[partition]
        if epoch is None:
            epoch = current + 1
        elif epoch < current:
            raise ValueError(f"partition {partition}: leader epoch {epoch} is older than {current}")
        self.epochs[partition] = epoch
        if node is None:
            self._owners.pop(partition, None)
            self.owner_ids[partition] = -1
        else:
            self._owners[partition] = node
            self.owner_ids[partition] = node.node_id
            self.nodes.setdefault(node.node_id, node)
        return epoch
