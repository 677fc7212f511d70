"""Unit tests for issue 29's security pieces: the unsecured OAUTHBEARER validator, ``super.users``
and ``allow.everyone.if.no.acl.found`` in the decision, SCRAM credentials altered at run time, and
SASL input that must not cost more than its size."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from groupd.security.acl_model import AclBinding, AclOperation, PatternType, Permission, ResourceType, decide
from groupd.security.auth import PlainMechanism, ScramServerMechanism
from groupd.security.authorizer import Authorizer, parse_super_users
from groupd.security.oauthbearer import IllegalToken, OAuthBearerServer, UnsecuredValidator, parse_initial_response
from groupd.security.scram import (
    CredentialStore,
    SaslError,
    credential_from_salted_password,
    make_credential,
)
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

NOW = 1_700_000_000.0


def jws(claims: dict[str, object], alg: str = "none") -> str:
    b64 = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{b64({'alg': alg})}.{b64(claims)}."


def validator(**kw: object) -> UnsecuredValidator:
    return UnsecuredValidator(clock=lambda: NOW, **kw)  # type: ignore[arg-type]


# --- OAUTHBEARER -----------------------------------------------------------------------------------
def test_a_valid_unsecured_jws_names_its_principal_and_scope() -> None:
    t = validator().validate(jws({"sub": "alice", "exp": NOW + 60, "iat": NOW, "scope": ["a", " b "]}))
    assert (t.principal, t.lifetime_ms, t.start_ms, t.scope) == (
        "alice",
        int((NOW + 60) * 1000),
        int(NOW * 1000),
        {"a", "b"},
    )


def test_the_principal_claim_name_is_configurable() -> None:
    v = validator(principal_claim="client_id")
    assert v.validate(jws({"client_id": "svc", "sub": "x", "exp": NOW + 60})).principal == "svc"
    with pytest.raises(IllegalToken, match="No principal name in JWT claim: client_id"):
        v.validate(jws({"sub": "x", "exp": NOW + 60}))


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"sub": "a", "exp": NOW}, "on or after the Expiration Time"),  # exp == now is expired
        ({"sub": "a", "exp": NOW + 60, "iat": NOW + 1}, "Issued At"),
        ({"sub": "a", "exp": NOW + 60, "iat": NOW}, None),  # iat == now: fine
        ({"sub": "a", "exp": "soon"}, "'exp' claim was not of type Number"),
        ({"sub": "a", "exp": True}, "'exp' claim was not of type Number"),  # JSON true is not a number
        ({"sub": 7, "exp": NOW + 60}, "'sub' claim was not of type String"),
        ({"sub": "  ", "exp": NOW + 60}, "No principal name"),
    ],
)
def test_claim_checks(claims: dict[str, object], why: str | None) -> None:
    if why is None:
        validator().validate(jws(claims))
        return
    with pytest.raises(IllegalToken, match=why):
        validator().validate(jws(claims))


def test_clock_skew_allows_a_token_just_expired() -> None:
    token = jws({"sub": "a", "exp": NOW - 1})
    with pytest.raises(IllegalToken):
        validator().validate(token)
    assert validator(clock_skew_ms=2000).validate(token).principal == "a"


def test_missing_required_scope_answers_insufficient_scope_with_it() -> None:
    s = OAuthBearerServer(validator(required_scope=("read", "write")))
    msg = f"n,,\x01auth=Bearer {jws({'sub': 'a', 'exp': NOW + 60, 'scope': 'read'})}\x01\x01".encode()
    reply, done = s.step(msg)
    assert not done and reply == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    with pytest.raises(SaslError) as e:
        s.step(b"\x01")
    assert e.value.args[0] == '{"status":"insufficient_scope", "scope":"[read, write]"}'


def test_initial_response_grammar() -> None:
    token, authzid, ext = parse_initial_response(b"n,a=alice,\x01auth=bearer abc.def.\x01traceId=42\x01\x01")
    assert (token, authzid, ext) == ("abc.def.", "alice", {"traceId": "42"})
    for bad in (b"n,,\x01auth=Bearer a b\x01\x01", b"n,,\x01x=1\x01\x01", b"y,,\x01auth=Bearer t\x01\x01"):
        with pytest.raises(SaslError):
            parse_initial_response(bad)
    with pytest.raises(SaslError, match="Authentication failed during authentication"):
        parse_initial_response(b"n,,\x01auth=Basic dXNlcg==\x01\x01")


# --- the decision ----------------------------------------------------------------------------------
def _allow(principal: str, name: str, op: AclOperation = AclOperation.ALL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, PatternType.LITERAL, principal, "*", op, Permission.ALLOW)


def test_if_no_acl_only_where_no_acl_names_the_resource() -> None:
    bindings = [_allow("User:bob", "guarded", AclOperation.READ)]
    args = ("User:alice", "h", AclOperation.WRITE, ResourceType.TOPIC)
    assert decide(bindings, *args, "free", if_no_acl=True)
    assert not decide(bindings, *args, "free")
    # an ACL names "guarded" (for someone else, another operation): the default does not apply
    assert not decide(bindings, *args, "guarded", if_no_acl=True)
    prefixed = [AclBinding(ResourceType.TOPIC, "fr", PatternType.PREFIXED, "User:bob", "*", 3, Permission.ALLOW)]
    assert not decide(prefixed, *args, "free", if_no_acl=True)


def test_super_users_skip_acls_even_a_deny(tmp_path: Path) -> None:
    deny = {"resource_type": 2, "name": "t", "pattern_type": 3, "principal": "User:root", "host": "*"}
    (tmp_path / "acls.json").write_text(json.dumps({"version": 1, "acls": [{**deny, "operation": 2, "permission": 2}]}))
    a = Authorizer({}, tmp_path, super_users="User:root; User:ops ")
    assert a.enabled
    assert a.authorize("User:root", AclOperation.WRITE, ResourceType.TOPIC, "t")
    assert a.authorize("User:ops", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert not a.authorize("User:alice", AclOperation.READ, ResourceType.TOPIC, "t")


def test_the_settings_turn_the_authorizer_on() -> None:
    assert not Authorizer({}).enabled
    assert Authorizer({}, super_users="User:a").enabled
    assert Authorizer({}, allow_everyone_if_no_acl_found=True).enabled
    assert Authorizer({}, allow_everyone_if_no_acl_found=True).authorize("User:x", AclOperation.READ, 2, "t")


def test_super_users_parse_as_kafka() -> None:
    assert parse_super_users(" User:a ;;User:b;") == {"User:a", "User:b"}
    for bad in ("alice", "User:", ":x"):
        with pytest.raises(ValueError):
            parse_super_users(bad)


# --- SCRAM credentials at run time -----------------------------------------------------------------
def test_alter_persists_overlays_and_tombstones(tmp_path: Path) -> None:
    toml = json.loads(json.dumps({"bob": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "pw").to_json()}}))
    s = CredentialStore(toml, tmp_path)
    new = credential_from_salted_password("SCRAM-SHA-512", b"s" * 16, 4096, b"p" * 64)
    s.alter([("bob", "SCRAM-SHA-256")], [("carol", "SCRAM-SHA-512", new)])
    assert s.users() == ["carol"] and s.scram("carol", "SCRAM-SHA-512") == new
    again = CredentialStore(toml, tmp_path)  # a restart: the TOML file's bob stays deleted
    assert again.users() == ["carol"] and again.scram("carol", "SCRAM-SHA-512") == new
    again.alter([("carol", "SCRAM-SHA-512")], [])
    saved = json.loads((tmp_path / CredentialStore.FILE).read_text())
    assert saved["credentials"] == [{"user": "bob", "mechanism": "SCRAM-SHA-256", "credential": None}]


def test_a_credential_from_a_salted_password_checks_plain_and_scram_logins() -> None:
    made = make_credential("SCRAM-SHA-256", "pencil", 4096, b"0123456789abcdef")
    # what a client sends: Hi(password, salt, i) (RFC 5802)
    import hashlib

    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", b"0123456789abcdef", 4096)
    assert credential_from_salted_password("SCRAM-SHA-256", b"0123456789abcdef", 4096, salted) == made


def test_unreadable_credentials_file_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / CredentialStore.FILE).write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the SCRAM credentials"):
        CredentialStore({}, tmp_path)


# --- input that must cost no more than its size ---------------------------------------------------
def _store() -> CredentialStore:
    return CredentialStore({"alice": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "pw").to_json()}})


def test_a_huge_unknown_scram_user_is_refused_without_scramp(monkeypatch: pytest.MonkeyPatch) -> None:
    """scramp SASLpreps the name character by character in Python (500 KB: ~1 s of CPU, on the
    event loop); an ASCII name is its own SASLprep, so an unknown one is refused by a lookup."""
    m = ScramServerMechanism(_store(), "SCRAM-SHA-256")

    def not_scramp(_text: str) -> None:
        raise AssertionError("scramp parsed the message")

    monkeypatch.setattr(m._server, "set_client_first", not_scramp)
    with pytest.raises(SaslError) as e:
        asyncio.run(m.step(b"n,,n=" + b"u" * 500_000 + b",r=abc"))
    assert e.value.args == ("Authentication failed: Invalid user credentials", "Unknown user")
    # a known user still goes through the exchange
    reply, done = asyncio.run(ScramServerMechanism(_store(), "SCRAM-SHA-256").step(b"n,,n=alice,r=abc"))
    assert reply.startswith(b"r=abc") and not done


def test_a_huge_ascii_plain_password_is_hashed_without_scramp(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store()
    store.check_password("nobody", "warm")  # the decoy credential is made once, with scramp

    import scramp

    def not_scramp(*_a: object, **_k: object) -> None:
        raise AssertionError("scramp SASLprepped the password")

    monkeypatch.setattr(scramp, "ScramMechanism", not_scramp)
    with pytest.raises(SaslError):
        asyncio.run(PlainMechanism(store).step(b"\0alice\0" + b"p" * 500_000))
    assert asyncio.run(PlainMechanism(store).step(b"\0alice\0pw")) == (b"", True)


# --- the settings ----------------------------------------------------------------------------------
def test_settings_from_environment_and_their_checks(tmp_path: Path) -> None:
    from groupd import config

    env = {
        "GROUPD_DATA_DIR": str(tmp_path),
        "GROUPD_SUPER_USERS": "User:admin;User:ops",
        "GROUPD_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true",
        "GROUPD_SASL_SERVER_MAX_RECEIVE_SIZE": "65536",
        "GROUPD_OAUTHBEARER_PRINCIPAL_CLAIM_NAME": "client_id",
    }
    cfg = config.load(None, env)
    assert (cfg.super_users, cfg.allow_everyone_if_no_acl_found, cfg.sasl_server_max_receive_size) == (
        "User:admin;User:ops",
        True,
        65536,
    )
    assert UnsecuredValidator.from_settings(cfg).principal_claim == "client_id"
    defaults = config.load(None, {"GROUPD_DATA_DIR": str(tmp_path)})
    assert (defaults.sasl_server_max_receive_size, defaults.allow_everyone_if_no_acl_found) == (524_288, False)
    for name, bad in (
        ("GROUPD_SUPER_USERS", "admin"),
        ("GROUPD_SASL_SERVER_MAX_RECEIVE_SIZE", "0"),
        ("GROUPD_OAUTHBEARER_PRINCIPAL_CLAIM_NAME", " "),
    ):
        with pytest.raises(config.ConfigError, match=name.removeprefix("GROUPD_").lower().replace("_", "-")):
            config.load(None, {"GROUPD_DATA_DIR": str(tmp_path), name: bad})


# --- run-time credentials as a state machine: the store is its model, across restarts --------------
_USERS = st.sampled_from(["alice", "bob", "carol"])
_MECHS = st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"])
_TOML_CRED = make_credential("SCRAM-SHA-256", "toml-pw", 4096, b"toml-salt-0123456")


class CredentialsMachine(RuleBasedStateMachine):
    """AlterUserScramCredentials' deletions and upsertions, and restarts (a new store over the same
    directory and TOML table): the credentials in force are always the model's."""

    @initialize()
    def start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="scram-sm-"))
        self.toml = {"alice": {"SCRAM-SHA-256": _TOML_CRED.to_json()}}
        self.store = CredentialStore(self.toml, self.dir)
        self.model: dict[tuple[str, str], object] = {("alice", "SCRAM-SHA-256"): _TOML_CRED}
        self.n = 0

    @rule(user=_USERS, mech=_MECHS)
    def upsert(self, user: str, mech: str) -> None:
        self.n += 1
        cred = credential_from_salted_password(mech, b"salt-%d-0123456789" % self.n, 4096, b"%d" % self.n)
        self.store.alter([], [(user, mech, cred)])
        self.model[(user, mech)] = cred

    @rule(user=_USERS, mech=_MECHS)
    def delete(self, user: str, mech: str) -> None:
        if (user, mech) not in self.model:
            return  # ScramApis answers RESOURCE_NOT_FOUND and never calls the store
        self.store.alter([(user, mech)], [])
        del self.model[(user, mech)]

    @rule()
    def restart(self) -> None:
        self.store = CredentialStore(self.toml, self.dir)

    def teardown(self) -> None:
        if hasattr(self, "dir"):
            shutil.rmtree(self.dir, ignore_errors=True)

    @invariant()
    def in_force(self) -> None:
        if not hasattr(self, "store"):
            return
        for user in ("alice", "bob", "carol"):
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                assert self.store.scram(user, mech) == self.model.get((user, mech))
        assert self.store.users() == sorted({u for u, _ in self.model})


TestCredentialsMachine = CredentialsMachine.TestCase
TestCredentialsMachine.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)
