"""The iteration orders of Java's hash collections, so that the assignors' ports tie-break as Kafka does.

Kafka's server assignors iterate ``HashMap``/``HashSet`` instances of member ids (``String``), topic
ids (``Uuid``), partitions (``Integer``) and ``TopicIdPartition`` records, and their results depend on
that order: who is first in a tie, which partitions a member over its quota gives up. This module
models the tables those orders come from:

- ``JavaHashMap``: ``java.util.HashMap`` (and ``HashSet``, a ``HashMap`` of keys): the table size as
  the constructors and ``resize`` set it, buckets walked in index order and each chain in link order:
  ``put`` appends, ``computeIfAbsent`` links at the head (a resize splits chains without reordering
  them; a long chain in a table under 64 resizes, as ``treeifyBin`` does). Tree bins (8+ colliding
  keys in a table of 64+) are not modelled.
- ``timeline_order``: ``org.apache.kafka.timeline.TimelineHashMap`` (a consumer group's members), whose
  ``BaseHashTable`` slots by Fibonacci hashing and whose iterator walks each slot's chain backwards.
- the ``hashCode`` of each key type: ``String.hashCode``, ``Integer``, ``Uuid.hashCode`` and the record
  ``TopicIdPartition`` (``31 * topicId.hashCode() + partitionId``, as OpenJDK's ``ObjectMethods``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

from ...protocol.partitioning import java_string_hashcode

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MASK32 = 0xFFFFFFFF
DEFAULT_INITIAL_CAPACITY = 16  # HashMap.DEFAULT_INITIAL_CAPACITY
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


# -- hashCode of the key types, as unsigned 32-bit values ------------------------------------------


def string_hash(s: str) -> int:
    return java_string_hashcode(s) & _MASK32


def int_hash(i: int) -> int:
    return i & _MASK32


@functools.lru_cache(maxsize=1 << 12)
def uuid_hash(u: uuid.UUID) -> int:
    """``Uuid.hashCode``: ``(int) (xor >> 32) ^ (int) xor`` of the two halves' xor."""
    xor = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return ((xor >> 32) ^ xor) & _MASK32


def topic_partition_hash(tp: tuple[uuid.UUID, int]) -> int:
    """``TopicIdPartition.hashCode`` (a record: ``31 * h(topicId) + h(partitionId)``)."""
    return (31 * uuid_hash(tp[0]) + tp[1]) & _MASK32


def _signed64(v: int) -> int:
    return v - (1 << 64) if v & (1 << 63) else v


def uuid_order_key(u: uuid.UUID) -> tuple[int, int]:
    """``Uuid.compareTo``: the most then the least significant halves, compared as signed longs."""
    return _signed64(u.int >> 64), _signed64(u.int & 0xFFFFFFFFFFFFFFFF)


def java_string_key(s: str) -> bytes:
    """``String.compareTo`` orders UTF-16 code units; their big-endian bytes sort the same way."""
    return s.encode("utf-16-be", "surrogatepass")


# -- java.util.HashMap ------------------------------------------------------------------------------


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= ``capacity`` (at least 1)."""
    n = 1
    while n < capacity:
        n <<= 1
    return n


def capacity_for(expected: int) -> int:
    """``AssignorHelpers.newHashMap``/``newHashSet``'s initial capacity: ``(int) (((n + 1) / 0.75f) + 1)``."""
    return int((expected + 1) / 0.75 + 1)


def copy_capacity(size: int) -> int:
    """``new HashSet<>(collection)``'s initial capacity: ``Math.max((int) (size / .75f) + 1, 16)``."""
    return max(int(size / 0.75) + 1, DEFAULT_INITIAL_CAPACITY)


