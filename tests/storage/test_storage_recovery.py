"""Recovery at open: torn and corrupt tails, damaged indexes, the clean-shutdown fast path."""

from __future__ import annotations

import os
import random

import pytest
from groupd.storage.log import PartitionLog
from storage_helpers import batch_bounds, fill, records_via_kafka_python, small_config
from structlog.testing import capture_logs

CFG = small_config(segment_bytes=3000, index_interval_bytes=200)


def crashed_log(path, n_batches=60, seed=0):
    """A log written and then abandoned as by kill -9 (no clean-shutdown marker)."""
    plog = PartitionLog.open(path, CFG)
    expected = fill(plog, n_batches, seed=seed)
    plog.abandon()
    return expected


def last_segment(path):
    return sorted(path.glob("*.log"))[-1]


def reopen_and_check(path, expected_records):
    plog = PartitionLog.open(path, CFG)
    got = list(plog.iter_records())
    assert got == expected_records
    assert plog.log_end_offset == (expected_records[-1][0] + 1 if expected_records else 0)
    plog.validate_all()
    assert records_via_kafka_python(path) == expected_records
    # The log keeps working after recovery, with offsets continuing where the valid data ended.
    leo = plog.log_end_offset
    assert plog.append_records([(b"after", b"crash", [], 1)]) == (leo, leo)
    plog.close()
    return plog


def test_torn_tail_at_random_positions_loses_only_the_torn_batch_and_after(tmp_path):
    rnd = random.Random(1)
    for trial in range(25):
        path = tmp_path / f"t-{trial}"
        expected = crashed_log(path, seed=trial)
        seg = last_segment(path)
        bounds = batch_bounds(seg)
        size = seg.stat().st_size
        cut = rnd.randint(0, size)
        os.truncate(seg, cut)
        survivors_end = max([b[3] for b in bounds if b[1] <= cut], default=None)
        seg_base = int(seg.name[:20])
        keep = [r for r in expected if r[0] < seg_base or (survivors_end is not None and r[0] <= survivors_end)]
        with capture_logs() as logs:
            reopen_and_check(path, keep)
        truncations = [e for e in logs if e["event"] == "storage.recovery.truncated"]
        if cut in {b[1] for b in bounds} or cut == 0:
            assert truncations == []
        else:
            (event,) = truncations
            assert event["path"] == str(seg)
            assert event["position"] == max([b[1] for b in bounds if b[1] <= cut], default=0)
            assert event["reason"]


def test_flipped_bytes_truncate_at_the_damaged_batch(tmp_path):
    rnd = random.Random(2)
    for trial in range(25):
        path = tmp_path / f"t-{trial}"
        expected = crashed_log(path, n_batches=30, seed=100 + trial)
        seg = last_segment(path)
        bounds = batch_bounds(seg)
        data = bytearray(seg.read_bytes())
        pos = rnd.randrange(len(data))
        data[pos] ^= 1 << rnd.randrange(8)
        seg.write_bytes(data)
        start, _end, base, _last = next(b for b in bounds if b[0] <= pos < b[1])
        if 12 <= pos - start < 16:
            # partitionLeaderEpoch: not covered by the CRC, by design, and meaningless to us.
            keep = expected
        else:
            keep = [r for r in expected if r[0] < base]
        reopen_and_check(path, keep)


def test_garbage_appended_after_the_last_batch_is_truncated(tmp_path):
    path = tmp_path / "t-0"
    expected = crashed_log(path)
    with open(last_segment(path), "ab") as f:
        f.write(os.urandom(100))
    reopen_and_check(path, expected)


@pytest.mark.parametrize("damage", ["delete", "truncate-odd", "zero", "shuffle"])
def test_damaged_or_missing_indexes_are_rebuilt(tmp_path, damage):
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    expected = fill(plog, 150)
    plog.close()
    originals = {p.name: p.read_bytes() for p in path.iterdir() if p.suffix in (".index", ".timeindex")}
    assert len(originals) >= 6 and all(originals.values())
    for p in path.iterdir():
        if p.suffix not in (".index", ".timeindex"):
            continue
        if damage == "delete":
            p.unlink()
        elif damage == "truncate-odd":
            os.truncate(p, p.stat().st_size - 3)
        elif damage == "zero":
            p.write_bytes(b"\0" * p.stat().st_size)
        elif damage == "shuffle":
            p.write_bytes(p.read_bytes()[::-1])
    with capture_logs() as logs:
        plog = PartitionLog.open(path, CFG)
    assert any(e["event"] == "storage.index.rebuild" for e in logs)
    assert list(plog.iter_records()) == expected
    plog.validate_all()
    plog.close()
    rebuilt = {p.name: p.read_bytes() for p in path.iterdir() if p.suffix in (".index", ".timeindex")}
    assert rebuilt == originals  # byte-identical to what the append path wrote


