"""A partition's leader epoch cache: Kafka's ``LeaderEpochFileCache`` and its ``leader-epoch-checkpoint``.

Theory of operation. Every record batch carries the leader epoch of the broker that appended it
(``partitionLeaderEpoch`` in the header). The cache maps each epoch to the first offset written in
it, ``[(epoch, start offset), ...]`` with both strictly increasing. It answers "where did epoch E
end?" (``end_offset_for``: OffsetForLeaderEpoch, which consumers use to detect log truncation after
a leader change, KIP-320) and "which epoch wrote offset O?" (``epoch_for_offset``: ListOffsets).

It changes in three ways, as Kafka's does:

- ``assign(epoch, start)``: a new leader records its epoch at the log end (``Partition.makeLeader``)
  and every append records the epochs of its batches (``UnifiedLog.append`` ->
  ``maybeAssignEpochStartOffset``); an entry that is not newer than the latest is ignored, one that
  breaks monotonicity removes the entries it conflicts with first.
- ``truncate_from_start(offset)``: the log start moved (retention, DeleteRecords): entries wholly
  below it go, the one covering it now starts there (``truncateFromStartAsyncFlush``).
- ``truncate_from_end(offset)``: the log was truncated: entries starting at or after it go.

The file is Kafka's text checkpoint (``CheckpointFile`` with ``LeaderEpochCheckpointFile``'s
formatter): a version line (0), a count line, then one ``"<epoch> <start offset>"`` line per
entry, each line ending in a newline. It is replaced atomically (tmp, fsync, rename, fsync of the
directory) whenever the entries change, before the batches of a new epoch are written, so a crash
never leaves batches of an epoch the file does not know. A missing or unreadable file is rebuilt by
the owner (``PartitionLog``) from the batch headers, as Kafka's log recovery re-assigns epochs
(``LogSegment.recover``).

This module knows offsets and epochs only; which broker leads what is the caller's business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import structlog

from .files import DEFAULT_FILE_OPS, FileOps, write_atomically

log = structlog.get_logger("groupd.storage")

__all__ = [
    "CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "CheckpointError",
    "EpochEntry",
    "LeaderEpochCache",
    "end_offset_for",
    "epoch_for_offset",
    "format_checkpoint",
    "parse_checkpoint",
]

CHECKPOINT_FILE = "leader-epoch-checkpoint"  # LeaderEpochCheckpointFile.LEADER_EPOCH_CHECKPOINT_FILENAME
CHECKPOINT_VERSION = 0  # LeaderEpochCheckpointFile.CURRENT_VERSION
UNDEFINED_EPOCH = -1  # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1  # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET
_INT = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt / Long.parseLong accept
_WHITESPACE = re.compile(r"\s+")  # LeaderEpochCheckpointFile.WHITE_SPACES_PATTERN
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class CheckpointError(ValueError):
    """The checkpoint file cannot be read (Kafka's IOException from ``CheckpointReadBuffer.read``)."""


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


# --- the file format -------------------------------------------------------------------------------
def format_checkpoint(entries: Iterable[EpochEntry]) -> str:
    """Kafka's ``CheckpointWriteBuffer.write``: version, count, one entry per line."""
    entries = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *(f"{e} {o}" for e, o in entries)]
    return "".join(line + "\n" for line in lines)


def _int(text: str, limit: int) -> int:
    if not _INT.fullmatch(text):
        raise CheckpointError(f"malformed line in checkpoint file: {text!r}")
    value = int(text)
    if not -limit - 1 <= value <= limit:
        raise CheckpointError(f"malformed line in checkpoint file: {text!r}")
    return value


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """Kafka's ``CheckpointReadBuffer.read`` with ``LeaderEpochCheckpointFile``'s formatter: an empty
    file (or one without a count line) holds no entries; a wrong version, a malformed line or a
    count that does not match the lines is an error. Entries with a negative epoch or offset are
    errors too (``LeaderEpochFileCache.assign`` rejects them while loading)."""
    lines = text.splitlines()
    if not lines:
        return []
    version = _int(lines[0], INT32_MAX)
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"unrecognised version {version}, expected version {CHECKPOINT_VERSION}")
    if len(lines) == 1:
        return []
    expected = _int(lines[1], INT32_MAX)
    entries = []
    for line in lines[2:]:
        parts = _WHITESPACE.split(line)
        if len(parts) != 2:
            raise CheckpointError(f"malformed line in checkpoint file: {line!r}")
        epoch, offset = _int(parts[0], INT32_MAX), _int(parts[1], INT64_MAX)
        if epoch < 0 or offset < 0:
            raise CheckpointError(f"invalid partition leader epoch entry {epoch} {offset}")
        entries.append(EpochEntry(epoch, offset))
    if len(entries) != expected:
        raise CheckpointError(f"expected [{expected}] entries in checkpoint file, but found only [{len(entries)}]")
    return entries


