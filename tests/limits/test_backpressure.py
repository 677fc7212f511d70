"""Per-connection bounds of the server, in process: a fake transport shows when reading pauses.

A connection processes one request at a time (Kafka's muted channel): the frames behind an
unanswered request are held. It stops being read while it holds ``max_inflight`` frames, or
``max_inflight_bytes`` of them, or while its transport holds more unsent bytes than the high-water
mark (``pause_writing``), and held frames wait (undispatched) until it resumes.
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


async def test_one_request_at_a_time_the_next_waits_for_the_answer() -> None:
    # Kafka's SocketServer mutes a channel after reading a request (processCompletedReceives) and
    # unmutes it once the answer is sent (tryUnmuteChannel).
    park = Parking()
    server = Server(park, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(b"".join(_frame(16, i) for i in range(3)))
    assert len(park.requests) == 1 and t.reading  # the other two are read and held
    for answered in range(1, 4):
        park.answer_all()
        assert len(park.requests) == 0  # not dispatched from inside the answer
        await _turn()
        assert t.written_bytes == answered * 8
        assert len(park.requests) == (1 if answered < 3 else 0)
    assert t.reading


async def test_held_bytes_pause_reading_and_resume_at_half() -> None:
    park = Parking()
    server = Server(park, max_inflight=1000, max_inflight_bytes=10_000, idle_timeout_ms=0)
    conn, t = _connect(server)
    # 20 frames of 1000 bytes in one read: the first is dispatched, 19 are held: reading pauses.
    conn.data_received(b"".join(_frame(1000, i) for i in range(20)))
    assert not t.reading and len(park.requests) == 1
    for _ in range(14):  # 19 -> 5 held: 5,000 bytes, not under half yet
        park.answer_all()
        await _turn()
    assert not t.reading and len(park.requests) == 1
    park.answer_all()
    await _turn()
    assert t.reading  # 4 held, under half of max_inflight_bytes
    for _ in range(5):
        park.answer_all()
        await _turn()
    assert t.written_bytes == 20 * 8 and not park.requests


async def test_held_count_pauses_reading() -> None:
    park = Parking()
    server = Server(park, max_inflight=4, max_inflight_bytes=0, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(b"".join(_frame(16, i) for i in range(10)))
    assert not t.reading and len(park.requests) == 1  # 9 held
    for _ in range(8):  # down to 1 held, under half of 4
        park.answer_all()
        await _turn()
    assert t.reading
    for _ in range(2):
        park.answer_all()
        await _turn()
    assert t.written_bytes == 10 * 8


async def test_an_incomplete_frame_is_read_whatever_its_size_when_its_turn_has_come() -> None:
    park = Parking()
    server = Server(park, max_inflight_bytes=1000, idle_timeout_ms=0)
    conn, t = _connect(server)
    big = _frame(5000)
    conn.data_received(big[:3000])
    assert t.reading  # nothing to wait for: the rest of the request must be read
    conn.data_received(big[3000:])
    assert len(park.requests) == 1


async def test_a_bad_frame_size_behind_a_parked_request_closes_at_once() -> None:
    park = Parking()
    server = Server(park, max_request_bytes=1000, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(_frame(16) + struct.pack(">i", 1001))
    assert len(park.requests) == 1 and conn.closed and t.closing


async def test_unsent_output_pauses_reading_until_the_transport_drains() -> None:
    park = Parking()
    server = Server(park, max_inflight=1000, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.pause_writing()  # the transport's buffer passed the high-water mark: the client is not reading
    assert not t.reading
    conn.data_received(_frame(16))
    assert not park.requests  # held, not dispatched
    conn.resume_writing()
    await _turn()
    assert t.reading and len(park.requests) == 1


async def test_a_frame_larger_than_max_request_bytes_closes_before_buffering() -> None:
    server = Server(Parking(), max_request_bytes=1000, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(struct.pack(">i", 1001))
    assert conn.closed and t.closing


class Answering:
    """A dispatcher that answers every request at once (a heartbeat's fast path), with ``size``
    bytes after the size prefix; ``acks0`` requests get no answer (Produce with acks=0)."""

    def __init__(self, size: int = 4, acks0: bool = False) -> None:
        self.size = size
        self.acks0 = acks0
        self.dispatched = 0

    def __call__(self, conn: Connection, frame: bytes) -> None:
        self.dispatched += 1
        req = Request(conn, 12, 0, 0, None, {}, lambda _r, _b: b"")
        conn.enqueue(req)
        if self.acks0:
            req.no_response()
        else:
            req.respond_raw(struct.pack(">i", self.size) + b"r" * self.size)


class SlowReaderTransport(FakeTransport):
    """Calls ``pause_writing`` as a real transport does once its unsent bytes pass ``high``: the
    client reads nothing."""

    def __init__(self, loop: asyncio.AbstractEventLoop, high: int) -> None:
        super().__init__(loop)
        self.high = high

    def write(self, data: bytes | bytearray | memoryview) -> None:
        super().write(data)
        if self.written_bytes > self.high and self.protocol is not None:
            self.protocol.pause_writing()


async def test_big_read_writes_answers_every_64_frames_in_order() -> None:
    server = Server(Answering(), max_inflight=1024, max_inflight_bytes=0, idle_timeout_ms=0)
    conn, t = _connect(server)
    # 200 frames in one read: the answers ready so far are written every 64 frames, not only
    # once the whole read is dispatched.
    conn.data_received(b"".join(_frame(16, i) for i in range(200)))
    assert len(t.written) == 3 and t.written_bytes == 192 * 8
    await _turn()
    assert t.written_bytes == 200 * 8 and t.reading


async def test_big_answers_are_written_at_the_write_limit_and_unsent_output_stops_dispatching() -> None:
    answering = Answering(size=100_000)
    server = Server(answering, max_write_buffer_bytes=250_000, idle_timeout_ms=0)
    conn = Connection(server)
    t = SlowReaderTransport(asyncio.get_running_loop(), high=250_000)
    t.protocol = conn
    conn.connection_made(t)
    # 20 pipelined requests with 100 KB answers, from a client that reads nothing: answers are
    # written as soon as 250 KB of them are ready, and once the transport holds more than its
    # high-water mark nothing more is dispatched and nothing more is read.
    conn.data_received(b"".join(_frame(16, i) for i in range(20)))
    assert answering.dispatched == 3
    assert t.written_bytes == 3 * 100_004 and not t.reading
    await _turn()
    assert answering.dispatched == 3
    conn.resume_writing()  # the client read it all
    await _turn()
    assert answering.dispatched == 6 and not t.reading


async def test_a_request_without_answer_lets_the_next_go_at_once() -> None:
    answering = Answering(acks0=True)
    server = Server(answering, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(b"".join(_frame(16, i) for i in range(5)))
    assert answering.dispatched == 5
    await _turn()
    assert t.written_bytes == 0 and t.reading


class ClosingAfterFirst(Answering):
    """Answers the first request and closes after writing it (a failed SASL authentication)."""

    def __call__(self, conn: Connection, frame: bytes) -> None:
        super().__call__(conn, frame)
        if self.dispatched == 1:
            conn.close_after_write("authentication failed")


async def test_nothing_after_a_close_after_write_request_is_dispatched() -> None:
    closing = ClosingAfterFirst()
    server = Server(closing, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(b"".join(_frame(16, i) for i in range(3)))
    await _turn()
    assert closing.dispatched == 1
    assert t.written_bytes == 8 and conn.closed


async def test_an_answer_ready_outside_a_read_is_written_at_once() -> None:
    # A parked request answered later (an append settled, a fetch woken) has nothing to share its
    # write with: it goes out from inside the answer, not from the loop's next iteration (issue 29
    # item 4). The frames held behind it still wait for the loop: never dispatched from inside the
    # handler that answered (the appender's settling loop, a fetch wake-up).
    park = Parking()
    server = Server(park, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(_frame(16, 0) + _frame(16, 1))
    assert len(park.requests) == 1
    park.answer_all()
    assert t.written_bytes == 8
    assert len(park.requests) == 0
    await _turn()
    assert len(park.requests) == 1  # the held one's turn came
    # Nothing held: the connection is unblocked at once, the next frame read is dispatched at once.
    park.answer_all()
    assert t.written_bytes == 16
    conn.data_received(_frame(16, 2))
    assert len(park.requests) == 1 and t.reading


async def test_an_answer_that_cannot_be_written_closes_its_connection_not_the_answerer() -> None:
    # Written from inside whoever answered (another connection's JoinGroup, the appender's
    # settling loop): a transport that raises closes this connection and nothing else.
    park = Parking()
    server = Server(park, idle_timeout_ms=0)
    conn, t = _connect(server)
    conn.data_received(_frame(16, 0))

    def broken(data: bytes) -> None:
        raise RuntimeError("unable to perform operation: the handler is closed")

    t.write = broken  # type: ignore[method-assign]
    park.answer_all()  # does not raise
    assert conn.closed
