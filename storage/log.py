"""Segmented append-only partition logs in Kafka's on-disk layout.

Theory of operation
-------------------
A partition is a directory ``<data>/<topic>-<n>/`` of segments. A segment is three files named by
the 20-digit base offset of its first batch:

* ``00000000000000000000.log``        record batches (see records.py), back to back;
* ``00000000000000000000.index``      sparse offset index, 8-byte entries (int32 offset relative to
  the base offset, int32 byte position), one per `index_interval_bytes` of log; an entry maps the
  *last* offset of a batch to the position where that batch starts, as Kafka's does;
* ``00000000000000000000.timeindex``  12-byte entries (int64 timestamp, int32 relative offset): the
  largest timestamp seen so far and the last offset of the batch that first reached it;
* ``00000000000000000000.txnindex``   Kafka's transaction index (txnindex.py), only in logs that held
  transactions, beside ``<offset>.snapshot`` producer-state snapshots. The log deletes a segment's
  .txnindex with it and cuts it on truncation, and drops snapshots below the log start (retention,
  DeleteRecords) or past the log end (truncation, and a tail cut by recovery at open); what they hold
  is the broker's (producer_state.py).

Only the last (active) segment is written. An append (`append_items`) is planned (offsets
assigned, bytes built, index entries computed), written with one ``pwrite`` at the segment's
committed size, optionally fsynced, and only then committed to the in-memory state, all under the
log's I/O lock. Readers never look past a committed size, so a write in flight, a failed write,
or a write that was rolled back with ``ftruncate`` is invisible. Because the write position comes
from memory rather than the file offset, a failed truncate cannot misplace the next append.
The index entries an append computes go to memory; the active segment's index files get them when
it rolls or closes (``Segment.idx_on_disk``), as Kafka's mmapped indexes reach disk.

Recovery at open: interrupted compaction swaps are finished or rolled back (see files.py);
older segments are trusted but get their indexes rebuilt when missing or implausible; the active
segment is scanned, CRC by CRC, from its last index entry after a clean shutdown (a marker written
by ``close()``), or from byte 0 after a crash or when its indexes are damaged, and a torn or
corrupt tail is truncated at the first bad batch.

Only the *tail* is ever truncated: the part of the active segment after its recovery point (the
``recovery-point`` file: how far the segment was fsynced by the last ``flush()``/``close()``, or
checked by the last recovery), as Kafka's ``LogLoader`` recovers (``LogSegment.recover``: truncate
at the first batch failing ``ensureValid``) only the segments after its recovery-point checkpoint.
Bytes before it were durable and acknowledged; if one of their batches is damaged later (a flipped
bit on disk), truncating there would throw away every valid batch written after it, including
commits acknowledged since. Such a batch is left in place instead: recovery records it as
damage and walks on from the next intact batch (or the recovery point), and every read steps over
it (see "damaged batches" below: Fetch, the producer-state load and the start-up replays serve the
valid batches before and after it, and the first read to meet it reports it, once).

Threading: any method may be called from a worker thread. Appends, truncation and rolls are
serialised by the I/O lock; compaction and retention by a maintenance lock; the segment list is
replaced copy-on-write under a short metadata lock. Reads take a snapshot (segments and their
committed sizes) and then read without locks; a segment's file descriptors close when its last
reference goes, so a reader holding a segment that compaction or retention just replaced keeps
reading valid (if superseded) bytes. Blocking calls belong in an executor, not on the event loop.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import functools
import os
import struct
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog
from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record

from . import records as rec
from .epochs import CHECKPOINT_FILE, CheckpointError, EpochEntry, LeaderEpochCache, epoch_for_offset
from .errors import (
    CorruptRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnsupportedCompressionError,
)
from .files import (
    CLEAN_SHUTDOWN_FILE,
    DEFAULT_FILE_OPS,
    INDEX_ENTRY,
    INDEX_SUFFIX,
    LOG_START_FILE,
    LOG_SUFFIX,
    RECOVERY_POINT,
    RECOVERY_POINT_FILE,
    TIMEINDEX_ENTRY,
    TIMEINDEX_SUFFIX,
    TRANSACTIONS_FILE,
    FileOps,
    _Fd,
    _pread_exact,
    _pwrite_all,
    _pwritev_all,
    fsync_dir,
    recover_interrupted_swaps,
    segment_name,
    write_atomically,
)
from .txnindex import SNAPSHOT_SUFFIX, TXN_INDEX_SUFFIX, delete_snapshots_outside, truncate_index, txn_index_path

log = structlog.get_logger("groupd.storage")

INT32_MAX = 2**31 - 1
READ_CHUNK = 4 * 1024 * 1024
SEEK_CHUNK = 64 * 1024
# Records the appender merges into one batch: beyond this a batch gains nothing but latency.
MERGE_MAX_RECORDS = 10_000
MERGE_MAX_BYTES = 1024 * 1024


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 100 * 1024 * 1024
    segment_ms: int | None = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    retention_ms: int | None = 7 * 24 * 3600 * 1000
    retention_bytes: int | None = None
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete", as Kafka spells it
    delete_retention_ms: int = 24 * 3600 * 1000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    file_ops: FileOps = field(default=DEFAULT_FILE_OPS, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Index positions are int32, so a segment can never exceed 2 GiB.
        if not rec.HEADER_SIZE <= self.segment_bytes <= INT32_MAX:
            raise ValueError(f"segment_bytes must be between {rec.HEADER_SIZE} and {INT32_MAX}")
        if self.index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must be >= 0")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"unknown message_timestamp_type {self.message_timestamp_type!r}")
        if set(self.cleanup_policy.replace(" ", "").split(",")) - {"delete", "compact"}:
            raise ValueError(f"unknown cleanup_policy {self.cleanup_policy!r}")
        if self.max_message_bytes < 0 or self.delete_retention_ms < 0:
            raise ValueError("max_message_bytes and delete_retention_ms must be >= 0")

    def with_kafka_configs(self, configs: dict[str, str | None]) -> LogConfig:
        """This config with topic-level overrides spelled as Kafka spells them (CreateTopics,
        AlterConfigs): ``segment.bytes``, ``retention.ms``, ``cleanup.policy``... A null value
        restores our default. Unknown names and bad values raise ValueError (INVALID_CONFIG)."""
        changes: dict[str, object] = {}
        defaults = LogConfig()
        for name, raw in configs.items():
            if name not in _KAFKA_CONFIGS:
                raise ValueError(f"unsupported topic config {name!r}")
            attr, parse = _KAFKA_CONFIGS[name]
            if raw is None:
                changes[attr] = getattr(defaults, attr)
                continue
            try:
                changes[attr] = parse(raw)
            except ValueError:
                raise ValueError(f"invalid value {raw!r} for {name}") from None
        return replace(self, **changes)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy


def _ms_or_unlimited(raw: str) -> int | None:
    n = int(raw)
    if n < -1:
        raise ValueError(raw)
    return None if n == -1 else n


def _non_negative(raw: str) -> int:
    n = int(raw)
    if n < 0:
        raise ValueError(raw)
    return n


def _policy(raw: str) -> str:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or set(parts) - {"delete", "compact"}:
        raise ValueError(raw)
    return ",".join(sorted(set(parts)))


def _timestamp_type(raw: str) -> str:
    if raw not in ("CreateTime", "LogAppendTime"):
        raise ValueError(raw)
    return raw


_KAFKA_CONFIGS: dict[str, tuple[str, Callable[[str], object]]] = {
    "segment.bytes": ("segment_bytes", _non_negative),
    "segment.ms": ("segment_ms", _ms_or_unlimited),
    "index.interval.bytes": ("index_interval_bytes", _non_negative),
    "retention.ms": ("retention_ms", _ms_or_unlimited),
    "retention.bytes": ("retention_bytes", _ms_or_unlimited),
    "cleanup.policy": ("cleanup_policy", _policy),
    "delete.retention.ms": ("delete_retention_ms", _non_negative),
    "max.message.bytes": ("max_message_bytes", _non_negative),
    "message.timestamp.type": ("message_timestamp_type", _timestamp_type),
}
KAFKA_TOPIC_CONFIGS = frozenset(_KAFKA_CONFIGS)


class _Cursor:
    """Index-building state of a segment, copied so an append can be planned before it commits."""

    __slots__ = (
        "base",
        "bytes_since",
        "index_entries",
        "interval",
        "last_ti_ts",
        "max_ts",
        "max_ts_offset",
        "rolling_ts",
        "ti_entries",
    )

    def __init__(self, seg: Segment, interval: int) -> None:
        self.base = seg.base_offset
        self.interval = interval
        self.bytes_since = seg.bytes_since_index
        self.max_ts = seg.max_timestamp
        self.max_ts_offset = seg.offset_of_max_timestamp
        self.last_ti_ts = seg.ti_timestamps[-1] if seg.ti_timestamps else -1
        self.rolling_ts = seg.rolling_base_timestamp
        self.index_entries: list[tuple[int, int]] = []
        self.ti_entries: list[tuple[int, int]] = []

    def track(self, position: int, last_offset: int, max_ts: int, size: int) -> None:
        # Same order as Kafka's LogSegment.append, so our indexes match what Kafka would write.
        if max_ts > self.max_ts:
            self.max_ts = max_ts
            self.max_ts_offset = last_offset
        if self.bytes_since > self.interval:
            self.index_entries.append((last_offset - self.base, position))
            if self.max_ts > self.last_ti_ts:
                self.ti_entries.append((self.max_ts, self.max_ts_offset - self.base))
                self.last_ti_ts = self.max_ts
            self.bytes_since = 0
        if self.rolling_ts is None:
            self.rolling_ts = max_ts
        self.bytes_since += size

    def final_ti_entry(self) -> tuple[int, int] | None:
        if self.max_ts > self.last_ti_ts:
            return (self.max_ts, self.max_ts_offset - self.base)
        return None


class Segment:
    """One .log file with its two indexes. Mutated only by its PartitionLog."""

    def __init__(
        self, directory: Path, base_offset: int, ops: FileOps, *, create: bool = False, created_ms: int | None = None
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.ops = ops
        name = segment_name(base_offset)
        self.log_path = directory / (name + LOG_SUFFIX)
        self.index_path = directory / (name + INDEX_SUFFIX)
        self.timeindex_path = directory / (name + TIMEINDEX_SUFFIX)
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self._log = _Fd(self.log_path, flags)
        self._index = _Fd(self.index_path, os.O_RDWR | os.O_CREAT)
        self._timeindex = _Fd(self.timeindex_path, os.O_RDWR | os.O_CREAT)
        self.size = os.fstat(self._log.fd).st_size
        self.idx_offsets = array("i")
        self.idx_positions = array("i")
        self.ti_timestamps = array("q")
        self.ti_offsets = array("i")
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_index = 0
        # How many of the entries above are in the index files. The active segment's entries
        # reach its files lazily (write_pending_indexes: at its roll, its close, a rewrite), not
        # with each append: two of the three pwrites of a commit were its index entries. Kafka
        # keeps its indexes in mmapped files flushed at roll and shutdown alike
        # (LogSegment.onBecomeInactiveSegment, LogSegment.flush); after a crash the active
        # segment's indexes are rebuilt by the scan anyway (_recover_active trusts them only
        # after a clean shutdown), so only a roll and close must have written them.
        self.idx_on_disk = 0
        self.ti_on_disk = 0
        self.rolling_base_timestamp: int | None = None
        # For segment_ms when records carry no timestamps; an existing file counts from its mtime.
        if created_ms is None:
            created_ms = int(os.fstat(self._log.fd).st_mtime * 1000)
        self.created_ms = created_ms
        # Known for the active segment and for any segment that was scanned; else computed lazily.
        self.next_offset: int | None = None
        # Damaged byte ranges found so far (PartitionLog._damage), sorted by start. Bytes below
        # `unchecked_end` were on disk before this process opened the file, so reads check their
        # CRCs once (`checked` is the span of them checked last); later appends were checked on
        # the way in.
        self.damage: list[Damage] = []
        self.unchecked_end = self.size
        self.checked = (0, 0)

    # -- fds --------------------------------------------------------------------------------

    @property
    def log_fd(self) -> int:
        return self._log.fd

    def close(self) -> None:
        for f in (self._log, self._index, self._timeindex):
            f.close()

    def fsync(self) -> None:
        self.ops.fsync(self._log.fd)

    def fsync_all(self) -> None:
        for f in (self._log, self._index, self._timeindex):
            self.ops.fsync(f.fd)

    # -- index files ------------------------------------------------------------------------

    def load_indexes(self, interval: int) -> bool:
        """Read both index files; False when either is missing, torn or implausible."""
        idx = _pread_exact(self._index.fd, os.fstat(self._index.fd).st_size, 0)
        tix = _pread_exact(self._timeindex.fd, os.fstat(self._timeindex.fd).st_size, 0)
        if len(idx) % INDEX_ENTRY.size or len(tix) % TIMEINDEX_ENTRY.size:
            return False
        n = len(idx) // INDEX_ENTRY.size
        flat = struct.unpack(f">{2 * n}i", idx)
        offsets, positions = array("i", flat[0::2]), array("i", flat[1::2])
        m = len(tix) // TIMEINDEX_ENTRY.size
        tflat = struct.unpack(">" + "qi" * m, tix)
        timestamps, toffsets = array("q", tflat[0::2]), array("i", tflat[1::2])
        prev_o, prev_p = -1, -1
        for o, p in zip(offsets, positions):
            if o <= prev_o or p <= prev_p or p >= self.size:
                return False
            prev_o, prev_p = o, p
        prev_t, prev_o = -1, -1
        for t, o in zip(timestamps, toffsets):
            if t <= prev_t or o < prev_o or o < 0:
                return False
            prev_t, prev_o = t, o
        # A long segment without a single entry means the index was lost (or never written);
        # a non-empty segment always gets a final time entry when it stops being active.
        if not offsets and self.size > 2 * max(interval, rec.HEADER_SIZE):
            return False
        if self.size and not timestamps:
            return False
        self.idx_offsets, self.idx_positions = offsets, positions
        self.ti_timestamps, self.ti_offsets = timestamps, toffsets
        self.idx_on_disk, self.ti_on_disk = len(offsets), len(timestamps)
        if timestamps:
            self.max_timestamp = timestamps[-1]
            self.offset_of_max_timestamp = self.base_offset + toffsets[-1]
        return True

    def write_indexes(self) -> None:
        """Rewrite both index files from memory (after a rebuild or truncation)."""
        flat: list[int] = []
        for o, p in zip(self.idx_offsets, self.idx_positions):
            flat += (o, p)
        data = struct.pack(f">{len(flat)}i", *flat)
        tflat: list[int] = []
        for t, o in zip(self.ti_timestamps, self.ti_offsets):
            tflat += (t, o)
        tdata = struct.pack(">" + "qi" * len(self.ti_timestamps), *tflat)
        self.idx_on_disk = self.ti_on_disk = 0  # a failure below leaves the files to rewrite
        for f, payload in ((self._index, data), (self._timeindex, tdata)):
            self.ops.ftruncate(f.fd, 0)
            if payload:
                _pwrite_all(self.ops, f.fd, payload, 0)
        self.idx_on_disk, self.ti_on_disk = len(self.idx_offsets), len(self.ti_timestamps)

    def reset_indexes(self) -> None:
        self.idx_offsets, self.idx_positions = array("i"), array("i")
        self.ti_timestamps, self.ti_offsets = array("q"), array("i")
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_index = 0
        self.rolling_base_timestamp = None
        self.idx_on_disk = self.ti_on_disk = 0

    def apply_cursor(self, cur: _Cursor) -> None:
        for o, p in cur.index_entries:
            self.idx_offsets.append(o)
            self.idx_positions.append(p)
        for t, o in cur.ti_entries:
            self.ti_timestamps.append(t)
            self.ti_offsets.append(o)
        self.bytes_since_index = cur.bytes_since
        self.max_timestamp = cur.max_ts
        self.offset_of_max_timestamp = cur.max_ts_offset
        self.rolling_base_timestamp = cur.rolling_ts

    def write_pending_indexes(self) -> None:
        """Write the entries memory has and the index files do not yet (see ``idx_on_disk``) at
        their ends. Under the log's I/O lock (appends are what adds entries)."""
        n, m = self.idx_on_disk, self.ti_on_disk
        offsets, positions = self.idx_offsets, self.idx_positions
        if n < len(offsets):
            end = len(offsets)
            flat = [v for i in range(n, end) for v in (offsets[i], positions[i])]
            _pwrite_all(self.ops, self._index.fd, struct.pack(f">{len(flat)}i", *flat), n * INDEX_ENTRY.size)
            self.idx_on_disk = end
        timestamps, toffsets = self.ti_timestamps, self.ti_offsets
        if m < len(timestamps):
            end = len(timestamps)
            tflat = [v for i in range(m, end) for v in (timestamps[i], toffsets[i])]
            _pwrite_all(
                self.ops, self._timeindex.fd, struct.pack(">" + "qi" * (end - m), *tflat), m * TIMEINDEX_ENTRY.size
            )
            self.ti_on_disk = end

    def append_final_time_entry(self) -> None:
        """Kafka's onBecomeInactiveSegment: the entries not yet written, then make the time
        index's last entry the segment maximum. Every segment that stops being active (a roll,
        a close) comes here, so an inactive segment's index files are whole."""
        self.write_pending_indexes()
        if self.max_timestamp >= 0 and (not self.ti_timestamps or self.max_timestamp > self.ti_timestamps[-1]):
            rel = self.offset_of_max_timestamp - self.base_offset
            _pwrite_all(
                self.ops,
                self._timeindex.fd,
                TIMEINDEX_ENTRY.pack(self.max_timestamp, rel),
                len(self.ti_timestamps) * TIMEINDEX_ENTRY.size,
            )
            self.ti_timestamps.append(self.max_timestamp)
            self.ti_offsets.append(rel)
            self.ti_on_disk = len(self.ti_timestamps)

    # -- lookups ----------------------------------------------------------------------------

    def index_position(self, offset: int, size: int) -> int:
        """Start of a batch at or before the batch holding `offset` (0 when no entry helps)."""
        positions = self.idx_positions
        # min(): a writer thread may have appended the offset half of an entry but not yet the
        # position half; entries past the reader's snapshot size are skipped below.
        i = min(bisect.bisect_right(self.idx_offsets, offset - self.base_offset), len(positions)) - 1
        while i >= 0 and positions[i] >= size:
            i -= 1
        return positions[i] if i >= 0 else 0

    def read_next_offset(self) -> int:
        """Offset after this segment's last batch (scans from the last index entry)."""
        if self.next_offset is not None:
            return self.next_offset
        nxt = self.base_offset
        pos = self.idx_positions[-1] if self.idx_positions else 0
        fd = self._log.fd
        while self.size - pos >= rec.HEADER_SIZE:
            base, length, _, magic, _, _, lod = _HEAD7.unpack_from(_pread_exact(fd, 27, pos))
            if magic != rec.MAGIC or length < rec.BATCH_OVERHEAD:
                break  # damage (reads step over it): the offsets after it are not known here
            nxt = base + lod + 1
            pos += rec.LOG_OVERHEAD + length
        self.next_offset = nxt
        return nxt


