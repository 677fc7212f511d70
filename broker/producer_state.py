"""Per-partition producer state: idempotent sequences, ongoing transactions, aborted transactions.

Theory of operation
-------------------
Kafka's ``ProducerStateManager`` (with ``ProducerAppendInfo``'s checks) for one partition. Per
producer id: its epoch, the metadata of its last five batches (duplicates and sequence checks),
its coordinator epoch, and the transaction it has open in this partition, if any.

State changes happen when a batch or a marker is *handed to the appender*, on the event-loop
thread, in the same synchronous step as the checks, so the state follows log order exactly (the
appender keeps a partition's appends in the order they were queued). What is only known once the
write is done (offsets) is filled in then:

* a transactional batch that opens a transaction records an ``OpenTxn`` whose first offset is,
  until the write is done, the log end offset at check time: a lower bound of the real one, so a
  reader can never be handed the batch as stable while its offset is unknown;
* a marker detaches the producer's ``OpenTxn`` at once (the producer's next transaction starts
  afresh, as in Kafka where the marker is appended before the next batch is checked) but the
  transaction stays *unstable* until the marker is written: only then does the last stable offset
  move and, for an abort, the aborted transaction (producer id, first offset, marker offset) join
  the index (Kafka's ``.txnindex``).

The last stable offset is the first offset of the oldest unstable transaction, else the high
watermark (``UnifiedLog.firstUnstableOffset``), never below the log start offset.

After a restart the state is rebuilt from batch headers (``replay``): data batches replay the
sequences, transactional ones open transactions, markers close them and aborts rebuild the aborted
index; what is still open at the end holds the LSO until the coordinator's marker comes. Producers
idle for ``producer.id.expiration.ms`` are dropped, except those with an open transaction (Kafka's
``isProducerExpired``).

A log that may hold transactions is not replayed whole (``load_producers``, Kafka's
``UnifiedLog.rebuildProducerState``/``ProducerStateManager.loadFromSnapshot``): the state starts
from the newest readable producer snapshot (``storage/txnindex.py``) at offset X, the aborted index
from the segments' ``.txnindex`` files (entries below X), and only the batches from X on are
replayed, their aborts appended to the index files again. Snapshots are taken by the data plane
(``snapshot``) when the partition's active segment has rolled since the last one
(``ProducerStateManager.takeSnapshot`` on roll) and at a clean shutdown, and only while nothing of
the state is in flight (``inflight``), so that the state is exactly that of the log's first X
offsets. Aborts are appended to the index as their markers are written (``UnifiedLog``'s
``segment.updateTxnIndex``). The snapshot keeps one batch per producer, as Kafka's does
(``ProducerStateEntry``), so a retry of an older one of its last five is no longer recognised as
a duplicate after a restart. Logs without transactions keep the cheaper rebuild from their recent
segments (``scan_producers``) and have neither file.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.storage import PartitionLog
from groupd.storage import records as rec
from groupd.storage import txnindex as txi
from groupd.storage.markers import read_end_txn_marker

log = structlog.get_logger("groupd.data")

__all__ = [
    "AbortedTxn",
    "BatchMeta",
    "OpenTxn",
    "PartitionProducers",
    "ProducerEntry",
    "last_sequence",
    "load_producers",
    "scan_producers",
]

INT32_MAX = 2**31 - 1
CACHED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap from INT32_MAX to 0."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def first_sequence(last_seq: int, offset_delta: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence (a snapshot keeps the last sequence and the delta)."""
    if last_seq - offset_delta < 0:
        return INT32_MAX - (offset_delta - last_seq) + 1
    return last_seq - offset_delta


