"""``storage/_native.c`` (issue 26, the start-up replay): built here, equal to the pure-Python code
it shadows value for value, and safe on any bytes.

- ``decode_records`` is ``records._decode_into(..., full=False)`` for what it covers; for the rest it
  declines (False, the output list untouched) and the Python decoder decides, so together they are
  the Python decoder on every input (checked on valid batches, damaged ones and random bytes);
- ``fold_commits`` is ``coordinator/offsets.py``'s ``replay_plain_commits``: the state the load
  leaves (fast path as far as it goes, the generic decode for the rest) is the same with either;
- neither ever crashes or reads out of bounds on random or truncated input (fuzzed below).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from groupd.coordinator.offsets import replay_plain_commits
from groupd.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from groupd.coordinator.serde import _DECODED_KEYS, RecordDecodeError, decode_record, encode_record
from groupd.storage import records as rec
from groupd.storage.errors import CorruptRecordError
from groupd.storage.native import native
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.skipif(
    native is None and os.environ.get("GROUPD_NO_NATIVE") == "1", reason="GROUPD_NO_NATIVE=1"
)

RECORD = st.tuples(
    st.none() | st.binary(max_size=200),
    st.none() | st.binary(max_size=200),
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=20)), max_size=2).map(tuple),
    st.integers(0, 2**45),
)


def test_the_extension_is_built_in_this_environment() -> None:
    """`pip install -e .` (make .venv/.dev) and the wheel build it; a missing module would silently
    cost the replay 4x, so its absence fails here."""
    import importlib

    assert native is not None
    assert native is importlib.import_module("groupd.storage._native")
    assert rec._native_decode is native.decode_records


def test_groupd_no_native_turns_it_off() -> None:
    code = (
        "from groupd.storage import records as r; from groupd.coordinator import offsets as o; "
        "print(r._native_decode, o._fold_commits, r._native_frames)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "GROUPD_NO_NATIVE": "1"}, capture_output=True, text=True
    )
    assert out.stdout.split() == ["None", "None", "None"], out.stderr


# --- decode_records ------------------------------------------------------------------------------------


def _python(data: bytes, pos: int, end: int, count: int, base: int, ts: int, fixed: int | None) -> list | str:
    out: list = []
    try:
        rec._decode_into(out, data, pos, end, count, base, ts, fixed, False)
    except CorruptRecordError:
        return "corrupt"
    return out


def _both(data: bytes, pos: int, end: int, count: int, base: int, ts: int, fixed: int | None) -> None:
    """The C path then the Python one (as decode_window calls them) equals the Python one alone."""
    sentinel = ("before",)
    out: list = [sentinel]
    took = native.decode_records(out, data, pos, end, count, base, ts, fixed)
    expected = _python(data, pos, end, count, base, ts, fixed)
    if took:
        assert out == [sentinel, *expected]
        assert all(type(r) is tuple and len(r) == 4 for r in out[1:])
    else:
        assert out == [sentinel]  # declined: untouched, the Python decoder decides


def _body(batch: bytes) -> tuple[int, int, int, int, int, int | None]:
    """(pos, end, count, base offset, base timestamp, fixed timestamp) of a batch's records."""
    h = rec.HEADER.unpack_from(batch, 0)
    fixed = h[8] if h[5] & rec.TIMESTAMP_TYPE_FLAG else None
    return rec.HEADER_SIZE, len(batch), h[12], h[0], h[7], fixed


@settings(max_examples=300, deadline=None)
@given(
    st.lists(RECORD, min_size=1, max_size=20),
    st.integers(0, 2**40),
    st.sampled_from([rec.TIMESTAMP_CREATE_TIME, rec.TIMESTAMP_LOG_APPEND_TIME]),
)
def test_decode_records_equals_the_python_decoder_on_valid_batches(records: list, base: int, ts_type: int) -> None:
    batch = rec.build_batch(records, base_offset=base, timestamp_type=ts_type)
    pos, end, count, b, ts, fixed = _body(batch)
    out: list = []
    took = native.decode_records(out, batch, pos, end, count, b, ts, fixed)
    assert took == all(not r[2] for r in records)  # records with headers are the Python decoder's
    if took:
        assert out == _python(batch, pos, end, count, b, ts, fixed)
    _both(batch, pos, end, count, b, ts, fixed)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, min_size=1, max_size=6), st.data())
def test_decode_records_on_damaged_bodies_declines_or_agrees(records: list, data: st.DataObject) -> None:
    """Flipped and dropped bytes, a wrong count, a cut end: never a crash, the same records or a
    decline."""
    batch = bytearray(rec.build_batch(records))
    pos, _end, count, b, ts, fixed = _body(bytes(batch))
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(pos, len(batch) - 1))
        batch[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(pos, len(batch)))
    count = data.draw(st.sampled_from([count, count - 1, count + 1, 0, 2**31 - 1]))
    raw = bytes(batch)
    _both(raw, pos, cut, count, b, ts, fixed)
    _both(raw[:cut], pos, cut, count, b, ts, fixed)


