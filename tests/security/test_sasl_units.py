"""Unit tests: the SCRAM exchange (RFC 7677 vector), PLAIN parsing, credentials, listeners, config."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from groupd.security.auth import PlainMechanism, ScramServerMechanism
from groupd.security.listeners import certificate_cn, endpoint, parse_listeners, server_ssl_context
from groupd.security.scram import CredentialStore, SaslError, ScramCredential, make_credential, parse_plain, toml_entry

from groupd import config
from groupd.cli import build_parser

# RFC 7677 section 3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, i=4096.
RFC7677_CLIENT_FIRST = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_store() -> CredentialStore:
    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    return CredentialStore({"user": {"SCRAM-SHA-256": _as_toml(cred)}})


def _as_toml(cred: ScramCredential) -> dict[str, Any]:
    return tomllib.loads("x = " + cred.to_toml())["x"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- SCRAM ---------------------------------------------------------------------------------------
def test_scram_sha256_rfc7677_vector() -> None:
    m = ScramServerMechanism(rfc7677_store(), "SCRAM-SHA-256", s_nonce=RFC7677_SERVER_NONCE)
    reply, done = run(m.step(RFC7677_CLIENT_FIRST.encode()))
    assert (reply.decode(), done) == (RFC7677_SERVER_FIRST, False)
    reply, done = run(m.step(RFC7677_CLIENT_FINAL.encode()))
    assert (reply.decode(), done) == (RFC7677_SERVER_FINAL, True)
    assert m.user == "user"


def test_scram_wrong_proof_fails_without_echoing_it() -> None:
    m = ScramServerMechanism(rfc7677_store(), "SCRAM-SHA-256", s_nonce=RFC7677_SERVER_NONCE)
    run(m.step(RFC7677_CLIENT_FIRST.encode()))
    bad = RFC7677_CLIENT_FINAL[:-10] + "AAAAAAAAA="
    with pytest.raises(SaslError) as e:
        run(m.step(bad.encode()))
    assert e.value.args[0] == "Authentication failed: Invalid user credentials"
    assert "AAAAAAAA" not in " ".join(map(str, e.value.args))


@pytest.mark.parametrize(
    "client_first",
    [
        b"n,,n=nobody,r=abc",  # unknown user
        b"\xff\xfe",  # not UTF-8
        b"garbage",
        b"",
        b"n,,n=user,r=abc,tokenauth=true",  # delegation token (Kafka extension)
        b"p=tls-unique,,n=user,r=abc",  # channel binding asked for
    ],
)
def test_scram_bad_client_first_is_an_authentication_failure(client_first: bytes) -> None:
    m = ScramServerMechanism(rfc7677_store(), "SCRAM-SHA-256")
    with pytest.raises(SaslError):
        run(m.step(client_first))


def test_scram_sha512_round_trip_with_scramp_client() -> None:
    from scramp import ScramClient

    store = CredentialStore({"bob": {"SCRAM-SHA-512": _as_toml(make_credential("SCRAM-SHA-512", "pw"))}})
    client = ScramClient(["SCRAM-SHA-512"], "bob", "pw")
    m = ScramServerMechanism(store, "SCRAM-SHA-512")
    first, _ = run(m.step(client.get_client_first().encode()))
    client.set_server_first(first.decode())
    final, done = run(m.step(client.get_client_final().encode()))
    client.set_server_final(final.decode())  # raises if the server signature is wrong
    assert done
    # A further token after completion is refused.
    with pytest.raises(SaslError):
        run(m.step(b"c=biws"))


# --- PLAIN ---------------------------------------------------------------------------------------
def test_plain_parse() -> None:
    assert parse_plain(b"\x00alice\x00pw") == ("", "alice", "pw")
    assert parse_plain(b"alice\x00alice\x00pw") == ("alice", "alice", "pw")
    assert parse_plain("\x00jos\u00e9\x00p\u00e4ss".encode()) == ("", "jos\u00e9", "p\u00e4ss")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"bob\x00alice\x00pw", "authorization id that is different"),
        (b"\x00\x00pw", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"\x00alice", "expected 3 tokens"),
        (b"\x00alice\x00pw\x00x", "expected 3 tokens"),
        (b"", "expected 3 tokens"),
        (b"\x00al\xffice\x00pw", "not valid UTF-8"),
    ],
)
def test_plain_parse_refuses(token: bytes, message: str) -> None:
    with pytest.raises(SaslError, match=message):
        parse_plain(token)


def test_plain_checks_password_against_scram_credential() -> None:
    store = CredentialStore(
        {
            "alice": {"SCRAM-SHA-256": _as_toml(make_credential("SCRAM-SHA-256", "s3cret"))},
            "carol": {"SCRAM-SHA-512": _as_toml(make_credential("SCRAM-SHA-512", "other"))},
        }
    )
    assert run(PlainMechanism(store).step(b"\x00alice\x00s3cret")) == (b"", True)
    assert run(PlainMechanism(store).step(b"\x00carol\x00other")) == (b"", True)
    for token in (b"\x00alice\x00wrong", b"\x00nobody\x00s3cret", b"\x00carol\x00s3cret"):
        with pytest.raises(SaslError, match="Invalid user credentials"):
            run(PlainMechanism(store).step(token))


# --- credentials, the helper, the config file ----------------------------------------------------
def test_credential_store_rejects_plaintext_and_weak_entries() -> None:
    with pytest.raises(ValueError, match="only salted SCRAM"):
        CredentialStore({"alice": {"plain": "secret"}})
    weak = _as_toml(make_credential("SCRAM-SHA-256", "x"))
    weak["iterations"] = 1000
    with pytest.raises(ValueError, match="at least 4096"):
        CredentialStore({"alice": {"SCRAM-SHA-256": weak}})
    with pytest.raises(ValueError, match="base64"):
        CredentialStore({"alice": {"SCRAM-SHA-256": {"salt": "!!", "iterations": 4096}}})


def test_scram_credential_cli_prints_a_loadable_entry(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "groupd", "scram-credential", 'we"ird user', "--password-stdin"],
        input="hunter2\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert "hunter2" not in out
    path = tmp_path / "g.toml"
    path.write_text(out)
    cfg = config.load(build_parser().parse_args(["serve", "--config", str(path)]), env={})
    store = CredentialStore(cfg.users)
    assert store.users() == ['we"ird user']
    assert store.check_password('we"ird user', "hunter2")
    assert not store.check_password('we"ird user', "hunter3")
    assert store.scram('we"ird user', "SCRAM-SHA-512") is not None


def test_toml_tables_beside_a_groupd_section(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        '[groupd]\nlisteners = "SASL_PLAINTEXT://127.0.0.1:0"\n\n'
        + toml_entry("alice", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "pw")})
        + '\n[acl."User:alice"]\ngroups = ["app-"]\n'
    )
    cfg = config.load(build_parser().parse_args(["serve", "--config", str(path)]), env={"GROUPD_USERS": "x"})
    assert cfg.listeners == "SASL_PLAINTEXT://127.0.0.1:0"
    assert list(cfg.users) == ["alice"]
    assert cfg.acl == {"User:alice": {"groups": ["app-"]}}
    # Tables are file-only: no flag for them.
    assert "--users" not in build_parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]


def test_acl_transactional_ids_are_a_resource_of_their_own() -> None:
    from groupd.security.acl import Authorizer

    authz = Authorizer({"User:a": {"groups": ["tx-"], "transactional_ids": ["tx-"]}, "User:b": {"groups": ["*"]}})
    assert authz.transactional_id("User:a", "tx-1") and not authz.transactional_id("User:a", "other")
    assert not authz.transactional_id("User:b", "tx-1")  # groups do not extend to transactional ids
    with pytest.raises(ValueError, match="transactional_ids"):
        Authorizer({"User:a": {"transactional_id": ["tx-"]}})


# --- listeners -----------------------------------------------------------------------------------
def test_listeners_parse_and_default() -> None:
    default = parse_listeners(config.Config(host="127.0.0.1", port=9092))
    assert [str(li) for li in default] == ["PLAINTEXT://127.0.0.1:9092"]
    got = parse_listeners(
        config.Config(listeners="PLAINTEXT://127.0.0.1:9092, sasl_ssl://localhost:0", advertised_host="kafka.test")
    )
    assert [(li.protocol, li.host, li.port, li.advertised_host) for li in got] == [
        ("PLAINTEXT", "127.0.0.1", 9092, "kafka.test"),
        ("SASL_SSL", "localhost", 0, "kafka.test"),
    ]
    assert got[1].tls and got[1].sasl and not got[0].tls


@pytest.mark.parametrize(
    "value",
    ["PLAINTEXT:/127.0.0.1:1", "GSSAPI://127.0.0.1:1", "PLAINTEXT://127.0.0.1", "SSL://h:1,SSL://h:2", ","],
)
def test_listeners_refuse_bad_values(value: str) -> None:
    with pytest.raises(ValueError):
        parse_listeners(config.Config(listeners=value))


def test_named_listeners_share_a_protocol() -> None:
    """Kafka's listener.security.protocol.map and advertised.listeners: an internal and an external
    PLAINTEXT listener, each advertising its own endpoint (the Docker compose set-up)."""
    got = parse_listeners(
        config.Config(
            listeners="EXTERNAL://0.0.0.0:9092,internal://0.0.0.0:19092,SSL://:9093",
            listener_security_protocol_map="INTERNAL:PLAINTEXT, EXTERNAL:PLAINTEXT",
            advertised_listeners="EXTERNAL://localhost:9092,INTERNAL://groupd:29092",
            advertised_host="fallback.test",
        )
    )
    assert [(li.name, li.protocol, li.host, li.port, li.advertised_host, li.advertised_port) for li in got] == [
        ("EXTERNAL", "PLAINTEXT", "0.0.0.0", 9092, "localhost", 9092),
        ("INTERNAL", "PLAINTEXT", "0.0.0.0", 19092, "groupd", 29092),
        ("SSL", "SSL", "127.0.0.1", 9093, "fallback.test", 0),
    ]
    assert [str(li) for li in got] == ["EXTERNAL://0.0.0.0:9092", "INTERNAL://0.0.0.0:19092", "SSL://127.0.0.1:9093"]
    assert [endpoint(li, got[0]) for li in got] == [("localhost", 9092), ("groupd", 29092), ("fallback.test", 9093)]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "INTERNAL://h:1"}, "not named in --listener-security-protocol-map"),
        ({"listeners": "A://h:1,A://h:2", "listener_security_protocol_map": "A:SSL"}, "given twice"),
        ({"listeners": "A://h:1", "listener_security_protocol_map": "A:TLS"}, "expected NAME:PROTOCOL"),
        ({"listeners": "SSL://h:1", "listener_security_protocol_map": "SSL:PLAINTEXT"}, "cannot mean"),
        ({"listeners": "PLAINTEXT://h:1", "advertised_listeners": "OTHER://x:1"}, "do not exist: OTHER"),
        ({"advertised_listeners": "PLAINTEXT://x:1"}, "needs --listeners"),
        ({"listeners": "PLAINTEXT://h:1", "advertised_listeners": "PLAINTEXT://x"}, "expected NAME://host:port"),
    ],
)
def test_named_listeners_refuse_bad_values(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_listeners(config.Config(**settings))


def test_ssl_context_needs_certificates() -> None:
    with pytest.raises(ValueError, match="ssl-certfile"):
        server_ssl_context(config.Config())
    with pytest.raises(ValueError, match="ssl-client-auth"):
        server_ssl_context(config.Config(ssl_certfile="x.pem", ssl_client_auth="sometimes"))


def test_certificate_cn() -> None:
    cert = {"subject": ((("countryName", "DE"),), (("commonName", "alice"),))}
    assert certificate_cn(cert) == "alice"
    assert certificate_cn({}) is None
    assert certificate_cn(None) is None
