"""``PartitionLog.read`` resumes where the last read ended without ``_find`` (the read hint, the
tail consumer's Fetch path): random appends, rolls, truncations, deletions, compactions, reopens
and damage between reads, and every read equals the general path's (the hint cleared)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from groupd.storage import records as R
from groupd.storage.compaction import compact
from groupd.storage.log import PartitionLog
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule
from storage_helpers import small_config

CFG = small_config(segment_bytes=700, index_interval_bytes=100, cleanup_policy="compact")


class ReadHint(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="read-hint-"))
        self.plog = PartitionLog.open(self.dir, CFG)
        self.tail: int | None = None  # where the last read ended (a tailing consumer's next offset)
        self.hits = 0

    def teardown(self) -> None:
        if not self.plog.closed:
            self.plog.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _read(self, offset: int, max_bytes: int, min_one: bool) -> None:
        hint = self.plog._read_hint
        if hint is not None and hint[0] == offset:
            self.hits += 1
        # The general path first: a fast path reading at a wrong position would record damage
        # that the general path then also served around.
        self.plog._read_hint = None
        general = self.plog.read(offset, max_bytes, min_one_batch=min_one)
        self.plog._read_hint = hint
        fast = self.plog.read(offset, max_bytes, min_one_batch=min_one)
        assert fast == general
        batches = list(R.iter_batches(fast, strict=False))
        self.tail = batches[-1].last_offset + 1 if batches else None
        event(f"read at the hint: {hint is not None and hint[0] == offset}")

    @rule(n=st.integers(1, 4), size=st.integers(0, 120), key=st.sampled_from([b"a", b"b", None]))
    def append(self, n, size, key):
        self.plog.append_records([(key, b"v" * size, [], 1000) for _ in range(n)])

    @rule()
    def roll(self):
        self.plog.roll()

    @precondition(lambda self: self.plog.log_end_offset > self.plog.log_start_offset)
    @rule(data=st.data())
    def truncate(self, data):
        self.plog.truncate_to(data.draw(st.integers(self.plog.log_start_offset, self.plog.log_end_offset)))

    @precondition(lambda self: self.tail is not None and self.tail > self.plog.log_start_offset)
    @rule(back=st.integers(1, 3), sizes=st.lists(st.integers(0, 120), min_size=1, max_size=6))
    def rewrite_tail(self, back, sizes):
        """The batches up to where the last read ended are replaced by others of other sizes (a
        truncation below the hint's position, then appends past it)."""
        assert self.tail is not None
        self.plog.truncate_to(max(self.plog.log_start_offset, self.tail - back))
        for size in sizes:
            self.plog.append_records([(b"a", b"w" * size, [], 1000)])

    @precondition(lambda self: self.plog.log_end_offset > self.plog.log_start_offset)
    @rule(data=st.data())
    def delete_before(self, data):
        self.plog.delete_records_before(data.draw(st.integers(self.plog.log_start_offset, self.plog.log_end_offset)))

    @rule()
    def compact(self):
        compact(self.plog, now=0)

    @rule()
    def reopen(self):
        self.plog.close()
        self.plog = PartitionLog.open(self.dir, CFG)

    @precondition(lambda self: self.plog.log_end_offset > self.plog.log_start_offset)
    @rule(data=st.data())
    def damage(self, data):
        """Zeros over the header of a batch of the active segment (a lost write)."""
        seg = self.plog.segments[-1]
        if seg.size < R.HEADER_SIZE:
            return
        at = data.draw(st.integers(0, seg.size - R.HEADER_SIZE))
        fd = os.open(seg.log_path, os.O_WRONLY)
        try:
            os.pwrite(fd, bytes(R.HEADER_SIZE), at)
        finally:
            os.close(fd)

    @rule(max_bytes=st.integers(1, 900), min_one=st.booleans())
    def read_on(self, max_bytes, min_one):
        start, end = self.plog.log_start_offset, self.plog.log_end_offset
        self._read(self.tail if self.tail is not None and start <= self.tail <= end else start, max_bytes, min_one)

    # A tailing reader reads much more often than anything else happens.
    read_on_again = read_on

    @rule(data=st.data(), max_bytes=st.integers(1, 900), min_one=st.booleans())
    def read_anywhere(self, data, max_bytes, min_one):
        start, end = self.plog.log_start_offset, self.plog.log_end_offset
        self._read(data.draw(st.integers(start, end)), max_bytes, min_one)


TestReadHint = ReadHint.TestCase
TestReadHint.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_a_tailing_reader_uses_the_hint(tmp_path):
    """The hint is taken (not a test that cannot fail: without it ``_find`` runs on every read)."""
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    finds = 0
    real = plog._find

    def counting(*args):
        nonlocal finds
        finds += 1
        return real(*args)

    plog._find = counting  # type: ignore[method-assign]
    offset = 0
    for i in range(20):
        plog.append_records([(None, b"x%d" % i, [], 1000)])
        data = plog.read(offset, 1 << 20)
        offset = list(R.iter_batches(data))[-1].last_offset + 1
    assert offset == 20
    assert finds == 1
    plog.close()
