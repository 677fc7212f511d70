"""Fetch sessions with ACLs and in cluster mode, against real daemons.

KafkaApis.handleFetchRequest authorizes every partition of the fetch context (for an incremental
fetch: every partition of the session, named in the request or not), and errors are always
answered: a READ taken away while a session is open refuses its partitions at the next incremental
fetch, and a refused or not-led partition is answered with its error in every incremental answer.
In cluster mode each broker has its own session cache (Kafka's FetchManager per broker).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode
from groupd.security.scram import make_credential, toml_entry

from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient

from .test_fetch_sessions_wire import answered, create_topic, fetch, produce

pytestmark = pytest.mark.e2e

E = ErrorCode
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
ACL_TOML = """
[acl."User:alice"]
groups = ["*"]
topics = ["*"]
cluster = ["ALL"]

[acl."User:bob"]
groups = ["bob-"]
topics = ["bob-"]
"""


def _sasl_port(proc: GroupdProcess) -> int:
    ev = proc.events("groupd_listening")[-1]
    (li,) = ev["listeners"]  # type: ignore[misc]
    return int(str(li).rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    d: Path = tmp_path_factory.mktemp("fetch-sessions-acl")
    cfg = d / "groupd.toml"
    users = [toml_entry(u, {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", pw)}) for u, pw in PASSWORDS.items()]
    cfg.write_text("\n".join(users) + ACL_TOML)
    proc = GroupdProcess(d / "data", "--config", str(cfg), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0").start()
    try:
        yield _sasl_port(proc)
    finally:
        proc.stop()


def _login(port: int, user: str) -> RawClient:
    c = RawClient(port)
    c.login_plain(user, PASSWORDS[user])
    return c


def test_acl_refusals_inside_a_session(secured: int) -> None:
    alice, bob = _login(secured, "alice"), _login(secured, "bob")
    try:
        mine, theirs = f"bob-{uuid.uuid4().hex[:6]}", f"alice-{uuid.uuid4().hex[:6]}"
        create_topic(alice, mine, 1)
        create_topic(alice, theirs, 1)
        produce(alice, mine, 0, b"m")
        full = fetch(bob, 0, 0, {(mine, 0): 0, (theirs, 0): 0})
        sid = full["session_id"]
        assert sid != 0
        codes = {k: p["error_code"] for k, p in answered(full).items()}
        assert codes == {(mine, 0): 0, (theirs, 0): E.TOPIC_AUTHORIZATION_FAILED}
        # the refused partition comes back every time; bob's own only when it changes
        r = fetch(bob, sid, 1, {(mine, 0): 1})
        assert {k: p["error_code"] for k, p in answered(r).items()} == {(theirs, 0): E.TOPIC_AUTHORIZATION_FAILED}
        # READ taken away while the session is open: the next incremental fetch, which does not
        # name the partition, is refused for it
        deny = {
            "resource_type": 2,  # TOPIC
            "resource_name": mine,
            "resource_pattern_type": 3,  # LITERAL
            "principal": "User:bob",
            "host": "*",
            "operation": 3,  # READ
            "permission_type": 2,  # DENY
        }
        assert alice.request("CreateAcls", 1, {"creations": [deny]})["results"][0]["error_code"] == 0
        r = fetch(bob, sid, 2, {})
        assert {k: p["error_code"] for k, p in answered(r).items()} == {
            (mine, 0): E.TOPIC_AUTHORIZATION_FAILED,
            (theirs, 0): E.TOPIC_AUTHORIZATION_FAILED,
        }
        assert r["session_id"] == sid
    finally:
        alice.close()
        bob.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdBroker]:
    broker = GroupdBroker(tmp_path_factory.mktemp("fs-cluster") / "data", brokers=3, num_partitions=3)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _raw(cluster: GroupdBroker, node_id: int) -> RawClient:
    return RawClient(int(cluster.nodes[node_id].rsplit(":", 1)[1]))


def _leaders(c: RawClient, topic: str) -> dict[int, int]:
    md = c.request(
        "Metadata",
        12,
        {
            "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    return {p["partition_index"]: p["leader_id"] for p in md["topics"][0]["partitions"]}


def test_each_broker_has_its_own_sessions_and_checks_leadership_in_them(cluster: GroupdBroker) -> None:
    nodes = sorted(cluster.nodes)
    clients = {n: _raw(cluster, n) for n in nodes}
    try:
        topic = f"fs-{uuid.uuid4().hex[:8]}"
        create_topic(clients[nodes[0]], topic, 3)
        leaders = _leaders(clients[nodes[0]], topic)
        home = leaders[0]
        c = clients[home]
        produce(c, topic, 0, b"x")
        parts = {(topic, p): 0 for p in range(3)}
        full = fetch(c, 0, 0, parts)
        sid = full["session_id"]
        assert sid != 0
        not_led = {(topic, p) for p, leader in leaders.items() if leader != home}
        errors = {k: p["error_code"] for k, p in answered(full).items() if p["error_code"]}
        assert errors == dict.fromkeys(not_led, E.NOT_LEADER_OR_FOLLOWER)
        # every incremental answer carries the partitions this broker does not lead, with their leader
        for epoch in (1, 2):
            r = fetch(c, sid, epoch, {(topic, 0): 1} if epoch == 1 else {})
            got = answered(r)
            assert set(got) == not_led
            for (_, p), entry in got.items():
                assert entry["current_leader"]["leader_id"] == leaders[p]
        # the session is this broker's: the others do not know it
        for n in nodes:
            if n != home:
                assert fetch(clients[n], sid, 3, {})["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND
        assert fetch(c, sid, 3, {})["error_code"] == 0
    finally:
        for cl in clients.values():
            cl.close()


def test_a_stopped_broker_forgets_its_sessions(cluster: GroupdBroker) -> None:
    nodes = sorted(cluster.nodes)
    home = nodes[-1]
    topic = f"fs-{uuid.uuid4().hex[:8]}"
    c = _raw(cluster, nodes[0])
    try:
        create_topic(c, topic, 3)
    finally:
        c.close()
    c = _raw(cluster, home)
    try:
        sid = fetch(c, 0, 0, {(topic, 0): 0})["session_id"]
        assert sid != 0 and fetch(c, sid, 1, {})["error_code"] == 0
    finally:
        c.close()
    cluster.stop_broker(home)
    try:
        cluster.start_broker(home)
    finally:
        cluster.rebalance_leaders()
    c = _raw(cluster, home)
    try:
        # as after a Kafka broker's restart: the client's next incremental fetch learns it is gone
        assert fetch(c, sid, 2, {})["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND
    finally:
        c.close()
