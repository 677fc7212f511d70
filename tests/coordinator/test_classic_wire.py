"""A classic Heartbeat's answer with its bytes made once per version and code
(``groupd.coordinator.classic.wire``, what the shell answers every Heartbeat with) against the generic
encoder, the reference: the same dict, the same bytes, for every version and every error code."""

from __future__ import annotations

from groupd.coordinator.classic.wire import heartbeat_answer
from groupd.protocol.messages import API_BY_NAME
from hypothesis import given
from hypothesis import strategies as st

HEARTBEAT = API_BY_NAME["Heartbeat"]


@given(
    version=st.integers(HEARTBEAT.min_version, HEARTBEAT.max_version),
    code=st.one_of(st.sampled_from([0, 15, 16, 22, 25, 27, 82]), st.integers(-(2**15), 2**15 - 1)),
)
def test_a_heartbeat_answer_is_encoded_as_the_codec_encodes_it(version: int, code: int) -> None:
    want = {"throttle_time_ms": 0, "error_code": code}
    for _ in range(2):  # made, then from the cache
        answer = heartbeat_answer(version, code)
        assert answer == want
        assert answer.wire_payload == HEARTBEAT.response.codec(version).encode(want)  # type: ignore[attr-defined]
