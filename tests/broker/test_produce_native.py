"""Produce's compiled steps (``broker/data_plane/_produce.c``, issue 26 and 29 item 4) against the
Python path they stand in for, which stays the reference: the request body as the generic decoder
reads it, each batch's header checks as ``batch_checks.check_batch`` decides them, the transactional
test as ``_has_transactional_batch``, the answer as ``produce_wire.encode_answer`` packs it. Random
and truncated bytes must give the same outcome (the C code hands what it does not take to Python)
and never crash it."""

from __future__ import annotations

import os
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from groupd.broker.data_plane import produce_wire
from groupd.broker.data_plane.batch_checks import check_batch
from groupd.broker.data_plane.produce import _has_transactional_batch
from groupd.protocol.messages import API_BY_NAME
from groupd.storage import LogConfig
from groupd.storage import records as rec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PRODUCE = API_BY_NAME["Produce"]
native = produce_wire.native
needs_native = pytest.mark.skipif(native is None, reason="groupd.broker.data_plane._produce is not built")

VERSIONS = st.integers(3, 12)
SLOTS = [s for s in rec.BatchView.__slots__]


def test_the_module_is_built_here() -> None:
    # the C path is what the benches measure: a build that lost it must fail here, not go slow
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        pytest.skip("GROUPD_NO_NATIVE=1")
    assert native is not None
    assert produce_wire.parse_body_for(9) is not None
    assert produce_wire.parse_body_for(2) is None


# --- the request body -------------------------------------------------------------------------

PARTITION = st.fixed_dictionaries(
    {"index": st.integers(-(2**31), 2**31 - 1), "records": st.none() | st.binary(max_size=80)}
)
TOPIC = st.fixed_dictionaries({"name": st.text(max_size=20), "partition_data": st.lists(PARTITION, max_size=3)})
BODY = st.fixed_dictionaries(
    {
        "transactional_id": st.none() | st.text(max_size=12),
        "acks": st.integers(-(2**15), 2**15 - 1),
        "timeout_ms": st.integers(-(2**31), 2**31 - 1),
        "topic_data": st.lists(TOPIC, max_size=3),
    }
)


def _both(version: int, frame: bytes, pos: int) -> tuple[Any, Any]:
    """(generic outcome, C outcome): a value or the exception's type."""
    generic = PRODUCE.request.codec(version).parse_at
    fast = produce_wire.parse_body_for(version)
    assert fast is not None
    out = []
    for fn in (generic, fast):
        try:
            out.append(fn(frame, pos))
        except Exception as exc:  # the same refusal either way
            out.append(type(exc))
    return out[0], out[1]


@needs_native
@settings(max_examples=300, deadline=None)
@given(version=VERSIONS, body=BODY, prefix=st.binary(max_size=3))
def test_parse_body_reads_what_the_generic_decoder_reads(version: int, body: dict, prefix: bytes) -> None:
    frame = prefix + PRODUCE.request.codec(version).encode(body)
    generic, fast = _both(version, frame, len(prefix))
    assert fast == generic
    assert fast[0] == body
    assert list(fast[0]) == list(generic[0])  # the same keys in the same order


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=VERSIONS, body=BODY, data=st.data())
def test_parse_body_of_damaged_bytes_answers_as_the_generic_decoder(version: int, body: dict, data: Any) -> None:
    frame = bytearray(PRODUCE.request.codec(version).encode(body))
    action = data.draw(st.sampled_from(["truncate", "flip", "append"]))
    if action == "truncate":
        frame = frame[: data.draw(st.integers(0, len(frame)))]
    elif action == "flip" and frame:
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    else:
        frame += data.draw(st.binary(min_size=1, max_size=8))
    generic, fast = _both(version, bytes(frame), 0)
    assert fast == generic


@needs_native
@settings(max_examples=500, deadline=None)
@given(version=VERSIONS, frame=st.binary(max_size=120), pos=st.integers(0, 130))
def test_parse_body_of_random_bytes_never_crashes(version: int, frame: bytes, pos: int) -> None:
    generic, fast = _both(version, frame, min(pos, len(frame)))
    assert fast == generic


