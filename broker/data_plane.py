"""The data plane: Produce, Fetch, ListOffsets, InitProducerId and DescribeProducers over the
partition logs, and the partition side of transactions (markers, last stable offset).

Theory of operation
-------------------
Every broker of the process shares one log per partition (cluster mode only decides which broker
may answer for it: ``broker/cluster.py``), so the high watermark of a partition is its log end offset and ``acks=1`` and ``acks=all`` mean the same thing: the
append is in the log (and fsynced first under ``--fsync always``). The last stable offset is the
first offset of the oldest transaction still open in the partition, else the high watermark.

Produce. Each partition's data must be exactly one record batch v2 (Kafka's rule for Produce v3+).
Everything Kafka checks before an append is checked here first, on the event-loop thread, in
Kafka's order: size (MESSAGE_TOO_LARGE), CRC (CORRUPT_MESSAGE), header sanity (INVALID_RECORD),
keys on compacted topics and timestamps when the topic limits them, then the idempotent-producer
state (below). The batch then goes, as sent (compressed batches are stored compressed), to the
group-commit ``Appender``, which assigns offsets and writes it. Appends are queued in the order
their requests were checked: the check and the hand-off to the appender happen in one synchronous
step (the append task is created immediately, and tasks start in creation order), so sequence
checks and log order can never disagree. A finished append wakes the parked fetches of that
partition.

Idempotent producers. Per partition and producer id: the epoch and the metadata of the last five
batches (``ProducerStateManager``'s cache). A batch whose epoch is older than the producer's is
fenced (INVALID_PRODUCER_EPOCH); one that repeats a cached batch's sequence range is a duplicate
and is answered NONE with the *original* base offset, without writing anything (Kafka's behaviour:
``findDuplicateBatch``; a retry that arrives while the original is still being written waits for
it); otherwise its first sequence must follow the last one (OUT_OF_ORDER_SEQUENCE_NUMBER), and a
new epoch must start at sequence 0. An unknown producer may start anywhere (KIP-360). The cache
counts batches still being written, and a batch whose write fails is taken back out, so its retry
is in sequence again. After a restart the state of a partition is loaded (``load_producers``: from
its newest producer snapshot and transaction indexes plus the batches after the snapshot for a log
that held transactions, else from its recent segments; producers idle for Kafka's
``producer.id.expiration.ms`` are then dropped, unless a transaction of theirs is open), the first
time an idempotent batch, a marker, a read_committed read or DescribeProducers needs it. Aborts are
appended to their segment's ``.txnindex`` as their markers are written, and the state is
snapshotted after a segment roll (in an executor) and at a clean shutdown.
Producer ids come from blocks of 1000 whose end is persisted (``producer-ids`` in the data dir)
before the first id of a block is handed out, so no id is ever reused, even after a crash.

Transactions, the partition's side (the producer state is ``producer_state.py``). A Produce whose
batches are transactional needs the request's transactional id (else the whole request is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as KafkaApis answers); each batch then passes the producer
checks (a stale epoch is INVALID_PRODUCER_EPOCH at every version, a plain batch inside an open
transaction INVALID_TXN_STATE) and, when it would open a transaction in the partition, KIP-890's
verification through ``txn_verifier`` (set by the transaction shell). ``write_txn_markers`` is the
coordinator's marker channel: a COMMIT/ABORT control batch per partition through the same appender
queue as produce batches, ending the producer's transaction; once written the LSO moves, an abort
joins the aborted index and read_committed fetches parked on the partition are read again (appends
above the LSO do not wake them). read_committed Fetch returns whole batches below the LSO and the
aborted transactions overlapping them; ListOffsets with isolation level 1 answers the LSO for
LATEST and ignores timestamps at or past it. All of it is rebuilt from the log after a restart, the
first time a partition's producer state is needed (start-up reads nothing). InitProducerId with a
transactional id goes to the transaction coordinator (``txn_shell.py`` owns the route and hands
null ids, idempotent producers, to ``init_producer_id`` here; both draw from ``producer_ids``).

Fetch. Partitions are read in request order; the first partition with data may return one batch
larger than the limits (Kafka's ``minOneMessage``), later ones stay within ``partition_max_bytes``
and what is left of ``max_bytes``. Reads return whole batches (Kafka may end a response with a
partial batch; clients accept both), and a response never exceeds Kafka's broker ``fetch.max.bytes``
(55 MiB) whatever the request asks for. If fewer than ``min_bytes`` are available, no partition had
an error and ``max_wait_ms`` > 0, the fetch is parked: it registers with each partition it reads,
each append adds its size to the parked fetch's count (capped per partition at
``partition_max_bytes``), and the fetch is read again and answered once ``min_bytes`` is reached
or its single ``call_later`` timer fires. Nothing polls. A parked fetch holds its request's
in-flight slot, so the server's ``max_inflight`` bounds them per connection, and it is dropped as
soon as its connection closes (a close callback), not when its timer fires. Appends that do not
go through the data plane (the coordinator's own writes to ``__consumer_offsets``) do not wake
fetches; a fetch of that topic waits out ``max_wait_ms``. Fetch sessions are not kept: every answer has session id 0,
which clients take as "no session, send full fetches".

Old versions. Produce v0-2, Fetch v0-3 and ListOffsets v0, which Kafka 4.0 removed, are served as
Kafka 3.x served them, for clients written against Kafka 2.x (sarama's default Version, kafka-go 0.2,
Burrow): a Produce v0-2 message set (magic 0/1) becomes one v2 batch before the usual checks
(``storage/legacy.py``: LogValidator's up-conversion); a Fetch v0-3 answer is down-converted to the
magic the client reads (RecordsUtil.downConvert; zstd batches answer UNSUPPORTED_COMPRESSION_TYPE, as
KafkaApis does below Fetch v10); ListOffsets v0 answers offsets by segment
(``legacy_offsets_before``). Fetch v0-2 keep Kafka 3.x's v3+ rule of returning at least one whole
batch (Kafka sent a truncated one for v0-2, which old clients read as "grow the fetch size").

Topics. Creating a topic or adding partitions creates the partition logs, deleting a topic deletes
them (and wakes fetches parked on them); logs whose topic no longer exists are removed at start-up.
Each topic's ``LogConfig`` comes from its configs (``topic_log_config``). Two background tasks keep
Kafka's two cadences: retention (and idle-producer expiry) every ``log_retention_check_interval_ms``
(Kafka's ``log.retention.check.interval.ms``, 300 s), compaction of dirty compacted partitions every
``log_cleaner_backoff_ms`` (the cleaner's ``log.cleaner.backoff.ms``, 15 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.ratelimit import LogLimiter
from groupd.protocol.server import Request
from groupd.storage import Appender, LogConfig, LogManager, PartitionLog, legacy
from groupd.storage import records as rec
from groupd.storage.compaction import Cleaner
from groupd.storage.epochs import epoch_for_offset
from groupd.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageEngineError,
    StorageError,
    UnsupportedCompressionError,
)
from groupd.storage.files import write_atomically
from groupd.storage.markers import end_txn_marker_batch

from .producer_state import AbortedTxn, BatchMeta, PartitionProducers, last_sequence, load_producers
from .settings import Config
from .topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, Topic, TopicError, TopicRegistry, validate_name

# The broker's own compacted topics (cleanup.policy=compact, Kafka's offsets.topic / transaction
# state log configs): cleaned on the cleaner's cadence, never under retention.
INTERNAL_COMPACTED_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)

T = TypeVar("T")

log = structlog.get_logger("groupd.data")
limited_log = LogLimiter(log)

__all__ = [
    "FETCH_VERSIONS",
    "INIT_PRODUCER_ID_VERSIONS",
    "LIST_OFFSETS_VERSIONS",
    "PRODUCE_VERSIONS",
    "DataPlane",
    "ProducerIdManager",
    "topic_log_config",
]

# What the data plane serves (and ApiVersions advertises): the whole range of each schema.
PRODUCE_VERSIONS = (0, 11)
FETCH_VERSIONS = (0, 12)
LIST_OFFSETS_VERSIONS = (0, 8)
# The newest versions of the old message formats: Produce v0-2 may carry message sets (magic 0/1);
# Fetch v0-1 answers magic 0, v2-3 magic 1 (Kafka 3.x's KafkaApis.handleFetchRequest).
LEGACY_PRODUCE_MAX = 2
LEGACY_FETCH_MAX = 3
INIT_PRODUCER_ID_VERSIONS = (0, 4)
DESCRIBE_PRODUCERS_VERSIONS = (0, 0)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

# One broker alone leads every partition at epoch 0 for ever; in cluster mode the logs stamp each
# batch with the partition's current epoch (PartitionLog.leader_epoch) and leader_guard checks the
# requests' epochs before they get here.
LEADER_EPOCH = 0
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Kafka's broker-side fetch.max.bytes: the most one Fetch response may carry, whatever it asks for.
FETCH_MAX_BYTES = 57_671_680
PRODUCER_ID_BLOCK = 1000
PRODUCER_ID_FILE = "producer-ids"
_BASE_AND_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
KAFKA_DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------------------------------------
# topic configs -> LogConfig


def _int_config(configs: dict[str, str], name: str) -> int | None:
    raw = configs.get(name)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        log.warning("topic_config_ignored", config=name, value=raw, reason="not an integer")
        return None


def topic_log_config(base: LogConfig, configs: dict[str, str]) -> LogConfig:
    """The LogConfig of a user topic: the broker's defaults overridden by the topic's configs.

    Kafka semantics: ``retention.ms`` / ``retention.bytes`` of -1 mean unlimited; ``cleanup.policy``
    is ``delete``, ``compact`` or both. Values that do not parse, or that storage cannot honour, are
    ignored with a warning rather than making the partition unopenable.
    """
    changes: dict[str, Any] = {}
    retention_ms = _int_config(configs, "retention.ms")
    if retention_ms is not None:
        changes["retention_ms"] = None if retention_ms < 0 else retention_ms
    retention_bytes = _int_config(configs, "retention.bytes")
    if retention_bytes is not None:
        changes["retention_bytes"] = None if retention_bytes < 0 else retention_bytes
    segment_bytes = _int_config(configs, "segment.bytes")
    if segment_bytes is not None:
        if rec.HEADER_SIZE <= segment_bytes <= INT32_MAX:
            changes["segment_bytes"] = segment_bytes
        else:
            log.warning("topic_config_ignored", config="segment.bytes", value=segment_bytes, reason="out of range")
    segment_ms = _int_config(configs, "segment.ms")
    if segment_ms is not None and segment_ms > 0:
        changes["segment_ms"] = segment_ms
    delete_retention_ms = _int_config(configs, "delete.retention.ms")
    if delete_retention_ms is not None and delete_retention_ms >= 0:
        changes["delete_retention_ms"] = delete_retention_ms
    max_message_bytes = _int_config(configs, "max.message.bytes")
    if max_message_bytes is not None and max_message_bytes >= 0:
        changes["max_message_bytes"] = max_message_bytes
    index_interval = _int_config(configs, "index.interval.bytes")
    if index_interval is not None and index_interval >= 0:
        changes["index_interval_bytes"] = index_interval
    policy = configs.get("cleanup.policy")
    if policy is not None:
        parts = sorted({p.strip() for p in str(policy).split(",") if p.strip()})
        if parts and set(parts) <= {"compact", "delete"}:
            changes["cleanup_policy"] = ",".join(parts)
        else:
            log.warning("topic_config_ignored", config="cleanup.policy", value=policy, reason="unknown policy")
    ts_type = configs.get("message.timestamp.type")
    if ts_type is not None:
        if ts_type in ("CreateTime", "LogAppendTime"):
            changes["message_timestamp_type"] = ts_type
        else:
            log.warning("topic_config_ignored", config="message.timestamp.type", value=ts_type, reason="unknown type")
    return replace(base, **changes) if changes else base


# ------------------------------------------------------------------------------------------------
# producer ids


class ProducerIdManager:
    """Hands out producer ids from blocks whose end is made durable before the block is used."""

    def __init__(self, path: Path, block: int = PRODUCER_ID_BLOCK) -> None:
        self.path = path
        self.block = block
        self._next = 0
        self._block_end = 0

    def load(self) -> None:
        try:
            value = int(self.path.read_text().strip())
        except FileNotFoundError:
            value = 0
        except ValueError as exc:
            # A torn file can only come from a crash mid-rename, which os.replace rules out; refuse
            # to guess, since guessing low would hand out ids again.
            raise RuntimeError(f"{self.path} is damaged: {exc}") from exc
        self._next = self._block_end = value

    def allocate(self) -> int:
        if self._next >= self._block_end:
            end = self._next + self.block
            write_atomically(self.path, f"{end}\n")
            self._block_end = end
        pid = self._next
        self._next += 1
        return pid


# ------------------------------------------------------------------------------------------------
# requests in flight


class _PendingAppend:
    """One partition of a Produce request whose batch was handed to the appender."""

    __slots__ = ("duplicate", "future", "index", "lat", "plog")

    def __init__(
        self,
        index: int,
        plog: PartitionLog,
        future: asyncio.Future[Any] | None,
        lat: int,
        duplicate: BatchMeta | None = None,
    ) -> None:
        self.index = index
        self.plog = plog
        self.future = future
        self.lat = lat
        self.duplicate = duplicate


class _Load:
    """A rebuild of one partition's producer state and the batches waiting for it."""

    __slots__ = ("future", "waiting")

    def __init__(self, future: asyncio.Future[PartitionProducers]) -> None:
        self.future = future
        self.waiting = 0


