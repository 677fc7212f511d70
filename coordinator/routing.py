"""Where a group lives: its ``__consumer_offsets`` partition and the node owning that partition.

The hash itself (Java's ``String.hashCode`` and Kafka's ``Utils.abs``) lives in
``protocol/partitioning.py``, shared with the transaction coordinator; it is re-exported here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from ..protocol.partitioning import coordinator_partition, java_string_hashcode, kafka_abs

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


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


class PartitionOwnership:
    """Which node leads each ``__consumer_offsets`` partition.

    One node owns everything today; a cluster would hand each node a disjoint set and the same
    FindCoordinator/NOT_COORDINATOR logic keeps working.
    """

    def __init__(self, local: Node, num_partitions: int = 50, owners: dict[int, Node] | None = None):
        self.local = local
        self.num_partitions = num_partitions
        self._owners: dict[int, Node] = dict(owners) if owners else {p: local for p in range(num_partitions)}

    def owner(self, partition: int) -> Node | None:
        return self._owners.get(partition)

    def is_local(self, partition: int) -> bool:
        node = self._owners.get(partition)
        return node is not None and node.node_id == self.local.node_id

    def local_partitions(self) -> Iterable[int]:
        return (p for p, n in self._owners.items() if n.node_id == self.local.node_id)

    def assign(self, partition: int, node: Node) -> None:
        self._owners[partition] = node
