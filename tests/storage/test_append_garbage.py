"""The append path leaves nothing for the cyclic GC: each append's objects are freed by reference
counting as soon as it returns. A cycle per append (a nested function calling itself) kept every
encoded batch alive until a collection and made a commit-heavy daemon spend a tenth of its time
in the GC (issue 26)."""

from __future__ import annotations

import gc

from groupd.storage.log import LogConfig, PartitionLog


def test_appends_leave_no_reference_cycles(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog.append_records([(b"warm", b"up", (), 1)])
    gc.collect()
    gc.disable()
    try:
        for i in range(20):
            plog.append_records([(b"k%d" % i, b"v" * 100, (), 1000 + i), (b"k", b"v", (), 1000 + i)])
            plog.append_items([[(b"a", b"b", (), 5)], [(b"c", None, (), 5)]])
        assert gc.collect() == 0
    finally:
        gc.enable()
        plog.close()