class AbortedTxn(NamedTuple):
    """An entry of Kafka's transaction index: ``last_offset`` is the ABORT marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int


class OpenTxn:
    """A transaction that is not stable yet: open, or closed by a marker still being written."""

    __slots__ = ("first_offset", "pending", "producer_id", "provisional")

    def __init__(self, producer_id: int, first_offset: int, provisional: bool) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.provisional = provisional  # first_offset is a lower bound until the batch is written
        self.pending = 0  # its batches being written


class BatchMeta:
    __slots__ = ("first_offset", "first_seq", "last_offset", "last_seq", "pending", "timestamp", "txn")

    def __init__(
        self,
        first_seq: int,
        last_seq: int,
        first_offset: int = -1,
        last_offset: int = -1,
        timestamp: int = -1,
        pending: asyncio.Future[Any] | None = None,
    ) -> None:
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.timestamp = timestamp
        self.pending = pending
        self.txn: OpenTxn | None = None


class ProducerEntry:
    __slots__ = ("batches", "coordinator_epoch", "epoch", "last_ms", "last_timestamp", "txn")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMeta] = deque(maxlen=CACHED_BATCHES)
        self.last_ms = -1  # wall clock of the last append (expiry)
        self.last_timestamp = -1  # the newest batch or marker timestamp (DescribeProducers)
        self.coordinator_epoch = -1
        self.txn: OpenTxn | None = None

    def set_epoch(self, epoch: int) -> None:
        # ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch forgets the old one's batches.
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class PartitionProducers:
    """The producer state of one partition (module docstring)."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.unstable: list[OpenTxn] = []
        self.aborted: list[AbortedTxn] = []  # ordered by last_offset (markers are appended in order)
        self._max_span = 0  # the longest aborted transaction (last - first): bounds index scans
        # Batches and markers applied but not written (or failed) yet: a snapshot needs none.
        self.inflight = 0
        self.snapshot_offset = -1  # of the last snapshot taken or loaded
        # How the load went: the snapshot offset it started from (-1: none), the batches it replayed.
        self.loaded_from = -1
        self.replayed = 0
        self._writing = False  # a snapshot is being written
        self._index_ok = True  # False once an index append failed: no snapshot may cover it then

    # --- data batches -----------------------------------------------------------------------------
    def check(
        self, pid: int, epoch: int, first_seq: int, last_seq: int, transactional: bool = False
    ) -> tuple[int, str | None, BatchMeta | None]:
        """(error code, message, duplicate) for a batch about to be appended (ProducerAppendInfo's
        checkProducerEpoch, checkSequence, then the transaction-state check of appendDataBatch)."""
        e = self.producers.get(pid)
        if e is None:
            return ErrorCode.NONE, None, None
        if epoch < e.epoch:
            return (
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {pid} at offset -1 is {epoch}, which is smaller than the last seen epoch {e.epoch}",
                None,
            )
        if epoch == e.epoch:
            batches = e.batches
            for m in batches:
                if m.first_seq == first_seq and m.last_seq == last_seq:
                    return ErrorCode.NONE, None, m
            # in sequence: the next one after the last, wrapping from INT32_MAX to 0
            # (ProducerAppendInfo.inSequence; inline, not two calls per idempotent batch)
            last = batches[-1].last_seq if batches else -1
            if not (first_seq == last + 1 or (first_seq == 0 and last == INT32_MAX)):
                return (
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Out of order sequence number for producer {pid}: {first_seq} (incoming seq. number), "
                    f"{e.last_seq} (current end sequence number)",
                    None,
                )
        elif first_seq != 0:
            return (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), "
                f"{first_seq} (seq. number), {e.epoch} (current producer epoch)",
                None,
            )
        if e.txn is not None and not transactional:
            return (
                ErrorCode.INVALID_TXN_STATE,
                f"Expected transactional write from producer {pid}",
                None,
            )
        return ErrorCode.NONE, None, None

    def has_ongoing_transaction(self, pid: int, epoch: int) -> bool:
        """UnifiedLog.hasOngoingTransaction: no KIP-890 verification is needed then."""
        e = self.producers.get(pid)
        return e is not None and e.txn is not None and e.epoch == epoch

    def record(
        self,
        pid: int,
        epoch: int,
        meta: BatchMeta,
        now_ms: int,
        *,
        transactional: bool = False,
        end_offset: int = -1,
    ) -> None:
        """Apply a checked batch; ``end_offset`` (the log end offset now) bounds the first offset
        of a transaction it opens until the write tells the real one."""
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(epoch)
        if epoch != e.epoch:
            e.set_epoch(epoch)
        e.batches.append(meta)
        if now_ms > e.last_ms:
            e.last_ms = now_ms
        if meta.timestamp > e.last_timestamp:
            e.last_timestamp = meta.timestamp
        if meta.first_offset < 0:
            self.inflight += 1
        if transactional:
            if e.txn is None:
                provisional = meta.first_offset < 0
                e.txn = OpenTxn(pid, end_offset if provisional else meta.first_offset, provisional)
                self.unstable.append(e.txn)
            meta.txn = e.txn
            if meta.first_offset < 0:
                e.txn.pending += 1

    def written(self, meta: BatchMeta, base: int, last: int) -> None:
        meta.first_offset, meta.last_offset = base, last
        meta.pending = None
        self.inflight -= 1
        t = meta.txn
        if t is not None:
            t.pending -= 1
            if t.provisional:
                # The first successful write of the transaction: appends keep queue order, so no
                # later batch of it can have a lower offset.
                t.first_offset, t.provisional = base, False

    def forget(self, pid: int, meta: BatchMeta) -> None:
        """Take back a batch whose append failed, so that its retry is in sequence again."""
        meta.pending = None
        self.inflight -= 1
        t = meta.txn
        e = self.producers.get(pid)
        if t is not None:
            t.pending -= 1
            if t.provisional and t.pending == 0:
                # Nothing of the transaction reached the log: it is not open here after all.
                self._drop_unstable(t)
                if e is not None and e.txn is t:
                    e.txn = None
        if e is None:
            return
        with contextlib.suppress(ValueError):
            e.batches.remove(meta)
        if not e.batches and e.txn is None and e.coordinator_epoch < 0:
            del self.producers[pid]

    # --- markers ----------------------------------------------------------------------------------
    def check_marker(self, pid: int, epoch: int, coordinator_epoch: int) -> tuple[int, str | None]:
        """ProducerAppendInfo.appendEndTxnMarker's checks (transaction version 0/1)."""
        e = self.producers.get(pid)
        if e is None:
            return ErrorCode.NONE, None
        if epoch < e.epoch:
            return (
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {pid} is {epoch}, which is < the last seen epoch {e.epoch} (TV1)",
            )
        if coordinator_epoch < e.coordinator_epoch:
            return (
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producerId {pid}: {coordinator_epoch} (zombie), "
                f"{e.coordinator_epoch} (current)",
            )
        return ErrorCode.NONE, None

    def begin_marker(self, pid: int, epoch: int, coordinator_epoch: int, timestamp: int) -> OpenTxn | None:
        """Apply a checked marker as it is queued: the producer's transaction here ends (it stays
        unstable until ``marker_written``). Returns that transaction (None: nothing was open)."""
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(epoch)
        e.set_epoch(epoch)
        e.coordinator_epoch = coordinator_epoch
        e.last_timestamp = max(e.last_timestamp, timestamp)
        t, e.txn = e.txn, None
        self.inflight += 1
        return t

    def marker_written(self, txn: OpenTxn | None, committed: bool, offset: int) -> AbortedTxn | None:
        self.inflight -= 1
        if txn is None:
            return None  # ProducerAppendInfo: a marker without data leaves no index entry
        self._drop_unstable(txn)
        if txn.provisional:
            return None  # none of its batches reached the log (their writes failed): nothing to skip
        if committed:
            return None
        entry = AbortedTxn(txn.producer_id, txn.first_offset, offset)
        self.aborted.append(entry)
        self._max_span = max(self._max_span, offset - txn.first_offset)
        return entry

    def marker_failed(self, pid: int, txn: OpenTxn | None) -> None:
        """The marker is not in the log: its transaction is open again (the coordinator retries)."""
        self.inflight -= 1
        e = self.producers.get(pid)
        if txn is not None and e is not None and e.txn is None:
            e.txn = txn

    def _drop_unstable(self, txn: OpenTxn) -> None:
        with contextlib.suppress(ValueError):
            self.unstable.remove(txn)

    # --- reads ------------------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        if not self.unstable:  # every Fetch asks (its LSO): no generator when nothing is open
            return None
        return min(t.first_offset for t in self.unstable)

    def last_stable_offset(self, high_watermark: int, log_start: int = 0) -> int:
        first = self.first_unstable_offset()
        if first is None:
            return high_watermark
        return min(max(first, log_start), high_watermark)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """TransactionIndex.collectAbortedTxns over the whole log: the aborted transactions that
        overlap [fetch_offset, upper_bound)."""
        i = bisect.bisect_left(self.aborted, fetch_offset, key=lambda a: a.last_offset)
        # Entries past last_offset >= upper_bound + longest span all start at or after upper_bound.
        # (Kafka's TransactionIndex stops at the first entry ending past the bound, which can miss a
        # longer transaction ending later; this does not.)
        j = bisect.bisect_left(self.aborted, upper_bound + self._max_span, lo=i, key=lambda a: a.last_offset)
        return [a for a in self.aborted[i:j] if a.first_offset < upper_bound]

    def truncate_head(self, log_start: int) -> None:
        """Retention / DeleteRecords: index entries wholly below the log start go (Kafka deletes
        the segments' .txnindex files with them)."""
        i = bisect.bisect_left(self.aborted, log_start, key=lambda a: a.last_offset)
        if i:
            del self.aborted[:i]

    def expire(self, older_than_ms: int) -> int:
        dead = [
            pid
            for pid, e in self.producers.items()
            if e.last_ms < older_than_ms and e.txn is None and not any(m.pending is not None for m in e.batches)
        ]
        for pid in dead:
            del self.producers[pid]
        return len(dead)

    def index_entry(self, entry: AbortedTxn) -> txi.TxnIndexEntry:
        """The .txnindex entry of an abort just applied: its lastStableOffset is the LSO once the
        marker is in (ProducerStateManager.lastStableOffset(completedTxn))."""
        first = self.first_unstable_offset()
        return txi.TxnIndexEntry(
            entry.producer_id, entry.first_offset, entry.last_offset, entry.last_offset + 1 if first is None else first
        )

    # --- snapshots and the transaction index -------------------------------------------------------
    def index_abort(self, plog: PartitionLog, entry: AbortedTxn) -> None:
        """Append a written ABORT to its segment's .txnindex (UnifiedLog's segment.updateTxnIndex).
        On failure no later snapshot is taken: a restart then replays the abort from the log."""
        try:
            txi.append_entry(plog.path, _segment_of_offset(plog, entry.last_offset), self.index_entry(entry))
        except OSError as exc:
            self._index_ok = False
            log.error("txn_index_append_failed", path=str(plog.path), offset=entry.last_offset, error=str(exc))

    def snapshot_job(self, plog: PartitionLog, *, shutdown: bool = False) -> Callable[[], None] | None:
        """ProducerStateManager.takeSnapshot, when due: the active segment rolled since the last
        snapshot (or ``shutdown``, a clean one, and the log grew), nothing is in flight (the state is
        then exactly that of the log's first ``log_end_offset`` offsets) and every abort reached the
        index. The state is encoded now; the returned job writes it (blocking: in an executor)."""
        if not plog.has_transactions or plog.closed or self.inflight or self._writing or not self._index_ok:
            return None
        offset = plog.log_end_offset
        last = self.snapshot_offset
        if offset <= last or (not shutdown and plog.active_segment.base_offset <= last):
            return None  # the common case, on every append: nothing rolled since the last snapshot
        segments = plog.segments
        data = txi.encode_snapshot(self.snapshot_entries())
        # The segments that may have had index entries appended since the last snapshot.
        bases = [
            s.base_offset
            for s, n in zip(segments, [*segments[1:], None], strict=True)
            if n is None or n.base_offset > last
        ]
        self.snapshot_offset, self._writing = offset, True

        def write() -> None:
            try:
                txi.write_snapshot(plog.path, offset, data, bases, plog.config.file_ops)
            except OSError as exc:
                self.snapshot_offset = min(self.snapshot_offset, last)
                log.warning("producer_snapshot_failed", path=str(plog.path), offset=offset, error=str(exc))
            finally:
                self._writing = False

        return write

    def snapshot_entries(self) -> list[txi.SnapshotEntry]:
        """ProducerStateManager.writeSnapshot's entries (only meaningful with nothing in flight)."""
        out = []
        for pid, e in self.producers.items():
            last = e.batches[-1] if e.batches else None
            out.append(
                txi.SnapshotEntry(
                    pid,
                    e.epoch,
                    last.last_seq if last else -1,
                    last.last_offset if last else -1,
                    last.last_offset - last.first_offset if last else 0,
                    e.last_timestamp,
                    e.coordinator_epoch,
                    e.txn.first_offset if e.txn is not None else -1,
                )
            )
        return out

    @classmethod
    def from_snapshot(cls, entries: Iterable[txi.SnapshotEntry]) -> PartitionProducers:
        """ProducerStateManager.loadProducerEntry for each entry of a snapshot."""
        self = cls()
        for s in entries:
            e = self.producers[s.producer_id] = ProducerEntry(s.epoch)
            e.last_ms = e.last_timestamp = s.timestamp
            e.coordinator_epoch = s.coordinator_epoch
            if s.last_offset >= 0:
                first_seq = first_sequence(s.last_sequence, s.offset_delta)
                first_offset = s.last_offset - s.offset_delta
                e.batches.append(BatchMeta(first_seq, s.last_sequence, first_offset, s.last_offset, s.timestamp))
            if s.current_txn_first_offset >= 0:
                e.txn = OpenTxn(s.producer_id, s.current_txn_first_offset, False)
                self.unstable.append(e.txn)
        return self

    def set_aborted(self, entries: Iterable[txi.TxnIndexEntry]) -> None:
        self.aborted = [AbortedTxn(e.producer_id, e.first_offset, e.last_offset) for e in entries]
        self._max_span = max((a.last_offset - a.first_offset for a in self.aborted), default=0)

    # --- rebuild ----------------------------------------------------------------------------------
    @classmethod
    def from_batches(cls, batches: Iterable[rec.BatchView], since_ms: int = -1) -> PartitionProducers:
        """Replay batch headers in log order (ProducerStateManager's recovery from the log)."""
        self = cls()
        self.replay(batches)
        if since_ms >= 0:
            self.expire(since_ms)
        return self

    def replay(self, batches: Iterable[rec.BatchView]) -> list[txi.TxnIndexEntry]:
        """Apply batch headers in log order on top of the state (ProducerStateManager's
        ``updateProducers`` for each batch UnifiedLog.rebuildProducerState reads); returns the
        index entries of the aborts met."""
        aborts = []
        for v in batches:
            self.replayed += 1
            pid = v.producer_id
            if pid < 0:
                continue
            if v.is_control:
                marker = read_end_txn_marker(v)
                if marker is None:
                    continue
                txn = self.begin_marker(pid, v.producer_epoch, marker.coordinator_epoch, v.max_timestamp)
                self.producers[pid].last_ms = max(self.producers[pid].last_ms, v.max_timestamp)
                entry = self.marker_written(txn, marker.committed, v.base_offset)
                if entry is not None:
                    aborts.append(self.index_entry(entry))
                continue
            if v.base_sequence < 0:
                continue
            meta = BatchMeta(
                v.base_sequence,
                last_sequence(v.base_sequence, v.last_offset_delta),
                v.base_offset,
                v.last_offset,
                v.max_timestamp,
            )
            self.record(pid, v.producer_epoch, meta, v.max_timestamp, transactional=v.is_transactional)
        return aborts