# os.pwritev where the platform has it (FileOps.pwritev's test), and the C framing walk
_PWRITEV = getattr(os, "pwritev", None)
_native_frames = rec._native_frames


def _finish_short_write(ops: FileOps, fd: int, buffers: list[Any], at: int, total: int, n: int) -> None:
    """The rest of a vectored write that wrote ``n`` of ``total`` bytes (``_pwritev_all``'s)."""
    if n <= 0:
        raise OSError(errno.EIO, "short write")
    _pwrite_all(ops, fd, memoryview(b"".join(buffers))[n:], at + n)


_HEAD7 = struct.Struct(">qiibIhi")  # up to lastOffsetDelta
_LEN_MAGIC = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_INT32 = struct.Struct(">i")
_BASE = struct.Struct(">q")
# baseOffset, batchLength, partitionLeaderEpoch: the first bytes of a batch, up to its magic
_HEAD = struct.Struct(">qii")
assert _HEAD.size == rec.MAGIC_OFFSET
_LOD = struct.Struct(">i")  # lastOffsetDelta, at byte 23 of a batch
_LEN_EPOCH_MAGIC = struct.Struct(">iib")  # batchLength, partitionLeaderEpoch, magic (from byte 8)


@mutable_record
class _Prepared:
    """An append planned on the caller's thread, to be written and then committed."""

    data: bytes | bytearray
    position: int
    base_offset: int
    last_offset: int
    target: Segment | None  # None: the write goes to a segment rolled at `roll_base`
    cursor: _Cursor
    roll_base: int | None = None
    roll_from: Segment | None = None
    new_segment: Segment | None = None
    results: list = field(default_factory=list)

    def __init__(
        self,
        data: bytes,
        position: int,
        base_offset: int,
        last_offset: int,
        target: Segment | None,
        cursor: _Cursor,
        roll_base: int | None = None,
        roll_from: Segment | None = None,
        new_segment: Segment | None = None,
        results: list = DEFAULT_FACTORY,
    ) -> None:
        self.data = data
        self.position = position
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.target = target
        self.cursor = cursor
        self.roll_base = roll_base
        self.roll_from = roll_from
        self.new_segment = new_segment
        self.results = [] if results is DEFAULT_FACTORY else results


class Damage:
    """Bytes [start, end) of a segment that hold no intact batch, and the offsets they took from
    the log: from `offset` (the one after the last intact batch before them) to `next_offset` (the
    base of the intact batch at `end`; None when the segment ends there). Reads step over them."""

    __slots__ = ("end", "next_offset", "offset", "reason", "reported", "start")

    def __init__(self, start: int, end: int, offset: int, next_offset: int | None, reason: str) -> None:
        self.start, self.end, self.offset, self.next_offset, self.reason = start, end, offset, next_offset, reason
        self.reported = False


@mutable_record
class _ScanResult:
    end: int
    next_offset: int
    reason: str | None
    gaps: bool = False

    def __init__(self, end: int, next_offset: int, reason: str | None, gaps: bool = False) -> None:
        self.end = end
        self.next_offset = next_offset
        self.reason = reason
        self.gaps = gaps


