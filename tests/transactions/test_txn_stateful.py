"""Random interleavings of InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / EndTxn from
several producers of a few transactional ids, with appends made durable (or failed) one at a time,
markers written late, the clock jumping past transaction timeouts and id expiry, and crashes that
lose whatever was not durable. Kafka's invariants are checked after every step:

- a fenced producer never commits: every COMMIT marker carries the producer id and epoch most
  recently handed out for its transactional id;
- epochs only grow (for one producer id), and a producer id given up by a rotation never returns;
- a transaction's partitions all get one marker type, the partitions it had when it was prepared,
  and it completes in the state of that type (CompleteCommit after COMMIT, CompleteAbort after ABORT);
- a transaction at rest (Empty, Complete*) has no partitions, an open one has some;
- a coordinator loaded from the log (Kafka's bytes) has exactly the live state.

Producers speak transaction version 1 or 2 (``tv2_transaction``: the partition leader adds the
partition, EndTxn v5 answers the bumped epoch or a new producer id, which the producer goes on with).
"""

from __future__ import annotations

import os

from groupd.transactions import serde
from groupd.transactions.coordinator import TransactionConfig
from groupd.transactions.records import TransactionLogKey, TransactionLogValue, TransactionState
from groupd.transactions.state import SHORT_MAX
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from txn_harness import Ctx, Producer, TxnShell

S = TransactionState
IDS = ["a", "b", "z"]  # "z" starts two bumps from an exhausted epoch
PARTITIONS = [("t", 0), ("t", 1), ("t", 3), ("u", 0), ("u", 1)]
REST = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


class TransactionMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        config = TransactionConfig(transactional_id_expiration_ms=30_000)
        self.shell = TxnShell(config=config, auto_append=False, auto_markers=False)
        seeded = TransactionLogValue(50, SHORT_MAX - 3, 5000, S.COMPLETE_COMMIT, frozenset(), 0, 0)
        self.shell.log.append(serde.encode_record((TransactionLogKey("z"), seeded)))
        self.shell.restart()
        self.producers: list[Producer] = []
        self.inits: dict[Ctx, tuple[Producer, bool, int, int]] = {}  # producer, recovering, its id and epoch then
        self.abort_requests: dict[Ctx, tuple[str, int, int]] = {}
        self.tv2_ends: dict[Ctx, Producer] = {}  # EndTxn v5 sent: the producer takes its answer
        self.client_aborts: set[tuple[str, int, int]] = set()  # EndTxn(abort) accepted
        self.seen_answers: set[Ctx] = set()
        self.granted: dict[str, tuple[int, int]] = {"z": (50, SHORT_MAX - 3)}
        self.highest: dict[tuple[str, int], int] = {("z", 50): SHORT_MAX - 3}
        self.retired: set[tuple[str, int]] = set()
        self.decided: dict[str, bool] = {}

    # -- rules -----------------------------------------------------------------------------------
    @rule(txn_id=st.sampled_from(IDS), timeout=st.sampled_from([5000, 60000]))
    def new_producer(self, txn_id: str, timeout: int) -> None:
        p = Producer(self.shell, txn_id, timeout_ms=timeout)
        self.producers.append(p)
        self._init(p, recover=False)

    @rule(data=st.data())
    def reinit(self, data: st.DataObject) -> None:
        """An existing producer calls InitProducerId again: KIP-360 recovery with its id and epoch."""
        if self.producers:
            p = data.draw(st.sampled_from(self.producers))
            self._init(p, recover=p.pid >= 0)

    def _pick(self, data: st.DataObject) -> Producer | None:
        """A producer, most often one holding its id's current epoch (fenced ones get their turn too)."""
        current = [p for p in self.producers if self.granted.get(p.txn_id) == (p.pid, p.epoch)]
        pool = current if current and data.draw(st.integers(0, 3)) else self.producers
        return data.draw(st.sampled_from(pool)) if pool else None

    def _init(self, p: Producer, recover: bool) -> None:
        req = {"transactional_id": p.txn_id, "transaction_timeout_ms": p.timeout_ms}
        if recover:
            req |= {"producer_id": p.pid, "producer_epoch": p.epoch}
        self.inits[self.shell.send("InitProducerId", 4, req)] = (p, recover, p.pid, p.epoch)

    @rule(data=st.data(), parts=st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=3, unique=True))
    def add_partitions(self, data: st.DataObject, parts: list[tuple[str, int]]) -> None:
        p = self._pick(data)
        if p is not None:
            topics: dict[str, list[int]] = {}
            for t, i in parts:
                topics.setdefault(t, []).append(i)
            self._add(p, topics)

    def _add(self, p: Producer, topics: dict[str, list[int]]) -> None:
        self.shell.add_send(p.txn_id, p.pid, p.epoch, topics)

    @rule(data=st.data(), group=st.sampled_from(["g1", "g2"]))
    def add_offsets(self, data: st.DataObject, group: str) -> None:
        p = self._pick(data)
        if p is not None:
            req = {"transactional_id": p.txn_id, "producer_id": p.pid, "producer_epoch": p.epoch, "group_id": group}
            self.shell.send("AddOffsetsToTxn", 3, req)

    @rule(data=st.data(), commit=st.booleans())
    def end(self, data: st.DataObject, commit: bool) -> None:
        p = self._pick(data)
        if p is not None:
            self._end(p, commit)

    def _end(self, p: Producer, commit: bool) -> None:
        ctx = self.shell.end_send(p.txn_id, p.pid, p.epoch, commit)
        if not commit:
            self.abort_requests[ctx] = (p.txn_id, p.pid, p.epoch)

    @rule(fail=st.sampled_from([0, 0, 0, 19, 56]))
    def one_append_lands(self, fail: int) -> None:
        if self.shell.appends:
            self.shell.flush(error=fail, count=1)
            event("append failed" if fail else "append durable")

    @rule()
    def markers_land(self) -> None:
        if self.shell.pending_markers:
            m = self.shell.pending_markers.popleft()
            self.shell.absorb(self.shell.coord.markers_written(self.shell.now, m.transactional_id))

    @rule()
    def everything_lands(self) -> None:
        """The shell catches up: every append durable, every marker written (until quiet)."""
        while self.shell.appends or self.shell.pending_markers:
            self.shell.flush()
            self.answers_and_markers_keep_kafkas_rules()
            self.shell.write_markers()

    @rule(data=st.data(), commit=st.booleans(), part=st.sampled_from(PARTITIONS))
    def a_whole_transaction(self, data: st.DataObject, commit: bool, part: tuple[str, int]) -> None:
        """A producer runs one transaction while the shell keeps up (others' requests still interleave
        through the rules around this one)."""
        p = self._pick(data)
        if p is not None:
            self._add(p, {part[0]: [part[1]]})
            self.everything_lands()
            self._end(p, commit)
            self.everything_lands()

    @rule(data=st.data(), commit=st.booleans(), part=st.sampled_from(PARTITIONS), add=st.booleans())
    def tv2_transaction(self, data: st.DataObject, commit: bool, part: tuple[str, int], add: bool) -> None:
        """A transaction version 2 producer: its Produce has the leader add the partition
        (AddPartitionsToTxn v5), then EndTxn v5; without the add an abort is "abort when unsure"."""
        p = self._pick(data)
        if p is None:
            return
        if add:
            txn = {
                "transactional_id": p.txn_id,
                "producer_id": p.pid,
                "producer_epoch": p.epoch,
                "verify_only": False,
                "topics": [{"name": part[0], "partitions": [part[1]]}],
            }
            self.shell.send("AddPartitionsToTxn", 5, {"transactions": [txn]})
            self.everything_lands()
        # a transaction that completed meanwhile is done with (its markers' type is forgotten)
        self.states_are_consistent_and_replay_equals_live()
        req = {"transactional_id": p.txn_id, "producer_id": p.pid, "producer_epoch": p.epoch, "committed": commit}
        ctx = self.shell.send("EndTxn", 5, req)
        self.tv2_ends[ctx] = p
        if not commit:
            # its markers carry the bumped epoch of the producer id it had
            self.abort_requests[ctx] = (p.txn_id, p.pid, min(p.epoch + 1, SHORT_MAX))
        self.everything_lands()

    @rule(ms=st.sampled_from([0, 100, 2000, 6000, 31_000]))
    def time_passes(self, ms: int) -> None:
        self.shell.advance(ms)

    @rule(dice=st.integers(0, 5))
    def crash_and_restart(self, dice: int) -> None:
        """Everything not yet durable is lost, requests in flight are never answered (one draw in six)."""
        if dice:
            return
        self.shell.appends.clear()
        self.shell.pending_markers.clear()
        self.inits.clear()
        self.abort_requests.clear()
        self.tv2_ends.clear()
        self.decided.clear()  # re-checked against the markers the load re-sends
        self.shell.restart()
        event("restart")

    # -- invariants ------------------------------------------------------------------------------
    @invariant()
    def answers_and_markers_keep_kafkas_rules(self) -> None:
        shell = self.shell
        for ctx, resp in shell.responses.items():
            if ctx in self.seen_answers:
                continue
            self.seen_answers.add(ctx)
            aborting = self.abort_requests.pop(ctx, None)
            if aborting is not None and resp["error_code"] == 0:
                self.client_aborts.add(aborting)
            ended = self.tv2_ends.pop(ctx, None)
            if ended is not None and resp["error_code"] == 0:
                pid, epoch = resp["producer_id"], resp["producer_epoch"]
                assert (pid, epoch) != (ended.pid, ended.epoch) or self.granted.get(ended.txn_id) == (pid, epoch)
                if pid != ended.pid:
                    self.retired.add((ended.txn_id, ended.pid))
                    event("tv2 producer id rolled over")
                else:
                    assert epoch >= ended.epoch
                self.highest[(ended.txn_id, pid)] = max(epoch, self.highest.get((ended.txn_id, pid), -1))
                self.granted[ended.txn_id] = (pid, epoch)
                ended.pid, ended.epoch = pid, epoch
            sent = self.inits.pop(ctx, None)
            if sent is not None and resp["error_code"] == 0:
                p, recovering, had_pid, had_epoch = sent
                pid, epoch = resp["producer_id"], resp["producer_epoch"]
                assert 0 <= epoch < SHORT_MAX
                assert (p.txn_id, pid) not in self.retired, "a rotated-away producer id came back"
                # every InitProducerId hands out an epoch above the one its producer had; a new
                # producer's above every one handed out before (a retry of a lost answer is the
                # exception, and here every answer arrives)
                floor = had_epoch if recovering and had_pid == pid else self.highest.get((p.txn_id, pid), -1)
                assert epoch > floor, f"InitProducerId did not bump the epoch: {epoch} after {floor}"
                old = self.granted.get(p.txn_id)
                if old is not None and old[0] != pid:
                    self.retired.add((p.txn_id, old[0]))
                    event("producer id rotated")
                self.highest[(p.txn_id, pid)] = epoch
                self.granted[p.txn_id] = (pid, epoch)
                p.pid, p.epoch = pid, epoch
        for m in shell.pending_markers:
            meta = shell.coord.transactions[m.transactional_id]
            assert meta.state == (S.PREPARE_COMMIT if m.committed else S.PREPARE_ABORT)
            # only a TV2 "abort when unsure" has nothing to mark
            assert m.partitions == meta.partitions
            assert m.partitions or (not m.committed and meta.client_transaction_version >= 2)
            assert (m.producer_id, m.producer_epoch) == (meta.producer_id, meta.producer_epoch)
            assert self.decided.setdefault(m.transactional_id, m.committed) == m.committed, "two marker types"
            if m.committed:
                granted = self.granted[m.transactional_id]
                # TV2: the epoch the commit was answered with (a rollover: the next producer id)
                rolled = meta.next_producer_id >= 0 and granted == (meta.next_producer_id, 0)
                assert granted == (m.producer_id, m.producer_epoch) or rolled, "a fenced producer committed"
                event("commit decided")
            elif (m.transactional_id, m.producer_id, m.producer_epoch) not in self.client_aborts:
                # an abort the coordinator decided (a fence, a timeout) fences the producer: its
                # epoch is above every epoch handed out
                assert m.producer_epoch > self.highest.get((m.transactional_id, m.producer_id), -1)
                event("fenced abort decided")
            else:
                event("abort decided")

    @invariant()
    def states_are_consistent_and_replay_equals_live(self) -> None:
        shell = self.shell
        for txn_id, meta in shell.coord.transactions.items():
            if meta.producer_epoch < 0:
                continue  # the placeholder of a first InitProducerId being written
            assert meta.producer_epoch <= SHORT_MAX
            if meta.state in REST:
                assert not meta.partitions
                decided = self.decided.pop(txn_id, None)
                if decided is not None:
                    assert meta.state == (S.COMPLETE_COMMIT if decided else S.COMPLETE_ABORT)
            else:
                assert meta.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT)
                assert meta.partitions or (meta.state == S.PREPARE_ABORT and meta.client_transaction_version >= 2)
            highest = self.highest.get((txn_id, meta.producer_id), -1)
            assert meta.producer_epoch >= highest, "the durable epoch is below one handed out"
        loaded = TxnShell(config=shell.config)
        loaded.log = list(shell.log)
        assert loaded.restart() == shell.coord.snapshot()


TransactionMachine.TestCase.settings = settings(
    # Raise GROUPD_STATEFUL_EXAMPLES for a longer bug hunt; the default keeps the suite fast.
    max_examples=int(os.environ.get("GROUPD_STATEFUL_EXAMPLES", "100")),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTransactionMachine = TransactionMachine.TestCase
