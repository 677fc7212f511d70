"""The fault-injection control endpoint (``--control-port``): an HTTP JSON API over the broker's
``FaultInjector`` and the coordinator's fault actions, for tests in any language.

    GET    /openapi.json                 the OpenAPI 3 description of this API (ops/openapi/control.json)
    GET    /faults                       the active rules
    POST   /faults                       add a rule: {"api": "Heartbeat", "error": "NOT_COORDINATOR", "count": 3}
    DELETE /faults                       clear every rule
    DELETE /faults/{id}                  clear one rule
    POST   /actions/expire-member        {"group": "billing", "member": "<member id>"}
    POST   /actions/trigger-rebalance    {"group": "billing"}
    POST   /actions/expire-locks         {"group": "jobs", "topic": "tasks", "partition": 0}  a share group's
                                         acquisition locks expire now (topic, partition: optional)
    GET    /brokers                      the brokers of this process and their state (cluster mode: --brokers N)
    POST   /actions/stop-broker          {"broker": 2}  close its listener and connections, move its leaders
    POST   /actions/start-broker         {"broker": 2, "rebalance": true}  listen again (and lead again)
    POST   /actions/isolate-broker       {"broker": 2, "isolated": true}  read nothing (requests time out)
    POST   /actions/rebalance-leaders    {}  every partition back to its preferred (first) replica
    POST   /actions/move-coordinator     {"group": "billing", "broker": 3}  move the group's offsets partition

Bad input is a 4xx answer with ``{"error": <kind>, "message": <what is wrong>}``, never an exception
in the daemon: every document is checked field by field against the same rules the OpenAPI
description states, and a rule or action naming a broker this process does not have is refused.
The HTTP server's own refusals have the same shape: no such path (404), method (405), a body too
large (413) or without a length (411), a head over 16 KiB (431), and bytes that are not an HTTP/1.x
request at all (400), each answered before the connection closes. The endpoint has no authentication: it is off unless asked for, and listens
on the listen address (a loopback one by default).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import structlog
from groupd.broker.node import Broker
from groupd.protocol.errors import ErrorCode
from groupd.protocol.faults import KINDS, MAX_DELAY_MS, FaultRule
from groupd.protocol.messages import API_BY_NAME

from .http import HttpRequest, HttpServer, Response

if TYPE_CHECKING:
    # Cluster mode's module is loaded by --brokers N only (broker/node.py); the pytest fixture's
    # brokers all have a control endpoint and most of them one node (issue 26 start-up).
    from groupd.broker.cluster import Cluster

log = structlog.get_logger("groupd.ops.control")

_RULE_FIELDS = {
    "api",
    "kind",
    "error",
    "delay_ms",
    "count",
    "probability",
    "group",
    "topic",
    "client_id",
    "broker",
}
_MAX_NAME = 1024


class BadInput(ValueError):
    def __init__(self, message: str, status: str = "400 Bad Request", kind: str = "bad_request") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def openapi_document() -> bytes:
    from importlib import resources  # ~1.6 ms, for a document few ask for

    return resources.files("groupd.ops").joinpath("openapi/control.json").read_bytes()


def parse_rule(doc: Any) -> FaultRule:
    """A rule from its JSON document, or BadInput naming the first thing wrong with it."""
    if not isinstance(doc, dict):
        raise BadInput("the body must be a JSON object")
    unknown = sorted(str(k) for k in doc if k not in _RULE_FIELDS)
    if unknown:
        raise BadInput(f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(_RULE_FIELDS))}")
    api = doc.get("api")
    if not isinstance(api, str) or api not in API_BY_NAME:
        raise BadInput(f"'api' must be one of: {', '.join(sorted(API_BY_NAME))} (got {api!r})")
    kind = doc.get("kind")
    if kind is None:
        kind = "error" if "error" in doc else "delay" if "delay_ms" in doc else None
    if kind not in KINDS:
        raise BadInput(f"'kind' must be one of: {', '.join(KINDS)} (or give 'error' or 'delay_ms')")
    rule = FaultRule(api=api, kind=kind)
    if kind == "error":
        rule.error_code = _error_code(doc.get("error"))
    elif "error" in doc:
        raise BadInput(f"'error' is only for kind 'error', not {kind!r}")
    if kind == "delay":
        rule.delay_ms = _int(doc, "delay_ms", 1, MAX_DELAY_MS, required=True)
    elif "delay_ms" in doc:
        raise BadInput(f"'delay_ms' is only for kind 'delay', not {kind!r}")
    rule.count = _int(doc, "count", 1, 2**31 - 1)
    if kind == "close" and rule.count is None and "probability" not in doc:
        rule.count = 1  # "close the connection on the next request"
    probability = doc.get("probability")
    if probability is not None:
        if isinstance(probability, bool) or not isinstance(probability, int | float) or not math.isfinite(probability):
            raise BadInput("'probability' must be a number in (0, 1]")
        if not 0 < probability <= 1:
            raise BadInput(f"'probability' must be in (0, 1], got {probability}")
        rule.probability = float(probability)
    rule.group = _name(doc, "group")
    rule.topic = _name(doc, "topic")
    rule.client_id = _name(doc, "client_id")
    rule.broker = _int(doc, "broker", 0, 2**31 - 1)
    return rule


def _error_code(value: Any) -> int:
    if isinstance(value, str):
        try:
            code = int(ErrorCode[value.strip().upper()])
        except KeyError:
            raise BadInput(f"unknown error {value!r}: use a Kafka error name (NOT_COORDINATOR) or code (16)") from None
    elif isinstance(value, int) and not isinstance(value, bool):
        code = value
    else:
        raise BadInput("'error' is required for kind 'error': a Kafka error name (NOT_COORDINATOR) or code (16)")
    if code == 0 or not -(2**15) <= code < 2**15:
        raise BadInput(f"'error' must be a non-zero int16 error code, got {code}")
    return code


def _int(doc: dict[str, Any], name: str, lo: int, hi: int, *, required: bool = False) -> int | None:
    value = doc.get(name)
    if value is None:
        if required:
            raise BadInput(f"'{name}' is required: an integer in [{lo}, {hi}]")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadInput(f"'{name}' must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _name(doc: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = doc.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_NAME:
        raise BadInput(f"'{name}' must be a non-empty string of at most {_MAX_NAME} characters")
    return value


def _check_fields(doc: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise BadInput("the body must be a JSON object")
    unknown = sorted(str(k) for k in doc if k not in allowed)
    if unknown:
        raise BadInput(f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return doc


def _json(status: str, doc: Any) -> Response:
    return Response(status, json.dumps(doc).encode() + b"\n", "application/json")


def _problem(e: BadInput) -> Response:
    return _json(e.status, {"error": e.kind, "message": str(e)})


def _server_problem(status: str, kind: str, message: str) -> Response:
    """The HTTP server's own refusals (404, 405, 413, 431, a garbage request) in the same shape."""
    return _json(status, {"error": kind, "message": message})


