"""ACLs on the KIP-848 group APIs, as Kafka 4's ``KafkaApis.handleConsumerGroupHeartbeat`` and
``handleConsumerGroupDescribe`` check them: READ on the group and DESCRIBE on each subscribed topic
name for a heartbeat; DESCRIBE on each group, and on every topic its members are assigned, for a
describe. As User:bob (groups "bob-*", topics "orders*") and User:ANONYMOUS (everything)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from groupd.protocol.errors import ErrorCode
from groupd.security import acl_model
from groupd.security.scram import make_credential, toml_entry

from tests.support.daemon import GroupdProcess

from .conftest import PASSWORDS, RawClient, SecureDaemon, listener_ports

pytestmark = pytest.mark.e2e

G, T = ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED


@pytest.fixture
def bob(secure_daemon: SecureDaemon):  # type: ignore[no-untyped-def]
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    c.login_plain("bob", PASSWORDS["bob"])
    yield c
    c.close()


@pytest.fixture
def anonymous(secure_daemon: SecureDaemon):  # type: ignore[no-untyped-def]
    c = RawClient(secure_daemon.ports["PLAINTEXT"])
    for _ in range(2):  # the first request creates the topics, the second sees them (Kafka 4)
        md = c.request(
            "Metadata", 9, {"topics": [{"name": "orders"}, {"name": "other"}], "allow_auto_topic_creation": True}
        )
    assert [t["error_code"] for t in md["topics"]] == [0, 0]
    yield c
    c.close()


def _heartbeat(c: RawClient, group: str, topics: list[str] | None, member: str = "", epoch: int = 0) -> dict[str, Any]:
    return c.request(
        "ConsumerGroupHeartbeat",
        0,
        {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rebalance_timeout_ms": 5000,
            "subscribed_topic_names": topics,
            "topic_partitions": [] if epoch == 0 else None,
        },
    )


def _describe(c: RawClient, groups: list[str], ops: bool = False) -> list[dict[str, Any]]:
    r = c.request("ConsumerGroupDescribe", 0, {"group_ids": groups, "include_authorized_operations": ops})
    return list(r["groups"])


def test_heartbeat_needs_read_on_the_group_then_describe_on_each_topic(bob: RawClient, anonymous: RawClient) -> None:
    r = _heartbeat(bob, "app-x", ["orders"])
    # ConsumerGroupHeartbeatRequest.getErrorResponse: the error code alone
    assert (r["error_code"], r["member_id"], r["member_epoch"], r["assignment"]) == (G, None, 0, None)
    group = f"bob-{uuid.uuid4().hex[:6]}"
    r = _heartbeat(bob, group, ["orders", "other"])
    assert (r["error_code"], r["member_id"]) == (T, None)
    # refused before the coordinator: no group was made
    assert _describe(anonymous, [group])[0]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    r = _heartbeat(bob, group, ["orders"])
    assert r["error_code"] == 0 and r["member_id"] and r["member_epoch"] >= 1
    # a heartbeat that leaves its subscription unchanged (null) names no topic to check
    r = _heartbeat(bob, group, None, r["member_id"], r["member_epoch"])
    assert r["error_code"] == 0


def _joined(c: RawClient, group: str, topics: list[str]) -> None:
    r = _heartbeat(c, group, topics)
    assert r["error_code"] == 0
    member, epoch = r["member_id"], r["member_epoch"]
    deadline = time.monotonic() + 10
    while not (r.get("assignment") or {}).get("topic_partitions"):
        assert time.monotonic() < deadline, r
        time.sleep(0.1)
        r = _heartbeat(c, group, None, member, epoch)
        assert r["error_code"] == 0
        epoch = r["member_epoch"]


def test_describe_refuses_groups_and_groups_with_undescribable_topics(bob: RawClient, anonymous: RawClient) -> None:
    tag = uuid.uuid4().hex[:6]
    theirs, mixed, fine = f"app-{tag}", f"bob-mixed-{tag}", f"bob-fine-{tag}"
    _joined(anonymous, mixed, ["other"])  # a topic bob may not describe
    _joined(anonymous, fine, ["orders"])
    got = _describe(bob, [fine, theirs, mixed], ops=True)
    # refused groups first, then the coordinator's answers (KafkaApis adds them in that order)
    assert [(g["group_id"], g["error_code"]) for g in got] == [(theirs, G), (fine, 0), (mixed, T)]
    refused, ok, hidden = got
    assert refused["members"] == [] and refused["authorized_operations"] == -(2**31)
    assert hidden["members"] == [] and hidden["group_state"] == ""
    assert hidden["error_message"] == "The group has described topic(s) that the client is not authorized to describe."
    assert [m["assignment"]["topic_partitions"][0]["topic_name"] for m in ok["members"]] == ["orders"]
    # bob may do everything on bob-* groups: every group operation is reported
    assert ok["authorized_operations"] == acl_model.bit_field(
        acl_model.SUPPORTED_OPERATIONS[acl_model.ResourceType.GROUP]
    )
    # whoever may describe the topics sees the group
    assert _describe(anonymous, [mixed])[0]["error_code"] == 0


# --- librdkafka's KIP-848 consumer (group.protocol=consumer) ---------------------------------------
ADMIN_TOML = """
[acl."User:alice"]
groups = ["*"]
topics = ["*"]
cluster = ["ALL"]

