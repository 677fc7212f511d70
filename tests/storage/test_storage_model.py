"""A model-based test: random operation sequences against a PartitionLog and a plain list, plus an
independent decoder (kafka-python) reading every segment file we write."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from groupd.storage import records as R
from groupd.storage.compaction import compact
from groupd.storage.log import PartitionLog
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from storage_helpers import small_config

CFG = small_config(segment_bytes=700, index_interval_bytes=100, cleanup_policy="compact")


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="storage-model-"))
        self.plog = PartitionLog.open(self.dir, CFG)
        self.records: list[tuple[int, int, bytes | None, bytes | None]] = []
        self.start = 0
        self.end = 0

    def teardown(self) -> None:
        if not self.plog.closed:
            self.plog.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        recs=st.lists(
            st.tuples(
                st.sampled_from([b"a", b"b", b"c", None]), st.none() | st.binary(max_size=60), st.integers(0, 10_000)
            ),
            min_size=1,
            max_size=5,
        )
    )
    def append(self, recs):
        base, last = self.plog.append_records([(k, v, [], ts) for k, v, ts in recs])
        assert (base, last) == (self.end, self.end + len(recs) - 1)
        self.records += [(base + i, ts, k, v) for i, (k, v, ts) in enumerate(recs)]
        self.end = last + 1

    @rule(n=st.integers(1, 4), ts=st.integers(0, 10_000))
    def append_client_batch(self, n, ts):
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=DefaultRecordBatch.CODEC_GZIP,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for i in range(n):
            builder.append(i, timestamp=ts + i, key=b"c", value=b"client-%d" % i, headers=[])
        base, last = self.plog.append_batch(bytes(builder.build()))
        assert (base, last) == (self.end, self.end + n - 1)
        self.records += [(base + i, ts + i, b"c", b"client-%d" % i) for i in range(n)]
        self.end = last + 1

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.plog.close()
        else:
            self.plog.abandon()
        self.plog = PartitionLog.open(self.dir, CFG)

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(self.start, self.end))
        self.plog.truncate_to(target)
        event(f"truncate emptied the log: {self.plog.log_end_offset <= self.start}")
        # The whole batch holding `target` goes; find where that batch started.
        self.end = self.plog.log_end_offset
        assert self.end <= target
        self.records = [r for r in self.records if r[0] < self.end]
        if self.end < self.start:
            self.start = self.end

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def delete_before(self, data):
        target = data.draw(st.integers(self.start, self.end))
        assert self.plog.delete_records_before(target) == target
        self.start = target
        self.records = [r for r in self.records if r[0] >= target]

    @rule()
    def compact(self):
        active_base = self.plog.active_segment.base_offset
        inactive = [r for r in self.records if r[0] < active_base]
        # The key map covers every inactive segment, including records below the log start.
        latest = {}
        for off, _ts, key, _value in self._all_inactive(active_base):
            if key is not None:
                latest[key] = off
        result = compact(self.plog, now=0)  # young tombstones: all kept
        event(f"compaction dropped records: {result.records_dropped > 0}")
        self.records = [r for r in self.records if r[0] >= active_base or r[2] is None or latest[r[2]] == r[0]]
        assert len(self.records) <= len(inactive) + len([r for r in self.records if r[0] >= active_base])

    def _all_inactive(self, active_base):
        out = []
        for seg in self.plog.segments[:-1]:
            data = seg.log_path.read_bytes()[: seg.size]
            out += [r for v in R.iter_batches(data) if not v.is_control for r in v.records_kv()]
        return [r for r in out if r[0] < active_base]

    @invariant()
    def log_matches_model(self):
        assert self.plog.log_start_offset == self.start
        assert self.plog.log_end_offset == self.end
        got = list(self.plog.iter_records())
        assert got == self.records

    @invariant()
    def reads_start_at_the_right_batch(self):
        if self.end > self.start:
            data = self.plog.read(self.start, 300)
            first = next(R.iter_batches(data, strict=True))
            assert first.base_offset <= self.start <= first.last_offset or first.base_offset >= self.start


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)


def test_kafka_python_reads_every_segment_we_write(tmp_path):
    """Independent oracle: kafka-python parses each segment file, checks each CRC, and sees the
    same offsets, timestamps, keys, values and headers as we do."""
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=2000))
    for i in range(120):
        if i % 7 == 3:
            builder = DefaultRecordBatchBuilder(
                magic=2,
                compression_type=DefaultRecordBatch.CODEC_GZIP,
                is_transactional=False,
                producer_id=5,
                producer_epoch=0,
                base_sequence=i,
                batch_size=1 << 20,
            )
            for j in range(3):
                builder.append(j, timestamp=5000 + i, key=None, value=b"gz%d" % j, headers=[("h", b"%d" % j)])
            plog.append_batch(bytes(builder.build()))
        elif i % 11 == 5:
            plog.append_batch(R.build_batch([(b"lat", b"x", [], 1)]), log_append_time_ms=99_000 + i)
        else:
            plog.append_records([(b"k%d" % (i % 9), None if i % 13 == 0 else b"v%d" % i, [("trace", b"t")], 1000 + i)])
    ours = [tuple(r) for r in plog.iter_records(full=True)]
    plog.close()
    theirs = []
    files = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(files) > 3
    for f in files:
        mr = MemoryRecords(f.read_bytes())
        while mr.has_next():
            batch = mr.next_batch()
            assert batch.validate_crc()
            theirs += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
    assert theirs == ours
    assert len(ours) > 150
