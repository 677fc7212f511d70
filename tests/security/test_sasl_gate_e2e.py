"""The SASL gate on the wire, with a raw client: what is accepted before authentication, the error
answers, the closes, SaslHandshake v0's bare tokens, and per-listener endpoints."""

from __future__ import annotations

import time

import pytest
from groupd.protocol.errors import ErrorCode
from scramp import ScramClient

from tests.support.daemon import GroupdProcess

from .conftest import PASSWORDS, RawClient, SecureDaemon, listener_ports, security_toml

pytestmark = pytest.mark.e2e


def _wait_event(d: SecureDaemon, name: str, pred, timeout: float = 10.0) -> dict:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for ev in d.proc.events(name):
            if pred(ev):
                return ev
        time.sleep(0.05)
    raise AssertionError(f"no {name} event matched")


def _plain(c: RawClient, user: str, password: str) -> dict:  # type: ignore[type-arg]
    hs = c.request("SaslHandshake", 1, {"mechanism": "PLAIN"})
    assert hs["error_code"] == 0
    return c.request("SaslAuthenticate", 2, {"auth_bytes": f"\0{user}\0{password}".encode()})


def test_api_versions_advertises_sasl_apis_and_works_before_authentication(secure_daemon: SecureDaemon) -> None:
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    try:
        r = c.request("ApiVersions", 3, {"client_software_name": "raw", "client_software_version": "1"})
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
    finally:
        c.close()


