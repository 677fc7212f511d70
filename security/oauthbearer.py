"""SASL/OAUTHBEARER (RFC 7628) with Kafka's default, *unsecured* token validator.

What Kafka does when OAUTHBEARER is enabled and no validator is configured:
``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts an unsigned JWS (``alg: none``, an empty
signature, ``OAuthBearerUnsecuredJws``) whose principal claim (``sub`` unless
``unsecuredValidatorPrincipalClaimName`` says otherwise) is a non-blank string, with a numeric
``exp`` not yet passed, an ``iat`` (if any) not in the future, ``exp`` after ``iat``, and the
required scope if one is configured. It checks no signature and no issuer: any client may claim to
be anyone, which is why groupd enables it only when ``OAUTHBEARER`` is listed in
``--sasl-mechanisms`` (and says so at start-up). It is what librdkafka's
``enable.sasl.oauthbearer.unsecure.jwt`` / ``sasl.oauthbearer.config=principal=alice`` and
kafka-python's or aiokafka's token providers with a hand-made JWT talk to in development.

The exchange (``OAuthBearerSaslServer.evaluateResponse``):

    client initial response                | server
    ---------------------------------------+-----------------------------------------------------
    n,[a=authzid],^Aauth=Bearer <jws>^A..^A^A | token valid: empty reply, authenticated as User:<claim>
    same, token refused                    | reply {"status":"invalid_token"} (RFC 7628 3.2.2),
                                           |   exchange not complete; the client answers ^A and gets
                                           |   SASL_AUTHENTICATION_FAILED with that JSON as message
    not the RFC 7628 format                | SASL_AUTHENTICATION_FAILED, close

``{"status":"insufficient_scope", "scope":"[...]"}`` when only the required scope is missing.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable
from dataclasses import field
from typing import Any, Protocol

from groupd.protocol.frozen import frozen_record

from .scram import SaslError

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

_SEP = "\x01"
# OAuthBearerClientInitialResponse's grammar (Java's [\x01-\x7F&&[^=,]] written out).
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEP})*){_SEP}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_CONTROL_A = b"\x01"
# SaslServerAuthenticator.handleSaslToken: a SaslException's own text never reaches the client.
_INVALID = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"


class OAuthBearerSettings(Protocol):
    """The broker settings the validator is made from (``groupd.broker.settings.Config``)."""

    oauthbearer_principal_claim_name: str
    oauthbearer_scope_claim_name: str
    oauthbearer_required_scope: str
    oauthbearer_allowable_clock_skew_ms: int


class IllegalToken(Exception):
    """``OAuthBearerIllegalTokenException``: why a token is refused (logged, never sent), and the
    scope that was missing when that is the reason."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


@frozen_record
class Token:
    principal: str
    lifetime_ms: int
    start_ms: int | None
    scope: frozenset[str]
    claims: dict[str, Any] = field(repr=False)

    def __init__(
        self,
        principal: str,
        lifetime_ms: int,
        start_ms: int | None,
        scope: frozenset[str],
        claims: dict[str, Any],
    ) -> None:
        _set(self, "principal", principal)
        _set(self, "lifetime_ms", lifetime_ms)
        _set(self, "start_ms", start_ms)
        _set(self, "scope", scope)
        _set(self, "claims", claims)