@settings(max_examples=1000, deadline=None)
@given(
    st.binary(max_size=120),
    st.integers(-3, 130),
    st.integers(-3, 130),
    st.integers(-1, 40),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)
def test_decode_records_on_random_bytes_never_crashes(
    data: bytes, pos: int, end: int, count: int, base: int, ts: int, fixed: int | None
) -> None:
    out: list = []
    took = native.decode_records(out, data, pos, end, count, base, ts, fixed)
    assert took in (True, False)
    if took:
        assert out == _python(data, pos, end, count, base, ts, fixed)
    else:
        assert out == []


@pytest.mark.parametrize(
    "args",
    [
        ([], b"", 0, 0, 0, 2**64, 0, None),  # offsets beyond int64: declined, not wrapped
        ([], b"\x02", 0, 1, 1, 0, 0, None),
        ([], bytearray(b"\x00"), 0, 1, 0, 0, 0, None),  # not bytes: the Python reader's
        ((), b"", 0, 0, 0, 0, 0, None),
    ],
)
def test_decode_records_declines_what_it_does_not_cover(args: tuple) -> None:
    assert native.decode_records(*args) is False


def test_decode_records_declines_an_offset_that_would_overflow() -> None:
    batch = rec.build_batch([(b"k", b"v", (), 0), (b"k", b"v", (), 0)], base_offset=2**63 - 1)
    pos, end, count, b, ts, fixed = _body(batch)
    out: list = []
    assert native.decode_records(out, batch, pos, end, count, b, ts, fixed) is False
    assert _python(batch, pos, end, count, b, ts, fixed)[1][0] == 2**63  # Python ints do not wrap


def test_decode_records_rejects_wrong_arity() -> None:
    with pytest.raises(TypeError):
        native.decode_records([], b"")


# --- fold_commits --------------------------------------------------------------------------------------

GROUPS = st.sampled_from(["g1", "g2", "gé", ""])
KEYS = st.builds(OffsetCommitKey, GROUPS, st.sampled_from(["t", "u"]), st.integers(-1, 3))
VALUES = st.one_of(
    st.none(),
    st.builds(
        OffsetCommitValue,
        st.integers(-1, 2**62),
        st.integers(-(2**31), 2**31 - 1),
        st.just(""),
        st.integers(-1, 2**62),
        st.just(-1),
    ),
    st.builds(
        OffsetCommitValue, st.integers(0, 99), st.integers(-1, 5), st.text(max_size=3), st.integers(0, 9), st.just(-1)
    ),
    st.builds(OffsetCommitValue, st.integers(0, 99), st.just(-1), st.just(""), st.integers(0, 9), st.integers(10, 99)),
)
GROUP_RECORD = st.builds(lambda g: (GroupMetadataKey(g), GroupMetadataValue("consumer", 1, None, None, 0, ())), GROUPS)
ENCODED = st.one_of(st.tuples(KEYS, VALUES), GROUP_RECORD).map(encode_record)
# bytes a damaged log (with matching CRCs) could hold, among the well-formed ones
GARBAGE = st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(min_size=20, max_size=26))
CHUNKS = st.lists(st.one_of(ENCODED, ENCODED, ENCODED, GARBAGE), max_size=40)


def _fold(chunk: list, fast: object, offsets: dict) -> dict[str, dict]:
    """What the load does with a chunk: the fast path as far as it goes, then one record decoded
    and replayed (a commit or tombstone into ``offsets``; others skipped), and again."""
    i = 0
    while i < len(chunk):
        j = fast(offsets, chunk, i)
        assert i <= j <= len(chunk)
        if j == len(chunk):
            break
        try:  # a None key is the shell's (a transaction delimiter): skipped here
            k, v = decode_record(chunk[j][2], chunk[j][3]) if chunk[j][2] is not None else (None, None)
        except RecordDecodeError:
            k = None
        if type(k) is OffsetCommitKey:
            if v is None:
                g = offsets.get(k.group)
                if g is not None:
                    g.pop((k.topic, k.partition), None)
                    if not g:
                        del offsets[k.group]
            else:
                offsets.setdefault(k.group, {})[(k.topic, k.partition)] = v
        i = j + 1
    return offsets


def _c(cache_max: int) -> object:
    return lambda offsets, chunk, i: native.fold_commits(
        offsets, chunk, i, _DECODED_KEYS, cache_max, OffsetCommitKey, OffsetCommitValue
    )


