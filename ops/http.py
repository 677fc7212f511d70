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


def text(status: str, message: str) -> Response:
    return Response(status, (message + "\n").encode())


class HttpServer:
    """Routes by exact path, then by the longest route ``/prefix/*`` whose prefix starts the path;
    ``name`` is the prefix of its log events (``metrics_listening``, ...). ``methods``: what the
    handlers answer (beyond GET and HEAD they check ``req.method`` themselves)."""

    def __init__(
        self,
        name: str,
        routes: dict[str, Handler],
        *,
        not_found: str = "not found",
        methods: tuple[str, ...] = ("GET", "HEAD"),
    ) -> None:
        self.name = name
        self.routes = routes
        self.not_found = not_found
        self.methods = methods
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
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError, OSError):
            writer.close()
            return
        if isinstance(req, Response):  # a body it could not read
            writer.write(_head(req.status, req.content_type, req.headers, len(req.body)) + req.body)
            with contextlib.suppress(OSError):
                await writer.drain()
            writer.close()
            return
        if req.method not in self.methods:
            allowed = ", ".join(self.methods[:-1]) + " and " + self.methods[-1]
            answer: Response | Stream = text("405 Method Not Allowed", "only " + allowed)
        else:
            handler = self._route(req.path)
            if handler is None:
                answer = text("404 Not Found", self.not_found)
            else:
                try:
                    answer = await handler(req)
                except Exception:
                    log.exception(f"{self.name}_request_failed", path=req.path)
                    answer = text("500 Internal Server Error", "the page could not be rendered")
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


async def _read_head(reader: asyncio.StreamReader) -> HttpRequest | Response:
    """The request (with its body), or the error answer to a body that cannot be read."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    path, _, query = target.partition("?")
    body = b""
    if "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            return text("400 Bad Request", "bad Content-Length")
        if length < 0:
            return text("400 Bad Request", "bad Content-Length")
        if length > BODY_LIMIT:
            return text("413 Content Too Large", f"bodies are limited to {BODY_LIMIT} bytes")
        body = await reader.readexactly(length)
    elif "transfer-encoding" in headers:
        return text("411 Length Required", "send the body with a Content-Length")
    return HttpRequest(method, path, query, headers, body)


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
