"""The producer state loads around a damaged batch (issue 29 item 1): ``load_producers`` over a
log with transactions, idempotent batches and markers, with the batch at every position zeroed,
gives what replaying the intact batches gives (``PartitionProducers.from_batches``, the oracle):
the producers' epochs and sequences, the open transactions (so the LSO) and the aborted index.
Before, the load failed at the damage and the partition started with no producer state at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from groupd.broker.producer_state import PartitionProducers, load_producers
from groupd.storage import LogConfig, PartitionLog
from groupd.storage import records as rec
from groupd.storage.markers import end_txn_marker_batch
from structlog.testing import capture_logs

TS = 1_700_000_000_000
CFG = LogConfig(segment_bytes=500, index_interval_bytes=100, segment_ms=None, retention_ms=None)


def _build(path: Path) -> None:
    plog = PartitionLog.open(path, CFG)
    plog.note_transactions()
    seq = {1: 0, 2: 0, 3: 0}

    def batch(pid: int, n: int, transactional: bool) -> None:
        records = [(b"k", b"v%d" % i, (), TS) for i in range(n)]
        plog.append_batch(
            rec.build_batch(
                records, producer_id=pid, producer_epoch=0, base_sequence=seq[pid], transactional=transactional
            )
        )
        seq[pid] += n

    for round_ in range(3):
        batch(1, 2, True)
        batch(2, 1, False)
        batch(1, 1, True)
        plog.append_batch(end_txn_marker_batch(1, 0, round_ % 2 == 0, 0, TS))  # commit, abort, commit
        batch(3, 2, True)  # producer 3's transaction stays open at the end
        batch(2, 3, False)
    plog.close()


def _state(pp: PartitionProducers, hw: int) -> tuple:
    producers = {pid: (e.epoch, e.last_seq, e.txn.first_offset if e.txn else None) for pid, e in pp.producers.items()}
    return producers, pp.last_stable_offset(hw), [tuple(a) for a in pp.aborted]


def test_the_producer_state_loads_around_a_zeroed_batch_at_every_position(tmp_path: Path) -> None:
    template = tmp_path / "template" / "t-0"
    _build(template)
    batches = [(seg, v) for seg in sorted(template.glob("*.log")) for v in rec.iter_batches(seg.read_bytes())]
    assert len({seg for seg, _v in batches}) >= 3
    for i, (seg, victim) in enumerate(batches):
        path = tmp_path / f"case-{i}" / "t-0"
        path.mkdir(parents=True)
        for f in template.iterdir():
            (path / f.name).write_bytes(f.read_bytes())
        data = bytearray((path / seg.name).read_bytes())
        data[victim.position : victim.position + victim.size] = bytes(victim.size)
        (path / seg.name).write_bytes(bytes(data))
        oracle = PartitionProducers.from_batches(v for j, (_s, v) in enumerate(batches) if j != i)
        plog = PartitionLog.open(path, CFG)
        with capture_logs() as logs:
            loaded = load_producers(plog, -1)
        hw = plog.log_end_offset
        assert _state(loaded, hw) == _state(oracle, hw), i
        assert [e["offset"] for e in logs if e["event"] == "storage.batch.corrupt"] == [victim.base_offset]
        plog.close()


@pytest.mark.parametrize("position", ["first", "last"])
def test_a_zeroed_batch_does_not_cost_the_snapshot_path_its_later_batches(tmp_path: Path, position: str) -> None:
    """With a snapshot below the damage, only the batches after it are replayed: around it too."""
    path = tmp_path / "t-0"
    _build(path)
    plog = PartitionLog.open(path, CFG)
    first = load_producers(plog, -1)  # writes a snapshot at the log end
    assert first.replayed
    plog.close()
    plog = PartitionLog.open(path, CFG)
    more = rec.build_batch([(b"k", b"late", (), TS)], producer_id=2, producer_epoch=0, base_sequence=18)
    plog.append_batch(more)
    plog.append_batch(rec.build_batch([(b"k", b"x", (), TS)], producer_id=2, producer_epoch=0, base_sequence=19))
    plog.close()
    seg = sorted(path.glob("*.log"))[-1]
    views = list(rec.iter_batches(seg.read_bytes()))
    victim = views[-2] if position == "first" else views[-1]
    data = bytearray(seg.read_bytes())
    data[victim.position : victim.position + victim.size] = bytes(victim.size)
    seg.write_bytes(bytes(data))
    plog = PartitionLog.open(path, CFG)
    loaded = load_producers(plog, -1)
    assert loaded.loaded_from >= 0 and loaded.replayed == 1
    assert loaded.producers[2].last_seq == (19 if position == "first" else 18)
    plog.close()