class _ParkedFetch:
    """A Fetch waiting for min_bytes or max_wait_ms."""

    __slots__ = ("accumulated", "caps", "done", "keys", "min_bytes", "read_committed", "req", "timer")

    def __init__(self, req: Request, min_bytes: int, accumulated: int, caps: dict[tuple[str, int], int]) -> None:
        self.req = req
        self.read_committed = req.body.get("isolation_level", 0) == 1
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.caps = caps  # remaining bytes each partition may still contribute
        self.keys = list(caps)
        self.timer: asyncio.TimerHandle | None = None
        self.done = False


def _partition_error(index: int, code: int, message: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": extra.get("record_errors", []),
        "error_message": message,
    }


# ------------------------------------------------------------------------------------------------
# the data plane


class DataPlane:
    """Handlers of the four data-plane APIs plus the topic-lifecycle callbacks (module docstring)."""

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
        self.producer_ids = ProducerIdManager(self.data_dir / PRODUCER_ID_FILE)
        self.producer_id_expiration_ms = (
            producer_id_expiration_ms if producer_id_expiration_ms is not None else config.producer_id_expiration_ms
        )
        self.retention_check_interval_ms = (
            retention_check_interval_ms
            if retention_check_interval_ms is not None
            else config.log_retention_check_interval_ms
        )
        self._producers: dict[tuple[str, int], PartitionProducers] = {}
        self._loading: dict[tuple[str, int], _Load] = {}
        self._snapshot_writes: set[asyncio.Future[None]] = set()  # producer snapshots being written
        self._waiters: dict[tuple[str, int], set[_ParkedFetch]] = {}
        # The same parked fetches by connection, dropped when it closes (``_connection_closed``).
        self._parked: dict[Any, set[_ParkedFetch]] = {}
        self.cleaner_backoff_ms = config.log_cleaner_backoff_ms
        self.cleaner = Cleaner()
        self._maintenance: list[asyncio.Task[None]] = []
        # KIP-890 part 1, set by the transaction shell: (transactional id, producer id, epoch, topic,
        # partition) -> NONE when the partition is in that producer's ongoing transaction, else the
        # coordinator's error (INVALID_TXN_STATE, TRANSACTION_ABORTABLE, PRODUCER_FENCED...).
        # None: transactional batches are not verified.
        self.txn_verifier: Callable[[str, int, int, str, int], int] | None = None

    # --- wiring -----------------------------------------------------------------------------------
    def handlers(self) -> list[tuple[str, Callable[[Request], Any], tuple[int, int]]]:
        """(API name, handler, (min, max) version) for the dispatcher."""
        return [
            ("Produce", self.produce, PRODUCE_VERSIONS),
            ("Fetch", self.fetch, FETCH_VERSIONS),
            ("ListOffsets", self.list_offsets, LIST_OFFSETS_VERSIONS),
            ("InitProducerId", self.init_producer_id, INIT_PRODUCER_ID_VERSIONS),
            ("DescribeProducers", self.describe_producers, DESCRIBE_PRODUCERS_VERSIONS),
        ]

    def register_topic_callbacks(self, admin: Any) -> None:
        admin.on_topic_created.append(self.topic_created)
        admin.on_topic_deleted.append(self.topic_deleted)
        admin.on_partitions_added.append(self.partitions_added)

    def start(self) -> None:
        """After the topic registry is loaded and the logs are open: reconcile logs with topics,
        load the producer-id block, start the retention task (when a loop is running)."""
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
        for interval_ms, task in (
            (self.retention_check_interval_ms, self.run_retention),
            (self.cleaner_backoff_ms, self.run_cleaner),
        ):
            if interval_ms > 0:
                self._maintenance.append(asyncio.create_task(self._every(interval_ms, task)))

    async def close(self) -> None:
        for task in self._maintenance:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._maintenance = []
        # ProducerStateManager.takeSnapshot at a clean shutdown, after the ones being written.
        while self._snapshot_writes:
            await asyncio.gather(*list(self._snapshot_writes), return_exceptions=True)
        for key, producers in self._producers.items():
            plog = self.logs.get(*key)
            job = producers.snapshot_job(plog, shutdown=True) if plog is not None else None
            if job is not None:
                job()
        for waiters in list(self._waiters.values()):
            for w in list(waiters):
                self._complete(w)

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
            self._producers[(topic, p)] = PartitionProducers()  # nothing to rebuild

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
        for key in [k for k in self._producers if k[0] == t.name]:
            del self._producers[key]
        for key in [k for k in self._loading if k[0] == t.name]:
            del self._loading[key]
        for key in [k for k in self._waiters if k[0] == t.name]:
            for w in list(self._waiters.get(key, ())):
                self._complete(w)

    def _log(self, t: Topic, p: int) -> PartitionLog:
        plog = self.logs.get(t.name, p)
        if plog is None:
            plog = self.logs.get_or_create(t.name, p)
        return plog

    # --- Produce ----------------------------------------------------------------------------------
    def produce(self, req: Request) -> Any:
        body = req.body
        v = req.api_version
        acks = body["acks"]
        now = self.clock()
        topic_data = body["topic_data"] or []
        txn_id = body.get("transactional_id")
        # KafkaApis.handleProduceRequest: transactional batches need the request's transactional id
        # (and WRITE on it); without one the whole request is refused before topics are looked at.
        refused = txn_id is None and any(
            rec.is_transactional_batch(pd.get("records")) for td in topic_data for pd in (td["partition_data"] or [])
        )
        results: list[tuple[str, list[dict[str, Any] | _PendingAppend]]] = []
        for td in topic_data:
            name = td["name"]
            t = self.topics.get(name)
            parts: list[dict[str, Any] | _PendingAppend] = []
            for pd in td["partition_data"] or []:
                index = pd["index"]
                if refused:
                    parts.append(
                        _partition_error(
                            index,
                            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            "Transactional records need the request's transactional id",
                        )
                    )
                elif t is None or not 0 <= index < t.partitions:
                    parts.append(
                        _partition_error(
                            index,
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        )
                    )
                elif acks not in (-1, 0, 1):
                    parts.append(_partition_error(index, ErrorCode.INVALID_REQUIRED_ACKS, f"Invalid acks {acks}"))
                else:
                    parts.append(self._produce_partition(t, index, pd.get("records"), v, now, txn_id))
            results.append((name, parts))
        return self._finish_produce(req, acks, results)

    def _produce_partition(
        self, t: Topic, index: int, raw: bytes | None, v: int, now: int, txn_id: str | None = None
    ) -> dict[str, Any] | _PendingAppend:
        if t.internal:
            return _partition_error(
                index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {t.name}"
            )
        try:
            plog = self._log(t, index)
        except (StorageError, ValueError) as exc:
            return _partition_error(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
        cfg = plog.config
        check_timestamps = True
        if v <= LEGACY_PRODUCE_MAX and raw and legacy.is_legacy(raw):
            # LogValidator.validateTimestamp skips magic 0: its messages have no timestamps.
            check_timestamps = raw[rec.MAGIC_OFFSET] > 0
            converted = _up_convert(index, raw)
            if isinstance(converted, dict):
                return converted
            raw = converted
        checked = self._check_batch(t, plog, cfg, index, raw, v, now, check_timestamps=check_timestamps)
        if isinstance(checked, dict):
            return checked
        view = checked
        lat = now if cfg.message_timestamp_type == "LogAppendTime" else -1
        key = (t.name, index)
        if view.producer_id >= 0:
            load = self._loading.get(key)
            if load is None and key not in self._producers:
                load = self._loading[key] = _Load(asyncio.ensure_future(self._load_producers(key, plog)))
            if load is not None:
                # The partition's producer state is being rebuilt from the log: this batch, and every
                # idempotent batch after it, waits for that and is then checked in arrival order.
                return _PendingAppend(index, plog, self._after_load(load, key, plog, t, index, raw, v, txn_id), lat)
            return self._idempotent_append(self._producers[key], key, plog, index, view, raw, lat, now, v, txn_id)
        fut = self._start_append(key, plog, raw, lat)  # type: ignore[arg-type]
        return _PendingAppend(index, plog, fut, lat)

    def _idempotent_append(
        self,
        producers: PartitionProducers,
        key: tuple[str, int],
        plog: PartitionLog,
        index: int,
        view: rec.BatchView,
        raw: bytes | None,
        lat: int,
        now: int,
        v: int,
        txn_id: str | None,
    ) -> dict[str, Any] | _PendingAppend:
        pid, epoch = view.producer_id, view.producer_epoch
        first_seq = view.base_sequence
        last_seq = last_sequence(first_seq, view.last_offset_delta)
        transactional = view.is_transactional
        if transactional and txn_id is not None and not producers.has_ongoing_transaction(pid, epoch):
            code = self._verify(txn_id, pid, epoch, key, v)
            if code != ErrorCode.NONE:
                log.info("produce_txn_unverified", topic=key[0], partition=index, producer_id=pid, error=code)
                return _partition_error(index, code, f"Partition {key[0]}-{index} is not in the transaction")
        code, message, duplicate = producers.check(pid, epoch, first_seq, last_seq, transactional)
        if code != ErrorCode.NONE:
            log.info("produce_sequence_error", topic=key[0], partition=index, producer_id=pid, error=message)
            return _partition_error(index, code, message)
        if duplicate is not None:
            return _PendingAppend(index, plog, duplicate.pending, lat, duplicate)
        if transactional:
            try:
                plog.note_transactions()  # once per log: its state is then always rebuilt whole
            except StorageError as exc:
                return _partition_error(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
        meta = BatchMeta(first_seq, last_seq, timestamp=view.max_timestamp)
        producers.record(pid, epoch, meta, now, transactional=transactional, end_offset=plog.log_end_offset)
        fut = self._start_append(key, plog, raw, lat, producers=producers, pid=pid, meta=meta)  # type: ignore[arg-type]
        meta.pending = fut
        return _PendingAppend(index, plog, fut, lat)

    def _verify(self, txn_id: str, pid: int, epoch: int, key: tuple[str, int], v: int) -> int:
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

    def _after_load(
        self,
        load: _Load,
        key: tuple[str, int],
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
                if self.logs.get(t.name, index) is not plog:
                    return _partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition was deleted.")
                now = self.clock()
                checked = self._check_batch(t, plog, plog.config, index, raw, v, now)
                if isinstance(checked, dict):
                    return checked
                lat = now if plog.config.message_timestamp_type == "LogAppendTime" else -1
                r = self._idempotent_append(producers, key, plog, index, checked, raw, lat, now, v, txn_id)
            finally:
                # The last waiter lets later batches take the direct path again; until then they
                # queue here, behind the ones that arrived during the load.
                load.waiting -= 1
                if load.waiting == 0 and self._loading.get(key) is load:
                    del self._loading[key]
            if isinstance(r, dict):
                return r
            if r.duplicate is not None and r.future is None:
                return (r.duplicate.first_offset, r.duplicate.last_offset)
            assert r.future is not None
            return await r.future

        return asyncio.ensure_future(continue_after_load())

    async def _load_producers(self, key: tuple[str, int], plog: PartitionLog) -> PartitionProducers:
        t0 = time.perf_counter()
        since = self.clock() - self.producer_id_expiration_ms
        loop = asyncio.get_running_loop()
        try:
            producers = await loop.run_in_executor(None, load_producers, plog, since)
        except (StorageEngineError, OSError) as exc:
            log.error("producer_state_load_failed", topic=key[0], partition=key[1], error=str(exc))
            producers = PartitionProducers()
        # Appends of non-idempotent batches during the scan cannot add producers.
        if self.logs.get(*key) is not plog:
            return producers  # deleted meanwhile: the waiters see that and answer for themselves
        self._producers.setdefault(key, producers)
        log.info(
            "producer_state_loaded",
            topic=key[0],
            partition=key[1],
            producers=len(producers.producers),
            snapshot_offset=producers.loaded_from,
            batches_replayed=producers.replayed,
            ms=round((time.perf_counter() - t0) * 1000, 1),
        )
        return self._producers[key]

    def _check_batch(
        self,
        t: Topic,
        plog: PartitionLog,
        cfg: LogConfig,
        index: int,
        raw: bytes | None,
        v: int,
        now: int,
        *,
        check_timestamps: bool = True,
    ) -> dict[str, Any] | rec.BatchView:
        """Kafka's validation of a client's batch (ProduceRequest.validateRecords, LogValidator)."""
        if not raw:
            return _partition_error(
                index,
                ErrorCode.INVALID_RECORD,
                f"Produce requests with version {v} must have at least one record batch",
            )
        if len(raw) < rec.HEADER_SIZE or raw[16] != 2:
            return _partition_error(
                index,
                ErrorCode.INVALID_RECORD,
                f"Produce requests with version {v} are only allowed to contain record batches with magic version 2",
            )
        try:
            view = rec.BatchView(raw, 0)
        except CorruptRecordError as exc:
            return _partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
        if view.size != len(raw):
            return _partition_error(
                index,
                ErrorCode.INVALID_RECORD,
                f"Produce requests with version {v} are only allowed to contain exactly one record batch per partition",
            )
        codec = view.compression
        if codec > rec.COMPRESSION_ZSTD:
            return _partition_error(
                index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"Unknown compression type id {codec}"
            )
        if codec == rec.COMPRESSION_ZSTD and v < 7:
            return _partition_error(
                index,
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Produce requests with version {v} are not allowed to use ZStandard compression",
            )
        if view.size > cfg.max_message_bytes:
            return _partition_error(
                index,
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The record batch size in the append to {t.name}-{index} is {view.size} bytes which exceeds "
                f"the maximum configured value of {cfg.max_message_bytes}.",
            )
        if not view.crc_ok():
            return _partition_error(
                index,
                ErrorCode.CORRUPT_MESSAGE,
                f"Record is corrupt (stored crc = {view.crc}) in topic partition {t.name}-{index}.",
            )
        if view.base_offset != 0:
            return _partition_error(
                index,
                ErrorCode.INVALID_RECORD,
                f"The baseOffset of the record batch in the append to {t.name}-{index} should be 0, but it is {view.base_offset}",
            )
        if view.is_control:
            return _partition_error(index, ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
        if view.record_count != view.last_offset_delta + 1 or view.record_count <= 0:
            return _partition_error(
                index,
                ErrorCode.INVALID_RECORD,
                f"Record count {view.record_count} does not match lastOffsetDelta {view.last_offset_delta}",
            )
        if view.is_transactional and view.producer_id < 0:
            return _partition_error(
                index, ErrorCode.INVALID_RECORD, "Transactional record batches must have a producer id"
            )
        if view.producer_id >= 0 and view.base_sequence < 0:
            return _partition_error(
                index,
                ErrorCode.INVALID_RECORD,
                f"Invalid sequence number {view.base_sequence} in record batch with producerId {view.producer_id}",
            )
        if cfg.compact or (check_timestamps and _timestamp_limits(t.configs) != (None, None)):
            return self._check_records(t, cfg, index, view, now, check_timestamps=check_timestamps)
        return view

    def _check_records(
        self, t: Topic, cfg: LogConfig, index: int, view: rec.BatchView, now: int, *, check_timestamps: bool = True
    ) -> dict[str, Any] | rec.BatchView:
        """Record-level checks that need the records decoded: keys on compacted topics, timestamps
        when the topic limits them."""
        try:
            records = view.records_kv()
        except UnsupportedCompressionError as exc:
            return _partition_error(
                index,
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"{exc}: groupd must read the records of topic {t.name} ({cfg.cleanup_policy} policy or timestamp limits)",
            )
        except CorruptRecordError as exc:
            return _partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
        if cfg.compact:
            bad = [i for i, r in enumerate(records) if r[2] is None]
            if bad:
                return _partition_error(
                    index,
                    ErrorCode.INVALID_RECORD,
                    "One or more records have been rejected",
                    record_errors=[
                        {
                            "batch_index": i,
                            "batch_index_error_message": "Compacted topic cannot accept message without key",
                        }
                        for i in bad
                    ],
                )
        before, after = _timestamp_limits(t.configs)
        if (
            check_timestamps
            and cfg.message_timestamp_type == "CreateTime"
            and (before is not None or after is not None)
        ):
            errors = []
            for i, r in enumerate(records):
                ts = r[1]
                if (before is not None and ts < now - before) or (after is not None and ts > now + after):
                    errors.append(
                        {
                            "batch_index": i,
                            "batch_index_error_message": f"Timestamp {ts} of message with offset {i} is out of range. "
                            f"The timestamp should be within [{now - (before or 0)}, {now + (after or 0)}]",
                        }
                    )
            if errors:
                return _partition_error(
                    index,
                    ErrorCode.INVALID_TIMESTAMP,
                    "One or more records have been rejected due to invalid timestamp",
                    record_errors=errors,
                )
        return view

    def _start_append(
        self,
        key: tuple[str, int],
        plog: PartitionLog,
        raw: bytes,
        lat: int,
        *,
        producers: PartitionProducers | None = None,
        pid: int = -1,
        meta: BatchMeta | None = None,
    ) -> asyncio.Future[Any]:
        # The task's first step queues the batch in the appender; tasks start in creation order, so
        # batches reach the log in the order they were checked.
        fut = asyncio.ensure_future(self.appender.append(plog, raw, log_append_time_ms=lat if lat >= 0 else None))
        size = len(raw)

        def done(f: asyncio.Future[Any]) -> None:
            if f.cancelled() or f.exception() is not None:
                if producers is not None and meta is not None:
                    producers.forget(pid, meta)
                return
            base, last = f.result()
            if producers is not None and meta is not None:
                producers.written(meta, base, last)
                self._snapshot_if_due(plog, producers)
            self._notify(key, size)

        fut.add_done_callback(done)
        return fut

    async def _finish_produce(
        self, req: Request, acks: int, results: list[tuple[str, list[dict[str, Any] | _PendingAppend]]]
    ) -> dict[str, Any] | None:
        responses = []
        failed = False
        for name, parts in results:
            out = []
            for part in parts:
                if isinstance(part, dict):
                    out.append(part)
                else:
                    out.append(await self._append_result(name, part))
                failed = failed or out[-1]["error_code"] != ErrorCode.NONE
            responses.append({"name": name, "partition_responses": out})
        if acks == 0:
            if failed:
                # Kafka closes the connection: a client that asked for no answer cannot learn of the
                # failure otherwise.
                req.conn.close("produce with acks=0 failed", errors=_error_summary(responses))
            else:
                req.no_response()
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    async def _append_result(self, topic: str, part: _PendingAppend) -> dict[str, Any]:
        if part.duplicate is not None and part.future is None:
            base = part.duplicate.first_offset
        else:
            assert part.future is not None
            try:
                result = await part.future
            except Exception as exc:
                return self._append_error(topic, part.index, exc)
            if isinstance(result, dict):  # answered after a producer-state load
                return result
            base = result[0]
        if part.duplicate is not None:
            log.info("produce_duplicate", topic=topic, partition=part.index, base_offset=base)
        return {
            "index": part.index,
            "error_code": ErrorCode.NONE,
            "base_offset": base,
            "log_append_time_ms": part.lat,
            "log_start_offset": part.plog.log_start_offset if not part.plog.closed else -1,
            "record_errors": [],
            "error_message": None,
        }

    def _append_error(self, topic: str, index: int, exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, RecordTooLargeError):
            return _partition_error(index, ErrorCode.MESSAGE_TOO_LARGE, str(exc))
        if isinstance(exc, CorruptRecordError):
            return _partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
        if isinstance(exc, UnsupportedCompressionError):
            return _partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc))
        if isinstance(exc, LogClosedError):
            t = self.topics.get(topic)
            if t is None or index >= t.partitions:
                return _partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition was deleted.")
            return _partition_error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc))
        if isinstance(exc, StorageError):
            return _partition_error(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
        log.error("produce_failed", topic=topic, partition=index, exc_info=(type(exc), exc, exc.__traceback__))
        return _partition_error(index, ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))

    # --- transaction markers -----------------------------------------------------------------------
    async def write_txn_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], int]:
        """End ``producer_id``'s transaction in each user partition (Kafka's WriteTxnMarkers as the
        coordinator's marker channel sends it): the Kafka error code per partition, NONE once the
        marker is in the log (fsynced first under ``--fsync always``). A partition of an unknown or
        deleted topic answers UNKNOWN_TOPIC_OR_PARTITION (the coordinator counts it as done, as
        Kafka's TransactionMarkerRequestCompletionHandler does); a marker older than the producer's
        epoch INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED
        (ProducerAppendInfo.appendEndTxnMarker). ``__consumer_offsets`` is the group shell's: its
        partitions answer INVALID_TOPIC_EXCEPTION here."""
        keys = list(dict.fromkeys(partitions))
        codes = await asyncio.gather(
            *(self._write_marker(key, producer_id, producer_epoch, committed, coordinator_epoch) for key in keys)
        )
        return dict(zip(keys, codes, strict=True))

    async def _write_marker(
        self, key: tuple[str, int], pid: int, epoch: int, committed: bool, coordinator_epoch: int
    ) -> int:
        topic, index = key
        if topic == OFFSETS_TOPIC:
            log.error("txn_marker_misrouted", topic=topic, partition=index, producer_id=pid)
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        t = self.topics.get(topic)
        if t is None or not 0 <= index < t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            plog = self._log(t, index)
        except (StorageError, ValueError) as exc:
            log.error("txn_marker_failed", topic=topic, partition=index, error=str(exc))
            return ErrorCode.KAFKA_STORAGE_ERROR
        producers = await self._state_for(key, plog)
        if producers is None or self.logs.get(topic, index) is not plog:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        code, message = producers.check_marker(pid, epoch, coordinator_epoch)
        if code != ErrorCode.NONE:
            log.info("txn_marker_refused", topic=topic, partition=index, producer_id=pid, error=message)
            return code
        try:
            plog.note_transactions()
        except StorageError as exc:
            log.error("txn_marker_failed", topic=topic, partition=index, error=str(exc))
            return ErrorCode.KAFKA_STORAGE_ERROR
        now = self.clock()
        raw = end_txn_marker_batch(pid, epoch, committed, coordinator_epoch, now, partition_leader_epoch=LEADER_EPOCH)
        lat = now if plog.config.message_timestamp_type == "LogAppendTime" else None
        # Applied as it is queued, like a data batch, so state and log order agree (module docstring
        # of producer_state); the LSO moves once the marker is written.
        txn = producers.begin_marker(pid, epoch, coordinator_epoch, now)
        # A task, as for data batches: tasks start in creation order, so the appender queues the
        # marker and the batches checked before or after it in the order the state saw them.
        append = asyncio.ensure_future(self.appender.append(plog, raw, log_append_time_ms=lat))
        try:
            base, _last = await append
        except Exception as exc:
            producers.marker_failed(pid, txn)
            return self._append_error(topic, index, exc)["error_code"]
        entry = producers.marker_written(txn, committed, base)
        if entry is not None:
            producers.index_abort(plog, entry)
        self._snapshot_if_due(plog, producers)
        log.debug("txn_marker_written", topic=topic, partition=index, producer_id=pid, committed=committed, offset=base)
        self._notify(key, len(raw), stable_moved=txn is not None)
        return ErrorCode.NONE

    def _snapshot_if_due(self, plog: PartitionLog, producers: PartitionProducers) -> None:
        job = producers.snapshot_job(plog)
        if job is None:
            return
        write = asyncio.get_running_loop().run_in_executor(None, job)
        self._snapshot_writes.add(write)

        def written(f: asyncio.Future[None]) -> None:
            self._snapshot_writes.discard(f)
            # A roll met while this one was being written was skipped: catch up with it now.
            if not plog.closed:
                self._snapshot_if_due(plog, producers)

        write.add_done_callback(written)

    async def _state_for(self, key: tuple[str, int], plog: PartitionLog) -> PartitionProducers | None:
        """The partition's producer state, rebuilt from the log first if needed; taking a place
        in the queue of batches waiting for that rebuild, so the order of arrival holds."""
        load = self._loading.get(key)
        if load is None:
            producers = self._producers.get(key)
            if producers is not None:
                return producers
            load = self._loading[key] = _Load(asyncio.ensure_future(self._load_producers(key, plog)))
        load.waiting += 1
        try:
            producers = await load.future
        finally:
            load.waiting -= 1
            if load.waiting == 0 and self._loading.get(key) is load:
                del self._loading[key]
        return producers if self.logs.get(*key) is plog else None

    def _ready_state(self, key: tuple[str, int]) -> PartitionProducers | None:
        """The producer state if it can be used now (loaded, nobody queued behind its load)."""
        if key in self._loading:
            return None
        return self._producers.get(key)

    # --- Fetch ------------------------------------------------------------------------------------
    def fetch(self, req: Request) -> dict[str, Any] | None:
        body = req.body
        v = req.api_version
        if v >= 7:
            if body["session_id"] != 0:
                return _fetch_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            if body["session_epoch"] not in (0, -1):
                return _fetch_error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if body.get("isolation_level", 0) == 1:
            missing = self._unloaded(body)
            if missing:
                return self._fetch_after_load(req, missing)
        response, total, error, caps = self._read_fetch(body, v)
        if body["max_wait_ms"] <= 0 or total >= body["min_bytes"] or error or not caps:
            return response
        w = _ParkedFetch(req, body["min_bytes"], total, caps)
        for key in w.keys:
            self._waiters.setdefault(key, set()).add(w)
        self._parked.setdefault(req.conn, set()).add(w)
        loop = asyncio.get_running_loop()
        w.timer = loop.call_later(body["max_wait_ms"] / 1000, self._complete, w)
        # A closed connection's fetches go at once, not after max_wait_ms (up to 24 days): a client
        # that parks fetches and reconnects must not pile them up. Its parked fetches are bounded
        # while it is open by the server's max in-flight requests (they hold their slots).
        add_close_callback = getattr(req.conn, "add_close_callback", None)
        if add_close_callback is not None:  # test doubles may not have it
            add_close_callback(self._connection_closed)
        return None

    def _unloaded(
        self, body: dict[str, Any], field: str = "topic", parts: str = "partitions", index: str = "partition"
    ) -> list[tuple[tuple[str, int], PartitionLog]]:
        """The partitions a read_committed request names whose producer state (hence LSO and
        aborted index) must be rebuilt from the log first."""
        out = []
        for tp in body["topics"] or []:
            t = self.topics.get(tp[field])
            for fp in tp[parts] or []:
                i = fp[index] if index else fp
                key = (tp[field], i)
                if t is None or t.name == OFFSETS_TOPIC or not 0 <= i < t.partitions or key in self._producers:
                    continue
                plog = self.logs.get(*key)
                if plog is not None:
                    out.append((key, plog))
        return out

    async def _fetch_after_load(
        self, req: Request, missing: list[tuple[tuple[str, int], PartitionLog]]
    ) -> dict[str, Any] | None:
        for key, plog in missing:
            await self._state_for(key, plog)
        result = self.fetch(req)
        if inspect.isawaitable(result):  # deleted and recreated meanwhile: bounded by the topics' churn
            return await result
        return result

    @property
    def parked_fetches(self) -> int:
        """Fetches waiting for min_bytes or max_wait_ms (the ``groupd_fetch_parked`` gauge)."""
        return sum(map(len, self._parked.values()))

    def _connection_closed(self, conn: Any) -> None:
        for w in list(self._parked.pop(conn, ())):
            self._complete(w)

    def _notify(self, key: tuple[str, int], size: int, *, stable_moved: bool = False) -> None:
        waiters = self._waiters.get(key)
        if not waiters:
            return
        for w in list(waiters):
            if w.read_committed:
                if stable_moved:
                    # The LSO moved: how much became readable is only known by reading.
                    response, total, error, _caps = self._read_fetch(w.req.body, w.req.api_version)
                    if error or total >= w.min_bytes:
                        self._complete(w, response)
                    continue
                producers = self._producers.get(key)
                if producers is not None and producers.unstable:
                    continue  # the append is above the LSO: nothing new for a read_committed reader
            cap = w.caps.get(key, 0)
            n = min(size, cap)
            w.caps[key] = cap - n
            w.accumulated += n
            if w.accumulated >= w.min_bytes:
                self._complete(w)

    def _complete(self, w: _ParkedFetch, response: dict[str, Any] | None = None) -> None:
        if w.done:
            return
        w.done = True
        if w.timer is not None:
            w.timer.cancel()
        for key in w.keys:
            ws = self._waiters.get(key)
            if ws is not None:
                ws.discard(w)
                if not ws:
                    del self._waiters[key]
        ws = self._parked.get(w.req.conn)
        if ws is not None:
            ws.discard(w)
            if not ws:
                del self._parked[w.req.conn]
        if w.req.conn.closed:
            return
        try:
            if response is None:
                response = self._read_fetch(w.req.body, w.req.api_version)[0]
        except Exception:
            log.exception("fetch_failed")
            w.req.conn.close("internal error while handling fetch")
            return
        w.req.respond(response)

    def _read_fetch(self, body: dict[str, Any], v: int) -> tuple[dict[str, Any], int, bool, dict[tuple[str, int], int]]:
        """Read every requested partition now: (response, bytes read, any error, per-partition caps
        of the partitions that can still grow)."""
        limit = min(body.get("max_bytes", INT32_MAX), FETCH_MAX_BYTES)  # absent below v3: no limit
        min_one = True
        total = 0
        error = False
        caps: dict[tuple[str, int], int] = {}
        read_committed = body.get("isolation_level", 0) == 1
        responses = []
        for tp in body["topics"] or []:
            name = tp["topic"]
            t = self.topics.get(name)
            parts = []
            for fp in tp["partitions"] or []:
                index = fp["partition"]
                out = {
                    "partition_index": index,
                    "error_code": ErrorCode.NONE,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": [] if read_committed else None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                parts.append(out)
                if t is None or not 0 <= index < t.partitions:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    error = True
                    continue
                epoch = fp.get("current_leader_epoch", -1)
                if epoch is not None and epoch > LEADER_EPOCH:
                    out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
                    error = True
                    continue
                try:
                    plog = self._log(t, index)
                    hw = plog.log_end_offset
                    start = plog.log_start_offset
                    pmax = min(fp["partition_max_bytes"], FETCH_MAX_BYTES)
                    want = min(pmax, limit)
                    offset = fp["fetch_offset"]
                    if want <= 0 and not min_one:
                        if not start <= offset <= hw:
                            raise OffsetOutOfRangeError(f"offset {offset} outside [{start}, {hw}]")
                        data = b""
                    else:
                        data = plog.read(offset, max(want, 0), min_one_batch=min_one)
                    if read_committed:
                        producers = self._producers.get((name, index)) or PartitionProducers()
                        lso = producers.last_stable_offset(hw, start)
                        data, upper = _stable_prefix(data, lso)
                        aborted = producers.collect_aborted(offset, upper) if data else []
                    if v <= LEGACY_FETCH_MAX and data:
                        data = legacy.down_convert(data, 0 if v <= 1 else 1, offset)
                except OffsetOutOfRangeError:
                    out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    error = True
                    continue
                except UnsupportedCompressionError:
                    # KafkaApis: zstd batches are not down-converted for Fetch below v10.
                    out["error_code"] = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                    error = True
                    continue
                except (StorageError, CorruptRecordError, ValueError) as exc:
                    limited_log.error(
                        "fetch_read_failed", key=(name, index), topic=name, partition=index, error=str(exc)
                    )
                    out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                    error = True
                    continue
                out["high_watermark"] = hw
                if not read_committed:
                    # Kafka fills the LSO whatever the isolation level (LogReadResult); a partition
                    # whose producer state is not rebuilt yet answers its high watermark here.
                    known = self._producers.get((name, index))
                    lso = known.last_stable_offset(hw, start) if known is not None else hw
                out["last_stable_offset"] = lso
                if read_committed:
                    out["aborted_transactions"] = [
                        {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in aborted
                    ]
                out["log_start_offset"] = start
                out["records"] = data
                n = len(data)
                if n:
                    min_one = False
                    total += n
                    limit = max(0, limit - n)
                caps[(name, index)] = max(0, pmax - n)
            responses.append({"topic": name, "partitions": parts})
        response = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}
        return response, total, error, caps

    # --- ListOffsets ------------------------------------------------------------------------------
    def list_offsets(self, req: Request) -> Any:
        body = req.body
        if req.api_version == 0:
            return self._list_offsets_v0(body)
        read_committed = body.get("isolation_level", 0) == 1
        if read_committed:
            missing = self._unloaded(body, "name", "partitions", "partition_index")
            if missing:
                return self._list_offsets_after_load(req, missing)
        seen: dict[tuple[str, int], int] = {}
        for tp in body["topics"] or []:
            for pp in tp["partitions"] or []:
                key = (tp["name"], pp["partition_index"])
                seen[key] = seen.get(key, 0) + 1
        topics = []
        for tp in body["topics"] or []:
            name = tp["name"]
            t = self.topics.get(name)
            parts = []
            for pp in tp["partitions"] or []:
                index = pp["partition_index"]
                out = {
                    "partition_index": index,
                    "error_code": ErrorCode.NONE,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                parts.append(out)
                if seen[(name, index)] > 1:
                    out["error_code"] = ErrorCode.INVALID_REQUEST
                elif t is None or not 0 <= index < t.partitions:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif (pp.get("current_leader_epoch") or -1) > LEADER_EPOCH:
                    out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
                else:
                    try:
                        plog = self._log(t, index)
                        fetchable = plog.log_end_offset
                        if read_committed:
                            producers = self._producers.get((name, index)) or PartitionProducers()
                            fetchable = producers.last_stable_offset(fetchable, plog.log_start_offset)
                        ts, offset = self._offset_for(plog, pp["timestamp"], fetchable)
                        epoch = self._epoch_of(plog, pp["timestamp"], offset)
                    except (StorageError, CorruptRecordError, ValueError) as exc:
                        log.error("list_offsets_failed", topic=name, partition=index, error=str(exc))
                        out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                        continue
                    out["timestamp"], out["offset"], out["leader_epoch"] = ts, offset, epoch
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def _list_offsets_v0(self, body: dict[str, Any]) -> dict[str, Any]:
        """Kafka 3.x's KafkaApis.handleListOffsetRequestV0: up to ``max_num_offsets`` offsets per
        partition (``UnifiedLog.legacyFetchOffsetsBefore``), no duplicate check, no leader epochs."""
        from_consumer = body["replica_id"] == -1
        topics = []
        for tp in body["topics"] or []:
            t = self.topics.get(tp["name"])
            parts = []
            for pp in tp["partitions"] or []:
                index = pp["partition_index"]
                out: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE, "old_style_offsets": []}
                parts.append(out)
                if t is None or not 0 <= index < t.partitions:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                try:
                    plog = self._log(t, index)
                    offsets = legacy_offsets_before(plog, pp["timestamp"], pp["max_num_offsets"], self.clock())
                except (StorageError, OSError, ValueError) as exc:
                    log.error("list_offsets_failed", topic=tp["name"], partition=index, error=str(exc))
                    out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                hw = plog.log_end_offset
                if from_consumer and any(o > hw for o in offsets):
                    # Partition.legacyFetchOffsetsForTimestamp: a consumer never sees past the HW.
                    offsets = [hw, *[o for o in offsets if o <= hw]]
                out["old_style_offsets"] = offsets
            topics.append({"name": tp["name"], "partitions": parts})
        return {"topics": topics}

    async def _list_offsets_after_load(
        self, req: Request, missing: list[tuple[tuple[str, int], PartitionLog]]
    ) -> dict[str, Any]:
        for key, plog in missing:
            await self._state_for(key, plog)
        result = self.list_offsets(req)
        return await result if inspect.isawaitable(result) else result

    @staticmethod
    def _epoch_of(plog: PartitionLog, timestamp: int, offset: int) -> int:
        """The leader epoch ListOffsets answers with ``offset`` (-1: none), as Kafka's
        ``Partition.fetchOffsetForTimestamp`` / ``UnifiedLog.fetchOffsetByTimestamp``: LATEST the
        current leader epoch; EARLIEST the first cached epoch if it starts at or below the log
        start; a timestamp (or MAX_TIMESTAMP) lookup the epoch of the batch holding the offset,
        which is the cache's epoch for it (every batch is stamped with the epoch the cache records
        before the batch is written)."""
        if offset < 0:
            return -1
        entries = plog.leader_epoch_entries()
        if timestamp == LATEST_TIMESTAMP:
            return entries[-1].epoch if entries else -1
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            first = entries[0] if entries else None
            return first.epoch if first is not None and first.start_offset <= plog.log_start_offset else -1
        found = epoch_for_offset(entries, offset)
        return -1 if found is None else found

    @staticmethod
    def _offset_for(plog: PartitionLog, timestamp: int, last_fetchable: int) -> tuple[int, int]:
        """(timestamp, offset) as Kafka's Partition.fetchOffsetForTimestamp answers a consumer:
        LATEST is the last fetchable offset (the LSO for read_committed, else the high watermark),
        EARLIEST the log start, and a timestamp lookup (UnifiedLog.fetchOffsetByTimestamp) only
        counts below the last fetchable offset."""
        if timestamp == LATEST_TIMESTAMP:
            return -1, last_fetchable
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, plog.log_start_offset
        if timestamp == MAX_TIMESTAMP:
            ts, offset = plog.max_timestamp()
            if ts < 0 or offset < plog.log_start_offset or offset >= last_fetchable:
                return -1, -1
            return ts, offset
        found = plog.offset_for_timestamp(timestamp)
        if found is None or found[0] >= last_fetchable:
            return -1, -1
        offset, ts = found
        return ts, offset

    # --- DescribeProducers -------------------------------------------------------------------------
    def describe_producers(self, req: Request) -> Any:
        """KafkaApis.handleDescribeProducersRequest: per partition the producers its state knows
        (ReplicaManager.activeProducerState); the state is rebuilt from the log first if needed."""
        missing = self._unloaded(req.body, "name", "partition_indexes", "")
        if missing:
            return self._describe_after_load(req, missing)
        topics = []
        for tp in req.body["topics"] or []:
            name = tp["name"]
            topic_error: int | None = None
            try:
                validate_name(name)
            except TopicError as exc:
                topic_error = exc.code
            t = self.topics.get(name)
            if topic_error is None and t is None:
                topic_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            parts = []
            for index in tp["partition_indexes"] or []:
                out: dict[str, Any] = {
                    "partition_index": index,
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "active_producers": [],
                }
                parts.append(out)
                if topic_error is not None:
                    out["error_code"] = topic_error
                elif t is None or not 0 <= index < t.partitions:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif name == OFFSETS_TOPIC:
                    continue  # the group shell's partitions: no producer state is kept here
                else:
                    plog = self.logs.get(name, index)
                    producers = self._producers.get((name, index))
                    if plog is None or plog.closed or producers is None:
                        out["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER  # no local log (activeProducerState)
                        continue
                    out["active_producers"] = [
                        {
                            "producer_id": pid,
                            "producer_epoch": e.epoch,
                            "last_sequence": e.last_seq,
                            "last_timestamp": e.last_timestamp,
                            "coordinator_epoch": e.coordinator_epoch,
                            "current_txn_start_offset": e.txn.first_offset if e.txn is not None else -1,
                        }
                        for pid, e in producers.producers.items()
                    ]
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    async def _describe_after_load(
        self, req: Request, missing: list[tuple[tuple[str, int], PartitionLog]]
    ) -> dict[str, Any]:
        for key, plog in missing:
            await self._state_for(key, plog)
        result = self.describe_producers(req)
        return await result if inspect.isawaitable(result) else result

    # --- InitProducerId ---------------------------------------------------------------------------
    def init_producer_id(self, req: Request) -> dict[str, Any]:
        body = req.body
        txn = body.get("transactional_id")

        def error(code: int) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}

        if txn is not None:
            if txn == "":
                return error(ErrorCode.INVALID_REQUEST)
            log.info("transactional_producer_refused", transactional_id=txn, client_id=req.client_id)
            return error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        pid, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
        if (pid == -1) != (epoch == -1):
            return error(ErrorCode.INVALID_REQUEST)
        # Kafka's TransactionCoordinator: for a null transactional id "always blindly accept the
        # request and return a new producerId"; an idempotent producer bumps its epoch itself.
        try:
            new_pid = self.producer_ids.allocate()
        except OSError as exc:
            log.error("producer_id_allocation_failed", error=str(exc))
            return error(ErrorCode.KAFKA_STORAGE_ERROR)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": new_pid, "producer_epoch": 0}

    # --- maintenance ------------------------------------------------------------------------------
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
        for topic, p in self.logs.partitions():
            if topic in INTERNAL_COMPACTED_TOPICS and policy != "compact":
                continue
            plog = self.logs.get(topic, p)
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
                producers = await self._state_for((topic, p), plog)
                if producers is None or plog.closed:
                    continue
                stable = producers.last_stable_offset(plog.log_end_offset, plog.log_start_offset)
                clean = partial(self.cleaner.clean, stable_offset=stable, aborted=_aborted_check(producers.aborted))
            result = await self._in_executor(topic, p, clean, plog)
            if result is not None:
                results[(topic, p)] = result
        return results

    async def run_retention(self) -> dict[tuple[str, int], Any]:
        """Kafka's retention check: time and size retention of user partitions, producer expiry."""
        results: dict[tuple[str, int], Any] = {}
        for topic, p, plog in self._user_logs("delete"):
            results[(topic, p)] = await self._in_executor(topic, p, PartitionLog.apply_retention, plog)
        horizon = self.clock() - self.producer_id_expiration_ms
        for (topic, p), pp in self._producers.items():
            plog = self.logs.get(topic, p)
            if plog is not None and not plog.closed:
                pp.truncate_head(plog.log_start_offset)
        expired = sum(pp.expire(horizon) for pp in self._producers.values())
        if expired:
            log.info("producers_expired", count=expired)
        return results


def legacy_offsets_before(plog: PartitionLog, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """Kafka's ``UnifiedLog.legacyFetchOffsetsBefore`` (ListOffsets v0): the base offsets of the
    segments last modified at or before ``timestamp`` (and the log end offset, stamped ``now``, when
    the active segment holds data), newest first, at most ``max_num_offsets`` of them. LATEST starts
    from the newest entry, EARLIEST from the oldest."""
    segments = plog.segments
    start = plog.log_start_offset
    entries = [(max(s.base_offset, start), int(os.stat(s.log_path).st_mtime * 1000)) for s in segments]
    if segments[-1].size > 0:
        entries.append((plog.log_end_offset, now_ms))
    if timestamp == LATEST_TIMESTAMP:
        i = len(entries) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        i = 0
    else:
        i = len(entries) - 1
        while i >= 0 and entries[i][1] > timestamp:
            i -= 1
    n = max(0, min(max_num_offsets, i + 1))
    return sorted((entries[i - j][0] for j in range(n)), reverse=True)


def _timestamp_limits(configs: dict[str, str]) -> tuple[int | None, int | None]:
    diff = _int_config(configs, "message.timestamp.difference.max.ms")
    before = _int_config(configs, "message.timestamp.before.max.ms")
    after = _int_config(configs, "message.timestamp.after.max.ms")
    before = before if before is not None else diff
    after = after if after is not None else diff
    if before is not None and (before < 0 or before >= INT64_MAX):
        before = None
    if after is not None and (after < 0 or after >= INT64_MAX):
        after = None
    return before, after


def _up_convert(index: int, raw: bytes) -> bytes | dict[str, Any]:
    """A Produce v0-2 message set as the one v2 batch Kafka 3.x's LogValidator would append
    (``convertAndAssignOffsetsNonCompressed`` / ``buildRecordsAndAssignOffsets``): the producer's
    timestamps (none in magic 0: NO_TIMESTAMP), the source codec, no producer id."""
    try:
        return legacy.to_v2(legacy.parse_message_set(raw))
    except CorruptRecordError as exc:
        return _partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    except InvalidRecordError as exc:
        return _partition_error(index, ErrorCode.INVALID_RECORD, str(exc))
    except UnsupportedCompressionError as exc:
        return _partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc))


