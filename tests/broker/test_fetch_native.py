"""``groupd.broker.data_plane._fetch`` (broker/data_plane/_fetch.c, issue 29 item 4) against the
generic codecs, the reference: ``parse_fetch`` reads exactly what the generic decoder reads whenever
it reads a body at all (same dict, same key order, same end), and leaves the rest to it; it never
crashes on random or cut bytes; ``build_fetch`` writes the generic encoder's bytes for any body it
takes and hands back None for the rest; the dispatcher's Fetch hooks fall back to the generic
codecs for whatever the C code does not take."""

from __future__ import annotations

import os
from typing import Any

import pytest
from groupd.broker.data_plane import fetch_wire
from groupd.protocol.messages import API_BY_NAME
from hypothesis import given, settings
from hypothesis import strategies as st

FETCH = API_BY_NAME["Fetch"]
native = fetch_wire._fetch
needs_native = pytest.mark.skipif(native is None, reason="_fetch.c is not built (or GROUPD_NO_NATIVE=1)")

i8 = st.integers(-(2**7), 2**7 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=140)  # past 127 bytes: a two-byte compact length


def test_the_c_module_is_built_here() -> None:
    # make .venv/.dev builds it (pip install -e .); the wheel carries it (tests/test_packaging.py)
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        pytest.skip("GROUPD_NO_NATIVE=1")
    assert native is not None
    assert fetch_wire.parse_body_for(12) is not None and fetch_wire.build_for(12) is not None


request_partition = st.fixed_dictionaries(
    {
        "partition": i32,
        "current_leader_epoch": i32,
        "fetch_offset": i64,
        "last_fetched_epoch": i32,
        "log_start_offset": i64,
        "partition_max_bytes": i32,
    }
)
requests = st.fixed_dictionaries(
    {
        "replica_id": i32,
        "max_wait_ms": i32,
        "min_bytes": i32,
        "max_bytes": i32,
        "isolation_level": i8,
        "session_id": i32,
        "session_epoch": i32,
        "topics": st.lists(
            st.fixed_dictionaries({"topic": names, "partitions": st.lists(request_partition, max_size=3)}), max_size=3
        ),
        "forgotten_topics_data": st.lists(
            st.fixed_dictionaries({"topic": names, "partitions": st.lists(i32, max_size=3)}), max_size=2
        ),
        "rack_id": names,
    }
)


@needs_native
@settings(max_examples=300, deadline=None)
@given(requests, st.integers(4, 12), st.binary(max_size=3))
def test_parse_fetch_reads_what_the_generic_decoder_reads(body: dict[str, Any], v: int, tail: bytes) -> None:
    raw = b"\x07" + FETCH.request.codec(v).encode(body) + tail
    want = FETCH.request.codec(v).parse_at(raw, 1)
    got = native.parse_fetch(raw, 1, v)
    assert got is not None
    assert got == want
    assert list(got[0]) == list(want[0])
    for gt, wt in zip(got[0]["topics"], want[0]["topics"], strict=True):
        for gp, wp in zip(gt["partitions"], wt["partitions"], strict=True):
            assert list(gp) == list(wp)
    assert fetch_wire.parse_body_for(v)(raw, 1) == want  # type: ignore[misc]


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 14))
def test_parse_fetch_on_random_bytes_answers_none_or_the_generic_body(raw: bytes, v: int) -> None:
    got = native.parse_fetch(raw, 0, v)
    if got is not None:
        assert got == FETCH.request.codec(v).parse_at(raw, 0)


@needs_native
@settings(max_examples=100, deadline=None)
@given(requests, st.integers(4, 12), st.data())
def test_parse_fetch_on_cut_or_damaged_requests(body: dict[str, Any], v: int, data: st.DataObject) -> None:
    raw = bytearray(FETCH.request.codec(v).encode(body))
    cut = data.draw(st.integers(0, len(raw)))
    assert native.parse_fetch(bytes(raw[:cut]), 0, v) is None or cut == len(raw)
    if raw:
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
        got = native.parse_fetch(bytes(raw), 0, v)
        if got is not None:
            assert got == FETCH.request.codec(v).parse_at(bytes(raw), 0)
    assert native.parse_fetch(b"", 0, v) is None
    assert native.parse_fetch(b"\x00" * 4, 10, v) is None  # pos past the end


