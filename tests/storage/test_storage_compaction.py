"""Compaction: latest value per key, tombstones, offsets kept, and a crash at every swap step."""

from __future__ import annotations

import random

import pytest
from groupd.storage import records as R
from groupd.storage.compaction import SWAP_STEPS, Cleaner, compact, run_cleanup
from groupd.storage.log import PartitionLog
from storage_helpers import records_via_kafka_python, small_config

DAY = 24 * 3600 * 1000
CFG = small_config(segment_bytes=2500, index_interval_bytes=200, cleanup_policy="compact", delete_retention_ms=DAY)


def write_keyed(plog, n, *, keys=20, seed=0, ts0=1_000_000, tombstone_rate=0.1):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        batch = []
        for _ in range(rnd.randint(1, 4)):
            key = b"group-%d" % rnd.randrange(keys)
            value = None if rnd.random() < tombstone_rate else b"v%d-" % i + rnd.randbytes(rnd.randint(10, 60))
            batch.append((key, value, [], ts0 + i))
        base, _ = plog.append_records(batch)
        out.extend((base + j, r[3], r[0], r[1]) for j, r in enumerate(batch))
    return out


def expected_after(records, active_base, *, drop_tombstones):
    """What compaction must leave: for records below the active segment, the latest per key."""
    latest = {}
    for off, _ts, key, _value in records:
        if off < active_base:
            latest[key] = off
    keep = []
    for r in records:
        off, _ts, key, value = r
        if off >= active_base or (latest[key] == off and not (value is None and drop_tombstones)):
            keep.append(r)
    return keep


def state(records):
    """The key -> value map a replay of these records would build."""
    m = {}
    for _off, _ts, key, value in records:
        if value is None:
            m.pop(key, None)
        else:
            m[key] = value
    return m


def test_keeps_latest_per_key_with_original_offsets(tmp_path):
    plog = PartitionLog.open(tmp_path / "__consumer_offsets-0", CFG)
    records = write_keyed(plog, 300)
    active_base = plog.active_segment.base_offset
    size_before = plog.size_in_bytes
    leo = plog.log_end_offset
    result = compact(plog, now=1_000_000 + 300)  # tombstones are younger than delete_retention_ms
    assert result.groups_cleaned >= 1 and result.records_dropped > 0
    want = expected_after(records, active_base, drop_tombstones=False)
    assert list(plog.iter_records()) == want
    assert plog.size_in_bytes < size_before / 3
    assert plog.log_end_offset == leo and plog.log_start_offset == 0
    assert state(plog.iter_records()) == state(records)
    plog.validate_all()
    # Sparse batches are still valid Kafka batches to an independent decoder.
    assert records_via_kafka_python(tmp_path / "__consumer_offsets-0") == want
    # Offsets are never reassigned, and appends continue where they were.
    assert plog.append_records([(b"group-1", b"new", [], 2_000_000)]) == (leo, leo)
    plog.close()
    plog = PartitionLog.open(tmp_path / "__consumer_offsets-0", CFG)
    assert list(plog.iter_records())[:-1] == want
    plog.validate_all()
    plog.close()


