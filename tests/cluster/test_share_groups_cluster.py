"""Share groups in a 3-broker cluster: the share-group APIs are answered by the group's coordinator
(the leader of its ``__consumer_offsets`` partition) and NOT_COORDINATOR elsewhere, as Kafka's
brokers do; moving the coordinator moves the group, rebuilt from its records by the new one."""

from __future__ import annotations

import uuid

from groupd.coordinator.routing import partition_for
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode

from tests.cluster.conftest import leaders, raw


def share_heartbeat(cluster: GroupdBroker, via: int, group: str, member: str, epoch: int, topics: list[str] | None):  # type: ignore[no-untyped-def]
    client = raw(cluster, via)
    try:
        body = {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rack_id": None,
            "subscribed_topic_names": topics,
        }
        return client.request("ShareGroupHeartbeat", 1, body)
    finally:
        client.close()


def share_describe(cluster: GroupdBroker, via: int, group: str):  # type: ignore[no-untyped-def]
    client = raw(cluster, via)
    try:
        return client.request("ShareGroupDescribe", 1, {"group_ids": [group], "include_authorized_operations": False})[
            "groups"
        ][0]
    finally:
        client.close()


def test_only_the_coordinator_serves_a_share_group_and_it_moves_with_its_partition(
    healthy_cluster: GroupdBroker, unique: str
) -> None:
    cluster = healthy_cluster
    group, member = f"sg-{unique}", uuid.uuid4().hex[:22]
    owner = leaders(cluster, "__consumer_offsets")[partition_for(group)][0]
    for node in cluster.nodes:
        ans = share_heartbeat(cluster, node, group, member, 0, ["share-t"])
        if node != owner:
            assert ans["error_code"] == ErrorCode.NOT_COORDINATOR
            assert share_describe(cluster, node, group)["error_code"] == ErrorCode.NOT_COORDINATOR
    first = share_describe(cluster, owner, group)
    assert first["error_code"] == 0 and [m["member_id"] for m in first["members"]] == [member]
    target = next(n for n in cluster.nodes if n != owner)
    cluster.move_coordinator(group, target)
    assert share_heartbeat(cluster, owner, group, member, first["members"][0]["member_epoch"], None)["error_code"] == (
        ErrorCode.NOT_COORDINATOR
    )
    moved = share_describe(cluster, target, group)
    assert (moved["group_epoch"], moved["members"]) == (first["group_epoch"], first["members"])
    ans = share_heartbeat(cluster, target, group, member, moved["members"][0]["member_epoch"], None)
    assert ans["error_code"] == 0
    assert share_heartbeat(cluster, target, group, member, -1, None)["error_code"] == 0
