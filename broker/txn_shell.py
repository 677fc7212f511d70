"""The asyncio shell around the sans-IO transaction coordinator (``groupd.transactions``).

It is ``group_shell.py``'s twin for ``__transaction_state``:

- each transaction API request goes to ``core.handle`` with the ``Request`` as its ``ctx``; the
  answers the core returns (now, or in a later result once a record is durable) go to ``ctx.respond``;
- every ``Append`` is serialized (``transactions.serde``) and written to its ``__transaction_state``
  partition through the group-commit ``Appender``; ``core.append_done`` hears the outcome only once
  the records are durable (or failed), so no answer ever depends on a record that could be lost
  (``coordinator_shell.py``, shared with the group shell, applies results, writes appends, keeps
  the timer and drains);
- every ``WriteMarkers`` becomes COMMIT/ABORT control batches: the ``__consumer_offsets``
  partitions go to the group shell (``write_txn_marker``, which applies or drops the transaction's
  pending offsets), the rest to the data plane (``write_txn_markers``). A transaction is complete
  (``core.markers_written``) once every partition answered NONE or UNKNOWN_TOPIC_OR_PARTITION (a
  deleted partition: Kafka's ``TransactionMarkerChannelManager`` drops the markers of partitions
  whose leader it cannot find); retriable failures are retried with a growing backoff, as Kafka's
  marker channel retries. A crash in between loses nothing: the Prepare* record is durable, and
  the start-up load sends the markers again (``core.load``);
- transaction version 2: ``add_partitions`` adds partitions on a client's behalf, as a partition
  leader's ``AddPartitionsToTxnManager`` does (Produce v12+ through the data plane's ``txn_adder``,
  TxnOffsetCommit v5+ through ``txn_offset_commit_handler``), one request per producer and turn of
  the loop; in a cluster each broker's handlers name it, and the core serves an id only on the
  leader of its ``__transaction_state`` partition (NOT_COORDINATOR elsewhere);
- one ``loop.call_at`` is armed for ``core.next_deadline()`` (timeouts, id expiry, retries of a
  failed Complete* append);
- ``__transaction_state`` (50 partitions, compacted, internal) is created on the first
  transactional InitProducerId, as Kafka creates it on first use, and replayed at start-up; until
  the replay is done the core answers COORDINATOR_LOAD_IN_PROGRESS.

The core logs ``transaction_completed`` and ``transaction_timed_out``; the shell counts them (a
counting wrapper around the core's logger) for the metrics, without the core knowing about metrics.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog
from groupd.coordinator.errors import NETWORK_EXCEPTION, append_error_to_response_error
from groupd.protocol.errors import ErrorCode
from groupd.protocol.partitioning import coordinator_partition
from groupd.protocol.ratelimit import LogLimiter
from groupd.protocol.server import Request
from groupd.storage import Appender, PartitionLog
from groupd.transactions.coordinator import (
    OFFSETS_TOPIC,
    Append,
    TransactionCoordinator,
    TxnResult,
    WriteMarkers,
)
from groupd.transactions.records import TransactionState
from groupd.transactions.serde import RecordDecodeError, decode_record, encode_record
from groupd.transactions.state import IllegalTransactionTransition

from .coordinator_shell import CoordinatorShell, wall_ms

log = structlog.get_logger("groupd.transactions")
limited_log = LogLimiter(log)

TopicPartition = tuple[str, int]

# A marker write that failed retriably is tried again after this, doubling up to the cap (Kafka's
# marker channel retries every retry.backoff.ms, 100 ms; the cap keeps a long outage cheap).
MARKER_RETRY_BACKOFF_S = 0.05
MARKER_RETRY_BACKOFF_MAX_S = 1.0
# A TV2 add answered CONCURRENT_TRANSACTIONS is retried every add.partitions.to.txn.retry.backoff.ms
# (20 ms) for add.partitions.to.txn.retry.backoff.max.ms (100 ms), Kafka's defaults.
ADD_RETRY_BACKOFF_S = 0.02
ADD_RETRY_TIMEOUT_S = 0.1
# Kafka's coordinator epoch is the leader epoch of the id's __transaction_state partition; groupd is
# the only and the permanent leader, so it never changes.
COORDINATOR_EPOCH = 0

# A marker answered with one of these is finished: NONE; UNKNOWN_TOPIC_OR_PARTITION (the partition
# is gone: Kafka drops its markers, TransactionMarkerChannelManager.addTxnMarkersToBrokerQueue).
_MARKER_DONE = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
# The partition has seen a newer producer epoch or coordinator (TransactionMarkerRequestCompletionHandler:
# "producer or coordinator epoch has changed, this txn can now be ignored"): nothing more to write.
_MARKER_STALE = frozenset(
    {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
)


class MarkerPlane(Protocol):
    """The data plane's side of markers (``DataPlane.write_txn_markers``)."""

    async def write_txn_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, int]: ...


