"""A Produce answer in cluster mode: the partitions the broker leads are appended and answered from
the bytes ``produce_wire`` encodes (issue 29 item 4), those it does not lead by ``leader_guard``
(NOT_LEADER_OR_FOLLOWER, with the leader hint and its endpoint from v10): one answer carries both,
at every version from v3 to v12, and the base offsets are the log's."""

from __future__ import annotations

import pytest
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode
from groupd.storage import records as rec

from tests.cluster.conftest import create_topic, leaders, raw


@pytest.mark.parametrize("version", [3, 5, 8, 9, 10, 11])
def test_a_produce_mixing_led_and_not_led_partitions_answers_both(
    cluster: GroupdBroker, unique: str, version: int
) -> None:
    topic = f"pmix-{unique}"
    create_topic(cluster, topic, partitions=6, replication=1)
    by_partition = leaders(cluster, topic)
    node = by_partition[0][0]
    led = sorted(p for p, (leader, _) in by_partition.items() if leader == node)
    other = sorted(p for p, (leader, _) in by_partition.items() if leader != node)
    assert led and other
    client = raw(cluster, node)
    try:
        for round_ in range(2):
            body = {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": p, "records": rec.build_batch([(None, b"v", (), 1), (None, b"w", (), 2)])}
                            for p in range(6)
                        ],
                    }
                ],
            }
            answer = client.request("Produce", version, body)
            (topic_answer,) = answer["responses"]
            parts = {p["index"]: p for p in topic_answer["partition_responses"]}
            assert sorted(parts) == list(range(6))
            for p in led:
                assert parts[p]["error_code"] == 0
                assert parts[p]["base_offset"] == 2 * round_
            for p in other:
                assert parts[p]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert parts[p]["base_offset"] == -1
                if version >= 10:
                    assert parts[p]["current_leader"]["leader_id"] == by_partition[p][0]
            if version >= 10:
                assert sorted(e["node_id"] for e in answer["node_endpoints"]) == sorted(
                    {by_partition[p][0] for p in other}
                )
    finally:
        client.close()


def test_a_produce_to_led_partitions_only_answers_each_with_its_offsets(cluster: GroupdBroker, unique: str) -> None:
    """The answer encoded by produce_wire, read by a raw client of the generic decoder."""
    topic = f"pled-{unique}"
    create_topic(cluster, topic, partitions=6, replication=1)
    by_partition = leaders(cluster, topic)
    node = by_partition[0][0]
    led = sorted(p for p, (leader, _) in by_partition.items() if leader == node)
    client = raw(cluster, node)
    try:
        for n in (1, 3):
            body = {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": p, "records": rec.build_batch([(None, b"v", (), 1)] * n)} for p in led
                        ],
                    }
                ],
            }
            answer = client.request("Produce", 9, body)
            parts = answer["responses"][0]["partition_responses"]
            assert [(p["index"], p["error_code"], p["base_offset"], p["log_start_offset"]) for p in parts] == [
                (p, 0, 0 if n == 1 else 1, 0) for p in led
            ]
            assert parts[0]["record_errors"] == [] and parts[0]["error_message"] is None
    finally:
        client.close()
