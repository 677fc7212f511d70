"""Per-connection bounds of the server, in process: a fake transport shows when reading pauses.

A connection stops being read while it holds ``max_inflight`` unanswered requests, or
``max_inflight_bytes`` of them, or while its transport holds more unsent bytes than the high-water
mark (``pause_writing``), and frames already buffered wait (undispatched) until it resumes.
"""

from __future__ import annotations

import asyncio
import struct

from groupd.protocol.server import Connection, Request, Server

from tests.fuzz.harness import FakeTransport


def _frame(n: int, corr: int = 0) -> bytes:
    payload = struct.pack(">hhi", 12, 0, corr) + b"x" * (n - 8)
    return struct.pack(">i", len(payload)) + payload


class Parking:
    """A dispatcher that holds every request unanswered until told."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def __call__(self, conn: Connection, frame: bytes) -> None:
        req = Request(conn, 12, 0, 0, None, {}, lambda _r, _b: b"\x00\x00\x00\x04resp")
        conn.enqueue(req)
        self.requests.append(req)

    def answer_all(self) -> None:
        for r in self.requests:
            r.respond_raw(struct.pack(">i", 4) + b"resp")
        self.requests.clear()


def _connect(server: Server) -> tuple[Connection, FakeTransport]:
    loop = asyncio.get_running_loop()
    conn = Connection(server)
    t = FakeTransport(loop)
    t.protocol = conn
    conn.connection_made(t)
    return conn, t


async def _turn() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_inflight_bytes_pause_reading_and_buffered_frames_wait() -> None:
    park = Parking()
    server = Server(park, max_inflight=1000, max_inflight_bytes=10_000, idle_timeout_ms=0)
    conn, t = _connect(server)
    # 20 frames of 1000 bytes in one read: reading pauses after the 10th, the rest stays buffered.
    conn.data_received(b"".join(_frame(1000, i) for i in range(20)))
    assert not t.reading
    assert len(park.requests) == 10
    park.answer_all()
    await _turn()
    assert len(park.requests) == 10  # the buffered ones, dispatched once reading resumed
    park.answer_all()
    await _turn()
    assert t.reading and not park.requests
    assert len(t.written) >= 2 and t.written_bytes == 20 * 8


async def test_inflight_count_pauses_reading() -> None:
    park = Parking()
    server = Server(park, max_inflight=4, max_inflight_bytes=0, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(b"".join(_frame(16, i) for i in range(10)))
    assert not t.reading and len(park.requests) == 4
    park.answer_all()
    await _turn()
    assert len(park.requests) == 4  # next four; two still buffered
    park.answer_all()
    await _turn()
    park.answer_all()
    await _turn()
    assert t.reading and t.written_bytes == 10 * 8


async def test_unsent_output_pauses_reading_until_the_transport_drains() -> None:
    park = Parking()
    server = Server(park, max_inflight=1000, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.pause_writing()  # the transport's buffer passed the high-water mark: the client is not reading
    assert not t.reading
    conn.data_received(_frame(16))
    assert not park.requests  # buffered, not dispatched
    conn.resume_writing()
    await _turn()
    assert t.reading and len(park.requests) == 1


async def test_a_frame_larger_than_max_request_bytes_closes_before_buffering() -> None:
    server = Server(Parking(), max_request_bytes=1000, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(struct.pack(">i", 1001))
    assert conn.closed and t.closing


class Answering:
    """A dispatcher that answers every request at once (a heartbeat's fast path)."""

    def __call__(self, conn: Connection, frame: bytes) -> None:
        req = Request(conn, 12, 0, 0, None, {}, lambda _r, _b: b"")
        conn.enqueue(req)
        req.respond_raw(struct.pack(">i", 4) + b"resp")


async def test_big_read_writes_answers_every_64_frames_in_order() -> None:
    server = Server(Answering(), max_inflight=1024, max_inflight_bytes=0, idle_timeout_ms=0)
    conn, t = _connect(server)
    # 200 frames in one read: the answers ready so far are written every 64 frames, not only
    # once the whole read is dispatched.
    conn.data_received(b"".join(_frame(16, i) for i in range(200)))
    assert len(t.written) == 3 and t.written_bytes == 192 * 8
    await _turn()
    assert t.written_bytes == 200 * 8 and t.reading
