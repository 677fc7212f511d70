"""``SharePartitions``: this broker's share-partitions (Kafka's ``SharePartitionManager`` with the
``DefaultStatePersister`` / share coordinator behind it), driven from asyncio.

Share-partitions are made on first use (``get``): from their persisted state when
``__share_group_state`` has one, else at the offset ``share.auto.offset.reset`` names (the group
config; ``latest`` by default, ``earliest``, or ``by_duration:<ISO-8601 duration>``, as
``ShareGroupAutoOffsetResetStrategy``), and that start is written at once, so a restart does not
move it.

Reading. ``read`` reads one partition's log from the share-partition's next fetch offset and hands
the batches to ``SharePartition.acquire``: under ``share.isolation.level=read_committed`` only
below the last stable offset, with the batches of aborted transactions marked to be skipped (the
data plane's producer state holds the aborted-transaction index).

Persisting. Every change to AVAILABLE / ACKNOWLEDGED / ARCHIVED becomes one ``__share_group_state``
record (``ShareStateStore.write``: a ShareUpdate, or a ShareSnapshot at the cadence), applied to the
fold at once and appended through the group-commit appender; acknowledgements are answered only
once their record is in the log. Lock expiries and releases are written without anyone waiting.
At start-up ``load`` replays the topic through the same fold.

Waking. A ShareFetch that acquired nothing waits (``wait``) on the partitions it reads; appends (the
data plane's Fetch ``listeners``: Produce and transaction markers), lock expiries, releases and
acknowledgements of a partition wake it to try again.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog
from groupd.coordinator.share.state import PartitionSummary, parse_auto_offset_reset
from groupd.coordinator.share_partition import (
    BatchInfo,
    SharePartition,
    SharePartitionConfig,
    SharePartitionKey,
    ShareStateStore,
    StateBatch,
    decode_record,
    encode_record,
    share_state_partition,
)
from groupd.coordinator.share_partition.partition import AcquiredRange
from groupd.coordinator.share_partition.state_store import SHARE_STATE_PARTITIONS, ShareRecord, ShareRecordError
from groupd.protocol.errors import ErrorCode
from groupd.protocol.frozen import frozen_record
from groupd.protocol.messages.share_records import SHARE_SNAPSHOT_TYPE
from groupd.protocol.ratelimit import LogLimiter
from groupd.storage import Appender, LogManager, PartitionLog
from groupd.storage import records as rec

from ..data_plane import DataPlane
from ..data_plane.fetch import stable_prefix
from ..data_plane.state import Key, wall_ms
from ..topics import Topic, TopicRegistry

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

__all__ = ["SHARE_STATE_TOPIC", "SharePartitions", "ShareSettings", "Uninitialized"]

log = structlog.get_logger("groupd.share")
limited_log = LogLimiter(log)

SHARE_STATE_TOPIC = "__share_group_state"
# The most one share-partition read takes from its log (Kafka's max.partition.fetch.bytes default)
READ_BYTES = 1 << 20
# share.coordinator.state.topic.prune.interval.ms
PRUNE_INTERVAL_MS = 5 * 60 * 1000


@frozen_record
class ShareSettings:
    """The broker's ``group.share.*`` settings (Kafka's ``ShareGroupConfig`` defaults)."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000

    def __init__(
        self,
        record_lock_duration_ms: int = 30000,
        delivery_count_limit: int = 5,
        partition_max_record_locks: int = 2000,
        max_share_sessions: int = 2000,
    ) -> None:
        _set(self, "record_lock_duration_ms", record_lock_duration_ms)
        _set(self, "delivery_count_limit", delivery_count_limit)
        _set(self, "partition_max_record_locks", partition_max_record_locks)
        _set(self, "max_share_sessions", max_share_sessions)


class Uninitialized(Exception):
    """A share-partition the group coordinator never initialized (no member was assigned it)."""