class PartitionLog:
    """One partition: an ordered list of segments, the last of which takes appends."""

    def __init__(self, path: Path, config: LogConfig, *, clock: Callable[[], int] = now_ms) -> None:
        self.path = Path(path)
        self.config = config
        self.clock = clock
        self._ops = config.file_ops
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._next_offset = 0
        self._lock = threading.RLock()  # guards the segment list, offsets and the dirty set
        self._io_lock = threading.Lock()  # held while an append's bytes hit the disk
        self._maintenance_lock = threading.Lock()  # compaction, retention, truncation
        self._dirty: set[Segment] = set()
        self._closed = False
        # (segment base, position, next offset) last written to RECOVERY_POINT_FILE.
        self._recovery_point: tuple[int, int, int] | None = None
        self._truncations = 0  # so that a flush racing a truncation never writes a point past it
        # Where the last read ended: (the offset after its last batch, the segment list it read,
        # the segment's index, the byte position there). A consumer at the tail fetches from
        # exactly that offset next, and finds its batch there without ``_find``'s index lookup
        # and header walk (a pread and a bisect per partition of every small Fetch, issue 29
        # item 4). Any change of the segment list (roll, truncation, retention, compaction)
        # replaces ``_bases``, which retires the hint.
        self._read_hint: tuple[int, list[int], int, int] | None = None
        # Corrupt batches met by verified reads; each is also reported to `on_corrupt_batch`
        # (the LogManager forwards them to whoever counts them, e.g. the metrics).
        self.corrupt_batches = 0
        self.on_corrupt_batch: Callable[[PartitionLog], None] | None = None
        self._has_transactions = False
        # Leader epochs (epochs.py): the owner that leads this log at changing epochs (cluster mode)
        # hands in where the current one comes from; without it every batch gets epoch 0 and no
        # cache is kept (single broker: nothing to read or write). The cache loads on first use.
        self.leader_epoch_source: Callable[[], int] | None = None
        self._epochs: LeaderEpochCache | None = None
        self._epoch_lock = threading.Lock()

    # -- opening and recovery ---------------------------------------------------------------

    @classmethod
    def open(
        cls, path: Path | str, config: LogConfig | None = None, *, clock: Callable[[], int] = now_ms
    ) -> PartitionLog:
        self = cls(Path(path), config or LogConfig(), clock=clock)
        try:
            self._load()
        except OSError as exc:
            raise StorageError(f"cannot open log {self.path}: {exc}") from exc
        return self

    def _load(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        recover_interrupted_swaps(self.path, self._ops)
        marker = self.path / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in self.path.iterdir()
            if p.name.endswith(LOG_SUFFIX) and len(p.name) == 20 + len(LOG_SUFFIX) and p.name[:20].isdigit()
        )
        known = {segment_name(b) for b in bases}
        snapshots = False
        for p in self.path.iterdir():
            stem, _, suffix = p.name.partition(".")
            if "." + suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX) and stem not in known:
                p.unlink()  # index of a segment that no longer exists
            snapshots = snapshots or "." + suffix == SNAPSHOT_SUFFIX
        start = self._read_log_start()
        if not bases:
            bases = [start or 0]
            Segment(self.path, bases[0], self._ops, create=True).close()
            fsync_dir(self.path, self._ops)
        self._recovery_point = self._read_recovery_point()
        self._rp_file: _Fd | None = None  # RECOVERY_POINT_FILE, opened by its first write
        segments = []
        for i, base in enumerate(bases):
            seg = Segment(self.path, base, self._ops)
            active = i == len(bases) - 1
            if active:
                self._recover_active(seg, clean, self._recovery_point)
            elif not seg.load_indexes(self.config.index_interval_bytes):
                log.warning("storage.index.rebuild", path=str(seg.log_path), reason="missing or damaged")
                self._rebuild(seg, check_crc=True, inactive=True)
            segments.append(seg)
        # A crash between checkpointing a new log start and deleting segments leaves dead ones.
        while len(segments) > 1 and start is not None and segments[1].base_offset <= start:
            dead = segments.pop(0)
            self._unlink_segment(dead)
        self._set_segments(segments)
        active_seg = segments[-1]
        self._next_offset = active_seg.next_offset if active_seg.next_offset is not None else active_seg.base_offset
        first = segments[0].base_offset
        self._log_start = first if start is None else min(max(first, start), self._next_offset)
        self._has_transactions = (self.path / TRANSACTIONS_FILE).exists()
        if start is not None and self._next_offset < start:
            # LogLoader.recoverLog's deleteSegmentsIfLogStartGreaterThanLogEnd: a log start was made
            # durable past data that never was (DeleteRecords, then a crash cut the tail). Every segment
            # goes and the log starts at the checkpointed start; starting at the cut end instead would
            # hand out offsets that the next restart's log start hides again.
            log.warning(
                "storage.recovery.log_start_past_end", path=str(self.path), log_start=start, log_end=self._next_offset
            )
            self._truncate_fully(start)
        if snapshots:
            # Before any append: a snapshot past a tail that recovery cut (or below the log start)
            # describes a history the log no longer has, and later appends could make it look current.
            delete_snapshots_outside(self.path, self._log_start, self._next_offset)
        if clean:
            marker.unlink()
            fsync_dir(self.path, self._ops)

    @property
    def has_transactions(self) -> bool:
        """Whether a transactional batch or a transaction marker may be in this log."""
        return self._has_transactions

    def note_transactions(self) -> None:
        """Record durably, before the first transactional batch or marker is handed to an append,
        that the log may hold transactions (``has_transactions``, also after a restart). Raises
        StorageError if the record cannot be made."""
        if self._has_transactions:
            return
        try:
            fd = os.open(self.path / TRANSACTIONS_FILE, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            os.close(fd)
            fsync_dir(self.path, self._ops)
        except OSError as exc:
            raise StorageError(f"cannot record transactions in {self.path}: {exc}") from exc
        self._has_transactions = True

    def _read_log_start(self) -> int | None:
        try:
            return int((self.path / LOG_START_FILE).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _write_log_start(self, offset: int) -> None:
        write_atomically(self.path / LOG_START_FILE, f"{offset}\n", self._ops)

    def _read_recovery_point(self) -> tuple[int, int, int] | None:
        try:
            data = (self.path / RECOVERY_POINT_FILE).read_bytes()
        except FileNotFoundError:
            return None
        if len(data) != RECOVERY_POINT.size:
            return None
        base, position, next_offset, crc = RECOVERY_POINT.unpack(data)
        if rec._crc32c(data[:24]) != crc or position < 0 or next_offset < base:
            return None  # torn or damaged: recovery falls back to checking the whole segment
        return base, position, next_offset

    def _write_recovery_point(self, base: int, position: int, next_offset: int) -> None:
        """Record that the active segment is good up to `position`. Call it only once those bytes
        are durable (fsynced or just recovered). Not fsynced itself: a lost update leaves an older
        point, which only means a longer scan. 28 bytes written in place, so never half a file."""
        point = (base, position, next_offset)
        if point == self._recovery_point:
            return
        body = struct.pack(">qqq", *point)
        data = body + struct.pack(">I", rec._crc32c(body))
        try:
            # The file stays open: under ``--fsync always`` every append's flush moves the point,
            # and an open + close around each 28-byte write were two of its five syscalls.
            f = self._rp_file
            if f is None:
                f = self._rp_file = _Fd(self.path / RECOVERY_POINT_FILE, os.O_WRONLY | os.O_CREAT)
            _pwrite_all(self._ops, f.fd, data, 0)
        except OSError as exc:
            self._close_recovery_point()
            # The data itself is safe; only a later crash recovery will scan further back.
            log.warning("storage.recovery_point.write_failed", path=str(self.path), error=str(exc))
            return
        self._recovery_point = point

    def _close_recovery_point(self) -> None:
        f, self._rp_file = self._rp_file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _recover_active(self, seg: Segment, clean: bool, point: tuple[int, int, int] | None) -> None:
        # Below the recovery point nothing is truncated: those bytes were durable (see the module
        # docstring). A point past the end of the file means the file lost data under us; then
        # nothing is trusted and the whole segment is checked, as after a crash without a point.
        trusted_end, trusted_next = 0, None
        if point is not None and point[0] == seg.base_offset and point[1] <= seg.size:
            trusted_end, trusted_next = point[1], point[2]
        result = None
        # After a clean shutdown everything before the last index entry was written and flushed by
        # a process that then exited normally, so only the tail is checked. After a crash, or if
        # anything about the indexes looks wrong, the whole segment is scanned.
        indexes_ok = clean and seg.load_indexes(self.config.index_interval_bytes)
        if clean and not indexes_ok:
            log.warning("storage.index.rebuild", path=str(seg.log_path), reason="missing or damaged")
        if indexes_ok and seg.idx_positions:
            start = seg.idx_positions[-1]
            # The time index entry written with the last offset entry already covers the batch
            # there; entries after it (e.g. the final one from close) are recomputed by the scan.
            cut = bisect.bisect_right(seg.ti_offsets, seg.idx_offsets[-1])
            del seg.ti_timestamps[cut:]
            del seg.ti_offsets[cut:]
            seg.max_timestamp = seg.ti_timestamps[-1] if seg.ti_timestamps else -1
            seg.offset_of_max_timestamp = seg.base_offset + seg.ti_offsets[-1] if seg.ti_offsets else -1
            seg.bytes_since_index = 0
            first = _pread_exact(seg.log_fd, rec.HEADER_SIZE, 0)
            if len(first) == rec.HEADER_SIZE:
                seg.rolling_base_timestamp = rec.HEADER.unpack_from(first)[8]
                result = self._scan(
                    seg,
                    start,
                    check_crc=True,
                    contiguous=True,
                    first_last_offset=seg.base_offset + seg.idx_offsets[-1],
                    trusted_end=trusted_end,
                    trusted_next=trusted_next,
                )
                if result.reason is not None and result.end == start:
                    result = None  # the batch the index pointed at is bad: distrust the index
        if result is None:
            seg.reset_indexes()
            result = self._scan(
                seg, 0, check_crc=True, contiguous=True, trusted_end=trusted_end, trusted_next=trusted_next
            )
        if not clean and result.reason is None and result.end:
            # What the scan kept may so far live only in the page cache of the process that died
            # (a truncation below fsyncs anyway).
            self._ops.fsync(seg.log_fd)
        if result.reason is not None:
            log.warning(
                "storage.recovery.truncated",
                path=str(seg.log_path),
                position=result.end,
                truncated_bytes=seg.size - result.end,
                reason=result.reason,
            )
            self._ops.ftruncate(seg.log_fd, result.end)
            self._ops.fsync(seg.log_fd)
            seg.size = result.end
        seg.next_offset = result.next_offset
        seg.write_indexes()
        if seg.size or self._recovery_point is not None:  # a new, empty log needs no point yet
            self._write_recovery_point(seg.base_offset, seg.size, result.next_offset)

    def _rebuild(self, seg: Segment, *, check_crc: bool, inactive: bool = False) -> _ScanResult:
        seg.reset_indexes()
        # Older segments are not truncated (later segments depend on their offsets): damage is
        # stepped over and recorded, and reads skip it.
        result = self._scan(seg, 0, check_crc=check_crc, keep_all=True)
        seg.next_offset = result.next_offset
        seg.write_indexes()
        if inactive:
            seg.append_final_time_entry()
        return result

    def _scan(
        self,
        seg: Segment,
        start: int,
        *,
        check_crc: bool,
        contiguous: bool = False,
        first_last_offset: int | None = None,
        trusted_end: int = 0,
        trusted_next: int | None = None,
        keep_all: bool = False,
    ) -> _ScanResult:
        """Walk batches from `start`, rebuilding index state; stop at the first bad one.

        `contiguous` demands that each batch start exactly where the previous one ended (true of
        every active segment, which compaction never touches); it is what catches a damaged
        baseOffset, the one header field besides the leader epoch that the CRC does not cover.
        `first_last_offset` is what the index says the batch at `start` ends with.

        Before `trusted_end` (the recovery point, where the batch holding `trusted_next` starts),
        or anywhere with `keep_all`, nothing stops the walk: a bad batch there is recorded as
        damage and stepped over to the next intact batch (or the point); reads skip it.
        """
        cur = _Cursor(seg, self.config.index_interval_bytes)
        fd = seg.log_fd
        end = seg.size = os.fstat(fd).st_size
        pos = start
        next_offset = seg.base_offset
        prev_next: int | None = None
        chunk = b""
        chunk_pos = pos
        unpack = rec.HEADER.unpack_from
        crc32c = rec._crc32c
        reason = None
        gaps = False
        while pos < end:
            if end - pos < rec.HEADER_SIZE:
                reason = f"{end - pos} trailing bytes are too few for a batch header"
            else:
                off = pos - chunk_pos
                if off + rec.HEADER_SIZE > len(chunk):
                    chunk = _pread_exact(fd, min(READ_CHUNK, end - pos), pos)
                    chunk_pos, off = pos, 0
                (base, length, _, magic, crc, _, lod, _, max_ts, _, _, _, count) = unpack(chunk, off)
                size = rec.LOG_OVERHEAD + length
                if magic != rec.MAGIC:
                    reason = f"bad magic {magic}"
                elif length < rec.BATCH_OVERHEAD:
                    reason = f"bad batch length {length}"
                elif size > end - pos:
                    reason = f"batch of {size} bytes runs past the end of the file"
                elif pos < trusted_end < pos + size:
                    # The point is where a batch starts: a length that leads past it is damaged,
                    # and must not carry the walk into the tail, where it would cut.
                    reason = f"batch of {size} bytes runs past the recovery point"
                elif base < seg.base_offset or lod < 0 or count < 0 or base + lod - seg.base_offset > INT32_MAX:
                    reason = f"implausible offsets (base {base}, lastOffsetDelta {lod}, count {count})"
                elif prev_next is not None and base < prev_next:
                    reason = f"offset {base} does not follow {prev_next - 1}"
                elif prev_next is None:
                    if first_last_offset is not None and base + lod != first_last_offset:
                        reason = f"batch ends at offset {base + lod}, the index says {first_last_offset}"
                    elif start == 0 and base != seg.base_offset:
                        if contiguous:
                            reason = f"first batch starts at offset {base}, not {seg.base_offset}"
                        else:
                            gaps = True
                elif base != prev_next:
                    if contiguous:
                        reason = f"offset {base} does not follow {prev_next - 1}"
                    else:
                        gaps = True
                # Before the point too: a bad batch there is skipped, not cut, but a damaged length
                # must be caught at its own batch, not where it leads to.
                if reason is None and check_crc:
                    if off + size > len(chunk):
                        chunk = _pread_exact(fd, max(min(READ_CHUNK, end - pos), size), pos)
                        chunk_pos, off = pos, 0
                    if crc32c(memoryview(chunk)[off + rec.ATTRIBUTES_OFFSET : off + size]) != crc:
                        reason = "CRC mismatch"
            if reason is not None:
                if pos == start and start > 0:
                    break  # the batch the index pointed at is bad: the caller distrusts the index
                if not keep_all and (pos >= trusted_end or trusted_next is None):
                    break
                # Damage among durable bytes (before the recovery point, or in a segment that is
                # never cut): not a torn tail, so nothing after it may be cut off. The walk resumes
                # at the next intact batch, or at the point if none is found before it; reads step
                # over the range and the first one to meet it reports it (after this open has
                # wired up the counters).
                bound = end if keep_all else trusted_end
                expected = seg.base_offset if prev_next is None else prev_next
                resume, resume_offset = self._locate_damage_end(seg, pos, bound, expected)
                if resume == bound and not keep_all:
                    resume_offset = trusted_next
                self._note_damage(seg, Damage(pos, resume, expected, resume_offset, reason))
                reason = None
                pos = resume
                if resume_offset is not None:
                    prev_next = next_offset = resume_offset
                continue
            cur.track(pos, base + lod, max_ts, size)
            prev_next = next_offset = base + lod + 1
            pos += size
        seg.apply_cursor(cur)
        if check_crc:
            seg.checked = (start, pos)  # reads need not check these CRCs again
        # Entries can only point below the valid end.
        while seg.idx_positions and seg.idx_positions[-1] >= pos:
            seg.idx_positions.pop()
            seg.idx_offsets.pop()
        return _ScanResult(pos, next_offset, reason, gaps)

    # -- properties -------------------------------------------------------------------------

    def _set_segments(self, segments: list[Segment]) -> None:
        with self._lock:
            self._segments = segments
            self._bases = [s.base_offset for s in segments]

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    def answer_start_offset(self) -> int:
        """The log start offset a Produce answer carries, -1 once the log is closed: one call per
        answered partition instead of two properties (issue 26)."""
        return -1 if self._closed else self._log_start

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")

    # -- leader epochs (epochs.py) ------------------------------------------------------------

    @property
    def leader_epoch(self) -> int:
        """The epoch appends are stamped with now: the owner's (``leader_epoch_source``), else 0."""
        source = self.leader_epoch_source
        return 0 if source is None else source()

    def _epoch_cache(self) -> LeaderEpochCache:
        """The cache, loaded on first use (caller holds ``_epoch_lock``). As Kafka's ``LogLoader``
        does after recovery: entries past the log end or below the log start are cut; a missing
        or damaged file is rebuilt from the batch headers (``LogSegment.recover`` assigns each
        batch's epoch at its base offset when it is newer than the latest)."""
        cache = self._epochs
        if cache is not None:
            return cache
        try:
            cache = LeaderEpochCache.read(self.path, self._ops)
            cache.truncate_from_end(self._next_offset)
            cache.truncate_from_start(self._log_start)
        except FileNotFoundError:
            cache = self._rebuild_epochs("missing")
        except (CheckpointError, UnicodeDecodeError) as exc:
            cache = self._rebuild_epochs(str(exc))
        except OSError as exc:
            raise StorageError(f"cannot read the leader epochs of {self.path}: {exc}") from exc
        self._epochs = cache
        return cache

    def _rebuild_epochs(self, reason: str) -> LeaderEpochCache:
        if self._log_start == self._next_offset:
            # nothing to rebuild from (a new partition): the first assign writes the file
            return LeaderEpochCache(self.path / CHECKPOINT_FILE, (), self._ops)
        entries: list[EpochEntry] = []
        try:
            for view in self.iter_batches():
                epoch = view.partition_leader_epoch
                if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
                    entries.append(EpochEntry(epoch, view.base_offset))
        except (CorruptRecordError, OffsetOutOfRangeError) as exc:
            log.warning("storage.leader_epoch.rebuild_stopped", path=str(self.path), error=str(exc))
        cache = LeaderEpochCache(None, entries, self._ops)
        cache.truncate_from_start(self._log_start)
        cache.path = self.path / CHECKPOINT_FILE
        try:
            cache.write()
        except OSError as exc:
            raise StorageError(f"cannot write the leader epochs of {self.path}: {exc}") from exc
        log.info("storage.leader_epoch.rebuilt", path=str(self.path), reason=reason, entries=len(cache.entries))
        return cache

    def _append_epoch(self) -> int:
        """Under the I/O lock: the epoch of this append's batches. A current epoch newer than the
        cache's latest is first recorded at the log end (``Partition.makeLeader`` ->
        ``maybeAssignEpochStartOffset``), durably, before any of its batches is written."""
        source = self.leader_epoch_source
        if source is None:
            return 0
        epoch = source()
        with self._epoch_lock:
            cache = self._epochs  # _epoch_cache() and latest_epoch, inline once loaded (every append)
            if cache is None:
                cache = self._epoch_cache()
            entries = cache.entries
            latest = entries[-1].epoch if entries else None
            if latest is not None and epoch <= latest:
                return latest  # never stamp an older epoch after a newer one
            try:
                cache.assign(epoch, self._next_offset)
            except OSError as exc:
                raise StorageError(f"cannot record leader epoch {epoch} in {self.path}: {exc}") from exc
            return epoch

    def sync_leader_epoch(self) -> None:
        """Record the current leader epoch at the log end now, if it is new (a leader election:
        ``Partition.makeLeader``). Appends do it themselves; this makes the file say it at once.
        Blocking (an fsync): call it from a worker thread."""
        if self.leader_epoch_source is None:
            return
        with self._io_lock:
            self._check_open()
            self._append_epoch()

    def leader_epoch_entries(self) -> tuple[EpochEntry, ...]:
        """The epochs as the leader answers from them: the cache, plus the current epoch at the log
        end when no append has recorded it yet (the election's assign, made durable by the next
        append). Without an owner's epochs: epoch 0 from the log start, the one-entry cache."""
        source = self.leader_epoch_source
        if source is None:
            return (EpochEntry(0, self._log_start),)
        epoch = source()
        with self._epoch_lock:
            entries = self._epoch_cache().entries
        if not entries or epoch > entries[-1].epoch:
            entries = (*entries, EpochEntry(epoch, self._next_offset))
        return entries

    def epoch_for_offset(self, offset: int) -> int | None:
        """The leader epoch that wrote ``offset`` (``LeaderEpochFileCache.epochForOffset``)."""
        return epoch_for_offset(self.leader_epoch_entries(), offset)

    def _truncate_epochs(self, *, start: int | None = None, end: int | None = None, clear: bool = False) -> None:
        """Follow a move of the log start or end in a loaded cache (an unloaded one is cut when it
        loads). Kafka flushes these asynchronously and re-truncates on load: a failed write is
        logged, not raised."""
        with self._epoch_lock:
            cache = self._epochs
            if cache is None:
                return
            try:
                if clear:
                    cache.clear()
                if end is not None:
                    cache.truncate_from_end(end)
                if start is not None:
                    cache.truncate_from_start(start)
            except OSError as exc:
                log.warning("storage.leader_epoch.write_failed", path=str(self.path), error=str(exc))

    # -- appending --------------------------------------------------------------------------

    def append_records(self, records: Sequence[rec.RecordInput]) -> tuple[int, int]:
        """Append records as one new batch; returns (base_offset, last_offset). No fsync."""
        (result,) = self.append_items([list(records)])
        if isinstance(result, Exception):
            raise result
        return result

    def append_batch(
        self, raw: bytes | bytearray | memoryview, *, log_append_time_ms: int | None = None
    ) -> tuple[int, int]:
        """Append a client's batch(es) as sent (compressed or not), assigning offsets.

        The CRC and header are validated first (CorruptRecordError). LogAppendTime is applied when
        `log_append_time_ms` is given or the log is configured for it.
        """
        (result,) = self.append_items([bytes(raw)], log_append_time_ms=log_append_time_ms)
        if isinstance(result, Exception):
            raise result
        return result

    def append_items(
        self,
        items: Sequence[Sequence[rec.RecordInput] | bytes | rec.BatchView],
        *,
        log_append_time_ms: int | None = None,
        after_write: Callable[[], None] | None = None,
    ) -> list:
        """Append many items with one write: each item is a list of records, a client's raw
        batch bytes, a `BatchView` of one batch whose CRC and header the caller has checked, or an
        `OwnBatch` (our encoder's: only its size is checked). Returns one result per item, in
        order: (base_offset, last_offset), or the
        exception that item alone earned (CorruptRecordError, RecordTooLargeError, ValueError...).

        Blocking, and safe to call from a worker thread. Planning, the write, `after_write` (e.g.
        an fsync) and making the data visible all happen under the log's I/O lock, so the plan
        cannot go stale and readers never see a write that may still be rolled back. If the disk
        fails, the write is truncated away and StorageError is raised for the whole call.
        """
        with self._io_lock:
            if self._closed:
                self._check_open()
            epoch = self._append_epoch()
            p = None
            if log_append_time_ms is None and self.config.message_timestamp_type != "LogAppendTime":
                if after_write is None and len(items) == 1 and type(items[0]) is rec.BatchView:
                    done = self._append_one_view(items[0], epoch)
                    if done is not None:
                        return done
                # Produce's checked batches, straight to their own path (``_prepare`` would try the
                # coordinator's OwnBatch path first; the two take disjoint item types)
                p = self._prepare_views(items, epoch)
            if p is None:
                p = self._prepare(items, log_append_time_ms=log_append_time_ms, leader_epoch=epoch)
            if p.data:
                try:
                    self._execute(p, after_write)
                except StorageError:
                    self._abort(p)
                    raise
                self._commit(p)
            return p.results

    def write_items(
        self,
        items: Sequence[Sequence[rec.RecordInput] | bytes | rec.BatchView],
        *,
        log_append_time_ms: int | None = None,
    ) -> _Prepared:
        """``append_items``'s first half: plan and write, nothing visible yet, and the log's I/O
        lock stays held until :meth:`finish_items` (called next, on the same thread, whatever
        happens). An appender writes several partitions this way, then fsyncs each: their
        fsyncs follow one another with every write already in the page cache, so the file
        system commits them together (one journal commit on ext4) instead of one per partition.
        Raises StorageError (nothing written, the lock released) like ``append_items``."""
        self._io_lock.acquire()
        try:
            self._check_open()
            epoch = self._append_epoch()
            p = self._prepare(items, log_append_time_ms=log_append_time_ms, leader_epoch=epoch)
            if p.data:
                try:
                    self._execute(p)
                except StorageError:
                    self._abort(p)
                    raise
            return p
        except BaseException:
            self._io_lock.release()
            raise

    def finish_items(self, p: _Prepared, sync: Callable[[], None] | None = None) -> list:
        """``append_items``'s second half: ``sync`` (the fsync), then the write made visible;
        if ``sync`` fails the write is truncated away and StorageError raised, as
        ``append_items`` does. Releases the lock :meth:`write_items` took."""
        try:
            if p.data:
                if sync is not None:
                    target = p.new_segment if p.roll_base is not None else p.target
                    assert target is not None
                    try:
                        sync()
                    except OSError as exc:
                        self._undo_write(target, p.position)
                        self._abort(p)
                        raise StorageError(f"write to {target.log_path} failed: {exc}") from exc
                    except StorageError:
                        self._undo_write(target, p.position)
                        self._abort(p)
                        raise
                self._commit(p)
            return p.results
        finally:
            self._io_lock.release()

    def _check_client_batches(self, raw: bytes) -> list[rec.BatchView]:
        views = list(rec.iter_batches(raw, strict=True))
        if not views:
            raise CorruptRecordError("no record batch in produce data")
        for v in views:
            v.validate()
            if v.record_count != v.last_offset_delta + 1:
                raise CorruptRecordError(
                    f"record count {v.record_count} does not match lastOffsetDelta {v.last_offset_delta}"
                )
        self._check_frames(raw, views)
        return views

    def _check_frames(self, raw: bytes | bytearray | memoryview, views: list[rec.BatchView]) -> None:
        """What a checked header does not vouch for: the size limit (the topic's config may have
        changed since the caller checked) and the records' framing."""
        for v in views:
            if v.size > self.config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {v.size} bytes exceeds max_message_bytes {self.config.max_message_bytes}"
                )
            if v.compression == rec.COMPRESSION_NONE and not v.is_control:
                # a valid CRC does not make the framing sane; checked in place, nothing decoded
                rec.check_record_frames(raw, v.position + rec.HEADER_SIZE, v.position + v.size, v.record_count)

    def _prepare(
        self,
        items: Sequence[Sequence[rec.RecordInput] | bytes | rec.BatchView],
        *,
        log_append_time_ms: int | None = None,
        leader_epoch: int = 0,
    ) -> _Prepared:
        """Plan one write: offsets, bytes, index entries, whether to roll. No I/O. Every batch gets
        ``leader_epoch`` (Kafka's LogValidator stamps partitionLeaderEpoch on the leader's append)."""
        if log_append_time_ms is None and self.config.message_timestamp_type == "LogAppendTime":
            log_append_time_ms = self.clock()
        if log_append_time_ms is None:
            planned = self._prepare_own(items, leader_epoch)
            if planned is None:
                planned = self._prepare_views(items, leader_epoch)
            if planned is not None:
                return planned
        results: list = [None] * len(items)
        parts: list[bytes] = []
        metas: list[tuple[int, int, int]] = []  # (size, last offset, max timestamp) per batch
        next_off = self._next_offset
        pending: list[tuple[int, Sequence[rec.RecordInput]]] = []
        pending_bytes = 0

        def flush_pending() -> None:
            # No recursion here: a nested function that calls itself is a reference cycle
            # (function -> its closure cell -> function) holding every cell, the encoded batch
            # included, until the cyclic GC finds it. One per append made a 50-committer load
            # spend ~12% of its time in the GC and grow by ~4 MiB/s between collections.
            nonlocal next_off, pending, pending_bytes
            runs, pending, pending_bytes = [pending] if pending else [], [], 0
            while runs:
                run = runs.pop()
                merged = [r for _, rs in run for r in rs]
                try:
                    data = rec.build_batch(
                        merged,
                        base_offset=next_off,
                        partition_leader_epoch=leader_epoch,
                        timestamp_type=rec.TIMESTAMP_CREATE_TIME,
                    )
                except (TypeError, ValueError, AttributeError, OverflowError, struct.error) as exc:
                    if len(run) == 1:
                        results[run[0][0]] = ValueError(f"cannot encode records: {exc}")
                    else:
                        # Merged appends must not fail for one caller's bad record: one by one.
                        runs.extend([entry] for entry in reversed(run))
                    continue
                if log_append_time_ms is not None:
                    data = bytearray(data)
                    rec.set_log_append_time(data, 0, log_append_time_ms)
                    data = bytes(data)
                off = next_off
                for i, rs in run:
                    results[i] = (off, off + len(rs) - 1)
                    off += len(rs)
                (max_ts,) = struct.unpack_from(">q", data, rec.MAX_TIMESTAMP_OFFSET)
                parts.append(data)
                metas.append((len(data), off - 1, max_ts))
                next_off = off

        for i, item in enumerate(items):
            if isinstance(item, rec.BatchView | bytes | bytearray | memoryview):
                flush_pending()
                try:
                    if isinstance(item, rec.OwnBatch):
                        # Our own encoder's batch (the coordinator's commit): nothing to walk.
                        raw = item.buffer
                        views = [item]
                        if item.size > self.config.max_message_bytes:
                            raise RecordTooLargeError(
                                f"batch of {item.size} bytes exceeds max_message_bytes {self.config.max_message_bytes}"
                            )
                    elif isinstance(item, rec.BatchView):
                        # One batch whose CRC and header the caller checked (Produce's check_batch,
                        # which answers in Kafka's order): its CRC is not computed a second time.
                        raw = item.buffer
                        views = [item]
                        self._check_frames(raw, views)
                        if item.position or len(raw) != item.size:
                            # a batch inside a larger buffer: that batch alone is written
                            raw = bytes(memoryview(raw)[item.position : item.position + item.size])
                            views = [rec.BatchView(raw, 0)]
                    else:
                        raw = bytes(item)
                        views = self._check_client_batches(raw)
                except (CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError) as exc:
                    results[i] = exc
                    continue
                buf = bytearray(raw)
                first = next_off
                for v in views:
                    rec.set_base_offset(buf, v.position, next_off, leader_epoch)
                    max_ts = v.max_timestamp
                    if log_append_time_ms is not None:
                        rec.set_log_append_time(buf, v.position, log_append_time_ms)
                        max_ts = log_append_time_ms
                    next_off += v.last_offset_delta + 1
                    metas.append((v.size, next_off - 1, max_ts))
                parts.append(bytes(buf))
                results[i] = (first, next_off - 1)
            else:
                try:
                    records = list(item)
                    size = sum(len(r[0] or b"") + len(r[1] or b"") + 16 for r in records)
                except (TypeError, IndexError) as exc:
                    results[i] = ValueError(f"records must be (key, value, headers, timestamp): {exc}")
                    continue
                if not records:
                    results[i] = ValueError("append of zero records")
                    continue
                if pending and (
                    pending_bytes + size > MERGE_MAX_BYTES
                    or sum(len(rs) for _, rs in pending) + len(records) > MERGE_MAX_RECORDS
                ):
                    flush_pending()
                pending.append((i, records))
                pending_bytes += size
        flush_pending()
        return self._plan(parts, metas, next_off, results)

    def _prepare_own(self, items: Sequence[Any], leader_epoch: int) -> _Prepared | None:
        """``_prepare`` when every item is an `OwnBatch` (the coordinator's commits, nearly every
        append to ``__consumer_offsets``): each batch copied once and stamped in place, nothing
        else looked at. None when some item is not one."""
        own = rec.OwnBatch
        for item in items:
            if type(item) is not own:
                return None
        max_bytes = self.config.max_message_bytes
        results: list = []
        parts: list[bytes | bytearray] = []
        metas: list[tuple[int, int, int]] = []
        next_off = self._next_offset
        for item in items:
            if item.size > max_bytes:
                results.append(RecordTooLargeError(f"batch of {item.size} bytes exceeds max_message_bytes {max_bytes}"))
                continue
            buf = bytearray(item.buffer)
            rec.set_base_offset(buf, item.position, next_off, leader_epoch)
            first = next_off
            next_off += item.last_offset_delta + 1
            metas.append((item.size, next_off - 1, item.max_timestamp))
            parts.append(buf)
            results.append((first, next_off - 1))
        return self._plan(parts, metas, next_off, results)

    def _append_one_view(self, item: rec.BatchView, leader_epoch: int) -> list | None:
        """``_prepare_views``, ``_plan``, ``_execute`` and ``_commit`` in one for the append a
        latency-bound Produce load makes over and over: one checked batch that fits the active
        segment, nothing to sync in the call (caller holds the I/O lock). None, having done
        nothing, for anything else (too large, badly framed, a roll due): the general path then
        decides and words it. tests/storage/test_prepare_views.py checks both paths agree."""
        size = item.size
        if size > self.config.max_message_bytes:
            return None
        active = self._segments[-1]
        first = self._next_offset
        last = first + item.last_offset_delta
        max_ts = item.max_timestamp
        if active.size:  # _should_roll, inline (a call per Produce partition, issue 26)
            cfg = self.config
            if active.size + size > cfg.segment_bytes or last - active.base_offset > INT32_MAX:
                return None
            seg_ms = cfg.segment_ms
            if seg_ms is not None:
                rolling = active.rolling_base_timestamp
                if rolling is not None and rolling >= 0 and max_ts >= 0:
                    if max_ts - rolling > seg_ms:
                        return None
                elif self.clock() - active.created_ms > seg_ms:
                    return None
        position = item.position
        buffer = item.buffer
        # the C walk when it says the framing is sound; anything else is worded in Python
        if not item.attributes & (rec.COMPRESSION_MASK | rec.CONTROL_FLAG) and not (
            _native_frames is not None
            and type(buffer) is bytes
            and _native_frames(buffer, position + rec.HEADER_SIZE, position + size, item.record_count)
        ):
            try:
                rec.check_record_frames(buffer, position + rec.HEADER_SIZE, position + size, item.record_count)
            except CorruptRecordError:
                return None
        # The batch as sent but for baseOffset and partitionLeaderEpoch (outside the CRC), written
        # as a new 16-byte head and the rest of the request's own bytes in one pwritev: no copy of
        # the batch (~85k of the ~1M daemon instructions of a Produce of 4 x 200 records,
        # bench.produce_callgrind, and an allocation its size). Kafka stamps the batch in place too
        # (LogValidator.assignOffsetsNonCompressed: setLastOffset, setPartitionLeaderEpoch).
        head = _HEAD.pack(first, size - rec.LOG_OVERHEAD, leader_epoch)
        rest = memoryview(buffer)[position + _HEAD.size : position + size]
        at = active.size
        # _Cursor.track for one batch, in locals (a cursor object and two calls per Produce
        # partition, issue 26): Kafka's LogSegment.append order, applied below once written.
        seg_max_ts = active.max_timestamp
        seg_max_off = active.offset_of_max_timestamp
        if max_ts > seg_max_ts:
            seg_max_ts, seg_max_off = max_ts, last
        since = active.bytes_since_index
        idx_entry = ti_entry = None
        if since > self.config.index_interval_bytes:  # type: ignore[operator]
            idx_entry = (last - active.base_offset, at)
            tis = active.ti_timestamps
            if seg_max_ts > (tis[-1] if tis else -1):
                ti_entry = (seg_max_ts, seg_max_off - active.base_offset)
            since = 0
        ops = self._ops
        fd = active.log_fd
        try:
            if type(ops) is FileOps and _PWRITEV is not None:  # FileOps.pwritev, without two calls
                n = _PWRITEV(fd, [head, rest], at)
                if n != size:
                    _finish_short_write(ops, fd, [head, rest], at, size, n)
            else:
                _pwritev_all(ops, fd, [head, rest], at, size)
        except OSError as exc:
            self._undo_write(active, at)
            raise StorageError(f"write to {active.log_path} failed: {exc}") from exc
        with self._lock:  # what _execute marks and _commit makes visible, under one acquisition
            self._dirty.add(active)
            if idx_entry is not None:
                active.idx_offsets.append(idx_entry[0])
                active.idx_positions.append(idx_entry[1])
            if ti_entry is not None:
                active.ti_timestamps.append(ti_entry[0])
                active.ti_offsets.append(ti_entry[1])
            active.bytes_since_index = since + size
            active.max_timestamp = seg_max_ts
            active.offset_of_max_timestamp = seg_max_off
            if active.rolling_base_timestamp is None:
                active.rolling_base_timestamp = max_ts
            active.size = at + size
            active.next_offset = last + 1
            self._next_offset = last + 1
        return [(first, last)]

    def _prepare_views(self, items: Sequence[Any], leader_epoch: int) -> _Prepared | None:
        """``_prepare`` when every item is a checked `BatchView` (Produce's: ``check_batch`` verified
        its CRC and header) and no log-append time is stamped: what the general loop does for such
        an item (the size limit, the framing walk, offsets and epoch stamped in place), with one
        copy of the batch instead of two and no per-call closure. None when some item is not one
        (the general path then takes all of them). tests/storage/test_prepare_views.py checks both
        paths write the same bytes and answer the same results."""
        view = rec.BatchView
        for item in items:
            if type(item) is not view:
                return None
        max_bytes = self.config.max_message_bytes
        check_frames = rec.check_record_frames
        stamp_offset = _BASE.pack_into  # records.set_base_offset's two writes, on a whole batch
        stamp_epoch = _INT32.pack_into
        unframed = rec.COMPRESSION_MASK | rec.CONTROL_FLAG  # compressed or control: not walked
        header = rec.HEADER_SIZE
        results: list = []
        parts: list[bytes | bytearray] = []
        metas: list[tuple[int, int, int]] = []
        next_off = self._next_offset
        for item in items:
            size = item.size
            position = item.position
            buffer = item.buffer
            try:
                if size > max_bytes:
                    raise RecordTooLargeError(f"batch of {size} bytes exceeds max_message_bytes {max_bytes}")
                if not item.attributes & unframed:
                    # a valid CRC does not make the framing sane; checked in place, nothing decoded
                    check_frames(buffer, position + header, position + size, item.record_count)
            except (CorruptRecordError, RecordTooLargeError) as exc:
                results.append(exc)
                continue
            if position == 0 and len(buffer) == size:
                buf = bytearray(buffer)
            else:
                buf = bytearray(memoryview(buffer)[position : position + size])
            stamp_offset(buf, 0, next_off)
            stamp_epoch(buf, rec.EPOCH_OFFSET, leader_epoch)
            first = next_off
            next_off += item.last_offset_delta + 1
            metas.append((size, next_off - 1, item.max_timestamp))
            parts.append(buf)
            results.append((first, next_off - 1))
        return self._plan(parts, metas, next_off, results)

    def _plan(
        self, parts: list[bytes | bytearray], metas: list[tuple[int, int, int]], next_off: int, results: list
    ) -> _Prepared:
        """The end of ``_prepare``: the bytes of ``parts`` (batches with their offsets assigned
        up to ``next_off``) placed in the active segment or a new one, with their index entries."""
        if not parts:
            p = _Prepared(b"", 0, -1, -1, None, None, results=results)  # type: ignore[arg-type]
            return p
        data = b"".join(parts) if len(parts) > 1 else parts[0]
        base, last = self._next_offset, next_off - 1
        active = self._segments[-1]
        roll = self._should_roll(active, len(data), last, metas[0][2])
        if roll:
            seg_for_cursor = _EmptySegmentState(base)
            position = 0
        else:
            seg_for_cursor = active
            position = active.size
        cur = _Cursor(seg_for_cursor, self.config.index_interval_bytes)  # type: ignore[arg-type]
        pos = position
        for size, last_offset, max_ts in metas:
            cur.track(pos, last_offset, max_ts, size)
            pos += size
        return _Prepared(
            data=data,
            position=position,
            base_offset=base,
            last_offset=last,
            target=None if roll else active,
            cursor=cur,
            roll_base=base if roll else None,
            roll_from=active if roll else None,
            results=results,
        )

    def _should_roll(self, active: Segment, size: int, last_offset: int, first_max_ts: int) -> bool:
        if active.size == 0:
            return False
        if active.size + size > self.config.segment_bytes:
            return True
        if last_offset - active.base_offset > INT32_MAX:
            return True
        seg_ms = self.config.segment_ms
        if seg_ms is not None:
            rolling = active.rolling_base_timestamp
            if rolling is not None and rolling >= 0 and first_max_ts >= 0:
                return first_max_ts - rolling > seg_ms
            return self.clock() - active.created_ms > seg_ms
        return False

    def _execute(self, p: _Prepared, after_write: Callable[[], None] | None = None) -> None:
        """The disk part of an append. `after_write` runs inside the same failure scope, so if it
        fails the write is rolled back too. Raises StorageError with the files restored."""
        try:
            if p.roll_base is not None and p.new_segment is None:
                old = p.roll_from
                assert old is not None
                old.append_final_time_entry()
                p.new_segment = Segment(self.path, p.roll_base, self._ops, create=True, created_ms=self.clock())
                # A crash must not leave an offset range without its file entry.
                fsync_dir(self.path, self._ops)
                with self._lock:
                    self._dirty.add(old)
        except OSError as exc:
            raise StorageError(f"cannot roll segment in {self.path}: {exc}") from exc
        target = p.new_segment if p.roll_base is not None else p.target
        assert target is not None
        try:
            _pwrite_all(self._ops, target.log_fd, p.data, p.position)
            # no index entry is written here: see Segment.idx_on_disk
            with self._lock:
                self._dirty.add(target)
            if after_write is not None:
                after_write()
        except OSError as exc:
            self._undo_write(target, p.position)
            raise StorageError(f"write to {target.log_path} failed: {exc}") from exc
        except StorageError:
            self._undo_write(target, p.position)
            raise

    def _undo_write(self, target: Segment, position: int) -> None:
        try:
            self._ops.ftruncate(target.log_fd, position)
        except OSError as exc:
            # Memory still says `position`, so the next append overwrites the stray bytes and a
            # restart's CRC scan truncates them: the log stays consistent either way.
            log.error("storage.append.rollback_failed", path=str(target.log_path), position=position, error=str(exc))

    def _commit(self, p: _Prepared) -> None:
        """Make a written append visible."""
        with self._lock:
            if p.new_segment is not None:
                self._commit_roll(p)
            target = p.new_segment if p.roll_base is not None else p.target
            assert target is not None
            target.apply_cursor(p.cursor)
            target.size = p.position + len(p.data)
            target.next_offset = p.last_offset + 1
            self._next_offset = p.last_offset + 1

    def _abort(self, p: _Prepared) -> None:
        """Forget a failed append; a segment it rolled stays (it is empty and valid)."""
        with self._lock:
            self._commit_roll(p)

    def _commit_roll(self, p: _Prepared) -> None:
        if p.new_segment is not None and p.new_segment not in self._segments:
            p.new_segment.next_offset = p.new_segment.base_offset
            self._set_segments([*self._segments, p.new_segment])

    # -- durability -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment written since the last flush. Raises StorageError.

        A closed log has nothing left to flush: ``close()`` flushed it, and an abandoned one (a
        deleted topic's) is going away. A background fsync queued before the close comes here
        after it, from an executor thread, and may even find the fds closed under it (``fd -1``
        is a ValueError, a closed number an EBADF): both are the close winning, not a failure."""
        with self._lock:
            if self._closed:
                return
            dirty, self._dirty = self._dirty, set()
            active = self._segments[-1]
            point = (active.base_offset, active.size, self._next_offset)
            truncations = self._truncations
        if not dirty:
            return
        try:
            for seg in sorted(dirty, key=lambda s: s.base_offset):
                seg.fsync()
        except (OSError, ValueError) as exc:
            if self._closed:
                return
            with self._lock:
                self._dirty |= dirty
            raise StorageError(f"fsync in {self.path} failed: {exc}") from exc
        # Everything appended before the snapshot above is durable now (Kafka: the recovery point
        # moves with each flush).
        with self._lock:
            if truncations == self._truncations and not self._closed:
                self._write_recovery_point(*point)

    @property
    def needs_flush(self) -> bool:
        return bool(self._dirty)

    def close(self) -> None:
        """Flush, finish the active segment's time index and leave a clean-shutdown marker."""
        if self._closed:
            return
        with self._io_lock, self._lock:
            try:
                active = self._segments[-1]
                active.append_final_time_entry()
                self._dirty.add(active)
                self.flush()
                active.fsync_all()
                (self.path / CLEAN_SHUTDOWN_FILE).touch()
                fsync_dir(self.path, self._ops)
            except OSError as exc:
                raise StorageError(f"cannot close {self.path} cleanly: {exc}") from exc
            finally:
                self._closed = True
                for s in self._segments:
                    s.close()
                self._close_recovery_point()

    def abandon(self) -> None:
        """Drop file handles without a clean-shutdown marker (tests simulate a crash with it)."""
        self._closed = True
        for s in self._segments:
            s.close()
        self._close_recovery_point()

    # -- damaged batches ----------------------------------------------------------------------
    #
    # A batch that is not intact (zeroed bytes from a lost write, a flipped bit, a length pointing
    # nowhere) among durable data is never cut off (see the module docstring) and never served.
    # Kafka serves the stored bytes and fails a read whose offset lookup walks into a bad header
    # (FileRecords.searchForOffsetFromPosition raises CorruptRecordException, answered as
    # CORRUPT_MESSAGE), so a consumer stops there for good. Here every reader steps over the
    # damaged range to the next intact batch (found by its CRC: records.find_next_batch), as if
    # compaction had removed those offsets: the valid batches before and after it stay readable
    # and the range is reported once, when first met.

    def _known_damage(self, seg: Segment, pos: int) -> Damage | None:
        damage = seg.damage
        if not damage:
            return None
        i = bisect.bisect_right(damage, pos, key=_damage_start) - 1
        if i >= 0 and damage[i].start <= pos < damage[i].end:
            return damage[i]
        return None

    def _next_damage(self, seg: Segment, pos: int) -> int:
        """Start of the first known damage after `pos` (INT64 max if none)."""
        damage = seg.damage
        i = bisect.bisect_right(damage, pos, key=_damage_start) if damage else 0
        return damage[i].start if i < len(damage) else _NO_DAMAGE

    def _locate_damage_end(self, seg: Segment, pos: int, bound: int, expected: int) -> tuple[int, int | None]:
        """Where the damage at `pos` ends (the next intact batch before `bound`, else `bound`) and
        that batch's base offset (None at `bound`). `expected`: the least offset it may start at."""
        read = functools.partial(_pread_exact, seg.log_fd)
        head = read(27, pos)
        if len(head) == 27:
            base, length, _, magic, _, _, lod = _HEAD7.unpack_from(head)
            after = pos + rec.LOG_OVERHEAD + length
            # Most damage leaves the length intact: then the next batch starts where it says. It
            # is taken to if it is intact, or if its header goes on with this one's offsets (a
            # damaged neighbour, reported on its own then).
            if magic == rec.MAGIC and length >= rec.BATCH_OVERHEAD and after < bound:
                found = rec.intact_batch_at(read, after, bound, expected)
                if found is not None:
                    return after, found
                nxt = read(rec.HEADER_SIZE, after)
                if len(nxt) == rec.HEADER_SIZE and lod >= 0:
                    nbase, nlength, _, nmagic = _LEN_MAGIC.unpack_from(nxt)
                    if (
                        nmagic == rec.MAGIC
                        and nlength >= rec.BATCH_OVERHEAD
                        and after + rec.LOG_OVERHEAD + nlength <= bound
                        and nbase == base + lod + 1 >= expected
                    ):
                        return after, nbase
        found = rec.find_next_batch(read, pos, bound, expected)
        if found is None:
            return bound, None
        return found, _LEN_MAGIC.unpack_from(read(rec.HEADER_SIZE, found))[0]

    def _note_damage(self, seg: Segment, d: Damage) -> Damage:
        """Record `d` unless a known damage already covers its start; returns the one in force."""
        with self._lock:
            known = self._known_damage(seg, d.start)
            if known is not None:
                return known
            bisect.insort(seg.damage, d, key=_damage_start)
            return d

    def _offset_before(self, seg: Segment, pos: int) -> int:
        """The offset after the last intact batch before byte `pos` (walked from an index entry)."""
        i = bisect.bisect_left(seg.idx_positions, pos) - 1
        p, nxt = (seg.idx_positions[i] if i >= 0 else 0), seg.base_offset
        fd = seg.log_fd
        while p < pos:
            known = self._known_damage(seg, p)
            if known is not None:
                if known.next_offset is None:
                    break
                p, nxt = known.end, known.next_offset
                continue
            head = _pread_exact(fd, 27, p)
            if len(head) < 27:
                break
            base, length, _, magic, _, _, lod = _HEAD7.unpack_from(head)
            if magic != rec.MAGIC or length < rec.BATCH_OVERHEAD or p + rec.LOG_OVERHEAD + length > pos:
                break
            nxt = base + lod + 1
            p += rec.LOG_OVERHEAD + length
        return nxt

    def _damage(self, seg: Segment, pos: int, size: int, reason: str) -> Damage:
        """The damage that starts at byte `pos` (a batch start), located and recorded if new; its
        first meeting with a read reports it."""
        d = self._known_damage(seg, pos)
        if d is None:
            expected = self._offset_before(seg, pos)
            end, next_offset = self._locate_damage_end(seg, pos, size, expected)
            d = self._note_damage(seg, Damage(pos, end, expected, next_offset, reason))
        self._report_damage(seg, d)
        return d

    def _report_damage(self, seg: Segment, d: Damage) -> None:
        with self._lock:
            if d.reported:
                return
            d.reported = True
        if d.next_offset is not None:
            last: int | None = d.next_offset - 1
        else:
            last = self._next_offset - 1 if seg is self._segments[-1] else self._segment_end_offset(seg)
        self._report_corrupt(seg, d.start, d.offset, last, d.reason, skipped_bytes=d.end - d.start)

    def _segment_end_offset(self, seg: Segment) -> int | None:
        """The last offset a segment that is not the active one may hold (the next one's base - 1)."""
        bases = self._bases
        i = bisect.bisect_right(bases, seg.base_offset)
        return bases[i] - 1 if i < len(bases) and self._segments[i - 1] is seg else None

    def _find(self, seg: Segment, offset: int, size: int) -> int | None:
        """Byte position of the first batch whose last offset >= `offset`, or of the damage that
        may hold it; None if neither is before `size`."""
        fd = seg.log_fd
        pos = seg.index_position(offset, size)
        prev = None  # where the batch walked over last starts
        while pos < size:
            known = self._known_damage(seg, pos)
            if known is not None:
                if known.next_offset is None or known.next_offset > offset:
                    return known.start
                pos = known.end
                prev = None
                continue
            stop = min(size, self._next_damage(seg, pos))
            chunk = os.pread(fd, min(SEEK_CHUNK, stop - pos), pos)
            p = 0
            n = len(chunk)
            reason = None
            while n - p >= rec.HEADER_SIZE:
                base, length, _, magic, _, _, lod = _HEAD7.unpack_from(chunk, p)
                if magic != rec.MAGIC or length < rec.BATCH_OVERHEAD:
                    reason = f"bad batch header (magic {magic}, length {length})"
                    break
                if pos + p + rec.LOG_OVERHEAD + length > stop:
                    reason = f"batch of {rec.LOG_OVERHEAD + length} bytes runs past the end of the segment"
                    break
                if base + lod >= offset:
                    return pos + p
                prev = pos + p
                p += rec.LOG_OVERHEAD + length
            if reason is None and p == 0:
                if pos + n >= stop:  # fewer bytes than a header before the end or known damage
                    reason = f"{stop - pos} trailing bytes are too few for a batch"
                else:
                    raise CorruptRecordError(f"{seg.log_path}: short read at byte {pos}")
            pos += p
            if reason is not None:
                if prev is not None and pos - prev >= rec.HEADER_SIZE and not _crc_ok(fd, prev, pos - prev):
                    pos = prev  # a damaged length led here: the damage starts at its batch
                d = self._damage(seg, pos, size, reason)
                if d.next_offset is None or d.next_offset > offset:
                    return d.start
                pos = d.end
                prev = None
        return None

    def _run(
        self, seg: Segment, pos: int, size: int, limit: int, *, min_one: bool, check: bool = False, crc: bool = True
    ) -> tuple[bytes, int, bool, int]:
        """The intact batches from byte `pos` of `seg` (where a batch or damage starts), whole,
        within `limit` bytes (the first one even if larger when `min_one`); where to go on from;
        and whether `limit` ended the run. Damage at `pos` is recorded, reported once and
        stepped over: (b"", its end, False). Batches that were on disk at open (all with `check`)
        have their CRCs checked, once; none without `crc` (a bad one is then served). Last: where
        the last batch of the bytes returned starts in them (-1 if not known)."""
        d = self._known_damage(seg, pos)
        if d is not None:
            self._report_damage(seg, d)
            return b"", d.end, False, -1
        fd = seg.log_fd
        stop = min(size, self._next_damage(seg, pos))
        buf = os.pread(fd, min(max(limit, rec.HEADER_SIZE), stop - pos), pos)
        cut, reason, last = _intact_prefix(buf, stop - pos)
        full = reason is None and cut < len(buf)
        if cut == 0 and reason is None:
            if not min_one:
                return b"", pos, True, -1
            (length,) = struct.unpack_from(">i", buf, 8)
            buf = _pread_exact(fd, rec.LOG_OVERHEAD + length, pos)
            cut, full, last = len(buf), True, 0
        if cut and crc and (check or pos < seg.unchecked_end):
            bad = _first_bad_crc(seg, buf, pos, cut, check)
            if bad is not None:
                cut, reason, full, last = bad - pos, "CRC mismatch", False, -1
        if cut == 0:
            d = self._damage(seg, pos, size, reason or "damaged batch")
            return b"", d.end, False, -1
        return (buf if cut == len(buf) else buf[:cut]), pos + cut, full, last

    # -- reading ----------------------------------------------------------------------------

    def _snapshot(self) -> tuple[list[Segment], list[int], list[int], int, int]:
        with self._lock:
            self._check_open()
            segs = self._segments
            return segs, self._bases, [s.size for s in segs], self._log_start, self._next_offset

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True) -> bytes:
        """Whole batches starting with the one that holds `offset`, up to `max_bytes` in total.

        At least one batch is returned (if any exists at `offset`) even when it is larger than
        `max_bytes`, unless `min_one_batch` is False. The first batch may begin before `offset`.
        """
        if offset == self._next_offset and not self._closed:
            # At the log end (a caught-up or parked fetch, read twice when woken): nothing to read,
            # no snapshot taken. One attribute read is atomic; an append committing meanwhile is
            # seen by the next read, as it would be had it committed after the snapshot.
            return b""
        hint = self._read_hint
        if hint is not None and hint[0] == offset and max_bytes >= rec.HEADER_SIZE:
            data = self._read_tail(hint, max_bytes)
            if data is not None:
                return data
        segs, bases, sizes, start, end = self._snapshot()
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(f"offset {offset} outside [{start}, {end}] of {self.path}")
        if offset == end:
            return b""
        out: list[bytes] = []
        total = 0
        tail: tuple[int, int, bytes, int] | None = None  # (segment index, end, data, last) of the last data
        try:
            if hint is not None and hint[0] == offset and hint[1] is bases and not segs[hint[2]].damage:
                i, pos = hint[2], hint[3]
            else:
                i = max(bisect.bisect_right(bases, offset) - 1, 0)
                pos = self._find(segs[i], offset, sizes[i])
            while i < len(segs):
                if pos is None or pos >= sizes[i]:
                    i += 1
                    pos = 0
                    continue
                want = max_bytes - total
                if want < rec.HEADER_SIZE and (out or not min_one_batch):
                    break
                # Damage is stepped over (see "damaged batches"): the batches after it follow.
                data, pos, full, last = self._run(segs[i], pos, sizes[i], want, min_one=min_one_batch and not out)
                if data:
                    out.append(data)
                    total += len(data)
                    tail = (i, pos, data, last)
                if full or total >= max_bytes:
                    break
        except OSError as exc:
            raise StorageError(f"read from {self.path} failed: {exc}") from exc
        if tail is not None:
            i, pos, data, last = tail
            if last >= 0 and not segs[i].damage:
                base, lod = _BASE.unpack_from(data, last)[0], _LOD.unpack_from(data, last + 23)[0]
                self._read_hint = (base + lod + 1, bases, i, pos)
        return b"".join(out)

    def _read_tail(self, hint: tuple[int, list[int], int, int], max_bytes: int) -> bytes | None:
        """``read`` where the last read ended (its hint) in the active segment, past the bytes
        checked at open and with no damage known: one pread and the whole batches of it, what
        ``read``'s loop makes of that case in one ``_run``; None for every other case (``read``
        then takes its general path). A consumer that keeps up reads here (issue 29 item 4)."""
        with self._lock:
            self._check_open()
            segs = self._segments
            i = hint[2]
            if hint[1] is not self._bases or i != len(segs) - 1:
                return None
            seg = segs[i]
            size = seg.size
            start, end = self._log_start, self._next_offset
        offset, pos = hint[0], hint[3]
        if seg.damage or pos < seg.unchecked_end or not start <= offset < end or pos >= size:
            return None
        try:
            buf = os.pread(seg.log_fd, min(max_bytes, size - pos), pos)
        except OSError as exc:
            raise StorageError(f"read from {self.path} failed: {exc}") from exc
        cut, reason, last = _intact_prefix(buf, size - pos)
        if reason is not None or cut == 0 or last < 0:
            return None
        data = buf if cut == len(buf) else buf[:cut]
        base, lod = _BASE.unpack_from(data, last)[0], _LOD.unpack_from(data, last + 23)[0]
        self._read_hint = (base + lod + 1, hint[1], i, pos + cut)
        return data

    def _windows(self, start_offset: int | None) -> Iterator[tuple[bytes, int]]:
        segs, bases, sizes, start, end = self._snapshot()
        offset = start if start_offset is None else start_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(f"offset {offset} outside [{start}, {end}] of {self.path}")
        if offset == end:
            return
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        pos = self._find(segs[i], offset, sizes[i])
        while i < len(segs):
            if pos is None or pos >= sizes[i]:
                i += 1
                pos = 0
                continue
            buf, pos, _full, _last = self._run(segs[i], pos, sizes[i], READ_CHUNK, min_one=True)
            if buf:
                yield buf, len(buf)

    def iter_batches(self, start_offset: int | None = None) -> Iterator[rec.BatchView]:
        """Every batch from the one holding `start_offset` (default: log start) to the end."""
        for buf, cut in self._windows(start_offset):
            yield from rec.iter_batches(buf, 0, cut, strict=True)

    def iter_records(
        self, start_offset: int | None = None, *, full: bool = False, verify: bool = False, txn: bool = False
    ) -> Iterator[tuple]:
        """Decode records from `start_offset` on: (offset, timestamp, key, value) tuples, or
        `Record`s with headers when `full`. This is the replay path (see iter_record_chunks for
        `verify` and `txn`)."""
        for chunk in self.iter_record_chunks(start_offset, full=full, verify=verify, txn=txn):
            yield from chunk

    def iter_record_chunks(
        self,
        start_offset: int | None = None,
        *,
        full: bool = False,
        verify: bool = False,
        txn: bool = False,
        max_bytes: int = READ_CHUNK,
    ) -> Iterator[list]:
        """Like iter_records, but yields lists of records (a few MiB of log each): the fastest way
        to replay a log, as the consumer's loop then runs over plain lists.

        Damage is reported once (`storage.batch.corrupt`, `on_corrupt_batch`) and skipped, as by
        every read (see "damaged batches"); with `verify` also a batch whose records cannot be
        decoded although its CRC matches, and every CRC is checked, not only those of batches
        that were on disk at open. `max_bytes`: the log is read this much at a time (a batch
        larger than it whole), a chunk per read.
        With `verify` and `txn`, transactional batches and transaction markers are delimited by
        `records.TxnBatch` entries (key None) in the stream (the ``__consumer_offsets`` replay).
        """
        segs, bases, sizes, start, end = self._snapshot()
        lo = start if start_offset is None else start_offset
        if lo < start or lo > end:
            raise OffsetOutOfRangeError(f"offset {lo} outside [{start}, {end}] of {self.path}")
        if lo == end:
            return
        i = max(bisect.bisect_right(bases, lo) - 1, 0)
        pos = self._find(segs[i], lo, sizes[i])
        first = True
        while i < len(segs):
            if pos is None or pos >= sizes[i]:
                i += 1
                pos = 0
                continue
            seg, at = segs[i], pos
            buf, pos, _full, _last = self._run(seg, pos, sizes[i], max_bytes, min_one=True, check=verify)
            if not buf:
                continue
            if verify:
                chunk, _used, bad, _damaged = rec.decode_window_verified(buf, 0, len(buf), full=full, txn=txn)
                for b in bad:
                    (length,) = _INT32.unpack_from(buf, b.position + 8)
                    start_b = at + b.position
                    d = Damage(start_b, start_b + rec.LOG_OVERHEAD + length, b.base_offset, b.last_offset + 1, b.reason)
                    self._report_damage(seg, self._note_damage(seg, d))
            else:
                chunk, _used = rec.decode_window(buf, 0, len(buf), full=full)
            if first:
                first = False
                # The first batch may begin before the requested offset (or the log start).
                skip = 0
                while skip < len(chunk) and chunk[skip][0] < lo:
                    skip += 1
                if skip:
                    del chunk[:skip]
            if chunk:
                yield chunk

    def _report_corrupt(
        self,
        seg: Segment,
        position: int,
        offset: int,
        last_offset: int | None,
        reason: str,
        *,
        skipped_bytes: int | None = None,
    ) -> None:
        self.corrupt_batches += 1
        topic, _, partition = self.path.name.rpartition("-")
        log.error(
            "storage.batch.corrupt",
            topic=topic,
            partition=int(partition) if partition.isdigit() else None,
            offset=offset,
            last_offset=last_offset,
            path=str(seg.log_path),
            position=position,
            reason=reason,
            skipped_bytes=skipped_bytes,
            action="skipped",
        )
        if self.on_corrupt_batch is not None:
            self.on_corrupt_batch(self)

    # -- timestamps -------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp >= `timestamp`, else None."""
        segs, _bases, sizes, start, _end = self._snapshot()
        for seg, size in zip(segs, sizes):
            if seg.max_timestamp < timestamp:
                continue
            i = min(bisect.bisect_right(seg.ti_timestamps, timestamp), len(seg.ti_offsets)) - 1
            hint = seg.base_offset + seg.ti_offsets[i] if i >= 0 else seg.base_offset
            pos = self._find(seg, max(hint, start), size)
            if pos is None:
                continue
            for _at, buf in self._segment_runs(seg, pos, size):
                for view in rec.iter_batches(buf, strict=True):
                    if view.max_timestamp < timestamp or view.is_control:
                        continue
                    if view.timestamp_type == rec.TIMESTAMP_LOG_APPEND_TIME:
                        return max(view.base_offset, start), view.max_timestamp
                    try:
                        kv = view.records_kv()
                    except UnsupportedCompressionError:
                        return max(view.base_offset, start), view.max_timestamp
                    for r in kv:
                        if r[1] >= timestamp and r[0] >= start:
                            return r[0], r[1]
        return None

    def _segment_runs(self, seg: Segment, pos: int, size: int, *, crc: bool = True) -> Iterator[tuple[int, bytes]]:
        """(position, bytes) of each run of intact batches from `pos` on, stepping over damage
        (see _run for `crc`)."""
        while pos < size:
            start = pos
            buf, pos, _full, _last = self._run(seg, pos, size, READ_CHUNK, min_one=True, crc=crc)
            if buf:
                yield start, buf

    def _segment_windows(self, seg: Segment, pos: int, size: int) -> Iterator[tuple[bytes, int]]:
        while pos < size:
            buf = _pread_exact(seg.log_fd, min(READ_CHUNK, size - pos), pos)
            cut = _complete_prefix(buf, len(buf))
            if cut == 0:
                (length,) = struct.unpack_from(">i", buf, 8)
                buf = _pread_exact(seg.log_fd, rec.LOG_OVERHEAD + length, pos)
                cut = len(buf)
            yield buf, cut
            pos += cut

    def max_timestamp(self) -> tuple[int, int]:
        """(largest timestamp, offset of the first record carrying it), or (-1, -1) if none."""
        segs, _bases, _sizes, _start, _end = self._snapshot()
        best = None
        for seg in segs:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return -1, -1
        ts = best.max_timestamp
        found = self.offset_for_timestamp(ts)
        if found is not None and found[1] == ts:
            return ts, found[0]
        return ts, best.offset_of_max_timestamp

    # -- truncation, deletion, retention ----------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offsets >= `offset` (the whole batch containing it)."""
        with self._maintenance_lock, self._io_lock:
            self._check_open()
            if offset >= self._next_offset:
                return
            if offset <= self._log_start:
                self._truncate_fully(offset)
                return
            try:
                # First the snapshots past the new end (ProducerStateManager.truncateAndReload):
                # after a crash mid-way, later appends must not make one of them look current.
                delete_snapshots_outside(self.path, 0, offset)
                segs = list(self._segments)
                while len(segs) > 1 and segs[-1].base_offset >= offset:
                    self._unlink_segment(segs.pop())
                seg = segs[-1]
                truncate_index(self.path, seg.base_offset, offset)
                pos = self._find(seg, offset, seg.size)
                cut_base = None
                if pos is not None:
                    head = _pread_exact(seg.log_fd, rec.HEADER_SIZE, pos)
                    if len(head) == rec.HEADER_SIZE and head[rec.MAGIC_OFFSET] == rec.MAGIC:
                        cut_base = _LEN_MAGIC.unpack_from(head)[0]
                    self._ops.ftruncate(seg.log_fd, pos)
                    seg.size = pos
                    # What is appended there from now on is new: neither damage nor unchecked.
                    seg.damage = [d for d in seg.damage if d.start < pos]
                    for d in seg.damage:
                        if d.end > pos:
                            d.end, d.next_offset = pos, None
                    seg.unchecked_end = min(seg.unchecked_end, pos)
                scanned = self._rebuild(seg, check_crc=False)
                self._ops.fsync(seg.log_fd)
                new_end = seg.next_offset if seg.next_offset is not None else seg.base_offset
                if cut_base is not None and seg.damage and seg.damage[-1].end >= seg.size:
                    # What is left ends in damage, whose offsets ran up to the batch cut off.
                    new_end = seg.next_offset = max(new_end, cut_base)
                if new_end < self._log_start:
                    # The batch holding `offset` began below the log start: nothing readable
                    # is left, so the log restarts empty at that batch's base.
                    self._write_log_start(new_end)
                with self._lock:
                    self._set_segments(segs)
                    self._next_offset = new_end
                    self._log_start = min(self._log_start, new_end)
                    self._dirty = {s for s in self._dirty if s in segs}
                    # A point past the new end would trust bytes that later appends overwrite.
                    self._truncations += 1
                    self._write_recovery_point(seg.base_offset, seg.size, new_end)
                self._truncate_epochs(end=new_end)  # UnifiedLog.truncateTo
                if scanned.gaps:
                    # A compacted (sparse) segment must not become the active one: recovery
                    # holds active segments to contiguous offsets.
                    self._roll_empty(locked=True)
            except OSError as exc:
                raise StorageError(f"truncate of {self.path} failed: {exc}") from exc

    def _truncate_fully(self, offset: int) -> None:
        try:
            delete_snapshots_outside(self.path, 2**63, -1)
            old = list(self._segments)
            seg = (
                Segment(self.path, offset, self._ops, create=True, created_ms=self.clock())
                if offset not in self._bases
                else None
            )
            for s in old:
                if seg is None and s.base_offset == offset:
                    self._ops.ftruncate(s.log_fd, 0)
                    s.size = 0
                    s.damage, s.unchecked_end = [], 0
                    s.reset_indexes()
                    s.write_indexes()
                    truncate_index(self.path, s.base_offset, -1)
                    seg = s
                else:
                    self._unlink_segment(s)
            assert seg is not None
            seg.next_offset = offset
            fsync_dir(self.path, self._ops)
            self._write_log_start(offset)
            with self._lock:
                self._truncations += 1
                self._write_recovery_point(offset, 0, offset)
                self._set_segments([seg])
                self._next_offset = offset
                self._log_start = offset
                self._dirty = set()
            self._truncate_epochs(clear=True)  # UnifiedLog.truncateFullyAndStartAt
        except OSError as exc:
            raise StorageError(f"truncate of {self.path} failed: {exc}") from exc

    def _unlink_segment(self, seg: Segment) -> None:
        # The .txnindex goes with its segment (LogSegment.deleteIfExists).
        for p in (seg.log_path, seg.index_path, seg.timeindex_path, txn_index_path(self.path, seg.base_offset)):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords) and drop segments wholly below
        it. Returns the new log start offset."""
        with self._maintenance_lock:
            self._check_open()
            if offset > self._next_offset:
                raise OffsetOutOfRangeError(f"offset {offset} is past the log end {self._next_offset}")
            if offset <= self._log_start:
                return self._log_start
            try:
                self._write_log_start(offset)
                with self._lock:
                    self._log_start = offset
                self._truncate_epochs(start=offset)  # UnifiedLog.maybeIncrementLogStartOffset
                self._drop_segments_below(offset)
            except OSError as exc:
                raise StorageError(f"delete records in {self.path} failed: {exc}") from exc
            return offset

    def _drop_segments_below(self, offset: int) -> int:
        """Delete leading segments whose successor starts at or below `offset` (never the last)."""
        with self._lock:
            segs = list(self._segments)
            dead = []
            while len(segs) > 1 and segs[1].base_offset <= offset:
                dead.append(segs.pop(0))
            if dead:
                self._set_segments(segs)
                self._dirty -= set(dead)
        for s in dead:
            self._unlink_segment(s)
        # ProducerStateManager.deleteSnapshotsBefore(logStartOffset): a snapshot below the log
        # start could only be replayed from batches that are gone.
        if self._has_transactions:  # only such logs have snapshots
            delete_snapshots_outside(self.path, self._log_start, self._next_offset)
        return len(dead)

    def apply_retention(self, now: int | None = None) -> int:
        """Delete whole segments past `retention_ms` / beyond `retention_bytes`, oldest first,
        advancing the log start offset. Returns how many segments were deleted."""
        cfg = self.config
        now = self.clock() if now is None else now
        with self._maintenance_lock:
            self._check_open()
            segs = list(self._segments)
            n = 0
            if cfg.retention_ms is not None and cfg.retention_ms >= 0:
                while n < len(segs):
                    s = segs[n]
                    if s.size == 0:
                        break
                    newest = s.max_timestamp if s.max_timestamp >= 0 else int(os.stat(s.log_path).st_mtime * 1000)
                    if now - newest <= cfg.retention_ms:
                        break
                    n += 1
            if cfg.retention_bytes is not None and cfg.retention_bytes >= 0:
                total = sum(s.size for s in segs)
                for s in segs[:n]:
                    total -= s.size
                while n < len(segs) - 1 and total - segs[n].size >= cfg.retention_bytes:
                    total -= segs[n].size
                    n += 1
            if n == 0:
                return 0
            try:
                if n == len(segs):
                    self._roll_empty()
                new_start = self._segments[n].base_offset
                self._write_log_start(max(new_start, self._log_start))
                with self._lock:
                    self._log_start = max(new_start, self._log_start)
                self._truncate_epochs(start=self._log_start)
                deleted = self._drop_segments_below(new_start)
            except OSError as exc:
                raise StorageError(f"retention in {self.path} failed: {exc}") from exc
            log.info(
                "storage.retention.deleted", path=str(self.path), segments=deleted, log_start_offset=self._log_start
            )
            return deleted

    def _roll_empty(self, *, locked: bool = False) -> None:
        """Start a new empty active segment at the log end (so every old one can be deleted)."""
        with contextlib.nullcontext() if locked else self._io_lock:
            old = self._segments[-1]
            if old.size == 0:
                return
            old.append_final_time_entry()
            seg = Segment(self.path, self._next_offset, self._ops, create=True, created_ms=self.clock())
            seg.next_offset = self._next_offset
            fsync_dir(self.path, self._ops)
            with self._lock:
                self._dirty.add(old)
                self._set_segments([*self._segments, seg])

    def roll(self) -> None:
        """Force the active segment to become inactive (no-op when it is empty)."""
        with self._maintenance_lock:
            self._check_open()
            if self._segments[-1].size:
                try:
                    self._roll_empty()
                except OSError as exc:
                    raise StorageError(f"roll in {self.path} failed: {exc}") from exc

    # -- verification -----------------------------------------------------------------------

    def validate_all(self) -> None:
        """Check every batch's CRC and offsets and every index entry; raise CorruptRecordError.

        Meant for tests and offline checks: it reads the whole log."""
        segs, _bases, sizes, _start, _end = self._snapshot()
        prev_next = None
        for seg, size in zip(segs, sizes):
            starts: dict[int, int] = {}
            pos = 0
            for buf, cut in self._segment_windows(seg, 0, size):
                for v in rec.iter_batches(buf, 0, cut, strict=True):
                    if not v.crc_ok():
                        raise CorruptRecordError(f"{seg.log_path}: CRC mismatch at byte {pos}")
                    if v.base_offset < seg.base_offset or (prev_next is not None and v.base_offset < prev_next):
                        raise CorruptRecordError(f"{seg.log_path}: offset {v.base_offset} out of order")
                    starts[pos] = v.last_offset
                    prev_next = v.next_offset
                    pos += v.size
            if pos != size:
                raise CorruptRecordError(f"{seg.log_path}: {size - pos} bytes of trailing garbage")
            for o, p in zip(seg.idx_offsets, seg.idx_positions):
                if starts.get(p) != seg.base_offset + o:
                    raise CorruptRecordError(f"{seg.index_path}: entry ({o}, {p}) is not a batch start")
            prev = -1
            for t in seg.ti_timestamps:
                if t <= prev:
                    raise CorruptRecordError(f"{seg.timeindex_path}: timestamps not increasing")
                prev = t


class _EmptySegmentState:
    """What a freshly rolled segment's index state will be, for planning before it exists."""

    def __init__(self, base: int) -> None:
        self.base_offset = base
        self.bytes_since_index = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.ti_timestamps: list[int] = []
        self.rolling_base_timestamp = None


