"""The active segment's index entries reach its files lazily (``Segment.idx_on_disk``): at its roll,
its close or a rewrite, not with every append (issue 26: two of a commit's three pwrites were its
index entries). Whatever the moment of a crash, a reopened log finds every offset, and a clean
restart loads the same indexes the appends made."""

from __future__ import annotations

import random

import pytest
from groupd.storage.errors import StorageError
from groupd.storage.files import INDEX_ENTRY, TIMEINDEX_ENTRY
from groupd.storage.log import PartitionLog
from storage_helpers import fill, small_config
from structlog.testing import capture_logs


def _cfg(**kw):
    return small_config(**{"segment_bytes": 6000, "index_interval_bytes": 200, **kw})


def _memory_indexes(plog: PartitionLog) -> list[tuple[int, list, list, list, list]]:
    return [
        (s.base_offset, list(s.idx_offsets), list(s.idx_positions), list(s.ti_timestamps), list(s.ti_offsets))
        for s in plog.segments
    ]


def _file_entries(plog: PartitionLog, seg) -> tuple[int, int]:
    return (
        seg.index_path.stat().st_size // INDEX_ENTRY.size,
        seg.timeindex_path.stat().st_size // TIMEINDEX_ENTRY.size,
    )


def _check_every_offset(plog: PartitionLog, expected: list[tuple[int, int, bytes, bytes]]) -> None:
    """Each offset is found by a read that starts at it (the index lookup), with its record."""
    for record in expected:
        assert next(plog.iter_records(record[0])) == record
    assert list(plog.iter_records()) == expected
    assert plog.log_end_offset == expected[-1][0] + 1


def test_appends_leave_the_active_segments_index_files_untouched_until_close(tmp_path):
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, _cfg(segment_bytes=10**6))
    fill(plog, 80)
    active = plog.active_segment
    assert len(active.idx_offsets) > 5 and len(active.ti_timestamps) > 5
    assert _file_entries(plog, active) == (0, 0)  # nothing written per append
    memory = _memory_indexes(plog)
    plog.close()
    on_disk = _file_entries(plog, active)
    assert on_disk[0] == len(memory[-1][1])  # close wrote every offset entry (and a final time entry)
    with capture_logs() as logs:
        plog = PartitionLog.open(path, _cfg(segment_bytes=10**6))
    assert not any(e["event"] == "storage.index.rebuild" for e in logs)
    seg = plog.active_segment
    assert (list(seg.idx_offsets), list(seg.idx_positions)) == (memory[-1][1], memory[-1][2])
    plog.close()


def test_a_roll_writes_the_old_segments_whole_index(tmp_path):
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, _cfg())
    fill(plog, 150)
    assert len(plog.segments) >= 3
    for seg in plog.segments[:-1]:
        # the inactive ones: every entry in the files, without a close or a flush
        assert _file_entries(plog, seg) == (len(seg.idx_offsets), len(seg.ti_timestamps)), seg.base_offset
        assert seg.idx_on_disk == len(seg.idx_offsets)
    plog.abandon()


@pytest.mark.parametrize("seed", range(6))
def test_a_crash_before_the_index_is_written_finds_every_offset(tmp_path, seed):
    """A crash (no close: the active segment's entries never reached its files) at a random moment,
    rolls included: the reopened log has every record, finds each by its offset, rebuilds the
    active segment's indexes as the appends had them in memory, and loads the older ones as
    written at their roll."""
    rnd = random.Random(seed)
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, _cfg())
    expected = fill(plog, rnd.randint(20, 200), seed=seed)
    memory = _memory_indexes(plog)
    assert plog.active_segment.idx_on_disk == 0
    plog.abandon()
    plog = PartitionLog.open(path, _cfg())
    _check_every_offset(plog, expected)
    reopened = _memory_indexes(plog)
    # the offset index is the appends' own; the time index of the active one too, up to what a scan
    # cannot tell apart (it is recomputed from the batches as the appends computed it)
    assert [(b, o, p) for b, o, p, _t, _to in reopened] == [(b, o, p) for b, o, p, _t, _to in memory]
    assert reopened[-1][3:] == memory[-1][3:]
    plog.validate_all()
    # and the log goes on: more appends, a clean close, a restart that trusts the files
    more = fill(plog, 30, seed=seed + 100, ts0=10**7)
    shift = plog.log_end_offset - 1 - more[-1][0]
    expected += [(o + shift, t, k, v) for o, t, k, v in more]
    memory = _memory_indexes(plog)
    plog.close()
    with capture_logs() as logs:
        plog = PartitionLog.open(path, _cfg())
    assert not any(e["event"] == "storage.index.rebuild" for e in logs)
    assert [(b, o, p) for b, o, p, _t, _to in _memory_indexes(plog)] == [(b, o, p) for b, o, p, _t, _to in memory]
    _check_every_offset(plog, expected)
    plog.close()


def test_a_failed_index_write_at_close_leaves_a_log_that_reopens_whole(tmp_path):
    """close() cannot write the pending entries (the disk refuses): no clean-shutdown marker, so
    the next open scans and rebuilds instead of trusting short index files."""
    path = tmp_path / "t-0"
    cfg = _cfg(segment_bytes=10**6)
    plog = PartitionLog.open(path, cfg)
    expected = fill(plog, 60)
    active = plog.active_segment
    index_fd = active._index.fd

    class Refuse(type(cfg.file_ops)):
        def pwrite(self, fd, data, offset):
            if fd == index_fd:
                raise OSError(28, "No space left on device")
            return super().pwrite(fd, data, offset)

    plog._ops = active.ops = Refuse()
    with pytest.raises(StorageError):
        plog.close()
    plog = PartitionLog.open(path, cfg)
    _check_every_offset(plog, expected)
    plog.validate_all()
    plog.close()
