"""structlog set-up: one event per line, JSON for machines or key=value for people."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog


def add_request_context(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Events logged while a request is handled carry its ``client_id`` and ``peer``.

    Read from the dispatcher's ``current_request`` only here, when a line is actually emitted, so
    requests that log nothing (nearly all of them) pay for none of it. Fields the event sets
    itself win."""
    # Imported here, not at the top: the CLI imports this module, and `groupd --version` should not
    # pay for loading the protocol codec.
    from groupd.protocol.dispatch import current_request

    req = current_request.get()
    if req is not None:
        event.setdefault("client_id", req.client_id)
        conn = req.conn
        event.setdefault("peer", f"{conn.peer_host}:{conn.peer_port}")
    return event


def configure(fmt: str = "console", level: str = "info") -> None:
    lvl = logging.getLevelName(level.upper())
    if not isinstance(lvl, int):
        raise ValueError(f"unknown log level {level!r}")
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    elif fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    else:
        raise ValueError(f"unknown log format {fmt!r}")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_request_context,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
