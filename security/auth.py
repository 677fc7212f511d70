"""Who is on the other end of a connection: principals, and the SASL exchange of SASL listeners.

Theory of operation. Every connection gets a ``Session`` on its first frame (``Dispatcher.open_session``).
Its principal is ``User:ANONYMOUS`` on PLAINTEXT, ``User:<CN>`` on SSL when the client showed a
verified certificate, and ``User:<name>`` once SASL succeeds. On a SASL listener the session starts
unauthenticated, and the dispatcher lets only ApiVersions, SaslHandshake and SaslAuthenticate
through (anything else closes the connection, as Kafka does). The exchange, as a table:

    state          | request                  | next
    ---------------+--------------------------+-----------------------------------------------
    HANDSHAKE      | SaslHandshake(mech ok)   | AUTHENTICATE (v0: bare tokens follow, v1: SaslAuthenticate)
    HANDSHAKE      | SaslHandshake(mech bad)  | UNSUPPORTED_SASL_MECHANISM + enabled list, close
    AUTHENTICATE   | token, more to come      | AUTHENTICATE (SCRAM client-first -> server-first)
    AUTHENTICATE   | token, exchange complete | DONE: principal set, every API open
    AUTHENTICATE   | bad token / credentials  | SASL_AUTHENTICATION_FAILED + message, close
    anything else  | SaslHandshake/Authenticate | ILLEGAL_SASL_STATE (+ close unless authenticated)

Until DONE a frame may be at most ``sasl_server_max_receive_size`` bytes (Kafka's
``sasl.server.max.receive.size``, 512 KiB): a larger one closes the connection as soon as its size
prefix arrives, before a byte of it is buffered or parsed (``SaslServerAuthenticator.authenticate``
reads with a ``NetworkReceive`` of that maximum and fails the authentication on an
``InvalidReceiveException``). Nothing a client may send within that bound stalls the event loop: a
SCRAM client-first naming an ASCII user the store does not have is refused without ``scramp``'s
per-character SASLprep (a 10 MiB one was 36.8 s of it, on the loop), long SCRAM messages and long
non-ASCII PLAIN passwords are SASLprep'd on one worker thread, and PLAIN checks a printable-ASCII
password with ``hashlib`` alone.

The mechanisms: PLAIN and SCRAM-SHA-256/512 over the credential store (``scram.py``), and
OAUTHBEARER with Kafka's unsecured validator (``oauthbearer.py``), only when listed.

After DONE, Sasl* requests reach Kafka's request handler, which answers ILLEGAL_SASL_STATE; so do
we. Sessions do not expire (KIP-368 session lifetime 0), so clients never re-authenticate.

Failures are logged as ``sasl_authentication_failed`` with the user name and the mechanism, never a
password, proof or token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.ratelimit import LogLimiter
from groupd.protocol.server import Connection, Request

from .listeners import Listener, certificate_cn
from .scram import ALL_MECHANISMS, SCRAM_MECHANISMS, CredentialStore, SaslError, parse_plain

if TYPE_CHECKING:  # imported by the first OAUTHBEARER handshake, which few listeners allow (issue 26)
    from .oauthbearer import UnsecuredValidator

log = structlog.get_logger("groupd.security.auth")
# One client retrying a wrong password logged 117 lines in 6 s: per peer host, mechanism and user,
# one line per interval with the count of the failures held back.
limited_log = LogLimiter(log)

T = TypeVar("T")
ANONYMOUS = "User:ANONYMOUS"
_INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"
# SASL input at least this long is parsed or SASLprep'd on ``_long_input_pool``, one worker thread: scramp's
# SASLprep of a name, a nonce or a non-ASCII password is pure Python (~2 us a character, a 512 KiB one
# a second of CPU). One worker, so that a flood of them takes one core's share of the GIL at most and
# the event loop keeps answering; a real client's input is short and never waits behind them.
_LONG_INPUT = 4096
_long_input_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sasl-long-input")


async def _off_loop(fn: Callable[[], T], long_input: bool) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_long_input_pool if long_input else None, fn)


# RFC 5802 saslname: "=2C" and "=3D" stand for "," and "=" (ScramFormatter.username).
_SASLNAME_ESCAPES = {"=2C": ",", "=3D": "="}


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    DONE = "done"
    FAILED = "failed"


class Mechanism:
    """One SASL exchange on the server side: ``step(token)`` -> (reply, complete)."""

    user: str | None = None

    async def step(self, token: bytes) -> tuple[bytes, bool]:
        raise NotImplementedError


class PlainMechanism(Mechanism):
    def __init__(self, store: CredentialStore) -> None:
        self.store = store

    async def step(self, token: bytes) -> tuple[bytes, bool]:
        _authzid, user, password = parse_plain(token)
        self.user = user
        # PBKDF2 with thousands of iterations takes milliseconds: off the event loop, so that other
        # connections are not stalled by a login (hashlib releases the GIL while it hashes).
        long_input = len(password) >= _LONG_INPUT and not password.isascii()
        ok = await _off_loop(lambda: self.store.check_password(user, password), long_input)
        if not ok:
            raise SaslError(_INVALID_CREDENTIALS)
        return b"", True


class ScramServerMechanism(Mechanism):
    """RFC 5802/7677 via ``scramp``: client-first -> server-first, client-final -> server-final."""

    def __init__(self, store: CredentialStore, mechanism: str, s_nonce: str | None = None) -> None:
        self.store = store
        self.mechanism = mechanism

        def auth_fn(user: str) -> tuple[bytes, bytes, bytes, int] | None:
            self.user = user
            cred = store.scram(user, mechanism)
            return cred.auth_info() if cred is not None else None

        from scramp import ScramMechanism  # on the first SCRAM exchange: ~15 ms of every start otherwise

        self._server = ScramMechanism(mechanism).make_server(auth_fn, s_nonce=s_nonce)
        self._round = 0

    async def step(self, token: bytes) -> tuple[bytes, bool]:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Authentication failed: the SCRAM message is not valid UTF-8") from None
        if self._round == 0:
            self._round = 1
            parts = text.split(",", 3)
            if "tokenauth=true" in text.split(","):
                # Kafka's delegation-token extension: groupd has no delegation tokens.
                raise SaslError("Authentication failed: delegation tokens are not supported")
            if len(parts) > 2 and parts[2].startswith("n="):
                name = parts[2][2:]
                for escaped, char in _SASLNAME_ESCAPES.items():
                    name = name.replace(escaped, char)
                if name.isascii() and name not in self.store:
                    # SASLprep leaves ASCII as it is (or refuses it): the lookup scramp would make
                    # after a per-character pass fails now, the same way. Kafka looks the name up
                    # as sent (ScramSaslServer.evaluateResponse) and answers the same message.
                    self.user = name[:256]
                    raise SaslError(_INVALID_CREDENTIALS, "Unknown user")
            return await self._run(self._server.set_client_first, self._server.get_server_first, text, False)
        if self._round == 1:
            self._round = 2
            return await self._run(self._server.set_client_final, self._server.get_server_final, text, True)
        raise SaslError("Authentication failed: unexpected SCRAM message after the exchange completed")

    async def _run(
        self, take: Callable[[str], None], answer: Callable[[], str], text: str, complete: bool
    ) -> tuple[bytes, bool]:
        from scramp import ScramException

        def run() -> bytes:
            take(text)
            return answer().encode()

        try:
            reply = run() if len(text) < _LONG_INPUT else await _off_loop(run, True)
        except ScramException as e:
            # Unknown user, wrong proof and malformed messages all look the same to the client
            # (Kafka's message); the log gets the reason, which never contains the proof.
            raise SaslError(_INVALID_CREDENTIALS, str(e).split(".")[0]) from None
        return reply, complete


class OAuthBearerMechanism(Mechanism):
    """SASL/OAUTHBEARER, Kafka's unsecured validator (``oauthbearer.py``)."""

    def __init__(self, validator: UnsecuredValidator) -> None:
        from .oauthbearer import OAuthBearerServer

        self._server = OAuthBearerServer(validator)

    async def step(self, token: bytes) -> tuple[bytes, bool]:
        try:
            return self._server.step(token)
        finally:
            self.user = self._server.user


