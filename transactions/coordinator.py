"""The sans-IO transaction coordinator: Kafka's ``TransactionCoordinator`` + ``TransactionStateManager``.

How the shell drives it (one thread, or under one lock; every call is quick and never blocks):

    coord = TransactionCoordinator(config, producer_ids, topic_partitions=lambda name: count_or_None)
    result = coord.load(now_ms, records)                 # start-up: replay the __transaction_state log
    result = coord.handle(now_ms, "InitProducerId", version, request_dict, ctx)
    result = coord.append_done(now_ms, token, error)     # an Append is durable (error 0) or failed
    result = coord.markers_written(now_ms, transactional_id)  # every marker of a WriteMarkers is durable
    result = coord.tick(now_ms)                          # at next_deadline(): timeouts, expiry, retries

A :class:`TxnResult` carries ``responses`` (``(ctx, response)`` to send now), ``appends`` (records
for one ``__transaction_state`` partition each; the shell reports each back with ``append_done``)
and ``markers`` (COMMIT/ABORT control batches to write to every partition of a transaction; the
shell reports them back with ``markers_written``). A request whose answer waits for a record to be
durable is answered in a later result, as Kafka answers only once ``appendTransactionToLog``'s
callback runs. State changes only when a durable record is replayed (``replay``), on the live path
and at start-up alike; ``pending_state`` marks an id whose record is being written (Kafka's
pendingState), and requests for it meanwhile answer CONCURRENT_TRANSACTIONS. Partition loading,
the routing errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), the call's result and the
appends in flight are the group coordinator's runtime (``coordinator/runtime.py``).

Transaction versions (Kafka's ``TransactionVersion``): a request's version says which one its
client speaks (``transactionVersionForEndTxn``: EndTxn v5+ is TV2; AddPartitionsToTxn v4+, which
only partition leaders send, is TV2; v0-3 and AddOffsetsToTxn are TV0). Version 1 (and 0): the
epoch is bumped by InitProducerId and by fencing only. Version 2 (KIP-890 part 2): every Prepare*
record bumps the epoch (``prepareAbortOrCommit`` with ``supportsEpochBump``) and, when that bump
exhausts it, names the next producer id (``nextProducerId``) that Complete* moves to
(``prepareComplete``); EndTxn v5 answers the producer id and epoch the client goes on with; an
EndTxn abort from Empty/Complete* writes an empty PrepareAbort ("abort when unsure"); partitions are
added by the partition leader on the client's behalf (Produce v12+, TxnOffsetCommit v5+:
``add_partitions``). The coordinator's own aborts (a fence by InitProducerId, a timeout) use the
finalized level (``TransactionConfig.transaction_version``, ``txnManager.transactionVersionLevel``).
The version a transition was made with is persisted (``client_transaction_version``) and replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any

import structlog
from groupd.protocol.frozen import DEFAULT_FACTORY, frozen_record, mutable_record

from ..coordinator.runtime import CoordinatorRuntime
from ..protocol.partitioning import coordinator_partition
from .errors import TxnError, append_error
from .listing import describe_transactions, list_transactions
from .producer_ids import ProducerIdAllocator
from .records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    Record,
    TopicPartition,
    TransactionLogKey,
    TransactionLogValue,
    TransactionState,
)
from .state import SHORT_MAX, IllegalTransactionTransition, TransactionMetadata, is_epoch_exhausted

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

S = TransactionState
E = TxnError

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"

HANDLED_APIS = (
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "DescribeTransactions",
    "ListTransactions",
)

# KIP-588: versions before these cannot read PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead
# (KafkaApis.handleInitProducerIdRequest / handleAddPartitionsToTxnRequest / ... / handleEndTxnRequest).
_FIRST_VERSION_WITH_PRODUCER_FENCED = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2}


@frozen_record
class TransactionConfig:
    """Kafka's ``TransactionStateManagerConfig``/``TransactionLogConfig`` defaults."""

    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    transaction_state_partitions: int = 50  # transaction.state.log.num.partitions
    offsets_topic_partitions: int = 50  # offsets.topic.num.partitions (AddOffsetsToTxn's partition)
    # The finalized transaction.version feature (Kafka 4.x: 2, TransactionVersion.LATEST_PRODUCTION):
    # the version of the coordinator's own aborts, and what ApiVersions reports.
    transaction_version: int = 2

    def __init__(
        self,
        transaction_max_timeout_ms: int = 900_000,
        transactional_id_expiration_ms: int = 604_800_000,
        transaction_state_partitions: int = 50,
        offsets_topic_partitions: int = 50,
        transaction_version: int = 2,
    ) -> None:
        _set(self, "transaction_max_timeout_ms", transaction_max_timeout_ms)
        _set(self, "transactional_id_expiration_ms", transactional_id_expiration_ms)
        _set(self, "transaction_state_partitions", transaction_state_partitions)
        _set(self, "offsets_topic_partitions", offsets_topic_partitions)
        _set(self, "transaction_version", transaction_version)