records = st.one_of(st.none(), st.binary(max_size=300), st.binary(max_size=10).map(bytearray))
response_partition = st.fixed_dictionaries(
    {
        "partition_index": i32,
        "error_code": i16,
        "high_watermark": i64,
        "last_stable_offset": i64,
        "log_start_offset": i64,
        "aborted_transactions": st.one_of(
            st.none(), st.lists(st.fixed_dictionaries({"producer_id": i64, "first_offset": i64}), max_size=3)
        ),
        "preferred_read_replica": i32,
        "records": records,
    },
    optional={"current_leader": st.fixed_dictionaries({"leader_id": i32, "leader_epoch": i32})},
)
# Some keys left out (the encoders' defaults), some values of a type the encoder refuses.
sparse_partition = st.dictionaries(
    st.sampled_from(["partition_index", "error_code", "high_watermark", "aborted_transactions", "records"]),
    st.one_of(i16, st.none(), st.just("x"), st.just(2**70), st.just([])),
    max_size=4,
)
responses = st.fixed_dictionaries(
    {
        "throttle_time_ms": i32,
        "error_code": i16,
        "session_id": i32,
        "responses": st.lists(
            st.fixed_dictionaries(
                {"topic": names, "partitions": st.lists(st.one_of(response_partition, sparse_partition), max_size=3)}
            ),
            max_size=3,
        ),
    }
)


def _generic_encode(body: dict[str, Any], v: int) -> bytes | None:
    try:
        return FETCH.response.codec(v).encode(body)
    except Exception:  # the generic encoder refuses it: the fast path must hand it back
        return None


@needs_native
@settings(max_examples=400, deadline=None)
@given(responses, st.integers(4, 12))
def test_build_fetch_writes_what_the_generic_encoder_writes(body: dict[str, Any], v: int) -> None:
    got = native.build_fetch(body, v)
    want = _generic_encode(body, v)
    if got is not None:
        assert got == want
    # what the C code hands back is the generic encoder's to write (or refuse)
    tagged = any("current_leader" in p for t in body["responses"] for p in t["partitions"])
    if want is not None and not tagged:
        assert got == want


@needs_native
def test_build_fetch_takes_what_fetch_read_answers() -> None:
    part = {
        "partition_index": 3,
        "error_code": 0,
        "high_watermark": 10,
        "last_stable_offset": 10,
        "log_start_offset": 0,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"x" * 70,
    }
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 5,
        "responses": [{"topic": "t", "partitions": [part]}],
    }
    for v in range(4, 13):
        assert native.build_fetch(body, v) == FETCH.response.codec(v).encode(body)
    # a partition with a tagged field (leader_guard's NOT_LEADER answer) goes to the generic encoder
    moved = {**part, "current_leader": {"leader_id": 2, "leader_epoch": 7}}
    assert native.build_fetch({**body, "responses": [{"topic": "t", "partitions": [moved]}]}, 12) is None
    assert native.build_fetch(body, 3) is None
    assert native.build_fetch({"responses": "nope"}, 12) is None


def test_the_hooks_fall_back_to_the_generic_codecs() -> None:
    body = {
        "replica_id": -1,
        "max_wait_ms": 5000,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [],
        "forgotten_topics_data": [],
        "rack_id": "",
        "cluster_id": "c",  # a tagged field: not the C reader's
    }
    raw = FETCH.request.codec(12).encode(body)
    parse = fetch_wire.parse_body_for(12) or FETCH.request.codec(12).parse_at
    assert parse(raw, 0) == FETCH.request.codec(12).parse_at(raw, 0)
    assert parse(raw, 0)[0]["cluster_id"] == "c"
    assert fetch_wire.parse_body_for(3) is None and fetch_wire.build_for(3) is None
