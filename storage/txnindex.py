"""Kafka's transaction index (``<base>.txnindex``) and producer-state snapshots (``<offset>.snapshot``).

Theory of operation
-------------------
Both files are Kafka's byte for byte; this module knows offsets and bytes, not producers.

Transaction index, one per segment (Kafka's ``TransactionIndex``): an entry per aborted transaction
whose ABORT marker is in the segment, appended when the marker is written (``LogSegment.updateTxnIndex``)::

    version int16 (0), producerId int64, firstOffset int64, lastOffset int64 (the marker), lastStableOffset int64

34 bytes each, in marker order. A segment with no aborted transaction has no file (Kafka creates it
lazily too). The file goes with its segment (retention, DeleteRecords, truncation, compaction's swap,
which installs the cleaned segment's merged index: ``LogCleaner.cleanInto`` rebuilds it).

Producer-state snapshot (``ProducerStateManager.writeSnapshot``/``readSnapshot``), named by the
20-digit offset up to which it holds the state::

    version int16 (1), crc uint32 (CRC-32C of everything after it), count int32, then per producer:
    producerId int64, epoch int16, lastSequence int32, lastOffset int64, offsetDelta int32,
    timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64 (-1: none)

Crash safety. A snapshot is written whole (``write_atomically``: temp file, fsync, rename) and only
after the index files it covers are fsynced, so a snapshot at X implies that every index entry with
a marker below X is durable. Entries at or past X may be missing or torn (the marker was written,
the process died before or during the index append): the loader drops them (``trim_indexes``) and
rebuilds them from the batch headers after X, as Kafka's recovery rebuilds the index of the segments
it re-reads (``LogSegment.recover``). A torn tail is a partial entry: cut. An entry that cannot be
right (unknown version, marker outside its segment, offsets out of order) makes the caller distrust
every index and replay the whole log. A snapshot with a bad CRC, a short body or an offset past the
log end (the log lost its tail, ``ProducerStateManager.truncateAndReload``) or below the log start
(``deleteSnapshotsBefore``) is deleted and the next older one tried.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import structlog

from . import records as rec
from .files import DEFAULT_FILE_OPS, TXN_INDEX_SUFFIX, FileOps, fsync_dir, segment_name, write_atomically

log = structlog.get_logger("groupd.storage")

SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_VERSION = 0  # AbortedTxn.CURRENT_VERSION
ABORTED_TXN = struct.Struct(">hqqqq")  # AbortedTxn.TOTAL_SIZE = 34
SNAPSHOT_VERSION = 1  # ProducerStateManager.PRODUCER_SNAPSHOT_VERSION
SNAPSHOT_HEADER = struct.Struct(">hI")  # version, crc (the CRC covers the bytes from offset 6 on)
SNAPSHOT_COUNT = struct.Struct(">i")
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # PRODUCER_SNAPSHOT_ENTRY_SCHEMA, 46 bytes
SNAPSHOTS_KEPT = 2  # the newest and one to fall back to should the newest be damaged


class CorruptIndexError(Exception):
    """A transaction index entry that cannot be right (Kafka's CorruptIndexException)."""


class CorruptSnapshotError(Exception):
    """Kafka's CorruptSnapshotException."""


class TxnIndexEntry(NamedTuple):
    """Kafka's AbortedTxn."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class SnapshotEntry(NamedTuple):
    """One producer of a snapshot (the fields of ProducerStateManager's PRODUCER_SNAPSHOT_ENTRY_SCHEMA)."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


# --- transaction index ----------------------------------------------------------------------------
def txn_index_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset) + TXN_INDEX_SUFFIX)


def encode_entry(e: TxnIndexEntry) -> bytes:
    return ABORTED_TXN.pack(TXN_INDEX_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)


