"""A steady ConsumerGroupHeartbeat on the wire: its request read and its answer written without the
generic codecs (issue 26: the two cost ~1.5 us of a ~9 us KIP-848 heartbeat, what kept it above the
classic Heartbeat's server CPU).

A member that changes nothing sends only group id, member id and epoch: every other field is null
or -1 (Kafka's ``ConsumerHeartbeatRequestManager`` and librdkafka send a field only when it changed),
so past the two ids and the epoch a steady request's bytes are always the same. ``parse_body_for``
(the dispatcher's ``body_parsers`` hook) reads that form in place and hands everything else to the
generic decoder, which decides as it always did. ``steady_answer`` gives the answer to such a member
(``GroupMetadataManager.consumerGroupHeartbeat`` for a member that is reconciled and unchanged: no
error, no assignment) its bytes as well; the dispatcher sends them as they are (``wire_payload``).
With the C module, a member's unchanged request bytes are handed the body read from them last time
(``steady_consumer_reader`` in coordinator/_native.c), as long as nothing changed that body.
tests/coordinator/test_consumer_wire.py checks both against the generic codecs byte for byte.
"""

from __future__ import annotations

import importlib
import os
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

from ..protocol.messages import API_BY_NAME

__all__ = ["SteadyAnswer", "SteadyBody", "parse_body_for", "steady_answer"]

CONSUMER_GROUP_HEARTBEAT = API_BY_NAME["ConsumerGroupHeartbeat"]

# The steady reader in C (coordinator/_native.c, issue 26: the Python one is ~0.4 us of a KIP-848
# heartbeat); the Python reader stays the reference and the fallback (GROUPD_NO_NATIVE=1, read once).
try:
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        raise ImportError("GROUPD_NO_NATIVE=1")
    _native: Any = importlib.import_module(__name__.rpartition(".")[0] + "._native")
    _steady_c: Any = _native.steady_consumer_heartbeat
    # The same reader as the dispatcher's decoder itself (bound with partial: no Python frame per
    # request), which hands a member's unchanged bytes the body it read from them last time while
    # that body is unchanged (its ids already hashed for the coordinator's lookups): ~2,700 of a
    # ~41,000-instruction heartbeat (bench/heartbeat_callgrind.py, issue 26).
    _reader_c: Any = _native.steady_consumer_reader
except (ImportError, AttributeError):
    _steady_c = _reader_c = None
_INT32 = struct.Struct(">i")
_TWO_INT32 = struct.Struct(">ii")

# After the epoch, a steady request is: instance_id and rack_id null, rebalance_timeout_ms -1, the
# subscription (names, and from v1 the regex), server_assignor and topic_partitions null, no tagged
# fields.
_STEADY_TAIL = {
    0: b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00",
    1: b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00",
}


class SteadyBody(dict):  # type: ignore[type-arg]
    """A body read in the steady form (``parse_body_for``): a dict like the generic decoder's, whose
    type tells the steady path that every field a steady member leaves unset is unset (issue 26: the
    reader checked their bytes; ``ConsumerGroupManager.steady_heartbeat`` need not look again)."""

    __slots__ = ()


def parse_body_for(version: int, *, native: bool = True) -> Callable[[bytes, int], tuple[dict[str, Any], int]] | None:
    """The dispatcher's decoder of ConsumerGroupHeartbeat ``version`` bodies (None: the generic one);
    ``native``: the steady reader in C when the module is there (else the Python one)."""
    tail = _STEADY_TAIL.get(version)
    if tail is None:
        return None
    generic = CONSUMER_GROUP_HEARTBEAT.request.codec(version).parse_at
    n_tail = len(tail)
    unpack_epoch = _INT32.unpack_from
    # The body with the unset fields, in the generic decoder's order: copied, then the ids and the
    # epoch set (a copy of a dict costs less than a display of ten entries).
    template: dict[str, Any] = {
        "group_id": "",
        "member_id": "",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": -1,
        "subscribed_topic_names": None,
    }
    if version >= 1:
        template["subscribed_topic_regex"] = None
    template["server_assignor"] = None
    template["topic_partitions"] = None

    def parse_at(frame: bytes, pos: int) -> tuple[dict[str, Any], int]:
        # Compact strings of 1-126 bytes (a one-byte length), so an empty, null or long id, like any
        # other shape, is the generic decoder's.
        try:
            g = frame[pos]
            if 1 < g < 0x80:
                at_member = pos + g
                m = frame[at_member]
                if 1 < m < 0x80:
                    at_epoch = at_member + m
                    end = at_epoch + 4 + n_tail
                    if frame[at_epoch + 4 : end] == tail:
                        group_id = frame[pos + 1 : at_member].decode()
                        member_id = frame[at_member + 1 : at_epoch].decode()
                        body = SteadyBody(template)
                        body["group_id"] = group_id
                        body["member_id"] = member_id
                        body["member_epoch"] = unpack_epoch(frame, at_epoch)[0]
                        return body, end
        except (IndexError, UnicodeDecodeError):
            pass  # the generic decoder says what is wrong with it, as it always did
        return generic(frame, pos)

    if native and _reader_c is not None:
        # steady_c(frame, pos, tail, template, SteadyBody), and generic(frame, pos) exactly where it
        # answers None, as parse_at does
        return partial(_reader_c, (tail, template, SteadyBody, generic))
    return parse_at


class SteadyAnswer(dict):  # type: ignore[type-arg]
    """A ConsumerGroupHeartbeat answer and its encoded body (``wire_payload``, which the dispatcher
    sends as it is); the dict is what every other reader (metrics, tests) sees."""

    __slots__ = ("wire_payload",)

    wire_payload: bytes


# throttle_time_ms 0, error_code NONE, error_message null
_HEAD = b"\x00\x00\x00\x00\x00\x00\x00"
# assignment null (a nullable struct's -1 marker), no tagged fields
_END = b"\xff\x00"


# member id -> (epoch, interval, its last answer); bounded, so members coming and going cannot grow it
_ANSWERS: dict[str, tuple[int, int, dict[str, Any]]] = {}
_ANSWERS_MAX = 1 << 16


def steady_answer(member_id: str, epoch: int, interval_ms: int) -> dict[str, Any]:
    """A steady member's answer (no error, no assignment: ``ConsumerGroupManager.steady_answer``) with
    its bytes, the same in every version (v0 and v1 answers differ in nothing). A member's answer
    does not change while its epoch and interval stay, so the same object answers each of its
    heartbeats meanwhile: the dispatcher encodes an answer when it is given and nothing changes one
    after that (the observers only read it)."""
    last = _ANSWERS.get(member_id)
    if last is not None and last[0] == epoch and last[1] == interval_ms:
        return last[2]
    encoded = member_id.encode()
    if len(encoded) > 126:  # a length of more than one byte: the generic encoder's
        # imported here: the broker imports this module at start, the consumer core only by its
        # first use (coordinator/lazy.py)
        from .consumer.manager import ConsumerGroupManager

        return ConsumerGroupManager.steady_answer(member_id, epoch, interval_ms)
    out = SteadyAnswer(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=interval_ms,
        assignment=None,
    )
    out.wire_payload = _HEAD + bytes((len(encoded) + 1,)) + encoded + _TWO_INT32.pack(epoch, interval_ms) + _END
    if len(_ANSWERS) >= _ANSWERS_MAX:
        _ANSWERS.clear()
    _ANSWERS[member_id] = (epoch, interval_ms, out)
    return out
