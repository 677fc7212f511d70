"""Where a request is decoded and routed: frame -> header -> body -> handler, and back to bytes.

The application registers one handler per API (``register``); only registered APIs are advertised
by ApiVersions, which this module answers itself because its rules are protocol rules: the response
header is always v0, and an unsupported ApiVersions version is answered in the v0 body format with
UNSUPPORTED_VERSION and the supported ranges, which is how clients negotiate down. A request of
any other API at a version not registered closes the connection, as Kafka's ``SocketServer`` does.
What ApiVersions advertises is the registered ranges, except where ``advertised`` says otherwise
(``--kafka-version``: Kafka 4.x advertises Produce from v0 but refuses v0-2).

A handler receives the ``Request`` and either returns the response dict, returns an awaitable that
resolves to it, or returns None and calls ``req.respond`` later itself (long-polls).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

import structlog
from groupd.protocol.frozen import mutable_record

from ._rt import DecodeError
from .errors import ErrorCode
from .messages import API_BY_KEY
from .messages.core import API_VERSIONS
from .messages.headers import REQUEST_HEADER
from .schema import ApiSchema
from .server import Connection, Request, _wire

# protocol/_wire.c's header reader and Request maker (None / Request itself without the C module)
read_header: Callable[[bytes, dict[int, Any]], tuple[Any, int, str, int] | None] | None = (
    None if _wire is None else _wire.read_header
)
new_request: Callable[..., Request] = (lambda cls, *fields: cls(*fields)) if _wire is None else _wire.new_request

log = structlog.get_logger("groupd.dispatch")

Handler = Callable[[Request], Any]
_FIXED_HEADER = struct.Struct(">hhi")
# api key and version read as one int32 (the key of the per-version entries: an int hashes and
# compares for less than a tuple of two), then the correlation id
_KEY_VERSION_CORR = struct.Struct(">ii")
_SIZE_CORR = struct.Struct(">ii")
_SIZE_CORR_TAGS = struct.Struct(">iiB")  # size, correlation id, empty tagged fields (header v1)
_CLIENT_ID_SIZE = struct.Struct(">h")  # request header v1+: client_id, a nullable (int16-sized) string
_API_VERSIONS_KEY = 18

# The request whose handler is running, for log events emitted meanwhile (groupd.logs adds its
# client_id and peer) and in the tasks it starts, which copy the context. One ContextVar.set per
# request costs ~0.2 us; binding the fields as structlog contextvars would cost ~3 us on a ~10 us
# heartbeat, for lines that are almost never logged.
current_request: contextvars.ContextVar[Request | None] = contextvars.ContextVar("groupd_request", default=None)
# A handler with this attribute true sets ``current_request`` itself, only around what may log or
# start a task or a callback (``bind_request``): a steady heartbeat does neither, and the set and
# reset cost ~0.1 us of a ~5 us heartbeat (issue 26). Wrapped (ACLs, cluster routing, a fetch
# session) it is an ordinary handler again: the dispatcher sets it around the wrapper.
BINDS_REQUEST = "binds_request"
# What a SASL listener accepts before authentication (Kafka's SaslServerAuthenticator): anything
# else closes the connection.
_PRE_AUTH_API_KEYS = frozenset({_API_VERSIONS_KEY, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate


@contextlib.contextmanager
def bind_request(req: Request) -> Iterator[None]:
    """``current_request`` is ``req`` meanwhile: what a BINDS_REQUEST handler wraps around whatever
    may log a line or start a task or a callback (those copy the context)."""
    token = current_request.set(req)
    try:
        yield
    finally:
        current_request.reset(token)


class Session(Protocol):
    """A connection's security state, made by ``Dispatcher.open_session`` on its first frame."""

    principal: str
    authenticated: bool
    # After SaslHandshake v0 the client sends bare SASL tokens (size-prefixed, no request header).
    raw_tokens: bool

    def raw_token(self, conn: Connection, token: bytes) -> Awaitable[bytes | None]:
        """Answer a bare token with a bare token; None closes the connection (v0 has no error field)."""
        ...


@mutable_record
class Route:
    api: ApiSchema
    handler: Handler
    min_version: int
    max_version: int

    def __init__(self, api: ApiSchema, handler: Handler, min_version: int, max_version: int) -> None:
        self.api = api
        self.handler = handler
        self.min_version = min_version
        self.max_version = max_version