def test_old_tombstones_are_dropped_and_young_ones_kept(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", CFG)
    records = write_keyed(plog, 300, tombstone_rate=0.3)
    active_base = plog.active_segment.base_offset
    young = compact(plog, now=1_000_000 + DAY - 1_000)
    assert young.tombstones_dropped == 0
    assert any(r[3] is None for r in plog.iter_records() if r[0] < active_base)
    old = compact(plog, now=1_000_000 + 300 + DAY + 1)
    assert old.tombstones_dropped > 0
    want = expected_after(records, active_base, drop_tombstones=True)
    assert list(plog.iter_records()) == want
    assert not any(r[3] is None for r in plog.iter_records() if r[0] < active_base)
    assert state(plog.iter_records()) == state(records)
    plog.validate_all()
    plog.close()


def test_compaction_is_idempotent_and_a_second_pass_changes_nothing(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", CFG)
    write_keyed(plog, 200, tombstone_rate=0)
    compact(plog, now=0)
    files = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    again = compact(plog, now=0)
    assert again.groups_cleaned == 0
    assert {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()} == files
    plog.close()


def test_keyless_control_and_uncleanable_batches_survive(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=600, cleanup_policy="compact"))
    plog.append_records([(None, b"no key", [], 1)])
    control = bytearray(R.build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], 1)], control=True))
    plog.append_batch(bytes(control))
    # Batches whose keys cannot be read are kept whole: one claims zstd but its payload is not zstd
    # (it does not decompress), one names a codec id no library has.
    for codec in (R.COMPRESSION_ZSTD, 5):
        unreadable = bytearray(R.build_batch([(b"k", b"old-but-unreadable", [], 1)]))
        unreadable[R.ATTRIBUTES_OFFSET + 1] |= codec
        unreadable[17:21] = R.compute_crc(unreadable, 0, len(unreadable)).to_bytes(4, "big")
        plog.append_batch(bytes(unreadable))
    for i in range(30):
        plog.append_records([(b"k", b"v%d" % i + b"x" * 40, [], 2 + i)])
    compact(plog, now=0)
    batches = list(plog.iter_batches())
    assert any(b.is_control for b in batches)
    assert {R.COMPRESSION_ZSTD, 5} <= {b.compression for b in batches}
    assert batches[0].records_kv() == [(0, 1, None, b"no key")]
    plog.validate_all()
    plog.close()


def _swap_scenario(path):
    """A log whose next compaction's first group merges several (already cleaned) segments."""
    plog = PartitionLog.open(path, CFG)
    write_keyed(plog, 150, keys=100, seed=3)
    compact(plog, now=1_000_000)
    records = list(plog.iter_records())
    more = write_keyed(plog, 60, keys=100, seed=4, ts0=2_000_000)
    return plog, records + more


def _crash_points(tmp_path) -> tuple[list[str], list]:
    """Every hook point of the first swap, found by a dry run on an identical log, and what the
    log holds once that swap is complete."""
    seen: list[str] = []
    after_first: list = []

    def hook(name):
        if name == "deleted_removed" and not after_first:
            after_first.extend(plog.iter_records())
        seen.append(name)

    plog, records = _swap_scenario(tmp_path / "dry-run")
    compact(plog, now=2_000_000, crash_hook=hook)
    plog.close()
    first = seen[: seen.index("deleted_removed") + 1]
    assert set(SWAP_STEPS) <= set(first)
    retired = [p for p in first if p.endswith(".deleted")]
    assert len(retired) >= 9  # a group of several segments
    assert len(after_first) < len(records)
    # Retiring old segments repeats one pattern; its first and last renames stand for the rest.
    return [p for p in first if p not in retired[2:-1]], after_first


def test_crash_at_every_point_of_a_swap_leaves_a_complete_log(tmp_path):
    class Crash(Exception):
        pass

    points, after_first_swap = _crash_points(tmp_path)
    commit_at = points.index(f"renamed:{0:020d}.log.swap")
    assert 0 < commit_at < len(points) - 1
    for n, point in enumerate(points):

        def hook(name, point=point):
            if name == point:
                raise Crash(name)

        path = tmp_path / f"__consumer_offsets-{n}"
        plog, records = _swap_scenario(path)
        active_base = plog.active_segment.base_offset
        compacted = expected_after(records, active_base, drop_tombstones=False)
        with pytest.raises(Crash):
            compact(plog, now=2_000_000, crash_hook=hook)
        plog.abandon()  # the process dies here

        reopened = PartitionLog.open(path, CFG)
        got = list(reopened.iter_records())
        reopened.validate_all()
        # The group is either fully old or fully new; in any case no record that matters is lost.
        assert state(got) == state(records), point
        assert set(compacted) <= set(got) <= set(records), point
        assert [r[0] for r in got] == sorted(r[0] for r in got)
        assert reopened.log_end_offset == records[-1][0] + 1
        names = [p.name for p in path.iterdir()]
        assert not [x for x in names if x.endswith((".cleaned", ".swap", ".deleted"))], point
        # The rename of the cleaned log to X.log.swap is the commit point of a swap.
        if n >= commit_at:
            assert got == after_first_swap, point  # recovery finished the swap
        else:
            assert got == records, point  # died before the commit point: the old segments stand
        # And a later compaction finishes the job.
        compact(reopened, now=2_000_000)
        assert list(reopened.iter_records()) == compacted
        assert records_via_kafka_python(path) == compacted
        reopened.close()


