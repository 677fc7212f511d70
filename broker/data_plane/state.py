"""The state every per-API part of the data plane shares, and the constants they agree on.

``DataState`` is handed to each part (composition: the parts never inherit from one another). It
holds what more than one API reads or writes: the topic registry, the partition logs, the
group-commit appender, the clock, and the producer state of each partition whose state is loaded
(``producer_state.PartitionProducers``, rebuilt by ``producers.py``). What only one API touches
stays with that API: parked fetches with Fetch (``fetch.py``), the cleaner with maintenance.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from groupd.storage import Appender, LogManager, PartitionLog

from ..producer_state import PartitionProducers
from ..settings import Config
from ..topics import Topic, TopicRegistry

__all__ = ["INT32_MAX", "INT64_MAX", "LEADER_EPOCH", "DataState", "Key", "Wake", "wall_ms"]

# One broker alone leads every partition at epoch 0 for ever; in cluster mode the logs stamp each
# batch with the partition's current epoch (PartitionLog.leader_epoch) and leader_guard checks the
# requests' epochs before they get here.
LEADER_EPOCH = 0
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

Key = tuple[str, int]  # (topic, partition)


class Wake(Protocol):
    """Wakes the fetches parked on a partition after ``size`` bytes were appended to it;
    ``stable_moved``: a marker moved its last stable offset (``FetchHandler.notify``)."""

    def __call__(self, key: Key, size: int, *, stable_moved: bool = False) -> None: ...


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class DataState:
    """Topics, logs, appender, clock and the loaded producer states, shared by the per-API parts."""

    __slots__ = ("appender", "clock", "config", "logs", "producer_id_expiration_ms", "producers", "topics")

    def __init__(
        self,
        config: Config,
        topics: TopicRegistry,
        logs: LogManager,
        appender: Appender,
        clock: Callable[[], int],
        producer_id_expiration_ms: int,
    ) -> None:
        self.config = config
        self.topics = topics
        self.logs = logs
        self.appender = appender
        self.clock = clock
        # Kafka's producer.id.expiration.ms: how long an idle producer's state is kept.
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # The producer state of each partition loaded so far (ProducerStateManager per log).
        self.producers: dict[Key, PartitionProducers] = {}

    def log_for(self, t: Topic, p: int) -> PartitionLog:
        """The partition's log, created if the topic's creation could not create it (Produce and
        Fetch retry it lazily)."""
        plog = self.logs.get(t.name, p)
        if plog is None:
            plog = self.logs.get_or_create(t.name, p)
        return plog