class Session:
    """The security state of one connection (``groupd.protocol.dispatch.Session``)."""

    def __init__(self, auth: Authenticator, conn: Connection, listener: Listener | None) -> None:
        self.auth = auth
        self.conn = conn
        self.listener = listener
        self.principal = ANONYMOUS
        self.sasl = listener is not None and listener.sasl
        self.authenticated = not self.sasl
        self.raw_tokens = False
        self.state = State.HANDSHAKE if self.sasl else State.DONE
        self.mechanism: Mechanism | None = None
        self.mechanism_name = ""
        self._busy = False
        if listener is not None and listener.tls and not self.sasl and conn.transport is not None:
            cn = certificate_cn(conn.transport.get_extra_info("peercert"))
            if cn:
                self.principal = f"User:{cn}"

    async def token(self, token: bytes) -> tuple[bytes, bool]:
        """Feed one token of the exchange; raises SaslError when authentication fails."""
        if self.state is not State.AUTHENTICATE or self.mechanism is None or self._busy:
            raise SaslError("Unexpected SASL token")
        self._busy = True
        try:
            reply, complete = await self.mechanism.step(token)
        except SaslError:
            self.state = State.FAILED
            raise
        finally:
            self._busy = False
        if complete:
            self.state = State.DONE
            self.authenticated = True
            self.raw_tokens = False
            self.principal = f"User:{self.mechanism.user}"
            # Authenticated: frames up to max_request_bytes again (sasl.server.max.receive.size
            # bounds only what is read before, SaslServerAuthenticator).
            srv = self.conn.server
            self.conn.max_frame_bytes, self.conn.frame_limit_setting = srv.max_request_bytes, "max_request_bytes"
        return reply, complete

    async def raw_token(self, conn: Connection, token: bytes) -> bytes | None:
        try:
            reply, _ = await self.token(token)
        except SaslError as e:
            self.auth.log_failure(conn, self, e)
            return None
        if self.authenticated:
            self.auth.log_success(conn, self)
        return reply