class OffsetsMarkers(Protocol):
    """The group shell's side of markers (``GroupShell.write_txn_marker``)."""

    async def write_txn_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> int: ...


class _CountingLog:
    """The core's logger, counting the events the metrics want (and forwarding every call)."""

    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self._inner = inner
        self._counts = counts

    def info(self, event: str, **kw: Any) -> Any:
        if event == "transaction_completed":
            self._counts["commits" if kw.get("state") == "CompleteCommit" else "aborts"] += 1
        elif event == "transaction_timed_out":
            self._counts["timeouts"] += 1
        return self._inner.info(event, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TxnShell(CoordinatorShell[TransactionCoordinator, TxnResult, Append]):
    append_failed = "transaction_log_append_failed"
    _log = log
    _limited_log = limited_log

    def __init__(
        self,
        core: TransactionCoordinator,
        partition_logs: Callable[[int], PartitionLog],
        appender: Appender,
        data: MarkerPlane,
        groups: OffsetsMarkers,
        *,
        ensure_log_topic: Callable[[], None] = lambda: None,
        log_exists: Callable[[], bool] = lambda: True,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        super().__init__(core, partition_logs, appender, clock=clock)
        self.data = data
        self.groups = groups
        self.ensure_log_topic = ensure_log_topic
        self.log_exists = log_exists
        self.counts: Counter[str] = Counter()
        core.log = _CountingLog(core.log, self.counts)
        self.markers_in_flight = 0
        # add_partitions calls of this turn of the loop, per (transactional id, producer id, epoch)
        self._adds: dict[
            tuple[str, int, int], tuple[list[TopicPartition], list[tuple[asyncio.Future[Any], list[TopicPartition]]]]
        ] = {}

    # --- requests ---------------------------------------------------------------------------------
    def handler(self, api_name: str, node_id: int | None = None) -> Callable[[Request], None]:
        """The handler of ``api_name`` for the broker ``node_id`` (None: the only broker). In a
        cluster each broker registers its own: the core serves a transactional id only on the
        broker leading its ``__transaction_state`` partition, NOT_COORDINATOR elsewhere."""
        core = self.core

        def handle(req: Request) -> None:
            self.apply(core.handle(self.clock(), api_name, req.api_version, req.body, req, node_id))

        return handle

    def init_producer_id_handler(
        self, idempotent: Callable[[Request], Any], node_id: int | None = None
    ) -> Callable[[Request], Any]:
        """InitProducerId: a transactional id goes to the core, a null one to the data plane (an
        idempotent producer, served by any broker; both draw producer ids from the data plane's
        allocator)."""
        transactional = self.handler("InitProducerId", node_id)

        def handle(req: Request) -> Any:
            txn_id = req.body.get("transactional_id")
            if txn_id is None:
                return idempotent(req)
            if txn_id:
                try:
                    self.ensure_log_topic()
                except OSError as e:
                    log.error("transaction_log_create_failed", error=str(e))
                    return {
                        "throttle_time_ms": 0,
                        "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        "producer_id": -1,
                        "producer_epoch": -1,
                    }
            transactional(req)
            return None

        return handle

    def _start_more(self, result: TxnResult, tasks: list[asyncio.Task[None]]) -> None:
        """The marker writes: retried until every partition answered, so drain cancels them
        before it waits (their Prepare* record is durable, the next start-up sends them again)."""
        tasks.extend(self._spawn(self._write_markers(m), cancel_first=True) for m in result.markers)

    # --- the KIP-890 part 1 check the data plane makes on transactional Produce ---------------------
    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int) -> int:
        """NONE when ``(topic, partition)`` is in the ongoing transaction of this producer id and
        epoch; otherwise what AddPartitionsToTxn's ``verify_only`` answers
        (``handleVerifyPartitionsInTransaction``): TRANSACTION_ABORTABLE, PRODUCER_FENCED,
        INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, ..."""
        request = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": True,
                    "topics": [{"name": topic, "partitions": [partition]}],
                }
            ]
        }
        result = self.core.handle(self.clock(), "AddPartitionsToTxn", 5, request, None)
        # verify_only changes nothing, so its answer is in this very result
        for _ctx, response in result.responses:
            for by_txn in response["results_by_transaction"]:
                for by_topic in by_txn["topic_results"]:
                    for p in by_topic["results_by_partition"]:
                        return int(p["partition_error_code"])
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)

    # --- transaction version 2: partitions added by their leader (AddPartitionsToTxnManager) ---------
    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Add ``partitions`` to the producer's transaction as a partition leader does for a TV2
        client (AddPartitionsToTxn v5, not verify-only: ``AddPartitionsToTxnManager.addOrVerifyTransaction``
        with ``ADD_PARTITION``). The future gets the coordinator's code per partition. Calls made in
        one turn of the loop for the same producer are sent as one request, as the manager batches
        per coordinator, so a Produce to many partitions writes one ``__transaction_state`` record."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[TopicPartition, int]] = loop.create_future()
        key = (transactional_id, producer_id, producer_epoch)
        batch = self._adds.get(key)
        if batch is None:
            batch = self._adds[key] = ([], [])
            loop.call_soon(self._send_adds, key)
        batch[0].extend(partitions)
        batch[1].append((fut, list(partitions)))
        return fut

    def _send_adds(self, key: tuple[str, int, int]) -> None:
        partitions, waiters = self._adds.pop(key)
        txn_id, pid, epoch = key
        by_topic: dict[str, list[int]] = {}
        for topic, p in dict.fromkeys(partitions):
            by_topic.setdefault(topic, []).append(p)
        request = {
            "transactions": [
                {
                    "transactional_id": txn_id,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "verify_only": False,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            ]
        }

        def answered(response: dict[str, Any]) -> None:
            codes: dict[TopicPartition, int] = {}
            for by_txn in response.get("results_by_transaction") or []:
                for by_topic_result in by_txn["topic_results"]:
                    for r in by_topic_result["results_by_partition"]:
                        codes[(by_topic_result["name"], r["partition_index"])] = int(r["partition_error_code"])
            for fut, wanted in waiters:
                if not fut.done():
                    fut.set_result({tp: codes.get(tp, int(ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in wanted})

        self.apply(self.core.handle(self.clock(), "AddPartitionsToTxn", 5, request, _Reply(answered)))

    def txn_offset_commit_handler(
        self, inner: Callable[[Request], Any], coordinates: Callable[[int], bool] | None = None
    ) -> Callable[[Request], Any]:
        """TxnOffsetCommit v5+ (transaction version 2): the group coordinator adds the group's
        ``__consumer_offsets`` partition to the transaction itself before the write
        (``CoordinatorPartitionWriter.maybeStartTransactionVerification`` with ``ADD_PARTITION``;
        the client sends no AddOffsetsToTxn), then the commit goes on as before (``inner``, whose
        verification now finds the partition in the transaction). A failed add answers every
        partition with the error ``GroupCoordinatorService.handleOperationException`` makes of it.
        ``coordinates(partition)``: whether this broker leads the group's partition (in a cluster;
        elsewhere Kafka's verification fails NOT_LEADER_OR_FOLLOWER and adds nothing, so ``inner``
        answers NOT_COORDINATOR without an add)."""

        def handle(req: Request) -> Any:
            body = req.body
            if req.api_version < 5 or not body.get("group_id") or not body.get("transactional_id"):
                return inner(req)
            partition = coordinator_partition(body["group_id"], self.core.config.offsets_topic_partitions)
            if coordinates is not None and not coordinates(partition):
                return inner(req)
            return self._add_then_commit(req, inner, partition)

        return handle

    async def _add_then_commit(self, req: Request, inner: Callable[[Request], Any], partition: int) -> Any:
        body = req.body
        tp = (OFFSETS_TOPIC, partition)
        # no retry on CONCURRENT_TRANSACTIONS here: Kafka retries only Produce's adds
        answers = await self.add_partitions(
            body["transactional_id"], int(body.get("producer_id", -1)), int(body.get("producer_epoch", -1)), [tp]
        )
        code = answers[tp]
        if code != ErrorCode.NONE:
            code = offset_commit_add_error(code)
            return {
                "throttle_time_ms": 0,
                "topics": [
                    {
                        "name": t.get("name"),
                        "partitions": [
                            {"partition_index": p.get("partition_index", 0), "error_code": code}
                            for p in t.get("partitions") or []
                        ],
                    }
                    for t in body.get("topics") or []
                ],
            }
        result = inner(req)
        if inspect.isawaitable(result):
            return await result
        return result

    async def add_partitions_with_retry(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Produce's adds, retried while the coordinator answers CONCURRENT_TRANSACTIONS (the
        previous transaction's markers are being written), as ``ReplicaManager.handleProduceAppend``
        retries them for TV2 (``maybeRetryOnConcurrentTransactions``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ADD_RETRY_TIMEOUT_S
        while True:
            codes = await self.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
            if ErrorCode.CONCURRENT_TRANSACTIONS not in codes.values() or loop.time() >= deadline:
                return codes
            await asyncio.sleep(ADD_RETRY_BACKOFF_S)

    # --- appends ----------------------------------------------------------------------------------
    async def _write(self, plog: PartitionLog, append: Append, now_ms: int) -> None:
        records = [(*encode_record(r), (), now_ms) for r in append.records]
        await self.appender.append(plog, records)

    # --- markers ----------------------------------------------------------------------------------
    async def _write_markers(self, m: WriteMarkers) -> None:
        remaining = set(m.partitions)
        backoff = MARKER_RETRY_BACKOFF_S
        self.markers_in_flight += 1
        try:
            while True:
                results = await self._write_markers_once(m, sorted(remaining))
                failed: dict[TopicPartition, int] = {}
                for tp, code in results.items():
                    if code in _MARKER_DONE:
                        remaining.discard(tp)
                    elif code in _MARKER_STALE:
                        log.warning(
                            "transaction_marker_stale",
                            transactional_id=m.transactional_id,
                            topic=tp[0],
                            partition=tp[1],
                            error=code,
                        )
                        remaining.discard(tp)
                    else:
                        failed[tp] = code
                if not remaining:
                    break
                limited_log.warning(
                    "transaction_markers_retry",
                    key=m.transactional_id,
                    transactional_id=m.transactional_id,
                    failed={f"{t}-{p}": c for (t, p), c in sorted(failed.items())},
                    backoff_s=backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MARKER_RETRY_BACKOFF_MAX_S)
        finally:
            self.markers_in_flight -= 1
        self.apply(self.core.markers_written(self.clock(), m.transactional_id))

    async def _write_markers_once(self, m: WriteMarkers, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        offsets = [tp for tp in partitions if tp[0] == OFFSETS_TOPIC]
        user = [tp for tp in partitions if tp[0] != OFFSETS_TOPIC]
        args = (m.producer_id, m.producer_epoch, m.committed, COORDINATOR_EPOCH)
        groups, data = self.groups, self.data
        jobs: list[Awaitable[Any]] = [
            _guard(lambda p=p: groups.write_txn_marker(p, *args))
            for _t, p in offsets  # type: ignore[misc]
        ]
        if user:
            jobs.append(_guard(lambda: data.write_txn_markers(*args, user)))
        answers = await asyncio.gather(*jobs, return_exceptions=True)
        results: dict[TopicPartition, int] = {}
        for tp, answer in zip(offsets, answers, strict=False):
            results[tp] = _code_of(answer, m, [tp])
        if user:
            answer = answers[-1]
            if isinstance(answer, BaseException):
                results.update(dict.fromkeys(user, _code_of(answer, m, user)))
            else:
                results.update({tp: int(answer.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in user})
        return results

    # --- start-up load ----------------------------------------------------------------------------
    def begin_load(self) -> None:
        self.core.loading = set(range(self.core.config.transaction_state_partitions))

    async def load(self) -> None:
        """Replay ``__transaction_state`` (when it exists); then resend the markers of every
        transaction caught between Prepare* and Complete*."""
        t0 = time.perf_counter()
        total = bad = 0
        partitions = range(self.core.config.transaction_state_partitions)
        if self.log_exists():
            for p in partitions:
                try:
                    for offset, _ts, key, value in self.partition_logs(p).iter_records(verify=True):
                        if key is None:
                            bad += 1
                            continue
                        try:
                            self.core.replay(*decode_record(key, value))
                        except (RecordDecodeError, IllegalTransactionTransition) as e:
                            # a record no state can follow from is skipped, as a corrupt one is: the
                            # id keeps the state the records before it built
                            bad += 1
                            log.warning("transaction_record_skipped", partition=p, offset=offset, error=str(e))
                            continue
                        total += 1
                except Exception:
                    log.exception("transaction_partition_load_failed", partition=p)
                await asyncio.sleep(0)
        self.core.loading.clear()
        self.apply(self.core.load(self.clock(), []))
        elapsed = time.perf_counter() - t0
        self.load_stats = {"records": total, "seconds": elapsed, "skipped": bad}
        log.info(
            "transactions_loaded",
            records=total,
            skipped=bad,
            transactional_ids=len(self.core.transactions),
            seconds=round(elapsed, 3),
        )
        self.loaded.set()

    def stats(self) -> dict[str, Any]:
        states = Counter(m.state for m in self.core.transactions.values() if m.producer_epoch >= 0)
        return {
            "transactional_ids": sum(states.values()),
            "open": states[TransactionState.ONGOING]
            + states[TransactionState.PREPARE_COMMIT]
            + states[TransactionState.PREPARE_ABORT],
            "commits": self.counts["commits"],
            "aborts": self.counts["aborts"],
            "timeouts": self.counts["timeouts"],
            "markers_in_flight": self.markers_in_flight,
        }


class _Reply:
    """The ``ctx`` of a request the shell makes itself: the core's answer goes to ``then``."""

    def __init__(self, then: Callable[[dict[str, Any]], None]) -> None:
        self.respond = then


def offset_commit_add_error(code: int) -> int:
    """What TxnOffsetCommit answers for a failed add of the group's partition, as for a failed
    verification (``OffsetManager._txn_verify_error``): AddPartitionsToTxnManager maps
    PRODUCER_FENCED to INVALID_PRODUCER_EPOCH, GroupCoordinatorService.handleOperationException
    NETWORK_EXCEPTION to COORDINATOR_LOAD_IN_PROGRESS and the write errors as appends' are."""
    if code == ErrorCode.PRODUCER_FENCED:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    if code == NETWORK_EXCEPTION:
        return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return append_error_to_response_error(code)


async def _guard(make: Callable[[], Awaitable[Any]]) -> Any:
    """Await what ``make`` starts: an exception raised while starting it is gathered like any other."""
    return await make()


def _code_of(answer: Any, m: WriteMarkers, partitions: list[TopicPartition]) -> int:
    if isinstance(answer, BaseException):
        log.error(
            "transaction_marker_write_failed",
            transactional_id=m.transactional_id,
            partitions=[f"{t}-{p}" for t, p in partitions],
            exc_info=(type(answer), answer, answer.__traceback__),
        )
        return int(ErrorCode.KAFKA_STORAGE_ERROR)
    return int(answer)
