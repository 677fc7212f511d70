"""Group coordinators in a 3-broker cluster: FindCoordinator from any broker names the leader of the
group's ``__consumer_offsets`` partition, the other brokers answer group requests NOT_COORDINATOR
(as Kafka's do), and moving the partition (the control endpoint's move-coordinator) moves them."""

from __future__ import annotations

from groupd.coordinator.routing import partition_for
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode

from tests.cluster.conftest import leaders, raw


def find_coordinator(cluster: GroupdBroker, via: int, group: str) -> tuple[int, int]:
    """(error code, node id) FindCoordinator v3 answers on broker ``via``."""
    client = raw(cluster, via)
    try:
        answer = client.request("FindCoordinator", 3, {"key": group, "key_type": 0})
    finally:
        client.close()
    return answer["error_code"], answer["node_id"]


def heartbeat(cluster: GroupdBroker, via: int, group: str) -> int:
    client = raw(cluster, via)
    try:
        body = {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None}
        return int(client.request("Heartbeat", 4, body)["error_code"])
    finally:
        client.close()


def test_every_broker_names_the_same_coordinator_and_only_it_serves_the_group(
    cluster: GroupdBroker, unique: str
) -> None:
    group = f"g-{unique}"
    owner = leaders(cluster, "__consumer_offsets")[partition_for(group)][0]
    for node in cluster.nodes:
        assert find_coordinator(cluster, node, group) == (0, owner)
        expected = ErrorCode.UNKNOWN_MEMBER_ID if node == owner else ErrorCode.NOT_COORDINATOR
        assert heartbeat(cluster, node, group) == expected


def test_moving_a_coordinator_moves_the_group_and_bumps_the_partition_epoch(
    healthy_cluster: GroupdBroker, unique: str
) -> None:
    cluster = healthy_cluster
    group = f"mv-{unique}"
    partition = partition_for(group)
    owner, epoch = leaders(cluster, "__consumer_offsets")[partition]
    target = next(n for n in cluster.nodes if n != owner)
    out = cluster.move_coordinator(group, target)
    assert out == {
        "action": "move_coordinator",
        "group": group,
        "partition": partition,
        "coordinator": target,
        "leader_epoch": epoch + 1,
    }
    assert leaders(cluster, "__consumer_offsets")[partition] == (target, epoch + 1)
    for node in cluster.nodes:
        assert find_coordinator(cluster, node, group) == (0, target)
    assert heartbeat(cluster, owner, group) == ErrorCode.NOT_COORDINATOR
    assert heartbeat(cluster, target, group) == ErrorCode.UNKNOWN_MEMBER_ID
