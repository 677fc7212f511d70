"""The asyncio shell around the sans-IO group coordinator.

The core (``groupd.coordinator``) is a synchronous state machine: requests, clock ticks and append
outcomes go in; responses, records to append and the next deadline come out. This shell feeds it:

- each group API request is handed to ``core.handle`` with the ``Request`` as its ``ctx``; the
  core answers now or later by returning ``(ctx, response)`` pairs, which go to ``ctx.respond``;
- every ``Append`` is serialized (``coordinator.serde``) and written to its ``__consumer_offsets``
  partition through the group-commit ``Appender``; when it is durable (or failed) the outcome goes
  back through ``core.append_done`` and only then are the waiting responses released;
- one ``loop.call_at`` is armed for ``core.next_deadline()`` (design principle 4).

Why no per-group ``asyncio.Lock``: a core call runs to completion on the loop thread, so requests for
one group are already serialized, and the one suspension point (the append) is a continuation in
the core, not an ``await`` in the middle of a handler. Different groups never wait for each other,
and a parked JoinGroup holds nothing but its own connection slot.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from groupd.coordinator import GroupCoordinator
from groupd.coordinator.result import Append, Result
from groupd.coordinator.serde import RecordDecodeError, decode_record, encode_records
from groupd.protocol.errors import ErrorCode
from groupd.protocol.ratelimit import LogLimiter
from groupd.protocol.server import Request
from groupd.storage import Appender, PartitionLog, StorageError
from groupd.storage.markers import end_txn_marker_batch, parse_end_txn_marker
from groupd.storage.records import TxnBatch, build_batch

log = structlog.get_logger("groupd.groups")
limited_log = LogLimiter(log)

# Replay yields to the event loop every this many records so that a long load never stalls serving.
_LOAD_CHUNK = 20_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class LoadProgress:
    """How far the start-up replay of ``__consumer_offsets`` is (read by the metrics at scrape time)."""

    partitions_total: int = 0
    partitions_loaded: int = 0
    records: int = 0
    skipped: int = 0
    corrupt_batches: int = 0  # damaged batches the replay reported and skipped
    started: float | None = None  # time.perf_counter() at the start of the load
    finished: float | None = None

    def seconds(self) -> float:
        if self.started is None:
            return 0.0
        end = time.perf_counter() if self.finished is None else self.finished
        return end - self.started


# Deadlines fire outside any request: without a context of their own, the timer would run in the
# context of whichever request armed it and its log events would carry that request's client_id.
_TIMER_CONTEXT = contextvars.Context()


class _Reply:
    """The ``ctx`` of a call made by another part of the node (not a client): its answer resolves a future."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[dict[str, Any]]) -> None:
        self.future = future

    def respond(self, response: dict[str, Any]) -> None:
        if not self.future.done():
            self.future.set_result(response)


