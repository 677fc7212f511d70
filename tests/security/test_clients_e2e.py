"""Real clients against a daemon with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners:
authentication with every mechanism, refusals, TLS with and without client certificates, and ACLs."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import (
    GroupAuthorizationFailedError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    TopicAuthorizationFailedError,
)

from tests.support import kafka_python

from .conftest import PASSWORDS, SecureDaemon

pytestmark = pytest.mark.e2e

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SASL_PROTOCOLS = ["SASL_PLAINTEXT", "SASL_SSL"]


def ck_conf(d: SecureDaemon, protocol: str, mechanism: str | None = None, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": d.bootstrap(protocol), "security.protocol": protocol}
    if protocol.endswith("SSL"):
        conf["ssl.ca.location"] = str(d.pki.ca)
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": PASSWORDS["alice"]})
    conf.update(extra)
    return conf


def kp_conf(
    d: SecureDaemon, protocol: str, mechanism: str, user: str = "alice", password: str | None = None
) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap_servers": d.bootstrap(protocol),
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user] if password is None else password,
        "request_timeout_ms": 10_000,
    }
    if protocol == "SASL_SSL":
        conf["ssl_cafile"] = str(d.pki.ca)
    return conf


def ck_roundtrip(conf: dict[str, Any], topic: str, group: str) -> None:
    """Produce one record, consume it in a consumer group, commit, and read the commit back."""
    p = Producer(conf)
    p.produce(topic, b"payload")
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 20
        msg = None
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                break
        assert msg is not None and msg.value() == b"payload"
        committed = c.commit(asynchronous=False)
        assert committed is not None and committed[0].error is None and committed[0].offset == 1
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 1
    finally:
        c.close()


# --- SASL with confluent-kafka -------------------------------------------------------------------
@pytest.mark.parametrize("protocol", SASL_PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_sasl_produce_consume_commit(secure_daemon: SecureDaemon, protocol: str, mechanism: str) -> None:
    suffix = f"{protocol}-{mechanism}-{uuid.uuid4().hex[:6]}".lower()
    ck_roundtrip(ck_conf(secure_daemon, protocol, mechanism), f"ck-{suffix}", f"app-ck-{suffix}")


@pytest.mark.parametrize("protocol", SASL_PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_wrong_password_is_an_authentication_error(
    secure_daemon: SecureDaemon, protocol: str, mechanism: str
) -> None:
    errors: list[KafkaError] = []
    conf = ck_conf(secure_daemon, protocol, mechanism, **{"sasl.password": "wrong", "error_cb": errors.append})
    p = Producer(conf)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        p.poll(0.2)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "Invalid user credentials" in auth[0].str()


def _assert_group_authorization_failed(c: Consumer, topic: str, errors: list[KafkaError]) -> None:
    """Subscribe and poll until the consumer reports GROUP_AUTHORIZATION_FAILED (or 15 s pass)."""
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = c.poll(0.3)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())
            if any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors):
                break
    finally:
        c.close()
    assert any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors), errors


# --- SASL with kafka-python ----------------------------------------------------------------------
@pytest.mark.parametrize("protocol", SASL_PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_sasl_produce_consume_commit(secure_daemon: SecureDaemon, protocol: str, mechanism: str) -> None:
    suffix = f"{protocol}-{mechanism}-{uuid.uuid4().hex[:6]}".lower()
    topic, group = f"kp-{suffix}", f"app-kp-{suffix}"
    conf = kp_conf(secure_daemon, protocol, mechanism)
    p = KafkaProducer(**conf)
    try:
        p.send(topic, b"payload").get(15)
    finally:
        p.close()
    c = KafkaConsumer(
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
        **conf,
    )
    kafka_python.subscribe(c, topic)
    try:
        msg = next(iter(c))
        assert msg.value == b"payload"
        c.commit()
        from kafka import TopicPartition as KTP

        assert c.committed(KTP(topic, 0)) == 1
    finally:
        c.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_wrong_password_raises_auth_error(
    secure_daemon: SecureDaemon, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    # kafka-python 3.0.12 keeps retrying a bootstrap whose connection failed authentication and
    # reports a bootstrap timeout; the SaslAuthenticationFailedError it got is what it logs.
    conf = kp_conf(secure_daemon, "SASL_PLAINTEXT", mechanism, password="wrong")
    caplog.set_level(logging.ERROR, logger="kafka")
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(**conf, bootstrap_timeout_ms=2000).close()
    failures = [
        r
        for r in caplog.records
        if isinstance(r.args, tuple) and any(isinstance(a, SaslAuthenticationFailedError) for a in r.args)
    ]
    assert failures, [r.getMessage() for r in caplog.records]
    assert "Invalid user credentials" in failures[0].getMessage()


# --- aiokafka (one combination: its SASL path differs from kafka-python's) -----------------------
async def test_aiokafka_scram_sha512_over_sasl_ssl(secure_daemon: SecureDaemon) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    ctx = create_ssl_context(cafile=str(secure_daemon.pki.ca))
    common = {
        "bootstrap_servers": secure_daemon.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": ctx,
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "bob",
        "sasl_plain_password": PASSWORDS["bob"],
    }
    p = AIOKafkaProducer(**common)
    await p.start()
    try:
        await p.send_and_wait("orders", b"from-aiokafka")
    finally:
        await p.stop()
    c = AIOKafkaConsumer("orders", group_id="bob-aio", auto_offset_reset="earliest", enable_auto_commit=False, **common)
    await c.start()
    try:
        msg = await c.getone()
        assert msg.value is not None
        await c.commit()
    finally:
        await c.stop()


# --- TLS only, and client certificates -----------------------------------------------------------
def test_confluent_ssl_listener_without_client_certificate(secure_daemon: SecureDaemon) -> None:
    # No certificate: User:ANONYMOUS, which the ACL lets use any group.
    ck_roundtrip(ck_conf(secure_daemon, "SSL"), "tls-orders", "zz-anonymous-group")


def test_confluent_client_certificate_principal_is_the_cn(secure_daemon: SecureDaemon) -> None:
    pki = secure_daemon.pki
    conf = ck_conf(
        secure_daemon,
        "SSL",
        **{"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)},
    )
    # CN=alice may use app-* groups ...
    ck_roundtrip(conf, "tls-cert-orders", "app-tls-cert")
    # ... but not others, which ANONYMOUS could: so the principal really is User:alice.
    errors: list[KafkaError] = []
    c = Consumer({**conf, "group.id": "zz-not-alice", "error_cb": errors.append})
    _assert_group_authorization_failed(c, "tls-cert-orders", errors)


def test_confluent_refuses_server_it_cannot_verify(secure_daemon: SecureDaemon, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from .conftest import make_pki

    other = make_pki(tmp_path)  # a different CA
    errors: list[KafkaError] = []
    p = Producer(ck_conf(secure_daemon, "SSL", **{"ssl.ca.location": str(other.ca), "error_cb": errors.append}))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(e.code() == KafkaError._SSL for e in errors):
        p.poll(0.2)
    assert any(e.code() == KafkaError._SSL for e in errors), errors


# --- authorization -------------------------------------------------------------------------------
def test_confluent_group_authorization_failed(secure_daemon: SecureDaemon) -> None:
    errors: list[KafkaError] = []
    conf = ck_conf(secure_daemon, "SASL_PLAINTEXT", "SCRAM-SHA-256", **{"error_cb": errors.append})
    c = Consumer({**conf, "group.id": "not-alices-group"})
    _assert_group_authorization_failed(c, "orders", errors)


def test_kafka_python_group_authorization_failed(secure_daemon: SecureDaemon) -> None:
    c = KafkaConsumer(
        "orders",
        group_id="app-not-bobs",
        consumer_timeout_ms=10_000,
        **kp_conf(secure_daemon, "SASL_PLAINTEXT", "PLAIN", user="bob"),
    )
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in c:
                pass
    finally:
        c.close()


def test_kafka_python_topic_authorization_failed(secure_daemon: SecureDaemon) -> None:
    # bob may use the topic "orders" (and names starting with it) only.
    p = KafkaProducer(**kp_conf(secure_daemon, "SASL_PLAINTEXT", "SCRAM-SHA-256", user="bob"), max_block_ms=5000)
    try:
        p.send("orders", b"fine").get(10)
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("secrets", b"nope").get(10)
    finally:
        p.close()


def test_ssl_client_auth_required_refuses_clients_without_certificate(
    tmp_path_factory: pytest.TempPathFactory, secure_daemon: SecureDaemon
) -> None:
    from tests.support.daemon import GroupdProcess

    from .conftest import listener_ports

    pki = secure_daemon.pki
    d = tmp_path_factory.mktemp("groupd-mtls")
    proc = GroupdProcess(
        d / "data",
        "--listeners",
        "SSL://127.0.0.1:0",
        *pki.server_args("required"),
    ).start()
    try:
        port = listener_ports(proc)["SSL"]
        base = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
        errors: list[KafkaError] = []
        p = Producer({**base, "error_cb": errors.append})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not errors:
            p.poll(0.2)
        assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
        with_cert = {**base, "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
        ck_roundtrip(with_cert, "mtls-orders", "mtls-group")
    finally:
        proc.stop()
