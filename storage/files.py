"""Segment files: their names, the few system calls that change them, and the recovery of the
crash-safe segment swap that compaction performs (see ``compaction.py`` for the swap itself).

Below ``log.py`` and ``compaction.py``, which both need these and must not import each other: a log
finishes or rolls back an interrupted swap when it opens, before it reads a segment.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
from pathlib import Path

import structlog

from . import records as rec

log = structlog.get_logger("groupd.storage")

INDEX_ENTRY = struct.Struct(">ii")
TIMEINDEX_ENTRY = struct.Struct(">qi")
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
LOG_START_FILE = "log-start-offset"
# (segment base offset, byte position, next offset) up to which the active segment is known good:
# fsynced by a flush, or checked by a recovery. Crash recovery truncates only after it (log.py).
RECOVERY_POINT_FILE = "recovery-point"
# Present once a transactional batch or marker was ever about to be appended to the log: a log
# without it holds no transactions, so its producer state can be rebuilt from its recent segments.
TRANSACTIONS_FILE = "has-transactions"
RECOVERY_POINT = struct.Struct(">qqqI")  # the three int64s and the CRC-32C of their 24 bytes
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # txnindex.py
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


# os.pwritev is not on every platform (macOS before Python 3.12): joined and written plainly there
_PWRITEV = getattr(os, "pwritev", None)


class FileOps:
    """The few system calls that change files; tests substitute a subclass to inject failures."""

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def pwritev(self, fd: int, buffers: list[bytes | memoryview], offset: int) -> int:
        """One write of several buffers (a produced batch's restamped header and its untouched
        rest, not copied into one buffer first). A subclass that replaces only ``pwrite`` (a test
        injecting a failure or counting writes) has the buffers joined and handed to its ``pwrite``,
        so a vectored write fails and counts as a plain one would."""
        if type(self).pwrite is not FileOps.pwrite or _PWRITEV is None:
            return self.pwrite(fd, b"".join(buffers), offset)
        return _PWRITEV(fd, buffers, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)


DEFAULT_FILE_OPS = FileOps()


class _Fd:
    """An fd that closes itself when unreferenced, so readers of swapped-out segments stay safe."""

    __slots__ = ("fd",)

    def __init__(self, path: Path, flags: int) -> None:
        self.fd = -1  # if the open fails (ENOENT, EMFILE), __del__ finds a closed object, not no fd
        self.fd = os.open(path, flags | os.O_CLOEXEC, 0o644)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self.close()


def fsync_dir(path: Path, ops: FileOps = DEFAULT_FILE_OPS) -> None:
    """Make a create/rename/unlink in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ops.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes | str, ops: FileOps = DEFAULT_FILE_OPS) -> None:
    """Replace a small file so that a crash leaves the old content or the new, never a torn one:
    write a sibling ``.tmp``, fsync it, rename it over ``path``, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
        fh.flush()
        ops.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent, ops)


def _pwrite_all(ops: FileOps, fd: int, data: bytes | memoryview, offset: int) -> None:
    n = ops.pwrite(fd, data, offset)
    if n == len(data):  # nearly always: the rest of a short write goes in the loop below
        return
    if n <= 0:
        raise OSError(errno.EIO, "short write")
    view = memoryview(data)[n:]
    offset += n
    while view:
        n = ops.pwrite(fd, view, offset)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]
        offset += n


def _pwritev_all(ops: FileOps, fd: int, buffers: list[bytes | memoryview], offset: int, total: int) -> None:
    """``_pwrite_all`` of the buffers' concatenation (``total`` bytes) without making it, but for
    the rest of a short write."""
    n = ops.pwritev(fd, buffers, offset)
    if n == total:
        return
    if n <= 0:
        raise OSError(errno.EIO, "short write")
    _pwrite_all(ops, fd, memoryview(b"".join(buffers))[n:], offset + n)


def _pread_exact(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    while len(data) < size:
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)


def _is_segment_log(name: str) -> bool:
    return name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX) and name[:20].isdigit()


def _swap_next_offset(path: Path) -> int:
    """Offset after the last batch of a (complete, fsynced) swap file."""
    base = int(path.name[:20])
    nxt = base
    with open(path, "rb") as f:
        data = f.read()
    try:
        for view in rec.iter_batches(data):
            nxt = view.next_offset
    except rec.CorruptRecordError:
        pass  # cannot happen for a file fsynced before its rename; keep what was readable
    return nxt


def _install_txn_index_swap(directory: Path, base: int, replaced: list[int]) -> None:
    """A compaction swap's transaction index cannot be rebuilt from nothing (a missing index means
    "no aborted transaction"), so unlike the other indexes it is completed with the swap: the
    cleaner writes one whenever the log may hold transactions and renames it into place before the
    log, so a ``.txnindex.swap`` is the new index and, without one, the base segment's .txnindex
    already is (or there is none). The replaced segments' own indexes go."""
    for b in replaced:
        if b != base:
            with contextlib.suppress(FileNotFoundError):
                (directory / (segment_name(b) + TXN_INDEX_SUFFIX)).unlink()
    swap = directory / (segment_name(base) + TXN_INDEX_SUFFIX + SWAP_SUFFIX)
    target = directory / (segment_name(base) + TXN_INDEX_SUFFIX)
    if swap.exists():
        if swap.stat().st_size:
            os.rename(swap, target)
        else:
            swap.unlink()
            with contextlib.suppress(FileNotFoundError):
                target.unlink()


def recover_interrupted_swaps(directory: Path, ops: FileOps = DEFAULT_FILE_OPS) -> None:
    """Finish or roll back compaction swaps that a crash interrupted (see module docstring)."""
    changed = False
    for p in list(directory.iterdir()):
        if p.name.endswith(CLEANED_SUFFIX):
            p.unlink()
            changed = True
    for swap in sorted(p for p in directory.iterdir() if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)):
        base = int(swap.name[:20])
        nxt = _swap_next_offset(swap)
        replaced = []
        for p in directory.iterdir():
            if _is_segment_log(p.name) and base <= int(p.name[:20]) < max(nxt, base + 1):
                replaced.append(int(p.name[:20]))
        for b in {*replaced, base}:
            for suffix in SEGMENT_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    (directory / (segment_name(b) + suffix)).unlink()
        _install_txn_index_swap(directory, base, replaced)
        os.rename(swap, directory / (segment_name(base) + LOG_SUFFIX))
        log.warning("storage.compaction.swap_completed", path=str(swap), replaced=sorted(replaced), next_offset=nxt)
        changed = True
    for p in list(directory.iterdir()):
        # Index swaps left alone belong to a swap whose log is already in place (or never got
        # there); the indexes are simply rebuilt, which is always safe.
        if p.name.endswith(SWAP_SUFFIX) or p.name.endswith(DELETED_SUFFIX):
            p.unlink()
            changed = True
    if changed:
        fsync_dir(directory, ops)
