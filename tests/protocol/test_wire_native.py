"""``groupd.protocol._wire`` (protocol/_wire.c, issue 26) against the pure-Python path, the reference:
``read_header`` reads what ``Dispatcher._read_header`` reads whenever it reads a header at all (and
leaves the rest to it), never crashes on random or cut bytes; ``new_request`` and ``RequestBase``
make requests with the fields of the Python ``Request``; without the module (GROUPD_NO_NATIVE=1) the
daemon's request path is the Python one."""

from __future__ import annotations

import gc
import os
import struct
import subprocess
import sys
from typing import Any

import pytest
from groupd.protocol import server
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.messages import API_BY_NAME
from hypothesis import given, settings
from hypothesis import strategies as st

HEARTBEAT = API_BY_NAME["Heartbeat"]
needs_wire = pytest.mark.skipif(server._wire is None, reason="protocol/_wire.c is not built (or GROUPD_NO_NATIVE=1)")


class _Conn:
    def __init__(self) -> None:
        self.session = None
        self.id = 1
        self.closed: str | None = None
        self._pending: list[Any] = []

    def close(self, reason: str, **_: Any) -> None:
        self.closed = reason

    def close_after_write(self, reason: str, **_: Any) -> None:
        self.closed = reason


def test_the_c_module_is_built_here() -> None:
    # make .venv/.dev builds it (pip install -e .); the wheel carries it (tests/test_packaging.py)
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        pytest.skip("GROUPD_NO_NATIVE=1")
    assert server._wire is not None
    assert issubclass(server.Request, server._wire.RequestBase)


def _dispatcher() -> Dispatcher:
    d = Dispatcher()
    d.register(HEARTBEAT, lambda req: None)
    conn = _Conn()
    for v in range(HEARTBEAT.min_version, HEARTBEAT.max_version + 1):  # the entries read_header looks up
        d(conn, _frame(v, "warm", [], 1))  # type: ignore[arg-type]
    return d


def _frame(version: int, client_id: str | None, tags: list[bytes], corr: int) -> bytes:
    out = struct.pack(">hhi", HEARTBEAT.key, version, corr)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        out += struct.pack(">h", len(raw)) + raw
    if HEARTBEAT.is_flexible(version):
        out += bytes([len(tags)]) + b"".join(bytes([i, len(t)]) + t for i, t in enumerate(tags))
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    return out + HEARTBEAT.request.codec(version).encode(body)


@needs_wire
@settings(max_examples=300, deadline=None)
@given(
    st.integers(HEARTBEAT.min_version, HEARTBEAT.max_version),
    st.booleans(),  # a version without an entry (the version field past the highest)
    st.one_of(st.none(), st.text(max_size=20)),
    st.lists(st.binary(max_size=5), max_size=2),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(min_value=0, max_value=60),
    st.binary(max_size=3),
)
def test_read_header_reads_what_the_python_path_reads(version, unknown, client_id, tags, corr, cut, junk) -> None:
    d = _dispatcher()
    full = _frame(version, client_id, tags, corr)
    if unknown:
        full = full[:2] + struct.pack(">h", HEARTBEAT.max_version + 1) + full[4:]
    frame = full[: max(8, len(full) - cut)] + junk
    got = server._wire.read_header(frame, d._versions)
    conn = _Conn()
    want = d._read_header(conn, frame)  # type: ignore[arg-type]
    if got is not None:
        # whatever C reads, the Python path reads the same
        assert want is not None and got[0] is want[0] and got[1:] == want[1:], (got, want)
    elif unknown:
        assert (want is None and conn.closed == "unsupported api version") or conn.closed is None
    elif want is not None:
        # C left it to Python: a header it does not read (a null client_id, tagged fields, bytes not UTF-8)
        entry = want[0]
        n = struct.unpack_from(">h", frame, 8)[0]
        fast = n >= 0 and 10 + n < len(frame) and (not entry.flexible_header or frame[10 + n] == 0)
        if fast:
            with pytest.raises(UnicodeDecodeError):
                frame[10 : 10 + n].decode()


@needs_wire
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40), st.sampled_from([0, 3, 4]), st.integers(0, 40))
def test_read_header_takes_random_and_cut_bytes(data: bytes, version: int, cut: int) -> None:
    d = _dispatcher()
    for frame in (data, _frame(version, "c", [], 5)[:cut], struct.pack(">hh", HEARTBEAT.key, version) + data):
        out = server._wire.read_header(frame, d._versions)
        assert out is None or (type(out) is tuple and len(out) == 4 and out[3] <= len(frame))
    for bad in (bytearray(data), memoryview(data), None, 3):
        assert server._wire.read_header(bad, d._versions) is None
    assert server._wire.read_header(data, {}) is None
    with pytest.raises(TypeError):
        server._wire.read_header(data)


fields = st.tuples(
    st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.one_of(st.none(), st.text(max_size=5)),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
    st.just(len),
    st.integers(0, 2**63),
)
NAMES = ("conn", "api_key", "api_version", "correlation_id", "client_id", "body", "encode_response", "received_ns")


@needs_wire
@settings(max_examples=200, deadline=None)
@given(fields, st.booleans())
def test_requests_have_the_python_requests_fields(values: tuple[Any, ...], default_received: bool) -> None:
    args = values[:7] if default_received else values
    reference = server._PyRequestFields(*args)
    for made in (server.Request(*args), server._wire.new_request(server.Request, *values[:7], reference.received_ns)):
        assert type(made) is server.Request
        for name in (*NAMES, "payload"):
            assert getattr(made, name) == getattr(reference, name), name
        made.payload = b"x"
        assert made.done and made.payload == b"x"
        assert not hasattr(made, "__dict__")


@needs_wire
def test_new_request_refuses_what_is_not_a_request_type() -> None:
    with pytest.raises(TypeError):
        server._wire.new_request(dict, *range(8))
    with pytest.raises(TypeError):
        server._wire.new_request(server.Request, 1, 2)
    with pytest.raises(TypeError):
        server.Request(1, 2)


@needs_wire
def test_a_request_in_a_cycle_is_collected() -> None:
    class Holder:
        pass

    gc.collect()
    before = sum(1 for o in gc.get_objects() if type(o) is server.Request)
    for _ in range(100):
        h = Holder()
        h.req = server._wire.new_request(server.Request, h, 1, 2, 3, "c", {}, len, 0)  # type: ignore[attr-defined]
    del h
    gc.collect()
    assert sum(1 for o in gc.get_objects() if type(o) is server.Request) == before


def test_without_the_c_module_the_python_path_runs() -> None:
    code = (
        "from groupd.protocol import server, dispatch\n"
        "assert server._wire is None and dispatch.read_header is None\n"
        "assert server.Request.__mro__[1] is server._PyRequestFields\n"
        "from tests.protocol.test_wire_native import _dispatcher, _frame, _Conn\n"
        "d = _dispatcher(); seen = []\n"
        "from groupd.protocol.messages import API_BY_NAME\n"
        "d.register(API_BY_NAME['Heartbeat'], seen.append)\n"
        "c = _Conn(); d(c, _frame(4, 'cid', [], 9))\n"
        "assert c.closed is None and seen[0].client_id == 'cid' and seen[0].correlation_id == 9\n"
        "from groupd.coordinator import consumer_wire\n"  # its steady reader in C (coordinator/_native.c)
        "assert consumer_wire._steady_c is None and consumer_wire.parse_body_for(1).__name__ == 'parse_at'\n"
    )
    env = {**os.environ, "GROUPD_NO_NATIVE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
