"""Fetch on the wire: its request read and its answer written in C (``_fetch.c``, issue 29 item 4:
the generic codecs cost ~2.8 us to read a franz-go incremental Fetch and ~4.5 us to write its
answer, a fifth of the server's whole cost of one).

``parse_body_for`` is the dispatcher's ``body_parsers`` hook and ``build_for`` its
``response_builders`` hook: each hands whatever the C code does not take (None) to the generic
codec, which stays the reference and decides as it always did (tests/broker/test_fetch_native.py
compares the two). Without the module (no compiler, or GROUPD_NO_NATIVE=1, read once here) both
hooks answer None and the generic codecs do it all.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from groupd.protocol.messages import API_BY_NAME

__all__ = ["FETCH_KEY", "build_for", "parse_body_for"]

FETCH = API_BY_NAME["Fetch"]
FETCH_KEY = FETCH.key
# The versions the C code reads and writes (older ones are rare: the generic codecs).
NATIVE_VERSIONS = range(4, 13)

try:
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        raise ImportError("GROUPD_NO_NATIVE=1")
    # by name: a relative import would import the package first
    _fetch: Any = importlib.import_module(__name__.rpartition(".")[0] + "._fetch")
except ImportError:
    _fetch = None


def parse_body_for(version: int) -> Callable[[bytes, int], tuple[dict[str, Any], int]] | None:
    """The dispatcher's decoder of Fetch ``version`` bodies (None: the generic one)."""
    if _fetch is None or version not in NATIVE_VERSIONS:
        return None
    generic = FETCH.request.codec(version).parse_at
    parse = _fetch.parse_fetch

    def parse_at(frame: bytes, pos: int) -> tuple[dict[str, Any], int]:
        got = parse(frame, pos, version)
        return got if got is not None else generic(frame, pos)  # type: ignore[no-any-return]

    return parse_at


def build_for(version: int) -> Callable[[dict[str, Any]], bytes | None] | None:
    """The dispatcher's writer of Fetch ``version`` answers: their body's bytes, or None for the
    generic encoder (None: no writer of its own for that version)."""
    if _fetch is None or version not in NATIVE_VERSIONS:
        return None
    build = _fetch.build_fetch
    return lambda body: build(body, version)  # type: ignore[no-any-return]
