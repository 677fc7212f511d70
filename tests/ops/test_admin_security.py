"""The admin CLI against a real groupd daemon's SSL, SASL_PLAINTEXT and SASL_SSL listeners (the
security suite's daemon, PKI and users): every command works with good credentials, and fails in
one clear line, with a nonzero exit, with bad ones or the wrong protocol. ``healthcheck`` fails when
it cannot authenticate (ApiVersions alone is answered before authentication).

What a command changed is checked with a real client (confluent-kafka over SASL_SSL).
"""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from groupd.ops.kafka_client import Security, parse_jaas_config, read_properties

# pki and secure_daemon are fixtures, reached through `daemon` below.
from tests.security.conftest import PASSWORDS, SecureDaemon, pki, secure_daemon  # noqa: F401

pytestmark = pytest.mark.e2e

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def daemon(request: pytest.FixtureRequest) -> SecureDaemon:
    return request.getfixturevalue("secure_daemon")  # type: ignore[no-any-return]


def properties(tmp_path: Path, **entries: str) -> str:
    """A Kafka client properties file (dots in keys written as __)."""
    path = tmp_path / "client.properties"
    path.write_text("# written by the test\n" + "".join(f"{k.replace('__', '.')}={v}\n" for k, v in entries.items()))
    return str(path)


def sasl_ssl_config(daemon: SecureDaemon, tmp_path: Path, password: str) -> list[str]:
    cfg = properties(
        tmp_path,
        security__protocol="SASL_SSL",
        ssl__ca__location=str(daemon.pki.ca),
        sasl__mechanism="SCRAM-SHA-512",
        sasl__jaas__config=f'{SCRAM} required username="alice" password="{password}";',
    )
    return ["--bootstrap-server", daemon.bootstrap("SASL_SSL"), "--command-config", cfg]


def ssl_flags(daemon: SecureDaemon) -> list[str]:
    return [
        "--bootstrap-server",
        daemon.bootstrap("SSL"),
        "--security-protocol",
        "SSL",
        "--ssl-cafile",
        str(daemon.pki.ca),
        "--ssl-certfile",
        str(daemon.pki.client_cert),  # CN=alice: the principal User:alice
        "--ssl-keyfile",
        str(daemon.pki.client_key),
    ]


def sasl_plaintext_flags(daemon: SecureDaemon) -> list[str]:
    return [
        "--bootstrap-server",
        daemon.bootstrap("SASL_PLAINTEXT"),
        "--security-protocol",
        "SASL_PLAINTEXT",
        "--sasl-mechanism",
        "SCRAM-SHA-256",
        "--sasl-username",
        "alice",
    ]


