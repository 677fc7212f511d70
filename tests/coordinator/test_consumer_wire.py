"""A steady ConsumerGroupHeartbeat read and answered without the generic codecs
(``groupd.coordinator.consumer_wire``) against the generic codecs, the reference: the same body for any
bytes (or the same exception), the same answer bytes for any steady answer. The coordinator harness
(``Shell.send``) checks the hot path's answers and their bytes against the generic path's in every
coordinator test that sends a ConsumerGroupHeartbeat."""

from __future__ import annotations

import os
from typing import Any

import pytest
from groupd.coordinator import consumer_wire
from groupd.coordinator.consumer import ConsumerGroupManager
from groupd.coordinator.consumer_wire import parse_body_for, steady_answer
from groupd.protocol.messages import API_BY_NAME
from hypothesis import given, settings
from hypothesis import strategies as st

CGH = API_BY_NAME["ConsumerGroupHeartbeat"]
VERSIONS = range(CGH.min_version, CGH.max_version + 1)

ids = st.one_of(st.text(max_size=140), st.sampled_from(["", "m1", "x" * 126, "y" * 127, "ü" * 63, "ü" * 64]))
maybe = st.one_of(st.none(), st.text(max_size=5))
topics = st.one_of(st.none(), st.lists(st.text(max_size=5), max_size=3))


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    steady = draw(st.booleans())  # half of them in the steady form: ids and epoch only
    body: dict[str, Any] = {
        "group_id": draw(ids),
        "member_id": draw(ids),
        "member_epoch": draw(st.integers(-(2**31), 2**31 - 1)),
        "instance_id": None if steady else draw(maybe),
        "rack_id": None if steady else draw(maybe),
        "rebalance_timeout_ms": -1 if steady else draw(st.sampled_from([-1, 0, 30_000])),
        "subscribed_topic_names": None if steady else draw(topics),
        "subscribed_topic_regex": None if steady else draw(maybe),
        "server_assignor": None if steady else draw(maybe),
        "topic_partitions": None
        if steady
        else draw(st.one_of(st.none(), st.just([{"topic_id": b"\x01" * 16, "partitions": [0, 2]}]))),
    }
    return body


def outcome(parse: Any, frame: bytes, pos: int) -> Any:
    try:
        body, end = parse(frame, pos)
    except Exception as e:  # the generic decoder's exception is the answer to compare
        return type(e)
    return list(body.items()), end


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_has_a_steady_reader(version: int) -> None:
    assert parse_body_for(version) is not None


@settings(max_examples=400, deadline=None)
@given(
    version=st.sampled_from(list(VERSIONS)), body=bodies(), prefix=st.binary(max_size=3), extra=st.binary(max_size=4)
)
def test_the_steady_reader_reads_what_the_generic_decoder_reads(
    version: int, body: dict[str, Any], prefix: bytes, extra: bytes
) -> None:
    if version < 1:
        body.pop("subscribed_topic_regex")
    generic = CGH.request.codec(version).parse_at
    frame = prefix + CGH.request.codec(version).encode(body) + extra
    fast = parse_body_for(version)
    assert fast is not None
    assert outcome(fast, frame, len(prefix)) == outcome(generic, frame, len(prefix))
    # and every truncation of it: the same body or the same exception
    for cut in range(len(prefix), len(frame)):
        assert outcome(fast, frame[:cut], len(prefix)) == outcome(generic, frame[:cut], len(prefix))


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), data=st.binary(max_size=80), pos=st.integers(0, 4))
def test_random_bytes_read_as_the_generic_decoder_reads_them(version: int, data: bytes, pos: int) -> None:
    fast = parse_body_for(version)
    assert fast is not None
    assert outcome(fast, data, pos) == outcome(CGH.request.codec(version).parse_at, data, pos)


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(list(VERSIONS)),
    member_id=ids,
    epoch=st.integers(-(2**31), 2**31 - 1),
    interval=st.integers(0, 2**31 - 1),
)
def test_a_steady_answer_is_encoded_as_the_codec_encodes_it(
    version: int, member_id: str, epoch: int, interval: int
) -> None:
    answer = steady_answer(member_id, epoch, interval)
    # what ConsumerGroupManager answers a steady member without the shell's hook
    assert answer == ConsumerGroupManager.steady_answer(member_id, epoch, interval)
    wire = getattr(answer, "wire_payload", None)
    if len(member_id.encode()) > 126:
        assert wire is None  # a two-byte length: the generic encoder's
    else:
        assert wire == CGH.response.codec(version).encode(dict(answer))


