"""A Produce answer whose partitions all succeeded, encoded here (issue 29 item 4, issue 26).

A small Produce (one or two partitions, franz-go's shape on three brokers) spent ~15% of its
server CPU on its answer: a dict per partition and per topic built by ``ProduceHandler``, then walked
field by field by the generic encoder. The common answer (every partition appended, no record
errors, no error message, no leader hint) is a fixed layout per version, so ``encode_answer``
packs it from the outcomes directly and ``ProduceAnswer`` hands the bytes to the dispatcher
(``wire_payload``, as OffsetCommit's and Heartbeat's answers do). Whoever reads the answer as a dict
(the metrics observers read the top-level ``error_code``, the cluster guard merges refused partitions
into ``responses``, tests) gets ``responses`` decoded from those bytes on first read; an answer
whose ``responses`` were read may have been changed, so the generic encoder encodes it then.

Any answer with an error takes the dict path (``ProduceHandler._produce_answer``), and so do v0-2.
tests/data_plane/test_produce_wire.py checks the bytes against the generic encoder for every version.

The compiled steps (``_produce.c``, issue 26 and 29 item 4: the request's body, each batch's header
checks and this answer, each one C call instead of a dozen Python ones): ``native`` is the module or
None (not built, or ``GROUPD_NO_NATIVE=1``, read once here). ``parse_body_for`` is the dispatcher's
``body_parsers`` hook for Produce. The Python code stays the reference: each C function declines
(None) what it does not take and the Python path decides; tests/data_plane/test_produce_native.py
checks the two agree.
"""

from __future__ import annotations

import functools
import importlib
import os
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

from groupd.protocol.lazy_dict import LazyDict
from groupd.protocol.messages import API_BY_NAME
from groupd.storage import records as rec

__all__ = ["FIRST_WIRE_VERSION", "ProduceAnswer", "Success", "encode_answer", "native", "parse_body_for"]


def _load() -> ModuleType | None:
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        return None
    try:
        # by name: `from . import _produce` would read as an import of the package to the layout test
        mod = importlib.import_module(f"{__package__}._produce")
    except ImportError:
        return None
    # what check_batch builds (a BatchView, its slots filled in C) and the CRC it checks with
    mod.bind(rec.BatchView, rec._crc32c)
    return mod


native = _load()

PRODUCE = API_BY_NAME["Produce"]
FIRST_WIRE_VERSION = 3  # v0-2 (message sets, no transactional id) keep the generic encoder
_RESPONSES = "responses"

# A partition that was appended: (index, base offset, log-append time or -1, log start offset).
Success = tuple[int, int, int, int]

_I32 = struct.Struct(">i").pack
_I16 = struct.Struct(">h").pack
_THROTTLE = b"\x00\x00\x00\x00"
_ONE_BYTE = [bytes([n]) for n in range(0x80)]  # the uvarints of 0-127


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# A successful partition in one pack per version: index, error code (0), base offset, log-append
# time, log start offset (v5+), then from v8 record_errors (empty) and error_message (null), and
# (flexible, v9+) an empty tagged-field section: no current_leader.
_V9 = struct.Struct(">ihqqqBBB").pack  # compact: empty array 0x01, null string 0x00, no tags 0x00
_V8 = struct.Struct(">ihqqqih").pack  # record_errors count 0, error_message length -1
_V5 = struct.Struct(">ihqqq").pack
_V3 = struct.Struct(">ihqq").pack  # before v5: no log start offset


def encode_answer(version: int, answers: list[tuple[str, list[Success]]]) -> bytes:
    """The body of a Produce ``version`` (3+) answer whose partitions all succeeded, as the
    generic encoder would write it (throttle time 0, no node endpoints)."""
    if version >= 9:
        parts = [_uvarint(len(answers) + 1)]
        append = parts.append
        for name, outs in answers:
            raw = name.encode()
            append(_uvarint(len(raw) + 1) + raw + _uvarint(len(outs) + 1))
            for index, base, lat, lso in outs:
                append(_V9(index, 0, base, lat, lso, 1, 0, 0))
            append(b"\x00")  # the topic's tagged fields
        append(_THROTTLE + b"\x00")  # and the answer's
        return b"".join(parts)
    parts = [_I32(len(answers))]
    append = parts.append
    for name, outs in answers:
        raw = name.encode()
        append(_I16(len(raw)) + raw + _I32(len(outs)))
        if version >= 8:
            for index, base, lat, lso in outs:
                append(_V8(index, 0, base, lat, lso, 0, -1))
        elif version >= 5:
            for index, base, lat, lso in outs:
                append(_V5(index, 0, base, lat, lso))
        else:
            for index, base, lat, _lso in outs:
                append(_V3(index, 0, base, lat))
    append(_THROTTLE)
    return b"".join(parts)


def parse_body_for(version: int) -> Callable[[bytes, int], tuple[dict[str, Any], int]] | None:
    """The dispatcher's decoder of Produce ``version`` bodies: the C reader, which hands what it
    does not take to the generic decoder; None (the generic one) without it or below v3."""
    if native is None or not FIRST_WIRE_VERSION <= version <= 12:
        return None
    return functools.partial(native.parse_body, version, PRODUCE.request.codec(version).parse_at)


class ProduceAnswer(LazyDict):
    """A Produce answer sent as ``payload`` (``wire_payload``); as a dict it is
    ``{"responses": [...], "throttle_time_ms": 0}`` with ``responses`` decoded on first read (or
    by anything that reads every key: iteration, equality, ``repr``)."""

    __slots__ = ("payload", "version", "wire_payload")
    LAZY = _RESPONSES

    def __init__(self, payload: bytes, version: int) -> None:
        dict.__init__(self, throttle_time_ms=0)
        self.payload = payload
        self.version = version
        # What the dispatcher sends (an attribute, not a property: read once per answer). None once
        # the answer was read as a dict (``_full``), which may have changed it: the generic
        # encoder encodes it then.
        self.wire_payload: bytes | None = payload

    def _fill(self) -> None:
        decoded = PRODUCE.response.codec(self.version).parse_at(self.payload, 0)[0]
        dict.__setitem__(self, _RESPONSES, decoded[_RESPONSES])
        self.wire_payload = None

    # A write (a throttle time, say) makes the bytes stale: decoded first, encoded generically then.
    def __setitem__(self, key: str, value: Any) -> None:
        self._full()
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        self._full()
        dict.__delitem__(self, key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._full()
        dict.update(self, *args, **kwargs)

    def pop(self, key: str, *default: Any) -> Any:  # type: ignore[override]
        self._full()
        return dict.pop(self, key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self._full()
        return dict.setdefault(self, key, default)

    def popitem(self) -> tuple[str, Any]:
        self._full()
        return dict.popitem(self)

    def clear(self) -> None:
        self._full()
        dict.clear(self)
