"""A successful Produce answer is encoded by ``produce_wire.encode_answer`` (issue 29 item 4): its
bytes must be the generic encoder's for the same answer at every version it serves (3-12), and the
``ProduceAnswer`` handed to the dispatcher must read as that answer's dict, and stop vouching for
its bytes once anyone changes it."""

from __future__ import annotations

import copy
import json

from groupd.broker.data_plane.produce import _as_dicts
from groupd.broker.data_plane.produce_wire import FIRST_WIRE_VERSION, ProduceAnswer, encode_answer
from groupd.protocol.messages import API_BY_NAME
from hypothesis import given, settings
from hypothesis import strategies as st

PRODUCE = API_BY_NAME["Produce"]
VERSIONS = st.integers(FIRST_WIRE_VERSION, PRODUCE.max_version)
SUCCESS = st.tuples(
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.sampled_from([-1, 0, 1_700_000_000_000]) | st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
)
ANSWERS = st.lists(
    st.tuples(st.text(min_size=1, max_size=200), st.lists(SUCCESS, max_size=5)),
    max_size=4,
)


def _generic(version: int, answers: list) -> bytes:
    body = {"responses": _as_dicts(answers), "throttle_time_ms": 0}
    return PRODUCE.response.codec(version).encode(body)


@settings(max_examples=300, deadline=None)
@given(version=VERSIONS, answers=ANSWERS)
def test_encode_answer_writes_the_generic_encoders_bytes(version: int, answers: list) -> None:
    assert encode_answer(version, answers) == _generic(version, answers)


@settings(max_examples=100, deadline=None)
@given(version=VERSIONS, answers=ANSWERS)
def test_produce_answer_reads_as_the_dict_it_encodes(version: int, answers: list) -> None:
    decoded = PRODUCE.response.codec(version).decode(_generic(version, answers))
    # what the handler's dict path answers: the responses and the throttle time (no node endpoints)
    expected = {"responses": decoded["responses"], "throttle_time_ms": 0}
    a = ProduceAnswer(encode_answer(version, answers), version)
    # the metrics observers' read leaves the bytes in charge
    assert a.get("error_code") is None
    assert a.wire_payload == encode_answer(version, answers)
    assert a["responses"] == expected["responses"]
    assert dict(a) == expected
    assert {**a} == expected
    assert json.loads(json.dumps(a)) == json.loads(json.dumps(expected))
    # read as a dict, the answer may be changed: the generic encoder takes over
    assert a.wire_payload is None
    assert PRODUCE.response.codec(version).encode(a) == _generic(version, answers)


def test_a_change_to_any_key_retires_the_bytes() -> None:
    answers = [("t", [(0, 5, -1, 0)])]
    for change in (
        lambda a: a.__setitem__("throttle_time_ms", 7),
        lambda a: a.update(throttle_time_ms=7),
        lambda a: a.pop("throttle_time_ms"),
        lambda a: a.setdefault("x", 1),
        lambda a: a["responses"].append({"name": "u", "partition_responses": []}),
    ):
        a = ProduceAnswer(encode_answer(9, answers), 9)
        assert a.wire_payload is not None
        change(a)
        assert a.wire_payload is None
    a = ProduceAnswer(encode_answer(9, answers), 9)
    assert copy.deepcopy(a) == {"responses": _as_dicts(answers), "throttle_time_ms": 0}