# --- the steady reader in C (coordinator/_native.c) against the Python one --------------------------
needs_c = pytest.mark.skipif(
    consumer_wire._steady_c is None, reason="the C module is not built (or GROUPD_NO_NATIVE=1)"
)


def read(parse: Any, frame: bytes, pos: int) -> Any:
    """``outcome`` with the body's type: the C reader makes a SteadyBody wherever the Python one does."""
    try:
        body, end = parse(frame, pos)
    except Exception as e:
        return type(e)
    return type(body), list(body.items()), end


def test_the_c_steady_reader_is_used_here() -> None:
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        pytest.skip("GROUPD_NO_NATIVE=1")
    assert consumer_wire._steady_c is not None  # make .venv/.dev builds coordinator/_native.c
    assert parse_body_for(1).func is consumer_wire._reader_c  # type: ignore[union-attr]


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    version=st.sampled_from(list(VERSIONS)), body=bodies(), prefix=st.binary(max_size=3), extra=st.binary(max_size=4)
)
def test_the_c_steady_reader_reads_what_the_python_one_reads(
    version: int, body: dict[str, Any], prefix: bytes, extra: bytes
) -> None:
    if version < 1:
        body.pop("subscribed_topic_regex")
    frame = prefix + CGH.request.codec(version).encode(body) + extra
    c, py = parse_body_for(version), parse_body_for(version, native=False)
    for cut in range(len(prefix), len(frame) + 1):
        assert read(c, frame[:cut], len(prefix)) == read(py, frame[:cut], len(prefix))


@needs_c
@settings(max_examples=500, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), data=st.binary(max_size=80), pos=st.integers(-2, 6))
def test_the_c_steady_reader_takes_random_bytes(version: int, data: bytes, pos: int) -> None:
    c, py = parse_body_for(version), parse_body_for(version, native=False)
    if pos >= 0:
        assert read(c, data, pos) == read(py, data, pos)
    steady_c = consumer_wire._steady_c
    for tail in (b"", b"\x00", data[:3]):  # whatever it is handed, an answer or None, never a crash
        out = steady_c(data, pos, tail, {}, consumer_wire.SteadyBody)
        assert out is None or (type(out) is tuple and out[1] <= len(data))
    assert steady_c(bytearray(data), 0, b"\x00", {}, dict) is None
    with pytest.raises(TypeError):
        steady_c(data, 0)


# --- the bodies the C reader holds per member (steady_consumer_reader) ------------------------------
def steady_frame(version: int, group_id: str, member_id: str, epoch: int) -> bytes:
    body: dict[str, Any] = {
        "group_id": group_id,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": -1,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None,
    }
    if version < 1:
        body.pop("subscribed_topic_regex")
    return CGH.request.codec(version).encode(body)


@needs_c
def test_a_members_unchanged_bytes_get_the_body_read_from_them_last_time() -> None:
    c = parse_body_for(1)
    assert c is not None
    frame = b"\x07" + steady_frame(1, "g1", "member-a", 3)
    first, end = c(frame, 1)
    again, end_again = c(bytes(frame), 1)  # the same bytes in another frame
    assert again is first and end_again == end == len(frame)
    moved = c(b"\x07\x07" + frame[1:], 2)  # at another position: the same body, its own end
    assert moved[0] is first and moved[1] == len(frame) + 1
    # a group's bodies share one group id string (its hash computed once)
    assert c(steady_frame(1, "g1", "member-b", 3), 0)[0]["group_id"] is first["group_id"]
    other = c(b"\x07" + steady_frame(1, "g1", "member-a", 4), 1)[0]  # another epoch: another body
    assert other is not first and other["member_epoch"] == 4
    v0 = parse_body_for(0)
    assert v0 is not None
    assert "subscribed_topic_regex" not in v0(steady_frame(0, "g1", "member-a", 3), 0)[0]  # per version


