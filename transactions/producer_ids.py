"""Where the transaction coordinator gets producer ids: a collaborator passed in.

Kafka's coordinator asks a ``ProducerIdManager`` (blocks of ids handed out by the controller). In
groupd the data plane owns producer-id allocation for idempotent producers (``broker/data_plane/producer_ids.py``,
a persisted counter in the data directory: ``ProducerIdManager.allocate()``); the transaction
coordinator must draw from the same sequence, or an idempotent and a transactional producer could be
handed the same id. So it takes anything with ``allocate() -> int``; an ``OSError`` from it (the
counter could not be persisted) is answered with KAFKA_STORAGE_ERROR, as the data plane does.
"""

from __future__ import annotations

from typing import Protocol


class ProducerIdAllocator(Protocol):
    def allocate(self) -> int:
        """A producer id never handed out before (by this or any other caller of the allocator)."""
        ...


class CountingProducerIds:
    """An in-memory allocator: ids from ``start`` up (tests, and nodes without a data directory)."""

    def __init__(self, start: int = 0) -> None:
        self.next_id = start

    def allocate(self) -> int:
        pid = self.next_id
        self.next_id += 1
        return pid