def scan_producers(plog: PartitionLog, since_ms: int) -> PartitionProducers:
    """Rebuild a partition's producer state from its batch headers. A log that may hold
    transactions is read whole (a transaction and its marker may be of any age; producers idle
    since before `since_ms` are then dropped); any other from its first segment whose newest
    timestamp is not older than `since_ms` (older ones only hold expired producers)."""
    start = plog.log_start_offset
    if not plog.has_transactions:
        for seg in plog.segments:
            if seg.max_timestamp < 0 or seg.max_timestamp >= since_ms:
                start = max(start, seg.base_offset)
                break
        else:
            return PartitionProducers()
    if start >= plog.log_end_offset:
        return PartitionProducers()
    return PartitionProducers.from_batches(plog.iter_batches(start), since_ms)


def load_producers(plog: PartitionLog, since_ms: int) -> PartitionProducers:
    """A partition's producer state after a restart (module docstring): from the newest snapshot and
    the transaction indexes, replaying only the batches after the snapshot (UnifiedLog.loadProducerState);
    from the whole log when there is no usable snapshot or an index is damaged. Logs without
    transactions: ``scan_producers``. Blocking: run it in an executor."""
    if not plog.has_transactions:
        return scan_producers(plog, since_ms)
    start, end = plog.log_start_offset, plog.log_end_offset
    segments = plog.segments
    bounds = txi.segment_bounds([s.base_offset for s in segments], end)
    found = txi.read_latest_snapshot(plog.path, start, end)
    offset = found[0] if found is not None else start
    entries, ok = txi.load_indexes(plog.path, bounds, offset)
    if found is not None and ok:
        producers = PartitionProducers.from_snapshot(found[1])
        producers.snapshot_offset = producers.loaded_from = offset
    else:
        # Nothing to start from (or an index that cannot be trusted): the whole log, every index rebuilt.
        offset = start
        txi.reset_indexes(plog.path)
        producers, entries = PartitionProducers(), []
    producers.set_aborted(entries)
    if offset < end:
        by_segment: dict[int, list[txi.TxnIndexEntry]] = {}
        for e in producers.replay(plog.iter_batches(offset)):
            by_segment.setdefault(_segment_of(bounds, e.last_offset), []).append(e)
        for base, entries in by_segment.items():
            txi.append_entry(plog.path, base, *entries)
    producers.truncate_head(start)
    if since_ms >= 0:
        producers.expire(since_ms)
    if producers.replayed:
        # As UnifiedLog.rebuildProducerState ends with a snapshot: the next start replays nothing of this.
        producers.snapshot_offset = -1
        job = producers.snapshot_job(plog, shutdown=True)
        if job is not None:
            job()
    return producers


def _segment_of(bounds: list[tuple[int, int]], offset: int) -> int:
    """The base offset of the segment holding ``offset``."""
    i = bisect.bisect_right([b for b, _ in bounds], offset) - 1
    return bounds[max(i, 0)][0]


def _segment_of_offset(plog: PartitionLog, offset: int) -> int:
    bases = [s.base_offset for s in plog.segments]
    return bases[max(bisect.bisect_right(bases, offset) - 1, 0)]
