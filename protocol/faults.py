"""Fault injection on the request path: rules that make chosen requests fail, wait or lose their connection.

A rule names one API and what to do to its requests:

- ``error``: answer with a Kafka error code instead of handling the request (the answer is the
  request's own API and version, the error where Kafka's ``getErrorResponse`` puts it: see
  ``error_response``); the request never reaches its handler, as if the broker had refused it;
- ``delay``: handle the request ``delay_ms`` later (the broker is slow; the connection's later
  requests wait behind it, as on a Kafka connection);
- ``close``: close the connection instead of answering (answers already due are written first).

and which of them: every one, the next ``count``, or a fraction ``probability`` (both may be given:
at most ``count`` of a fraction), narrowed to a group id, a topic, a client id or a broker id. A rule
with a ``count`` goes away once spent. The first rule that matches a request applies.

Cost when no rule exists: the dispatcher's ``faults`` attribute is None and the request path checks
it once. The injector sets it only while it holds rules, on every dispatcher it is attached to (one
per broker: a shared injector serves a cluster of brokers in one process, each with its node id).
Every injection is logged (``fault_injected``) and counted by (api, kind) in ``counts``.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
from collections.abc import Iterator
from dataclasses import field
from typing import TYPE_CHECKING, Any

import structlog

from .error_response import error_response
from .errors import ErrorCode
from .frozen import DEFAULT_FACTORY, mutable_record
from .messages import API_BY_KEY, API_BY_NAME

if TYPE_CHECKING:
    from .dispatch import Dispatcher, Route
    from .server import Request

log = structlog.get_logger("groupd.faults")

KINDS = ("error", "delay", "close")
MAX_DELAY_MS = 300_000
MAX_RULES = 1000


@mutable_record
class FaultRule:
    api: str
    kind: str
    error_code: int | None = None
    delay_ms: int = 0
    count: int | None = None  # None: until cleared
    probability: float | None = None  # None: every matching request
    group: str | None = None
    topic: str | None = None
    client_id: str | None = None
    broker: int | None = None
    id: int = 0
    injected: int = 0
    created_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    def __init__(
        self,
        api: str,
        kind: str,
        error_code: int | None = None,
        delay_ms: int = 0,
        count: int | None = None,
        probability: float | None = None,
        group: str | None = None,
        topic: str | None = None,
        client_id: str | None = None,
        broker: int | None = None,
        id: int = 0,
        injected: int = 0,
        created_ms: int = DEFAULT_FACTORY,
    ) -> None:
        self.api = api
        self.kind = kind
        self.error_code = error_code
        self.delay_ms = delay_ms
        self.count = count
        self.probability = probability
        self.group = group
        self.topic = topic
        self.client_id = client_id
        self.broker = broker
        self.id = id
        self.injected = injected
        self.created_ms = time.time_ns() // 1_000_000 if created_ms is DEFAULT_FACTORY else created_ms

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "api": self.api, "kind": self.kind}
        if self.kind == "error":
            assert self.error_code is not None
            out["error_code"] = self.error_code
            out["error"] = _error_name(self.error_code)
        if self.kind == "delay":
            out["delay_ms"] = self.delay_ms
        for name in ("count", "probability", "group", "topic", "client_id", "broker"):
            out[name] = getattr(self, name)
        out["injected"] = self.injected
        out["created_ms"] = self.created_ms
        return out


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class FaultInjector:
    """The rules and their application; ``attach`` it to each broker's dispatcher."""

    def __init__(self, *, seed: int | None = None) -> None:
        self.rules: list[FaultRule] = []
        self._by_key: dict[int, list[FaultRule]] = {}
        self._ids = itertools.count(1)
        self._seed = seed
        self._random: Any = None  # random.Random(seed), made by the first probability rule (issue 26)
        self._taps: list[tuple[Dispatcher, _Tap]] = []
        # (api name, kind) -> injections so far; read by the metrics at scrape time.
        self.counts: dict[tuple[str, str], int] = {}

    def _rng(self) -> Any:
        if self._random is None:
            import random  # ~1 ms of serve's start for a rule that few set

            self._random = random.Random(self._seed)
        return self._random

    def attach(self, dispatcher: Dispatcher, node_id: int) -> None:
        tap = _Tap(self, dispatcher, node_id)
        self._taps.append((dispatcher, tap))
        dispatcher.faults = tap if self.rules else None

    # --- the rule set -----------------------------------------------------------------------------
    def add(self, rule: FaultRule) -> FaultRule:
        if rule.api not in API_BY_NAME:
            raise ValueError(f"unknown API {rule.api!r}")
        if len(self.rules) >= MAX_RULES:
            raise ValueError(f"at most {MAX_RULES} fault rules at a time: clear some first")
        rule.id = next(self._ids)
        self.rules.append(rule)
        self._reindex()
        return rule

    def remove(self, rule_id: int) -> FaultRule | None:
        for rule in self.rules:
            if rule.id == rule_id:
                self.rules.remove(rule)
                self._reindex()
                return rule
        return None

    def clear(self) -> int:
        n = len(self.rules)
        self.rules.clear()
        self._reindex()
        return n

    def count(self, api: str, kind: str) -> None:
        key = (api, kind)
        self.counts[key] = self.counts.get(key, 0) + 1

    def _reindex(self) -> None:
        by_key: dict[int, list[FaultRule]] = {}
        for rule in self.rules:
            by_key.setdefault(API_BY_NAME[rule.api].key, []).append(rule)
        self._by_key = by_key
        for dispatcher, tap in self._taps:
            dispatcher.faults = tap if by_key else None

    # --- the request path -------------------------------------------------------------------------
    def _pick(self, req: Request, node_id: int) -> FaultRule | None:
        rules = self._by_key.get(req.api_key)
        if not rules:
            return None
        for rule in rules:
            if rule.broker is not None and rule.broker != node_id:
                continue
            if rule.client_id is not None and rule.client_id != req.client_id:
                continue
            if rule.group is not None and rule.group not in set(request_groups(req.api_key, req.body)):
                continue
            if rule.topic is not None and rule.topic not in set(request_topics(req.body)):
                continue
            if rule.probability is not None and self._rng().random() >= rule.probability:
                continue
            rule.injected += 1
            if rule.count is not None and rule.injected >= rule.count:
                self.rules.remove(rule)
                self._reindex()
            return rule
        return None


