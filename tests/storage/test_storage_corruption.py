"""A damaged batch in the middle of a log (issue 16 item 15), with real segment files.

The verified replay (``iter_records(verify=True)``) checks every CRC, reports a bad batch and skips
it, and never stops there; crash recovery truncates only the tail after the recovery point, so a
damaged batch among durable data never costs the valid batches after it (Kafka's ``LogLoader``
recovers only what follows its recovery-point checkpoint).
"""

from __future__ import annotations

import os
from pathlib import Path

from groupd.storage import compact
from groupd.storage import records as R
from groupd.storage.log import PartitionLog
from storage_helpers import batch_bounds, fill, small_config
from structlog.testing import capture_logs

CFG = small_config(segment_bytes=10**6, index_interval_bytes=200)


def closed_log(path: Path, n_batches: int = 80) -> list[tuple[int, int, bytes, bytes]]:
    plog = PartitionLog.open(path, CFG)
    expected = fill(plog, n_batches)
    plog.close()
    return expected


def segment(path: Path) -> Path:
    (seg,) = sorted(path.glob("*.log"))
    return seg


def damage(seg: Path, position: int, bit: int = 0, *, fix_crc: bool = False) -> None:
    """Flip one bit; with `fix_crc`, give its batch a matching CRC again (a batch written bad)."""
    data = bytearray(seg.read_bytes())
    data[position] ^= 1 << bit
    if fix_crc:
        view = next(v for v in R.iter_batches(bytes(data)) if v.position <= position < v.position + v.size)
        R._UINT32.pack_into(data, view.position + R.CRC_OFFSET, R.compute_crc(data, view.position, view.size))
    seg.write_bytes(bytes(data))


def without(expected: list, bound: tuple[int, int, int, int]) -> list:
    return [r for r in expected if not bound[2] <= r[0] <= bound[3]]


def corrupt_events(logs: list[dict]) -> list[dict]:
    return [e for e in logs if e["event"] == "storage.batch.corrupt"]


