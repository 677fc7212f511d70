"""The partitions' producer states: loaded from the log on first use, snapshotted as Kafka does.

The state of one partition (``producer_state.PartitionProducers``: producers, epochs, the last
batches, open transactions, the aborted index) is not read at start-up. It is loaded the first time
an idempotent batch, a marker, a read_committed read, DescribeProducers or the cleaner needs it
(``load_producers``, in an executor: from the newest producer snapshot and the transaction indexes
plus the batches after the snapshot for a log that held transactions, else from its recent
segments; producers idle for Kafka's ``producer.id.expiration.ms`` are then dropped, unless a
transaction of theirs is open). Everything that needs the state while it loads queues behind the
load (``Load``) and goes on in arrival order, so sequence checks and log order agree.

Snapshots: after a segment roll (``snapshot_if_due``, written in an executor) and at a clean
shutdown (``close``: ``ProducerStateManager.takeSnapshot``), as Kafka takes them.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

import structlog
from groupd.storage import PartitionLog
from groupd.storage.errors import StorageEngineError

from ..producer_state import PartitionProducers, load_producers
from ..topics import OFFSETS_TOPIC
from .state import DataState, Key

__all__ = ["Load", "ProducerStates"]

log = structlog.get_logger("groupd.data")


class Load:
    """A rebuild of one partition's producer state and the batches waiting for it."""

    __slots__ = ("future", "waiting")

    def __init__(self, future: asyncio.Future[PartitionProducers]) -> None:
        self.future = future
        self.waiting = 0


class ProducerStates:
    """Loads (once, queueing the callers) and snapshots the producer states in ``state.producers``."""

    def __init__(self, state: DataState) -> None:
        self.state = state
        self.loading: dict[Key, Load] = {}
        self.snapshot_writes: set[asyncio.Future[None]] = set()  # producer snapshots being written

    # --- loading ----------------------------------------------------------------------------------
    def load_for(self, key: Key, plog: PartitionLog) -> Load | None:
        """The load an idempotent batch must queue behind (started now if the state was never
        loaded), or None when the state is loaded and nobody is queued before it."""
        load = self.loading.get(key)
        if load is None and key not in self.state.producers:
            load = self.loading[key] = Load(asyncio.ensure_future(self._load(key, plog)))
        return load

    def leave(self, key: Key, load: Load) -> None:
        """A waiter is done: the last one lets later callers take the direct path again; until
        then they queue behind the ones that arrived during the load."""
        load.waiting -= 1
        if load.waiting == 0 and self.loading.get(key) is load:
            del self.loading[key]

    async def state_for(self, key: Key, plog: PartitionLog) -> PartitionProducers | None:
        """The partition's producer state, rebuilt from the log first if needed; taking a place
        in the queue of batches waiting for that rebuild, so the order of arrival holds."""
        load = self.loading.get(key)
        if load is None:
            producers = self.state.producers.get(key)
            if producers is not None:
                return producers
            load = self.loading[key] = Load(asyncio.ensure_future(self._load(key, plog)))
        load.waiting += 1
        try:
            producers = await load.future
        finally:
            self.leave(key, load)
        return producers if self.state.logs.get(*key) is plog else None

    async def _load(self, key: Key, plog: PartitionLog) -> PartitionProducers:
        state = self.state
        t0 = time.perf_counter()
        since = state.clock() - state.producer_id_expiration_ms
        loop = asyncio.get_running_loop()
        try:
            producers = await loop.run_in_executor(None, load_producers, plog, since)
        except (StorageEngineError, OSError) as exc:
            log.error("producer_state_load_failed", topic=key[0], partition=key[1], error=str(exc))
            producers = PartitionProducers()
        # Appends of non-idempotent batches during the scan cannot add producers.
        if state.logs.get(*key) is not plog:
            return producers  # deleted meanwhile: the waiters see that and answer for themselves
        state.producers.setdefault(key, producers)
        log.info(
            "producer_state_loaded",
            topic=key[0],
            partition=key[1],
            producers=len(producers.producers),
            snapshot_offset=producers.loaded_from,
            batches_replayed=producers.replayed,
            ms=round((time.perf_counter() - t0) * 1000, 1),
        )
        return state.producers[key]

    def unloaded(
        self, body: dict[str, Any], field: str = "topic", parts: str = "partitions", index: str = "partition"
    ) -> list[tuple[Key, PartitionLog]]:
        """The partitions a request names whose producer state (hence LSO and aborted index) must
        be rebuilt from the log first; ``field``, ``parts``, ``index`` name the request's fields
        (``index`` empty: the partitions are a list of indexes)."""
        state = self.state
        out = []
        for tp in body["topics"] or []:
            t = state.topics.get(tp[field])
            for fp in tp[parts] or []:
                i = fp[index] if index else fp
                key = (tp[field], i)
                if t is None or t.name == OFFSETS_TOPIC or not 0 <= i < t.partitions or key in state.producers:
                    continue
                plog = state.logs.get(*key)
                if plog is not None:
                    out.append((key, plog))
        return out

    async def after_load(self, missing: list[tuple[Key, PartitionLog]], retry: Callable[[], Any]) -> Any:
        """Load the states ``missing`` names, then handle the request again (``retry``): a topic
        deleted and recreated meanwhile loads again, bounded by the topics' churn."""
        for key, plog in missing:
            await self.state_for(key, plog)
        result = retry()
        return await result if inspect.isawaitable(result) else result

    def forget_topic(self, name: str) -> None:
        for key in [k for k in self.state.producers if k[0] == name]:
            del self.state.producers[key]
        for key in [k for k in self.loading if k[0] == name]:
            del self.loading[key]

    # --- snapshots --------------------------------------------------------------------------------
    def snapshot_if_due(self, plog: PartitionLog, producers: PartitionProducers) -> None:
        """Write the snapshot a segment roll calls for, in an executor."""
        job = producers.snapshot_job(plog)
        if job is None:
            return
        write = asyncio.get_running_loop().run_in_executor(None, job)
        self.snapshot_writes.add(write)

        def written(f: asyncio.Future[None]) -> None:
            self.snapshot_writes.discard(f)
            # A roll met while this one was being written was skipped: catch up with it now.
            if not plog.closed:
                self.snapshot_if_due(plog, producers)

        write.add_done_callback(written)

    async def close(self) -> None:
        """ProducerStateManager.takeSnapshot at a clean shutdown, after the ones being written."""
        while self.snapshot_writes:
            await asyncio.gather(*list(self.snapshot_writes), return_exceptions=True)
        for key, producers in self.state.producers.items():
            plog = self.state.logs.get(*key)
            job = producers.snapshot_job(plog, shutdown=True) if plog is not None else None
            if job is not None:
                job()
