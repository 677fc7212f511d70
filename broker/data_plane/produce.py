"""Produce: the checks of each batch, the idempotent and transactional producer checks, the append.

Every broker of the process shares one log per partition (cluster mode only decides which broker
may answer for it: ``broker/cluster.py``), so ``acks=1`` and ``acks=all`` mean the same thing: the
append is in the log (and fsynced first under ``--fsync always``). Everything Kafka checks before an
append is checked first, on the event-loop thread, in Kafka's order (``batch_checks.py``), then the
idempotent-producer state (below). The batch then goes, as sent (compressed batches are stored
compressed), to the group-commit ``Appender``, which assigns offsets and writes it. Appends are
queued in the order their requests were checked: the check and the hand-off to the appender happen
in one synchronous step (the append task is created immediately, and tasks start in creation
order), so sequence checks and log order can never disagree. A finished append wakes the parked
fetches of that partition (``wake``: ``FetchHandler.notify``), from the append's ``Settled``; an
answer whose partitions all succeeded is encoded by ``produce_wire`` (no dict per partition).

Idempotent producers. Per partition and producer id: the epoch and the metadata of the last five
batches (``ProducerStateManager``'s cache, ``producer_state.py``). A batch whose epoch is older than
the producer's is fenced (INVALID_PRODUCER_EPOCH); one that repeats a cached batch's sequence range
is a duplicate and is answered NONE with the *original* base offset, without writing anything
(Kafka's behaviour: ``findDuplicateBatch``; a retry that arrives while the original is still being
written waits for it); otherwise its first sequence must follow the last one
(OUT_OF_ORDER_SEQUENCE_NUMBER), and a new epoch must start at sequence 0. An unknown producer may
start anywhere (KIP-360). The cache counts batches still being written, and a batch whose write
fails is taken back out, so its retry is in sequence again. A partition whose state is not loaded
yet loads it first (``producers.py``); its idempotent batches wait for that, in arrival order.

Transactions. A Produce whose batches are transactional needs the request's transactional id (else
the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as KafkaApis answers); each batch then
passes the producer checks (a stale epoch is INVALID_PRODUCER_EPOCH at every version, a plain batch
inside an open transaction INVALID_TXN_STATE) and, when it would open a transaction in the
partition, KIP-890's verification through ``txn_verifier`` (set by the transaction shell). From
Produce v12 on (a transaction version 2 client, which sends no AddPartitionsToTxn) the partition is
added to the transaction instead (``txn_adder``: Kafka's ``AddPartitionsToTxnManager`` with
``ADD_PARTITION``, retried while the coordinator answers CONCURRENT_TRANSACTIONS); the batch is
checked and handed to the appender once the add is durable, then as any other.

Old versions. Produce v0-2, which Kafka 4.0 removed, is served as Kafka 3.x served it, for clients
written against Kafka 2.x (sarama's default Version, kafka-go 0.2, Burrow): the message set (magic
0/1) becomes one v2 batch before the usual checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.storage import PartitionLog, legacy
from groupd.storage import records as rec
from groupd.storage.errors import (
    CorruptRecordError,
    LogClosedError,
    RecordTooLargeError,
    StorageError,
    UnsupportedCompressionError,
)

from ..producer_state import BatchMeta, PartitionProducers, last_sequence
from ..topics import Topic, TopicRegistry
from .batch_checks import LIMITS, check_batch, partition_error, up_convert
from .produce_wire import FIRST_WIRE_VERSION, ProduceAnswer, Success, encode_answer, native
from .producers import Load, ProducerStates
from .state import INT32_MAX, DataState, Key, Wake

__all__ = ["LEGACY_PRODUCE_MAX", "PRODUCE_VERSIONS", "PendingAppend", "ProduceHandler", "TxnAdder", "append_error"]

# What Produce serves (and ApiVersions advertises): the whole range of the schema. v12 is v11 from a
# client that speaks transaction version 2 (AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation).
PRODUCE_VERSIONS = (0, 12)
# The first Produce version whose transactional batches add their partition (ADD_PARTITION).
FIRST_ADDING_PRODUCE = 12

# Not in ErrorCode (groupd answered neither before transaction version 2).
NETWORK_EXCEPTION = 13
NOT_ENOUGH_REPLICAS = 19

# (transactional id, producer id, epoch, partitions) -> the coordinator's code per partition
TxnAdder = Callable[[str, int, int, list[tuple[str, int]]], Awaitable[dict[tuple[str, int], int]]]
# The newest version that may carry message sets (magic 0/1).
LEGACY_PRODUCE_MAX = 2

log = structlog.get_logger("groupd.data")

# The compiled steps (produce_wire.native): each declines (None) what the Python path then decides.
_native_check = native.check_batch if native is not None else None
_native_any_txn = native.any_transactional if native is not None else None
_native_answer = native.encode_answer if native is not None else None
_DIFF, _BEFORE, _AFTER = LIMITS


class PendingAppend:
    """One partition of a Produce request whose outcome is a future: the append of its batch, or
    another's (a duplicate's original; ``duplicate`` is then its metadata), or a wait (a producer
    state load, a transaction add).

    For its own append (made with its ``handler``) it is also the appender's ``on_settled`` (``__call__``),
    which runs in the loop iteration of the write, not the next one as a future's done callbacks
    would: the producer state learns the offsets (or forgets the batch), the partition's parked
    fetches are woken, then ``then`` runs (the request's answer). One object per partition, not
    an object for the request's partition and one for its append (issue 29 item 4, issue 26)."""

    __slots__ = (
        "duplicate",
        "future",
        "handler",
        "index",
        "key",
        "lat",
        "meta",
        "own",
        "pid",
        "plog",
        "producers",
        "size",
        "then",
    )

    def __init__(
        self,
        index: int,
        plog: PartitionLog,
        future: asyncio.Future[Any] | None,
        lat: int,
        duplicate: BatchMeta | None = None,
        handler: ProduceHandler | None = None,
        key: Key | None = None,
        size: int = 0,
        producers: PartitionProducers | None = None,
        pid: int = -1,
        meta: BatchMeta | None = None,
    ) -> None:
        self.index = index
        self.plog = plog
        self.future = future
        self.lat = lat
        self.duplicate = duplicate
        # With a handler: the ``on_settled`` of its own append (``__call__``), set as ``future``.
        self.own = handler is not None
        self.handler = handler
        self.key = key
        self.size = size
        self.producers = producers
        self.pid = pid
        self.meta = meta
        self.then: _Answer | None = None

    def __call__(self, fut: asyncio.Future[Any]) -> None:
        producers, meta = self.producers, self.meta
        try:
            if fut.cancelled() or fut.exception() is not None:
                if producers is not None and meta is not None:
                    producers.forget(self.pid, meta)
            else:
                base, last = fut.result()
                if producers is not None and meta is not None:
                    producers.written(meta, base, last)
                    plog = self.plog
                    if plog.has_transactions:  # only such a log has producer snapshots (snapshot_job)
                        self.handler.producer_states.snapshot_if_due(plog, producers)  # type: ignore[union-attr]
                # The partition's fetches are woken before the request is answered (``then`` next).
                self.handler.wake(self.key, self.size)  # type: ignore[union-attr,arg-type]
        except Exception:  # the request's answer still comes (``then`` comes next)
            log.exception("produce_append_callback_failed")
        # Emptied as it is called: the request's callback holds the request's partitions, this
        # object among them, a cycle that left ~26 objects per Produce to the cyclic collector:
        # its young collections took ~7% of a small Produce's CPU (perf, bench.small_requests).
        then, self.then = self.then, None
        if then is not None:
            try:
                # _Answer.__call__ inline: the request's other partitions need no call
                then.left -= 1
                if not then.left:
                    then.answer()
            except Exception:  # the request's answer still comes (its callback is the last)
                log.exception("produce_append_callback_failed")


class _Answer:
    """A Produce request's answer once each of its ``pending`` partitions is settled (called once
    per partition: ``left`` counts them down), sent from there: no coroutine, task or dispatcher
    callback per request (three loop callbacks fewer on the hot path)."""

    __slots__ = ("acks", "handler", "left", "pending", "req", "results")

    def __init__(
        self,
        handler: ProduceHandler,
        req: Request,
        acks: int,
        results: list[tuple[str, list[dict[str, Any] | PendingAppend]]],
        pending: list[PendingAppend],
    ) -> None:
        self.handler = handler
        self.req = req
        self.acks = acks
        self.results = results
        self.pending = pending
        self.left = len(pending)

    def __call__(self, _f: asyncio.Future[Any]) -> None:
        self.left -= 1
        if not self.left:
            self.answer()

    def answer(self) -> None:
        req = self.req
        for part in self.pending:
            if part.future.cancelled():  # type: ignore[union-attr]
                # as the dispatcher treats a cancelled handler
                req.conn.close("handler cancelled", api="Produce")
                return
        try:
            response = self.handler._produce_answer(req, self.acks, self.results)
        except Exception:
            log.exception("handler_failed", api="Produce", api_version=req.api_version)
            req.conn.close("internal error while handling request", api="Produce")
            return
        if response is not None:
            req.respond(response)


class ProduceHandler:
    """Produce (KafkaApis.handleProduceRequest down to the append): checks, producer state, append."""

    def __init__(self, state: DataState, producer_states: ProducerStates, wake: Wake) -> None:
        self.state = state
        self.producer_states = producer_states
        self.wake = wake
        # KIP-890 part 1, set by the transaction shell: (transactional id, producer id, epoch, topic,
        # partition) -> NONE when the partition is in that producer's ongoing transaction, else the
        # coordinator's error (INVALID_TXN_STATE, TRANSACTION_ABORTABLE, PRODUCER_FENCED...).
        # None: transactional batches are not verified.
        self.txn_verifier: Callable[[str, int, int, str, int], int] | None = None
        # Transaction version 2 (Produce v12+): adds the partition to the producer's transaction.
        self.txn_adder: TxnAdder | None = None

    def handle(self, req: Request) -> Any:
        body = req.body
        v = req.api_version
        acks = body["acks"]
        now = self.state.clock()
        topic_data = body["topic_data"] or []
        txn_id = body.get("transactional_id")
        # KafkaApis.handleProduceRequest: transactional batches need the request's transactional id
        # (and WRITE on it); without one the whole request is refused before topics are looked at.
        refused = False
        if txn_id is None:
            refused = _native_any_txn(topic_data) if _native_any_txn is not None else None
            if refused is None:
                refused = _has_transactional_batch(topic_data)
        results: list[tuple[str, list[dict[str, Any] | PendingAppend]]] = []
        topics = self.state.topics.topics  # TopicRegistry.get's dict, without the call
        for td in topic_data:
            name = td["name"]
            t = topics.get(name)
            parts: list[dict[str, Any] | PendingAppend] = []
            for pd in td["partition_data"] or []:
                index = pd["index"]
                if refused:
                    parts.append(
                        partition_error(
                            index,
                            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            "Transactional records need the request's transactional id",
                        )
                    )
                elif t is None or not 0 <= index < t.partitions:
                    parts.append(
                        partition_error(
                            index,
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        )
                    )
                elif acks not in (-1, 0, 1):
                    parts.append(partition_error(index, ErrorCode.INVALID_REQUIRED_ACKS, f"Invalid acks {acks}"))
                else:
                    parts.append(self._produce_partition(t, index, pd.get("records"), v, now, txn_id))
            results.append((name, parts))
        return self._finish_produce(req, acks, results)

    def _produce_partition(
        self, t: Topic, index: int, raw: bytes | None, v: int, now: int, txn_id: str | None = None, added: bool = False
    ) -> dict[str, Any] | PendingAppend:
        if t.internal:
            return partition_error(
                index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {t.name}"
            )
        state = self.state
        key = (t.name, index)
        plog = state.logs.by_key.get(key)  # LogManager.get, without its call
        if plog is None:
            try:
                plog = state.log_for(t, index)
            except (StorageError, ValueError) as exc:
                return partition_error(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
        cfg = plog.config
        check_timestamps = True
        if v <= LEGACY_PRODUCE_MAX and raw and legacy.is_legacy(raw):
            # LogValidator.validateTimestamp skips magic 0: its messages have no timestamps.
            check_timestamps = raw[rec.MAGIC_OFFSET] > 0
            converted = up_convert(index, raw)
            if isinstance(converted, dict):
                return converted
            raw = converted
        view = None
        if _native_check is not None and not cfg.compact:
            configs = t.configs
            if not (_DIFF in configs or _BEFORE in configs or _AFTER in configs):
                view = _native_check(raw, cfg.max_message_bytes, v)  # _check, without its call
        if view is None:
            checked = check_batch(t, cfg, index, raw, v, now, check_timestamps=check_timestamps)
            if type(checked) is dict:
                return checked
            view = checked
        lat = now if cfg.message_timestamp_type == "LogAppendTime" else -1
        if (
            not added
            and v >= FIRST_ADDING_PRODUCE
            and view.is_transactional
            and txn_id is not None
            and self.txn_adder is not None
        ):
            producers = self.state.producers.get(key)
            if producers is None or not producers.has_ongoing_transaction(view.producer_id, view.producer_epoch):
                fut = self._after_add(txn_id, view.producer_id, view.producer_epoch, t, index, raw, v)
                return PendingAppend(index, plog, fut, lat)
        if view.producer_id >= 0:
            producers = state.producers.get(key)
            load = None
            if producers is None or self.producer_states.loading:
                load = self.producer_states.load_for(key, plog)
            if load is not None:
                # The partition's producer state is being rebuilt from the log: this batch, and every
                # idempotent batch after it, waits for that and is then checked in arrival order.
                return PendingAppend(index, plog, self._after_load(load, key, plog, t, index, raw, v, txn_id), lat)
            return self._idempotent_append(state.producers[key], key, plog, index, view, raw, lat, now, v, txn_id)
        part = PendingAppend(index, plog, None, lat, None, self, key, view.size)
        part.future = state.appender.append_future(
            plog, view, log_append_time_ms=lat if lat >= 0 else None, on_settled=part
        )
        return part

    def _idempotent_append(
        self,
        producers: PartitionProducers,
        key: Key,
        plog: PartitionLog,
        index: int,
        view: rec.BatchView,
        raw: bytes | None,
        lat: int,
        now: int,
        v: int,
        txn_id: str | None,
    ) -> dict[str, Any] | PendingAppend:
        pid, epoch = view.producer_id, view.producer_epoch
        first_seq = view.base_sequence
        delta = view.last_offset_delta
        last_seq = first_seq + delta if first_seq <= INT32_MAX - delta else last_sequence(first_seq, delta)
        transactional = bool(view.attributes & rec.TRANSACTIONAL_FLAG)
        if transactional and txn_id is not None and not producers.has_ongoing_transaction(pid, epoch):
            code = self._verify(txn_id, pid, epoch, key, v)
            if code != ErrorCode.NONE:
                log.info("produce_txn_unverified", topic=key[0], partition=index, producer_id=pid, error=code)
                return partition_error(index, code, f"Partition {key[0]}-{index} is not in the transaction")
        code, message, duplicate = producers.check(pid, epoch, first_seq, last_seq, transactional)
        if code != ErrorCode.NONE:
            log.info("produce_sequence_error", topic=key[0], partition=index, producer_id=pid, error=message)
            return partition_error(index, code, message)
        if duplicate is not None:
            return PendingAppend(index, plog, duplicate.pending, lat, duplicate)
        if transactional:
            try:
                plog.note_transactions()  # once per log: its state is then always rebuilt whole
            except StorageError as exc:
                return partition_error(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
        meta = BatchMeta(first_seq, last_seq, -1, -1, view.max_timestamp)
        # the log end offset only bounds a transaction the batch opens (a property call fewer)
        end_offset = plog.log_end_offset if transactional else -1
        producers.record(pid, epoch, meta, now, transactional=transactional, end_offset=end_offset)
        # Queued in the appender now (no task per partition), so batches reach the log in the order
        # they were checked. The checked view, not the bytes: the log then trusts its CRC and
        # header (check_batch verified them) instead of computing the CRC again.
        part = PendingAppend(index, plog, None, lat, None, self, key, view.size, producers, pid, meta)
        part.future = meta.pending = self.state.appender.append_future(
            plog, view, log_append_time_ms=lat if lat >= 0 else None, on_settled=part
        )
        return part

    def _verify(self, txn_id: str, pid: int, epoch: int, key: Key, v: int) -> int:
        """KIP-890 part 1: is this partition in the producer's ongoing transaction? The codes as
        AddPartitionsToTxnManager hands them to Produce: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH,
        TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE below Produce v11 (``defaultError``)."""
        if self.txn_verifier is None:
            return ErrorCode.NONE
        code = self.txn_verifier(txn_id, pid, epoch, key[0], key[1])
        if code == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if code == ErrorCode.TRANSACTION_ABORTABLE and v < 11:
            return ErrorCode.INVALID_TXN_STATE
        return code

    def _after_add(
        self, txn_id: str, pid: int, epoch: int, t: Topic, index: int, raw: bytes | None, v: int
    ) -> asyncio.Future[Any]:
        """Transaction version 2: add the partition to the transaction, then check and append the
        batch (``ReplicaManager.handleProduceAppend``'s postVerificationCallback), with the
        coordinator's error mapped as ``postVerificationCallback`` maps it."""
        adder = self.txn_adder
        assert adder is not None
        key = (t.name, index)

        async def add_then_append() -> tuple[int, int] | dict[str, Any]:
            code = (await adder(txn_id, pid, epoch, [key])).get(key, ErrorCode.UNKNOWN_SERVER_ERROR)
            code = _add_error(code)
            if code != ErrorCode.NONE:
                log.info("produce_txn_add_failed", topic=t.name, partition=index, producer_id=pid, error=code)
                return partition_error(index, code, f"Partition {t.name}-{index} was not added to the transaction")
            if self.state.topics.get(t.name) is not t:
                return partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition was deleted.")
            return await _outcome(self._produce_partition(t, index, raw, v, self.state.clock(), txn_id, added=True))

        return asyncio.ensure_future(add_then_append())

    def _after_load(
        self,
        load: Load,
        key: Key,
        plog: PartitionLog,
        t: Topic,
        index: int,
        raw: bytes | None,
        v: int,
        txn_id: str | None,
    ) -> asyncio.Future[Any]:
        load.waiting += 1

        async def continue_after_load() -> tuple[int, int] | dict[str, Any]:
            producers = await load.future
            try:
                if self.state.logs.get(t.name, index) is not plog:
                    return partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition was deleted.")
                now = self.state.clock()
                checked = _check(t, plog.config, index, raw, v, now)
                if isinstance(checked, dict):
                    return checked
                lat = now if plog.config.message_timestamp_type == "LogAppendTime" else -1
                r = self._idempotent_append(producers, key, plog, index, checked, raw, lat, now, v, txn_id)
            finally:
                # The last waiter lets later batches take the direct path again; until then they
                # queue here, behind the ones that arrived during the load.
                self.producer_states.leave(key, load)
            return await _outcome(r)

        return asyncio.ensure_future(continue_after_load())

    def _finish_produce(
        self, req: Request, acks: int, results: list[tuple[str, list[dict[str, Any] | PendingAppend]]]
    ) -> asyncio.Future[dict[str, Any] | None] | None:
        """Answer once every append is settled: ``req`` is answered from the appends' callbacks and
        None returned, as a parked Fetch is (no coroutine, task or dispatcher callback per request:
        three loop callbacks fewer on the hot path). With nothing to wait for, a done future of the
        answer."""
        pending: list[PendingAppend] = []
        for _, parts in results:
            for part in parts:
                if type(part) is not dict and part.future is not None:  # type: ignore[union-attr]
                    pending.append(part)  # type: ignore[arg-type]
        if not pending:  # every partition refused or a duplicate already written
            answer: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
            answer.set_result(self._produce_answer(req, acks, results))
            return answer
        answer_when_done = _Answer(self, req, acks, results, pending)
        for part in pending:
            if part.own:  # its own append, not settled yet (the appender settles from the loop)
                part.then = answer_when_done
            else:
                part.future.add_done_callback(answer_when_done)  # type: ignore[union-attr]
        return None

    def _produce_answer(
        self, req: Request, acks: int, results: list[tuple[str, list[dict[str, Any] | PendingAppend]]]
    ) -> dict[str, Any] | None:
        # Each partition's outcome once: a Success tuple, or its answer as a dict (an error).
        answers: list[tuple[str, list[Any]]] = []
        failed = False
        plain = True  # every partition a Success: the answer is encoded here (produce_wire)
        for name, parts in results:
            out: list[Any] = []
            for part in parts:
                if type(part) is dict:
                    r = part
                else:
                    fut = part.future
                    # _append_result's common case inline: an append of its own that succeeded
                    if (
                        part.duplicate is None
                        and fut is not None
                        and fut.exception() is None
                        and type(res := fut.result()) is tuple
                    ):
                        r = (part.index, res[0], part.lat, part.plog.answer_start_offset())
                    else:
                        r = self._append_result(name, part)
                if type(r) is dict:
                    plain = False
                    failed = failed or r["error_code"] != ErrorCode.NONE
                out.append(r)
            answers.append((name, out))
        if acks == 0:
            if failed:
                # Kafka closes the connection: a client that asked for no answer cannot learn of the
                # failure otherwise.
                req.conn.close("produce with acks=0 failed", errors=error_summary(_as_dicts(answers)))
            else:
                req.no_response()
            return None
        v = req.api_version
        if plain and v >= FIRST_WIRE_VERSION:
            payload = _native_answer(v, answers) if _native_answer is not None else None
            return ProduceAnswer(payload if payload is not None else encode_answer(v, answers), v)
        return {"responses": _as_dicts(answers), "throttle_time_ms": 0}

    def _append_result(self, topic: str, part: PendingAppend) -> Success | dict[str, Any]:
        """A partition's outcome once its append (a done future, or none for a duplicate) is
        settled: (index, base offset, log-append time, log start offset), or its error answer."""
        if part.duplicate is not None and part.future is None:
            base = part.duplicate.first_offset
        else:
            assert part.future is not None
            exc = part.future.exception()
            if exc is not None:
                if not isinstance(exc, Exception):
                    raise exc
                return append_error(self.state.topics, topic, part.index, exc)
            result = part.future.result()
            if type(result) is dict:  # answered after a producer-state load
                return result
            base = result[0]
        if part.duplicate is not None:
            log.info("produce_duplicate", topic=topic, partition=part.index, base_offset=base)
        plog = part.plog
        return (part.index, base, part.lat, plog.log_start_offset if not plog.closed else -1)


def _check(
    t: Topic, cfg: Any, index: int, raw: Any, v: int, now: int, check_timestamps: bool = True
) -> dict[str, Any] | rec.BatchView:
    """``check_batch``, its header checks in one C call when no record-level check is wanted (no
    compaction, no timestamp limits); the C call's None leaves it to the Python checks, which find
    and word the failure (LogValidator's order)."""
    if _native_check is not None and not cfg.compact:
        configs = t.configs
        if not (_DIFF in configs or _BEFORE in configs or _AFTER in configs):
            view = _native_check(raw, cfg.max_message_bytes, v)
            if view is not None:
                return view  # type: ignore[no-any-return]
    return check_batch(t, cfg, index, raw, v, now, check_timestamps=check_timestamps)


def _as_dicts(answers: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """The answer's ``responses`` as dicts (the generic encoder's input)."""
    return [
        {"name": name, "partition_responses": [r if type(r) is dict else _success(*r) for r in out]}
        for name, out in answers
    ]


def _success(index: int, base: int, lat: int, lso: int) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": ErrorCode.NONE,
        "base_offset": base,
        "log_append_time_ms": lat,
        "log_start_offset": lso,
        "record_errors": [],
        "error_message": None,
    }


def _has_transactional_batch(topic_data: list[dict[str, Any]]) -> bool:
    """Whether any partition's data is a transactional batch (``rec.is_transactional_batch``,
    in plain loops: a generator per request was ~1% of a small Produce)."""
    is_transactional = rec.is_transactional_batch
    for td in topic_data:
        for pd in td["partition_data"] or ():
            if is_transactional(pd.get("records")):
                return True
    return False


async def _outcome(r: dict[str, Any] | PendingAppend) -> tuple[int, int] | dict[str, Any]:
    """What a partition's append that had to wait answers: its error, the original offsets of a
    duplicate, or the offsets once the append is durable."""
    if isinstance(r, dict):
        return r
    if r.duplicate is not None and r.future is None:
        return (r.duplicate.first_offset, r.duplicate.last_offset)
    assert r.future is not None
    return await r.future


def _add_error(code: int) -> int:
    """A TV2 add's error as Produce answers it (``ReplicaManager.handleProduceAppend``): the
    coordinator errors become NOT_ENOUGH_REPLICAS (retriable without a metadata refresh),
    PRODUCER_FENCED INVALID_PRODUCER_EPOCH (``AddPartitionsToTxnManager``); CONCURRENT_TRANSACTIONS
    stays what it is for a TV2 client."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in (
        NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    ):
        return NOT_ENOUGH_REPLICAS
    return code


def append_error(topics: TopicRegistry, topic: str, index: int, exc: BaseException) -> dict[str, Any]:
    """The partition response for a failed append (the storage error as Kafka's error code)."""
    if isinstance(exc, RecordTooLargeError):
        return partition_error(index, ErrorCode.MESSAGE_TOO_LARGE, str(exc))
    if isinstance(exc, CorruptRecordError):
        return partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    if isinstance(exc, UnsupportedCompressionError):
        return partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc))
    if isinstance(exc, LogClosedError):
        t = topics.get(topic)
        if t is None or index >= t.partitions:
            return partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition was deleted.")
        return partition_error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc))
    if isinstance(exc, StorageError):
        return partition_error(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
    log.error("produce_failed", topic=topic, partition=index, exc_info=(type(exc), exc, exc.__traceback__))
    return partition_error(index, ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))


def error_summary(responses: list[dict[str, Any]]) -> list[str]:
    return [
        f"{r['name']}-{p['index']}:{p['error_code']}"
        for r in responses
        for p in r["partition_responses"]
        if p["error_code"] != ErrorCode.NONE
    ]