@frozen_record
class UnsecuredValidator:
    """``OAuthBearerUnsecuredValidatorCallbackHandler`` with its four JAAS options."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0
    clock: Callable[[], float] = time.time

    def __init__(
        self,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
        required_scope: tuple[str, ...] = (),
        clock_skew_ms: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _set(self, "principal_claim", principal_claim)
        _set(self, "scope_claim", scope_claim)
        _set(self, "required_scope", required_scope)
        _set(self, "clock_skew_ms", clock_skew_ms)
        _set(self, "clock", clock)

    @classmethod
    def from_settings(cls, s: OAuthBearerSettings) -> UnsecuredValidator:
        return cls(
            s.oauthbearer_principal_claim_name.strip() or "sub",
            s.oauthbearer_scope_claim_name.strip() or "scope",
            tuple(s.oauthbearer_required_scope.split()),  # OAuthBearerScopeUtils.parseScope
            s.oauthbearer_allowable_clock_skew_ms,
        )

    def validate(self, compact: str) -> Token:
        """The token, or IllegalToken (``OAuthBearerUnsecuredJws`` then the handler's checks)."""
        if ".." in compact:
            raise IllegalToken("Malformed compact serialization contains '..'")
        splits = compact.split(".")
        if len(splits) != 3:
            raise IllegalToken(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
            )
        header, claims = _to_map(splits[0]), _to_map(splits[1])
        if header.get("alg") != "none":
            raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise IllegalToken("Unsecured JWS must not contain a digital signature")
        scope = self._scope(claims)
        exp = _claim(claims, "exp", "Number")
        if exp is None:
            raise IllegalToken("No expiration time in JWT")
        principal = _claim(claims, self.principal_claim, "String")
        if principal is None or not principal.strip():
            raise IllegalToken(f"No principal name in JWT claim: {self.principal_claim}")
        iat = _claim(claims, "iat", "Number")
        now_ms = int(self.clock() * 1000)
        skew = self.clock_skew_ms
        if iat is not None and 1000 * iat > now_ms + skew:
            raise IllegalToken(f"The Issued At value ({iat} seconds) was after the indicated time ({now_ms} ms)")
        if now_ms - skew >= 1000 * exp:
            raise IllegalToken(f"The indicated time ({now_ms} ms) was on or after the Expiration Time ({exp} seconds)")
        if iat is not None and exp <= iat:
            raise IllegalToken(f"The Expiration Time ({exp} seconds) was not after the Issued At time ({iat} seconds)")
        for needed in self.required_scope:
            if needed not in scope:
                # Java's List.toString: what Kafka puts in the error's "scope"
                raise IllegalToken(
                    f"The provided scope was missing a required scope ({needed})",
                    scope="[" + ", ".join(self.required_scope) + "]",
                )
        start = None if iat is None else round(iat * 1000)
        return Token(principal, round(exp * 1000), start, scope, claims)

    def _scope(self, claims: dict[str, Any]) -> frozenset[str]:
        value = claims.get(self.scope_claim)
        if isinstance(value, str):
            return frozenset({value.strip()}) if value.strip() else frozenset()
        value = _claim(claims, self.scope_claim, "List")
        return frozenset(s.strip() for s in value or () if s.strip())


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _claim(claims: dict[str, Any], name: str, kind: str) -> Any:
    """``OAuthBearerUnsecuredJws.claim``: the value if of the type, None if absent, else refused."""
    value = claims.get(name)
    if value is None:
        return None
    ok = {"Number": _is_number(value), "String": isinstance(value, str), "List": isinstance(value, list)}[kind]
    if not ok:
        raise IllegalToken(f"The '{name}' claim was not of type {kind}")
    return value


def _as_text(v: Any) -> str:
    # Jackson's JsonNode.asText for what is not an array or a number
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if _is_number(v):
        return json.dumps(v)
    return ""


def _to_map(split: str) -> dict[str, Any]:
    """``OAuthBearerUnsecuredJws.toMap``: Base64URL JSON object -> claims (arrays become lists of
    text, numbers stay numbers, anything else its text)."""
    try:
        raw = base64.urlsafe_b64decode(split + "=" * (-len(split) % 4))
    except (binascii.Error, ValueError):
        raise IllegalToken("malformed Base64 URL encoded value") from None
    try:
        node = json.loads(raw)
    except (ValueError, RecursionError):
        raise IllegalToken("malformed JSON") from None
    if not isinstance(node, dict):
        return {}
    return {
        k: [_as_text(x) for x in v] if isinstance(v, list) else v if _is_number(v) else _as_text(v)
        for k, v in node.items()
    }


def parse_initial_response(message: bytes) -> tuple[str, str, dict[str, str]]:
    """``OAuthBearerClientInitialResponse``: (token, authorization id, extensions); SaslError when
    the message is not RFC 7628's (the client is told only that the credentials were invalid)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(_INVALID, "Invalid OAUTHBEARER client first message") from None
    m = _INITIAL_RESPONSE.fullmatch(text)
    if m is None:
        raise SaslError(_INVALID, "Invalid OAUTHBEARER client first message")
    props: dict[str, str] = {}
    for pair in filter(None, m.group("kvpairs").split(_SEP)):
        key, _, value = pair.partition("=")
        props[key] = value
    auth = props.pop("auth", None)
    if auth is None:
        raise SaslError(_INVALID, "Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise SaslError(_INVALID, "Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise SaslError(_INVALID, f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')[:32]}")
    return am.group("token"), m.group("authzid") or "", props


class OAuthBearerServer:
    """One OAUTHBEARER exchange on the server side (``OAuthBearerSaslServer``): ``step(token)`` ->
    (reply, complete); ``user`` is the token's principal name once known."""

    def __init__(self, validator: UnsecuredValidator) -> None:
        self.validator = validator
        self.user: str | None = None
        self.token: Token | None = None
        self._error: str | None = None  # the JSON answered to a refused token

    def step(self, message: bytes) -> tuple[bytes, bool]:
        if message == _CONTROL_A and self._error is not None:
            # The client acknowledged our error: the exchange fails with it as the message.
            raise SaslError(self._error, self._reason)
        self._error = None
        compact, authzid, _extensions = parse_initial_response(message)
        try:
            token = self.validator.validate(compact)
        except IllegalToken as e:
            # The unsecured validator accepts every extension (OAuthBearerExtensionsValidatorCallback).
            # OAuthBearerSaslServer.jsonErrorResponse, its spacing included
            status = (
                f'{{"status":"insufficient_scope", "scope":"{e.scope}"}}' if e.scope else '{"status":"invalid_token"}'
            )
            self._error, self._reason = status, str(e)
            return status.encode(), False
        if authzid and authzid != token.principal:
            raise SaslError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from "
                f"the token's principal name ({token.principal})"
            )
        self.user, self.token = token.principal, token
        return b"", True

    _reason = ""
