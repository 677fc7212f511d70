"""A damaged batch at every position of a segmented log (issue 29 item 1), read every way.

A batch whose bytes were zeroed (a lost write), whose payload or length field was damaged, or a
segment cut short in the middle of a batch, after a clean shutdown or after a crash whose
recovery point lies past the damage (``--fsync always``): every read steps over the damaged range
to the next intact batch. The valid batches before and after it are served by ``read`` (what
Fetch uses), ``iter_batches`` (the producer-state load) and ``iter_records`` (replays), at every
fetch offset; the range is reported once; appends after it are readable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from groupd.storage import records as R
from groupd.storage.log import PartitionLog
from storage_helpers import fill, small_config
from structlog.testing import capture_logs

CFG = small_config(segment_bytes=1500, index_interval_bytes=150)
N_BATCHES = 24
KINDS = ("zeroed", "crc", "length", "cut")


def _layout(path: Path) -> list[tuple[Path, int, int, int, int]]:
    """(segment file, start, end, base offset, last offset) of every batch, in log order."""
    out = []
    for seg in sorted(path.glob("*.log")):
        out += [
            (seg, v.position, v.position + v.size, v.base_offset, v.last_offset)
            for v in R.iter_batches(seg.read_bytes())
        ]
    return out


def _damage(kind: str, seg: Path, start: int, end: int) -> None:
    data = bytearray(seg.read_bytes())
    if kind == "zeroed":
        data[start:end] = bytes(end - start)
    elif kind == "crc":
        data[end - 1] ^= 0x10
    elif kind == "length":
        data[start + 8 + 2] ^= 0x04  # batchLength, which the CRC does not cover
    else:  # the file ends in the middle of this batch
        del data[(start + end) // 2 :]
    seg.write_bytes(bytes(data))


def _consume(plog: PartitionLog, max_bytes: int) -> list[tuple[int, bytes, bytes]]:
    """What a consumer fetching from offset 0 with `max_bytes` per Fetch ends up with."""
    got: list[tuple[int, bytes, bytes]] = []
    offset = 0
    while offset < plog.log_end_offset:
        data = plog.read(offset, max_bytes)
        if not data:
            break  # only damage is left below the log end: the consumer waits for new records
        for view in R.iter_batches(data, strict=True):
            assert view.crc_ok()
            got += [(o, k, v) for o, _t, k, v in view.records_kv() if o >= offset]
            offset = view.last_offset + 1
    return got


def _lost(kind: str, layout: list, i: int, crashed: bool) -> set[int]:
    seg, *_ = layout[i]
    if kind != "cut":
        return set(range(layout[i][3], layout[i][4] + 1))
    # A cut loses the rest of its file; in the active segment after a crash it is the torn tail.
    return {o for s, _a, _b, base, last in layout[i:] if s == seg for o in range(base, last + 1)}


@pytest.mark.parametrize("crashed", [False, True], ids=["clean", "crash"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_batch_position_damaged_the_rest_is_served_and_reported_once(
    tmp_path: Path, kind: str, crashed: bool
) -> None:
    base_dir = tmp_path / "t-0"
    plog = PartitionLog.open(base_dir, CFG)
    records = fill(plog, N_BATCHES)
    plog.close()
    template = {p.name: p.read_bytes() for p in base_dir.iterdir()}
    layout = _layout(base_dir)
    assert len({s for s, *_ in layout}) >= 4  # several segments: damage in old and active ones
    for i in range(len(layout)):
        path = tmp_path / f"case-{i}" / "t-0"
        path.mkdir(parents=True)
        for name, data in template.items():
            (path / name).write_bytes(data)
        if crashed:
            # kill -9 with --fsync always: the recovery point covers every batch; no clean marker.
            (path / ".clean_shutdown").unlink(missing_ok=True)
            for marker in path.glob("*clean*"):
                marker.unlink()
        seg, start, end, _base, _last = layout[i]
        _damage(kind, path / seg.name, start, end)
        lost = _lost(kind, layout, i, crashed)
        want = [(o, k, v) for o, _t, k, v in records if o not in lost]
        with capture_logs() as logs:
            plog = PartitionLog.open(path, CFG)
            active = seg.name == sorted(p.name for p in path.glob("*.log"))[-1]
            if kind == "cut" and active:
                # The file lost data under the recovery point: that tail is gone (checked, cut).
                want = [r for r in want if r[0] < layout[i][3]]
                assert plog.log_end_offset == layout[i][3]
            else:
                assert plog.log_end_offset == records[-1][0] + 1
            for max_bytes in (1, 200, 10**6):
                assert _consume(plog, max_bytes) == want, (i, max_bytes)
            assert [(o, k, v) for o, _t, k, v in plog.iter_records()] == want
            assert [(o, k, v) for o, _t, k, v in plog.iter_records(verify=True)] == want
            views = list(plog.iter_batches())
            assert [o for v in views for o in range(v.base_offset, v.last_offset + 1)] == [r[0] for r in want]
            # A fetch at any offset, the damaged ones included, answers the next intact batch.
            for o in range(plog.log_end_offset):
                data = plog.read(o, 1)
                if data:
                    assert next(R.iter_batches(data)).last_offset >= o
                else:
                    assert all(r[0] < o for r in want)
            more = fill(plog, 3, seed=9)
            assert _consume(plog, 10**6)[-len(more) :] == [(o, k, v) for o, _t, k, v in more]
            plog.close()
        events = [e for e in logs if e["event"] == "storage.batch.corrupt"]
        if kind == "cut" and active:
            assert not events
        else:
            assert len(events) == 1, (i, events)
            (event,) = events
            assert event["log_level"] == "error" and event["position"] == start
            assert event["offset"] == layout[i][3], (i, event)


def test_a_damaged_length_does_not_carry_crash_recovery_past_the_recovery_point(tmp_path: Path) -> None:
    """Below the recovery point CRCs are not checked, so a damaged length could walk recovery
    into the unflushed tail at a byte that is no batch start, and it would cut valid batches
    there. A batch cannot cross the point (it is a batch start): that one is the damage."""
    path = tmp_path / "t-0"
    cfg = small_config(segment_bytes=10**6, index_interval_bytes=150)
    plog = PartitionLog.open(path, cfg)
    records = fill(plog, 10)
    plog.close()
    (seg,) = sorted(path.glob("*.log"))
    _seg, start, end, base, last = _layout(path)[0]
    _damage("length", seg, start, end)  # 1024 bytes longer: past the end of the file for now
    plog = PartitionLog.open(path, cfg)
    records = [r for r in records if r[0] > last] + fill(plog, 30, seed=1)
    plog.flush()  # the recovery point
    records += fill(plog, 1, seed=2)  # acknowledged after it (the point is not moved yet)
    plog.abandon()
    with capture_logs() as logs:
        plog = PartitionLog.open(path, cfg)
        assert [(o, k, v) for o, _t, k, v in plog.iter_records()] == [(o, k, v) for o, _t, k, v in records]
    assert not [e for e in logs if e["event"] == "storage.recovery.truncated"]
    assert [e["offset"] for e in logs if e["event"] == "storage.batch.corrupt"] == [base]
    plog.close()


def test_compaction_steps_over_a_zeroed_batch_instead_of_failing_every_pass(tmp_path: Path) -> None:
    """The cleaner reads segments as the readers do: a range with no batch boundaries left is
    reported once and left out of the cleaned segment (Kafka would mark the partition
    uncleanable: its log then grows for good); the cleaning goes on around it."""
    from groupd.storage import compact

    path = tmp_path / "t-0"
    cfg = small_config(segment_bytes=600, index_interval_bytes=150, cleanup_policy="compact")
    plog = PartitionLog.open(path, cfg)
    for i in range(60):  # keys 0..4 rewritten over and over, across many segments
        plog.append_records([(b"k%d" % (i % 5), b"v%d" % i, [], 1000 + i)])
    plog.close()
    victim = _layout(path)[7]  # in an old segment
    _damage("zeroed", path / victim[0].name, victim[1], victim[2])
    plog = PartitionLog.open(path, cfg)
    with capture_logs() as logs:
        compact(plog)
        latest = {k: v for _o, _t, k, v in plog.iter_records()}
        plog.close()
    assert latest == {b"k%d" % (i % 5): b"v%d" % i for i in range(55, 60)}
    assert [e["offset"] for e in logs if e["event"] == "storage.batch.corrupt"] == [victim[3]]


@pytest.mark.parametrize("where", ["inside", "after"])
def test_truncation_at_or_after_damage_leaves_new_appends_readable(tmp_path: Path, where: str) -> None:
    """A follower's truncation (truncate_to) into or past a damaged range: what is appended
    afterwards at those bytes is new, so it is read, not skipped as damage."""
    path = tmp_path / "t-0"
    cfg = small_config(segment_bytes=10**6, index_interval_bytes=150)
    plog = PartitionLog.open(path, cfg)
    records = fill(plog, 20)
    plog.close()
    layout = _layout(path)
    _seg, start, end, base, last = layout[10]
    _damage("zeroed", path / _seg.name, start, end)
    plog = PartitionLog.open(path, cfg)
    assert [r[0] for r in plog.iter_records()] == [r[0] for r in records if not base <= r[0] <= last]
    cut = base if where == "inside" else last + 3
    # truncate_to removes the whole batch holding `cut`.
    cut_base = next(b for _s, _a, _e, b, la in layout if b <= cut <= la)
    plog.truncate_to(cut)
    assert plog.log_end_offset == cut_base  # the damaged offsets stay a gap when kept
    more = fill(plog, 5, seed=4)
    want = [r for r in records if r[0] < cut_base and not base <= r[0] <= last] + more
    assert [(o, k, v) for o, _t, k, v in plog.iter_records()] == [(o, k, v) for o, _t, k, v in want]
    assert _consume(plog, 150) == [(o, k, v) for o, _t, k, v in want]
    plog.close()
