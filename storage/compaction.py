"""Log compaction (keep the latest record per key) with Kafka's crash-safe segment swap.

Theory of operation
-------------------
Only inactive segments are cleaned; the active segment is neither read for the key map nor
rewritten, as in Kafka (its newest records may not even be on disk yet). A pass:

1. fsyncs the inactive segments, because a record may only be dropped once the record that
   supersedes it is durable;
2. builds a map key -> offset of the latest record for every key in them (keys are opaque bytes);
3. groups consecutive segments (at most `segment_bytes` of input per group) and rewrites each
   group into one segment that starts at the group's base offset. A record survives if it is the
   latest for its key, or has no key; a tombstone (null value) that is the latest for its key is
   dropped too once its segment's newest timestamp is older than `delete_retention_ms`. Offsets
   never change: surviving records keep theirs, batches keep their baseOffset and
   lastOffsetDelta (they may become sparse), and the group's last batch is kept even when empty
   so the cleaned segment covers exactly the offsets of the segments it replaces. Batches that are
   kept whole are copied byte for byte; control batches and batches whose codec is not
   installed (or whose compressed payload does not decompress) are kept whole.

The swap, per group with base offset X (each step ends with an fsync of the directory)::

    write X.log.cleaned (+ .index/.timeindex/.txnindex.cleaned), fsync them   -- crash: .cleaned deleted
    rename indexes, then X.log.cleaned -> X.log.swap                -- X.log.swap is the commit
    rename every replaced segment's files -> *.deleted               -- crash: swap is completed
    rename X.*.swap -> X.* (the .txnindex first)                    -- crash: swap is completed
    unlink *.deleted

The cleaned segment's ``.txnindex`` (written whenever the log may hold transactions) holds the
entries of the segments it replaces, as markers are kept (LogCleaner.cleanInto); unlike the other
indexes it cannot be rebuilt from the segment alone, so recovery installs it with the swap.

`files.recover_interrupted_swaps`, run by PartitionLog.open before anything else, deletes `.cleaned`
files (old segments are intact), completes any `X.log.swap` (deleting the segments whose base
offsets fall inside the swap segment's offset range, then renaming it into place), and removes
stray index `.swap` and `.deleted` files (indexes are rebuilt when missing). So a crash at any
point leaves the old segments or the new one, never neither and never both.

Retention for non-compacted topics (`retention_ms`, `retention_bytes`) is
`PartitionLog.apply_retention`; `run_cleanup` applies whichever the topic's policy asks for.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable
from pathlib import Path

import structlog
from groupd.protocol.frozen import mutable_record

from . import records as rec
from .errors import CorruptRecordError, UnsupportedCompressionError
from .files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_ENTRY,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TIMEINDEX_ENTRY,
    TIMEINDEX_SUFFIX,
    fsync_dir,
    segment_name,
)
from .log import INT32_MAX, PartitionLog, Segment, _Cursor, _EmptySegmentState
from .markers import read_end_txn_marker
from .txnindex import TXN_INDEX_SUFFIX, CorruptIndexError, TxnIndexEntry, read_index, txn_index_path, write_index

log = structlog.get_logger("groupd.storage")

# Names of the points a crash_hook is called at, in order.
SWAP_STEPS = ("cleaned_written", "swap_renamed", "old_renamed", "swap_installed", "deleted_removed")


@mutable_record
class CompactionResult:
    groups_cleaned: int = 0
    segments_replaced: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_dropped: int = 0
    tombstones_dropped: int = 0
    # The last stable offset read from the log when none was given (None: every transaction decided).
    derived_stable_offset: int | None = None

    def __init__(
        self,
        groups_cleaned: int = 0,
        segments_replaced: int = 0,
        bytes_before: int = 0,
        bytes_after: int = 0,
        records_dropped: int = 0,
        tombstones_dropped: int = 0,
        derived_stable_offset: int | None = None,
    ) -> None:
        self.groups_cleaned = groups_cleaned
        self.segments_replaced = segments_replaced
        self.bytes_before = bytes_before
        self.bytes_after = bytes_after
        self.records_dropped = records_dropped
        self.tombstones_dropped = tombstones_dropped
        self.derived_stable_offset = derived_stable_offset


def _segment_newest_ms(seg: Segment) -> int:
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    return int(os.stat(seg.log_path).st_mtime * 1000)


def _iter_segment_batches(plog: PartitionLog, seg: Segment):
    """(position in segment, view) for each batch of a segment. A range whose batch boundaries
    are lost (a zeroed or cut batch: PartitionLog's "damaged batches") is reported and stepped
    over, so it is left out of a cleaned segment, as readers leave it out; a batch whose CRC does
    not match is served as it is (and copied so, see _clean_group)."""
    for start, buf in plog._segment_runs(seg, 0, seg.size, crc=False):
        for view in rec.iter_batches(buf, strict=True):
            yield start + view.position, view


# (producer id, batch base offset) -> whether the batch belongs to an aborted transaction.
AbortedCheck = Callable[[int, int], bool]


def _is_aborted(view: rec.BatchView, aborted: AbortedCheck | None) -> bool:
    return aborted is not None and view.is_transactional and aborted(view.producer_id, view.base_offset)


def _txn_outcomes(plog: PartitionLog, segments: list[Segment]) -> tuple[set[int], int | None]:
    """What a partition's producer state would say, read from ``segments`` themselves: the base
    offsets of the batches of aborted transactions, and the base offset of the first
    transactional batch no marker there decides (None when every one is decided)."""
    waiting: dict[int, list[int]] = {}  # producer id -> its batches since its last marker
    aborted: set[int] = set()
    for seg in segments:
        for _pos, view in _iter_segment_batches(plog, seg):
            if not view.is_transactional or not view.crc_ok():
                continue
            if not view.is_control:
                waiting.setdefault(view.producer_id, []).append(view.base_offset)
                continue
            try:
                marker = read_end_txn_marker(view)
            except (UnsupportedCompressionError, CorruptRecordError):
                marker = None
            if marker is None:
                continue
            decided = waiting.pop(view.producer_id, [])
            if not marker.committed:
                aborted.update(decided)
    return aborted, min((b for bases in waiting.values() for b in bases), default=None)


def _build_key_map(
    plog: PartitionLog, segments: list[Segment], aborted: AbortedCheck | None = None
) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for seg in segments:
        for _pos, view in _iter_segment_batches(plog, seg):
            if view.is_control or not view.crc_ok():
                continue  # a damaged batch is kept as it is and skipped by readers: it supersedes nothing
            if _is_aborted(view, aborted):
                continue  # LogCleaner: an aborted transaction's records supersede nothing
            try:
                kv = view.records_kv()
            except (UnsupportedCompressionError, CorruptRecordError):
                continue  # kept whole; its keys cannot supersede anything we would drop
            for offset, _ts, key, _value in kv:
                if key is not None:
                    latest[key] = offset
    return latest


def _group_segments(segments: list[Segment], max_bytes: int) -> list[list[Segment]]:
    groups: list[list[Segment]] = []
    for seg in segments:
        if groups:
            g = groups[-1]
            size = sum(s.size for s in g) + seg.size
            span = seg.read_next_offset() - g[0].base_offset
            if size <= max_bytes and span <= INT32_MAX:
                g.append(seg)
                continue
        groups.append([seg])
    return groups


def compact(
    plog: PartitionLog,
    *,
    now: int | None = None,
    crash_hook: Callable[[str], None] | None = None,
    stable_offset: int | None = None,
    aborted: AbortedCheck | None = None,
) -> CompactionResult:
    """Clean every inactive segment of `plog`. Blocking file I/O: run it in an executor.

    Transactions (Kafka's LogCleaner with ``CleanedTransactionMetadata``): only segments wholly
    below ``stable_offset`` (the last stable offset) are cleaned, so a record of a transaction that
    may still abort never supersedes anything; batches ``aborted(producer_id, base_offset)`` says
    belong to an aborted transaction are removed and supersede nothing. Markers are kept (Kafka
    drops them after ``delete.retention.ms`` once their transaction's data is gone; keeping them
    costs a few bytes and never changes what a read_committed reader sees).

    Without either (a log no producer state is kept for: the ``__consumer_offsets`` partitions,
    whose transactional batches the group coordinator writes), both are read from the inactive
    segments themselves: a transactional batch is decided by its producer's next end marker there,
    and the first undecided one bounds the cleaning as the last stable offset would.

    `crash_hook(step)` is called after each step of a swap (names in SWAP_STEPS) and after each
    single rename ("renamed:<new name>"); tests raise from it to simulate a crash at that point.
    """
    cfg = plog.config
    now = plog.clock() if now is None else now
    result = CompactionResult()
    with plog._maintenance_lock:
        plog._check_open()
        segments = plog.segments[:-1]
        if stable_offset is None and aborted is None:
            aborted_bases, stable_offset = _txn_outcomes(plog, segments)
            result.derived_stable_offset = stable_offset
            if aborted_bases:
                aborted = lambda _pid, base: base in aborted_bases  # noqa: E731
        elif aborted is not None:
            # The caller's aborts may rest on markers in the active segment: a transaction's data may
            # only go once its ABORT is durable, or a crash that loses the marker leaves its
            # transaction open in the log with its data gone (as a superseded record may only go
            # once what supersedes it is durable, step 1).
            plog.flush()
        if stable_offset is not None:
            segments = [s for s in segments if s.read_next_offset() <= stable_offset]
        if not segments:
            return result
        for seg in segments:
            seg.fsync()
        latest = _build_key_map(plog, segments, aborted)
        for group in _group_segments(segments, cfg.segment_bytes):
            _clean_group(plog, group, latest, now, crash_hook, result, aborted)
    if result.groups_cleaned:
        log.info(
            "storage.compaction.done",
            path=str(plog.path),
            groups=result.groups_cleaned,
            bytes_before=result.bytes_before,
            bytes_after=result.bytes_after,
            records_dropped=result.records_dropped,
            tombstones_dropped=result.tombstones_dropped,
        )
    return result


def _clean_group(
    plog: PartitionLog,
    group: list[Segment],
    latest: dict[bytes, int],
    now: int,
    crash_hook: Callable[[str], None] | None,
    result: CompactionResult,
    aborted: AbortedCheck | None = None,
) -> None:
    directory = plog.path
    base = group[0].base_offset
    name = segment_name(base)
    cleaned = {s: directory / (name + s + CLEANED_SUFFIX) for s in SEGMENT_SUFFIXES}
    swap = {s: directory / (name + s + SWAP_SUFFIX) for s in SEGMENT_SUFFIXES}
    horizon = now - plog.config.delete_retention_ms
    cur = _Cursor(_EmptySegmentState(base), plog.config.index_interval_bytes)  # type: ignore[arg-type]
    dropped = tombstones = 0
    out_pos = 0
    bytes_before = sum(s.size for s in group)
    # The cleaned segment's transaction index: markers are kept, so it holds the entries of the
    # segments it replaces (LogCleaner.cleanInto's cleanedSegment.updateTxnIndex for every aborted
    # transaction whose marker it keeps). Written whenever the log may hold transactions, even
    # empty, so that recovery can tell an installed one from none (files.recover_interrupted_swaps).
    txn_entries: list[TxnIndexEntry] | None = None
    if plog.has_transactions:
        try:
            txn_entries = _group_txn_entries(plog, group)
        except CorruptIndexError as exc:
            log.warning("storage.compaction.txnindex_corrupt", path=str(directory), base=base, error=str(exc))
            return  # left for the next load to rebuild; cleaning it now would lose entries
    with open(cleaned[LOG_SUFFIX], "wb") as out:
        for si, seg in enumerate(group):
            drop_tombstones = _segment_newest_ms(seg) < horizon
            last_segment = si == len(group) - 1
            for pos, view in _iter_segment_batches(plog, seg):
                data: bytes | memoryview | None = view.raw
                # A damaged batch is copied as it is: rebuilding it would give its damaged records
                # a valid CRC, and readers would take them for real ones.
                if not view.is_control and view.crc_ok():
                    drop_all = _is_aborted(view, aborted)
                    try:
                        records = view.records()
                    except (UnsupportedCompressionError, CorruptRecordError):
                        # Kept byte for byte: a batch the cleaner cannot read is not its to drop.
                        records = None
                    if records is not None:
                        kept = []
                        for r in records:
                            if drop_all:
                                dropped += 1
                            elif r.key is None:
                                kept.append(r)
                            elif latest.get(r.key) != r.offset:
                                dropped += 1
                            elif r.value is None and drop_tombstones:
                                tombstones += 1
                            else:
                                kept.append(r)
                        if len(kept) != len(records):
                            is_last = last_segment and pos + view.size == seg.size
                            data = rec.build_sparse_batch(view, kept) if kept or is_last else None
                if data is None:
                    continue
                (max_ts,) = struct.unpack_from(">q", data, rec.MAX_TIMESTAMP_OFFSET)
                out.write(data)
                cur.track(out_pos, view.last_offset, max_ts, len(data))
                out_pos += len(data)
        if dropped == 0 and tombstones == 0:
            out.close()
            cleaned[LOG_SUFFIX].unlink()
            return
        out.flush()
        plog._ops.fsync(out.fileno())
    final = cur.final_ti_entry()
    ti_entries = [*cur.ti_entries, *([final] if final else [])]
    for suffix, payload in (
        (INDEX_SUFFIX, b"".join(INDEX_ENTRY.pack(o, p) for o, p in cur.index_entries)),
        (TIMEINDEX_SUFFIX, b"".join(TIMEINDEX_ENTRY.pack(t, o) for t, o in ti_entries)),
    ):
        with open(cleaned[suffix], "wb") as f:
            f.write(payload)
            f.flush()
            plog._ops.fsync(f.fileno())
    txn_cleaned = directory / (name + TXN_INDEX_SUFFIX + CLEANED_SUFFIX)
    txn_swap = directory / (name + TXN_INDEX_SUFFIX + SWAP_SUFFIX)
    if txn_entries is not None:
        write_index(txn_cleaned, txn_entries)
    _hook(crash_hook, "cleaned_written")

    if txn_entries is not None:
        _rename(txn_cleaned, txn_swap, crash_hook)
    _rename(cleaned[INDEX_SUFFIX], swap[INDEX_SUFFIX], crash_hook)
    _rename(cleaned[TIMEINDEX_SUFFIX], swap[TIMEINDEX_SUFFIX], crash_hook)
    _rename(cleaned[LOG_SUFFIX], swap[LOG_SUFFIX], crash_hook)
    fsync_dir(directory, plog._ops)
    _hook(crash_hook, "swap_renamed")

    deleted: list[Path] = []
    for seg in group:
        for p in (seg.log_path, seg.index_path, seg.timeindex_path, txn_index_path(directory, seg.base_offset)):
            target = p.with_name(p.name + DELETED_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                _rename(p, target, crash_hook)
                deleted.append(target)
    fsync_dir(directory, plog._ops)
    _hook(crash_hook, "old_renamed")

    if txn_entries:
        # Before the log's swap: recovery takes a missing .txnindex.swap next to a .log.swap for
        # an index already in place.
        _rename(txn_swap, txn_index_path(directory, base), crash_hook)
    elif txn_entries is not None:
        txn_swap.unlink()
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
        _rename(swap[suffix], directory / (name + suffix), crash_hook)
    fsync_dir(directory, plog._ops)
    new_seg = Segment(directory, base, plog._ops)
    if not new_seg.load_indexes(plog.config.index_interval_bytes):
        plog._rebuild(new_seg, check_crc=False, inactive=True)
    new_seg.next_offset = group[-1].read_next_offset()
    with plog._lock:
        segs = plog._segments
        i = next(k for k, s in enumerate(segs) if s is group[0])
        assert segs[i : i + len(group)] == group, "segments changed under the cleaner"
        plog._set_segments([*segs[:i], new_seg, *segs[i + len(group) :]])
        plog._dirty.difference_update(group)
    _hook(crash_hook, "swap_installed")

    for p in deleted:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    _hook(crash_hook, "deleted_removed")

    result.groups_cleaned += 1
    result.segments_replaced += len(group)
    result.bytes_before += bytes_before
    result.bytes_after += out_pos
    result.records_dropped += dropped
    result.tombstones_dropped += tombstones


def _group_txn_entries(plog: PartitionLog, group: list[Segment]) -> list[TxnIndexEntry]:
    ends = [s.base_offset for s in group[1:]] + [group[-1].read_next_offset()]
    return [e for seg, end in zip(group, ends, strict=True) for e in read_index(plog.path, seg.base_offset, end)]


def _hook(crash_hook: Callable[[str], None] | None, step: str) -> None:
    if crash_hook is not None:
        crash_hook(step)


def _rename(src: Path, dst: Path, crash_hook: Callable[[str], None] | None) -> None:
    os.rename(src, dst)
    # Between two renames is as likely a place to die as between two steps.
    _hook(crash_hook, f"renamed:{dst.name}")


# Kafka's min.cleanable.dirty.ratio default.
MIN_CLEANABLE_DIRTY_RATIO = 0.5


class Cleaner:
    """Which compacted logs are worth a pass, decided as Kafka's ``LogCleanerManager`` decides it.

    The cleaner remembers per log the offset up to which it last cleaned (Kafka's
    cleaner-offset-checkpoint; here in memory, so the first pass after a start cleans every log) and
    cleans a log only when its inactive segments past that offset make up at least
    ``min_dirty_ratio`` of its inactive bytes (``cleanableRatio``). A log with nothing new is not
    re-read on every pass of the cleaner, which runs every ``log.cleaner.backoff.ms``.
    """

    def __init__(self, min_dirty_ratio: float = MIN_CLEANABLE_DIRTY_RATIO) -> None:
        self.min_dirty_ratio = min_dirty_ratio
        self._first_dirty: dict[Path, int] = {}

    def dirty_ratio(self, plog: PartitionLog) -> float:
        segments = plog.segments
        inactive = segments[:-1]
        total = sum(s.size for s in inactive)
        if not total:
            return 0.0
        first_dirty = self._first_dirty.get(plog.path, 0)
        if first_dirty > segments[-1].base_offset:
            first_dirty = 0  # a new log at the same path (the topic was deleted and created again)
        return sum(s.size for s in inactive if s.base_offset >= first_dirty) / total

    def clean(
        self,
        plog: PartitionLog,
        *,
        now: int | None = None,
        stable_offset: int | None = None,
        aborted: AbortedCheck | None = None,
    ) -> CompactionResult | None:
        """Compact ``plog`` if it is dirty enough (blocking: run it in an executor); None if not.
        ``stable_offset`` and ``aborted`` as for ``compact``."""
        if not plog.config.compact or self.dirty_ratio(plog) < self.min_dirty_ratio:
            return None
        # What is appended while the pass runs stays dirty for the next one, and so does what lies
        # at or above the last stable offset (LogCleanerManager.cleanableOffsets).
        upto = plog.active_segment.base_offset
        result = compact(plog, now=now, stable_offset=stable_offset, aborted=aborted)
        if stable_offset is None:
            stable_offset = result.derived_stable_offset  # a log with no producer state given
        if stable_offset is not None:
            upto = min(upto, max((s.base_offset for s in plog.segments if s.base_offset <= stable_offset), default=0))
        self._first_dirty[plog.path] = upto
        return result

    def forget(self, plog: PartitionLog) -> None:
        self._first_dirty.pop(plog.path, None)


def run_cleanup(plog: PartitionLog, *, now: int | None = None) -> CompactionResult | int:
    """Apply the topic's cleanup policy once: compaction, retention, or both."""
    cfg = plog.config
    result: CompactionResult | int = 0
    if cfg.compact:
        result = compact(plog, now=now)
    if cfg.delete:
        deleted = plog.apply_retention(now)
        if not cfg.compact:
            result = deleted
    return result
