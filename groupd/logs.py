"""structlog set-up: one event per line, JSON for machines or key=value for people."""

from __future__ import annotations

import datetime
import logging
import sys
import time
from collections.abc import MutableMapping
from contextvars import ContextVar
from typing import Any

import structlog

_current_request: ContextVar[Any] | None = None


def add_request_context(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Events logged while a request is handled carry its ``client_id`` and ``peer``.

    Read from the dispatcher's ``current_request`` only here, when a line is actually emitted, so
    requests that log nothing (nearly all of them) pay for none of it. Fields the event sets
    itself win."""
    global _current_request
    if _current_request is None:
        # Imported on first use, not at the top: the CLI imports this module, and `groupd
        # --version` should not pay for loading the protocol codec. Kept afterwards: an import
        # statement per line cost ~1 us (a rebalance of 1,000 members logs thousands of lines).
        from groupd.protocol.dispatch import current_request

        _current_request = current_request
    req = _current_request.get()
    if req is not None:
        event.setdefault("client_id", req.client_id)
        conn = req.conn
        event.setdefault("peer", f"{conn.peer_host}:{conn.peer_port}")
    return event


# Fields only some members have: a dynamic member (no group.instance.id) logs none rather than
# ``instance=None`` on every join and leave.
OPTIONAL_FIELDS = ("instance",)


def drop_absent_optional_fields(
    _logger: Any, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in OPTIONAL_FIELDS:
        if key in event and event[key] is None:
            del event[key]
    return event


class _IsoUtcStamper:
    """``TimeStamper(fmt="iso", utc=True)``'s exact output (``2026-01-02T03:04:05.123456Z``, no
    fraction when it is zero, as ``datetime.isoformat``), with the date and time formatted once per
    second instead of building a timezone-aware datetime for every line (~1 us each)."""

    __slots__ = ("_prefix", "_sec")

    def __init__(self) -> None:
        self._sec = -1
        self._prefix = ""

    def __call__(self, _logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        sec, us = divmod(time.time_ns() // 1000, 1_000_000)
        if sec != self._sec:
            self._sec = sec
            self._prefix = datetime.datetime.fromtimestamp(sec, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
        event["timestamp"] = f"{self._prefix}.{us:06d}Z" if us else self._prefix + "Z"
        return event


def configure(fmt: str = "console", level: str = "info") -> None:
    lvl = logging.getLevelName(level.strip().upper())
    if not isinstance(lvl, int):
        raise ValueError(f"unknown log level {level!r}")
    renderer: structlog.typing.Processor
    fmt = fmt.strip().lower()
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
            drop_absent_optional_fields,
            structlog.processors.add_log_level,
            _IsoUtcStamper(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
