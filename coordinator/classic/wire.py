"""A classic Heartbeat's answer with its bytes (issue 26: the generic encoder cost ~0.5 us of a
~6.5 us heartbeat's server CPU).

The answer is only an error code (``GroupCoordinatorService.heartbeat``), so ``heartbeat_answer``
gives it bytes made once per version and code; the dispatcher sends them as they are
(``wire_payload``). The request is left to the generic decoder: a reader of its steady form in place,
as ``consumer_wire`` has for ConsumerGroupHeartbeat, measured no faster for four fields.
tests/coordinator/test_classic_wire.py checks the bytes against the generic codec's.
"""

from __future__ import annotations

import struct
from typing import Any

from ...protocol.messages import API_BY_NAME

__all__ = ["HeartbeatAnswer", "heartbeat_answer"]

HEARTBEAT = API_BY_NAME["Heartbeat"]
_INT16 = struct.Struct(">h")


class HeartbeatAnswer(dict):  # type: ignore[type-arg]
    """A Heartbeat answer and its encoded body (``wire_payload``, which the dispatcher sends as it
    is); the dict is what every other reader (metrics, tests) sees."""

    __slots__ = ("wire_payload",)

    wire_payload: bytes


# error code * 256 + version -> the answer (an int key: no tuple to build and hash per heartbeat)
_ANSWERS: dict[int, dict[str, Any]] = {}


def heartbeat_answer(version: int, code: int) -> dict[str, Any]:
    """``{"throttle_time_ms": 0, "error_code": code}`` with its bytes. One object per version and code
    answers every heartbeat: the dispatcher encodes an answer when it is given and nothing changes one
    after that (the observers only read it)."""
    key = code * 256 + version
    out = _ANSWERS.get(key)
    if out is None:
        out = _ANSWERS[key] = _answer(version, code)
    return out


def _answer(version: int, code: int) -> dict[str, Any]:
    # v0 answers only the error code, v1+ a throttle time first, v4+ (flexible) a tagged-field section
    body = _INT16.pack(code)
    if version >= 1:
        body = b"\x00\x00\x00\x00" + body
    if HEARTBEAT.is_flexible(version):
        body += b"\x00"
    out = HeartbeatAnswer(throttle_time_ms=0, error_code=code)
    out.wire_payload = body
    return out
