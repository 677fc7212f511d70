"""CreateAcls / DescribeAcls / DeleteAcls with confluent-kafka's AdminClient against a SASL daemon:
the ACLs made through the API refuse (and admit) a SASL client, DENY wins, and they survive a restart.

The daemon's ``[acl]`` table makes ``User:alice`` the administrator (``cluster = ["ALL"]``) and gives
``User:bob`` nothing but his own ``bob-`` names; everything else bob gets comes from CreateAcls.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from groupd.security.scram import make_credential, toml_entry

from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient

from .conftest import PASSWORDS, listener_ports

pytestmark = pytest.mark.e2e

ACL_TOML = """
[acl."User:alice"]
groups = ["*"]
topics = ["*"]
cluster = ["ALL"]

[acl."User:bob"]
groups = ["bob-"]
topics = ["bob-"]
"""


def _start(d: Path) -> GroupdProcess:
    cfg = d / "groupd.toml"
    users = [toml_entry(u, {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", pw)}) for u, pw in PASSWORDS.items()]
    cfg.write_text("\n".join(users) + ACL_TOML)
    proc = GroupdProcess(d / "data", "--config", str(cfg), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0")
    return proc.start()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    proc = _start(tmp_path_factory.mktemp("groupd-acl-apis"))
    try:
        yield proc
    finally:
        proc.stop()


def _conf(proc: GroupdProcess, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{listener_ports(proc)['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def _binding(
    rtype: ResourceType, name: str, pattern: ResourcePatternType, op: AclOperation, perm: AclPermissionType
) -> AclBinding:
    return AclBinding(rtype, name, pattern, "User:bob", "*", op, perm)


def _consume(proc: GroupdProcess, user: str, topic: str, group: str) -> tuple[list[int], int | None]:
    """(offsets read, first error code) of a group consumer reading ``topic`` from the start."""
    c = Consumer({**_conf(proc, user), "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    offsets: list[int] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline and not offsets:
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED):
                    return offsets, m.error().code()
                continue
            offsets.append(m.offset())
    finally:
        c.close()
    return offsets, None


def test_acls_made_through_the_api_refuse_and_admit_a_sasl_client(daemon: GroupdProcess) -> None:
    alice = AdminClient(_conf(daemon, "alice"))
    u = uuid.uuid4().hex[:6]
    shared, secret, group = f"shared-{u}", f"shared-{u}-secret", f"team-{u}"
    for t in (shared, secret):
        alice.create_topics([NewTopic(t, 1, 1)])[t].result(10)
    p = Producer(_conf(daemon, "alice"))
    for t in (shared, secret):
        p.produce(t, b"v")
    assert p.flush(10) == 0

    # before any ACL: bob may not read shared-* (his table entry covers bob-* only)
    assert _consume(daemon, "bob", shared, f"bob-{u}")[1] == KafkaError.TOPIC_AUTHORIZATION_FAILED

    acls = [
        _binding(
            ResourceType.TOPIC, f"shared-{u}", ResourcePatternType.PREFIXED, AclOperation.READ, AclPermissionType.ALLOW
        ),
        _binding(ResourceType.TOPIC, secret, ResourcePatternType.LITERAL, AclOperation.ALL, AclPermissionType.DENY),
        _binding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, AclOperation.READ, AclPermissionType.ALLOW),
    ]
    for fut in alice.create_acls(acls).values():
        fut.result(10)
    flt = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.MATCH, "User:bob", None, AclOperation.ANY, AclPermissionType.ANY
    )
    described = alice.describe_acls(flt).result(10)
    assert set(acls) <= set(described)

    assert _consume(daemon, "bob", shared, group) == ([0], None)  # READ on the prefix and on the group
    assert _consume(daemon, "bob", secret, group)[1] == KafkaError.TOPIC_AUTHORIZATION_FAILED  # DENY wins
    assert _consume(daemon, "bob", shared, f"other-{u}")[1] == KafkaError.GROUP_AUTHORIZATION_FAILED

    # Metadata's authorized operations are bob's (KafkaApis.handleTopicMetadataRequest): READ and the
    # DESCRIBE it implies; the cluster's are 0 without DESCRIBE on it
    raw = RawClient(listener_ports(daemon)["SASL_PLAINTEXT"])
    try:
        raw.login_plain("bob", PASSWORDS["bob"])
        body = {
            "topics": [{"name": shared}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": True,
        }
        md = raw.request("Metadata", 10, body)
        assert md["topics"][0]["topic_authorized_operations"] == (1 << 3) | (1 << 8)
        assert md["cluster_authorized_operations"] == 0
        cluster = raw.request("DescribeCluster", 0, {"include_cluster_authorized_operations": True})
        assert cluster["cluster_authorized_operations"] == 0
        # the other admin APIs check what Kafka checks: READ gives neither DESCRIBE_CONFIGS nor DELETE
        configs = raw.request(
            "DescribeConfigs",
            4,
            {"resources": [{"resource_type": 2, "resource_name": shared, "configuration_keys": None}]},
        )
        assert configs["results"][0]["error_code"] == KafkaError.TOPIC_AUTHORIZATION_FAILED
        body = {"topics": [{"name": shared, "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout_ms": 1000}
        deleted = raw.request("DeleteRecords", 2, body)
        assert deleted["topics"][0]["partitions"][0]["error_code"] == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert (
            raw.request("DescribeLogDirs", 4, {"topics": None})["error_code"] == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        )
        ofle = {"topics": [{"topic": shared, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}
        assert (
            raw.request("OffsetForLeaderEpoch", 4, {"replica_id": -1, **ofle})["topics"][0]["partitions"][0][
                "end_offset"
            ]
            == 1
        )  # DESCRIBE, implied by READ
    finally:
        raw.close()

    # the ACL APIs' v0 (Kafka 2.0's clients): no pattern type, so LITERAL
    raw = RawClient(listener_ports(daemon)["SASL_PLAINTEXT"])
    try:
        raw.login_plain("alice", PASSWORDS["alice"])
        entry = {"principal": "User:bob", "host": "*", "operation": 8, "permission_type": 3}
        creation = {"resource_type": 2, "resource_name": f"v0-{u}", **entry}
        assert raw.request("CreateAcls", 0, {"creations": [creation]})["results"][0]["error_code"] == 0
        flt = {"resource_type_filter": 2, "resource_name_filter": None, "principal_filter": "User:bob"}
        flt |= {"host_filter": None, "operation": 1, "permission_type": 1}
        got = raw.request("DescribeAcls", 0, flt)
        assert (got["error_code"], got["resources"]) == (
            0,
            [
                {"resource_type": 2, "resource_name": n, "acls": [a]}
                for n, a in sorted([(secret, {**entry, "operation": 2, "permission_type": 2}), (f"v0-{u}", entry)])
            ],
        )  # the PREFIXED ACLs are not LITERAL: a v0 filter does not match them
        deleted = raw.request("DeleteAcls", 0, {"filters": [{**flt, "resource_name_filter": f"v0-{u}"}]})
        assert [m["resource_name"] for m in deleted["filter_results"][0]["matching_acls"]] == [f"v0-{u}"]
    finally:
        raw.close()

    # bob is no administrator: CLUSTER_AUTHORIZATION_FAILED
    bob_admin = AdminClient(_conf(daemon, "bob"))
    with pytest.raises(KafkaException) as exc:
        bob_admin.create_acls(acls[:1])[acls[0]].result(10)
    assert exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    deleted = alice.delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                f"shared-{u}",
                ResourcePatternType.PREFIXED,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ]
    )
    [got] = deleted.values()
    assert got.result(10) == [acls[0]]
    assert _consume(daemon, "bob", shared, group)[1] == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_bad_bindings_get_invalid_request_and_acls_survive_a_restart(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    try:
        alice = AdminClient(_conf(proc, "alice"))
        good = _binding(
            ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED, AclOperation.DESCRIBE, AclPermissionType.ALLOW
        )
        # librdkafka calls the cluster resource (4) BROKER; its only valid name is kafka-cluster
        bad = _binding(
            ResourceType.BROKER,
            "not-the-cluster",
            ResourcePatternType.LITERAL,
            AclOperation.ALTER,
            AclPermissionType.ALLOW,
        )
        futures = alice.create_acls([good, bad])
        futures[good].result(10)
        with pytest.raises(KafkaException) as exc:
            futures[bad].result(10)
        assert exc.value.args[0].code() == KafkaError.INVALID_REQUEST
        proc.stop()
        proc.start()
        alice = AdminClient(_conf(proc, "alice"))
        flt = AclBindingFilter(
            ResourceType.GROUP, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY, AclPermissionType.ANY
        )
        # the [acl] table's entry is described too, as the binding it maps to
        table = _binding(
            ResourceType.GROUP, "bob-", ResourcePatternType.PREFIXED, AclOperation.ALL, AclPermissionType.ALLOW
        )
        assert sorted(alice.describe_acls(flt).result(10), key=str) == sorted([table, good], key=str)
        assert (proc.data_dir / "acls.json").exists()
    finally:
        proc.stop()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    proc = GroupdProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        # (librdkafka turns DescribeAcls' top-level error into an empty list: read it off the wire)
        raw = RawClient(proc.port)
        try:
            flt = {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1}
            got = raw.request(
                "DescribeAcls", 3, {**flt, "resource_name_filter": None, "principal_filter": None, "host_filter": None}
            )
        finally:
            raw.close()
        assert (got["error_code"], got["error_message"]) == (
            KafkaError.SECURITY_DISABLED,
            "No Authorizer is configured.",
        )
        b = AclBinding(
            ResourceType.TOPIC,
            "t",
            ResourcePatternType.LITERAL,
            "User:x",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        with pytest.raises(KafkaException) as exc:
            admin.create_acls([b])[b].result(10)
        assert exc.value.args[0].code() == KafkaError.SECURITY_DISABLED
        assert not (proc.data_dir / "acls.json").exists()
    finally:
        proc.stop()
