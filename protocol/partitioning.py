"""Where a coordinator key lives: Kafka's ``Utils.abs(key.hashCode()) % partitions``.

Shared by the group coordinator (``__consumer_offsets``, keyed by group id) and the transaction
coordinator (``__transaction_state``, keyed by transactional id): both sit on floor 2 and must not
import each other, so the hash lives here. Python's ``hash()`` is salted per process and must never
decide placement (design principle 6); this is Java's ``String.hashCode`` over UTF-16 code units with
int32 overflow, then Kafka's ``Utils.abs`` (which maps Integer.MIN_VALUE to 0, unlike ``Math.abs``).
"""

from __future__ import annotations


def java_string_hashcode(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    return 0 if n == -(2**31) else abs(n)


def coordinator_partition(key: str, num_partitions: int) -> int:
    """The partition of a coordinator topic that holds ``key`` (a group id or a transactional id)."""
    return kafka_abs(java_string_hashcode(key)) % num_partitions
