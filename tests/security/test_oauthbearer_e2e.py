"""SASL/OAUTHBEARER with Kafka's default unsecured-token validator (issue 29 item 3), with
librdkafka's own unsecured JWT (``sasl.oauthbearer.config=principal=...``), kafka-python's and
aiokafka's token providers, and a raw client for the RFC 7628 error exchange."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from groupd.protocol.errors import ErrorCode
from kafka import KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider

from tests.support.daemon import GroupdProcess

from .conftest import RawClient, listener_ports, security_toml

pytestmark = pytest.mark.e2e


def jws(claims: dict[str, object], alg: str = "none", signature: str = "") -> str:
    b64 = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{b64({'alg': alg})}.{b64(claims)}.{signature}"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GroupdProcess, int]]:
    d = tmp_path_factory.mktemp("oauth")
    cfg = d / "groupd.toml"
    cfg.write_text(security_toml())  # alice: topics "*"; ACL tables name no "mallory"
    proc = GroupdProcess(
        d / "data",
        "--config",
        str(cfg),
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-mechanisms",
        "PLAIN,OAUTHBEARER",
    )
    proc.start()
    try:
        yield proc, listener_ports(proc)["SASL_PLAINTEXT"]
    finally:
        proc.stop()


def _produce(conf: dict[str, object], topic: str) -> object:
    p = Producer({**conf, "message.timeout.ms": 10000})
    out: list[object] = []
    p.produce(topic, b"x", on_delivery=lambda err, _m: out.append(err))
    p.flush(15)
    return out[0] if out else "not delivered"


def test_librdkafka_unsecured_jwt_authenticates_as_its_principal(daemon: tuple[GroupdProcess, int]) -> None:
    proc, port = daemon
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
    }
    assert _produce({**conf, "sasl.oauthbearer.config": "principal=alice"}, "oauth-topic") is None
    # the principal is the token's: mallory is authenticated, and no ACL lets her write
    err = _produce({**conf, "sasl.oauthbearer.config": "principal=mallory"}, "oauth-topic")
    assert isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    ok = [e for e in proc.events("sasl_authenticated") if e.get("mechanism") == "OAUTHBEARER"]
    assert {e["principal"] for e in ok} == {"User:alice", "User:mallory"}
    assert proc.events("sasl_oauthbearer_unsecured")  # said at start-up


class _Tokens(AbstractTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


def test_kafka_python_token_provider(daemon: tuple[GroupdProcess, int]) -> None:
    _proc, port = daemon
    now = int(time.time())
    p = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=_Tokens(jws({"sub": "alice", "iat": now, "exp": now + 600})),
    )
    try:
        p.send("oauth-topic", b"from kafka-python").get(timeout=30)
    finally:
        p.close()


def test_aiokafka_token_provider(daemon: tuple[GroupdProcess, int]) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider as AioTokenProvider

    _proc, port = daemon
    now = int(time.time())
    token = jws({"sub": "alice", "iat": now, "exp": now + 600})

    class Tokens(AioTokenProvider):
        async def token(self) -> str:
            return token

    async def produce() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Tokens(),
        )
        await p.start()
        try:
            await p.send_and_wait("oauth-topic", b"from aiokafka")
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(produce(), 30))


def _authenticate(port: int, token_message: bytes) -> tuple[RawClient, dict]:  # type: ignore[type-arg]
    c = RawClient(port)
    assert c.request("SaslHandshake", 1, {"mechanism": "OAUTHBEARER"})["error_code"] == 0
    return c, c.request("SaslAuthenticate", 2, {"auth_bytes": token_message})


def _message(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


_REFUSED = {
    "expired": lambda now: jws({"sub": "alice", "exp": now - 10}),
    "signed_alg": lambda now: jws({"sub": "alice", "exp": now + 600}, alg="HS256"),
    "signature": lambda now: jws({"sub": "alice", "exp": now + 600}, signature="c2ln"),
    "no_principal": lambda now: jws({"exp": now + 600}),
    "no_expiry": lambda now: jws({"sub": "alice"}),
    "issued_in_the_future": lambda now: jws({"sub": "alice", "exp": now + 600, "iat": now + 300}),
    "not_a_jws": lambda now: "not-a-jws",
}


@pytest.mark.parametrize("case", list(_REFUSED))
def test_a_refused_token_gets_the_rfc7628_error_then_the_failure(daemon: tuple[GroupdProcess, int], case: str) -> None:
    _proc, port = daemon
    c, r = _authenticate(port, _message(_REFUSED[case](time.time())))
    try:
        # OAuthBearerSaslServer: the error JSON as a challenge; the client answers %x01
        assert r["error_code"] == 0 and r["auth_bytes"] == b'{"status":"invalid_token"}'
        r = c.request("SaslAuthenticate", 2, {"auth_bytes": b"\x01"})
        assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r["error_message"] == '{"status":"invalid_token"}'
        assert c.closed_by_peer()
    finally:
        c.close()


def test_a_malformed_message_and_a_foreign_authzid_fail_at_once(daemon: tuple[GroupdProcess, int]) -> None:
    _proc, port = daemon
    c, r = _authenticate(port, b"n,,auth=Bearer x")
    try:
        assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r["error_message"] == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
        )
        assert c.closed_by_peer()
    finally:
        c.close()
    token = jws({"sub": "alice", "exp": time.time() + 600})
    c, r = _authenticate(port, _message(token, authzid="bob"))
    try:
        assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "(bob)" in r["error_message"] and "(alice)" in r["error_message"]
    finally:
        c.close()
    c, r = _authenticate(port, _message(token, authzid="alice"))
    try:
        assert (r["error_code"], r["auth_bytes"]) == (0, b"")
        md = c.request("Metadata", 9, {"topics": None, "allow_auto_topic_creation": False})
        assert md["brokers"]  # authenticated: every API open
    finally:
        c.close()


def test_oauthbearer_is_off_unless_listed(tmp_path: Path) -> None:
    proc = GroupdProcess(tmp_path / "data", "--listeners", "SASL_PLAINTEXT://127.0.0.1:0")
    proc.start()
    try:
        c = RawClient(listener_ports(proc)["SASL_PLAINTEXT"])
        r = c.request("SaslHandshake", 1, {"mechanism": "OAUTHBEARER"})
        assert r["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert "OAUTHBEARER" not in r["mechanisms"]
        c.close()
        assert not proc.events("sasl_oauthbearer_unsecured")
    finally:
        proc.stop()
