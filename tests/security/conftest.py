"""Shared fixtures for the security tests: a throwaway PKI, users, ACLs and one daemon with every listener.

The daemon is module-scoped per test module (started once, ~0.3 s) so that the whole folder stays
well under two minutes.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from groupd.security.scram import make_credential, toml_entry

from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient  # noqa: F401  (the security tests import it from here)

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path  # CN=alice, signed by the CA
    client_key: Path

    def server_args(self, client_auth: str) -> list[str]:
        """``groupd serve`` flags for a TLS listener with this PKI's server certificate."""
        return [
            "--ssl-certfile",
            str(self.server_cert),
            "--ssl-keyfile",
            str(self.server_key),
            "--ssl-cafile",
            str(self.ca),
            "--ssl-client-auth",
            client_auth,
        ]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def make_pki(d: Path) -> Pki:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("groupd test CA"))
        .issuer_name(_name("groupd test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, server: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            b = b.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        return b.sign(ca_key, hashes.SHA256()), key

    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca.public_bytes(pem))
    server, server_key = leaf("localhost", True)
    (d / "server.pem").write_bytes(server.public_bytes(pem))
    _write_key(server_key, d / "server.key")
    client, client_key = leaf("alice", False)
    (d / "client.pem").write_bytes(client.public_bytes(pem))
    _write_key(client_key, d / "client.key")
    return Pki(d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key")


def security_toml() -> str:
    entries = [
        toml_entry(user, {m: make_credential(m, pw) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")})
        for user, pw in PASSWORDS.items()
    ]
    acl = """
[acl."User:alice"]
groups = ["app-"]
topics = ["*"]

[acl."User:bob"]
groups = ["bob-"]
topics = ["orders"]
transactional_ids = ["bob-"]

[acl."User:ANONYMOUS"]
groups = ["*"]
topics = ["*"]
transactional_ids = ["*"]
"""
    return "\n".join(entries) + acl


@dataclass
class SecureDaemon:
    proc: GroupdProcess
    pki: Pki
    ports: dict[str, int]

    def bootstrap(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"


def listener_ports(proc: GroupdProcess) -> dict[str, int]:
    ev = proc.events("groupd_listening")[-1]
    out = {}
    for li in ev["listeners"]:  # type: ignore[union-attr]
        proto, _, addr = str(li).partition("://")
        out[proto] = int(addr.rsplit(":", 1)[1])
    return out


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure_daemon(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureDaemon]:
    d = tmp_path_factory.mktemp("groupd-secure")
    cfg = d / "groupd.toml"
    cfg.write_text(security_toml())
    proc = GroupdProcess(
        d / "data",
        "--config",
        str(cfg),
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        *pki.server_args("requested"),
        "--group-min-session-timeout-ms",
        "1000",
    )
    proc.start()
    try:
        yield SecureDaemon(proc, pki, listener_ports(proc))
    finally:
        proc.stop()


def log_events(proc: GroupdProcess, name: str) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(e)) for e in proc.events(name)]