# --- a batch's header checks ------------------------------------------------------------------

TOPIC_OBJ = SimpleNamespace(name="t", configs={})


def _batch(draw: Any) -> bytes:
    n = draw(st.integers(1, 5))
    pid = draw(st.sampled_from([-1, 0, 7, 2**40]))
    records = [(b"k%d" % i, b"v" * draw(st.integers(0, 30)), (), 1_700_000_000_000 + i) for i in range(n)]
    raw = rec.build_batch(
        records,
        producer_id=pid,
        producer_epoch=draw(st.sampled_from([-1, 0, 3])),
        base_sequence=draw(st.sampled_from([-1, 0, 5, 2**31 - 1])),
        transactional=draw(st.booleans()),
    )
    return raw


@st.composite
def batches(draw: Any) -> bytes:
    raw = bytearray(_batch(draw))
    action = draw(st.sampled_from(["none", "field", "flip", "truncate", "append", "recrc"]))
    if action == "field":
        # a header field changed and the CRC made right again: the checks after the CRC's
        off, fmt = draw(
            st.sampled_from(
                [(0, ">q"), (8, ">i"), (16, ">b"), (21, ">h"), (23, ">i"), (43, ">q"), (53, ">i"), (57, ">i")]
            )
        )
        size = struct.calcsize(fmt)
        lo, hi = -(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1
        struct.pack_into(fmt, raw, off, draw(st.sampled_from([0, 1, -1, 2, 4, 5, 0x20, 0x10, lo, hi])))
        struct.pack_into(">I", raw, 17, rec.compute_crc(raw, 0, len(raw)))
    elif action == "flip":
        i = draw(st.integers(0, len(raw) - 1))
        raw[i] ^= draw(st.integers(1, 255))
    elif action == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif action == "append":
        raw += draw(st.binary(min_size=1, max_size=8))
    elif action == "recrc":
        struct.pack_into(">I", raw, 17, draw(st.integers(0, 2**32 - 1)))
    return bytes(raw)


def _python_check(raw: bytes | None, max_bytes: int, version: int) -> Any:
    return check_batch(TOPIC_OBJ, LogConfig(max_message_bytes=max_bytes), 0, raw, version, 0)  # type: ignore[arg-type]


@needs_native
@settings(max_examples=600, deadline=None)
@given(raw=batches(), max_bytes=st.sampled_from([100, 1_048_588]), version=VERSIONS)
def test_check_batch_decides_as_the_python_checks(raw: bytes, max_bytes: int, version: int) -> None:
    view = native.check_batch(raw, max_bytes, version)  # type: ignore[union-attr]
    expected = _python_check(raw, max_bytes, version)
    if isinstance(expected, dict):
        assert view is None, expected
        return
    assert view is not None
    assert type(view) is rec.BatchView
    for slot in SLOTS:
        assert getattr(view, slot) == getattr(expected, slot), slot
    assert view.buffer is raw


@needs_native
@settings(max_examples=500, deadline=None)
@given(raw=st.binary(max_size=200), max_bytes=st.integers(0, 2**70), version=VERSIONS)
def test_check_batch_of_random_bytes_never_crashes(raw: bytes, max_bytes: int, version: int) -> None:
    view = native.check_batch(raw, max_bytes, version)  # type: ignore[union-attr]
    assert (view is None) == isinstance(_python_check(raw, max_bytes, version), dict)


@needs_native
def test_check_batch_declines_what_is_not_bytes() -> None:
    raw = rec.build_batch([(b"k", b"v", (), 1)])
    assert native.check_batch(raw, 1 << 20, 9) is not None  # type: ignore[union-attr]
    released = memoryview(raw)
    released.release()
    strided = memoryview(raw + raw)[::2]
    for other in (None, bytearray(raw), memoryview(bytearray(raw)), released, strided, b"", "x" * 70):
        assert native.check_batch(other, 1 << 20, 9) is None  # type: ignore[union-attr]
    # limits and versions outside C's integers: a limit past any batch passes, the rest declines
    assert native.check_batch(raw, 2**80, 9) is not None  # type: ignore[union-attr]
    for max_bytes, version in ((-(2**80), 9), (1 << 20, 2**80), (1 << 20, -(2**80)), ("x", 9), (1 << 20, None)):
        assert native.check_batch(raw, max_bytes, version) is None  # type: ignore[union-attr]


@needs_native
@settings(max_examples=200, deadline=None)
@given(raw=batches(), before=st.binary(max_size=40), after=st.binary(max_size=40), version=VERSIONS)
def test_a_memoryview_batch_is_read_where_it_lies(raw: bytes, before: bytes, after: bytes, version: int) -> None:
    # parse_body hands large records as a memoryview of the frame: the view then points into the
    # frame's bytes, from the batch's position, with the fields of the batch read on its own
    frame = before + raw + after
    mv = memoryview(frame)[len(before) : len(before) + len(raw)]
    view = native.check_batch(mv, 1 << 20, version)  # type: ignore[union-attr]
    expected = _python_check(mv, 1 << 20, version)
    assert (view is None) == isinstance(expected, dict)
    assert (view is None) == (native.check_batch(raw, 1 << 20, version) is None)  # type: ignore[union-attr]
    if view is not None:
        assert view.buffer is frame
        assert view.position == len(before)
        assert bytes(view.raw) == raw
        for slot in SLOTS:
            if slot not in ("buffer", "position"):
                assert getattr(view, slot) == getattr(expected, slot), slot


@needs_native
def test_large_records_are_a_view_of_the_frame() -> None:
    big = rec.build_batch([(b"k", b"v" * 5000, (), 1)])
    small = rec.build_batch([(b"k", b"v", (), 1)])
    for version in (3, 8, 9, 12):
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": big}, {"index": 1, "records": small}]}
            ],
        }
        frame = PRODUCE.request.codec(version).encode(body)
        parsed, _ = produce_wire.parse_body_for(version)(frame, 0)  # type: ignore[misc]
        big_out, small_out = (p["records"] for p in parsed["topic_data"][0]["partition_data"])
        assert type(big_out) is memoryview and big_out.obj is frame and big_out == big
        assert type(small_out) is bytes and small_out == small
        assert parsed == body