class GroupShell:
    def __init__(
        self,
        core: GroupCoordinator,
        partition_logs: Callable[[int], PartitionLog],
        appender: Appender,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.core = core
        self.partition_logs = partition_logs
        self.appender = appender
        self.clock = clock
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._armed_version = -1  # core.deadline_version() when the timer was last (re)armed
        # A core without deadline_version (test stubs) gets the heap asked on every call.
        self._deadline_version: Callable[[], int] | None = getattr(core, "deadline_version", None)
        self._tasks: set[asyncio.Task[None]] = set()
        self.loaded = asyncio.Event()
        self.load_stats: dict[str, float] = {}
        self.load_progress = LoadProgress()

    # --- requests ---------------------------------------------------------------------------------
    def handler(self, api_name: str) -> Callable[[Request], None]:
        core = self.core
        if api_name == "Heartbeat" and hasattr(core, "heartbeat"):
            heartbeat = core.heartbeat
            clock = self.clock
            arm = self._arm

            def handle_heartbeat(req: Request) -> None:
                req.respond({"throttle_time_ms": 0, "error_code": heartbeat(clock(), req.api_version, req.body)})
                arm()

            return handle_heartbeat
        # Kafka's "/host" form of each peer, made once per host rather than once per request.
        hosts: dict[str, str] = {}

        def handle(req: Request) -> None:
            peer = req.conn.peer_host
            host = hosts.get(peer)
            if host is None:
                if len(hosts) > 4096:
                    hosts.clear()
                host = hosts[peer] = "/" + peer
            result = core.handle(
                self.clock(),
                api_name,
                req.api_version,
                req.body,
                req,
                client_id=req.client_id or "",
                client_host=host,
            )
            self.apply(result)

        return handle

    def apply(self, result: Result) -> list[asyncio.Task[None]]:
        """Send the answers, start the appends (their tasks are returned) and re-arm the timer."""
        for ctx, response in result.responses:
            ctx.respond(response)
        tasks = [self._start_append(append) for append in result.appends]
        self._arm()
        return tasks

    # --- deleted topics ---------------------------------------------------------------------------
    def partitions_deleted(self, topic_partitions: list[tuple[str, int]]) -> Awaitable[Any] | None:
        """Tombstone the committed offsets of deleted partitions. The awaitable (None when there
        is nothing to write) is done once the tombstones are durable or failed (logged): DeleteTopics
        answers after it, so a topic re-created at once never meets the old offsets."""
        tasks = self.apply(self.core.on_partitions_deleted(self.clock(), topic_partitions))
        return asyncio.gather(*tasks) if tasks else None

    # --- appends ----------------------------------------------------------------------------------
    def _start_append(self, append: Append) -> asyncio.Task[None]:
        # Tasks start in creation order and enqueue in the appender before their first suspension,
        # so appends reach a partition in the order the core handed them out.
        task = asyncio.get_running_loop().create_task(self._append(append))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _append(self, append: Append) -> None:
        error: int | None = None
        try:
            plog = self.partition_logs(append.partition)
            now = self.clock()
            if append.marker is not None:
                committed, coordinator_epoch = append.marker
                await self.appender.append(
                    plog,
                    end_txn_marker_batch(append.producer_id, append.producer_epoch, committed, coordinator_epoch, now),
                )
            elif append.producer_id >= 0:
                # TxnOffsetCommit: the producer's own transactional batch, never merged with others.
                records = [(k, v, (), now) for k, v in encode_records(append.records)]
                batch = build_batch(
                    records, producer_id=append.producer_id, producer_epoch=append.producer_epoch, transactional=True
                )
                await self.appender.append(plog, batch)
            else:
                records = [(k, v, (), now) for k, v in encode_records(append.records)]
                await self.appender.append(plog, records)
        except StorageError as e:
            limited_log.error("offsets_append_failed", key=append.partition, partition=append.partition, error=str(e))
            error = ErrorCode.KAFKA_STORAGE_ERROR
        except Exception:
            log.exception("offsets_append_failed", partition=append.partition)
            error = ErrorCode.KAFKA_STORAGE_ERROR
        self.apply(self.core.append_done(self.clock(), append.token, error))

    # --- transactions -----------------------------------------------------------------------------
    @property
    def txn_verifier(self) -> Callable[[str, int, int, str, int], int] | None:
        """KIP-890 verification of TxnOffsetCommit: the node wires the transaction coordinator's
        ``verify`` here (``(transactional id, producer id, epoch, topic, partition) -> error code``)."""
        return self.core.txn_verifier

    @txn_verifier.setter
    def txn_verifier(self, fn: Callable[[str, int, int, str, int], int] | None) -> None:
        self.core.txn_verifier = fn

    async def write_txn_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> int:
        """End ``producer_id``'s transaction in ``__consumer_offsets`` partition ``partition`` (the
        transaction coordinator's WriteTxnMarkers, Kafka's ``GroupCoordinator.completeTransaction``).

        Returns the Kafka error code: 0 once the marker is durable and the producer's pending
        offsets of that partition are committed (visible to OffsetFetch) or dropped;
        NOT_COORDINATOR when this node does not own the partition, COORDINATOR_LOAD_IN_PROGRESS
        while it loads, INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED for a marker older
        than what the partition has seen, or the append's error (KAFKA_STORAGE_ERROR). Kafka's
        KafkaApis.handleWriteTxnMarkersRequest tells the transaction coordinator
        NOT_LEADER_OR_FOLLOWER for the three coordinator errors (it retries them); that mapping is
        the caller's."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.apply(
            self.core.write_txn_marker(
                self.clock(), _Reply(fut), partition, producer_id, producer_epoch, committed, coordinator_epoch
            )
        )
        return int((await fut)["error_code"])

    # --- time -------------------------------------------------------------------------------------
    def _arm(self) -> None:
        # Nearly every request (heartbeats) only moves deadlines later: then the armed wake-up is
        # still early enough, and asking the heap for its top on every request is skipped.
        if self._deadline_version is not None:
            version = self._deadline_version()
            if version == self._armed_version:
                return
            self._armed_version = version
        deadline = self.core.next_deadline()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, (deadline - self.clock()) / 1000)
        self._timer = loop.call_at(loop.time() + delay, self._fire, context=_TIMER_CONTEXT)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        self._armed_version = -1  # the tick popped deadlines: look at the heap again
        self.apply(self.core.tick(self.clock()))

    # --- start-up load ----------------------------------------------------------------------------
    def begin_load(self, partitions: list[int]) -> None:
        self.load_progress = LoadProgress(partitions_total=len(partitions), started=time.perf_counter())
        for p in partitions:
            self.core.begin_load(p)

    async def load(self, partitions: list[int]) -> None:
        """Replay each partition of ``__consumer_offsets`` through ``core.replay``; until a
        partition is done its groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        t0 = time.perf_counter()
        total = 0
        bad = 0
        progress = self.load_progress
        if progress.started is None:  # load() without begin_load() (tests)
            progress.partitions_total, progress.started = len(partitions), t0
        replay = self.core.replay
        for p in partitions:
            n = 0
            next_yield = _LOAD_CHUNK
            # The producer of the transactional batch being replayed (-1: a plain batch).
            producer_id = producer_epoch = -1
            try:
                plog = self.partition_logs(p)
                corrupt_before = plog.corrupt_batches
                # verify: a damaged batch anywhere is reported and skipped, never replayed (a
                # flipped bit must not turn a committed 4242 into 4243) and never the end of the load.
                # txn: transactional batches come delimited and markers come too (TxnBatch).
                for _offset, _ts, key, value in plog.iter_records(verify=True, txn=True):
                    if key is None:
                        if type(value) is TxnBatch:
                            producer_id, producer_epoch = self._replay_txn_entry(p, value)
                        else:
                            bad += 1
                        continue
                    try:
                        k, v = decode_record(key, value)
                    except RecordDecodeError as e:
                        bad += 1
                        log.warning("offsets_record_skipped", partition=p, offset=_offset, error=str(e))
                        continue
                    if producer_id < 0:
                        replay(k, v)
                    else:
                        self.core.replay_transactional(k, v, producer_id, producer_epoch)
                    n += 1
                    if n == next_yield:
                        next_yield += _LOAD_CHUNK
                        progress.records, progress.skipped = total + n, bad
                        await asyncio.sleep(0)
                progress.corrupt_batches += plog.corrupt_batches - corrupt_before
            except Exception:
                # Whatever stopped this partition's replay (an unreadable file), its groups are
                # served with what was read, and the partitions after it still load: a partition
                # left loading would answer COORDINATOR_LOAD_IN_PROGRESS for as long as we run.
                log.exception("offsets_partition_load_failed", partition=p, records=n)
            total += n
            self.apply(self.core.end_load(p, self.clock()))
            progress.records, progress.skipped = total, bad
            progress.partitions_loaded += 1
        elapsed = time.perf_counter() - t0
        progress.finished = time.perf_counter()
        self.load_stats = {"records": total, "seconds": elapsed, "skipped": bad}
        log.info(
            "offsets_loaded",
            partitions=len(partitions),
            records=total,
            skipped=bad,
            corrupt_batches=progress.corrupt_batches,
            groups=len(self.core.groups),
            seconds=round(elapsed, 3),
            records_per_s=round(total / elapsed) if elapsed > 0 else None,
        )
        self.loaded.set()

    def _replay_txn_entry(self, partition: int, entry: TxnBatch) -> tuple[int, int]:
        """Fold one delimiter of the load's record stream: a transactional batch starts (its
        producer until its end), ends, or a transaction marker is replayed
        (``CoordinatorLoaderImpl``: control records go to ``replayEndTransactionMarker``)."""
        if not entry.control:
            return entry.producer_id, entry.producer_epoch  # TXN_BATCH_END is (-1, -1)
        marker = parse_end_txn_marker(entry.key, entry.value)
        if marker is not None:
            self.core.replay_end_txn_marker(
                partition, entry.producer_id, entry.producer_epoch, marker.committed, marker.coordinator_epoch
            )
        return -1, -1

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait for in-flight appends (graceful shutdown: acknowledge what was written)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
        if self._timer is not None:
            self._timer.cancel()

    def stats(self) -> dict[str, Any]:
        return {"groups": len(self.core.groups), "pending_appends": self.core.pending_appends}
