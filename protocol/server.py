"""The asyncio TCP server: framing, one request at a time per connection, batched writes, backpressure.

Each connection is an ``asyncio.Protocol`` (not streams: pipelined requests are ~10x cheaper this
way, design.md). Frames are 4-byte size prefixed; the size is checked against the connection's bound
(``max_request_bytes``, or less until the application lifts it: ``Server.start(max_frame_bytes=...)``)
as soon as the prefix arrives, before anything is buffered.

A connection processes its requests as Kafka's ``SocketServer`` does: one at a time. Kafka mutes a
channel once it has read a request and reads the next only after the answer is sent
(``processCompletedReceives``, ``tryUnmuteChannel``), so an OffsetFetch pipelined behind an
OffsetCommit sees the commit, and a LeaveGroup behind a parked JoinGroup waits for it. Here the
bytes keep being read and framed (pipelining on the wire stays cheap), but a frame is dispatched
only once the previous request's answer is ready; until then it is held. A request answered at
once (a heartbeat) lets the next one go in the same pass; one answered later (a JoinGroup waiting
for a rebalance, an OffsetCommit waiting for the disk, a long-polling Fetch) holds its connection's
later requests, and only those. Produce with acks=0 has no answer and lets the next one go at once.
Answers ready are written in order, in one ``transport.write``, once per event-loop iteration, or
at once every 64 answers or ``max_write_buffer_bytes`` of them; the answer of a request answered
later (the one holding its connection) is written as soon as it is ready.

Nothing a client sends or fails to read grows memory without bound: at most one request per
connection is being processed; reading pauses (``pause_reading``) while the held frames reach
``max_inflight`` or ``max_inflight_bytes``, or while the transport holds any unsent answer over
TCP (``pause_writing`` at a high-water mark of 1: Kafka's channel muted while a send is in flight;
``max_write_buffer_bytes`` over TLS), and nothing is dispatched then either, so a client that does
not read pins one flush of answers (``max_write_buffer_bytes``, or one larger answer); a frame
larger than the connection's bound (``max_request_bytes``, or ``sasl.server.max.receive.size``
before a SASL client has authenticated) closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import os
import socket
import ssl as ssl_
import struct
import types
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from .ratelimit import LogLimiter

log = structlog.get_logger("groupd.server")
limited_log = LogLimiter(log)
# Connections closed for what they sent (a bad frame, an unknown API, no authentication): a fuzzer
# or a broken client makes thousands a minute (102,842 lines in two minutes of fuzzing). The first
# few of each reason and host are logged, then one line per interval with the count.
closed_log = LogLimiter(log, burst=10)

_conn_ids = itertools.count(1)
_FRAME_SIZE = struct.Struct(">i")
_PRODUCE_KEY = b"\x00\x00"  # a request frame starts with its api key (Produce = 0)
_FLUSH_EVERY = 64  # answers ready that are written at once rather than at the end of the loop iteration


def _rest_of_frame(buf: bytearray) -> int:
    """How many bytes the frame that starts ``buf`` still lacks (<= 0 when its size is not in
    yet or it is complete: ``_take_frames`` then decides, and checks the size's bounds)."""
    if len(buf) < 4:
        return 0
    return _FRAME_SIZE.unpack_from(buf)[0] + 4 - len(buf)


# A request's fields and its header read in C (protocol/_wire.c, issue 26: ~0.5 us of a ~6 us
# heartbeat in Python); the Python classes below stay the reference and the fallback (no compiler,
# GROUPD_NO_NATIVE=1, read once here). tests/protocol/test_wire_native.py checks the two agree.
try:
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        raise ImportError("GROUPD_NO_NATIVE=1")
    # by name: a relative import would import the package first
    _wire: Any = importlib.import_module(__name__.rpartition(".")[0] + "._wire")
except ImportError:
    _wire = None


class _PyRequestFields:
    """The fields of a ``Request`` (the pure-Python reference of ``_wire.RequestBase``)."""

    __slots__ = (
        "api_key",
        "api_version",
        "body",
        "client_id",
        "conn",
        "correlation_id",
        "encode_response",
        "payload",
        "received_ns",
    )

    def __init__(
        self,
        conn: Connection,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
        body: dict[str, Any],
        encode_response: Callable[[Request, dict[str, Any]], bytes],
        received_ns: int = 0,
    ) -> None:
        self.conn = conn
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body = body
        self.encode_response = encode_response
        self.payload: bytes | None = None
        self.received_ns = received_ns


_RequestFields: Any = _PyRequestFields if _wire is None else _wire.RequestBase


class Request(_RequestFields):  # type: ignore[misc]
    """One decoded request and the slot its response goes into: ``Request(conn, api_key, api_version,
    correlation_id, client_id, body, encode_response, received_ns=0)``."""

    __slots__ = ()

    conn: Connection
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]
    encode_response: Callable[[Request, dict[str, Any]], bytes]
    payload: bytes | None
    received_ns: int

    @property
    def client_host(self) -> str:
        return self.conn.peer_host

    @property
    def done(self) -> bool:
        return self.payload is not None

    def respond(self, response: dict[str, Any]) -> None:
        if self.payload is not None:
            return  # answered already (e.g. a late timer after a connection error answer)
        try:
            self.payload = self.encode_response(self, response)
        except Exception:
            log.exception(
                "response_encode_failed", api_key=self.api_key, api_version=self.api_version, conn=self.conn.id
            )
            self.payload = b""
            self.conn.close("response could not be encoded")
            return
        conn = self.conn
        if not (conn._flush_scheduled or conn.closed):  # ready()'s own first check, without its call
            conn.ready()

    def respond_raw(self, payload: bytes) -> None:
        """Answer with an already framed response (used for ApiVersions fallbacks)."""
        if self.payload is None:
            self.payload = payload
            self.conn.ready()

    def no_response(self) -> None:
        """Requests that Kafka never answers (Produce with acks=0) still hold their place in order."""
        if self.payload is None:
            self.payload = b""
            self.conn.ready()