def test_run_cleanup_applies_the_topic_policy(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", CFG)
    write_keyed(plog, 200)
    before = plog.size_in_bytes
    run_cleanup(plog, now=0)
    assert plog.size_in_bytes < before
    plog.close()
    delete_cfg = small_config(segment_bytes=2500, retention_ms=10)
    plog = PartitionLog.open(tmp_path / "t-1", delete_cfg)
    write_keyed(plog, 200)
    assert run_cleanup(plog, now=10**12) > 0
    assert plog.log_start_offset == plog.log_end_offset
    plog.close()


def test_truncating_back_into_compacted_segments_survives_a_crash(tmp_path):
    path = tmp_path / "t-0"
    plog = PartitionLog.open(path, CFG)
    write_keyed(plog, 300)
    compact(plog, now=0)
    by_segment = [
        [v for v in plog.iter_batches(s.base_offset) if v.base_offset < s.read_next_offset()]
        for s in plog.segments[:-1]
    ]
    batches = max(by_segment, key=len)
    assert len(batches) >= 2 and any(v.record_count <= v.last_offset_delta for v in batches)  # sparse
    target = batches[-1].base_offset  # drop the last batch of a compacted (sparse) segment
    keep = [r for r in plog.iter_records() if r[0] < target]
    plog.truncate_to(target)
    assert list(plog.iter_records()) == keep
    leo = plog.log_end_offset
    plog.append_records([(b"group-new", b"v", [], 5)])
    plog.abandon()
    reopened = PartitionLog.open(path, CFG)
    assert list(reopened.iter_records()) == [*keep, (leo, 5, b"group-new", b"v")]
    reopened.validate_all()
    reopened.close()


def test_the_cleaner_cleans_a_log_only_when_enough_of_it_is_dirty(tmp_path):
    """Kafka's LogCleanerManager: the cleaner remembers how far it cleaned and picks a log again only
    when its dirty part is at least min.cleanable.dirty.ratio (0.5) of its inactive bytes, so a log
    with nothing new is not read again on every pass (every log.cleaner.backoff.ms)."""
    plog = PartitionLog.open(tmp_path / "t-0", CFG)
    cleaner = Cleaner()
    assert cleaner.min_dirty_ratio == 0.5
    assert cleaner.clean(plog, now=0) is None  # one (active) segment: nothing to clean
    write_keyed(plog, 150, keys=10, seed=1, tombstone_rate=0)
    assert cleaner.dirty_ratio(plog) == 1.0  # never cleaned since the start
    first = cleaner.clean(plog, now=0)
    assert first is not None and first.records_dropped > 0
    assert cleaner.dirty_ratio(plog) == 0.0
    assert cleaner.clean(plog, now=0) is None  # nothing new: not read again
    clean = [(s.base_offset, s.size) for s in plog.segments[:-1]]
    n = 0
    while len(plog.segments) - 1 == len(clean):  # until one more segment is inactive
        write_keyed(plog, 1, keys=10, seed=100 + n, tombstone_rate=0)
        n += 1
    dirty = sum(s.size for s in plog.segments[:-1]) - sum(size for _, size in clean)
    ratio = dirty / (dirty + sum(size for _, size in clean))
    assert cleaner.dirty_ratio(plog) == pytest.approx(ratio)
    cleaner.min_dirty_ratio = ratio + 0.01
    assert cleaner.clean(plog, now=0) is None  # some dirt, not enough
    cleaner.min_dirty_ratio = ratio
    assert cleaner.clean(plog, now=0) is not None
    cleaner.forget(plog)
    assert cleaner.dirty_ratio(plog) == 1.0
    plog.close()
