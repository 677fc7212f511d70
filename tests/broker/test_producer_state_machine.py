"""The producer state of one partition (broker/producer_state.py) under random produce, marker, fence,
append-failure and restart steps, over a real PartitionLog.

Appends are queued and written later, in queue order, as the appender does: the state is applied
when a batch or marker is queued and completed when it is written, so steps interleave "checked but
not yet in the log" with everything else. After every step:

* LSO <= HW, and no batch of a transaction still open in the log lies below the LSO;
* with nothing in flight, LSO = first offset of the oldest transaction the log leaves open (else HW);
* the aborted index = the aborted transactions of the log, computed independently from its batches;
* a restart (rebuild from the log's batch headers) gives the same LSO, index, epochs and open
  transactions as the live state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from groupd.broker.producer_state import BatchMeta, PartitionProducers, scan_producers
from groupd.protocol.errors import ErrorCode
from groupd.storage import LogConfig, PartitionLog
from groupd.storage import records as rec
from groupd.storage.markers import end_txn_marker_batch, read_end_txn_marker
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

PIDS = (1, 2, 3)
TS = 1_700_000_000_000


def truth(plog: PartitionLog) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
    """Independently of producer_state: the transactions the log leaves open (pid -> first offset)
    and its aborted transactions (pid, first offset, ABORT marker offset)."""
    open_txns: dict[int, int] = {}
    aborted = []
    if plog.log_end_offset == 0:
        return open_txns, aborted
    for v in plog.iter_batches(0):
        if v.is_control:
            marker = read_end_txn_marker(v)
            first = open_txns.pop(v.producer_id, None)
            if marker is not None and not marker.committed and first is not None:
                aborted.append((v.producer_id, first, v.base_offset))
        elif v.is_transactional:
            open_txns.setdefault(v.producer_id, v.base_offset)
    return open_txns, aborted


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="txndata-"))
        self.plog = PartitionLog.open(self.dir / "t-0", LogConfig(segment_bytes=4096))
        self.plog.note_transactions()  # as the data plane does before the first transactional append
        self.pp = PartitionProducers()
        self.epoch = dict.fromkeys(PIDS, 0)
        self.next_seq = dict.fromkeys(PIDS, 0)
        # Transactional batches queued or written since the producer's last marker, per marker
        # generation: the transaction is open in the state while there is one.
        self.txn_batches = dict.fromkeys(PIDS, 0)
        self.generation = dict.fromkeys(PIDS, 0)
        self.queue: list[tuple] = []  # (producer id, raw, apply_written, apply_failed)

    def teardown(self) -> None:
        self.plog.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- steps ------------------------------------------------------------------------------------
    @rule(pid=st.sampled_from(PIDS), transactional=st.booleans(), n=st.integers(1, 3))
    def produce(self, pid: int, transactional: bool, n: int) -> None:
        epoch, seq = self.epoch[pid], self.next_seq[pid]
        code, _msg, dup = self.pp.check(pid, epoch, seq, seq + n - 1, transactional)
        if self.txn_batches[pid] and not transactional:
            assert code == ErrorCode.INVALID_TXN_STATE
            return
        assert code == ErrorCode.NONE and dup is None
        meta = BatchMeta(seq, seq + n - 1, timestamp=TS)
        self.pp.record(pid, epoch, meta, TS, transactional=transactional, end_offset=self.plog.log_end_offset)
        meta.pending = object()  # type: ignore[assignment]
        raw = rec.build_batch(
            [(None, b"v", (), TS)] * n,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=transactional,
        )
        self.next_seq[pid] = seq + n
        self.txn_batches[pid] += transactional
        state = (pid, seq)
        generation = self.generation[pid]

        def failed() -> None:
            self.pp.forget(pid, meta)
            if transactional and generation == self.generation[pid]:
                self.txn_batches[pid] -= 1
            # The producer retries the same sequence later (it was never written).
            if self.epoch[pid] == epoch:
                self.next_seq[pid] = state[1]

        self.queue.append((pid, raw, lambda base, last: self.pp.written(meta, base, last), failed))

    @rule(pid=st.sampled_from(PIDS), committed=st.booleans(), fence=st.booleans())
    def marker(self, pid: int, committed: bool, fence: bool) -> None:
        # The coordinator's fencing abort carries the bumped epoch (InitProducerId while Ongoing).
        epoch = self.epoch[pid] + (1 if fence else 0)
        committed = committed and not fence
        assert self.pp.check_marker(pid, epoch, 0) == (ErrorCode.NONE, None)
        txn = self.pp.begin_marker(pid, epoch, 0, TS)
        if epoch != self.epoch[pid]:
            self.epoch[pid], self.next_seq[pid] = epoch, 0
        self.txn_batches[pid] = 0
        self.generation[pid] += 1
        raw = end_txn_marker_batch(pid, epoch, committed, 0, TS)
        self.queue.append(
            (
                pid,
                raw,
                lambda base, _last: self.pp.marker_written(txn, committed, base),
                lambda: self.pp.marker_failed(pid, txn),
            )
        )

    @precondition(lambda self: any(e > 0 for e in self.epoch.values()))
    @rule(pid=st.sampled_from(PIDS))
    def stale_epoch_is_refused(self, pid: int) -> None:
        if self.epoch[pid] == 0 or pid not in self.pp.producers:
            return
        code, _msg, _dup = self.pp.check(pid, self.epoch[pid] - 1, 0, 0, True)
        assert code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert self.pp.check_marker(pid, self.epoch[pid] - 1, 0)[0] == ErrorCode.INVALID_PRODUCER_EPOCH

    @precondition(lambda self: self.queue)
    @rule(fail=st.booleans())
    def write_next(self, fail: bool) -> None:
        pid, raw, written, failed = self.queue.pop(0)
        # Only a producer's last queued data batch fails here: its retry is then next in sequence
        # (when an earlier one fails, a client's later in-flight batches fail with it and are
        # retried in order). A failed marker is retried by the coordinator: the marker step.
        last_of_pid = all(q[0] != pid for q in self.queue)
        if fail and last_of_pid and read_end_txn_marker(rec.BatchView(raw, 0)) is None:
            failed()
            return
        base, last = self.plog.append_batch(raw)
        written(base, last)

    @rule()
    def restart(self) -> None:
        while self.queue:
            self.write_next(False)
        live = self.pp
        self.plog.close()
        self.plog = PartitionLog.open(self.dir / "t-0", LogConfig(segment_bytes=4096))
        self.pp = scan_producers(self.plog, -1)
        hw = self.plog.log_end_offset
        assert self.pp.last_stable_offset(hw) == live.last_stable_offset(hw)
        assert self.pp.aborted == live.aborted
        for pid, e in live.producers.items():
            r = self.pp.producers[pid]
            assert (r.epoch, r.coordinator_epoch) == (e.epoch, e.coordinator_epoch)
            assert (r.txn is None) == (e.txn is None)
            if e.txn is not None:
                assert r.txn.first_offset == e.txn.first_offset

    # --- invariants -------------------------------------------------------------------------------
    @invariant()
    def lso_is_the_oldest_open_transaction(self) -> None:
        hw = self.plog.log_end_offset
        lso = self.pp.last_stable_offset(hw)
        open_txns, _aborted = truth(self.plog)
        assert lso <= hw
        assert all(first >= lso for first in open_txns.values())
        if not self.queue:
            assert lso == min(open_txns.values(), default=hw)

    @invariant()
    def aborted_index_is_the_aborted_transactions(self) -> None:
        _open, aborted = truth(self.plog)
        assert [tuple(a) for a in self.pp.aborted] == aborted


ProducerStateMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "60")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestProducerStateMachine = ProducerStateMachine.TestCase
