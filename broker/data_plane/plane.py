"""``DataPlane``: the per-API parts of this package put together, and the topics' partition logs.

The rest of the broker holds a ``DataPlane`` (``node.py`` registers its ``handlers()``, the
transaction shell calls ``write_txn_markers`` and sets ``txn_verifier``, the metrics read
``parked_fetches``). Each part is handed the one shared ``DataState`` and the collaborators it
calls: Produce and the markers wake the fetches parked on a partition through Fetch's ``notify``.

Topics. Creating a topic or adding partitions creates the partition logs, deleting a topic deletes
them (and answers the fetches parked on them); logs whose topic no longer exists are removed at
start-up. Each topic's ``LogConfig`` comes from its configs (``topic_log_config``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from groupd.protocol.server import Request
from groupd.storage import Appender, LogManager
from groupd.storage.errors import StorageError

from ..producer_state import PartitionProducers
from ..settings import Config
from ..topics import OFFSETS_TOPIC, Topic, TopicRegistry
from .describe_producers import DESCRIBE_PRODUCERS_VERSIONS, DescribeProducersHandler
from .fetch import FETCH_VERSIONS, FetchHandler
from .list_offsets import LIST_OFFSETS_VERSIONS, ListOffsetsHandler
from .maintenance import Maintenance
from .markers import MarkerWriter
from .produce import PRODUCE_VERSIONS, ProduceHandler, TxnAdder
from .producer_ids import INIT_PRODUCER_ID_VERSIONS, PRODUCER_ID_FILE, ProducerIdManager, init_producer_id
from .producers import ProducerStates
from .state import DataState, Key, wall_ms

log = structlog.get_logger("groupd.data")

__all__ = ["DataPlane"]


class DataPlane:
    """The per-API parts of the data plane put together, and the topic-lifecycle callbacks."""

    def __init__(
        self,
        config: Config,
        topics: TopicRegistry,
        logs: LogManager,
        appender: Appender,
        *,
        data_dir: Path | None = None,
        clock: Callable[[], int] = wall_ms,
        producer_id_expiration_ms: int | None = None,
        retention_check_interval_ms: int | None = None,
    ) -> None:
        self.config = config
        self.topics = topics
        self.logs = logs
        self.appender = appender
        self.clock = clock
        self.data_dir = Path(data_dir if data_dir is not None else config.data_dir)
        self.state = DataState(
            config,
            topics,
            logs,
            appender,
            clock,
            producer_id_expiration_ms if producer_id_expiration_ms is not None else config.producer_id_expiration_ms,
        )
        self.producer_ids = ProducerIdManager(self.data_dir / PRODUCER_ID_FILE)
        self.producer_states = ProducerStates(self.state)
        self.fetch_handler = FetchHandler(self.state, self.producer_states)
        # A finished append, data batch or marker, wakes the fetches parked on its partition.
        self.produce_handler = ProduceHandler(self.state, self.producer_states, wake=self.fetch_handler.notify)
        # The API table's Produce handler (``b.data.produce``) is the handler itself: one call fewer
        # per request than the method below, which stays as the documented entry.
        self.produce = self.produce_handler.handle  # type: ignore[method-assign]
        self.fetch = self.fetch_handler.handle  # type: ignore[method-assign]  # (Fetch: the same)
        self.markers = MarkerWriter(self.state, self.producer_states, wake=self.fetch_handler.notify)
        self.list_offsets_handler = ListOffsetsHandler(self.state, self.producer_states)
        self.describe_producers_handler = DescribeProducersHandler(self.state, self.producer_states)
        self.maintenance = Maintenance(
            self.state,
            self.producer_states,
            retention_check_interval_ms=(
                retention_check_interval_ms
                if retention_check_interval_ms is not None
                else config.log_retention_check_interval_ms
            ),
            cleaner_backoff_ms=config.log_cleaner_backoff_ms,
        )
        self.cleaner = self.maintenance.cleaner

    # --- wiring -----------------------------------------------------------------------------------
    def handlers(self) -> list[tuple[str, Callable[[Request], Any], tuple[int, int]]]:
        """(API name, handler, (min, max) version) for the dispatcher."""
        return [
            ("Produce", self.produce_handler.handle, PRODUCE_VERSIONS),
            # With the fetch sessions of a broker of its own (a dispatcher without the broker's
            # wrappers); ``Broker._register`` puts them in front of the ACL and leader checks.
            ("Fetch", self.fetch_handler.with_sessions(self.fetch_handler.handle), FETCH_VERSIONS),
            ("ListOffsets", self.list_offsets_handler.handle, LIST_OFFSETS_VERSIONS),
            ("InitProducerId", self.init_producer_id, INIT_PRODUCER_ID_VERSIONS),
            ("DescribeProducers", self.describe_producers_handler.handle, DESCRIBE_PRODUCERS_VERSIONS),
        ]

    def register_topic_callbacks(self, admin: Any) -> None:
        admin.on_topic_created.append(self.topic_created)
        admin.on_topic_deleted.append(self.topic_deleted)
        admin.on_partitions_added.append(self.partitions_added)

    def start(self) -> None:
        """After the topic registry is loaded and the logs are open: reconcile logs with topics,
        load the producer-id block, start the maintenance tasks (when a loop is running)."""
        self.producer_ids.load()
        for topic, partition in self.logs.partitions():
            t = self.topics.get(topic)
            if t is None or partition >= t.partitions:
                log.warning("stray_log_deleted", topic=topic, partition=partition)
                self.logs.delete(topic, partition)
        for t in list(self.topics.topics.values()):
            if t.name != OFFSETS_TOPIC:
                for p in range(t.partitions):
                    self.logs.get_or_create(t.name, p)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self.maintenance.start()

    async def close(self) -> None:
        await self.maintenance.close()
        await self.producer_states.close()
        self.fetch_handler.complete_all()

    # --- the APIs (the handlers the dispatcher calls, and the transaction shell's channels) --------
    def produce(self, req: Request) -> Any:
        return self.produce_handler.handle(req)

    def fetch(self, req: Request) -> Any:
        """The partitions the request names, read: no session (``fetch_sessions`` goes in front)."""
        return self.fetch_handler.handle(req)

    def fetch_sessions(self, inner: Callable[[Request], Any], node_id: int | None) -> Callable[[Request], Any]:
        """The Fetch route ``inner`` behind broker ``node_id``'s fetch sessions (``FetchHandler.with_sessions``)."""
        return self.fetch_handler.with_sessions(inner, node_id)

    def list_offsets(self, req: Request) -> Any:
        return self.list_offsets_handler.handle(req)

    def describe_producers(self, req: Request) -> Any:
        return self.describe_producers_handler.handle(req)

    def init_producer_id(self, req: Request) -> dict[str, Any]:
        return init_producer_id(self.producer_ids, req)

    async def write_txn_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[Key],
    ) -> dict[Key, int]:
        """``MarkerWriter.write_txn_markers``: the Kafka error code per partition."""
        return await self.markers.write_txn_markers(
            producer_id, producer_epoch, committed, coordinator_epoch, partitions
        )

    @property
    def txn_verifier(self) -> Callable[[str, int, int, str, int], int] | None:
        """KIP-890's verification of a transactional batch, set by the transaction shell."""
        return self.produce_handler.txn_verifier

    @txn_verifier.setter
    def txn_verifier(self, verifier: Callable[[str, int, int, str, int], int] | None) -> None:
        self.produce_handler.txn_verifier = verifier

    @property
    def txn_adder(self) -> TxnAdder | None:
        """Transaction version 2: adds a partition to a producer's transaction for Produce v12+,
        set by the node (the transaction shell's ``add_partitions_with_retry``)."""
        return self.produce_handler.txn_adder

    @txn_adder.setter
    def txn_adder(self, adder: TxnAdder | None) -> None:
        self.produce_handler.txn_adder = adder

    @property
    def parked_fetches(self) -> int:
        """Fetches waiting for min_bytes or max_wait_ms (the ``groupd_fetch_parked`` gauge)."""
        return self.fetch_handler.parked_fetches

    def fetch_session_stats(self) -> dict[str, int]:
        """The fetch session caches of every broker, and the Fetch requests by context (metrics)."""
        h = self.fetch_handler
        st = h.session_stats
        return {
            "sessions": h.fetch_sessions,
            "partitions": h.fetch_session_partitions,
            "evictions": h.fetch_session_evictions,
            "sessionless": st.sessionless,
            "full": st.full,
            "incremental": st.incremental,
            "error": st.error,
        }

    async def run_maintenance(self) -> dict[Key, Any]:
        return await self.maintenance.run_maintenance()

    async def run_cleaner(self) -> dict[Key, Any]:
        return await self.maintenance.run_cleaner()

    async def run_retention(self) -> dict[Key, Any]:
        return await self.maintenance.run_retention()

    # --- topic lifecycle --------------------------------------------------------------------------
    def topic_created(self, t: Topic) -> None:
        for p in range(t.partitions):
            self._create_partition(t.name, p)

    def partitions_added(self, t: Topic, before: int) -> None:
        for p in range(before, t.partitions):
            self._create_partition(t.name, p)

    def _create_partition(self, topic: str, p: int) -> None:
        try:
            plog = self.logs.get_or_create(topic, p)
        except (StorageError, ValueError) as exc:
            # Produce retries creation lazily; the topic exists either way.
            log.error("partition_create_failed", topic=topic, partition=p, error=str(exc))
            return
        if plog.log_end_offset == 0:
            self.state.producers[(topic, p)] = PartitionProducers()  # nothing to rebuild

    def topic_deleted(self, t: Topic) -> None:
        for topic, p in self.logs.partitions(t.name):
            plog = self.logs.get(topic, p)
            try:
                self.logs.delete(topic, p)
            except StorageError as exc:
                log.error("partition_delete_failed", topic=topic, partition=p, error=str(exc))
            if plog is not None:
                self.appender.forget(plog)
                self.cleaner.forget(plog)
        self.producer_states.forget_topic(t.name)
        self.fetch_handler.drop_topic(t.name)
