"""The recovery-point file is written in place through one fd kept open by the log (under
``--fsync always`` every flush moves the point: an open and a close per append were two of its
syscalls); the fd goes with the log's other files on close and on abandon (issue 26)."""

from __future__ import annotations

import os
from pathlib import Path

from groupd.storage.log import PartitionLog
from storage_helpers import small_config


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_each_flush_moves_the_point_and_no_fd_outlives_the_log(tmp_path: Path) -> None:
    for ending in ("close", "abandon"):
        before = _fds()
        plog = PartitionLog.open(tmp_path / f"t-{ending}", small_config())
        for i in range(3):
            plog.append_records([(b"k", b"v%d" % i, (), 1000)])
            plog.flush()
            assert plog._read_recovery_point() == (0, plog.size_in_bytes, i + 1)
        getattr(plog, ending)()
        assert _fds() == before
        reopened = PartitionLog.open(tmp_path / f"t-{ending}", small_config())
        assert reopened.log_end_offset == 3
        reopened.close()