class JavaHashMap(Generic[K, V]):
    """A ``java.util.HashMap`` whose iteration order is Java's for keys hashed by ``hash_code``.

    ``initial_capacity`` None is ``new HashMap<>()``; an int is ``new HashMap<>(initialCapacity)``.
    Lookups go through a dict; the table only records the order.
    """

    __slots__ = ("_hash", "_table", "_threshold", "_values")

    def __init__(self, hash_code: Callable[[K], int], initial_capacity: int | None = None) -> None:
        self._hash = hash_code
        self._values: dict[K, V] = {}
        self._table: list[list[K]] | None = None
        # an unallocated table keeps its first capacity in the threshold, as HashMap does
        self._threshold = 0 if initial_capacity is None else table_size_for(initial_capacity)

    @classmethod
    def copy_of(cls, hash_code: Callable[[K], int], keys: Iterable[K]) -> JavaHashMap[K, None]:
        """``new HashSet<>(collection)``: sized for the collection, filled in its iteration order."""
        ks = list(keys)
        out: JavaHashMap[K, None] = JavaHashMap(hash_code, copy_capacity(len(ks)))
        for k in ks:
            out.put(k, None)
        return out

    def _spread(self, key: K) -> int:
        h = self._hash(key)
        return h ^ (h >> 16)  # HashMap.hash

    def _resize(self) -> None:
        """``HashMap.resize``: allocate the table or double it, each chain split into a low and a
        high half that keep their order."""
        old = self._table
        if old is None:
            cap = self._threshold if self._threshold > 0 else DEFAULT_INITIAL_CAPACITY
            self._table = [[] for _ in range(cap)]
        else:
            old_cap = len(old)
            cap = old_cap * 2
            table: list[list[K]] = [[] for _ in range(cap)]
            for j, chain in enumerate(old):
                for k in chain:
                    table[j + old_cap if self._spread(k) & old_cap else j].append(k)
            self._table = table
        self._threshold = int(cap * 0.75)

    def put(self, key: K, value: V) -> None:
        if key in self._values:
            self._values[key] = value  # a replaced value keeps its place
            return
        if self._table is None:
            self._resize()
        assert self._table is not None
        chain = self._table[self._spread(key) & (len(self._table) - 1)]
        chain.append(key)
        self._values[key] = value
        if len(chain) > _TREEIFY_THRESHOLD and len(self._table) < _MIN_TREEIFY_CAPACITY:
            self._resize()  # treeifyBin on a small table resizes instead
        if len(self._values) > self._threshold:
            self._resize()

    def add(self, key: K) -> bool:
        """``HashSet.add``: True when the key was not there."""
        if key in self._values:
            return False
        self.put(key, None)  # type: ignore[arg-type]
        return True

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._values.get(key, default)

    def __getitem__(self, key: K) -> V:
        return self._values[key]

    def compute_if_absent(self, key: K, make: Callable[[], V]) -> V:
        """``HashMap.computeIfAbsent``, which differs from ``put``: it resizes before adding (when the
        map is already past its threshold), links the new entry at the head of its chain, and turns a
        chain of 8 (not 9) into a tree bin -- which on a small table is a resize."""
        if key in self._values:
            return self._values[key]
        if self._table is None or len(self._values) > self._threshold:
            self._resize()
        assert self._table is not None
        chain = self._table[self._spread(key) & (len(self._table) - 1)]
        value = make()
        chain.insert(0, key)
        self._values[key] = value
        if len(chain) >= _TREEIFY_THRESHOLD and len(self._table) < _MIN_TREEIFY_CAPACITY:
            self._resize()
        return value

    def remove(self, key: K) -> bool:
        if key not in self._values:
            return False
        del self._values[key]
        assert self._table is not None
        self._table[self._spread(key) & (len(self._table) - 1)].remove(key)
        return True

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[K]:
        """The keys in Java's iteration order (a snapshot: removing the key just returned while walking
        it is what ``Iterator.remove`` does)."""
        return [k for chain in self._table or () for k in chain]

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def items(self) -> list[tuple[K, V]]:
        return [(k, self._values[k]) for k in self.keys()]


def hash_set(hash_code: Callable[[K], int], keys: Iterable[K] = (), initial_capacity: int | None = None) -> JavaHashMap:
    """``new HashSet<>(initialCapacity)`` filled with ``keys`` one ``add`` at a time."""
    out: JavaHashMap = JavaHashMap(hash_code, initial_capacity)
    for k in keys:
        out.add(k)
    return out


def java_hashmap_order(keys: Iterable[str], peak_size: int = 0) -> list[str]:
    """Member ids (distinct, in insertion order) as ``new HashMap<String, ?>()`` iterates them, its table
    sized for ``peak_size`` entries when it once held more than it does now (a table never shrinks)."""
    m: JavaHashMap[str, None] = JavaHashMap(string_hash)
    for k in keys:
        m.put(k, None)
    order = m.keys()
    cap = len(m._table or ())
    while peak_size > cap * 0.75:
        cap *= 2
    if cap > len(m._table or ()):
        # a bigger table splits chains without reordering them: a stable sort by the new bucket
        order.sort(key=lambda k: m._spread(k) & (cap - 1))
    return order


# -- org.apache.kafka.timeline.TimelineHashMap ------------------------------------------------------


def timeline_capacity(peak_size: int) -> int:
    """The slot count of a ``BaseHashTable`` created with expected size 0 once it has held ``peak_size``
    elements: 2, doubled before an add would pass a 0.75 load factor."""
    cap, size = 2, 0
    while size < peak_size:
        if (size + 1) * 0.75 > cap:
            cap *= 2
        size += 1
    return cap


def _timeline_slot(hash_code: int, capacity: int) -> int:
    """``BaseHashTable.findSlot``: the top bits of the (sign-extended) hash code times a 64-bit
    Fibonacci constant."""
    signed = hash_code - (1 << 32) if hash_code & 0x80000000 else hash_code
    product = (signed * -7046029254386353131) & 0xFFFFFFFFFFFFFFFF
    log2size = capacity.bit_length()
    return product >> (65 - log2size)


def timeline_order(keys: Iterable[str], peak_size: int | None = None) -> list[str]:
    """String keys (in insertion order) as a ``TimelineHashMap`` iterates them: slot by slot, and within
    a slot last inserted first (``SnapshottableHashTable.CurrentIterator`` pops its slot's list)."""
    ks = list(keys)
    cap = timeline_capacity(max(len(ks), peak_size or 0))
    slots: dict[int, list[str]] = {}
    for k in ks:
        slots.setdefault(_timeline_slot(string_hash(k), cap), []).append(k)
    return [k for s in sorted(slots) for k in reversed(slots[s])]