class Control:
    """The endpoint over one broker (cluster mode will hand it several)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.faults = broker.faults
        self._http = HttpServer(
            "control",
            {
                "/openapi.json": self._openapi,
                "/faults": self._faults,
                "/faults/*": self._fault,
                "/actions/expire-member": self._expire_member,
                "/actions/trigger-rebalance": self._trigger_rebalance,
                "/actions/expire-locks": self._expire_locks,
                "/brokers": self._brokers,
                "/actions/stop-broker": self._stop_broker,
                "/actions/start-broker": self._start_broker,
                "/actions/isolate-broker": self._isolate_broker,
                "/actions/rebalance-leaders": self._rebalance_leaders,
                "/actions/move-coordinator": self._move_coordinator,
            },
            not_found="no such path: see /openapi.json",
            methods=("GET", "HEAD", "POST", "DELETE"),
            error=_server_problem,
        )

    async def start(self, host: str, port: int) -> tuple[str, int]:
        host, port = await self._http.start(host, port)
        log.info("control_listening", url=f"http://{host}:{port}/")
        return host, port

    async def close(self) -> None:
        await self._http.close()

    # --- routes -----------------------------------------------------------------------------------
    async def _openapi(self, req: HttpRequest) -> Response:
        if req.method not in ("GET", "HEAD"):
            return _problem(BadInput("only GET", "405 Method Not Allowed", "method_not_allowed"))
        return Response("200 OK", openapi_document(), "application/json")

    async def _faults(self, req: HttpRequest) -> Response:
        try:
            if req.method in ("GET", "HEAD"):
                return _json("200 OK", {"faults": [r.to_json() for r in self.faults.rules]})
            if req.method == "DELETE":
                n = self.faults.clear()
                log.info("faults_cleared", cleared=n)
                return _json("200 OK", {"cleared": n})
            rule = parse_rule(_body(req))
            if rule.broker is not None and rule.broker not in self._node_ids():
                # A rule no request can ever match would sit in the list doing nothing.
                raise BadInput(f"no broker {rule.broker} (brokers: {self._node_ids()}; GET /brokers lists them)")
            try:
                self.faults.add(rule)
            except ValueError as e:
                raise BadInput(str(e), "409 Conflict", "too_many_rules") from None
            log.info("fault_added", **rule.to_json())
            return _json("201 Created", {"fault": rule.to_json()})
        except BadInput as e:
            return _problem(e)

    async def _fault(self, req: HttpRequest) -> Response:
        raw = req.path.removeprefix("/faults/")
        if not raw.isdigit() or len(raw) > 18:
            return _problem(BadInput(f"no fault {raw!r}: ids are integers", "404 Not Found", "not_found"))
        rule = next((r for r in self.faults.rules if r.id == int(raw)), None)
        if rule is None:
            return _problem(BadInput(f"no fault {raw} (spent or cleared?)", "404 Not Found", "not_found"))
        if req.method in ("GET", "HEAD"):
            return _json("200 OK", {"fault": rule.to_json()})
        if req.method == "DELETE":
            self.faults.remove(rule.id)
            log.info("faults_cleared", cleared=1, rule=rule.id)
            return _json("200 OK", {"cleared": 1})
        return _problem(BadInput("only GET and DELETE", "405 Method Not Allowed", "method_not_allowed"))

    async def _expire_member(self, req: HttpRequest) -> Response:
        try:
            doc = self._action_body(req, {"group", "member", "broker"})
            group, member = _name(doc, "group", required=True), _name(doc, "member", required=True)
            assert group is not None and member is not None
            shell = self.broker.groups
            code, result = shell.core.expire_member(shell.clock(), group, member)
            return self._action_done("expire_member", code, result, group=group, member=member)
        except BadInput as e:
            return _problem(e)

    async def _trigger_rebalance(self, req: HttpRequest) -> Response:
        try:
            doc = self._action_body(req, {"group", "broker", "reason"})
            group = _name(doc, "group", required=True)
            reason = _name(doc, "reason") or "triggered through the control endpoint"
            assert group is not None
            shell = self.broker.groups
            code, result = shell.core.trigger_rebalance(shell.clock(), group, reason)
            return self._action_done("trigger_rebalance", code, result, group=group)
        except BadInput as e:
            return _problem(e)

    async def _expire_locks(self, req: HttpRequest) -> Response:
        """A share group's acquisition locks expire now: what the lock timer does when they are due
        (``SharePartition.releaseAcquisitionLockOnTimeout``: back to AVAILABLE, or ARCHIVED at the
        delivery-count limit), written to ``__share_group_state`` and waking waiting ShareFetches."""
        try:
            doc = self._action_body(req, {"group", "topic", "partition", "broker"})
            group, topic = _name(doc, "group", required=True), _name(doc, "topic")
            partition = _int(doc, "partition", 0, 2**31 - 1)
            assert group is not None
            if partition is not None and topic is None:
                raise BadInput("'partition' needs 'topic'")
            nodes = list(self.cluster.nodes.values()) if self.cluster is not None else [self.broker]
            found = records = 0
            for node in nodes:
                share = getattr(node, "share_partitions", None)
                if share is None:
                    continue
                for key, sp in list(share.partitions.items()):
                    t = share.topics.by_id(key.topic_id)
                    name = t.name if t is not None else ""
                    if key.group_id != group or (topic is not None and name != topic):
                        continue
                    if partition is not None and key.partition != partition:
                        continue
                    found += 1
                    # every lock is due at the end of time: expire_locks releases them all
                    batches = sp.expire_locks(2**62)
                    if batches:
                        records += sum(b.last_offset - b.first_offset + 1 for b in batches)
                        share.changed(key, name, batches)
            if not found:
                where = f" on {topic}" + (f"-{partition}" if partition is not None else "") if topic else ""
                raise BadInput(
                    f"share group {group!r} has no share-partition{where} in memory", "404 Not Found", "not_found"
                )
            self.faults.count("-", "expire_locks")
            fields = {"group": group, **({"topic": topic} if topic else {})}
            log.info(
                "fault_injected",
                kind="expire_locks",
                broker=self.broker.config.node_id,
                released=records,
                partitions=found,
                **fields,
            )
            # "released" as the first version of this action answered; "records" the same count
            out = {"action": "expire_locks", **fields, "partitions": found, "records": records, "released": records}
            return _json("200 OK", out)
        except BadInput as e:
            return _problem(e)

    def _action_body(self, req: HttpRequest, allowed: set[str], *, empty: bool = False) -> dict[str, Any]:
        if req.method != "POST":
            raise BadInput("only POST", "405 Method Not Allowed", "method_not_allowed")
        doc = _check_fields(_body(req) if req.body or not empty else {}, allowed)
        broker = _int(doc, "broker", 0, 2**31 - 1)
        known = self._node_ids()
        if broker is not None and broker not in known:
            raise BadInput(f"no broker {broker} (brokers: {known})", "404 Not Found", "not_found")
        return doc

    def _node_ids(self) -> list[int]:
        return list(self.cluster.nodes) if self.cluster is not None else [self.broker.config.node_id]

    # --- broker actions (cluster mode) -------------------------------------------------------------
    @property
    def cluster(self) -> Cluster | None:
        return self.broker.cluster

    def _need_cluster(self) -> Cluster:
        if self.cluster is None:
            raise BadInput(
                "broker actions need several brokers: start groupd with --brokers N", "409 Conflict", "conflict"
            )
        return self.cluster

    async def _brokers(self, req: HttpRequest) -> Response:
        if req.method not in ("GET", "HEAD"):
            return _problem(BadInput("only GET", "405 Method Not Allowed", "method_not_allowed"))
        if self.cluster is not None:
            return _json("200 OK", self.cluster.describe())
        node = self.broker.config.node_id
        host, port = self.broker.listeners[0].advertised_host, self.broker.port
        return _json(
            "200 OK",
            {"controller_id": node, "brokers": [{"node_id": node, "host": host, "port": port, "state": "live"}]},
        )

    async def _broker_action(self, req: HttpRequest, allowed: set[str], action: str, run: Any) -> Response:
        """Check the body, run ``run(cluster, doc)`` (may be a coroutine), log and count the action."""
        try:
            doc = self._action_body(req, allowed, empty=not allowed)
            cluster = self._need_cluster()
            from groupd.broker.cluster import ClusterError  # loaded: there is a cluster

            if "broker" in allowed and doc.get("broker") is None:
                raise BadInput("'broker' is required: a node id (GET /brokers lists them)")
            try:
                out = run(cluster, doc)
                if hasattr(out, "__await__"):
                    out = await out
            except ClusterError as e:
                kind = "not_found" if e.status == 404 else "conflict"
                status = "404 Not Found" if e.status == 404 else "409 Conflict"
                raise BadInput(e.message, status, kind) from None
            self.faults.count("-", action)
            log.info("fault_injected", kind=action, **{k: v for k, v in doc.items() if k != "kind"})
            return _json("200 OK", {"action": action, **out})
        except BadInput as e:
            return _problem(e)

    async def _stop_broker(self, req: HttpRequest) -> Response:
        return await self._broker_action(req, {"broker"}, "stop_broker", lambda c, d: c.stop_broker(d["broker"]))

    async def _start_broker(self, req: HttpRequest) -> Response:
        def run(c: Cluster, d: dict[str, Any]) -> Any:
            return c.start_broker(d["broker"], rebalance=_bool(d, "rebalance", False))

        return await self._broker_action(req, {"broker", "rebalance"}, "start_broker", run)

    async def _isolate_broker(self, req: HttpRequest) -> Response:
        def run(c: Cluster, d: dict[str, Any]) -> Any:
            return c.isolate_broker(d["broker"], _bool(d, "isolated", True))

        return await self._broker_action(req, {"broker", "isolated"}, "isolate_broker", run)

    async def _rebalance_leaders(self, req: HttpRequest) -> Response:
        return await self._broker_action(req, set(), "rebalance_leaders", lambda c, d: c.rebalance_leaders())

    async def _move_coordinator(self, req: HttpRequest) -> Response:
        def run(c: Cluster, d: dict[str, Any]) -> Any:
            group = _name(d, "group", required=True)
            assert group is not None
            return c.move_coordinator(group, d["broker"])

        return await self._broker_action(req, {"group", "broker"}, "move_coordinator", run)

    def _action_done(self, action: str, code: int, result: Any, **fields: str) -> Response:
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            raise BadInput(f"no group {fields['group']!r}", "404 Not Found", "not_found")
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            raise BadInput(
                f"group {fields['group']!r} has no member {fields['member']!r}", "404 Not Found", "not_found"
            )
        if code != 0:
            raise BadInput(
                f"group {fields['group']!r} is already rebalancing or has no member", "409 Conflict", "conflict"
            )
        self.broker.groups.apply(result)
        self.faults.count("-", action)
        log.info("fault_injected", kind=action, broker=self.broker.config.node_id, **fields)
        return _json("200 OK", {"action": action, **fields})


def _bool(doc: dict[str, Any], name: str, default: bool) -> bool:
    value = doc.get(name, default)
    if not isinstance(value, bool):
        raise BadInput(f"'{name}' must be true or false, got {value!r}")
    return value


def _body(req: HttpRequest) -> Any:
    if not req.body:
        raise BadInput("a JSON body is required")
    try:
        return json.loads(req.body)
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise BadInput(f"the body is not JSON: {e}") from None
    except RecursionError:
        raise BadInput("the body is nested too deeply") from None