@settings(max_examples=400, deadline=None)
@given(CHUNKS, st.sampled_from([1, 3, 1 << 16]), st.booleans())
def test_fold_commits_leaves_the_state_replay_plain_commits_leaves(pairs: list, cache_max: int, warm: bool) -> None:
    chunk = [(i, 0, k, v) for i, (k, v) in enumerate(pairs)]
    if not warm:
        _DECODED_KEYS.clear()
    seed = {"g1": {("old", 0): OffsetCommitValue(1, -1, "", 1, -1)}}
    py = _fold(chunk, replay_plain_commits, {g: dict(v) for g, v in seed.items()})
    c = _fold(chunk, _c(cache_max), {g: dict(v) for g, v in seed.items()})
    assert c == py
    for g in c:
        for tp, v in c[g].items():
            assert type(v) is OffsetCommitValue and type(tp) is tuple and v == py[g][tp]
            assert type(v.metadata) is str
    assert len(_DECODED_KEYS) <= max(cache_max, 1 << 16)
    assert all(type(k) is OffsetCommitKey for k in _DECODED_KEYS.values())


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.integers(), st.integers(), st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=30)
            ),
            st.tuples(
                st.integers(), st.integers(), st.binary(min_size=8, max_size=40), st.binary(min_size=24, max_size=24)
            ),
            st.tuples(st.integers()),
            st.none(),
            st.builds(
                lambda b: (0, 0, b"\x00\x01\x00\x01g\x00\x01t" + b, b"\x00\x03" + bytes(22)), st.binary(max_size=6)
            ),
        ),
        max_size=30,
    )
)
def test_fold_commits_on_random_records_never_crashes(chunk: list) -> None:
    offsets: dict = {}
    j = native.fold_commits(offsets, chunk, 0, _DECODED_KEYS, 1 << 16, OffsetCommitKey, OffsetCommitValue)
    assert 0 <= j <= len(chunk)
    # what it covered, the Python fast path covers too, into the same state
    py: dict = {}
    assert replay_plain_commits(py, chunk[:j], 0) == j
    assert offsets == py


def test_fold_commits_rejects_what_is_not_its_arguments() -> None:
    with pytest.raises(TypeError):
        native.fold_commits({}, [], 0, {}, 1, OffsetCommitKey, dict)
    with pytest.raises(TypeError):
        native.fold_commits([], [], 0, {}, 1, OffsetCommitKey, OffsetCommitValue)
    with pytest.raises(TypeError):
        native.fold_commits({}, [])


# --- frame_records (Produce's framing walk) -------------------------------------------------------


def _python_frames(data: bytes, pos: int, end: int, count: int) -> bool:
    """records.check_record_frames without the extension: does the Python walk accept?"""
    saved = rec._native_frames
    rec._native_frames = None
    try:
        rec.check_record_frames(data, pos, end, count)
        return True
    except CorruptRecordError:
        return False
    finally:
        rec._native_frames = saved


def test_check_record_frames_uses_the_extension() -> None:
    assert rec._native_frames is native.frame_records


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=30))
def test_frame_records_takes_every_valid_batch(records: list) -> None:
    batch = rec.build_batch(records)
    count = struct.unpack_from(">i", batch, 57)[0]
    assert native.frame_records(batch, rec.HEADER_SIZE, len(batch), count) is True
    assert _python_frames(batch, rec.HEADER_SIZE, len(batch), count)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, min_size=1, max_size=6), st.data())
def test_frame_records_on_damaged_bodies_accepts_only_what_python_accepts(records: list, data: st.DataObject) -> None:
    """Flipped bytes (a length byte among them, often), a wrong count, a cut end: True only where
    the Python walk accepts; never a crash."""
    batch = bytearray(rec.build_batch(records))
    count = struct.unpack_from(">i", batch, 57)[0]
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(rec.HEADER_SIZE, len(batch) - 1))
        batch[i] = data.draw(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0x81, 0xFF]) | st.integers(0, 255))
    end = data.draw(st.integers(rec.HEADER_SIZE, len(batch)))
    count = data.draw(st.sampled_from([count, count - 1, count + 1, 0, -1, 2**31 - 1]))
    raw = bytes(batch)
    for body in (raw, raw[:end]):
        took = native.frame_records(body, rec.HEADER_SIZE, end, count)
        assert took in (True, False)
        if took:
            assert _python_frames(body, rec.HEADER_SIZE, end, count)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=80), st.integers(-3, 90), st.integers(-3, 90), st.integers(-2, 40))
def test_frame_records_on_random_bytes_never_crashes(data: bytes, pos: int, end: int, count: int) -> None:
    took = native.frame_records(data, pos, end, count)
    assert took in (True, False)
    if took:
        assert _python_frames(data, pos, end, count)


@pytest.mark.parametrize(
    "args",
    [
        (b"\x02\x00", 0, 2, 1),  # one record of one byte: taken
        (b"\x0b\x00", 0, 2, 1),  # a negative length
        (b"\x00", 0, 1, 1),  # a zero length
        (b"\x82\x80\x80\x80\x80\x00", 0, 6, 1),  # a varint longer than 5 bytes: Python's to judge
        (b"\x02\x00", 0, 2, 2**63),  # a count beyond the bytes
        (b"\x02\x00", 2**63, 2, 1),  # positions beyond Py_ssize_t
    ],
)
def test_frame_records_edges(args: tuple) -> None:
    took = native.frame_records(*args)
    assert took is (args == (b"\x02\x00", 0, 2, 1))
    if not took and isinstance(args[1], int) and args[1] < 2**62 and args[3] < 2**62:
        _python_frames(*args)  # the Python walk words it (or, for the long varint, may accept)


def test_frame_records_rejects_wrong_arguments() -> None:
    with pytest.raises(TypeError):
        native.frame_records(b"", 0, 0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        native.frame_records(bytearray(b"\x02\x00"), 0, 2, 1)
