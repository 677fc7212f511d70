"""ShareFetch / ShareAcknowledge in a 3-broker cluster: the leader of a partition hands its records
out; any other broker answers NOT_LEADER_OR_FOLLOWER for it with the current leader and its endpoint
(``ShareFetchResponse``'s CurrentLeader and NodeEndpoints), and keeps its own share sessions."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Producer
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode

from tests.support.share import join

from .conftest import create_topic, leaders, metadata, port_of, raw


def _fetch(group: str, tid: uuid.UUID, partition: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "member_id": "m1",
        "share_session_epoch": 0,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "topics": [{"topic_id": tid, "partitions": [{"partition_index": partition, "acknowledgement_batches": []}]}],
        "forgotten_topics_data": [],
    }


def test_share_fetch_is_answered_by_the_partition_leader(cluster: GroupdBroker, unique: str) -> None:
    topic = f"share-{unique}"
    client = raw(cluster, 1)
    try:
        created = client.request(
            "CreateTopics",
            4,
            {
                "topics": [
                    {"name": topic, "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
        assert created["topics"][0]["error_code"] == 0
    finally:
        client.close()
    tid = metadata(cluster, 1, [topic])["topics"][0]["topic_id"]
    group = f"g-{unique}"
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for _ in range(3):
        p.produce(topic, value=b"x", partition=0)
    assert p.flush(10) == 0
    leader, epoch = leaders(cluster, topic)[0]
    other = next(n for n in cluster.nodes if n != leader)
    c = raw(cluster, other)
    try:
        r = c.request("ShareFetch", 1, _fetch(group, tid, 0))
        (part,) = r["responses"][0]["partitions"]
        assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert part["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}
        assert [(e["node_id"], e["port"]) for e in r["node_endpoints"]] == [(leader, port_of(cluster, leader))]
        ack = c.request(
            "ShareAcknowledge",
            1,
            {
                "group_id": group,
                "member_id": "m1",
                "share_session_epoch": 1,
                "topics": [
                    {
                        "topic_id": tid,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "acknowledgement_batches": [
                                    {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}
                                ],
                            }
                        ],
                    }
                ],
            },
        )
        assert ack["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        c.close()
    # a member joins through the group coordinator, which initializes the share-partitions
    fc = raw(cluster, 1)
    try:
        coord = fc.request("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
    finally:
        fc.close()
    join(coord["port"], group, topic)
    lc = raw(cluster, leader)
    try:
        r = lc.request("ShareFetch", 1, _fetch(group, tid, 0))
        (part,) = r["responses"][0]["partitions"]
        assert part["error_code"] == 0
        # share.auto.offset.reset=latest: the records before the first fetch are not the group's
        assert part["acquired_records"] == []
    finally:
        lc.close()


def _acquired(r: dict[str, Any]) -> list[tuple[int, int, int]]:
    (part,) = r["responses"][0]["partitions"]
    assert part["error_code"] == 0, part
    return [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in part["acquired_records"]]


def test_share_partition_state_survives_its_leader_moving(healthy_cluster: GroupdBroker, unique: str) -> None:
    """The leader of a share-partition stops (``SharePartitionManager`` on the new leader reads the
    state back from the share coordinator): what was accepted is not delivered again; what the old
    leader's member held comes back with its delivery count, once, from the new leader."""
    cluster = healthy_cluster
    topic, group = f"share-move-{unique}", f"g-{unique}"
    create_topic(cluster, topic, partitions=1)
    cluster.group_configs(group, share_auto_offset_reset="earliest")
    tid = metadata(cluster, min(cluster.nodes), [topic])["topics"][0]["topic_id"]
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(6):
        p.produce(topic, value=b"r%d" % i, partition=0)
    assert p.flush(10) == 0
    fc = raw(cluster, min(cluster.nodes))
    try:
        coord = fc.request("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
    finally:
        fc.close()
    member = join(coord["port"], group, topic)
    leader, _ = leaders(cluster, topic)[0]
    old = raw(cluster, leader)
    try:
        first = {**_fetch(group, tid, 0), "member_id": member}
        assert _acquired(old.request("ShareFetch", 1, first)) == [(0, 5, 1)]
        ack = {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": 1,
            "topics": [
                {
                    "topic_id": tid,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "acknowledgement_batches": [
                                {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}
                            ],
                        }
                    ],
                }
            ],
        }
        acked = old.request("ShareAcknowledge", 1, ack)
        assert acked["error_code"] == 0 and acked["responses"][0]["partitions"][0]["error_code"] == 0
        cluster.stop_broker(leader)  # its connections close: the member's records 3-5 are let go
    finally:
        old.close()
    new_leader, _ = leaders(cluster, topic)[0]
    assert new_leader != leader
    new = raw(cluster, new_leader)
    try:
        again = {**_fetch(group, tid, 0), "member_id": member}
        assert _acquired(new.request("ShareFetch", 1, again)) == [(3, 5, 2)]
        later = {**_fetch(group, tid, 0), "member_id": member, "share_session_epoch": 1}
        later["topics"] = []
        r = new.request("ShareFetch", 1, later)
        assert all(not p["acquired_records"] for t in r["responses"] for p in t["partitions"])
    finally:
        new.close()
