"""The leader epoch cache (storage/epochs.py) against Kafka's ``LeaderEpochFileCache`` and
``LeaderEpochCheckpointFile``, and its life inside a ``PartitionLog`` (stamping, truncation,
rebuild, crash safety)."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path

import pytest
from groupd.storage import LogConfig, PartitionLog
from groupd.storage.epochs import (
    CHECKPOINT_FILE,
    CheckpointError,
    EpochEntry,
    LeaderEpochCache,
    end_offset_for,
    format_checkpoint,
    parse_checkpoint,
)
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

E = EpochEntry


# --- LeaderEpochFileCache ---------------------------------------------------------------------------
def test_end_offset_for_follows_leader_epoch_file_cache_end_offset_for() -> None:
    entries = (E(2, 10), E(4, 25), E(7, 40))
    assert end_offset_for(entries, -1, 50) == (-1, -1)  # UNDEFINED_EPOCH
    assert end_offset_for(entries, 7, 50) == (7, 50)  # the latest: the log end
    assert end_offset_for(entries, 2, 50) == (2, 25)  # start of the next epoch
    assert end_offset_for(entries, 3, 50) == (2, 25)  # the largest epoch <= the requested one
    assert end_offset_for(entries, 6, 50) == (4, 40)
    # Below the first entry (its data is gone): the requested epoch and the first start offset.
    assert end_offset_for(entries, 1, 50) == (1, 10)
    assert end_offset_for(entries, 8, 50) == (-1, -1)  # above every known epoch
    assert end_offset_for((), 0, 50) == (-1, -1)


def test_assign_ignores_what_is_not_newer_and_truncates_non_monotonic_entries(tmp_path: Path) -> None:
    """LeaderEpochFileCache.assign: isUpdateNeeded, then maybeTruncateNonMonotonicEntries."""
    cache = LeaderEpochCache(tmp_path / CHECKPOINT_FILE)
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # the same epoch, later: nothing to do
    assert cache.assign(1, 5) and cache.assign(3, 9)
    assert cache.entries == (E(0, 0), E(1, 5), E(3, 9))
    assert cache.assign(2, 7)  # an older epoch after a newer one: the conflicting entries go
    assert cache.entries == (E(0, 0), E(1, 5), E(2, 7))
    assert cache.assign(2, 6)  # the same epoch, earlier: it replaces the entry
    assert cache.entries == (E(0, 0), E(1, 5), E(2, 6))
    with pytest.raises(ValueError):
        cache.assign(-1, 3)
    assert parse_checkpoint((tmp_path / CHECKPOINT_FILE).read_text()) == list(cache.entries)


def test_truncate_from_start_keeps_the_epoch_covering_the_new_start(tmp_path: Path) -> None:
    """truncateFromStartAsyncFlush: exclusive, the last entry at or below the offset moves to it."""
    cache = LeaderEpochCache(tmp_path / CHECKPOINT_FILE, [E(0, 0), E(1, 5), E(2, 8)])
    assert not cache.truncate_from_start(0)
    assert cache.truncate_from_start(6)
    assert cache.entries == (E(1, 6), E(2, 8))
    assert cache.truncate_from_start(8)  # an entry at the offset stays, the one before it goes
    assert cache.entries == (E(2, 8),)
    assert cache.truncate_from_start(20)
    assert cache.entries == (E(2, 20),)


def test_truncate_from_end_drops_entries_at_or_after_the_offset(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / CHECKPOINT_FILE, [E(0, 0), E(1, 5), E(2, 8)])
    assert not cache.truncate_from_end(9)
    assert cache.truncate_from_end(8)
    assert cache.entries == (E(0, 0), E(1, 5))
    assert cache.truncate_from_end(3)
    assert cache.entries == (E(0, 0),)
    assert cache.epoch_for_offset(100) == 0


def test_epoch_for_offset_is_the_epoch_whose_range_holds_it() -> None:
    cache = LeaderEpochCache(None, [E(1, 5), E(3, 9)])
    assert [cache.epoch_for_offset(o) for o in (4, 5, 8, 9, 30)] == [None, 1, 1, 3, 3]


# --- LeaderEpochCheckpointFile ----------------------------------------------------------------------
def test_the_checkpoint_is_kafkas_text_format() -> None:
    """CheckpointFile: version 0, the count, "<epoch> <start offset>" per line, every line ended."""
    text = format_checkpoint([E(0, 0), E(1, 42), E(7, 2**40)])
    assert text == "0\n3\n0 0\n1 42\n7 1099511627776\n"
    assert parse_checkpoint(text) == [E(0, 0), E(1, 42), E(7, 2**40)]
    assert format_checkpoint([]) == "0\n0\n"
    # What Kafka reads: no file content / no count line: no entries; entries split on any blanks.
    assert parse_checkpoint("") == [] and parse_checkpoint("0\n") == []
    assert parse_checkpoint("0\n2\n0\t0\n3   17\n") == [E(0, 0), E(3, 17)]
    assert parse_checkpoint("0\n1\n+1 0\n") == [E(1, 0)]  # Integer.parseInt takes a sign


@pytest.mark.parametrize(
    "text",
    [
        "1\n1\n0 0\n",  # unrecognised version
        "0\n2\n0 0\n",  # fewer entries than counted
        "0\n1\n0 0\n1 5\n",  # more
        "0\n1\n0 0 0\n",  # malformed line
        "0\n1\nzero 0\n",
        "0\nx\n",
        "0\n1\n-1 0\n",  # LeaderEpochFileCache.assign rejects it
    ],
)
def test_a_damaged_checkpoint_is_an_error(text: str) -> None:
    with pytest.raises(CheckpointError):
        parse_checkpoint(text)


def test_reading_a_checkpoint_applies_assign_to_each_line(tmp_path: Path) -> None:
    """LeaderEpochFileCache(checkpoint): checkpoint.read().forEach(this::assign)."""
    (tmp_path / CHECKPOINT_FILE).write_text("0\n3\n0 0\n2 10\n1 12\n")
    cache = LeaderEpochCache.read(tmp_path)
    assert cache.entries == (E(0, 0), E(1, 12))


# --- the hypothesis model -----------------------------------------------------------------------------
class CacheModel(RuleBasedStateMachine):
    """The cache against a plain model: a dict epoch -> start offset, updated as Kafka's TreeMap."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="epochs-"))
        self.cache = LeaderEpochCache(self.dir / CHECKPOINT_FILE)
        self.model: dict[int, int] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _latest(self) -> tuple[int, int] | None:
        return max(self.model.items()) if self.model else None

    @rule(epoch=st.integers(0, 12), offset=st.integers(0, 60))
    def assign(self, epoch: int, offset: int) -> None:
        latest = self._latest()
        if latest is None or epoch != latest[0] or offset < latest[1]:
            for e in sorted(self.model, reverse=True):
                if e >= epoch or self.model[e] >= offset:
                    del self.model[e]
                else:
                    break
            self.model[epoch] = offset
        self.cache.assign(epoch, offset)

    @rule(offset=st.integers(0, 70))
    def truncate_from_start(self, offset: int) -> None:
        below = [e for e in sorted(self.model) if self.model[e] <= offset]
        if below:
            for e in below:
                del self.model[e]
            self.model[below[-1]] = offset
        self.cache.truncate_from_start(offset)

    @rule(offset=st.integers(0, 70))
    def truncate_from_end(self, offset: int) -> None:
        self.model = {e: o for e, o in self.model.items() if o < offset}
        self.cache.truncate_from_end(offset)

    @rule(requested=st.integers(-1, 14), log_end=st.integers(60, 80))
    def end_offset(self, requested: int, log_end: int) -> None:
        got = self.cache.end_offset_for(requested, log_end)
        epochs = sorted(self.model)
        if requested == -1:
            want = (-1, -1)
        elif epochs and epochs[-1] == requested:
            want = (requested, log_end)
        else:
            higher = [e for e in epochs if e > requested]
            floor = [e for e in epochs if e <= requested]
            if not higher:
                want = (-1, -1)
            elif not floor:
                want = (requested, self.model[higher[0]])
            else:
                want = (floor[-1], self.model[higher[0]])
        assert got == want

    @invariant()
    def same_entries_in_memory_and_on_disk(self) -> None:
        want = tuple(E(e, o) for e, o in sorted(self.model.items()))
        assert self.cache.entries == want
        path = self.dir / CHECKPOINT_FILE
        if path.exists():
            assert LeaderEpochCache.read(self.dir).entries == want
        # both strictly increasing
        assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in itertools.pairwise(want))


CacheModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestCacheModel = CacheModel.TestCase


# --- inside a PartitionLog ----------------------------------------------------------------------------
def _epochs_of_batches(plog: PartitionLog) -> list[tuple[int, int]]:
    return [(v.base_offset, v.partition_leader_epoch) for v in plog.iter_batches()]


def _led(plog: PartitionLog, epoch: list[int]) -> PartitionLog:
    plog.leader_epoch_source = lambda: epoch[0]
    return plog


def test_without_an_owner_batches_get_epoch_0_and_no_file_is_written(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0")
    plog.append_records([(b"k", b"v", (), 1)])
    assert _epochs_of_batches(plog) == [(0, 0)]
    assert plog.leader_epoch_entries() == (E(0, 0),)
    assert not (tmp_path / "t-0" / CHECKPOINT_FILE).exists()
    plog.close()


def test_appends_stamp_the_current_epoch_and_record_it_first(tmp_path: Path) -> None:
    """UnifiedLog.appendAsLeader stamps the leader epoch; Partition.makeLeader assigns (epoch,
    log end) before the new leader's first batch."""
    epoch = [0]
    plog = _led(PartitionLog.open(tmp_path / "t-0"), epoch)
    plog.append_records([(b"a", b"1", (), 1), (b"b", b"2", (), 1)])
    epoch[0] = 1
    # Before anything is appended at epoch 1 the leader already answers with it.
    assert plog.leader_epoch_entries() == (E(0, 0), E(1, 2))
    assert end_offset_for(plog.leader_epoch_entries(), 0, plog.log_end_offset) == (0, 2)
    plog.sync_leader_epoch()  # the election's write
    assert (tmp_path / "t-0" / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n1 2\n"
    plog.append_records([(b"c", b"3", (), 1)])
    epoch[0] = 3
    plog.append_batch(_client_batch())
    assert _epochs_of_batches(plog) == [(0, 0), (2, 1), (3, 3)]
    assert (tmp_path / "t-0" / CHECKPOINT_FILE).read_text() == "0\n3\n0 0\n1 2\n3 3\n"
    assert plog.epoch_for_offset(2) == 1 and plog.epoch_for_offset(4) == 3
    plog.close()


def _client_batch() -> bytes:
    from groupd.storage import build_batch

    return build_batch([(b"x", b"y", (), 5), (b"x", b"z", (), 6)], base_offset=0, partition_leader_epoch=-1)


def test_the_cache_follows_delete_records_and_truncation(tmp_path: Path) -> None:
    epoch = [0]
    plog = _led(PartitionLog.open(tmp_path / "t-0"), epoch)
    for e in (0, 1, 2):
        epoch[0] = e
        plog.append_records([(b"k", b"v", (), 1)] * 3)
    assert plog.leader_epoch_entries() == (E(0, 0), E(1, 3), E(2, 6))
    plog.delete_records_before(4)
    assert plog.leader_epoch_entries() == (E(1, 4), E(2, 6))
    assert parse_checkpoint((tmp_path / "t-0" / CHECKPOINT_FILE).read_text()) == [E(1, 4), E(2, 6)]
    plog.truncate_to(6)
    assert parse_checkpoint((tmp_path / "t-0" / CHECKPOINT_FILE).read_text()) == [E(1, 4)]
    plog.close()


@pytest.mark.parametrize("damage", ["missing", "garbage", "wrong count"])
def test_a_missing_or_damaged_checkpoint_is_rebuilt_from_the_batch_headers(tmp_path: Path, damage: str) -> None:
    epoch = [0]
    plog = _led(PartitionLog.open(tmp_path / "t-0"), epoch)
    for e in (0, 2, 5):
        epoch[0] = e
        plog.append_records([(b"k", b"v", (), 1)] * 2)
    plog.close()
    path = tmp_path / "t-0" / CHECKPOINT_FILE
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"\xff\x00 not a checkpoint")
    else:
        path.write_text("0\n5\n0 0\n")
    plog = _led(PartitionLog.open(tmp_path / "t-0"), epoch)
    assert plog.leader_epoch_entries() == (E(0, 0), E(2, 2), E(5, 4))
    assert path.read_text() == "0\n3\n0 0\n2 2\n5 4\n"
    plog.close()


def test_a_crash_after_the_election_record_keeps_the_epoch_at_the_log_end(tmp_path: Path) -> None:
    """LogLoader.load truncates the cache at the log end (the election's entry at the log end goes)
    and the leader assigns it again (Partition.makeLeader): the answer is the same as before."""
    epoch = [0]
    plog = _led(PartitionLog.open(tmp_path / "t-0", LogConfig()), epoch)
    plog.append_records([(b"k", b"v", (), 1)] * 4)
    epoch[0] = 1
    plog.sync_leader_epoch()
    plog.abandon()  # no clean shutdown
    plog = _led(PartitionLog.open(tmp_path / "t-0"), epoch)
    assert plog.leader_epoch_entries() == (E(0, 0), E(1, 4))
    plog.append_records([(b"k", b"v", (), 1)])
    assert _epochs_of_batches(plog)[-1] == (4, 1)
    plog.close()