class Connection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.id = next(_conn_ids)
        self.transport: asyncio.Transport | None = None
        self.peer_host = ""
        self.peer_port = 0
        self._buf = bytearray()  # the start of a frame not complete yet
        # Complete frames waiting for their turn, in order, and their bytes (size prefixes excluded).
        self._held: deque[bytes] = deque()
        self._held_bytes = 0
        self._pending: deque[Request] = deque()  # dispatched, answer not written yet
        self._flush_scheduled = False
        # Answers ready and not written since the last flush: written once per loop iteration, or
        # at once when there are _FLUSH_EVERY of them or flush_bytes of them.
        self._unflushed = 0
        self._unflushed_bytes = 0
        self._flush_bytes = server.flush_bytes
        # Why frames are held rather than dispatched: the last request is unanswered (_waiting),
        # the transport holds more unsent output than its high-water mark (_write_paused), or the
        # connection is closing after its last answers. _blocked is set with any of them and
        # cleared only by _drain, which dispatches the held frames before any newer one.
        self._waiting = False
        self._write_paused = False
        self._closing = False
        self._blocked = False
        self._drain_scheduled = False
        self._paused = False  # reading paused (transport.pause_reading)
        # The client closed its side with requests still held or unanswered: they are processed
        # (Kafka handles the requests it has received before it sees the close), then we close.
        self._eof = False
        self.closed = False
        self.last_active = 0.0
        # Set by the application: the listener this connection came in on (``start(listener=...)``)
        # and its security session (principal, SASL state; see ``Dispatcher.open_session``).
        self.listener: Any = None
        self.session: Any = None
        # Called once with this connection when it closes (``add_close_callback``): state parked
        # for its requests (a long-polling Fetch) is dropped then, not when its timer fires.
        self._close_callbacks: dict[Callable[[Connection], None], None] = {}
        self._unread: list[bytes] = []  # received while the server held reading
        # The largest frame this connection may send now, and the setting that says so (named in
        # the close's log line). A SASL listener starts lower, until authentication completes
        # (``Server.start(max_frame_bytes=...)``); the application raises it then.
        self.max_frame_bytes = server.max_request_bytes
        self.frame_limit_setting = "max_request_bytes"

    # --- asyncio.Protocol -------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername") or ("", 0)
        self.peer_host, self.peer_port = peer[0], peer[1]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.last_active = self.server.loop.time()
        high = self.server.max_write_buffer_bytes
        if high > 0:
            # Kafka keeps a channel muted while a response send is in flight (SocketServer's
            # Selector.mute until completedSends): at most one response per connection waits in
            # the broker. The TCP transport's equivalent: it reports "paused" as soon as output is
            # left that the kernel would not take (high-water mark 1: it pauses above it) and
            # "resumed" once all of it is sent (low-water mark 0). Until then nothing is dispatched
            # and nothing is read, so a client that never reads pins one flush of answers (at most
            # max_write_buffer_bytes, or one answer larger than that), not that much on top of
            # everything already queued (a high-water mark of max_write_buffer_bytes let ~2 such
            # flushes pile up: 9.6 MiB per connection of 4.8 MB Fetch answers under the 4 MiB
            # default). TLS transports keep the high-water mark max_write_buffer_bytes: with marks
            # this low their SSL layer stopped answering (a SASL_SSL ApiVersions timed out).
            tls = transport.get_extra_info("sslcontext") is not None
            with contextlib.suppress(AttributeError, NotImplementedError, ValueError):
                if tls:
                    transport.set_write_buffer_limits(high=high, low=high // 4)  # type: ignore[attr-defined]
                else:
                    transport.set_write_buffer_limits(high=1, low=0)  # type: ignore[attr-defined]
        self.server.connection_opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._drop_buffers()
        self._run_close_callbacks()
        self.server.connection_closed(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self.server.reading_held:
            # Read before the pause took (a connection accepted with its first request): kept
            # unread until the server reads again (Server.hold_reading).
            self._unread.append(data)
            self._check_reading()
            return
        self.last_active = self.server.loop.time()
        buf = self._buf
        view: bytes | memoryview = data
        if buf:
            need = _rest_of_frame(buf)
            if 0 < need < len(data):
                # Only the rest of the buffered frame joins the buffer; the frames after it are
                # sliced out of ``data`` below. A producer's 256 KiB reads (several ~100 KB
                # Produce requests and the start of the next) were appended whole, then every
                # frame copied twice out of the buffer: three copies of each byte (issue 26).
                view = memoryview(data)
                buf += view[:need]
                pos = self._take_frames(buf)  # the frame is complete: all of buf, or closed
                if self.closed:
                    return
                del buf[:pos]
                view = view[need:]
            else:
                buf += data
                pos = self._take_frames(buf)
                if pos and not self.closed:
                    del buf[:pos]
                if self._blocked and not self.closed and self._may_pause():
                    self._check_reading()
                return
        # Nothing buffered: frames are sliced straight out of ``data`` (one copy each instead of
        # two through the bytearray) and only an incomplete tail is kept.
        pos = self._take_frames(view)
        if pos < len(view) and not self.closed:
            buf += view[pos:] if type(view) is memoryview else memoryview(view)[pos:]
        if self._blocked and not self.closed and self._may_pause():
            self._check_reading()

    def _may_pause(self) -> bool:
        """Whether ``_check_reading`` may change anything for a blocked connection: not when reading
        goes on, nothing is held and no partial frame waits (the common request answered later,
        e.g. a Produce waiting for its append: ~0.3 us a call, twice a request, issue 29 item 4)."""
        srv = self.server
        return bool(
            self._paused or self._write_paused or self._held or self._buf or srv.reading_held or srv.max_inflight <= 0
        )

    def _take_frames(self, buf: bytes | bytearray | memoryview) -> int:
        """Frame the complete requests at the start of ``buf``, each checked against
        the connection's bound as soon as its size arrives, and dispatch each whose turn has come;
        the others are held. Returns how many bytes they took."""
        pos = 0
        end = len(buf)
        max_bytes = self.max_frame_bytes
        unpack = _FRAME_SIZE.unpack_from
        dispatch = self.server.dispatch
        pending = self._pending
        while end - pos >= 4:
            (size,) = unpack(buf, pos)
            if size < 8 or size > max_bytes:
                self.close("frame size out of bounds", frame_size=size, **{self.frame_limit_setting: max_bytes})
                return pos
            start = pos + 4
            if end - start < size:
                break
            pos = start + size
            if type(buf) is bytearray:  # one copy, not a bytearray slice and then its bytes
                frame = bytes(memoryview(buf)[start:pos])
            else:
                frame = buf[start:pos]
                if type(frame) is not bytes:  # a memoryview's slice (data_received)
                    frame = bytes(frame)
            if self._blocked:
                self._held.append(frame)
                self._held_bytes += size
                continue
            # _dispatch inlined (issue 26: a call per frame is ~2% of a heartbeat's server CPU)
            dispatch(self, frame)
            if self.closed:
                return pos
            if not pending:
                continue  # nothing to answer (see _dispatch)
            payload = pending[-1].payload
            if payload is None:
                self._waiting = self._blocked = True  # see _dispatch
                continue
            self._unflushed += 1
            self._unflushed_bytes += len(payload)
            if self._unflushed >= _FLUSH_EVERY or self._unflushed_bytes >= self._flush_bytes:
                self._flush()
        return pos

    def _dispatch(self, frame: bytes) -> None:
        self.server.dispatch(self, frame)
        pending = self._pending
        if not pending:
            return  # closed, or nothing to answer
        payload = pending[-1].payload
        if payload is None:
            # One request at a time: Kafka mutes the channel once it has read a request and reads
            # the next only after the answer is sent (SocketServer.processCompletedReceives,
            # tryUnmuteChannel). The frames behind it are held until _flush writes its answer.
            self._waiting = self._blocked = True
            return
        self._unflushed += 1
        self._unflushed_bytes += len(payload)
        if self._unflushed >= _FLUSH_EVERY or self._unflushed_bytes >= self._flush_bytes:
            # A big read (of heartbeats, or of fetches with big answers) would otherwise hold every
            # answer until the whole read is dispatched.
            self._flush()

    def _drain(self) -> None:
        """Dispatch the held frames in order, for as long as each is answered at once."""
        self._drain_scheduled = False
        if self.closed:
            return
        if not (self._waiting or self._write_paused or self._closing):
            self._blocked = False
            held = self._held
            while held and not self._blocked:
                frame = held.popleft()
                self._held_bytes -= len(frame)
                self._dispatch(frame)
                if self.closed:
                    return
        if self._eof:
            self._finish_eof()
            return
        if self._blocked and not self._may_pause():
            return  # _check_reading would find nothing to do
        if self._paused or self._write_paused or self._blocked or self.server.reading_held:
            self._check_reading()

    def _check_reading(self) -> None:
        """Reading pauses while the transport holds unsent output (a client that does not read
        its answers stops being read; it resumes once all of it is sent), or while the held
        frames reach ``max_inflight`` or ``max_inflight_bytes`` (an incomplete frame counted; it
        resumes at half). A frame is only ever incomplete and unheld while
        nothing blocks dispatching, and then reading goes on, whatever its size."""
        srv = self.server
        if self._closing or self.transport is None:
            return
        if srv.reading_held:
            # The server is cut off from its clients (Server.hold_reading): bytes stay in the
            # socket, as behind a network partition, and are read when it heals.
            if not self._paused:
                self._paused = True
                self.transport.pause_reading()
            return
        held = len(self._held)
        held_bytes = self._held_bytes + len(self._buf)
        if self._paused:
            if self._write_paused or (
                self._blocked
                and (
                    held >= max(1, srv.max_inflight // 2)
                    or (srv.max_inflight_bytes > 0 and held_bytes >= srv.max_inflight_bytes // 2)
                )
            ):
                return
            self._paused = False
            self.transport.resume_reading()
        elif self._write_paused or (
            self._blocked
            and (held >= srv.max_inflight or (srv.max_inflight_bytes > 0 and held_bytes >= srv.max_inflight_bytes))
        ):
            self._paused = True
            self.transport.pause_reading()

    # Called by the transport when output is left that the kernel would not take and when all of
    # it is sent (marks set in connection_made).
    def pause_writing(self) -> None:
        self._write_paused = self._blocked = True
        self._check_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self._drain_scheduled and not self.closed:
            # Not from inside the transport's callback: held frames are dispatched on a clean stack.
            self._drain_scheduled = True
            self.server.loop.call_soon(self._drain)

    def eof_received(self) -> bool | None:
        if self._closing or not any(frame[:2] == _PRODUCE_KEY for frame in self._held):
            # Close our side too: what is in progress finishes on its own, a parked fetch is
            # dropped by the close callbacks, and held requests whose answer can no longer be
            # read are not worth running.
            return None
        # A Produce held behind the request in progress still runs: with acks=0 having sent it
        # is all the acknowledgement a client gets (kafka-python's flush() then close()), and
        # Kafka handles what it has read before it sees the close. The transport is closed once
        # the last held request is dispatched (_finish_eof).
        self._eof = True
        return True

    # --- slots ------------------------------------------------------------------------------------
    def enqueue(self, req: Request) -> None:
        self._pending.append(req)

    def ready(self) -> None:
        if self._flush_scheduled or self.closed:
            return
        if self._waiting:
            # The answer of the request that holds the connection, ready outside of a read (an
            # append settled, a parked fetch woken, a rebalance completed): nothing can join it in
            # this iteration's write, so it is written now rather than from the loop's next
            # iteration, which under load first reads every ready connection (~10 ms with three
            # brokers' connections on one loop: a producer's round trip longer by that much, issue
            # 29 item 4). Kafka's processor sends a response as soon as it is queued
            # (SocketServer.Processor.processNewResponses).
            try:
                self._flush(later=True)
            except Exception:  # raised into whoever answered (another connection's handler)
                log.exception("response_write_failed", conn=self.id)
                self.close("response could not be written")
            return
        self._flush_scheduled = True
        self.server.loop.call_soon(self._flush)

    def _flush(self, later: bool = False) -> None:
        """Write the answers ready, in order; with the awaited one written, the held frames' turn:
        dispatched now, or (``later``: called from inside whatever answered, e.g. the appender's
        settling loop) from the next loop iteration, with the frames arriving meanwhile held."""
        self._flush_scheduled = False
        self._unflushed = self._unflushed_bytes = 0
        if self.closed or self.transport is None:
            return
        pending = self._pending
        out: list[bytes] = []
        while pending and pending[0].payload is not None:
            payload = pending.popleft().payload
            if payload:
                out.append(payload)
        if out:
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])
        if self._waiting and not pending:
            # The awaited answer is written: the next request's turn.
            self._waiting = False
            if later and self._held and not self._write_paused:
                if not self._drain_scheduled:
                    self._drain_scheduled = True
                    self.server.loop.call_soon(self._drain)
            else:
                self._drain()  # dispatches nothing when later: unblocks and resumes reading
        elif self._eof:
            self._finish_eof()

    def _finish_eof(self) -> None:
        if not (self._held or self.closed) and self.transport is not None:
            self.transport.close()

    def _drop_buffers(self) -> None:
        self._pending.clear()
        self._held.clear()
        self._held_bytes = 0
        self._buf = bytearray()

    def close(self, reason: str, **fields: Any) -> None:
        if self.closed:
            return
        self._log_closed(reason, fields)
        self.closed = True
        self._drop_buffers()
        if self.transport is not None:
            self.transport.abort()
        self._run_close_callbacks()

    def _log_closed(self, reason: str, fields: dict[str, Any]) -> None:
        closed_log.warning(
            "connection_closed",
            key=(reason, self.peer_host),
            conn=self.id,
            peer=f"{self.peer_host}:{self.peer_port}",
            reason=reason,
            **fields,
        )

    def add_close_callback(self, callback: Callable[[Connection], None]) -> None:
        """Call ``callback(self)`` once, when this connection closes (at once if it has). Adding the
        same callback again is a no-op, so a handler may add its bound method on every request."""
        if self.closed:
            callback(self)
        else:
            self._close_callbacks[callback] = None

    def _run_close_callbacks(self) -> None:
        callbacks, self._close_callbacks = self._close_callbacks, {}
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("close_callback_failed", conn=self.id)

    def close_after_write(self, reason: str, *, delay_ms: int = 0, quiet: bool = False, **fields: Any) -> None:
        """Close once the responses answered so far are written (Kafka sends a failed SASL exchange
        its error response, then closes). Nothing more is read from the connection.

        ``delay_ms`` keeps the socket open that long after the last response went out, as Kafka's
        ``connection.failed.authentication.delay.ms`` does: a client that reads the error response
        and sees the close in the same poll may report only the close (kafka-python 3 did, about
        one time in five), and a client retrying bad credentials in a loop is slowed down.
        ``quiet``: the caller logged why already (a failed SASL exchange, rate-limited there), so
        the close is only a debug line."""
        self._closing = self._blocked = True  # nothing after this request is dispatched

        def later() -> None:
            if self.closed:
                return
            self._flush()
            self._drop_buffers()
            if quiet:
                peer = f"{self.peer_host}:{self.peer_port}"
                log.debug("connection_closed", conn=self.id, peer=peer, reason=reason, **fields)
            else:
                self._log_closed(reason, fields)
            self.closed = True
            transport = self.transport
            if transport is not None:
                if delay_ms > 0:
                    transport.pause_reading()
                    # close(), unlike abort(), sends what is buffered first.
                    self.server.loop.call_later(delay_ms / 1000, transport.close)
                else:
                    transport.close()
            self._run_close_callbacks()

        self.server.loop.call_soon(later)


class Server:
    """Listens and owns the connections; ``dispatch(conn, frame)`` is supplied by the application."""

    def __init__(
        self,
        dispatch: Callable[[Connection, bytes], None],
        *,
        max_request_bytes: int = 100 * 1024 * 1024,
        max_inflight: int = 1024,
        max_connections: int = 0,
        idle_timeout_ms: int = 600_000,
        max_inflight_bytes: int = 16 * 1024 * 1024,
        max_write_buffer_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        # An object with a Python __call__ (the Dispatcher) is kept as its bound method: calling the
        # instance goes through its type's call slot, a lookup and an argument copy more per frame
        # (issue 26).
        own_call = isinstance(vars(type(dispatch)).get("__call__"), types.FunctionType)
        self.dispatch = dispatch.__call__ if own_call else dispatch
        self.max_request_bytes = max_request_bytes
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self.max_write_buffer_bytes = max_write_buffer_bytes
        # Answers ready on one connection are written at once when they reach this many bytes.
        self.flush_bytes = max_write_buffer_bytes if max_write_buffer_bytes > 0 else 4 * 1024 * 1024
        self.max_connections = max_connections
        self.idle_timeout_ms = idle_timeout_ms
        self.connections: set[Connection] = set()
        self.loop = asyncio.get_event_loop()
        self._servers: list[asyncio.base_events.Server] = []
        self._idle_task: asyncio.Task[None] | None = None
        self.on_connection_change: Callable[[int], None] | None = None
        self.reading_held = False  # hold_reading(): connections accepted, nothing read from them

    def hold_reading(self, held: bool) -> None:
        """Stop (or resume) reading from every connection, new ones included: requests wait in the
        sockets unanswered, as across a network partition, and are processed once it is over."""
        self.reading_held = held
        for conn in list(self.connections):
            unread, conn._unread = conn._unread, []
            for data in unread:
                conn.data_received(data)
            conn._check_reading()

    async def start(
        self,
        host: str,
        port: int,
        *,
        ssl: ssl_.SSLContext | None = None,
        listener: Any = None,
        max_frame_bytes: tuple[int, str] | None = None,
    ) -> tuple[str, int]:
        """Listen on one address; call once per listener. ``ssl`` makes it a TLS listener (the
        handshake completes before ``connection_made``); ``listener`` is stored on each connection.
        ``max_frame_bytes``: (bytes, setting name), the frame limit of this listener's connections
        until the application raises it (Kafka's ``sasl.server.max.receive.size`` before SASL
        authentication completes: ``SaslServerAuthenticator.authenticate``)."""
        self.loop = asyncio.get_running_loop()

        def factory() -> Connection:
            conn = Connection(self)
            conn.listener = listener
            if max_frame_bytes is not None:
                conn.max_frame_bytes, conn.frame_limit_setting = max_frame_bytes
            return conn

        srv = await self.loop.create_server(factory, host, port, reuse_address=True, backlog=1024, ssl=ssl)
        self._servers.append(srv)
        if self.idle_timeout_ms > 0 and self._idle_task is None:
            self._idle_task = asyncio.create_task(self._close_idle())
        addr = srv.sockets[0].getsockname()
        return addr[0], addr[1]

    def connection_opened(self, conn: Connection) -> None:
        if self.max_connections and len(self.connections) >= self.max_connections:
            # A storm of them (3,518 lines in a second) is one line per interval with the count.
            limited_log.warning(
                "connection_refused",
                key="max connections",
                peer=f"{conn.peer_host}:{conn.peer_port}",
                reason="max connections",
                max_connections=self.max_connections,
            )
            conn.closed = True
            if conn.transport is not None:
                conn.transport.abort()
            return
        self.connections.add(conn)
        if self.reading_held:
            conn._check_reading()
        log.debug("connection_opened", conn=conn.id, peer=f"{conn.peer_host}:{conn.peer_port}")
        if self.on_connection_change:
            self.on_connection_change(len(self.connections))

    def connection_closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self.on_connection_change:
            self.on_connection_change(len(self.connections))

    async def _close_idle(self) -> None:
        # Kafka's connections.max.idle.ms: a connection with nothing pending and no traffic is closed.
        timeout = self.idle_timeout_ms / 1000
        while True:
            await asyncio.sleep(min(timeout / 2, 30))
            now = self.loop.time()
            for conn in list(self.connections):
                if not conn._pending and now - conn.last_active > timeout:
                    conn.close("idle", idle_ms=int((now - conn.last_active) * 1000))

    async def close(self) -> None:
        """Stop listening and close every connection; ``start`` may be called again afterwards
        (a stopped broker of a cluster listens again)."""
        servers, self._servers = self._servers, []
        for srv in servers:
            srv.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for srv in servers:
            await srv.wait_closed()