def test_clean_shutdown_scans_only_the_tail(tmp_path):
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, small_config(segment_bytes=10**6, index_interval_bytes=200))
    expected = fill(plog, 100)
    plog.close()
    seg = last_segment(path)
    last_entry_pos = max(b[0] for b in batch_bounds(seg) if b[0] > 0 and b[0] <= seg.stat().st_size)
    # Damage a batch *before* the last index entry: after a clean shutdown it is not re-read...
    bounds = batch_bounds(seg)
    early = bounds[1]
    data = bytearray(seg.read_bytes())
    data[early[0] + 30] ^= 0xFF
    seg.write_bytes(data)
    assert early[0] < last_entry_pos
    plog = PartitionLog.open(path, small_config(segment_bytes=10**6, index_interval_bytes=200))
    assert plog.log_end_offset == expected[-1][0] + 1
    plog.abandon()
    # ...and after a crash it is not truncated either: it lies before the recovery point (the
    # flush at close made it durable), so it is no torn tail and what follows it stays. Kafka's
    # LogLoader likewise recovers only after its recovery point. The verified replay skips it.
    plog = PartitionLog.open(path, small_config(segment_bytes=10**6, index_interval_bytes=200))
    assert plog.log_end_offset == expected[-1][0] + 1
    assert list(plog.iter_records(verify=True)) == [r for r in expected if not early[2] <= r[0] <= early[3]]
    plog.close()


def test_clean_shutdown_still_catches_a_torn_tail(tmp_path):
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    expected = fill(plog, 60)
    plog.close()
    seg = last_segment(path)
    bounds = batch_bounds(seg)
    os.truncate(seg, bounds[-1][1] - 5)
    keep = [r for r in expected if r[0] < bounds[-1][2]]
    reopen_and_check(path, keep)


def test_recovery_rebuilds_state_for_appends_and_timestamps(tmp_path):
    path = tmp_path / "t-0"
    expected = crashed_log(path, n_batches=80)
    plog = PartitionLog.open(path, CFG)
    top = max(r[1] for r in expected)
    assert plog.max_timestamp() == (top, next(r[0] for r in expected if r[1] == top))
    assert plog.offset_for_timestamp(expected[40][1]) == next((r[0], r[1]) for r in expected if r[1] >= expected[40][1])
    # Appending after recovery produces the same indexes a never-crashed log would have.
    more = fill(plog, 40, seed=99, ts0=10**7)
    plog.validate_all()
    assert list(plog.iter_records()) == expected + more
    plog.close()


def test_leftover_index_files_of_missing_segments_are_removed(tmp_path):
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    fill(plog, 5)
    plog.close()
    (path / "00000000000000099999.index").write_bytes(b"\0" * 8)
    (path / "00000000000000099999.timeindex").write_bytes(b"\0" * 12)
    PartitionLog.open(path, CFG).close()
    assert not (path / "00000000000000099999.index").exists()


def test_a_damaged_base_offset_is_caught_although_the_crc_does_not_cover_it(tmp_path):
    for which, byte, bit in ((-1, 7, 0), (-1, 3, 5), (-3, 7, 1), (-3, 6, 0), (0, 7, 0)):
        path = tmp_path / f"t-{which}-{byte}-{bit}"
        expected = crashed_log(path, n_batches=30)
        seg = last_segment(path)
        start, _end, base, _last = batch_bounds(seg)[which]
        data = bytearray(seg.read_bytes())
        data[start + byte] ^= 1 << bit
        seg.write_bytes(data)
        reopen_and_check(path, [r for r in expected if r[0] < base])


def test_a_tail_cut_below_the_checkpointed_log_start_starts_the_log_there_deleteSegmentsIfLogStartGreaterThanLogEnd(
    tmp_path,
):
    """DeleteRecords checkpointed a log start past data that was never made durable, then a crash cut that
    data: the log end is below the log start. Kafka (LogLoader.recoverLog) deletes every segment and starts
    the log at the checkpointed start. Before: the log start dropped to the cut end in memory only, appends
    continued from there, and the next restart moved the start forward again over them (acknowledged
    records hidden)."""
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    fill(plog, 20)
    end = plog.log_end_offset
    assert plog.delete_records_before(end) == end
    plog.abandon()
    for seg in path.glob("*.log"):
        os.truncate(seg, 0)  # everything after the last fsync torn away
    (path / "recovery-point").unlink(missing_ok=True)  # a full check, as after a torn recovery point
    plog = PartitionLog.open(path, CFG)
    assert (plog.log_start_offset, plog.log_end_offset) == (end, end)
    assert plog.append_records([(b"k", b"after", [], 1)]) == (end, end)
    plog.close()
    plog = PartitionLog.open(path, CFG)
    assert plog.log_start_offset == end and [r[0] for r in plog.iter_records()] == [end]
    plog.close()