# --- transactional batches and the answer -----------------------------------------------------


@needs_native
@settings(max_examples=300, deadline=None)
@given(
    topic_data=st.lists(
        st.fixed_dictionaries(
            {
                "name": st.just("t"),
                "partition_data": st.none()
                | st.lists(
                    st.fixed_dictionaries(
                        {"index": st.just(0), "records": st.none() | batches() | st.binary(max_size=70)}
                    ),
                    max_size=3,
                ),
            }
        ),
        max_size=3,
    )
)
def test_any_transactional_agrees(topic_data: list) -> None:
    assert native.any_transactional(topic_data) == _has_transactional_batch(topic_data)  # type: ignore[union-attr]
    # and with each batch a memoryview of a larger frame (parse_body's large records)
    for td in topic_data:
        for pd in td["partition_data"] or ():
            if pd["records"] is not None:
                pd["records"] = memoryview(b"xx" + pd["records"])[2:]
    assert native.any_transactional(topic_data) == _has_transactional_batch(topic_data)  # type: ignore[union-attr]


SUCCESS = st.tuples(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
)


@needs_native
@settings(max_examples=300, deadline=None)
@given(
    version=VERSIONS,
    answers=st.lists(st.tuples(st.text(max_size=200), st.lists(SUCCESS, max_size=5)), max_size=4),
)
def test_encode_answer_writes_the_python_packers_bytes(version: int, answers: list) -> None:
    assert native.encode_answer(version, answers) == produce_wire.encode_answer(version, answers)  # type: ignore[union-attr]


@needs_native
def test_encode_answer_declines_what_it_does_not_pack() -> None:
    enc = native.encode_answer  # type: ignore[union-attr]
    assert enc(2, []) is None
    assert enc(9, [("t", [(0, 1, 2)])]) is None
    assert enc(9, [("t", [(2**31, 0, 0, 0)])]) is None
    assert enc(9, [("t", [(0, 2**63, 0, 0)])]) is None
    assert enc(9, [("\udc80", [])]) is None
    assert enc(9, (("t", []),)) is None