def decode_entries(data: bytes, base_offset: int, end_offset: int) -> list[TxnIndexEntry]:
    """The whole entries of a segment's index (a torn last one is left out), checked as Kafka's
    TransactionIndex.sanityCheck does and more: every marker inside [base_offset, end_offset), in
    order, after its transaction's first offset. Raises CorruptIndexError."""
    out: list[TxnIndexEntry] = []
    prev = base_offset - 1
    for i in range(len(data) // ABORTED_TXN.size):
        version, pid, first, last, lso = ABORTED_TXN.unpack_from(data, i * ABORTED_TXN.size)
        if version != TXN_INDEX_VERSION:
            raise CorruptIndexError(f"entry {i}: unknown version {version}")
        if not (prev < last < end_offset) or first > last or pid < 0:
            raise CorruptIndexError(f"entry {i}: ({pid}, {first}, {last}) outside [{base_offset}, {end_offset})")
        prev = last
        out.append(TxnIndexEntry(pid, first, last, lso))
    return out


def append_entry(directory: Path, base_offset: int, *entries: TxnIndexEntry) -> None:
    """LogSegment.updateTxnIndex. Written at the last whole-entry boundary, so a torn entry a failed
    write left behind is overwritten rather than followed. Not fsynced: ``fsync_indexes`` does it
    before a snapshot relies on it."""
    fd = os.open(txn_index_path(directory, base_offset), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        size = os.fstat(fd).st_size
        data = b"".join(encode_entry(e) for e in entries)
        written = os.pwrite(fd, data, size - size % ABORTED_TXN.size)
        if written != len(data):
            raise OSError(f"short write to {txn_index_path(directory, base_offset)}")
    finally:
        os.close(fd)


def read_index(directory: Path, base_offset: int, end_offset: int) -> list[TxnIndexEntry]:
    try:
        data = txn_index_path(directory, base_offset).read_bytes()
    except FileNotFoundError:
        return []
    return decode_entries(data, base_offset, end_offset)


def segment_bounds(bases: Sequence[int], end_offset: int) -> list[tuple[int, int]]:
    """(base, end) of each segment given their base offsets in order and the log end offset."""
    return list(zip(bases, [*bases[1:], end_offset], strict=True))


def load_indexes(directory: Path, bounds: Sequence[tuple[int, int]], below: int) -> tuple[list[TxnIndexEntry], bool]:
    """The index entries whose marker is below ``below`` over segments given as (base, end) in
    order, with every file cut to exactly those (what is at or past ``below`` will be rebuilt from
    the log: ``LogSegment.recover``'s ``txnIndex.reset()``). (entries, False) when a file is corrupt:
    then no index can be trusted and the caller replays the whole log (``reset_indexes``)."""
    out: list[TxnIndexEntry] = []
    for base, end in bounds:
        path = txn_index_path(directory, base)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        try:
            # An entry past the segment's end whose marker a crash took from the log is no damage:
            # it is at or past `below` (never past the log end) and goes like the other ones there.
            entries = decode_entries(data, base, 2**63 - 1)
            keep = [e for e in entries if e.last_offset < below]
            if keep and keep[-1].last_offset >= end:
                raise CorruptIndexError(f"marker {keep[-1].last_offset} past the segment's end {end}")
        except CorruptIndexError as exc:
            log.warning("storage.txnindex.corrupt", path=str(path), error=str(exc))
            return [], False
        out.extend(keep)
        if len(keep) * ABORTED_TXN.size != len(data):
            _cut(path, len(keep))
    return out, True


def _cut(path: Path, entries: int) -> None:
    """TransactionIndex.truncateTo: keep the first ``entries``; no entry left, no file."""
    if entries == 0:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    os.truncate(path, entries * ABORTED_TXN.size)


def truncate_index(directory: Path, base_offset: int, offset: int) -> None:
    """LogSegment.truncateTo's ``txnIndex.truncateTo(offset)``: drop the entries of markers >= offset."""
    path = txn_index_path(directory, base_offset)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    n = 0
    while (n + 1) * ABORTED_TXN.size <= len(data) and ABORTED_TXN.unpack_from(data, n * ABORTED_TXN.size)[3] < offset:
        n += 1
    if n * ABORTED_TXN.size != len(data):
        _cut(path, n)


def reset_indexes(directory: Path) -> None:
    for p in directory.glob("*" + TXN_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def fsync_indexes(directory: Path, bases: Iterable[int], ops: FileOps = DEFAULT_FILE_OPS) -> None:
    for base in bases:
        try:
            fd = os.open(txn_index_path(directory, base), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            ops.fsync(fd)
        finally:
            os.close(fd)


def write_index(path: Path, entries: Iterable[TxnIndexEntry]) -> bool:
    """Write a whole index (compaction's cleaned segment), fsynced. False when there was nothing to write."""
    data = b"".join(encode_entry(e) for e in entries)
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return bool(data)


# --- producer-state snapshots ---------------------------------------------------------------------
def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / (segment_name(offset) + SNAPSHOT_SUFFIX)


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """ProducerStateManager.writeSnapshot's bytes."""
    items = list(entries)
    body = SNAPSHOT_COUNT.pack(len(items)) + b"".join(SNAPSHOT_ENTRY.pack(*e) for e in items)
    return SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, rec._crc32c(body)) + body


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    """ProducerStateManager.readSnapshot. Raises CorruptSnapshotError."""
    if len(data) < SNAPSHOT_HEADER.size + SNAPSHOT_COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes")
    version, crc = SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = rec._crc32c(data[SNAPSHOT_HEADER.size :])
    if crc != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    (count,) = SNAPSHOT_COUNT.unpack_from(data, SNAPSHOT_HEADER.size)
    start = SNAPSHOT_HEADER.size + SNAPSHOT_COUNT.size
    if count < 0 or len(data) != start + count * SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"{count} entries in {len(data)} bytes")
    return [SnapshotEntry(*SNAPSHOT_ENTRY.unpack_from(data, start + i * SNAPSHOT_ENTRY.size)) for i in range(count)]


def list_snapshots(directory: Path) -> list[int]:
    """The offsets of the snapshot files, ascending (ProducerStateManager.listSnapshotFiles)."""
    out = []
    for p in directory.glob("*" + SNAPSHOT_SUFFIX):
        stem = p.name[: -len(SNAPSHOT_SUFFIX)]
        if len(stem) == 20 and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def delete_snapshots(directory: Path, offsets: Iterable[int]) -> None:
    for o in offsets:
        with contextlib.suppress(FileNotFoundError):
            snapshot_path(directory, o).unlink()


def delete_snapshots_outside(directory: Path, low: int, high: int) -> None:
    """``deleteSnapshotsBefore(low)`` and the snapshots past the log end ``high`` (a log that lost
    its tail: ``truncateAndReload``), which would describe a history the log no longer has."""
    delete_snapshots(directory, [o for o in list_snapshots(directory) if o < low or o > high])


def write_snapshot(
    directory: Path, offset: int, data: bytes, index_bases: Iterable[int], ops: FileOps = DEFAULT_FILE_OPS
) -> None:
    """ProducerStateManager.takeSnapshot: first make the index entries it covers durable (those of
    ``index_bases``' segments), then the snapshot itself, whole; then keep only the newest few."""
    fsync_indexes(directory, index_bases, ops)
    write_atomically(snapshot_path(directory, offset), data, ops)
    older = [o for o in list_snapshots(directory) if o < offset]
    if len(older) >= SNAPSHOTS_KEPT:
        delete_snapshots(directory, older[: len(older) - SNAPSHOTS_KEPT + 1])


def read_latest_snapshot(directory: Path, low: int, high: int) -> tuple[int, list[SnapshotEntry]] | None:
    """ProducerStateManager.loadFromSnapshot: the newest readable snapshot within [low, high];
    damaged or out-of-range ones are deleted on the way."""
    changed = False
    found = None
    for offset in reversed(list_snapshots(directory)):
        if low <= offset <= high:
            try:
                found = offset, decode_snapshot(snapshot_path(directory, offset).read_bytes())
                break
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("storage.snapshot.corrupt", path=str(snapshot_path(directory, offset)), error=str(exc))
        delete_snapshots(directory, [offset])
        changed = True
    if changed:
        fsync_dir(directory)
    return found
