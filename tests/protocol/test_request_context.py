"""Which client id a log line carries when the handler binds the request itself (issue 26).

The dispatcher sets ``current_request`` around every handler, except one marked ``BINDS_REQUEST``
(the steady heartbeats: the set and reset were ~0.1 us of a ~5 us heartbeat), which binds it with
``bind_request`` around whatever may log or start a task. Over real sockets: a line logged inside
``bind_request`` and a line logged by a task started there carry the request's client id and peer; a
line logged after the request carries none; the same handler wrapped (as ACLs, cluster routing and
fetch sessions wrap handlers) has the request bound by the dispatcher, as every other handler."""

from __future__ import annotations

import asyncio
import io
import json
import struct
from collections.abc import Callable
from typing import Any

import structlog
from groupd.protocol.dispatch import BINDS_REQUEST, Dispatcher, bind_request, current_request
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.server import Server

from groupd.logs import add_request_context

HEARTBEAT = API_BY_NAME["Heartbeat"]


def _frame(client_id: bytes, member: bytes, correlation_id: int) -> bytes:
    header = struct.pack(">hhih", HEARTBEAT.key, 0, correlation_id, len(client_id)) + client_id
    body = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", len(member)) + member
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


async def _exchange(handler: Callable[[Any], None], frames: list[bytes]) -> int:
    """Serve ``handler`` for Heartbeat, send ``frames`` on one connection and read their answers."""
    dispatcher = Dispatcher()
    dispatcher.register(HEARTBEAT, handler)
    server = Server(dispatcher)
    host, port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection(host, port)
        local_port = writer.get_extra_info("sockname")[1]
        writer.write(b"".join(frames))
        for _ in frames:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
        await asyncio.sleep(0.05)  # the tasks the handler started
        writer.close()
        return local_port
    finally:
        await server.close()


async def test_a_handler_that_binds_the_request_itself_logs_with_its_client_id() -> None:
    out = io.StringIO()
    logger = structlog.wrap_logger(
        structlog.PrintLogger(out), processors=[add_request_context, structlog.processors.JSONRenderer()]
    )
    loop = asyncio.get_running_loop()
    seen_on_steady: list[Any] = []
    tasks: list[asyncio.Task[None]] = []

    async def later(member: str) -> None:
        await asyncio.sleep(0)
        logger.info("in_task", member=member)

    def handler(req: Any) -> None:
        member = req.body["member_id"]
        if member == "steady":  # the short path: nothing logged, nothing started
            seen_on_steady.append(current_request.get())
            req.respond({"throttle_time_ms": 0, "error_code": 0})
            return
        with bind_request(req):
            logger.info("in_handler", member=member)
            tasks.append(loop.create_task(later(member)))
            req.respond({"throttle_time_ms": 0, "error_code": 0})

    setattr(handler, BINDS_REQUEST, True)
    frames = [_frame(b"steady-client", b"steady", 1), _frame(b"slow-client", b"slow", 2)]
    local_port = await _exchange(handler, frames)
    await asyncio.gather(*tasks)
    logger.info("outside_any_request")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    by_event = {e["event"]: e for e in lines}
    assert seen_on_steady == [None]  # the dispatcher left current_request alone
    assert by_event["in_handler"]["client_id"] == "slow-client"
    assert by_event["in_handler"]["peer"] == f"127.0.0.1:{local_port}"
    assert by_event["in_task"]["client_id"] == "slow-client"
    assert "client_id" not in by_event["outside_any_request"]


async def test_a_wrapped_handler_has_the_request_bound_by_the_dispatcher() -> None:
    out = io.StringIO()
    logger = structlog.wrap_logger(
        structlog.PrintLogger(out), processors=[add_request_context, structlog.processors.JSONRenderer()]
    )

    def inner(req: Any) -> None:
        req.respond({"throttle_time_ms": 0, "error_code": 0})

    setattr(inner, BINDS_REQUEST, True)

    def wrapper(req: Any) -> None:  # an ACL check's wrapper logs a denial with the client's id
        logger.info("in_wrapper")
        inner(req)

    await _exchange(wrapper, [_frame(b"wrapped-client", b"m", 1)])
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["client_id"] == "wrapped-client"