def _complete_prefix(buf: bytes, limit: int) -> int:
    """Length of the longest run of whole batches at the start of buf that fits in `limit`."""
    p = 0
    n = min(len(buf), limit)
    unpack = struct.Struct(">i").unpack_from
    while n - p >= rec.HEADER_SIZE:
        (length,) = unpack(buf, p + 8)
        if length < rec.BATCH_OVERHEAD:
            raise CorruptRecordError(f"bad batch length {length}")
        size = rec.LOG_OVERHEAD + length
        if p + size > n:
            break
        p += size
    return p


_NO_DAMAGE = 2**63 - 1
_CRC_AT = struct.Struct(">I")


def _crc_ok(fd: int, position: int, size: int) -> bool:
    data = _pread_exact(fd, size, position)
    return len(data) == size and rec.compute_crc(data, 0, size) == _CRC_AT.unpack_from(data, rec.CRC_OFFSET)[0]


def _damage_start(d: Damage) -> int:
    return d.start


def _intact_prefix(buf: bytes, room: int) -> tuple[int, str | None, int]:
    """Length of the run of whole, plausible batches at the start of `buf`, why the walk stopped
    if the batch there is damaged (None: it merely does not fit in `buf`), and where the last
    batch of the run starts (-1: none). `room`: the
    bytes up to the end of the segment or the next known damage, which no batch may cross.
    (The Fetch hot path: one unpack per batch, as few checks as will catch a broken header.)"""
    p = 0
    last = -1
    n = len(buf)
    unpack = _LEN_EPOCH_MAGIC.unpack_from
    while n - p >= rec.HEADER_SIZE:
        length, _, magic = unpack(buf, p + 8)
        if magic != 2 or length < rec.BATCH_OVERHEAD:
            return p, f"bad batch header (magic {magic}, length {length})", last
        end = p + rec.LOG_OVERHEAD + length
        if end > n:
            if end > room:
                return p, f"batch of {end - p} bytes runs past the end of the segment", last
            return p, None, last
        last = p
        p = end
    if p < n == room:
        return p, f"{n - p} trailing bytes are too few for a batch", last
    return p, None, last