class SharePartitions:
    def __init__(
        self,
        data: DataPlane,
        topics: TopicRegistry,
        logs: LogManager,
        appender: Appender,
        settings: ShareSettings,
        *,
        ensure_state_topic: Callable[[], None],
        group_configs: Callable[[str], Mapping[str, str]] = lambda _g: {},
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.data = data
        self.topics = topics
        self.logs = logs
        self.appender = appender
        self.settings = settings
        self.ensure_state_topic = ensure_state_topic
        self.group_configs = group_configs
        self.clock = clock
        self.store = ShareStateStore()
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self._locked: set[SharePartitionKey] = set()  # partitions with acquisition locks pending
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self.waiters: dict[Key, set[asyncio.Future[None]]] = {}
        self._writes: set[asyncio.Task[Any]] = set()
        self.load_stats: dict[str, Any] = {}
        self._snapshot_at: dict[SharePartitionKey, int] = {}  # key -> log offset of its latest snapshot
        self.prune_interval_ms = PRUNE_INTERVAL_MS
        self._prune_task: asyncio.Task[None] | None = None
        self.session_caches: list[Any] = []  # each broker's ShareSessionCache (handlers.py), for stats
        # the data plane's appends and markers wake share fetches too (a hook, not a second path)
        data.fetch_handler.listeners.append(self._appended)

    # --- configs ------------------------------------------------------------------------------------
    def lock_ms(self, group_id: str) -> int:
        """``share.record.lock.duration.ms`` of the group, else the broker's."""
        raw = self.group_configs(group_id).get("share.record.lock.duration.ms")
        return int(raw) if raw else self.settings.record_lock_duration_ms

    def read_committed(self, group_id: str) -> bool:
        raw = self.group_configs(group_id).get("share.isolation.level") or "read_uncommitted"
        return raw.strip().lower() == "read_committed"

    def _partition_config(self, group_id: str) -> SharePartitionConfig:
        cfg = self.group_configs(group_id)
        limit = cfg.get("share.delivery.count.limit")
        locks = cfg.get("share.partition.max.record.locks")
        return SharePartitionConfig(
            delivery_count_limit=int(limit) if limit else self.settings.delivery_count_limit,
            max_in_flight=int(locks) if locks else self.settings.partition_max_record_locks,
        )

    def _reset_offset(self, group_id: str, plog: PartitionLog) -> int:
        """``SharePartition.startOffsetDuringInitialization``: where a new share-partition starts."""
        try:
            kind, ms = parse_auto_offset_reset(self.group_configs(group_id).get("share.auto.offset.reset") or "latest")
        except ValueError:
            kind, ms = "latest", None  # the configs refuse such values; a stored one falls back to the default
        if kind == "earliest":
            return plog.log_start_offset
        if kind == "by_duration" and ms is not None:
            found = plog.offset_for_timestamp(self.clock() - ms)
            return found[0] if found is not None else plog.log_end_offset
        return plog.log_end_offset

    # --- share-partitions ---------------------------------------------------------------------------
    def get(self, key: SharePartitionKey, topic: Topic) -> SharePartition:
        """The share-partition of ``key``, made on first use from its state, which the group
        coordinator initialized when it assigned the partition (``initialize``); raises
        ``Uninitialized`` when there is none, as Kafka's share coordinator refuses to read an
        uninitialized share-partition (``SharePartition.maybeInitialize`` then fails)."""
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        persisted = self.store.get(key)
        if persisted is None:
            raise Uninitialized("Read operation on uninitialized share partition not allowed.")
        plog = self.data.state.log_for(topic, key.partition)
        cfg = self._partition_config(key.group_id)
        if persisted.start_offset < 0:
            sp = SharePartition(cfg, self._reset_offset(key.group_id, plog))
            self.partitions[key] = sp
            self.persist(key, sp, [])
        else:
            sp = SharePartition(cfg, persisted.start_offset, persisted.batches())
            self.partitions[key] = sp
        if plog.log_start_offset > sp.start_offset:
            sp.move_start(plog.log_start_offset)
        log.info(
            "share_partition_initialized",
            group=key.group_id,
            topic=topic.name,
            partition=key.partition,
            start_offset=sp.start_offset,
            end_offset=sp.end_offset,
        )
        return sp

    def read(
        self, key: SharePartitionKey, topic: Topic, member: str, max_records: int, max_bytes: int
    ) -> tuple[list[AcquiredRange], bytes]:
        """Acquire up to ``max_records`` (soft) for ``member`` from the log; the acquired ranges
        and the batches holding them. Raises storage errors to the caller."""
        sp = self.get(key, topic)
        plog = self.data.state.log_for(topic, key.partition)
        hw = plog.log_end_offset
        if plog.log_start_offset > sp.start_offset:
            sp.move_start(plog.log_start_offset)
        read_committed = self.read_committed(key.group_id)
        producers = self.data.state.producers.get((topic.name, key.partition)) if read_committed else None
        limit = producers.last_stable_offset(hw, plog.log_start_offset) if producers is not None else hw
        if read_committed and producers is None:
            return [], b""  # the caller loads the producer state first (``needs_producer_state``)
        if not sp.can_acquire(limit):
            return [], b""
        offset = sp.next_fetch_offset()
        if offset >= limit:
            return [], b""
        # at most what max.partition.fetch.bytes would read (1 MiB): acquisition stops at max_records
        # anyway, and a client's 50 MiB max_bytes would read a backlog's 50 MiB for 500 records
        data = plog.read(offset, max(min(max_bytes, READ_BYTES), 1), min_one_batch=True)
        aborted: list[Any] = []
        if read_committed:
            data, upper = stable_prefix(data, limit)
            aborted = producers.collect_aborted(offset, upper) if data and producers is not None else []
        infos: list[BatchInfo] = []
        spans: list[tuple[int, int, int, int]] = []  # (base, last, start byte, end byte)
        for b in rec.iter_batches(data):
            last = b.base_offset + b.last_offset_delta
            skip = bool(b.attributes & rec.CONTROL_FLAG)
            if not skip and aborted and b.attributes & rec.TRANSACTIONAL_FLAG:
                skip = any(
                    a.producer_id == b.producer_id and a.first_offset <= b.base_offset <= a.last_offset for a in aborted
                )
            infos.append(BatchInfo(b.base_offset, last, skip))
            spans.append((b.base_offset, last, b.position, b.position + b.size))
        now = self.clock()
        acquired = sp.acquire(member, now, self.lock_ms(key.group_id), infos, max_records, offset)
        if acquired:
            self._locked.add(key)
            self._arm()
        if not acquired:
            return [], b""
        # only the batches holding acquired records (not those another member holds in between);
        # both lists are in offset order: one walk
        parts = []
        i = 0
        for base, last, start, end in spans:
            while i < len(acquired) and acquired[i].last_offset < base:
                i += 1
            if i < len(acquired) and acquired[i].first_offset <= last:
                parts.append(data[start:end])
        return acquired, b"".join(parts)

    def needs_producer_state(self, key: SharePartitionKey, topic: Topic) -> PartitionLog | None:
        """The log whose producer state a read_committed read must load first, if any."""
        if not self.read_committed(key.group_id) or (topic.name, key.partition) in self.data.state.producers:
            return None
        return self.data.state.log_for(topic, key.partition)

    async def load_producer_state(self, topic: Topic, partition: int, plog: PartitionLog) -> None:
        await self.data.producer_states.state_for((topic.name, partition), plog)

    def changed(self, key: SharePartitionKey, topic_name: str, batches: list[StateBatch]) -> asyncio.Task[Any] | None:
        """After an acknowledgement, release or expiry of ``key``: write it and wake the readers."""
        sp = self.partitions[key]
        task = self.persist(key, sp, batches) if batches else None
        self._wake((topic_name, key.partition))
        return task

    def renewed(self, key: SharePartitionKey) -> None:
        """RENEW gave records of ``key`` a new lock: arm the timer for it."""
        self._locked.add(key)
        self._arm()

    def release_member(self, group_id: str, member_id: str) -> None:
        """``releaseSession``: every record ``member_id`` holds in the group goes back."""
        for key, sp in list(self.partitions.items()):
            if key.group_id != group_id:
                continue
            batches = sp.release_member(member_id)
            if batches:
                t = self.topics.by_id(key.topic_id)
                self.changed(key, t.name if t is not None else "", batches)

    def drop_topic(self, topic: Topic) -> None:
        """A deleted topic's share-partitions go (their state records stay until the group goes)."""
        for key in [k for k in self.partitions if k.topic_id == topic.topic_id]:
            del self.partitions[key]
            self._locked.discard(key)
        for key in [k for k in self.waiters if k[0] == topic.name]:
            self._wake(key)

    # --- the group coordinator's side (``groupd.coordinator.share.state.ShareStateStore``) -------------
    def initialize(
        self, group_id: str, state_epoch: int, start_offsets: Mapping[tuple[uuid.UUID, int], int]
    ) -> dict[tuple[uuid.UUID, int], int]:
        """``InitializeShareGroupState``: a new state (a snapshot at ``state_epoch``) per partition;
        -1 leaves the start to ``share.auto.offset.reset`` at the first fetch. A share-partition
        already in memory is dropped: its in-flight records are forgotten, as Kafka's initialize
        resets the partition (AlterShareGroupOffsets runs on empty groups only)."""
        out = {}
        for (tid, p), start in start_offsets.items():
            key = SharePartitionKey(group_id, tid, p)
            self.partitions.pop(key, None)
            self._locked.discard(key)
            self._record(key, self.store.initialize(key, state_epoch, start, self.clock()))
            out[(tid, p)] = ErrorCode.NONE
        return out

    def read_summary(
        self, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]
    ) -> dict[tuple[uuid.UUID, int], PartitionSummary]:
        """``ReadShareGroupStateSummary``: the start offset of each partition with a state."""
        out = {}
        for tid, p in partitions:
            key = SharePartitionKey(group_id, tid, p)
            persisted = self.store.get(key)
            if persisted is None:
                continue
            sp = self.partitions.get(key)
            if sp is not None:
                out[(tid, p)] = PartitionSummary(sp.start_offset, 0, persisted.state_epoch, sp.delivery_complete())
            else:
                out[(tid, p)] = PartitionSummary(persisted.start_offset, 0, persisted.state_epoch)
        return out

    def delete(self, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]) -> dict[tuple[uuid.UUID, int], int]:
        """``DeleteShareGroupState``: tombstones; the share-partitions in memory go too."""
        out = {}
        for tid, p in partitions:
            key = SharePartitionKey(group_id, tid, p)
            self.partitions.pop(key, None)
            self._locked.discard(key)
            if self.store.get(key) is not None:
                self._record(key, self.store.delete(key))
            out[(tid, p)] = ErrorCode.NONE
        return out

    # --- persistence --------------------------------------------------------------------------------
    def persist(self, key: SharePartitionKey, sp: SharePartition, batches: Iterable[StateBatch]) -> asyncio.Task[Any]:
        """Write ``batches`` and the start offset of ``key`` (applied to the fold at once, so the
        next record, a snapshot included, builds on it; the log keeps them in the same order)."""
        return self._record(key, self.store.write(key, sp.start_offset, batches, self.clock()))

    def _record(self, key: SharePartitionKey, record: Any) -> asyncio.Task[Any]:
        self.store.replay(record)
        task = asyncio.ensure_future(self._append(key, record))
        self._writes.add(task)
        task.add_done_callback(self._written)
        return task

    def _written(self, task: asyncio.Task[Any]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            limited_log.error("share_state_write_failed", key="write", error=str(task.exception()))

    async def _append(self, key: SharePartitionKey, record: Any) -> None:
        self.ensure_state_topic()
        plog = self.logs.get_or_create(SHARE_STATE_TOPIC, share_state_partition(key))
        k, v = encode_record(record)
        base, _last = await self.appender.append(plog, [(k, v, (), self.clock())])
        self._note(record, base)

    def _note(self, record: ShareRecord, offset: int) -> None:
        """Where the key's latest snapshot is (``ShareCoordinatorOffsetsManager``): the log below
        the oldest of them is redundant."""
        if record.value is None:
            self._snapshot_at.pop(record.key, None)
        elif record.type == SHARE_SNAPSHOT_TYPE:
            self._snapshot_at[record.key] = offset

    async def prune(self) -> dict[int, int]:
        """Snapshot every key updated since its snapshot (``ShareCoordinatorShard``'s cold-partition
        snapshots), then delete each ``__share_group_state`` partition's records below the oldest
        snapshot a key still needs (the share coordinator's periodic DeleteRecords); the new log
        start offset per partition pruned."""
        if self.topics.get(SHARE_STATE_TOPIC) is None:
            return {}
        now = self.clock()
        for key, state in list(self.store.states.items()):
            if state.updates_since_snapshot > 0 or key not in self._snapshot_at:
                self._record(key, self.store.write(key, -1, [], now, snapshot=True))
        await self.drain()
        needed: dict[int, int] = {}
        for key in self.store.states:
            p = share_state_partition(key)
            at = self._snapshot_at.get(key)
            needed[p] = -1 if at is None else min(needed.get(p, at), at)
        out = {}
        loop = asyncio.get_running_loop()
        for p in range(SHARE_STATE_PARTITIONS):
            plog = self.logs.get(SHARE_STATE_TOPIC, p)
            if plog is None:
                continue
            upto = needed.get(p, plog.log_end_offset)  # no key left: every record is redundant
            if upto > plog.log_start_offset:
                out[p] = await loop.run_in_executor(None, plog.delete_records_before, upto)
        if out:
            log.info("share_state_pruned", partitions=out)
        return out

    def start(self) -> None:
        """The pruning cadence (``share.coordinator.state.topic.prune.interval.ms``), once loaded."""
        self._prune_task = asyncio.create_task(self._prune_loop())

    async def _prune_loop(self) -> None:
        while True:
            await asyncio.sleep(self.prune_interval_ms / 1000)
            try:
                await self.prune()
            except Exception:
                log.exception("share_state_prune_failed")

    async def drain(self) -> None:
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def load(self) -> None:
        """Replay ``__share_group_state`` into the fold (before the listeners open)."""
        t0 = time.perf_counter()
        total = bad = 0
        if self.topics.get(SHARE_STATE_TOPIC) is not None:
            for p in range(SHARE_STATE_PARTITIONS):
                plog = self.logs.get(SHARE_STATE_TOPIC, p)
                if plog is None:
                    continue
                for offset, _ts, key, value in plog.iter_records(verify=True):
                    if key is None:
                        bad += 1
                        continue
                    try:
                        record = decode_record(key, value)
                        self.store.replay(record)
                        self._note(record, offset)
                    except ShareRecordError as e:
                        bad += 1
                        log.warning("share_state_record_skipped", partition=p, offset=offset, error=str(e))
                        continue
                    total += 1
                await asyncio.sleep(0)
        self.load_stats = {"records": total, "skipped": bad, "seconds": time.perf_counter() - t0}
        log.info(
            "share_state_loaded",
            records=total,
            skipped=bad,
            share_partitions=len(self.store.states),
            seconds=round(self.load_stats["seconds"], 3),
        )

    # --- figures ------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """For the metrics: share-partitions in memory, their in-flight and acquired records, share
        sessions, and the counters of records delivered, redelivered, released by a lock expiry
        and archived (of the share-partitions in memory)."""
        parts = list(self.partitions.values())
        return {
            "share_partitions": len(parts),
            "in_flight": sum(sp.in_flight() for sp in parts),
            "acquired": sum(sp.acquired_count() for sp in parts),
            "sessions": sum(len(c) for c in self.session_caches),
            "deliveries": sum(sp.deliveries for sp in parts),
            "redeliveries": sum(sp.redeliveries for sp in parts),
            "lock_expiries": sum(sp.lock_expiries for sp in parts),
            "archived": sum(sp.archived for sp in parts),
        }

    # --- waiting and waking -------------------------------------------------------------------------
    def wait(self, keys: Iterable[Key], timeout_s: float) -> asyncio.Future[None]:
        """A future done when one of ``keys`` may have something to hand out, or after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        keys = list(keys)
        for k in keys:
            self.waiters.setdefault(k, set()).add(fut)
        timer = loop.call_later(max(timeout_s, 0), _resolve, fut)

        def done(_f: asyncio.Future[None]) -> None:
            timer.cancel()
            for k in keys:
                ws = self.waiters.get(k)
                if ws is not None:
                    ws.discard(fut)
                    if not ws:
                        del self.waiters[k]

        fut.add_done_callback(done)
        return fut

    def _wake(self, key: Key) -> None:
        for fut in list(self.waiters.get(key, ())):
            _resolve(fut)

    def _appended(self, key: Key, size: int, *, stable_moved: bool = False) -> None:
        if key in self.waiters:
            self._wake(key)

    # --- acquisition locks --------------------------------------------------------------------------
    def _arm(self) -> None:
        due = None
        for key in list(self._locked):
            sp = self.partitions.get(key)
            d = sp.next_deadline() if sp is not None else None
            if d is None:
                self._locked.discard(key)
            elif due is None or d < due:
                due = d
        if due is None or (self._timer is not None and self._timer_at is not None and self._timer_at <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = due
        self._timer = loop.call_later(max(due - self.clock(), 0) / 1000, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        now = self.clock()
        for key in list(self._locked):
            sp = self.partitions.get(key)
            if sp is None:
                continue
            batches = sp.expire_locks(now)
            if batches:
                t = self.topics.by_id(key.topic_id)
                log.info(
                    "share_locks_expired",
                    group=key.group_id,
                    topic=t.name if t else None,
                    partition=key.partition,
                    records=sum(b.last_offset - b.first_offset + 1 for b in batches),
                )
                self.changed(key, t.name if t is not None else "", batches)
        self._arm()

    def expire_group_locks(self, group_id: str) -> int | None:
        """Fault injection: every acquisition lock of the group's share-partitions expires now (as
        ``releaseAcquisitionLockOnTimeout`` does when they fire); the records released, None when
        the group has no share-partition in memory."""
        keys = [k for k in self.partitions if k.group_id == group_id]
        if not keys:
            return None
        released = 0
        for key in keys:
            batches = self.partitions[key].expire_locks(2**62)
            if batches:
                released += sum(b.last_offset - b.first_offset + 1 for b in batches)
                t = self.topics.by_id(key.topic_id)
                self.changed(key, t.name if t is not None else "", batches)
        return released

    def close(self) -> None:
        if self._prune_task is not None:
            self._prune_task.cancel()
            self._prune_task = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for ws in list(self.waiters.values()):
            for fut in list(ws):
                _resolve(fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