def committed_seen_by_confluent(daemon: SecureDaemon, group: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": daemon.bootstrap("SASL_SSL"),
            "group.id": group,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(daemon.pki.ca),
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": PASSWORDS["alice"],
        }
    )
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in got]
    finally:
        c.close()


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL", "SASL_PLAINTEXT"])
def test_every_command_over_a_secured_listener(
    daemon: SecureDaemon,
    cli: Callable[..., Any],
    unique: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    listener: str,
) -> None:
    if listener == "SASL_SSL":
        conn = sasl_ssl_config(daemon, tmp_path, PASSWORDS["alice"])
        principal = "alice (SCRAM-SHA-512)"
    elif listener == "SSL":
        conn = ssl_flags(daemon)
        principal = None
    else:
        conn = sasl_plaintext_flags(daemon)
        monkeypatch.setenv("GROUPD_SASL_PASSWORD", PASSWORDS["alice"])  # the password from the environment
        principal = "alice (SCRAM-SHA-256)"
    topic, group = f"t-{unique}", f"app-{unique}"  # alice's ACL: groups app-*, every topic

    r = cli("healthcheck", *conn)
    assert r.code == 0, r.err
    assert r.out.startswith(f"ok: {conn[1]} answered ApiVersions")
    assert (principal is None and "authenticated" not in r.out) or f"authenticated as {principal}" in r.out

    r = cli("topics", "create", topic, "--partitions", "2", *conn)
    assert (r.code, r.out.strip()) == (0, f"created topic '{topic}' with 2 partitions"), r.err
    assert topic in cli("topics", "list", *conn).out.split()
    described = json.loads(cli("topics", "describe", topic, "--json", *conn).out)
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1]

    r = cli("offsets", "reset", "--group", group, "--topic", topic, "--to-earliest", "--allow-new-group", *conn)
    assert r.code == 0 and "preview only" in r.err, r.err
    r = cli(
        "offsets", "reset", "--group", group, "--topic", topic, "--to-latest", "--allow-new-group", "--execute", *conn
    )
    assert r.code == 0, r.err
    assert committed_seen_by_confluent(daemon, group, topic, 2) == [0, 0]  # an empty topic's log end

    assert group in cli("groups", "list", *conn).out
    d = json.loads(cli("groups", "describe", group, "--json", *conn).out)
    assert [(o["partition"], o["committed_offset"]) for o in d["offsets"]] == [(0, 0), (1, 0)]
    r = cli("offsets", "delete", "--group", group, "--topic", f"{topic}:1", *conn)
    assert r.code == 0, r.err
    assert committed_seen_by_confluent(daemon, group, topic, 2) == [0, -1001]  # -1001: librdkafka's "none"
    assert cli("groups", "delete", group, *conn).code == 0
    assert cli("topics", "alter", topic, "--partitions", "3", *conn).code == 0
    assert cli("topics", "delete", topic, *conn).code == 0


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("wrong-password", "SASL authentication of 'alice' (SCRAM-SHA-512) at {addr} failed"),
        ("no-credentials", "a SASL listener closes unauthenticated connections"),
        ("plaintext-to-tls", "is it an SSL or SASL_SSL listener?"),
        ("untrusted-ca", "is not trusted"),
        ("tls-to-plaintext", "TLS handshake with {addr} failed"),
        ("sasl-to-plaintext", "refused SASL (ILLEGAL_SASL_STATE): is it a PLAINTEXT or SSL listener?"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["healthcheck"],
        ["groups", "list"],
        ["groups", "describe", "app-x"],
        ["offsets", "reset", "--group", "app-x", "--topic", "t", "--to-earliest", "--execute"],
        ["offsets", "delete", "--group", "app-x", "--topic", "t"],
        ["topics", "list"],
        ["topics", "create", "never-created"],
    ],
    ids=lambda c: "-".join(c[:2]),
)
def test_bad_credentials_or_protocol_fail_in_one_clear_line(
    daemon: SecureDaemon, cli: Callable[..., Any], tmp_path: Path, how: str, message: str, command: list[str]
) -> None:
    if how == "wrong-password":
        conn = sasl_ssl_config(daemon, tmp_path, "not-the-password")
    elif how == "no-credentials":  # the case: ApiVersions is answered, then the broker hangs up
        conn = ["--bootstrap-server", daemon.bootstrap("SASL_PLAINTEXT")]
    elif how == "plaintext-to-tls":
        conn = ["--bootstrap-server", daemon.bootstrap("SASL_SSL")]
    elif how == "untrusted-ca":
        conn = ["--bootstrap-server", daemon.bootstrap("SSL"), "--security-protocol", "SSL"]
    elif how == "tls-to-plaintext":
        conn = ["--bootstrap-server", daemon.bootstrap("SASL_PLAINTEXT"), "--security-protocol", "SSL"]
    else:
        conn = [*sasl_plaintext_flags(daemon), "--sasl-password", "x"]
        conn[1] = daemon.bootstrap("PLAINTEXT")
    r = cli(*command, *conn, "--timeout", "5")
    assert r.code == 1
    assert r.out == ""
    assert r.err.startswith("groupd: ") and r.err.count("\n") == 1 and "Traceback" not in r.err
    assert message.format(addr=conn[1]) in r.err


def test_json_names_the_authentication_failure(daemon: SecureDaemon, cli: Callable[..., Any], tmp_path: Path) -> None:
    r = cli("healthcheck", "--json", *sasl_ssl_config(daemon, tmp_path, "nope"))
    assert r.code == 1
    assert json.loads(r.out)["error"] == "SASL_AUTHENTICATION_FAILED"


def test_password_from_stdin_and_flags_override_the_file(
    daemon: SecureDaemon, cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = properties(
        tmp_path,
        security__protocol="SASL_PLAINTEXT",
        sasl__mechanism="PLAIN",
        sasl__username="alice",
        sasl__password="stale-password",
    )
    conn = ["--bootstrap-server", daemon.bootstrap("SASL_PLAINTEXT"), "--command-config", cfg]
    assert cli("healthcheck", *conn).code == 1  # the file's password is wrong
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORDS["alice"] + "\n"))
    r = cli("healthcheck", *conn, "--sasl-password-stdin")
    assert r.code == 0, r.err
    assert "authenticated as alice (PLAIN)" in r.out
    r = cli("healthcheck", *conn, "--sasl-password", PASSWORDS["bob"], "--sasl-username", "bob")
    assert r.code == 0 and "authenticated as bob" in r.out, r.err


