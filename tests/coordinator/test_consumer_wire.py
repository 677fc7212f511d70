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
    assert parse_body_for(1).__name__ == "parse_at_c"  # type: ignore[union-attr]


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
