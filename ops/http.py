"""The small HTTP/1.1 server behind ``/metrics`` and the dashboard, on the daemon's own event loop.

Why not a library: the endpoints answer one request per connection (``Connection: close``), which
is what Prometheus and an ``EventSource`` need, and the fault-injection control endpoint reads small
JSON bodies (``Content-Length``, at most ``BODY_LIMIT``); parsing that is a request line, headers
and a bounded body. aiohttp would bring multidict, yarl, frozenlist, aiosignal and
propcache (C extensions) into every install for that, and prometheus-client's own server runs in a
thread, where reading the coordinator's dicts would race the loop that mutates them. Serving on the
loop means a handler reads the core between two requests, never in the middle of one.

A route answers a ``Response`` (a whole body) or a ``Stream`` (an async iterator of chunks, for
server-sent events), which ends when the iterator does or when the client goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import structlog

log = structlog.get_logger("groupd.ops.http")

HEAD_LIMIT = 16 * 1024  # request line and headers; nothing legitimate comes close
HEAD_TIMEOUT_S = 10.0
BODY_LIMIT = 64 * 1024  # a JSON document of the control endpoint
STREAM_STALL_S = 30.0
LINGER_S = 2.0  # reading what a refused client still sends, before closing
LINGER_BYTES = 1024 * 1024


@dataclass
class HttpRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class Response:
    status: str
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stream:
    """A response without a length: each chunk is written and drained before the next is asked for."""

    chunks: AsyncIterator[bytes]
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], Awaitable[Response | Stream]]
# The server's own answers (no route, wrong method, a request it cannot read): status, kind, message.
ErrorBody = Callable[[str, str, str], Response]


def text(status: str, message: str) -> Response:
    return Response(status, (message + "\n").encode())


def text_error(status: str, _kind: str, message: str) -> Response:
    return text(status, message)


class BadRequest(ValueError):
    """A request the server answers itself, with ``status`` and then closes: what any HTTP server
    answers to a line that is not a request line (400) or a head too large to read (431)."""

    def __init__(self, status: str, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class HttpServer:
    """Routes by exact path, then by the longest route ``/prefix/*`` whose prefix starts the path;
    ``name`` is the prefix of its log events (``metrics_listening``, ...). ``methods``: what the
    handlers answer (beyond GET and HEAD they check ``req.method`` themselves). ``error`` renders
    the server's own 4xx/5xx answers (the control endpoint's are JSON, as its handlers' are)."""

    def __init__(
        self,
        name: str,
        routes: dict[str, Handler],
        *,
        not_found: str = "not found",
        methods: tuple[str, ...] = ("GET", "HEAD"),
        error: ErrorBody = text_error,
    ) -> None:
        self.name = name
        self.routes = routes
        self.not_found = not_found
        self.methods = methods
        self.error = error
        self._server: asyncio.base_events.Server | None = None
        self._streams: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True, limit=HEAD_LIMIT)
        addr = self._server.sockets[0].getsockname()
        return addr[0], addr[1]

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        # Open event streams never end by themselves: end them, or wait_closed waits for ever.
        for task in list(self._streams):
            task.cancel()
        await asyncio.gather(*self._streams, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            req = await asyncio.wait_for(_read_head(reader), timeout=HEAD_TIMEOUT_S)
        except BadRequest as e:
            await self._refuse(self.error(e.status, e.kind, str(e)), reader, writer)
            return
        except (asyncio.IncompleteReadError, TimeoutError, OSError):
            # The client went away, or sent nothing usable in time: nobody is waiting for an answer.
            writer.close()
            return
        if req.method not in self.methods:
            allowed = ", ".join(self.methods[:-1]) + " and " + self.methods[-1]
            answer: Response | Stream = self.error("405 Method Not Allowed", "method_not_allowed", "only " + allowed)
        else:
            handler = self._route(req.path)
            if handler is None:
                answer = self.error("404 Not Found", "not_found", self.not_found)
            else:
                try:
                    answer = await handler(req)
                except Exception:
                    log.exception(f"{self.name}_request_failed", path=req.path)
                    answer = self.error("500 Internal Server Error", "internal", "the page could not be rendered")
        try:
            if isinstance(answer, Stream) and req.method == "GET":
                await self._stream(answer, reader, writer)
            else:
                if isinstance(answer, Stream):
                    answer = Response("200 OK", b"", answer.content_type, answer.headers)
                head = _head(answer.status, answer.content_type, answer.headers, len(answer.body))
                writer.write(head if req.method == "HEAD" else head + answer.body)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _refuse(self, answer: Response, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer a request that could not be read, then close. What the client still sends is read
        and dropped for a moment first: closing a socket with unread bytes resets the connection,
        and the reset can reach the client before the answer it was about to read."""
        try:
            writer.write(_head(answer.status, answer.content_type, answer.headers, len(answer.body)) + answer.body)
            await asyncio.wait_for(writer.drain(), LINGER_S)
            if writer.can_write_eof():
                writer.write_eof()
            async with asyncio.timeout(LINGER_S):
                drained = 0
                while drained < LINGER_BYTES and (chunk := await reader.read(65536)):
                    drained += len(chunk)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    def _route(self, path: str) -> Handler | None:
        handler = self.routes.get(path)
        if handler is None:
            prefixes = [r for r in self.routes if r.endswith("/*") and path.startswith(r[:-1])]
            if prefixes:
                handler = self.routes[max(prefixes, key=len)]
        return handler

    async def _stream(self, answer: Stream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._streams.add(task)
        # The client never sends anything after its request: EOF on the socket means it went away,
        # noticed at once instead of at the next failed write.
        watcher = asyncio.create_task(_cancel_on_eof(reader, task))
        try:
            writer.write(_head("200 OK", answer.content_type, answer.headers, None))
            async for chunk in answer.chunks:
                writer.write(chunk)
                # A client that stops reading holds one stream slot and one chunk of buffer, and
                # is dropped after a while (TimeoutError is an OSError: the connection is closed).
                await asyncio.wait_for(writer.drain(), STREAM_STALL_S)
        finally:
            watcher.cancel()
            self._streams.discard(task)
            with contextlib.suppress(Exception):
                await answer.chunks.aclose()  # type: ignore[attr-defined]


def _head_too_large() -> BadRequest:
    """Kafka's and most HTTP servers' answer to a head past their limit (RFC 6585)."""
    return BadRequest(
        "431 Request Header Fields Too Large",
        "header_too_large",
        f"the request line and headers are limited to {HEAD_LIMIT} bytes",
    )


_TOKEN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_PRINTABLE = frozenset(range(0x20, 0x7F))


async def _read_head(reader: asyncio.StreamReader) -> HttpRequest:
    """The request (with its body). Raises BadRequest for what is not an HTTP/1.x request or cannot
    be read (too large, no length), IncompleteReadError when the client goes away before its head
    starts or its body ends."""
    buf = bytearray()
    while (end := buf.find(b"\r\n\r\n")) < 0:
        _check_request_line(bytes(buf[:HEAD_LIMIT]))
        if len(buf) > HEAD_LIMIT:
            raise _head_too_large()
        chunk = await reader.read(4096)
        if not chunk:
            if not buf:
                raise asyncio.IncompleteReadError(b"", None)
            raise BadRequest("400 Bad Request", "bad_request", "the request ended before its headers did")
        buf += chunk
    if end > HEAD_LIMIT:
        raise _head_too_large()
    lines = buf[:end].decode("latin-1").split("\r\n")
    rest = bytes(buf[end + 4 :])
    _check_request_line(lines[0].encode("latin-1"), complete=True)
    method, target, _version = lines[0].split(" ")
    if not target.startswith("/"):
        raise BadRequest("400 Bad Request", "bad_request", "the request target must be a path starting with /")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest("400 Bad Request", "bad_request", f"not a header line ('Name: value'): {line[:80]!r}")
        headers[name.lower()] = value.strip()
    path, _, query = target.partition("?")
    body = b""
    if "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            length = -1
        if length < 0:
            raise BadRequest("400 Bad Request", "bad_request", "bad Content-Length")
        if length > BODY_LIMIT:
            raise BadRequest("413 Content Too Large", "too_large", f"bodies are limited to {BODY_LIMIT} bytes")
        body = rest[:length]
        if len(body) < length:
            body += await reader.readexactly(length - len(body))
    elif "transfer-encoding" in headers:
        raise BadRequest("411 Length Required", "length_required", "send the body with a Content-Length")
    return HttpRequest(method, path, query, headers, body)


def _check_request_line(data: bytes, *, complete: bool = False) -> None:
    """BadRequest as soon as the first line (or what has come of it) cannot be ``METHOD target
    HTTP/1.x``: binary bytes are refused at once instead of waiting for a blank line never sent."""
    complete = complete or b"\r\n" in data
    line = data.split(b"\r\n", 1)[0]
    method = line.partition(b" ")[0]
    ok = all(b in _PRINTABLE for b in line) and len(method) <= 20 and all(b in _TOKEN for b in method)
    if ok and complete:
        parts = line.split(b" ")
        ok = len(parts) == 3 and bool(method) and parts[2] in (b"HTTP/1.0", b"HTTP/1.1")
    if not ok:
        raise BadRequest("400 Bad Request", "bad_request", "not an HTTP/1.1 request line: METHOD /path HTTP/1.1")


async def _cancel_on_eof(reader: asyncio.StreamReader, task: asyncio.Task[None]) -> None:
    with contextlib.suppress(Exception):
        while await reader.read(1024):
            pass
    task.cancel()


def _head(status: str, content_type: str, headers: dict[str, str], length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
