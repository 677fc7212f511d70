"""ACL refusals that real clients act on, and the authorizer's two settings (issue 29 item 3).

- A Fetch partition refused by ACLs is answered with empty records (Kafka's
  ``FetchResponse.partitionResponse``: ``MemoryRecords.EMPTY``). With ``records: null`` librdkafka
  could not parse the answer, never saw TOPIC_AUTHORIZATION_FAILED and fetched again at once
  (40,000 refused Fetches in 15 s).
- ``--super-users 'User:a;User:b'`` (Kafka's ``super.users``): allowed everything, ACLs or not.
- ``--allow-everyone-if-no-acl-found`` (Kafka's ``allow.everyone.if.no.acl.found``): a resource no
  ACL names is open to everyone; one an ACL names is not.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.daemon import GroupdProcess

from .conftest import PASSWORDS, listener_ports, security_toml

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binding(principal: str, rtype: int, name: str, op: int, pattern: int = 3, permission: int = 3) -> dict:  # type: ignore[type-arg]
    return {
        "resource_type": rtype,
        "name": name,
        "pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": op,
        "permission": permission,
    }


TOPIC, GROUP, CLUSTER = 2, 3, 4
READ, WRITE, DESCRIBE, ALL = 3, 4, 8, 2


@dataclass
class Daemon:
    proc: GroupdProcess
    ports: dict[str, int]
    metrics_port: int

    def client(self, user: str | None, **extra: object) -> dict[str, object]:
        """confluent-kafka settings at their defaults, as ``user`` over SASL/PLAIN (None: PLAINTEXT)."""
        if user is None:
            return {"bootstrap.servers": f"127.0.0.1:{self.ports['PLAINTEXT']}", **extra}
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            **extra,
        }

    def requests(self, api: str) -> int:
        """``groupd_requests_total`` of ``api``: the requests the daemon answered."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith("groupd_requests_total{") and f'api="{api}"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return int(total)


def start(tmp_path: Path, *args: str, toml: str | None = None, acls: list[dict] | None = None) -> Daemon:  # type: ignore[type-arg]
    cfg = tmp_path / "groupd.toml"
    cfg.write_text(security_toml() if toml is None else toml)
    data = tmp_path / "data"
    data.mkdir()
    if acls is not None:
        (data / "acls.json").write_text(json.dumps({"version": 1, "acls": acls}))
    metrics = free_port()
    proc = GroupdProcess(
        data,
        "--config",
        str(cfg),
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--metrics-port",
        str(metrics),
        *args,
    )
    proc.start()
    return Daemon(proc, listener_ports(proc), metrics)


@pytest.fixture
def fetch_refused(tmp_path: Path) -> Iterator[Daemon]:
    # bob may DESCRIBE "secret" (its metadata and offsets) but not READ it
    d = start(tmp_path, acls=[_binding("User:bob", TOPIC, "secret", DESCRIBE)])
    try:
        yield d
    finally:
        d.proc.stop()


def test_a_refused_fetch_is_seen_by_librdkafka_which_stops_fetching(fetch_refused: Daemon) -> None:
    d = fetch_refused
    admin = AdminClient(d.client(None))
    admin.create_topics([NewTopic("secret", 1, 1)])["secret"].result(30)
    p = Producer(d.client(None))
    p.produce("secret", b"classified")
    assert p.flush(30) == 0

    c = Consumer(d.client("bob", **{"group.id": "bob-reader"}))
    try:
        c.assign([TopicPartition("secret", 0, 0)])
        seen: list[int] = []
        got_records = 0
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                seen.append(m.error().code())
            else:
                got_records += 1
        assert got_records == 0
        assert KafkaError.TOPIC_AUTHORIZATION_FAILED in seen, seen
        # Refused, the consumer backs off (fetch.error.backoff.ms) instead of asking again at once.
        refused = d.requests("Fetch")  # 2 in 6 s here (null records: 40,000 in 15 s)
        assert 0 < refused < 100, refused
    finally:
        c.close()


@pytest.fixture
def super_users(tmp_path: Path) -> Iterator[Daemon]:
    # Only ACLs for ANONYMOUS; alice is named nowhere but in --super-users.
    toml = security_toml().split("[acl.")[0] + '[acl."User:ANONYMOUS"]\ntopics = ["public"]\n'
    d = start(tmp_path, "--super-users", " User:alice ; User:carol", toml=toml)
    try:
        yield d
    finally:
        d.proc.stop()


def test_super_users_may_do_everything_and_others_only_what_acls_allow(super_users: Daemon) -> None:
    d = super_users
    alice = AdminClient(d.client("alice"))
    alice.create_topics([NewTopic("alices", 1, 1)])["alices"].result(30)
    p = Producer(d.client("alice"))
    p.produce("alices", b"mine")
    assert p.flush(30) == 0
    c = Consumer(d.client("alice", **{"group.id": "any-group", "auto.offset.reset": "earliest"}))
    try:
        c.subscribe(["alices"])
        m = None
        deadline = time.monotonic() + 30
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                raise AssertionError(m.error())
        assert m is not None and m.value() == b"mine"
        c.commit(m, asynchronous=False)
    finally:
        c.close()
    # bob is no super user and no ACL names him: refused
    bob = AdminClient(d.client("bob"))
    with pytest.raises(KafkaException) as e:
        bob.create_topics([NewTopic("bobs", 1, 1)])["bobs"].result(30)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # a super user may manage ACLs (ALTER on the cluster)
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    binding = AclBinding(
        ResourceType.TOPIC,
        "bobs",
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    alice.create_acls([binding])[binding].result(30)
    bob.create_topics([NewTopic("bobs", 1, 1)])["bobs"].result(30)


@pytest.fixture
def open_by_default(tmp_path: Path) -> Iterator[Daemon]:
    # One ACL only: "guarded" is bob's alone. Every other resource is named by no ACL.
    toml = security_toml().split("[acl.")[0]
    acls = [_binding("User:bob", TOPIC, "guarded", ALL)]
    d = start(tmp_path, "--allow-everyone-if-no-acl-found", toml=toml, acls=acls)
    try:
        yield d
    finally:
        d.proc.stop()


def test_allow_everyone_if_no_acl_found_opens_only_what_no_acl_names(open_by_default: Daemon) -> None:
    d = open_by_default
    admin = AdminClient(d.client("alice"))
    # No ACL names the cluster: CREATE on it is open, and covers every topic (as in
    # KafkaApis.handleCreateTopicsRequest), "guarded" included.
    for t in ("free", "guarded"):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(30)
    p = Producer(d.client("alice"))
    results: dict[str, object] = {}
    for t in ("free", "guarded"):
        p.produce(t, b"x", on_delivery=lambda err, msg, t=t: results.__setitem__(t, err))
    p.flush(30)
    assert results["free"] is None
    guarded = results["guarded"]
    assert isinstance(guarded, KafkaError) and guarded.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # bob, whom the ACL names, may write it
    pb = Producer(d.client("bob"))
    pb.produce("guarded", b"y")
    assert pb.flush(30) == 0


def test_without_the_setting_a_resource_no_acl_names_is_refused(tmp_path: Path) -> None:
    toml = security_toml().split("[acl.")[0]
    d = start(tmp_path, toml=toml, acls=[_binding("User:bob", TOPIC, "guarded", ALL)])
    try:
        p = Producer(d.client("alice"))
        results: list[object] = []
        p.produce("free", b"x", on_delivery=lambda err, msg: results.append(err))
        p.flush(15)
        assert results and isinstance(results[0], KafkaError)
        assert results[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        d.proc.stop()


def test_super_users_must_be_principals(tmp_path: Path) -> None:
    proc = GroupdProcess(tmp_path / "data", "--super-users", "alice")
    with pytest.raises(Exception):  # noqa: B017  (start fails: the daemon exits 2)
        proc.start(timeout=15)
    assert "--super-users" in proc.log_tail()
