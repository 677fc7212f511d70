"""Inputs the fuzzers found, replayed byte for byte through the in-process harness.

Each test names what the input did before its fix; ``target.feed`` raises ``FuzzCrash`` for the
generic failures (an exception out of the dispatcher, an "internal error" close, a hang), and the
assertions check the answer a Kafka broker would give instead.
"""

from __future__ import annotations

import struct

from groupd.protocol.errors import ErrorCode
from groupd.protocol.messages import API_BY_NAME

from tests.fuzz.harness import FuzzTarget, decode_input, frame


def _responses(target: FuzzTarget, data: bytes) -> list[bytes]:
    stream, chunks = decode_input(data, sorted(target.broker.dispatcher.routes))  # type: ignore[union-attr]
    conn = target.feed(stream, chunks)
    out = b"".join(conn.transport.written)  # type: ignore[union-attr]
    frames = []
    while out:
        (size,) = struct.unpack_from(">i", out)
        frames.append(out[4 : 4 + size])
        out = out[4 + size :]
    return frames


def test_create_topics_with_38658_partitions_is_refused_not_created(target: FuzzTarget) -> None:
    # Found by the mutation run: CreateTopics v3 for "t2" with num_partitions=0x9702. Every partition
    # is a log with 3 open files, created synchronously: the event loop stalled ~18 s, the process ran
    # out of file descriptors and the tmpfs out of inodes. Now the broker's partition cap answers.
    data = bytes.fromhex(
        "000000003d0013000300000001000466757a7a00000001000274320000970200010000000000000001000c"
        "726574656e74696f6e2e6d73000431303030000003e800"
    )
    [resp] = _responses(target, data)
    body = API_BY_NAME["CreateTopics"].response.codec(3).decode(resp, 4)
    [topic] = body["topics"]
    assert (topic["name"], topic["error_code"]) == ("t2", ErrorCode.INVALID_PARTITIONS)
    assert target.broker is not None and target.broker.topics.get("t2") is None
    assert not any(t == "t2" for t, _ in target.broker.logs.partitions())


def test_create_partitions_to_int32_max_is_refused(target: FuzzTarget) -> None:
    api = API_BY_NAME["CreateTopics"]
    ok = api.request.codec(5).encode({"topics": [{"name": "cp", "num_partitions": 1, "replication_factor": 1}]})
    cp = API_BY_NAME["CreatePartitions"]
    grow = cp.request.codec(1).encode(
        {"topics": [{"name": "cp", "count": 2**31 - 1, "assignments": None}], "timeout_ms": 1000}
    )
    _responses(target, b"\x00" + frame(api.key, 5, ok))
    [resp] = _responses(target, b"\x00" + frame(cp.key, 1, grow))
    [result] = cp.response.codec(1).decode(resp, 4)["results"]
    assert result["error_code"] == ErrorCode.INVALID_PARTITIONS
    assert target.broker is not None and target.broker.topics.partition_count("cp") == 1


def test_metadata_auto_creation_stops_at_the_partition_cap(target: FuzzTarget) -> None:
    # Metadata auto-creates one topic per unknown name: without the cap a client listing fresh names
    # grows the broker's logs (and open files) without bound.
    assert target.broker is not None
    target.broker.topics.max_partitions = 52  # __consumer_offsets' 50 + 2
    md = API_BY_NAME["Metadata"]
    body = md.request.codec(9).encode(
        {"topics": [{"name": f"auto{i}"} for i in range(4)], "allow_auto_topic_creation": True}
    )
    [resp] = _responses(target, b"\x00" + frame(md.key, 9, body))
    topics = md.response.codec(9).decode(resp, 5)["topics"]  # flexible: header has a tagged section
    # The two created answer UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4 answers the request that creates a topic.
    created, refused = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PARTITIONS
    assert [t["error_code"] for t in topics] == [created, created, refused, refused]