def partition_for(transactional_id: str, num_partitions: int = 50) -> int:
    """``TransactionStateManager.partitionFor``: ``Utils.abs(transactionalId.hashCode) % partitions``."""
    return coordinator_partition(transactional_id, num_partitions)


@mutable_record
class Append:
    """Records to append, in order, to ``__transaction_state`` partition ``partition``; report the
    outcome with ``append_done(now_ms, token, error)``."""

    token: int
    partition: int
    records: list[Record]

    def __init__(self, token: int, partition: int, records: list[Record]) -> None:
        self.token = token
        self.partition = partition
        self.records = records


@frozen_record
class WriteMarkers:
    """Write a COMMIT (``committed``) or ABORT control batch with this producer id and epoch to every
    partition (Kafka's ``TransactionMarkerChannelManager.addTxnMarkersToSend``); then call
    ``markers_written(now_ms, transactional_id)``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        partitions: frozenset[TopicPartition],
    ) -> None:
        _set(self, "transactional_id", transactional_id)
        _set(self, "producer_id", producer_id)
        _set(self, "producer_epoch", producer_epoch)
        _set(self, "committed", committed)
        _set(self, "partitions", partitions)


@mutable_record
class TxnResult:
    responses: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)
    markers: list[WriteMarkers] = field(default_factory=list)

    def __init__(
        self,
        responses: list[tuple[Any, dict[str, Any]]] = DEFAULT_FACTORY,
        appends: list[Append] = DEFAULT_FACTORY,
        markers: list[WriteMarkers] = DEFAULT_FACTORY,
    ) -> None:
        self.responses = [] if responses is DEFAULT_FACTORY else responses
        self.appends = [] if appends is DEFAULT_FACTORY else appends
        self.markers = [] if markers is DEFAULT_FACTORY else markers

    def extend(self, other: TxnResult) -> None:
        self.responses.extend(other.responses)
        self.appends.extend(other.appends)
        self.markers.extend(other.markers)


def _make_append(token: int, partition: int, records: list[Record], **_extra: Any) -> Append:
    """The runtime's ``append_factory``: the shell's Append (``extra`` names the transactional id,
    which only the coordinator's continuation needs)."""
    return Append(token, partition, records)


class _Gather:
    """Answers once ``n`` parts are in (AddPartitionsToTxn v4+: one append per transaction)."""

    def __init__(self, n: int, finish: Callable[[list[Any]], None]) -> None:
        self.parts: list[Any] = [None] * n
        self.missing = n
        self.finish = finish
        if n == 0:
            finish(self.parts)

    def put(self, i: int, part: Any) -> None:
        self.parts[i] = part
        self.missing -= 1
        if self.missing == 0:
            self.finish(self.parts)


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        producer_ids: ProducerIdAllocator,
        *,
        topic_partitions: Callable[[str], int | None] | None = None,
        owns: Callable[[int], bool] | None = None,
    ) -> None:
        self.config = config
        # the data plane's allocator in a node: idempotent and transactional producers share one sequence
        self.producer_ids = producer_ids
        # partitions of a topic, None when it does not exist (KafkaApis checks the metadata cache)
        self.topic_partitions = topic_partitions or (lambda _name: None)
        self.transactions: dict[str, TransactionMetadata] = {}
        self.log = structlog.get_logger("groupd.transactions")
        # Partition loading and ownership, the call's TxnResult and the appends in flight: the
        # group coordinator's runtime (as Kafka's group and share coordinators share CoordinatorRuntime).
        # ``owns`` decides leadership (default: every partition is this node's); no partition is
        # ever unloaded, so no append is ever abandoned.
        self.runtime: CoordinatorRuntime[TxnResult] = CoordinatorRuntime(
            result_factory=TxnResult,
            num_partitions=config.transaction_state_partitions,
            append_factory=_make_append,
            owns=owns or (lambda _partition: True),
            none=E.NONE,
            not_coordinator=E.NOT_COORDINATOR,
            load_in_progress=E.COORDINATOR_LOAD_IN_PROGRESS,
        )
        # The broker the request being handled came to (None: not routed, see ``handle``).
        self._receiver: int | None = None
        # markers written, Complete* not yet durable: retried by tick (TransactionMarkerChannelManager
        # retries tryAppendToLog the same way)
        self._completing: set[str] = set()

    @property
    def loading(self) -> set[int]:
        """The ``__transaction_state`` partitions being replayed (COORDINATOR_LOAD_IN_PROGRESS)."""
        return self.runtime.loading

    @loading.setter
    def loading(self, partitions: set[int]) -> None:
        self.runtime.loading = partitions

    @property
    def owns(self) -> Callable[[int], bool]:
        """Whether this node leads a ``__transaction_state`` partition (NOT_COORDINATOR otherwise)."""
        owns = self.runtime.owns
        assert owns is not None
        return owns

    @owns.setter
    def owns(self, owns: Callable[[int], bool]) -> None:
        self.runtime.owns = owns

    def route_by(self, leader_of: Callable[[int], int | None]) -> None:
        """In a cluster: a request is served only by the broker leading the id's
        ``__transaction_state`` partition (``leader_of(partition)``), NOT_COORDINATOR elsewhere
        (``TransactionStateManager.getTransactionState``), so a client finds its coordinator again."""
        self.runtime.owns = lambda partition: self._receiver is None or leader_of(partition) == self._receiver

    # --- the shell's entry points ---------------------------------------------------------------
    def load(self, now_ms: int, records: Iterable[Record]) -> TxnResult:
        """Start-up: replay the log, then resend the markers of every transaction caught between
        Prepare* and Complete* (``loadTransactionsForTxnTopicPartition``)."""
        self.runtime.begin(now_ms)
        for key, value in records:
            self.replay(key, value)
        for meta in self.transactions.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._send_markers(meta)
        return self.runtime.finish()

    def replay(self, key: TransactionLogKey, value: TransactionLogValue | None) -> None:
        """Apply one durable record: the only way persisted state changes."""
        txn_id = key.transactional_id
        if value is None:
            self.transactions.pop(txn_id, None)
            self._completing.discard(txn_id)
            return
        meta = self.transactions.get(txn_id)
        if meta is None or meta.producer_epoch == NO_PRODUCER_EPOCH:
            # unknown, or the placeholder of its first InitProducerId
            self.transactions[txn_id] = TransactionMetadata.from_record(txn_id, value)
        else:
            meta.transition_to(value)

    def handle(
        self, now_ms: int, api: str, version: int, request: dict[str, Any], ctx: Any, node_id: int | None = None
    ) -> TxnResult:
        """One request; ``node_id``: the broker of a cluster it came to (None: this node's own
        call, as a partition leader's AddPartitionsToTxnManager reaches the right coordinator)."""
        self.runtime.begin(now_ms)
        self._receiver = node_id
        handler = {
            "InitProducerId": self._init_producer_id,
            "AddPartitionsToTxn": self._add_partitions,
            "AddOffsetsToTxn": self._add_offsets,
            "EndTxn": self._end_txn,
            "DescribeTransactions": lambda v, r, c: describe_transactions(self, v, r, c),
            "ListTransactions": lambda v, r, c: list_transactions(self, v, r, c),
        }[api]
        handler(version, request, ctx)
        return self.runtime.finish()

    def append_done(self, now_ms: int, token: int, error: int | None = 0) -> TxnResult:
        """The shell reports that the append with ``token`` is durable (error 0 or None, as the group
        coordinator takes it) or failed with ``error``."""
        rt = self.runtime
        rt.begin(now_ms)
        pending = rt.complete(token)
        if pending is None:  # abandoned by an unload: never here, no partition is unloaded
            return rt.finish()
        txn_id = pending.extra["transactional_id"]
        code = error or 0
        if code == 0:
            for key, value in pending.records:
                self.replay(key, value)
        else:
            self.log.warning("transaction_log_append_failed", transactional_id=txn_id, error=code)
            meta = self.transactions.get(txn_id)
            if meta is not None:
                meta.pending_state = None
                if meta.producer_epoch == NO_PRODUCER_EPOCH:  # a first InitProducerId that never landed
                    del self.transactions[txn_id]
        pending.on_done(code)
        return rt.finish()

    def markers_written(self, now_ms: int, transactional_id: str) -> TxnResult:
        """Every marker of the transaction is durable: write CompleteCommit/CompleteAbort."""
        self.runtime.begin(now_ms)
        self._completing.add(transactional_id)
        self._try_complete(transactional_id)
        return self.runtime.finish()

    def tick(self, now_ms: int) -> TxnResult:
        self.runtime.begin(now_ms)
        for txn_id in list(self._completing):
            self._try_complete(txn_id)
        self._abort_timed_out_transactions()
        self._remove_expired_transactional_ids()
        return self.runtime.finish()

    def next_deadline(self) -> int | None:
        """The earliest time ``tick`` has something to do (None: nothing scheduled)."""
        if self._completing:
            return self.runtime.now
        deadlines = []
        for meta in self.transactions.values():
            if meta.pending_state is not None:
                continue
            if meta.state == S.ONGOING:
                deadlines.append(meta.start_timestamp_ms + meta.timeout_ms + 1)
            elif meta.state.expiration_allowed:
                deadlines.append(meta.last_update_timestamp_ms + self.config.transactional_id_expiration_ms)
        return min(deadlines, default=None)

    def snapshot(self) -> dict[str, TransactionLogValue]:
        """The persisted state: what a replay of the log rebuilds."""
        return {t: m.to_record() for t, m in self.transactions.items() if m.producer_epoch != NO_PRODUCER_EPOCH}

    # --- plumbing ---------------------------------------------------------------------------------
    def _append(
        self, meta: TransactionMetadata, value: TransactionLogValue | None, on_done: Callable[[int], None]
    ) -> None:
        """Write ``value`` for ``meta`` (None: a tombstone) and mark the transition pending
        (``TransactionStateManager.appendTransactionToLog``); ``on_done`` gets the error code, 0
        once durable."""
        record: Record = (TransactionLogKey(meta.transactional_id), value)
        meta.pending_state = value.state if value is not None else S.DEAD
        partition = partition_for(meta.transactional_id, self.config.transaction_state_partitions)
        self.runtime.append(partition, [record], on_done, transactional_id=meta.transactional_id)

    def leads(self, transactional_id: str) -> bool:
        """Whether the receiving broker leads the id's ``__transaction_state`` partition."""
        return self.owns(partition_for(transactional_id, self.config.transaction_state_partitions))

    def _route_error(self, transactional_id: str) -> int:
        """NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for the id's partition, else NONE."""
        return self.runtime.route_error(partition_for(transactional_id, self.config.transaction_state_partitions))

    def _transit(self, meta: TransactionMetadata, state: TransactionState, **changes: Any) -> TransactionLogValue:
        """The record of ``meta`` moved to ``state`` (Kafka's ``TransitionData``: fields default to
        the current ones; the previous producer id is always the current one)."""
        fields = {
            "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch,
            "transaction_timeout_ms": meta.timeout_ms,
            "state": state,
            "partitions": meta.partitions,
            "last_update_timestamp_ms": self.runtime.now,
            "start_timestamp_ms": meta.start_timestamp_ms,
            "previous_producer_id": meta.producer_id,
            "next_producer_id": meta.next_producer_id,
            "client_transaction_version": meta.client_transaction_version,
            "last_producer_epoch": meta.last_producer_epoch,
        }
        fields.update(changes)
        return TransactionLogValue(**fields)

    @staticmethod
    def _versioned(api: str, version: int, code: int) -> int:
        if code == E.PRODUCER_FENCED and version < _FIRST_VERSION_WITH_PRODUCER_FENCED[api]:
            return E.INVALID_PRODUCER_EPOCH
        return code

    # --- InitProducerId ---------------------------------------------------------------------------
    def _init_producer_id(self, version: int, req: dict[str, Any], ctx: Any) -> None:
        def answer(code: int, pid: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> None:
            code = self._versioned("InitProducerId", version, code)
            self.runtime.respond(
                ctx, {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}
            )

        txn_id = req.get("transactional_id")
        timeout = req.get("transaction_timeout_ms", 0)
        pid, epoch = req.get("producer_id", NO_PRODUCER_ID), req.get("producer_epoch", NO_PRODUCER_EPOCH)
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):  # KafkaApis.handleInitProducerIdRequest
            return answer(E.INVALID_REQUEST)
        if txn_id is None:
            # "if the transactional id is null, then always blindly accept the request and return a
            # new producerId"
            new_pid = self._allocate()
            return answer(E.KAFKA_STORAGE_ERROR) if new_pid is None else answer(E.NONE, new_pid, 0)
        if txn_id == "":
            return answer(E.INVALID_REQUEST)
        if not 0 < timeout <= self.config.transaction_max_timeout_ms:  # validateTransactionTimeoutMs
            return answer(E.INVALID_TRANSACTION_TIMEOUT)
        if code := self._route_error(txn_id):
            return answer(code)
        expected = (pid, epoch) if pid != NO_PRODUCER_ID else None

        meta = self.transactions.get(txn_id)
        if meta is None:
            new_pid = self._allocate()
            if new_pid is None:
                return answer(E.KAFKA_STORAGE_ERROR)
            # Kafka's putTransactionStateIfNotExists: a placeholder at epoch -1, replaced by replay
            meta = TransactionMetadata(txn_id, new_pid, timeout_ms=timeout, last_update_timestamp_ms=self.runtime.now)
            self.transactions[txn_id] = meta

        def valid_producer_id(exp: tuple[int, int]) -> bool:
            # isValidProducerId: a just-created id; the current producer id (its epoch is checked
            # when bumped); or the previous one with an exhausted epoch (a retry after a rotation)
            return (
                meta.producer_epoch == NO_PRODUCER_EPOCH
                or exp[0] == meta.producer_id
                or (exp[0] == meta.previous_producer_id and is_epoch_exhausted(exp[1]))
            )

        if meta.pending_state is not None:
            return answer(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not valid_producer_id(expected):
            return answer(E.PRODUCER_FENCED)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return answer(E.CONCURRENT_TRANSACTIONS)
        if meta.state == S.ONGOING:
            # prepareFenceProducerEpoch, then endTransaction(ABORT, isFromClient = false): the bumped
            # epoch fences the old producer; the client is told to retry once PrepareAbort is durable.
            def after_fence(code: int, *_new: int) -> None:
                answer(code if code else E.CONCURRENT_TRANSACTIONS)

            self._fence_and_abort(meta, after_fence)
            return None
        if meta.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise IllegalTransactionTransition(f"{txn_id} found in {meta.state.kafka_name}")

        empty = {"transaction_timeout_ms": timeout, "partitions": frozenset(), "start_timestamp_ms": -1}
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            # prepareProducerIdRotation
            new_pid = self._allocate()
            if new_pid is None:
                return answer(E.KAFKA_STORAGE_ERROR)
            last = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            value = self._transit(
                meta, S.EMPTY, producer_id=new_pid, producer_epoch=0, last_producer_epoch=last, **empty
            )
        elif meta.epoch_exhausted:
            # prepareIncrementProducerEpoch refuses an exhausted epoch (IllegalStateException, which
            # handleInitProducerId answers UNKNOWN_SERVER_ERROR): an older epoch asking to recover,
            # even the last one a TV2 fence kept, gets no epoch past Short.MAX_VALUE - 1
            return answer(E.UNKNOWN_SERVER_ERROR)
        elif expected is None:
            # prepareIncrementProducerEpoch: a new producer; a new id goes from -1 to 0
            value = self._transit(
                meta, S.EMPTY, producer_epoch=meta.producer_epoch + 1, last_producer_epoch=NO_PRODUCER_EPOCH, **empty
            )
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
            # KIP-360: the producer recovers from an error and nobody took over: bump, remember the last
            value = self._transit(
                meta, S.EMPTY, producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch, **empty
            )
        elif expected[1] == meta.last_producer_epoch:
            # a retry of a bump whose answer was lost: the same epoch again
            value = self._transit(meta, S.EMPTY, **empty)
        else:
            return answer(E.PRODUCER_FENCED)

        def done(code: int) -> None:
            if code:
                answer(append_error(code))
            else:
                self.log.info(
                    "transactional_id_initialized",
                    transactional_id=txn_id,
                    producer_id=value.producer_id,
                    producer_epoch=value.producer_epoch,
                )
                answer(E.NONE, value.producer_id, value.producer_epoch)

        self._append(meta, value, done)
        return None

    def _allocate(self) -> int | None:
        try:
            return self.producer_ids.allocate()
        except OSError as exc:
            self.log.error("producer_id_allocation_failed", error=str(exc))
            return None

    # --- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------
    def _add_partitions(self, version: int, req: dict[str, Any], ctx: Any) -> None:
        if version <= 3:
            # Kafka's V3AndBelow* fields (the producer's form)
            txn = {
                "transactional_id": req.get("v3_and_below_transactional_id"),
                "producer_id": req.get("v3_and_below_producer_id", -1),
                "producer_epoch": req.get("v3_and_below_producer_epoch", -1),
            }
            topics = req.get("v3_and_below_topics") or []

            def reply_v3(results: dict[TopicPartition, int]) -> None:
                self.runtime.respond(
                    ctx,
                    {
                        "throttle_time_ms": 0,
                        "results_by_topic_v3_and_below": _by_topic(results, "results_by_partition"),
                    },
                )

            self._add_partitions_one(version, txn, topics, False, reply_v3)
            return
        transactions = req.get("transactions") or []
        out: list[dict[str, Any]] = [{} for _ in transactions]

        def reply_v4(_parts: list[Any]) -> None:
            self.runtime.respond(ctx, {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": out})

        gather = _Gather(len(transactions), reply_v4)
        for i, t in enumerate(transactions):

            def one(results: dict[TopicPartition, int], i: int = i, t: dict[str, Any] = t) -> None:
                out[i] = {
                    "transactional_id": t.get("transactional_id"),
                    "topic_results": _by_topic(results, "results_by_partition"),
                }
                gather.put(i, None)

            self._add_partitions_one(version, t, t.get("topics") or [], bool(t.get("verify_only")), one)

    def _add_partitions_one(
        self,
        version: int,
        txn: dict[str, Any],
        topics: list[dict[str, Any]],
        verify_only: bool,
        reply: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        wanted = [(t["name"], p) for t in topics for p in t.get("partitions") or []]

        def all_(code: int) -> None:
            reply(dict.fromkeys(wanted, self._versioned("AddPartitionsToTxn", version, code)))

        txn_id = txn.get("transactional_id")
        if not txn_id:
            return all_(E.INVALID_REQUEST)
        # KafkaApis: a partition the broker does not know fails the whole request, the rest are
        # "not attempted"
        unknown = {tp for tp in wanted if not _exists(self.topic_partitions(tp[0]), tp[1])}
        if unknown:
            return reply(
                {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED for tp in wanted}
            )
        if code := self._route_error(txn_id):
            return all_(code)
        if verify_only:
            return self._verify_partitions(txn_id, txn, wanted, reply)
        # TransactionVersion.transactionVersionForAddPartitionsToTxn: v4+ come from partition
        # leaders adding for a TV2 client (Produce v12+, TxnOffsetCommit v5+)
        tv = 2 if version >= 4 else 0
        self._add_to_transaction(
            txn_id, txn.get("producer_id", -1), txn.get("producer_epoch", -1), frozenset(wanted), all_, tv
        )
        return None

    def _verify_partitions(
        self,
        txn_id: str,
        txn: dict[str, Any],
        wanted: list[TopicPartition],
        reply: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        """``handleVerifyPartitionsInTransaction`` (KIP-890 part 1, sent by partition leaders): no
        change, per partition NONE when it is in the ongoing transaction."""
        meta = self.transactions.get(txn_id)
        code = self._producer_check(meta, txn.get("producer_id", -1), txn.get("producer_epoch", -1))
        # "Pending state is not checked since there is a final validation on the append to the log"
        if code == E.NONE and meta is not None and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            code = E.CONCURRENT_TRANSACTIONS
        if code != E.NONE or meta is None:
            return reply(dict.fromkeys(wanted, code))
        return reply({tp: E.NONE if tp in meta.partitions else E.TRANSACTION_ABORTABLE for tp in wanted})

    @staticmethod
    def _producer_check(meta: TransactionMetadata | None, pid: int, epoch: int) -> int:
        if meta is None or meta.producer_epoch == NO_PRODUCER_EPOCH or meta.producer_id != pid:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        return E.NONE

    def _add_to_transaction(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: frozenset[TopicPartition],
        answer: Callable[[int], None],
        tv: int = 0,
    ) -> None:
        """``handleAddPartitionsToTransaction``; ``tv`` is the client's transaction version, which
        the Ongoing record keeps (``prepareAddPartitions``)."""
        meta = self.transactions.get(txn_id)
        if meta is None:
            return answer(E.INVALID_PRODUCER_ID_MAPPING)
        # Kafka checks a pending transition first: with TV2 the producer may already use the new
        # producer id of an epoch overflow that is still pending. groupd's Prepare* always has
        # Complete* pending (Kafka's prepareComplete right after the Prepare* append).
        if meta.pending_state is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return answer(E.CONCURRENT_TRANSACTIONS)
        code = self._producer_check(meta, pid, epoch)
        if code != E.NONE:
            return answer(code)
        if meta.state == S.ONGOING and partitions <= meta.partitions:
            return answer(E.NONE)  # Kafka's shortcut: nothing to write
        # prepareAddPartitions: the first partition starts the transaction (and its timeout)
        starting = meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        value = self._transit(
            meta,
            S.ONGOING,
            partitions=meta.partitions | partitions,
            start_timestamp_ms=self.runtime.now if starting else meta.start_timestamp_ms,
            client_transaction_version=tv,
        )
        self._append(meta, value, lambda c: answer(append_error(c)))
        return None

    def _add_offsets(self, version: int, req: dict[str, Any], ctx: Any) -> None:
        """``handleAddOffsetsToTxnRequest``: the group's ``__consumer_offsets`` partition joins the
        transaction, so the markers reach the transactional offsets (TxnOffsetCommit) too."""

        def answer(code: int) -> None:
            self.runtime.respond(
                ctx, {"throttle_time_ms": 0, "error_code": self._versioned("AddOffsetsToTxn", version, code)}
            )

        txn_id = req.get("transactional_id")
        if not txn_id:
            return answer(E.INVALID_REQUEST)
        if code := self._route_error(txn_id):
            return answer(code)
        offsets_partition = coordinator_partition(req.get("group_id") or "", self.config.offsets_topic_partitions)
        self._add_to_transaction(
            txn_id,
            req.get("producer_id", -1),
            req.get("producer_epoch", -1),
            frozenset({(OFFSETS_TOPIC, offsets_partition)}),
            answer,
        )
        return None

    # --- EndTxn -----------------------------------------------------------------------------------
    def _end_txn(self, version: int, req: dict[str, Any], ctx: Any) -> None:
        """``KafkaApis.handleEndTxnRequest``: v5+ (transaction version 2) also answers the producer
        id and epoch the client goes on with (-1/-1 with an error)."""

        def answer(code: int, pid: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> None:
            response: dict[str, Any] = {"throttle_time_ms": 0, "error_code": self._versioned("EndTxn", version, code)}
            if version >= 5:
                response.update(producer_id=pid, producer_epoch=epoch)
            self.runtime.respond(ctx, response)

        txn_id = req.get("transactional_id")
        if not txn_id:
            return answer(E.INVALID_REQUEST)
        if code := self._route_error(txn_id):
            return answer(code)
        meta = self.transactions.get(txn_id)
        if meta is None or meta.producer_epoch == NO_PRODUCER_EPOCH:
            return answer(E.INVALID_PRODUCER_ID_MAPPING)
        self._end_transaction(
            meta,
            req.get("producer_id", -1),
            req.get("producer_epoch", -1),
            bool(req.get("committed")),
            True,
            answer,
            tv=2 if version >= 5 else 0,  # TransactionVersion.transactionVersionForEndTxn
        )
        return None

    def _end_transaction(
        self,
        meta: TransactionMetadata,
        pid: int,
        epoch: int,
        commit: bool,
        from_client: bool,
        then: Callable[..., None],
        tv: int = 0,
    ) -> None:
        """``TransactionCoordinator.endTransaction``: ``then(code)`` (TV1) or ``then(code, producer
        id, epoch)`` (TV2). ``from_client=False`` is an epoch fence (InitProducerId over an Ongoing
        transaction, or a timeout) with ``epoch`` the bumped one; ``tv`` is the client's
        transaction version, for a fence the finalized one."""
        if tv >= 2:
            return self._end_transaction_tv2(meta, pid, epoch, commit, from_client, then)
        if meta.producer_id != pid:
            return then(E.INVALID_PRODUCER_ID_MAPPING)
        # strict equality for clients; a fence may only raise the epoch
        if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
            return then(E.PRODUCER_FENCED)
        # Kafka sets the Complete* pending state as soon as Prepare* is durable (and at load), so
        # an EndTxn while the markers are written always meets a pending transition
        if meta.pending_state is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return then(E.CONCURRENT_TRANSACTIONS)
        state = meta.state
        if state == S.ONGOING:
            fence = not from_client
            value = self._transit(
                meta,
                S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                producer_epoch=epoch if fence else meta.producer_epoch,
                last_producer_epoch=NO_PRODUCER_EPOCH if fence else meta.last_producer_epoch,
                next_producer_id=NO_PRODUCER_ID,
                client_transaction_version=0,  # endTransactionWithTV1: TransactionVersion.fromFeatureLevel(0)
            )
            self._append(meta, value, self._after_prepare(meta.transactional_id, then, tv2=False))
            return None
        if state == S.COMPLETE_COMMIT:
            return then(E.NONE if commit else E.INVALID_TXN_STATE)
        if state == S.COMPLETE_ABORT:
            return then(E.NONE if not commit else E.INVALID_TXN_STATE)
        if state == S.EMPTY:
            return then(E.INVALID_TXN_STATE)
        raise IllegalTransactionTransition(f"{meta.transactional_id} found in {state.kafka_name}")

    def _end_transaction_tv2(
        self,
        meta: TransactionMetadata,
        pid: int,
        epoch: int,
        commit: bool,
        from_client: bool,
        then: Callable[..., None],
    ) -> None:
        """``TransactionCoordinator.endTransaction`` for transaction version 2: the Prepare*
        record bumps the epoch (a retry is told apart from the next transaction by that epoch), a
        new producer id is taken when the bump exhausts the epoch, and an abort is accepted from
        Empty/Complete* (the client was unsure whether its transaction started)."""
        fence = not from_client  # Kafka: pendingState == PrepareEpochFence, set by its own fences only
        # a retry whose first attempt overflowed the epoch: the new producer id is in place
        retry_on_overflow = (
            not fence and meta.previous_producer_id == pid and epoch == SHORT_MAX - 1 and meta.producer_epoch == 0
        )
        # a retry whose first attempt bumped the epoch
        retry_on_bump = not fence and meta.producer_epoch == epoch + 1
        state = meta.state
        if fence:
            valid_epoch = epoch >= meta.producer_epoch
        elif state in (S.ONGOING, S.EMPTY):
            valid_epoch = epoch == meta.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        else:  # Complete*
            valid_epoch = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow

        def current() -> None:
            then(E.NONE, meta.producer_id, meta.producer_epoch)

        # groupd's Prepare* always has Complete* pending (see _end_transaction)
        if meta.pending_state is not None or state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return then(E.CONCURRENT_TRANSACTIONS)
        if meta.producer_id != pid and not retry_on_overflow:
            return then(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return then(E.PRODUCER_FENCED)
        if state == S.ONGOING:
            return self._prepare_tv2(meta, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False, fence, then)
        if state == S.COMPLETE_COMMIT:
            if commit:
                return current() if is_retry else self._invalid_txn_state(meta, commit, then)
            if is_retry:
                return self._invalid_txn_state(meta, commit, then)
            return self._prepare_tv2(meta, S.PREPARE_ABORT, True, fence, then)
        if state == S.COMPLETE_ABORT:
            if not commit:
                return current() if is_retry else self._prepare_tv2(meta, S.PREPARE_ABORT, True, fence, then)
            return self._invalid_txn_state(meta, commit, then)
        if state == S.EMPTY:
            if not commit:
                return self._prepare_tv2(meta, S.PREPARE_ABORT, True, fence, then)
            return self._invalid_txn_state(meta, commit, then)
        raise IllegalTransactionTransition(f"{meta.transactional_id} found in {state.kafka_name}")

    def _invalid_txn_state(self, meta: TransactionMetadata, commit: bool, then: Callable[..., None]) -> None:
        """``logInvalidStateTransitionAndReturnError``."""
        self.log.warning(
            "transaction_end_invalid_state",
            transactional_id=meta.transactional_id,
            state=meta.state.kafka_name,
            result="COMMIT" if commit else "ABORT",
        )
        then(E.INVALID_TXN_STATE)

    def _prepare_tv2(
        self,
        meta: TransactionMetadata,
        state: TransactionState,
        no_partition_added: bool,
        fence: bool,
        then: Callable[..., None],
    ) -> None:
        """``generateTxnTransitMetadataForTxnCompletion`` + ``prepareAbortOrCommit`` (TV2): epoch
        + 1, the current one kept as the last; a next producer id when that exhausts the epoch (not
        for a fence, which may use the last epoch). An abort with no partition added starts now."""
        next_pid = NO_PRODUCER_ID
        if not fence and meta.epoch_exhausted:
            allocated = self._allocate()
            if allocated is None:
                return then(E.KAFKA_STORAGE_ERROR)
            next_pid = allocated
        value = self._transit(
            meta,
            state,
            producer_epoch=min(meta.producer_epoch + 1, SHORT_MAX),
            last_producer_epoch=meta.producer_epoch,
            start_timestamp_ms=self.runtime.now if no_partition_added else meta.start_timestamp_ms,
            next_producer_id=next_pid,
            client_transaction_version=2,
        )
        self._append(meta, value, self._after_prepare(meta.transactional_id, then, tv2=True))
        return None

    def _after_prepare(self, txn_id: str, then: Callable[..., None], *, tv2: bool) -> Callable[[int], None]:
        """Once Prepare* is durable the outcome is decided: answer (TV2: with the producer id and
        epoch Complete* will have, ``prepareComplete``), then have the markers written."""

        def prepared(code: int) -> None:
            if code:
                return then(append_error(code))
            fresh = self.transactions.get(txn_id)
            if fresh is None:
                return then(E.NONE)
            if tv2:
                then(E.NONE, *_completed_producer(fresh))
            else:
                then(E.NONE)
            self._send_markers(fresh)
            return None

        return prepared

    def _send_markers(self, meta: TransactionMetadata) -> None:
        self.runtime.out.markers.append(
            WriteMarkers(
                meta.transactional_id,
                meta.producer_id,
                meta.producer_epoch,
                meta.state == S.PREPARE_COMMIT,
                meta.partitions,
            )
        )

    def _try_complete(self, txn_id: str) -> None:
        """``prepareComplete`` once the markers are written; a failed append is retried by tick."""
        meta = self.transactions.get(txn_id)
        if meta is None or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            self._completing.discard(txn_id)
            return
        if meta.pending_state is not None:
            return
        self._completing.discard(txn_id)
        complete = S.COMPLETE_COMMIT if meta.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        pid, epoch = _completed_producer(meta)
        value = self._transit(
            meta,
            complete,
            producer_id=pid,
            producer_epoch=epoch,
            partitions=frozenset(),
            next_producer_id=NO_PRODUCER_ID,
        )

        def done(code: int) -> None:
            if code:
                self._completing.add(txn_id)
            else:
                self.log.info("transaction_completed", transactional_id=txn_id, state=complete.kafka_name)

        self._append(meta, value, done)

    # --- timeouts and expiry ----------------------------------------------------------------------
    def _abort_timed_out_transactions(self) -> None:
        """``abortTimedOutTransactions``: an Ongoing transaction past its timeout is aborted with a
        bumped epoch, so its producer is fenced."""
        for meta in list(self.transactions.values()):
            if (
                meta.state == S.ONGOING
                and meta.pending_state is None
                and meta.start_timestamp_ms + meta.timeout_ms < self.runtime.now
            ):
                txn_id = meta.transactional_id
                self.log.info("transaction_timed_out", transactional_id=txn_id, producer_id=meta.producer_id)

                def done(code: int, *_new: int, txn_id: str = txn_id) -> None:
                    if code:
                        self.log.warning("transaction_timeout_abort_failed", transactional_id=txn_id, error=code)

                self._fence_and_abort(meta, done)

    def _fence_and_abort(self, meta: TransactionMetadata, then: Callable[..., None]) -> None:
        """The coordinator aborts ``meta``'s open transaction itself (a successor's InitProducerId,
        a timeout): ``prepareFenceProducerEpoch`` bumps the epoch, fencing the old producer, then
        ``endTransaction(ABORT, isFromClient = false)`` at the finalized transaction version."""
        fenced_epoch = min(meta.producer_epoch + 1, SHORT_MAX)
        self._end_transaction(
            meta,
            meta.producer_id,
            fenced_epoch,
            False,
            from_client=False,
            then=then,
            tv=self.config.transaction_version,
        )

    def _remove_expired_transactional_ids(self) -> None:
        """``removeExpiredTransactionalIds``: an id idle past transactional.id.expiration.ms in
        Empty/Complete* is tombstoned (Dead is only its pending state)."""
        cutoff = self.runtime.now - self.config.transactional_id_expiration_ms
        for meta in list(self.transactions.values()):
            if (
                meta.state.expiration_allowed
                and meta.pending_state is None
                and meta.producer_epoch != NO_PRODUCER_EPOCH
                and meta.last_update_timestamp_ms <= cutoff
            ):
                self._append(meta, None, lambda _code: None)


def _completed_producer(meta: TransactionMetadata) -> tuple[int, int]:
    """The producer id and epoch ``prepareComplete`` writes: with TV2 an exhausted epoch moves to
    the next producer id at epoch 0."""
    if meta.client_transaction_version >= 2 and meta.next_producer_id != NO_PRODUCER_ID:
        return meta.next_producer_id, 0
    return meta.producer_id, meta.producer_epoch


def _exists(count: int | None, partition: int) -> bool:
    return count is not None and 0 <= partition < count


def _by_topic(results: dict[TopicPartition, int], inner: str) -> list[dict[str, Any]]:
    grouped: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), code in results.items():
        grouped.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": int(code)})
    return [{"name": topic, inner: parts} for topic, parts in grouped.items()]