class _Tap:
    """What a dispatcher calls per request while rules exist: True when the fault took the request over."""

    __slots__ = ("dispatcher", "injector", "node_id")

    def __init__(self, injector: FaultInjector, dispatcher: Dispatcher, node_id: int) -> None:
        self.injector = injector
        self.dispatcher = dispatcher
        self.node_id = node_id

    def __call__(self, route: Route, req: Request) -> bool:
        rule = self.injector._pick(req, self.node_id)
        if rule is None:
            return False
        api = route.api.name
        self.injector.count(api, rule.kind)
        fields: dict[str, Any] = {}
        if rule.kind == "error":
            fields["error"] = _error_name(rule.error_code or 0)
        elif rule.kind == "delay":
            fields["delay_ms"] = rule.delay_ms
        log.info(
            "fault_injected",
            rule=rule.id,
            kind=rule.kind,
            api=api,
            api_version=req.api_version,
            client_id=req.client_id,
            peer=f"{req.conn.peer_host}:{req.conn.peer_port}",
            broker=self.node_id,
            **fields,
        )
        if rule.kind == "error":
            assert rule.error_code is not None
            req.respond(error_response(route.api, req.api_version, req.body, rule.error_code))
        elif rule.kind == "delay":
            ctx = contextvars.copy_context()
            loop = asyncio.get_running_loop()
            loop.call_later(rule.delay_ms / 1000, self._resume, route, req, context=ctx)
        else:
            req.conn.close_after_write("fault injected", quiet=True, api=api)
        return True

    def _resume(self, route: Route, req: Request) -> None:
        if not req.conn.closed:
            self.dispatcher.run_handler(route, req)


# --- what a request is about ----------------------------------------------------------------------
_GROUP_LISTS = ("groups", "groups_names")
_TOPIC_ARRAYS = ("topics", "topic_data")


def request_groups(api_key: int, body: dict[str, Any]) -> Iterator[str]:
    """The group ids a decoded request names (FindCoordinator: only its group keys)."""
    if api_key == API_BY_NAME["FindCoordinator"].key:
        if body.get("key_type", 0) != 0:
            return
        if body.get("key") is not None:
            yield body["key"]
        yield from body.get("coordinator_keys") or ()
        return
    gid = body.get("group_id")
    if isinstance(gid, str):
        yield gid
    for name in _GROUP_LISTS:
        for entry in body.get(name) or ():
            if isinstance(entry, str):
                yield entry
            elif isinstance(entry, dict) and isinstance(entry.get("group_id"), str):
                yield entry["group_id"]


def request_topics(body: dict[str, Any], depth: int = 0) -> Iterator[str]:
    """The topic names a decoded request names (its topic arrays, an OffsetFetch v8's groups' too)."""
    if depth > 2:
        return
    for name in _TOPIC_ARRAYS:
        for entry in body.get(name) or ():
            if isinstance(entry, dict):
                topic = entry.get("name", entry.get("topic"))
                if isinstance(topic, str):
                    yield topic
            elif isinstance(entry, str) and name == "topics":
                yield entry
    yield from body.get("topic_names") or ()
    for entry in body.get("groups") or ():
        if isinstance(entry, dict):
            yield from request_topics(entry, depth + 1)


def api_names() -> list[str]:
    return sorted(a.name for a in API_BY_KEY.values())