def _aborted_check(aborted: list[AbortedTxn]) -> Callable[[int, int], bool] | None:
    """A snapshot of the aborted index for the cleaner's thread: is (producer id, offset) in an
    aborted transaction?"""
    if not aborted:
        return None
    ranges: dict[int, list[tuple[int, int]]] = {}
    for a in aborted:
        ranges.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
    return lambda pid, offset: any(first <= offset <= last for first, last in ranges.get(pid, ()))


def _stable_prefix(data: bytes, end: int) -> tuple[bytes, int]:
    """The whole batches of ``data`` that lie below offset ``end`` (the LSO: it always falls on a
    batch boundary), and the offset after the last of them (collectAbortedTxns' upper bound)."""
    pos = 0
    n = len(data)
    upper = -1
    while pos + rec.HEADER_SIZE <= n:
        base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
        if base >= end:
            break
        upper = base + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
        pos += rec.LOG_OVERHEAD + length
    return (data if pos >= n else data[:pos]), upper


def _fetch_error(code: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "session_id": 0, "responses": []}


def _error_summary(responses: list[dict[str, Any]]) -> list[str]:
    return [
        f"{r['name']}-{p['index']}:{p['error_code']}"
        for r in responses
        for p in r["partition_responses"]
        if p["error_code"] != ErrorCode.NONE
    ]