@needs_c
def test_a_body_changed_after_it_was_handed_out_is_never_handed_out_again() -> None:
    c = parse_body_for(1)
    assert c is not None
    frame = steady_frame(1, "g-mut", "member-b", 9)
    for change in (
        lambda b: b.__setitem__("member_epoch", 10),
        lambda b: b.__setitem__("extra", 1),
        lambda b: b.pop("rack_id"),
        lambda b: b.update(member_epoch=10, rack_id="r"),
        lambda b: b.clear(),
    ):
        body = c(frame, 0)[0]
        change(body)
        fresh = c(frame, 0)[0]
        assert fresh is not body
        assert type(fresh) is consumer_wire.SteadyBody
        assert fresh == parse_body_for(1, native=False)(frame, 0)[0]  # type: ignore[misc]
    # changed and changed back: a new body all the same (a dict's version moves with every change)
    body = c(frame, 0)[0]
    body["member_epoch"] = 10
    body["member_epoch"] = 9
    assert c(frame, 0)[0] is not body


@needs_c
def test_the_held_bodies_are_bounded() -> None:
    native = consumer_wire._native
    native.steady_held_clear()
    c = parse_body_for(1)
    assert c is not None
    held = [c(steady_frame(1, "g-many", f"m-{i}", 1), 0)[0] for i in range(20_000)]
    # at most half the table's 32,768 slots: emptied once full, then filled again
    assert 0 < native.steady_held_clear() <= 16_384
    assert all(b["member_id"] == f"m-{i}" for i, b in enumerate(held))


@needs_c
@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(list(VERSIONS)),
            st.sampled_from(["g", "gü", "group-2"]),
            st.sampled_from(["m1", "m2", "ü-m", "m" * 126]),
            st.integers(-3, 3),
            st.integers(0, 2),  # position of the body in its frame
            st.sampled_from([None, "set", "pop", "clear"]),  # what a reader then does to the body
        ),
        max_size=40,
    )
)
def test_held_bodies_are_what_the_python_reader_reads(steps: list[tuple[int, str, str, int, int, str | None]]) -> None:
    """Whatever was done to the bodies handed out before, each read is the Python reader's."""
    for version, gid, mid, epoch, pos, change in steps:
        frame = b"\x00" * pos + steady_frame(version, gid, mid, epoch)
        c, py = parse_body_for(version), parse_body_for(version, native=False)
        assert read(c, frame, pos) == read(py, frame, pos)
        body = c(frame, pos)[0]  # type: ignore[misc]
        if change == "set":
            body["member_epoch"] = epoch + 1
        elif change == "pop":
            body.pop("group_id")
        elif change == "clear":
            body.clear()


@needs_c
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80), pos=st.integers(-2, 6), tail=st.sampled_from([b"", b"\x00", b"\x00\x00\xff"]))
def test_the_held_reader_takes_random_bytes(data: bytes, pos: int, tail: bytes) -> None:
    """Whatever it is handed: the steady body, else the generic decoder's answer, never a crash."""
    reader = consumer_wire._reader_c

    def generic(frame: Any, at: int) -> Any:
        return ("generic", at)

    for frame in (data, data, bytearray(data)):  # the second time from the held table when it was held
        out = reader((tail, {}, consumer_wire.SteadyBody, generic), frame, pos)
        assert out == ("generic", pos) or (type(out) is tuple and type(out[0]) is consumer_wire.SteadyBody)
        if type(out[0]) is consumer_wire.SteadyBody:
            assert out[1] <= len(data) and type(frame) is bytes
    with pytest.raises(TypeError):
        reader((tail, {}, consumer_wire.SteadyBody), data, pos)
    with pytest.raises(TypeError):
        reader((tail, {}, consumer_wire.SteadyBody, generic), data)
