"""Produce's checked batches take ``PartitionLog._append_one_view`` (one batch that fits the
active segment) or ``_prepare_views`` (one copy, no closure per call), issue 29 item 4; the
general ``_prepare`` loop stays the reference. Both must write the same bytes, index the same
entries, roll the same segments and answer every item the same result or error, whatever the mix
of good, too large and badly framed batches (hypothesis)."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest
from groupd.storage import records as rec
from groupd.storage.errors import StorageError
from groupd.storage.files import FileOps
from groupd.storage.log import LogConfig, PartitionLog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

RECORD = st.tuples(
    st.none() | st.binary(max_size=60),
    st.none() | st.binary(max_size=60),
    st.just(()),
    st.integers(0, 2**41),
)


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, rec.CRC_OFFSET, rec.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


@st.composite
def _batch(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """A client's batch (raw bytes), maybe damaged inside its CRC (so its framing is wrong), and
    where it sits in a larger buffer (prefix, suffix bytes)."""
    records = draw(st.lists(RECORD, min_size=1, max_size=8))
    pid = draw(st.sampled_from([-1, 7]))
    raw = bytearray(
        rec.build_batch(
            records,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=draw(st.integers(0, 1000)) if pid >= 0 else -1,
        )
    )
    kind = draw(st.sampled_from(["good", "good", "count", "length", "compressed-flag"]))
    if kind == "count":
        n = len(records) + draw(st.sampled_from([-1, 1]))
        struct.pack_into(">i", raw, rec.HEADER_SIZE - 4, n)
        struct.pack_into(">i", raw, 23, n - 1)
    elif kind == "length":
        raw[rec.HEADER_SIZE] = 0x01  # zig-zag -1: a negative record length
    elif kind == "compressed-flag":
        # flagged as gzip: the records are not walked (and never decompressed by the append)
        struct.pack_into(">h", raw, rec.ATTRIBUTES_OFFSET, rec.COMPRESSION_GZIP)
    prefix = draw(st.integers(0, 3))
    suffix = draw(st.integers(0, 3))
    return _recrc(raw), prefix, suffix


def _views(batches: list[tuple[bytes, int, int]]) -> list[rec.BatchView]:
    out = []
    for raw, prefix, suffix in batches:
        buf = b"\x00" * prefix + raw + b"\x00" * suffix
        out.append(rec.BatchView(buf, prefix) if prefix or suffix else rec.BatchView(raw, 0))
    return out


def _outcome(results: list) -> list:
    return [(type(r).__name__, str(r)) if isinstance(r, BaseException) else r for r in results]


def _log_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    appends=st.lists(st.lists(_batch(), min_size=1, max_size=4), min_size=1, max_size=4),
    max_bytes=st.sampled_from([150, 400, 1 << 20]),
    segment_bytes=st.sampled_from([400, 1 << 20]),
    epoch=st.integers(0, 5),
)
def test_prepare_views_writes_and_answers_as_the_general_path(
    tmp_path_factory: pytest.TempPathFactory, appends: list, max_bytes: int, segment_bytes: int, epoch: int
) -> None:
    root = tmp_path_factory.mktemp("views")
    cfg = LogConfig(max_message_bytes=max_bytes, index_interval_bytes=64, segment_bytes=segment_bytes)
    fast = PartitionLog.open(root / "fast-0", cfg)
    general = PartitionLog.open(root / "general-0", cfg)
    general._prepare_views = lambda items, leader_epoch: None  # type: ignore[method-assign]
    general._append_one_view = lambda item, leader_epoch: None  # type: ignore[method-assign]
    fast.leader_epoch_source = general.leader_epoch_source = lambda: epoch
    try:
        for batches in appends:
            a = fast.append_items(_views(batches))
            b = general.append_items(_views(batches))
            assert _outcome(a) == _outcome(b)
            assert fast.log_end_offset == general.log_end_offset
        assert _log_bytes(root / "fast-0") == _log_bytes(root / "general-0")
        assert [s.base_offset for s in fast._segments] == [s.base_offset for s in general._segments]
        for seg_f, seg_g in zip(fast._segments, general._segments, strict=True):
            assert (seg_f.size, seg_f.next_offset) == (seg_g.size, seg_g.next_offset)
            assert list(seg_f.idx_offsets) == list(seg_g.idx_offsets)
            assert list(seg_f.idx_positions) == list(seg_g.idx_positions)
            assert list(seg_f.ti_timestamps) == list(seg_g.ti_timestamps)
            assert list(seg_f.ti_offsets) == list(seg_g.ti_offsets)
            assert (seg_f.max_timestamp, seg_f.offset_of_max_timestamp, seg_f.bytes_since_index) == (
                seg_g.max_timestamp,
                seg_g.offset_of_max_timestamp,
                seg_g.bytes_since_index,
            )
        # what a reader gets back: the same batches, with the offsets and epoch the log stamped
        got = [(v.base_offset, v.partition_leader_epoch, v.record_count) for v in fast.iter_batches()]
        assert got == [(v.base_offset, v.partition_leader_epoch, v.record_count) for v in general.iter_batches()]
    finally:
        fast.close()
        general.close()


def test_prepare_views_takes_only_plain_checked_views(tmp_path: Path) -> None:
    """Anything but plain ``BatchView`` items (raw bytes, records, the coordinator's ``OwnBatch``)
    goes the general way: the fast path declines the whole call."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    try:
        raw = rec.build_batch([(b"k", b"v", (), 1)])
        assert plog._prepare_views([rec.BatchView(raw, 0), raw], 0) is None
        assert plog._prepare_views([[(b"k", b"v", (), 1)]], 0) is None
        assert plog._prepare_views([rec.OwnBatch(raw, 0)], 0) is None
        p = plog._prepare_views([rec.BatchView(raw, 0)], 0)
        assert p is not None and p.results == [(0, 0)]
    finally:
        plog.close()


class _ShortVectoredOps(FileOps):
    """Writes at most ``step`` bytes per call, vectored or not (a disk full of short writes)."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.vectored = 0

    def pwritev(self, fd: int, buffers: list, offset: int) -> int:
        self.vectored += 1
        return os.pwrite(fd, b"".join(buffers)[: self.step], offset)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:  # type: ignore[override]
        return os.pwrite(fd, bytes(data[: self.step]), offset)


@pytest.mark.parametrize("step", [1, 5, 16, 17, 100])
def test_one_view_append_survives_short_vectored_writes(tmp_path: Path, step: int) -> None:
    """The produced batch goes out as a restamped 16-byte head and the rest of the request's bytes
    (``_pwritev_all``): a write that stops anywhere, in the head or in the rest, is finished."""
    raw = rec.build_batch([(b"k%d" % i, b"v" * 30, (), 1_000 + i) for i in range(4)])
    buf = b"\xff" * 3 + raw + b"\xee" * 2  # a batch inside a larger request
    ops = _ShortVectoredOps(step)
    short = PartitionLog.open(tmp_path / "short-0", LogConfig(file_ops=ops))
    plain = PartitionLog.open(tmp_path / "plain-0", LogConfig())
    short.leader_epoch_source = plain.leader_epoch_source = lambda: 3
    try:
        for _ in range(3):
            assert short.append_items([rec.BatchView(buf, 3)]) == plain.append_items([rec.BatchView(raw, 0)])
        assert ops.vectored == 3
        assert _log_bytes(tmp_path / "short-0") == _log_bytes(tmp_path / "plain-0")
        got = [(v.base_offset, v.partition_leader_epoch, v.record_count) for v in short.iter_batches()]
        assert got == [(0, 3, 4), (4, 3, 4), (8, 3, 4)]
        for v in short.iter_batches():
            v.validate()  # the CRC still holds: only bytes outside it were stamped
    finally:
        short.close()
        plain.close()


def test_a_failing_pwrite_still_fails_the_vectored_append(tmp_path: Path) -> None:
    """Ops that replace only ``pwrite`` (the failure injectors of the tests and of fault
    injection) see the produced batch's vectored write too: it fails as a plain write would,
    nothing of it becomes visible, and the next append lands where it would have."""

    class Failing(FileOps):
        def __init__(self) -> None:
            self.fail = True
            self.writes: list[bytes] = []

        def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:  # type: ignore[override]
            if self.fail:
                raise OSError(errno.ENOSPC, "no space left")
            self.writes.append(bytes(data))
            return os.pwrite(fd, data, offset)

    ops = Failing()
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(file_ops=ops))
    raw = rec.build_batch([(b"k", b"v" * 20, (), 1)])
    try:
        with pytest.raises(StorageError):
            plog.append_items([rec.BatchView(raw, 0)])
        assert plog.log_end_offset == 0 and list(plog.iter_batches()) == []
        ops.fail = False
        assert plog.append_items([rec.BatchView(raw, 0)]) == [(0, 0)]
        assert len(ops.writes) == 1 and ops.writes[0][rec.MAGIC_OFFSET :] == raw[rec.MAGIC_OFFSET :]
        assert [v.base_offset for v in plog.iter_batches()] == [0]
    finally:
        plog.close()