@pytest.fixture
def cut_at_sasl_authenticate(daemon: SecureDaemon) -> Iterator[str]:
    """A TCP relay in front of the SASL_PLAINTEXT listener that hangs up when the client sends
    SaslAuthenticate: what a client sees when a broker (or a proxy before it) closes the connection in
    the middle of authentication. Yields the relay's HOST:PORT."""
    listener = socket.create_server(("127.0.0.1", 0))
    upstream_port = daemon.ports["SASL_PLAINTEXT"]

    def exact(sock: socket.socket, n: int) -> bytes:
        data = sock.recv(n, socket.MSG_WAITALL)  # short only when the peer hung up
        if len(data) < n:
            raise ConnectionError
        return data

    def pump_back(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass

    def relay() -> None:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", upstream_port))
        threading.Thread(target=pump_back, args=(server, client), daemon=True).start()
        try:
            while True:
                size = exact(client, 4)
                frame = exact(client, struct.unpack(">i", size)[0])
                if struct.unpack(">h", frame[:2])[0] == 36:  # SaslAuthenticate
                    break
                server.sendall(size + frame)
        except (ConnectionError, OSError):
            pass
        finally:
            client.close()
            server.close()

    t = threading.Thread(target=relay, daemon=True)
    t.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    t.join(10)


def test_a_broker_closing_during_authentication_is_named(
    cli: Callable[..., Any], cut_at_sasl_authenticate: str, daemon: SecureDaemon
) -> None:
    conn = [*sasl_plaintext_flags(daemon), "--sasl-password", PASSWORDS["alice"]]
    conn[1] = cut_at_sasl_authenticate
    r = cli("healthcheck", *conn, "--timeout", "5")
    assert r.code == 1
    assert r.err == (
        f"groupd: the broker {cut_at_sasl_authenticate} closed the connection during SASL authentication: "
        "wrong mechanism/credentials or a TLS listener?\n"
    )


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"security.protocol": "SASL_SSL"}, "SASL_SSL needs a SASL user name and password"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "'GSSAPI' is not supported"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks", "ssl.truststore.type": "JKS"}, "only PEM"),
        ({"security.protocol": "TLS"}, "unknown security protocol 'TLS'"),
        (
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
            "Krb5LoginModule' is not supported",
        ),
    ],
)
def test_bad_command_config_is_a_usage_error(
    cli: Callable[..., Any], tmp_path: Path, entries: dict[str, str], message: str
) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in entries.items()))
    r = cli("healthcheck", "--command-config", str(path))
    assert r.code == 2
    assert message in r.err and r.err.count("\n") == 1


def test_kafka_properties_files_are_read_as_java_reads_them() -> None:
    text = (
        "# comment\n! also a comment\n"
        "security.protocol = SASL_SSL\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="alice" \\\n    password="p=w:d";\n'
        "ssl.ca.location: /etc/ca.pem\n"
        "client.id groupd\\u0021\n"
    )
    props = read_properties(text)
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="p=w:d";',
        "ssl.ca.location": "/etc/ca.pem",
        "client.id": "groupd!",
    }
    kwargs, warnings = Security.from_properties(
        {**props, "ssl.keystore.type": "PEM", "sasl.kerberos.service.name": "k"}
    )
    assert kwargs == {
        "protocol": "SASL_SSL",
        "sasl_username": "alice",
        "sasl_password": "p=w:d",
        "ssl_cafile": "/etc/ca.pem",
    }
    assert warnings == ["ignoring sasl.kerberos.service.name: not supported by this client"]
    assert parse_jaas_config(f'{SCRAM} required username=bob password="a b";') == ("bob", "a b")


def test_a_pem_truststore_is_accepted_by_content(tmp_path: Path, daemon: SecureDaemon) -> None:
    kwargs, _ = Security.from_properties({"ssl.truststore.location": str(daemon.pki.ca)})
    assert kwargs == {"ssl_cafile": str(daemon.pki.ca)}
    jks = tmp_path / "store.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed binary")
    with pytest.raises(ValueError, match="only PEM stores are supported"):
        Security.from_properties({"ssl.truststore.location": str(jks)})
