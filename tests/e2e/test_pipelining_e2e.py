"""Pipelined requests are processed one at a time per connection, as Kafka does.

Kafka's ``SocketServer`` mutes a channel once it has read a request and reads the next only after
the answer is sent (``Processor.processCompletedReceives`` mutes, ``processCompletedSends`` /
``tryUnmuteChannel`` unmutes). A client may pipeline (librdkafka does), and what it pipelines is
processed in order: a commit is durable before the fetch behind it runs, a leave waits for the join
before it. Before groupd did the same, it dispatched every pipelined request at once and only
ordered the answers: the OffsetFetch behind an OffsetCommit answered the old offset, and a
LeaveGroup overtook the parked JoinGroup in front of it.
"""

from __future__ import annotations

import select
from typing import Any

import pytest
from groupd.protocol.errors import ErrorCode

from tests.support.daemon import GroupdProcess
from tests.support.wire import Wire

pytestmark = pytest.mark.e2e

_SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"  # consumer protocol v0, no topics


def commit_body(group: str, topic: str, offset: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,  # a standalone commit (no group membership)
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": 0, "committed_offset": offset, "committed_metadata": None}],
            }
        ],
    }


def test_offset_fetch_pipelined_behind_offset_commit_answers_the_commit(groupd: GroupdProcess, unique: str) -> None:
    # SocketServer.processCompletedReceives: the fetch is read only once the commit is answered.
    topic, group = f"pipe-{unique}", f"pipe-{unique}"
    with Wire(groupd.port) as w:
        w.create_topic(topic)
        for offset in range(1, 21):
            w.pipeline(
                ("OffsetCommit", 8, commit_body(group, topic, offset)),
                (
                    "OffsetFetch",
                    7,
                    {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}], "require_stable": True},
                ),
            )
            name, committed = w.read()
            assert name == "OffsetCommit"
            assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
            name, fetched = w.read()
            assert name == "OffsetFetch"
            partition = fetched["topics"][0]["partitions"][0]
            assert (partition["error_code"], partition["committed_offset"]) == (ErrorCode.NONE, offset)


def test_confluent_kafka_committed_after_an_async_commit_sees_it(groupd: GroupdProcess, unique: str) -> None:
    # librdkafka sends the OffsetFetch of committed() right behind the async commit's OffsetCommit,
    # on the same coordinator connection.
    from confluent_kafka import Consumer, TopicPartition

    topic, group = f"ck-pipe-{unique}", f"ck-pipe-{unique}"
    with Wire(groupd.port) as w:
        w.create_topic(topic)
    consumer = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        # A first, synchronous commit: the coordinator is known and its connection up.
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        for offset in range(1, 11):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=True)
            (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
            assert tp.error is None
            assert tp.offset == offset
    finally:
        consumer.close()


def _join(group: str, member_id: str) -> tuple[str, int, dict[str, Any]]:
    return (
        "JoinGroup",
        5,
        {
            "group_id": group,
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": _SUBSCRIPTION}],
        },
    )


def _member_id(w: Wire, group: str) -> str:
    """A member id from the MEMBER_ID_REQUIRED answer to a first join (JoinGroup v4+)."""
    w.pipeline(_join(group, ""))
    _, joined = w.read()
    assert joined["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    return str(joined["member_id"])


def test_leave_group_pipelined_behind_a_parked_join_group_waits_for_it(groupd: GroupdProcess, unique: str) -> None:
    group = f"leave-{unique}"
    with Wire(groupd.port) as a, Wire(groupd.port) as b:
        # A alone: generation 1, Stable.
        member_a = _member_id(a, group)
        a.pipeline(_join(group, member_a))
        _, joined = a.read()
        assert joined["error_code"] == ErrorCode.NONE and joined["leader"] == member_a
        generation = joined["generation_id"]
        a.pipeline(
            (
                "SyncGroup",
                3,
                {
                    "group_id": group,
                    "generation_id": generation,
                    "member_id": member_a,
                    "group_instance_id": None,
                    "assignments": [{"member_id": member_a, "assignment": b""}],
                },
            )
        )
        _, synced = a.read()
        assert synced["error_code"] == ErrorCode.NONE

        # B joins (the join parks: the group waits for A to rejoin) and pipelines its leave behind.
        member_b = _member_id(b, group)
        b.pipeline(
            _join(group, member_b),
            ("LeaveGroup", 3, {"group_id": group, "members": [{"member_id": member_b, "group_instance_id": None}]}),
        )
        readable, _, _ = select.select([b.sock], [], [], 0.5)
        assert not readable, "B was answered while its join waits for A: the leave overtook the join"

        # A rejoins: the rebalance completes with both, and only then does B's leave run.
        a.pipeline(_join(group, member_a))
        _, joined = a.read()
        assert joined["error_code"] == ErrorCode.NONE
        assert joined["generation_id"] == generation + 1
        assert {m["member_id"] for m in joined["members"]} == {member_a, member_b}
        name, joined_b = b.read()
        assert (name, joined_b["error_code"], joined_b["generation_id"]) == (
            "JoinGroup",
            ErrorCode.NONE,
            generation + 1,
        )
        name, left = b.read()
        assert name == "LeaveGroup"
        assert left["error_code"] == ErrorCode.NONE
        assert [m["error_code"] for m in left["members"]] == [ErrorCode.NONE]


def test_acks_0_produces_sent_just_before_the_client_closes_are_all_written(groupd: GroupdProcess, unique: str) -> None:
    """A client that sends acks=0 Produce requests and closes at once (kafka-python's flush() then
    close() does) must not lose them: each is held behind the one before it until its append is
    done, and the requests a broker has received before it sees the close are still processed
    (Kafka reads what is in the socket before the end of the stream). groupd dropped the held ones
    when the connection closed."""
    from groupd.storage.records import build_batch

    topic = f"acks0-{unique}"
    n = 40
    with Wire(groupd.port) as w:
        w.create_topic(topic)
        w.pipeline(
            *(
                (
                    "Produce",
                    7,
                    {
                        "transactional_id": None,
                        "acks": 0,
                        "timeout_ms": 5000,
                        "topic_data": [
                            {
                                "name": topic,
                                "partition_data": [{"index": 0, "records": build_batch([(None, b"%d" % i, (), 0)])}],
                            }
                        ],
                    },
                )
                for i in range(n)
            )
        )
    with Wire(groupd.port) as w:
        seen = 0
        for _ in range(100):
            w.pipeline(
                (
                    "ListOffsets",
                    5,
                    {
                        "replica_id": -1,
                        "isolation_level": 0,
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
                    },
                )
            )
            _, answer = w.read()
            seen = answer["topics"][0]["partitions"][0]["offset"]
            if seen == n:
                break
            select.select([], [], [], 0.05)
        assert seen == n