def test_a_flipped_bit_after_a_clean_shutdown_is_reported_and_skipped_not_served(tmp_path: Path) -> None:
    path = tmp_path / "__consumer_offsets-7"
    expected = closed_log(path)
    bounds = batch_bounds(segment(path))
    victim = bounds[len(bounds) // 2]
    damage(segment(path), victim[1] - 2)  # its last record: the last value byte (or its length)
    seen: list[PartitionLog] = []
    plog = PartitionLog.open(path, CFG)
    plog.on_corrupt_batch = seen.append
    assert plog.log_end_offset == expected[-1][0] + 1  # not truncated: the batch was durable
    with capture_logs() as logs:
        got = list(plog.iter_records(verify=True))
    assert got == without(expected, victim)
    (event,) = corrupt_events(logs)
    assert event["log_level"] == "error"
    assert (event["topic"], event["partition"], event["offset"]) == ("__consumer_offsets", 7, victim[2])
    assert event["reason"] == "CRC mismatch" and event["position"] == victim[0]
    assert plog.corrupt_batches == 1 and seen == [plog]
    plog.close()


def test_an_undecodable_batch_with_a_valid_crc_is_skipped_and_the_replay_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    expected = closed_log(path)
    bounds = batch_bounds(segment(path))
    victim = bounds[10]
    damage(segment(path), victim[0] + R.HEADER_SIZE, fix_crc=True)  # the first record's length
    plog = PartitionLog.open(path, CFG)
    with capture_logs() as logs:
        assert list(plog.iter_records(verify=True)) == without(expected, victim)
    (event,) = corrupt_events(logs)
    assert event["offset"] == victim[2] and "record" in event["reason"]
    plog.close()


def test_a_damaged_batch_length_is_stepped_over_by_finding_the_next_intact_batch(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    expected = closed_log(path)
    bounds = batch_bounds(segment(path))
    victim = bounds[30]
    damage(segment(path), victim[0] + 8, bit=6)  # batchLength, which the CRC does not cover
    plog = PartitionLog.open(path, CFG)
    with capture_logs() as logs:
        assert list(plog.iter_records(verify=True)) == without(expected, victim)
    (event,) = corrupt_events(logs)
    assert event["offset"] == victim[2] and event["skipped_bytes"] == victim[1] - victim[0]
    plog.close()


def test_commits_appended_after_a_restart_survive_a_crash_despite_old_damage_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    expected = closed_log(path)
    bounds = batch_bounds(segment(path))
    victim = bounds[len(bounds) // 2]
    damage(segment(path), victim[1] - 1)
    plog = PartitionLog.open(path, CFG)
    more = fill(plog, 20, seed=7)
    plog.abandon()  # kill -9: no flush, no clean-shutdown marker
    with capture_logs() as logs:
        plog = PartitionLog.open(path, CFG)
    assert not [e for e in logs if e["event"] == "storage.recovery.truncated"]
    assert list(plog.iter_records(verify=True)) == without(expected, victim) + more
    plog.close()


def test_a_damaged_header_among_durable_batches_does_not_truncate_at_crash_recovery(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    expected = closed_log(path)
    victim = batch_bounds(segment(path))[25]
    damage(segment(path), victim[0] + 8, bit=6)
    plog = PartitionLog.open(path, CFG)
    more = fill(plog, 10, seed=8)
    plog.abandon()
    with capture_logs() as logs:
        plog = PartitionLog.open(path, CFG)
        assert list(plog.iter_records(verify=True)) == without(expected, victim) + more
        assert list(plog.iter_records()) == without(expected, victim) + more
    assert not [e for e in logs if e["event"] == "storage.recovery.truncated"]
    # Recovery steps over it; the first read to meet it reports it, once.
    assert [e["position"] for e in corrupt_events(logs)] == [victim[0]]
    plog.close()


def test_crash_recovery_still_truncates_at_damage_in_the_unflushed_tail(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    durable = fill(plog, 40)
    plog.flush()  # the recovery point moves here
    tail = fill(plog, 20, seed=3)
    plog.abandon()
    bounds = batch_bounds(segment(path))
    victim = bounds[50]  # in the unflushed tail: possibly torn, so cut off with what follows
    damage(segment(path), victim[1] - 1)
    with capture_logs() as logs:
        plog = PartitionLog.open(path, CFG)
    assert [e["position"] for e in logs if e["event"] == "storage.recovery.truncated"] == [victim[0]]
    assert list(plog.iter_records(verify=True)) == durable + [r for r in tail if r[0] < victim[2]]
    plog.close()


def test_truncation_moves_the_recovery_point_back(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    kept = fill(plog, 40)
    fill(plog, 40, seed=1)
    plog.flush()
    plog.truncate_to(kept[-1][0] + 1)
    # New, unflushed batches now lie where flushed ones were: they are the tail again.
    tail = fill(plog, 60, seed=2)
    plog.abandon()
    bounds = batch_bounds(segment(path))
    victim = bounds[45]
    damage(segment(path), victim[1] - 1)
    plog = PartitionLog.open(path, CFG)
    assert list(plog.iter_records(verify=True)) == kept + [r for r in tail if r[0] < victim[2]]
    plog.close()


def test_a_torn_recovery_point_file_means_a_full_check(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    expected = fill(plog, 30)
    plog.flush()
    plog.abandon()
    point = path / "recovery-point"
    point.write_bytes(point.read_bytes()[:-1] + bytes([point.read_bytes()[-1] ^ 1]))
    victim = batch_bounds(segment(path))[12]
    damage(segment(path), victim[1] - 1)
    plog = PartitionLog.open(path, CFG)
    assert plog.log_end_offset == victim[2]  # as without any point: everything was checked
    assert list(plog.iter_records(verify=True)) == [r for r in expected if r[0] < victim[2]]
    plog.close()


def test_unverified_reads_are_unchanged_and_the_checks_cost_no_batch(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    expected = closed_log(path, 200)
    plog = PartitionLog.open(path, CFG)
    assert list(plog.iter_records()) == list(plog.iter_records(verify=True)) == expected
    assert plog.corrupt_batches == 0
    plog.close()
    assert os.path.exists(path / "recovery-point")


def test_compaction_copies_a_damaged_batch_as_it_is_rather_than_giving_it_a_valid_crc(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    cfg = small_config(segment_bytes=1000, index_interval_bytes=200, cleanup_policy="compact")
    plog = PartitionLog.open(path, cfg)
    plog.append_records([(b"old", b"1", [], 1), (b"unique", b"4242", [], 1)])
    for i in range(40):  # supersedes "old" (so that batch would be rebuilt) and rolls segments
        plog.append_records([(b"old", b"%d" % (i + 2), [], 1)])
    plog.close()
    first = sorted(path.glob("*.log"))[0]
    damage(first, first.read_bytes().index(b"4242") + 3)  # 4242 -> 4243
    plog = PartitionLog.open(path, cfg)
    compact(plog)
    with capture_logs() as logs:
        got = {key: value for _o, _t, key, value in plog.iter_records(verify=True)}
    assert b"unique" not in got and got[b"old"] == b"41"
    assert [e["offset"] for e in corrupt_events(logs)] == [0]
    plog.close()
