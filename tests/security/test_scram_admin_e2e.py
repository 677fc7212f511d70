"""The SCRAM user admin APIs (issue 29 item 3): DescribeUserScramCredentials and
AlterUserScramCredentials, what ``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[...]'`` and an
admin client's ``alter_user_scram_credentials`` use, with confluent-kafka's AdminClient; a
credential made through them is in force for the next authentication at once, and across a restart.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.support.daemon import GroupdProcess

from .conftest import PASSWORDS, RawClient, listener_ports, security_toml

pytestmark = pytest.mark.e2e

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def _start(data: Path, cfg: Path, *args: str) -> tuple[GroupdProcess, dict[str, int]]:
    proc = GroupdProcess(
        data, "--config", str(cfg), "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", *args
    )
    proc.start()
    return proc, listener_ports(proc)


def _sasl(port: int, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, object]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _can_produce(port: int, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """Produce one record as ``user``: True once acknowledged, False at the first authentication error."""
    failed: list[int] = []

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            failed.append(1)

    p = Producer({**_sasl(port, user, password, mechanism), "error_cb": on_error})
    delivered: list[object] = []
    p.produce("scram-topic", b"x", on_delivery=lambda err, _m: delivered.append(err))
    deadline = time.monotonic() + 20
    while not delivered and not failed and time.monotonic() < deadline:
        p.poll(0.05)
    ok = delivered[:1] == [None] and not failed
    # The record of a refused producer is dropped by flush's timeout (a purge here left a TypeError
    # pending in confluent-kafka 2.16's destructor).
    p.flush(0)
    return ok


@pytest.fixture
def daemon(tmp_path: Path):  # type: ignore[no-untyped-def]
    cfg = tmp_path / "groupd.toml"
    # alice is the admin (ALTER and DESCRIBE on the cluster), bob may use topics only
    cfg.write_text(
        security_toml().split("[acl.")[0]
        + '[acl."User:alice"]\ntopics = ["*"]\ncluster = ["ALL"]\n'
        + '[acl."User:*"]\ntopics = ["scram-"]\n'
    )
    proc, ports = _start(tmp_path / "data", cfg)
    yield proc, ports, cfg, tmp_path
    proc.stop()


def _describe(admin: AdminClient, users: list[str] | None = None) -> dict[str, object]:
    futures = admin.describe_user_scram_credentials(users)
    if users is None:
        return futures.result(30)  # type: ignore[no-any-return,union-attr]
    out: dict[str, object] = {}
    for user, f in futures.items():  # type: ignore[union-attr]
        try:
            out[user] = f.result(30)
        except KafkaException as e:
            out[user] = e.args[0].code()
    return out


def test_alter_then_authenticate_describe_delete_and_restart(daemon) -> None:  # type: ignore[no-untyped-def]
    proc, ports, cfg, tmp_path = daemon
    sasl = ports["SASL_PLAINTEXT"]
    admin = AdminClient(_sasl(sasl, "alice", PASSWORDS["alice"]))
    # carol does not exist yet: she cannot log in
    assert _can_produce(sasl, "carol", "carol-pw") is False
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA256, 8192), b"carol-pw")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    # in force at once, for SCRAM and for PLAIN (checked against the same salted credential)
    assert _can_produce(sasl, "carol", "carol-pw") is True
    assert _can_produce(sasl, "carol", "carol-pw", "PLAIN") is True
    assert _can_produce(sasl, "carol", "wrong") is False
    described = _describe(admin, ["carol", "nobody"])
    (info,) = described["carol"].scram_credential_infos  # type: ignore[attr-defined]
    assert (info.mechanism, info.iterations) == (SHA256, 8192)
    assert described["nobody"] == KafkaError.RESOURCE_NOT_FOUND
    # every user: the TOML file's and the new one
    everyone = _describe(admin)
    assert set(everyone) == {"alice", "bob", "carol"}
    assert {i.mechanism for i in everyone["alice"].scram_credential_infos} == {SHA256, SHA512}  # type: ignore[attr-defined]

    # a password change, and the removal of a credential of the TOML file, survive a restart
    change = UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA256, 4096), b"carol-new")
    drop = UserScramCredentialDeletion("bob", SHA512)
    for f in admin.alter_user_scram_credentials([change, drop]).values():
        f.result(30)
    stored = json.loads((tmp_path / "data" / "scram-credentials.json").read_text())
    assert "carol-new" not in json.dumps(stored)  # salted keys only
    proc.stop()
    proc, ports = _start(tmp_path / "data", cfg)
    try:
        sasl = ports["SASL_PLAINTEXT"]
        assert _can_produce(sasl, "carol", "carol-new") is True
        assert _can_produce(sasl, "carol", "carol-pw") is False
        assert _can_produce(sasl, "bob", PASSWORDS["bob"], "SCRAM-SHA-512") is False
        assert _can_produce(sasl, "bob", PASSWORDS["bob"], "SCRAM-SHA-256") is True
        admin = AdminClient(_sasl(sasl, "alice", PASSWORDS["alice"]))
        (info,) = _describe(admin, ["bob"])["bob"].scram_credential_infos  # type: ignore[attr-defined]
        assert info.mechanism == SHA256
        # deleting the last credential removes the user
        for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", SHA256)]).values():
            f.result(30)
        assert _describe(admin, ["carol"])["carol"] == KafkaError.RESOURCE_NOT_FOUND
        assert _can_produce(sasl, "carol", "carol-new") is False
    finally:
        proc.stop()


def _alter_raw(c: RawClient, deletions: list[dict], upsertions: list[dict]) -> dict[str, tuple[int, str]]:  # type: ignore[type-arg]
    r = c.request("AlterUserScramCredentials", 0, {"deletions": deletions, "upsertions": upsertions})
    return {x["user"]: (x["error_code"], x["error_message"]) for x in r["results"]}


def _up(name: str, mechanism: int = 1, iterations: int = 4096) -> dict:  # type: ignore[type-arg]
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": b"s" * 16,
        "salted_password": b"p" * 32,
    }


def test_alter_refusals_are_kafkas(daemon) -> None:  # type: ignore[no-untyped-def]
    _proc, ports, _cfg, _tmp = daemon
    c = RawClient(ports["SASL_PLAINTEXT"])
    try:
        c.login_plain("alice", PASSWORDS["alice"])
        got = _alter_raw(
            c,
            [{"name": "ghost", "mechanism": 1}, {"name": "bob", "mechanism": 2}, {"name": "x", "mechanism": 9}],
            [
                _up("bob"),
                _up("few", iterations=4095),
                _up("many", iterations=16385),
                _up(""),
                _up("ok", mechanism=2, iterations=16384),
            ],
        )
        assert got == {
            "ghost": (91, "Attempt to delete a user credential that does not exist"),  # RESOURCE_NOT_FOUND
            "bob": (92, "A user credential cannot be altered twice in the same request"),  # DUPLICATE_RESOURCE
            "x": (33, "Unknown SCRAM mechanism"),  # UNSUPPORTED_SASL_MECHANISM
            "few": (93, "Too few iterations"),  # UNACCEPTABLE_CREDENTIAL
            "many": (93, "Too many iterations"),
            "": (93, "Username must not be empty"),
            "ok": (0, None),
        }
        r = c.request("DescribeUserScramCredentials", 0, {"users": [{"name": "ok"}, {"name": "ok"}]})
        assert [(x["user"], x["error_code"]) for x in r["results"]] == [("ok", 92)]
    finally:
        c.close()
    # bob has no ALTER or DESCRIBE on the cluster
    b = RawClient(ports["SASL_PLAINTEXT"])
    try:
        b.login_plain("bob", PASSWORDS["bob"])
        assert _alter_raw(b, [], [_up("bob")]) == {"bob": (31, "Request needs ALTER permission.")}
        r = b.request("DescribeUserScramCredentials", 0, {"users": None})
        assert (r["error_code"], r["results"]) == (31, [])
    finally:
        b.close()
    assert not (_tmp / "data" / "scram-credentials.json").read_text().count('"bob"')
