"""Producer-state snapshots and transaction indexes (``load_producers``, storage/txnindex.py) under
random produce, transactional produce, commit, abort, roll, DeleteRecords, compaction, snapshot,
crash and restart steps, over a real PartitionLog.

A crash kills the process mid-way: the log is abandoned (no clean shutdown) and the files lose what
a crash can lose: the active segment's tail after its last fsync, the index entries appended since the
last snapshot (fsynced only by a snapshot), a half-written snapshot temp file; sometimes the newest
snapshot is damaged on top (its CRC must catch it). The restart loads the state from the newest
usable snapshot and the indexes (Kafka's UnifiedLog.loadProducerState) and must give what replaying
the whole log gives (``PartitionProducers.from_batches``, the oracle), over a mirror log that got
the same appends and deletions but no compaction (compaction drops aborted data but keeps the
markers and their index entries, as Kafka's cleaner does): the LSO, the open transactions, the
answers of read_committed fetches and, while nothing was compacted, the aborted index and every
producer's epoch and last batch. It also reads only the batches after the snapshot.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from groupd.broker.producer_state import BatchMeta, PartitionProducers, load_producers
from groupd.protocol.errors import ErrorCode
from groupd.storage import LogConfig, PartitionLog
from groupd.storage import records as rec
from groupd.storage import txnindex as txi
from groupd.storage.compaction import compact
from groupd.storage.markers import end_txn_marker_batch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from tests.broker.test_txn_data_plane import values_in

PIDS = (1, 2, 3)
TS = 1_700_000_000_000
CFG = LogConfig(segment_bytes=1500, segment_ms=None, retention_ms=None, cleanup_policy="compact")


def visible(plog: PartitionLog, pp: PartitionProducers, fetch_offset: int) -> list[bytes]:
    """What a read_committed consumer gets from ``fetch_offset`` (KafkaApis: whole batches below the
    LSO and the aborted transactions overlapping them; the consumer's Fetcher filters)."""
    hw, start = plog.log_end_offset, plog.log_start_offset
    lso = pp.last_stable_offset(hw, start)
    if fetch_offset >= lso:
        return []
    views = [v for v in rec.iter_batches(plog.read(fetch_offset, 1 << 24)) if v.last_offset < lso]
    aborted = [
        {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in pp.collect_aborted(fetch_offset, lso)
    ]
    return values_in(b"".join(bytes(v.raw) for v in views), aborted)


class SnapshotMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="txnsnap-"))
        self.plog = PartitionLog.open(self.dir / "t-0", CFG)
        self.mirror = PartitionLog.open(self.dir / "mirror-0", CFG)
        self.plog.note_transactions()
        self.pp = PartitionProducers()
        self.epoch = dict.fromkeys(PIDS, 0)
        self.next_seq = dict.fromkeys(PIDS, 0)
        self.open = dict.fromkeys(PIDS, False)
        self.durable: dict[str, int] = {}  # index file -> size fsynced by the last snapshot
        self.compacted = False
        self.deleted = False  # a snapshot may know more of a producer than the log left after DeleteRecords
        self.n = 0

    def teardown(self) -> None:
        self.plog.close()
        self.mirror.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _append(self, raw: bytes) -> tuple[int, int]:
        base, last = self.plog.append_batch(raw)
        assert self.mirror.append_batch(raw) == (base, last)
        return base, last

    def _snapshot(self, shutdown: bool = False) -> None:
        job = self.pp.snapshot_job(self.plog, shutdown=shutdown)
        if job is not None:
            job()
            self._note_durable()

    def _note_durable(self) -> None:
        self.durable = {p.name: p.stat().st_size for p in self.plog.path.glob("*.txnindex")}

    # --- steps ------------------------------------------------------------------------------------
    @rule(pid=st.sampled_from(PIDS), transactional=st.booleans(), n=st.integers(1, 3), key=st.integers(0, 3))
    def produce(self, pid: int, transactional: bool, n: int, key: int) -> None:
        epoch, seq = self.epoch[pid], self.next_seq[pid]
        code, _msg, _dup = self.pp.check(pid, epoch, seq, seq + n - 1, transactional)
        if self.open[pid] and not transactional:
            assert code == ErrorCode.INVALID_TXN_STATE
            return
        assert code == ErrorCode.NONE, _msg
        meta = BatchMeta(seq, seq + n - 1, timestamp=TS)
        self.pp.record(pid, epoch, meta, TS, transactional=transactional, end_offset=self.plog.log_end_offset)
        self.n += 1
        records = [(b"k%d" % key, b"%d-%d" % (self.n, i), (), TS) for i in range(n)]
        raw = rec.build_batch(
            records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional
        )
        self.pp.written(meta, *self._append(raw))
        self.next_seq[pid] = seq + n
        self.open[pid] = self.open[pid] or transactional
        self._snapshot()

    @rule(key=st.integers(0, 3))
    def plain(self, key: int) -> None:
        self.n += 1
        self._append(rec.build_batch([(b"k%d" % key, b"p%d" % self.n, (), TS)]))

    @rule(pid=st.sampled_from(PIDS), committed=st.booleans(), fence=st.booleans())
    def marker(self, pid: int, committed: bool, fence: bool) -> None:
        epoch = self.epoch[pid] + (1 if fence else 0)
        committed = committed and not fence
        assert self.pp.check_marker(pid, epoch, 0)[0] == ErrorCode.NONE
        txn = self.pp.begin_marker(pid, epoch, 0, TS)
        base, _last = self._append(end_txn_marker_batch(pid, epoch, committed, 0, TS))
        entry = self.pp.marker_written(txn, committed, base)
        if entry is not None:
            self.pp.index_abort(self.plog, entry)  # as DataPlane._write_marker does
        if epoch != self.epoch[pid]:
            self.epoch[pid], self.next_seq[pid] = epoch, 0
        self.open[pid] = False
        self._snapshot()

    @rule()
    def roll(self) -> None:
        self.plog.roll()

    @rule()
    def shutdown_snapshot(self) -> None:
        self._snapshot(shutdown=True)

    @rule(frac=st.floats(0, 1))
    def delete_records(self, frac: float) -> None:
        """DeleteRecords, at a point no aborted or open transaction spans (a cut through one leaves
        the oracle, which only sees the rest of the log, without its start)."""
        start, end = self.plog.log_start_offset, self.plog.log_end_offset
        cut = start + int((end - start) * frac)
        open_txns: dict[int, int] = {}
        spans = []
        for v in self.mirror.iter_batches(start) if start < end else []:
            if v.is_control:
                first = open_txns.pop(v.producer_id, None)
                if first is not None:
                    spans.append((first, v.base_offset))
            elif v.is_transactional:
                open_txns.setdefault(v.producer_id, v.base_offset)
        cut = min([cut, *open_txns.values()])
        for first, last in sorted(spans, reverse=True):
            if first < cut <= last:
                cut = first
        if cut <= start:
            return
        self.plog.delete_records_before(cut)
        self.mirror.delete_records_before(cut)
        self.deleted = True
        self.pp.truncate_head(cut)

    @rule()
    def clean(self) -> None:
        """The data plane's run_cleaner: nothing from the LSO on, aborted data dropped."""
        stable = self.pp.last_stable_offset(self.plog.log_end_offset, self.plog.log_start_offset)
        aborted = {(a.producer_id, a.first_offset, a.last_offset) for a in self.pp.aborted}

        def is_aborted(pid: int, base: int) -> bool:
            return any(p == pid and f <= base < last for p, f, last in aborted)

        if compact(self.plog, now=TS, stable_offset=stable, aborted=is_aborted).groups_cleaned:
            self.compacted = True

    @rule(data=st.data())
    def crash_and_restart(self, data: st.DataObject) -> None:
        path = self.plog.path
        point = self.plog._recovery_point  # (segment, position) fsynced by the last flush/close
        self.plog.abandon()
        draw = data.draw
        logs = sorted(path.glob("*.log"))
        active = logs[-1]
        active_size = active.stat().st_size
        # What was written after the last fsync (not below the log start: DeleteRecords made that
        # durable long before).
        durable = point[1] if point is not None and point[0] == int(active.name[:20]) else 0
        tear = active_size > durable and int(active.name[:20]) >= self.plog.log_start_offset
        if tear and draw(st.booleans(), label="tear the log tail"):
            os.truncate(active, draw(st.integers(durable, active_size - 1), label="log size"))
        for idx in sorted(path.glob("*.txnindex")):
            size, durable = idx.stat().st_size, self.durable.get(idx.name, 0)
            if size > durable and draw(st.booleans(), label=f"lose {idx.name}"):
                os.truncate(idx, draw(st.integers(durable, size - 1), label="index size"))
        snaps = txi.list_snapshots(path)
        if snaps and draw(st.booleans(), label="half-written snapshot"):
            tmp = txi.snapshot_path(path, snaps[-1] + 1).with_suffix(".snapshot.tmp")
            tmp.write_bytes(txi.encode_snapshot([])[:5])
        if snaps and draw(st.booleans(), label="damage the newest snapshot"):
            snap = txi.snapshot_path(path, snaps[-1])
            raw = bytearray(snap.read_bytes())
            raw[-1] ^= 0x40
            snap.write_bytes(bytes(raw))
        self.plog = PartitionLog.open(path, CFG)
        self.mirror.truncate_to(self.plog.log_end_offset)
        self._restart()

    @rule()
    def clean_restart(self) -> None:
        self._snapshot(shutdown=True)  # DataPlane.close
        self.plog.close()
        self.plog = PartitionLog.open(self.plog.path, CFG)
        self._restart()

    def _restart(self) -> None:
        plog = self.plog
        start, end = plog.log_start_offset, plog.log_end_offset
        assert (start, end) == (self.mirror.log_start_offset, self.mirror.log_end_offset)
        snapshots = txi.list_snapshots(plog.path)
        self.pp = loaded = load_producers(plog, -1)
        self._note_durable()
        # UnifiedLog.loadProducerState: only the batches after the snapshot are read.
        offset = loaded.loaded_from if loaded.loaded_from >= 0 else start
        if loaded.loaded_from >= 0:
            assert loaded.loaded_from in snapshots
        expected = sum(1 for _ in plog.iter_batches(offset)) if offset < end else 0
        assert loaded.replayed == expected
        oracle = PartitionProducers.from_batches(self.mirror.iter_batches(start) if start < end else [])
        oracle.truncate_head(start)
        assert loaded.last_stable_offset(end, start) == oracle.last_stable_offset(end, start)
        assert {p: e.txn.first_offset for p, e in loaded.producers.items() if e.txn} == {
            p: e.txn.first_offset for p, e in oracle.producers.items() if e.txn
        }
        for f in sorted({start, (start + end) // 2, max(start, end - 3)}):
            assert visible(plog, loaded, f) == visible(plog, oracle, f), f
        if not self.compacted:
            assert loaded.aborted == oracle.aborted
            for pid, e in oracle.producers.items():
                got = loaded.producers[pid]
                if not self.deleted:
                    assert (got.epoch, got.coordinator_epoch) == (e.epoch, e.coordinator_epoch)
                if e.batches:
                    b, g = e.batches[-1], got.batches[-1]
                    assert (g.first_seq, g.last_seq, g.first_offset, g.last_offset) == (
                        b.first_seq,
                        b.last_seq,
                        b.first_offset,
                        b.last_offset,
                    )
        # The test's producers carry on from what the partition remembers.
        for pid in PIDS:
            e = loaded.producers.get(pid)
            self.open[pid] = e is not None and e.txn is not None
            if e is not None:
                self.epoch[pid] = e.epoch
            self.next_seq[pid] = e.last_seq + 1 if e is not None else 0


SnapshotMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "60")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSnapshotMachine = SnapshotMachine.TestCase


def test_no_snapshot_covers_an_abort_whose_index_append_failed(tmp_path: Path) -> None:
    """A snapshot at X vouches for the index entries below X: after a failed .txnindex append
    (UnifiedLog's updateTxnIndex) none is taken, so a restart replays that abort from the log."""
    plog = PartitionLog.open(tmp_path / "t-0", CFG)
    plog.note_transactions()
    pp = PartitionProducers()
    meta = BatchMeta(0, 0, timestamp=TS)
    pp.record(1, 0, meta, TS, transactional=True, end_offset=0)
    pp.written(
        meta,
        *plog.append_batch(
            rec.build_batch(
                [(None, b"v", (), TS)], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True
            )
        ),
    )
    txi.txn_index_path(plog.path, 0).mkdir()  # the append cannot open its file
    txn = pp.begin_marker(1, 0, 0, TS)
    entry = pp.marker_written(txn, False, plog.append_batch(end_txn_marker_batch(1, 0, False, 0, TS))[0])
    assert entry is not None
    pp.index_abort(plog, entry)
    plog.roll()
    assert pp.snapshot_job(plog) is None and pp.snapshot_job(plog, shutdown=True) is None
    txi.txn_index_path(plog.path, 0).rmdir()
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", CFG)
    loaded = load_producers(plog, -1)
    assert (loaded.loaded_from, loaded.replayed) == (-1, 2)
    assert [tuple(a) for a in loaded.aborted] == [(1, 0, 1)]
    plog.close()


def test_no_snapshot_while_a_batch_or_marker_is_in_flight(tmp_path: Path) -> None:
    """The state is applied when a batch or marker is queued: a snapshot taken then would hold what
    the log does not (ProducerStateManager.takeSnapshot sees only appended batches)."""
    plog = PartitionLog.open(tmp_path / "t-0", CFG)
    plog.note_transactions()
    pp = PartitionProducers()
    plog.append_records([(None, b"x", (), TS)])
    plog.roll()
    meta = BatchMeta(0, 0, timestamp=TS)
    pp.record(1, 0, meta, TS, transactional=True, end_offset=plog.log_end_offset)
    assert pp.snapshot_job(plog) is None  # queued, not written
    raw = rec.build_batch([(None, b"v", (), TS)], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    pp.written(meta, *plog.append_batch(raw))
    txn = pp.begin_marker(1, 0, 0, TS)
    assert pp.snapshot_job(plog) is None  # the marker is queued
    pp.marker_written(txn, True, plog.append_batch(end_txn_marker_batch(1, 0, True, 0, TS))[0])
    job = pp.snapshot_job(plog)
    assert job is not None
    job()
    assert txi.list_snapshots(plog.path) == [plog.log_end_offset]
    (entry,) = txi.decode_snapshot(txi.snapshot_path(plog.path, plog.log_end_offset).read_bytes())
    assert entry == txi.SnapshotEntry(1, 0, 0, 1, 0, TS, 0, -1)
    plog.close()