class Authenticator:
    """Makes sessions and answers SaslHandshake and SaslAuthenticate."""

    def __init__(
        self,
        store: CredentialStore,
        mechanisms: list[str],
        failed_delay_ms: int = 100,
        oauthbearer: UnsecuredValidator | None = None,
    ) -> None:
        for m in mechanisms:
            if m not in ALL_MECHANISMS:
                raise ValueError(f"unknown SASL mechanism {m!r} (supported: {', '.join(ALL_MECHANISMS)})")
        self.store = store
        self.mechanisms = mechanisms
        self.failed_delay_ms = failed_delay_ms
        self.oauthbearer = oauthbearer  # None: Kafka's defaults, made by the first OAUTHBEARER handshake

    @classmethod
    def from_config(
        cls,
        users: dict[str, Any],
        mechanisms: str,
        failed_delay_ms: int = 100,
        *,
        data_dir: Path | None = None,
        oauthbearer: UnsecuredValidator | None = None,
    ) -> Authenticator:
        names = [m.strip().upper() for m in mechanisms.split(",") if m.strip()]
        return cls(CredentialStore(users, data_dir), names, failed_delay_ms, oauthbearer)

    def open_session(self, conn: Connection) -> Session:
        return Session(self, conn, conn.listener)

    def _mechanism(self, name: str) -> Mechanism:
        if name == "PLAIN":
            return PlainMechanism(self.store)
        if name in SCRAM_MECHANISMS:
            return ScramServerMechanism(self.store, name)
        if name == "OAUTHBEARER":
            if self.oauthbearer is None:
                from .oauthbearer import UnsecuredValidator

                self.oauthbearer = UnsecuredValidator()
            return OAuthBearerMechanism(self.oauthbearer)
        raise AssertionError(name)

    @staticmethod
    def _session(req: Request) -> Session | None:
        s = req.conn.session
        return s if isinstance(s, Session) else None

    def _illegal_state(self, req: Request, session: Session | None, body: dict[str, Any]) -> None:
        req.respond(body)
        # Mid-exchange this is a protocol violation and Kafka closes; after authentication it is
        # just a request the broker does not serve again (no re-authentication here).
        if session is not None and not session.authenticated:
            req.conn.close_after_write("illegal SASL state", api_key=req.api_key, state=session.state.value)

    # --- SaslHandshake ----------------------------------------------------------------------------
    def handshake(self, req: Request) -> None:
        session = self._session(req)
        mechanism = req.body.get("mechanism") or ""
        if session is None or session.state is not State.HANDSHAKE:
            self._illegal_state(
                req, session, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": self.mechanisms}
            )
            return
        if mechanism not in self.mechanisms:
            session.state = State.FAILED
            req.respond({"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": self.mechanisms})
            limited_log.warning(
                "sasl_authentication_failed",
                key=(req.client_host, mechanism[:64]),
                conn=req.conn.id,
                peer=req.client_host,
                mechanism=mechanism[:64],
                reason="unsupported mechanism",
            )
            req.conn.close_after_write("unsupported SASL mechanism", quiet=True)
            return
        session.state = State.AUTHENTICATE
        session.mechanism_name = mechanism
        session.mechanism = self._mechanism(mechanism)
        session.raw_tokens = req.api_version == 0
        req.respond({"error_code": ErrorCode.NONE, "mechanisms": self.mechanisms})

    # --- SaslAuthenticate -------------------------------------------------------------------------
    def authenticate(self, req: Request) -> Any:
        session = self._session(req)
        if session is None or session.state is not State.AUTHENTICATE or session.raw_tokens:
            self._illegal_state(
                req,
                session,
                {
                    "error_code": ErrorCode.ILLEGAL_SASL_STATE,
                    "error_message": "Unexpected SaslAuthenticate request",
                    "auth_bytes": b"",
                    "session_lifetime_ms": 0,
                },
            )
            return None
        return self._authenticate(req, session)

    async def _authenticate(self, req: Request, session: Session) -> None:
        try:
            reply, _ = await session.token(req.body.get("auth_bytes") or b"")
        except SaslError as e:
            self.log_failure(req.conn, session, e)
            req.respond(
                {
                    "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                    "error_message": str(e.args[0]),
                    "auth_bytes": b"",
                    "session_lifetime_ms": 0,
                }
            )
            req.conn.close_after_write("SASL authentication failed", delay_ms=self.failed_delay_ms, quiet=True)
            return
        if session.authenticated:
            self.log_success(req.conn, session)
        req.respond(
            {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": reply, "session_lifetime_ms": 0}
        )

    # --- logging ----------------------------------------------------------------------------------
    def log_failure(self, conn: Connection, session: Session, e: SaslError) -> None:
        user = session.mechanism.user if session.mechanism else None
        limited_log.warning(
            "sasl_authentication_failed",
            key=(conn.peer_host, session.mechanism_name, user[:256] if user else None),
            conn=conn.id,
            peer=conn.peer_host,
            listener=session.listener.name if session.listener else None,
            mechanism=session.mechanism_name,
            user=user[:256] if user else None,
            reason=str(e.args[-1]),
        )

    def log_success(self, conn: Connection, session: Session) -> None:
        log.info(
            "sasl_authenticated",
            conn=conn.id,
            peer=conn.peer_host,
            listener=session.listener.name if session.listener else None,
            mechanism=session.mechanism_name,
            principal=session.principal,
        )


def principal_of(req: Request) -> str:
    s = req.conn.session
    return s.principal if s is not None else ANONYMOUS


PrincipalOf = Callable[[Request], str]