@pytest.mark.parametrize(
    ("api", "version", "body"),
    [
        ("Metadata", 9, {"topics": None}),
        ("FindCoordinator", 3, {"key": "app-1", "key_type": 0}),
        ("Heartbeat", 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
    ],
)
def test_other_requests_before_authentication_close_the_connection(
    secure_daemon: SecureDaemon, api: str, version: int, body: dict
) -> None:  # type: ignore[type-arg]
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    try:
        c.send(api, version, body)
        assert c.closed_by_peer()
    finally:
        c.close()
    _wait_event(
        secure_daemon,
        "connection_closed",
        lambda ev: ev.get("reason") == "request before SASL authentication" and ev.get("api") == api,
    )


def test_unsupported_mechanism_lists_enabled_ones_and_closes(secure_daemon: SecureDaemon) -> None:
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    try:
        r = c.request("SaslHandshake", 1, {"mechanism": "GSSAPI"})
        assert r["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert r["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.closed_by_peer()
    finally:
        c.close()


def test_wrong_password_gets_error_then_close_and_is_logged_without_secret(secure_daemon: SecureDaemon) -> None:
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    try:
        r = _plain(c, "alice", "not-the-password-xyz")
        assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r["error_message"] == "Authentication failed: Invalid user credentials"
        assert c.closed_by_peer()
    finally:
        c.close()
    ev = _wait_event(secure_daemon, "sasl_authentication_failed", lambda ev: ev.get("mechanism") == "PLAIN")
    assert ev["user"] == "alice"
    assert "not-the-password-xyz" not in secure_daemon.proc.log_path.read_text()


def test_authenticate_without_handshake_is_illegal_state(secure_daemon: SecureDaemon) -> None:
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    try:
        r = c.request("SaslAuthenticate", 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert r["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert c.closed_by_peer()
    finally:
        c.close()


def test_malformed_scram_tokens_fail_cleanly(secure_daemon: SecureDaemon) -> None:
    for token in (b"\xff\x00\xfe", b"n,,n=alice", b"n,,n=alice,r=x,=", b"x" * 5000):
        c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
        try:
            assert c.request("SaslHandshake", 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
            r = c.request("SaslAuthenticate", 2, {"auth_bytes": token})
            assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert c.closed_by_peer()
        finally:
            c.close()
    assert secure_daemon.proc.proc is not None and secure_daemon.proc.proc.poll() is None


def test_plain_v1_then_requests_flow_and_metadata_names_this_listener(secure_daemon: SecureDaemon) -> None:
    port = secure_daemon.ports["SASL_PLAINTEXT"]
    c = RawClient(port)
    try:
        r = _plain(c, "alice", PASSWORDS["alice"])
        assert (r["error_code"], r["session_lifetime_ms"]) == (0, 0)
        md = c.request("Metadata", 9, {"topics": None, "allow_auto_topic_creation": False})
        assert [(b["host"], b["port"]) for b in md["brokers"]] == [("127.0.0.1", port)]
        fc = c.request("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["app-x"]})
        assert [(x["error_code"], x["port"]) for x in fc["coordinators"]] == [(0, port)]
        # A second handshake after authentication: Kafka's request handler answers ILLEGAL_SASL_STATE.
        assert c.request("SaslHandshake", 1, {"mechanism": "PLAIN"})["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert c.request("ApiVersions", 0, {})["error_code"] == 0
    finally:
        c.close()


def test_plaintext_listener_advertises_its_own_port_and_refuses_sasl(secure_daemon: SecureDaemon) -> None:
    port = secure_daemon.ports["PLAINTEXT"]
    c = RawClient(port)
    try:
        assert c.request("SaslHandshake", 1, {"mechanism": "PLAIN"})["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        md = c.request("Metadata", 1, {"topics": []})
        assert [b["port"] for b in md["brokers"]] == [port]
        fc = c.request("FindCoordinator", 1, {"key": "app-x", "key_type": 0})
        assert (fc["error_code"], fc["port"]) == (0, port)
    finally:
        c.close()


def test_handshake_v0_plain_uses_bare_tokens(secure_daemon: SecureDaemon) -> None:
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    try:
        assert c.request("SaslHandshake", 0, {"mechanism": "PLAIN"})["error_code"] == 0
        c.send_raw(b"\0bob\0" + PASSWORDS["bob"].encode())
        assert c.recv_frame() == b""  # an empty token: authenticated
        md = c.request("Metadata", 1, {"topics": []})
        assert md["brokers"][0]["port"] == secure_daemon.ports["SASL_PLAINTEXT"]
    finally:
        c.close()


def test_handshake_v0_scram_and_bad_proof_closes(secure_daemon: SecureDaemon) -> None:
    for password, ok in ((PASSWORDS["bob"], True), ("wrong", False)):
        c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
        try:
            assert c.request("SaslHandshake", 0, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
            sc = ScramClient(["SCRAM-SHA-512"], "bob", password)
            c.send_raw(sc.get_client_first().encode())
            sc.set_server_first(c.recv_frame().decode())
            c.send_raw(sc.get_client_final().encode())
            if ok:
                sc.set_server_final(c.recv_frame().decode())
                assert c.request("ApiVersions", 0, {})["error_code"] == 0
            else:
                assert c.closed_by_peer()  # v0 has no error field: the broker just closes
        finally:
            c.close()


def test_failed_authentication_closes_only_after_the_configured_delay(tmp_path, pki) -> None:  # type: ignore[no-untyped-def]
    """Kafka's connection.failed.authentication.delay.ms: the error answer goes out at once, the
    close follows the delay (here far longer than the test), and nothing else is served meanwhile."""
    cfg = tmp_path / "groupd.toml"
    cfg.write_text(security_toml())
    proc = GroupdProcess(
        tmp_path / "data",
        "--config",
        str(cfg),
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--connection-failed-authentication-delay-ms",
        "60000",
    ).start()
    try:
        c = RawClient(listener_ports(proc)["SASL_PLAINTEXT"])
        try:
            r = _plain(c, "alice", "wrong")
            assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert not c.closed_by_peer(wait=0.5)  # still open: recv timed out rather than seeing EOF
            c.send("Metadata", 9, {"topics": None})
            assert not c.closed_by_peer(wait=0.5)  # and not answered
        finally:
            c.close()
    finally:
        proc.stop()