class _Version:
    """What the request path needs for one (api_key, version), looked up once and kept: the route,
    the compiled parse functions of its request header and body, and its response encoder. The
    generic path (``routes`` -> ``is_flexible`` -> ``codec(version)``) cost ~5 us per request in
    lookups alone, a sixth of a heartbeat."""

    __slots__ = (
        "api_key",
        "bare_handler",
        "build",
        "encode",
        "flexible_header",
        "flexible_response",
        "parse_body",
        "parse_header",
        "response",
        "route",
        "version",
    )

    def __init__(self, dispatcher: Dispatcher, route: Route, version: int) -> None:
        api = route.api
        flexible = api.is_flexible(version)
        self.route = route
        self.api_key = api.key
        self.version = version
        self.parse_header = dispatcher._req_header[2 if flexible else 1].parse_at
        self.flexible_header = int(flexible)  # header v2: a tagged-field section after client_id
        # An API may have a decoder of its own (OffsetCommit's C walk: ``body_parsers``), which
        # falls back to the generic one for anything it does not take.
        custom = dispatcher.body_parsers.get(api.key)
        self.parse_body = (custom(version) if custom is not None else None) or api.request.codec(version).parse_at
        self.response = api.response.codec(version)
        # An API may have a writer of its own (Fetch's C writer: ``response_builders``) that
        # answers None for any body it does not take: the generic encoder then writes it.
        builder = dispatcher.response_builders.get(api.key)
        self.build = builder(version) if builder is not None else None
        # ApiVersions answers with response header v0 even in its flexible versions (KIP-511).
        self.flexible_response = flexible and api.key != _API_VERSIONS_KEY
        self.encode = self._encode_with(dispatcher)
        # The route's handler if it binds the request itself (BINDS_REQUEST): the dispatcher then
        # leaves current_request alone while this very handler is the route's.
        self.bare_handler = route.handler if getattr(route.handler, BINDS_REQUEST, False) else None

    def _encode_with(self, dispatcher: Dispatcher) -> Callable[[Request, dict[str, Any]], bytes]:
        build_parts = self.response.build_parts
        encode_into = self.response.encode_into
        build = self.build
        flexible = self.flexible_response
        observers = dispatcher.observers  # the live list: observers added later are seen
        pack = _SIZE_CORR.pack
        pack_flexible = _SIZE_CORR_TAGS.pack

        def encode(req: Request, body: dict[str, Any]) -> bytes:
            # A body that comes encoded already (a dict subclass with ``wire_payload``: OffsetCommit's
            # C path) is sent as it is.
            payload = getattr(body, "wire_payload", None) if type(body) is not dict else None
            if payload is None and build is not None:
                payload = build(body)
            if payload is None:
                parts: list[bytes] = [b""]
                try:
                    # The compiled builder directly; on failure Codec.encode_into re-runs it to raise
                    # its EncodeError (a failing build has no side effects: it only appends parts).
                    build_parts(body, parts.append)
                except Exception:
                    parts = [b""]
                    encode_into(body, parts)
                payload = b"".join(parts)
            if flexible:
                # Response header v1: correlation id and an empty tagged-field section.
                header = pack_flexible(len(payload) + 5, req.correlation_id, 0)
            else:
                header = pack(len(payload) + 4, req.correlation_id)
            if observers:
                elapsed = (time.perf_counter_ns() - req.received_ns) / 1e9
                for obs in observers:
                    obs(req, body, elapsed)
            return header + payload

        return encode


