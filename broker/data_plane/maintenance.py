"""Maintenance: Kafka's two background cadences over the partition logs.

Retention (and idle-producer expiry) every ``log_retention_check_interval_ms`` (Kafka's
``log.retention.check.interval.ms``, 300 s): time and size retention of user partitions, then the
producer states forget what is below the log start and the producers idle for
``producer.id.expiration.ms``. Compaction of dirty compacted partitions every
``log_cleaner_backoff_ms`` (the cleaner's ``log.cleaner.backoff.ms``, 15 s), the broker's own
compacted topics included; open transactions bound what the cleaner may clean. The work runs in an
executor; ``run_maintenance`` is one pass of both, for tests and operators.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import structlog
from groupd.storage import PartitionLog
from groupd.storage.compaction import Cleaner
from groupd.storage.errors import StorageEngineError

from ..producer_state import AbortedTxn
from ..topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from .producers import ProducerStates
from .state import DataState

__all__ = ["INTERNAL_COMPACTED_TOPICS", "Maintenance"]

# The broker's own compacted topics (cleanup.policy=compact, Kafka's offsets.topic / transaction
# state log configs): cleaned on the cleaner's cadence, never under retention.
INTERNAL_COMPACTED_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)

T = TypeVar("T")

log = structlog.get_logger("groupd.data")


class Maintenance:
    """The retention and cleaner tasks (LogManager.cleanupLogs on its schedule, LogCleaner)."""

    def __init__(
        self,
        state: DataState,
        producer_states: ProducerStates,
        retention_check_interval_ms: int,
        cleaner_backoff_ms: int,
    ) -> None:
        self.state = state
        self.producer_states = producer_states
        self.retention_check_interval_ms = retention_check_interval_ms
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.cleaner = Cleaner()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start both cadences (an interval of 0 turns one off)."""
        for interval_ms, task in (
            (self.retention_check_interval_ms, self.run_retention),
            (self.cleaner_backoff_ms, self.run_cleaner),
        ):
            if interval_ms > 0:
                self._tasks.append(asyncio.create_task(self._every(interval_ms, task)))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _every(self, interval_ms: int, task: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await task()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("maintenance_failed")

    async def run_maintenance(self) -> dict[tuple[str, int], Any]:
        """One pass of both tasks: retention, then compaction of the dirty compacted partitions."""
        results = await self.run_retention()
        results.update(await self.run_cleaner())
        return results

    def _user_logs(self, policy: str) -> list[tuple[str, int, PartitionLog]]:
        """The open logs ``policy`` applies to: user partitions, and for compaction the internal
        compacted topics too (Kafka's LogCleaner cleans every compact log, its own included)."""
        out = []
        for topic, p in self.state.logs.partitions():
            if topic in INTERNAL_COMPACTED_TOPICS and policy != "compact":
                continue
            plog = self.state.logs.get(topic, p)
            if plog is not None and not plog.closed and getattr(plog.config, policy):
                out.append((topic, p, plog))
        return out

    async def _in_executor(self, topic: str, p: int, fn: Callable[[PartitionLog], T], plog: PartitionLog) -> T | None:
        try:
            return await asyncio.get_running_loop().run_in_executor(None, fn, plog)
        except (StorageEngineError, OSError) as exc:
            log.error("cleanup_failed", topic=topic, partition=p, error=str(exc))
            return None

    async def run_cleaner(self) -> dict[tuple[str, int], Any]:
        """Kafka's log cleaner: compact every compacted partition that is dirty enough. The group
        shell appends to ``__consumer_offsets`` beside it as producers append to user topics: the
        cleaner only rewrites inactive segments and swaps them in under the log's locks."""
        results: dict[tuple[str, int], Any] = {}
        for topic, p, plog in self._user_logs("compact"):
            if topic in INTERNAL_COMPACTED_TOPICS:
                # No producer state is kept for them: compaction reads their transactions (the
                # coordinator's transactional batches and markers) from the log itself.
                clean: Callable[[PartitionLog], Any] = self.cleaner.clean
            else:
                # Transactions bound what may be cleaned: the state is rebuilt first if need be.
                producers = await self.producer_states.state_for((topic, p), plog)
                if producers is None or plog.closed:
                    continue
                stable = producers.last_stable_offset(plog.log_end_offset, plog.log_start_offset)
                clean = partial(self.cleaner.clean, stable_offset=stable, aborted=aborted_check(producers.aborted))
            result = await self._in_executor(topic, p, clean, plog)
            if result is not None:
                results[(topic, p)] = result
        return results

    async def run_retention(self) -> dict[tuple[str, int], Any]:
        """Kafka's retention check: time and size retention of user partitions, producer expiry."""
        results: dict[tuple[str, int], Any] = {}
        for topic, p, plog in self._user_logs("delete"):
            results[(topic, p)] = await self._in_executor(topic, p, PartitionLog.apply_retention, plog)
        horizon = self.state.clock() - self.state.producer_id_expiration_ms
        for (topic, p), pp in self.state.producers.items():
            plog = self.state.logs.get(topic, p)
            if plog is not None and not plog.closed:
                pp.truncate_head(plog.log_start_offset)
        expired = sum(pp.expire(horizon) for pp in self.state.producers.values())
        if expired:
            log.info("producers_expired", count=expired)
        return results


def aborted_check(aborted: list[AbortedTxn]) -> Callable[[int, int], bool] | None:
    """A snapshot of the aborted index for the cleaner's thread: is (producer id, offset) in an
    aborted transaction?"""
    if not aborted:
        return None
    ranges: dict[int, list[tuple[int, int]]] = {}
    for a in aborted:
        ranges.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
    return lambda pid, offset: any(first <= offset <= last for first, last in ranges.get(pid, ()))