# --- the cache's questions, over a list of entries ------------------------------------------------
def end_offset_for(entries: tuple[EpochEntry, ...], requested: int, log_end: int) -> tuple[int, int]:
    """Kafka's ``LeaderEpochFileCache.endOffsetFor``: (the largest epoch <= ``requested``, the start
    offset of the first epoch after it), the log end for the latest epoch; below the first entry
    (its data is gone) ``requested`` and the first entry's start; UNDEFINED for -1 and for an epoch
    above every entry."""
    if requested == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if entries and entries[-1].epoch == requested:
        return requested, log_end
    floor = None
    for entry in entries:
        if entry.epoch > requested:  # the higher entry
            if floor is None:
                return requested, entry.start_offset
            return floor.epoch, entry.start_offset
        floor = entry
    return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


def epoch_for_offset(entries: tuple[EpochEntry, ...], offset: int) -> int | None:
    """Kafka's ``LeaderEpochFileCache.epochForOffset``: the epoch whose range holds ``offset``."""
    previous = None
    for entry in entries:
        if entry.start_offset == offset:
            return entry.epoch
        if entry.start_offset > offset:
            return previous
        previous = entry.epoch
    return previous


def _assigned(entries: tuple[EpochEntry, ...], new: EpochEntry) -> tuple[EpochEntry, ...] | None:
    """The entries after ``LeaderEpochFileCache.assign(new)``, or None when it changes nothing
    (``isUpdateNeeded``: the same epoch as the latest, starting no earlier)."""
    if new.epoch < 0 or new.start_offset < 0:
        raise ValueError(f"invalid partition leader epoch entry {new}")
    if entries and entries[-1].epoch == new.epoch and new.start_offset >= entries[-1].start_offset:
        return None
    kept = list(entries)
    # maybeTruncateNonMonotonicEntries: drop, from the end, what the new entry contradicts
    removed = []
    while kept and (kept[-1].epoch >= new.epoch or kept[-1].start_offset >= new.start_offset):
        removed.append(kept.pop())
    if len(removed) > 1 or (removed and removed[0].start_offset != new.start_offset):
        log.warning("storage.leader_epoch.truncated", new=list(new), removed=[list(e) for e in removed])
    kept.append(new)
    return tuple(kept)


class LeaderEpochCache:
    """The entries of one partition and the checkpoint file that keeps them (``path`` None: memory
    only). Mutators are called under the owning log's lock; readers may read ``entries`` from any
    thread at any time (it is replaced, never changed in place)."""

    def __init__(self, path: Path | None, entries: Iterable[EpochEntry] = (), ops: FileOps = DEFAULT_FILE_OPS) -> None:
        self.path = path
        self._ops = ops
        self.entries: tuple[EpochEntry, ...] = ()
        for e in entries:  # as Kafka's constructor: checkpoint.read().forEach(this::assign)
            self.entries = _assigned(self.entries, EpochEntry(*e)) or self.entries

    @classmethod
    def read(cls, directory: Path, ops: FileOps = DEFAULT_FILE_OPS) -> LeaderEpochCache:
        """The cache kept in ``directory``; FileNotFoundError if it has none, CheckpointError (or
        UnicodeDecodeError) if its file is damaged."""
        path = directory / CHECKPOINT_FILE
        return cls(path, parse_checkpoint(path.read_bytes().decode("utf-8")), ops)

    # --- reading -------------------------------------------------------------------------------------
    @property
    def latest_epoch(self) -> int | None:
        entries = self.entries
        return entries[-1].epoch if entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        entries = self.entries
        return entries[0] if entries else None

    def end_offset_for(self, requested: int, log_end: int) -> tuple[int, int]:
        return end_offset_for(self.entries, requested, log_end)

    def epoch_for_offset(self, offset: int) -> int | None:
        return epoch_for_offset(self.entries, offset)

    # --- changing ------------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """``LeaderEpochFileCache.assign``: record that ``epoch`` starts at ``start_offset``; written
        through (fsynced) when it changes anything. Returns whether it did."""
        new = _assigned(self.entries, EpochEntry(epoch, start_offset))
        if new is None:
            return False
        self._replace(new)
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """``truncateFromStartAsyncFlush``: entries starting at or below the new log start go, the
        last of them kept, starting at the log start (exclusive: an entry at the offset stays)."""
        entries = self.entries
        n = 0
        while n < len(entries) and entries[n].start_offset <= start_offset:
            n += 1
        if n == 0 or (n == 1 and entries[0].start_offset == start_offset):
            return False
        self._replace((EpochEntry(entries[n - 1].epoch, start_offset), *entries[n:]))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """``truncateFromEndAsyncFlush``: entries starting at or after ``end_offset`` go."""
        entries = self.entries
        n = len(entries)
        while n and end_offset >= 0 and entries[n - 1].start_offset >= end_offset:
            n -= 1
        if n == len(entries):
            return False
        self._replace(entries[:n])
        return True

    def clear(self) -> None:
        self._replace(())

    def write(self) -> None:
        """Write the entries to the file (``LeaderEpochCheckpointFile.write``, synced)."""
        if self.path is not None:
            write_atomically(self.path, format_checkpoint(self.entries), self._ops)

    def _replace(self, entries: tuple[EpochEntry, ...]) -> None:
        # Kafka flushes truncations asynchronously and re-truncates on load; one small atomic write
        # each time is simpler and no less safe (the owner calls this off the event loop).
        if self.path is not None:
            write_atomically(self.path, format_checkpoint(entries), self._ops)
        self.entries = entries