class Dispatcher:
    def __init__(self) -> None:
        self.routes: dict[int, Route] = {}
        # (api key << 16 | version as uint16) -> its entry (``_KEY_VERSION_CORR``)
        self._versions: dict[int, _Version] = {}
        # api key -> (version -> a body decoder ``parse_at(frame, pos) -> (body, end)``, or None for
        # the generic one); set before the first request of that API (``_Version`` keeps it).
        self.body_parsers: dict[int, Callable[[int], Callable[[bytes, int], tuple[dict[str, Any], int]] | None]] = {}
        # api key -> (version -> a writer ``build(body) -> bytes | None`` of response bodies, None
        # handing a body to the generic encoder; or None for the generic one): as body_parsers.
        self.response_builders: dict[int, Callable[[int], Callable[[dict[str, Any]], bytes | None] | None]] = {}
        self.register(API_VERSIONS, self._api_versions)
        self._req_header = {v: REQUEST_HEADER.codec(v) for v in (1, 2)}
        # Observers: (api_key, version, error_code|None, seconds) after each response; used by metrics.
        self.observers: list[Callable[[Request, dict[str, Any], float], None]] = []
        # Set by the application to give each connection a ``Session`` (authentication gate).
        self.open_session: Callable[[Connection], Session] | None = None
        # Fault injection (``faults.FaultInjector``): set only while rules exist, so the request
        # path pays one attribute check; returns True when it took the request over.
        self.faults: Callable[[Route, Request], bool] | None = None
        # Feature flags ApiVersions v3+ reports (KIP-584): name -> (min supported, max supported,
        # finalized level), e.g. KIP-848's group.version.
        self.features: dict[str, tuple[int, int, int]] = {}
        # Under --kafka-version: ApiVersions ranges that differ from the accepted ones (Kafka 4.x
        # advertises Produce from v0 while refusing v0-2, KAFKA-18659), and Kafka's feature rules
        # (``ApiVersionsResponse.createFinalizedFeatureKeys`` leaves out level-0 finalized features,
        # ``maybeFilterSupportedFeatureKeys`` supported ones of min 0 for ApiVersions v0-3, KAFKA-17492).
        self.advertised: dict[int, tuple[int, int]] = {}
        self.kafka_feature_rules = False

    def register(
        self, api: ApiSchema, handler: Handler, *, min_version: int | None = None, max_version: int | None = None
    ) -> None:
        lo = api.min_version if min_version is None else min_version
        hi = api.max_version if max_version is None else max_version
        if not (api.supports(lo) and api.supports(hi) and lo <= hi):
            raise ValueError(f"{api.name}: versions {lo}-{hi} are not in the schema")
        self.routes[api.key] = Route(api, handler, lo, hi)
        self._versions.clear()  # entries hold the previous route

    def supported_versions(self) -> list[dict[str, int]]:
        out = []
        for k, r in sorted(self.routes.items()):
            lo, hi = self.advertised.get(k, (r.min_version, r.max_version))
            out.append({"api_key": k, "min_version": lo, "max_version": hi})
        return out

    # --- the request path -------------------------------------------------------------------------
    def __call__(self, conn: Connection, frame: bytes) -> None:
        session = conn.session
        if session is None:
            if self.open_session is not None:
                session = conn.session = self.open_session(conn)
                if not session.authenticated and not self._before_authentication(conn, session, frame):
                    return
        elif not session.authenticated and not self._before_authentication(conn, session, frame):
            return
        if type(frame) is not bytes:  # the server hands bytes; in-process callers may not
            frame = bytes(frame)
        # The header read in C when it is the common one (a known version, a present client_id, no
        # tagged fields: protocol/_wire.c); anything else, or no C module, by _read_header.
        head = read_header(frame, self._versions) if read_header is not None else None
        if head is None:
            head = self._read_header(conn, frame)
            if head is None:
                return  # answered or closed
        entry, correlation_id, client_id, pos = head
        route = entry.route
        version = entry.version
        # The compiled parse functions directly (design.md: no per-call context); the errors
        # mapped to DecodeError are those ``Codec.decode_at`` maps.
        try:
            body = entry.parse_body(frame, pos)[0]
        except DecodeError as e:
            conn.close("undecodable request", api=route.api.name, api_version=version, error=str(e))
            return
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as e:
            conn.close("undecodable request", api=route.api.name, api_version=version, error=f"malformed message: {e}")
            return
        req = new_request(
            Request,
            conn,
            entry.api_key,
            version,
            correlation_id,
            client_id,
            body,
            entry.encode,
            # only the observers (metrics) read it; 0 tells them "no start time"
            time.perf_counter_ns() if self.observers else 0,
        )
        conn._pending.append(req)  # conn.enqueue, without its call
        handler = route.handler
        faults = self.faults
        if handler is entry.bare_handler and faults is None:
            # It binds the request itself where it needs it (BINDS_REQUEST).
            try:
                result = handler(req)
            except Exception:
                token = current_request.set(req)
                try:
                    log.exception("handler_failed", api=route.api.name, api_version=version, conn=conn.id)
                    conn.close("internal error while handling request", api=route.api.name)
                finally:
                    current_request.reset(token)
                return
            if result is not None:
                with bind_request(req):
                    if type(result) is dict:
                        req.respond(result)
                    else:
                        self._result(route, req, result)
            return
        token = current_request.set(req)
        try:
            if faults is not None and faults(route, req):
                return
            # _handle, inlined for the common answer (issue 26: a call fewer per request)
            try:
                result = handler(req)
            except Exception:
                log.exception("handler_failed", api=route.api.name, api_version=version, conn=conn.id)
                conn.close("internal error while handling request", api=route.api.name)
                return
            if result is None:
                return
            if type(result) is dict:  # ahead of isawaitable's ~0.3 us
                req.respond(result)
            else:
                self._result(route, req, result)
        finally:
            current_request.reset(token)

    def _read_header(self, conn: Connection, frame: bytes) -> tuple[_Version, int, str | None, int] | None:
        """The request header of ``frame``: its entry, correlation id, client_id and where the body
        starts; None when the request was answered or the connection closed (the reference of
        ``_wire.read_header``, and what reads every header that one leaves to it)."""
        key_version, correlation_id = _KEY_VERSION_CORR.unpack_from(frame, 0)
        entry = self._versions.get(key_version)
        if entry is None:
            api_key, version, _ = _FIXED_HEADER.unpack_from(frame, 0)
            route = self.routes.get(api_key)
            if route is None:
                conn.close("unknown api key", api_key=api_key, api_version=version)
                return None
            if not route.min_version <= version <= route.max_version:
                self._unsupported(conn, route, version, correlation_id)
                return None
            entry = self._versions[key_version] = _Version(self, route, version)
        try:
            # The header's client_id read in place (issue 26: the header's dict cost ~0.3 us of a
            # ~7 us heartbeat); anything but a present client_id and an empty tagged-field
            # section goes through the compiled parser, which raises what it raises.
            (n,) = _CLIENT_ID_SIZE.unpack_from(frame, 8)
            pos = 10 + n
            if n >= 0 and pos < len(frame) and (not entry.flexible_header or frame[pos] == 0):
                client_id = frame[10:pos].decode()
                pos += entry.flexible_header
            else:
                header, pos = entry.parse_header(frame, 0)
                client_id = header["client_id"]
        except DecodeError as e:
            conn.close("undecodable request", api=entry.route.api.name, api_version=entry.version, error=str(e))
            return None
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as e:
            name, version = entry.route.api.name, entry.version
            conn.close("undecodable request", api=name, api_version=version, error=f"malformed message: {e}")
            return None
        return entry, correlation_id, client_id, pos

    def _before_authentication(self, conn: Connection, session: Session, frame: bytes) -> bool:
        """A frame on a connection not authenticated yet: whether it goes on to be dispatched as a
        request (the APIs allowed before authentication); else it was taken here (a bare SASL
        token) or closed the connection."""
        if session.raw_tokens:
            self._raw_token(conn, session, frame)
            return False
        api_key = _FIXED_HEADER.unpack_from(frame, 0)[0]
        if api_key not in _PRE_AUTH_API_KEYS:
            name = API_BY_KEY[api_key].name if api_key in API_BY_KEY else None
            conn.close("request before SASL authentication", api_key=api_key, api=name)
            return False
        return True

    def run_handler(self, route: Route, req: Request) -> None:
        """Handle a request dispatched earlier and held back (a delay injected by ``faults``)."""
        token = current_request.set(req)
        try:
            self._handle(route, req)
        finally:
            current_request.reset(token)

    def _handle(self, route: Route, req: Request) -> None:
        try:
            result = route.handler(req)
        except Exception:
            log.exception("handler_failed", api=route.api.name, api_version=req.api_version, conn=req.conn.id)
            req.conn.close("internal error while handling request", api=route.api.name)
            return
        if result is None:
            return
        if type(result) is dict:  # the common answer, ahead of isawaitable's ~0.3 us
            req.respond(result)
            return
        self._result(route, req, result)

    def _result(self, route: Route, req: Request, result: Any) -> None:
        """A handler's answer other than None or a dict: an awaitable, or a mapping of another type."""
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            task.add_done_callback(lambda t: self._async_done(req, route, t))
        else:
            req.respond(result)

    def _async_done(self, req: Request, route: Route, task: asyncio.Future[Any]) -> None:
        if task.cancelled():
            req.conn.close("handler cancelled", api=route.api.name)
            return
        exc = task.exception()
        if exc is not None:
            log.error(
                "handler_failed",
                api=route.api.name,
                api_version=req.api_version,
                conn=req.conn.id,
                exc_info=(type(exc), exc, exc.__traceback__),
            )
            req.conn.close("internal error while handling request", api=route.api.name)
            return
        result = task.result()
        if result is not None:
            req.respond(result)

    def _raw_token(self, conn: Connection, session: Session, token: bytes) -> None:
        # A slot like any request's, so the bare answer keeps its place in the connection's order.
        req = Request(conn, -1, 0, 0, None, {}, self._encode_response)
        conn.enqueue(req)

        def done(task: asyncio.Future[bytes | None]) -> None:
            if task.cancelled() or task.exception() is not None:
                if not task.cancelled():
                    log.error("sasl_token_failed", conn=conn.id, exc_info=task.exception())
                conn.close("internal error during SASL authentication")
                return
            reply = task.result()
            if reply is None:
                conn.close("SASL authentication failed")
            else:
                req.respond_raw(len(reply).to_bytes(4, "big") + reply)

        asyncio.ensure_future(session.raw_token(conn, token)).add_done_callback(done)

    def _encode_response(self, req: Request, body: dict[str, Any]) -> bytes:
        route = self.routes[req.api_key]
        flexible = route.api.is_flexible(req.api_version) and req.api_key != _API_VERSIONS_KEY
        parts: list[bytes] = [b""]
        route.api.response.codec(req.api_version).encode_into(body, parts)
        size = 4 + sum(len(p) for p in parts)
        if flexible:
            # Response header v1: correlation id and an empty tagged-field section.
            parts[0] = _SIZE_CORR.pack(size + 1, req.correlation_id) + b"\x00"
        else:
            parts[0] = _SIZE_CORR.pack(size, req.correlation_id)
        if self.observers:
            elapsed = (time.perf_counter_ns() - req.received_ns) / 1e9
            for obs in self.observers:
                obs(req, body, elapsed)
        return b"".join(parts)

    def _unsupported(self, conn: Connection, route: Route, version: int, correlation_id: int) -> None:
        if route.api.key == _API_VERSIONS_KEY:
            # Answer in v0 format with the ranges, so the client can retry at a version it shares with us.
            body = API_VERSIONS.response.codec(0).encode(
                {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self.supported_versions()}
            )
            payload = _SIZE_CORR.pack(4 + len(body), correlation_id) + body
            req = Request(conn, route.api.key, 0, correlation_id, None, {}, self._encode_response)
            conn.enqueue(req)
            req.respond_raw(payload)
            return
        # Any other API: Kafka closes the connection without an answer (SocketServer's
        # Processor.parseRequestHeader throws for a version ApiVersionManager.isApiEnabled refuses;
        # ApiKeys.isVersionEnabled accepts every ApiVersions version, whence the fallback above).
        # The answers to the requests before it are written first: Kafka had sent them before it
        # read this one.
        conn.close_after_write("unsupported api version", api=route.api.name, api_version=version)

    # --- ApiVersions ------------------------------------------------------------------------------
    def _api_versions(self, req: Request) -> dict[str, Any]:
        out: dict[str, Any] = {"error_code": 0, "api_keys": self.supported_versions(), "throttle_time_ms": 0}
        if self.features:
            # Kafka's ApiVersionsResponse.createApiVersionsResponse: a finalized level is reported as
            # both its min and max level
            names = sorted(self.features)
            supported, finalized = names, names
            if self.kafka_feature_rules:
                finalized = [n for n in names if self.features[n][2] != 0]
                if req.api_version < 4:
                    supported = [n for n in names if self.features[n][0] != 0]
            out["supported_features"] = [
                {"name": n, "min_version": self.features[n][0], "max_version": self.features[n][1]} for n in supported
            ]
            out["finalized_features_epoch"] = 0
            out["finalized_features"] = [
                {"name": n, "max_version_level": self.features[n][2], "min_version_level": self.features[n][2]}
                for n in finalized
            ]
        return out


def all_known_api_keys() -> set[int]:
    return set(API_BY_KEY)