def _first_bad_crc(seg: Segment, buf: bytes, pos: int, cut: int, force: bool) -> int | None:
    """Position of the first batch in buf[:cut] (read at `pos`) whose CRC does not match, among
    those not checked before that were on disk at open (all with `force`); None if all match."""
    lo, hi = seg.checked
    limit = cut if force else min(cut, seg.unchecked_end - pos)
    view = memoryview(buf)
    crc32c = rec._crc32c
    p = 0
    bad = None
    if not force and lo <= pos < hi:
        if pos + limit <= hi:
            return None  # all checked before
        # Start at the end of the checked span if a batch starts there (it was a run's end).
        q = hi - pos
        if q + rec.HEADER_SIZE <= cut and buf[q + rec.MAGIC_OFFSET] == rec.MAGIC:
            p = q
    while p < limit:
        (length,) = _INT32.unpack_from(buf, p + 8)
        size = rec.LOG_OVERHEAD + length
        if (force or not lo <= pos + p < hi) and crc32c(
            view[p + rec.ATTRIBUTES_OFFSET : p + size]
        ) != _CRC_AT.unpack_from(buf, p + rec.CRC_OFFSET)[0]:
            bad = pos + p
            break
        p += size
    # Remember what was checked: readers mostly move forwards, so one span per segment does.
    end = pos + min(p, cut)
    seg.checked = (lo, max(hi, end)) if lo <= pos <= hi else (pos, end)
    return bad