[acl."User:bob"]
groups = ["bob-"]
topics = ["bob-"]
"""


@pytest.fixture(scope="module")
def admin_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    # alice administers the ACLs; bob gets what a test gives him through CreateAcls
    d = tmp_path_factory.mktemp("groupd-kip848-acl")
    users = [toml_entry(u, {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", pw)}) for u, pw in PASSWORDS.items()]
    (d / "groupd.toml").write_text("\n".join(users) + ADMIN_TOML)
    proc = GroupdProcess(
        d / "data", "--config", str(d / "groupd.toml"), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0"
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


def _ck(proc: GroupdProcess, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{listener_ports(proc)['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        **extra,
    }


def _denied(e: KafkaError) -> bool:
    # librdkafka makes a heartbeat's GROUP_AUTHORIZATION_FAILED a fatal error of the consumer
    # ("ConsumerGroupHeartbeat fatal error: Broker: Group authorization failed")
    if e.code() == KafkaError._FATAL:
        return "Group authorization failed" in e.str()
    return e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def _consume_848(proc: GroupdProcess, group: str, topic: str) -> tuple[list[int], list[KafkaError]]:
    """(offsets read, errors seen) of bob's KIP-848 consumer reading ``topic`` in ``group``."""
    errors: list[KafkaError] = []
    conf = _ck(proc, "bob", **{"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    c = Consumer({**conf, "error_cb": errors.append})
    offsets: list[int] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not offsets and not any(map(_denied, errors)):
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error() is not None:
                errors.append(m.error())
            else:
                offsets.append(m.offset())
    finally:
        c.close()
    return offsets, errors


def test_confluent_consumer_protocol_needs_read_on_the_group(admin_daemon: GroupdProcess) -> None:
    # DESCRIBE on the group lets FindCoordinator through; the heartbeat needs READ (before issue 25's
    # table, ConsumerGroupHeartbeat was not checked at all and this consumer joined).
    u = uuid.uuid4().hex[:6]
    topic, group = f"bob-{u}", f"kip848-{u}"
    alice = AdminClient(_ck(admin_daemon, "alice"))
    alice.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    p = Producer(_ck(admin_daemon, "alice"))
    p.produce(topic, b"v")
    assert p.flush(10) == 0

    def allow(op: AclOperation) -> None:
        binding = AclBinding(
            ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:bob", "*", op, AclPermissionType.ALLOW
        )
        for fut in alice.create_acls([binding]).values():
            fut.result(10)

    allow(AclOperation.DESCRIBE)
    offsets, errors = _consume_848(admin_daemon, group, topic)
    assert offsets == [] and any(map(_denied, errors)), errors
    allow(AclOperation.READ)
    assert _consume_848(admin_daemon, group, topic)[0] == [0]
