"""The dispatcher reads a request header's client_id in place (issue 26) and hands every other header
to the compiled parser: for any header, well-formed, with tagged fields, or cut anywhere, a request
is dispatched with the client_id and body the compiled codecs decode, or the connection is closed as
undecodable exactly when they refuse the bytes."""

from __future__ import annotations

import struct
from typing import Any

from groupd.protocol._rt import DecodeError
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER
from hypothesis import given
from hypothesis import strategies as st

HEARTBEAT = API_BY_NAME["Heartbeat"]


class _Conn:
    def __init__(self) -> None:
        self.session = None
        self.id = 1
        self.closed: str | None = None
        self.enqueued: list[Any] = []
        self._pending = self.enqueued  # the dispatcher appends to it (Connection._pending)

    def enqueue(self, req: Any) -> None:
        self.enqueued.append(req)

    def close(self, reason: str, **_: Any) -> None:
        self.closed = reason


def _frame(version: int, client_id: str | None, tags: list[bytes]) -> bytes:
    flexible = HEARTBEAT.is_flexible(version)
    out = struct.pack(">hhi", HEARTBEAT.key, version, 7)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        out += struct.pack(">h", len(raw)) + raw
    if flexible:  # the header's tagged fields: count, then tag, size, bytes (each size < 128 here)
        out += bytes([len(tags)]) + b"".join(bytes([i, len(t)]) + t for i, t in enumerate(tags))
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    return out + HEARTBEAT.request.codec(version).encode(body)


def _oracle(version: int, frame: bytes) -> tuple[str | None, dict[str, Any]] | None:
    header_codec = REQUEST_HEADER.codec(2 if HEARTBEAT.is_flexible(version) else 1)
    try:
        header, pos = header_codec.decode_at(frame, 0)
        return header["client_id"], HEARTBEAT.request.codec(version).decode_at(frame, pos)[0]
    except DecodeError:
        return None


@given(
    st.sampled_from([0, 3, 4]),
    st.one_of(st.none(), st.text(max_size=20)),
    st.lists(st.binary(max_size=5), max_size=2),
    st.integers(min_value=0, max_value=200),
)
def test_the_in_place_client_id_matches_the_compiled_header(version, client_id, tags, cut) -> None:
    full = _frame(version, client_id, tags)
    frame = full[: max(8, len(full) - cut)]  # the fixed part is read before: a frame has at least 8 bytes
    d = Dispatcher()
    seen: list[Any] = []
    d.register(HEARTBEAT, lambda req: seen.append(req))
    conn = _Conn()
    d(conn, frame)  # type: ignore[arg-type]
    want = _oracle(version, frame)
    if want is None:
        assert conn.closed == "undecodable request" and not seen
    else:
        assert conn.closed is None and len(seen) == 1
        assert (seen[0].client_id, seen[0].body) == want
