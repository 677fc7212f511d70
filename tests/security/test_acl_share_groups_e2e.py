"""ACLs on the share-group APIs (KIP-932), as Kafka 4.2's ``KafkaApis`` checks them: ShareGroupHeartbeat
READ on the group then DESCRIBE on each subscribed topic name; ShareGroupDescribe DESCRIBE on each
group and on every topic its members are assigned; DescribeShareGroupOffsets DESCRIBE on the group
and each topic; AlterShareGroupOffsets READ on the group and each topic; DeleteShareGroupOffsets
DELETE on the group and READ on each topic. As User:bob (groups "bob-*", topics "orders*") and
User:ANONYMOUS (everything)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from groupd.protocol.errors import ErrorCode

from .conftest import PASSWORDS, RawClient, SecureDaemon

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
    for _ in range(2):  # the first request creates the topics, the second sees them
        md = c.request(
            "Metadata", 9, {"topics": [{"name": "orders"}, {"name": "other"}], "allow_auto_topic_creation": True}
        )
    assert [t["error_code"] for t in md["topics"]] == [0, 0]
    yield c
    c.close()


def _heartbeat(c: RawClient, group: str, topics: list[str] | None, member: str, epoch: int = 0) -> dict[str, Any]:
    body = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": topics,
    }
    return c.request("ShareGroupHeartbeat", 1, body)


def _joined(c: RawClient, group: str, topics: list[str]) -> str:
    member = uuid.uuid4().hex[:22]
    r = _heartbeat(c, group, topics, member)
    assert r["error_code"] == 0, r
    deadline = time.monotonic() + 10
    while not (r.get("assignment") or {}).get("topic_partitions"):
        assert time.monotonic() < deadline, r
        time.sleep(0.1)
        r = _heartbeat(c, group, None, member, r["member_epoch"])
        assert r["error_code"] == 0
    return member


def test_heartbeat_needs_read_on_the_group_then_describe_on_each_topic(bob: RawClient, anonymous: RawClient) -> None:
    r = _heartbeat(bob, "app-x", ["orders"], "m1")
    assert (r["error_code"], r["member_id"], r["assignment"]) == (G, None, None)
    group = f"bob-{uuid.uuid4().hex[:6]}"
    assert _heartbeat(bob, group, ["orders", "other"], "m1")["error_code"] == T
    # KafkaApis checks the member id (isMemberIdValid) before the topics
    assert _heartbeat(bob, group, ["orders", "other"], "m" * 37)["error_code"] == ErrorCode.INVALID_REQUEST
    r = anonymous.request("ShareGroupDescribe", 1, {"group_ids": [group], "include_authorized_operations": False})
    assert r["groups"][0]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND  # refused before the coordinator
    r = _heartbeat(bob, group, ["orders"], "m1")
    assert r["error_code"] == 0 and r["member_epoch"] >= 1


def test_describe_refuses_groups_and_groups_with_undescribable_topics(bob: RawClient, anonymous: RawClient) -> None:
    tag = uuid.uuid4().hex[:6]
    theirs, mixed, fine = f"app-{tag}", f"bob-mixed-{tag}", f"bob-fine-{tag}"
    _joined(anonymous, mixed, ["other"])
    _joined(anonymous, fine, ["orders"])
    got = bob.request(
        "ShareGroupDescribe", 1, {"group_ids": [fine, theirs, mixed], "include_authorized_operations": True}
    )["groups"]
    assert [(g["group_id"], g["error_code"]) for g in got] == [(theirs, G), (fine, 0), (mixed, T)]
    assert got[2]["members"] == [] and got[1]["authorized_operations"] != -(2**31)
    assert [m["assignment"]["topic_partitions"][0]["topic_name"] for m in got[1]["members"]] == ["orders"]


def test_offsets_apis(bob: RawClient, anonymous: RawClient) -> None:
    tag = uuid.uuid4().hex[:6]
    mine, theirs = f"bob-{tag}", f"app-{tag}"
    r = bob.request(
        "DescribeShareGroupOffsets",
        1,
        {
            "groups": [
                {"group_id": theirs, "topics": [{"topic_name": "orders", "partitions": [0]}]},
                {
                    "group_id": mine,
                    "topics": [{"topic_name": "orders", "partitions": [0]}, {"topic_name": "other", "partitions": [0]}],
                },
            ]
        },
    )
    refused, ok = r["groups"]
    assert (refused["group_id"], refused["error_code"]) == (theirs, G)
    assert ok["error_code"] == 0
    assert {t["topic_name"]: t["partitions"][0]["error_code"] for t in ok["topics"]} == {"orders": 0, "other": T}
    alter = {
        "group_id": mine,
        "topics": [
            {"topic_name": n, "partitions": [{"partition_index": 0, "start_offset": 0}]} for n in ("orders", "other")
        ],
    }
    r = bob.request("AlterShareGroupOffsets", 0, alter)
    assert r["error_code"] == 0
    assert {t["topic_name"]: t["partitions"][0]["error_code"] for t in r["responses"]} == {"orders": 0, "other": T}
    assert bob.request("AlterShareGroupOffsets", 0, {**alter, "group_id": theirs})["error_code"] == G
    delete = {"group_id": mine, "topics": [{"topic_name": "orders"}, {"topic_name": "other"}]}
    r = bob.request("DeleteShareGroupOffsets", 0, delete)
    assert r["error_code"] == 0
    assert {t["topic_name"]: t["error_code"] for t in r["responses"]} == {"orders": 0, "other": T}
    assert bob.request("DeleteShareGroupOffsets", 0, {**delete, "group_id": theirs})["error_code"] == G
