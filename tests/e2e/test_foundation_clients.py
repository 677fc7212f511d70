"""Issue 2 acceptance: real clients with default settings bootstrap, list and create topics."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess

import pytest
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER

from bench.netfuzz import request
from tests.support.daemon import GroupdProcess
from tests.support.wire import Wire

pytestmark = pytest.mark.e2e


def test_kafka_python_admin(groupd: GroupdProcess, unique: str) -> None:
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=groupd.bootstrap)
    try:
        topic = f"kp-{unique}"
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        assert topic in admin.list_topics()
        desc = admin.describe_topics([topic])
        assert len(desc[0]["partitions"]) == 3
        consumer = KafkaConsumer(bootstrap_servers=groupd.bootstrap)
        try:
            assert topic in consumer.topics()
            assert consumer.partitions_for_topic(topic) == {0, 1, 2}
        finally:
            consumer.close()
    finally:
        admin.close()


async def test_aiokafka_admin(groupd: GroupdProcess, unique: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=groupd.bootstrap)
    await admin.start()
    try:
        topic = f"aio-{unique}"
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        assert topic in await admin.list_topics()
    finally:
        await admin.close()
    consumer = AIOKafkaConsumer(bootstrap_servers=groupd.bootstrap)
    await consumer.start()
    try:
        assert topic in await consumer.topics()
    finally:
        await consumer.stop()
    producer = AIOKafkaProducer(bootstrap_servers=groupd.bootstrap)
    await producer.start()
    try:
        assert await producer.partitions_for(topic) == {0, 1}
    finally:
        await producer.stop()


def test_confluent_kafka_admin(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    topic = f"ck-{unique}"
    futures = admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])
    futures[topic].result(timeout=15)
    md = admin.list_topics(timeout=15)
    assert topic in md.topics
    assert len(md.topics[topic].partitions) == 4
    assert md.cluster_id
    # A second creation of the same topic fails the way Kafka fails it.
    again = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    with pytest.raises(Exception) as exc:
        again[topic].result(timeout=15)
    assert "TOPIC_ALREADY_EXISTS" in str(exc.value) or "already exists" in str(exc.value)


def test_confluent_kafka_bad_topic_requests(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    bad = admin.create_topics([NewTopic("bad name!", num_partitions=1, replication_factor=1)])
    with pytest.raises(Exception) as exc:
        bad["bad name!"].result(timeout=15)
    assert "INVALID_TOPIC" in str(exc.value) or "illegal" in str(exc.value)
    zero = admin.create_topics([NewTopic(f"zero-{unique}", num_partitions=0, replication_factor=1)])
    with pytest.raises(Exception) as exc:
        zero[f"zero-{unique}"].result(timeout=15)
    assert "INVALID_PARTITIONS" in str(exc.value) or "partitions" in str(exc.value).lower()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (.ci/run installs it)")
def test_kcat_lists_metadata(groupd: GroupdProcess, unique: str) -> None:
    out = subprocess.run(
        ["kcat", "-L", "-b", groupd.bootstrap, "-m", "10"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert "1 brokers:" in out
    assert f"broker 1 at 127.0.0.1:{groupd.port}" in out
    assert "__consumer_offsets" in out


def _raw(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        head = s.recv(4)
        if len(head) < 4:
            return b""
        (n,) = struct.unpack(">i", head)
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                break
            data += chunk
        return data


def test_unsupported_api_versions_version_answers_v0_with_ranges(groupd: GroupdProcess) -> None:
    hdr = REQUEST_HEADER.codec(2).encode(
        {"request_api_key": 18, "request_api_version": 99, "correlation_id": 7, "client_id": "t"}
    )
    data = _raw(groupd.port, hdr + b"\x00\x00\x00")
    assert struct.unpack(">i", data[:4])[0] == 7
    body = API_BY_NAME["ApiVersions"].response.codec(0).decode(data[4:])
    assert body["error_code"] == 35
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert keys[18] == (0, 4)
    assert keys[3] == (0, 12)


@pytest.mark.parametrize("api, past", [("Heartbeat", "above"), ("Fetch", "below"), ("OffsetCommit", "above")])
def test_a_version_not_advertised_closes_the_connection_unanswered(groupd: GroupdProcess, api: str, past: str) -> None:
    # Kafka: Processor.parseRequestHeader throws for a version ApiVersionManager.isApiEnabled refuses,
    # and processChannelException closes the channel; only ApiVersions, which ApiKeys.isVersionEnabled
    # accepts at any version, gets the v0 fallback answer (the test above). The answer to the request
    # pipelined before it still arrives: Kafka had sent it before reading the next request.
    with Wire(groupd.port) as w:
        w.pipeline(("ApiVersions", 0, {}))
        _, versions = w.read()
        lo, hi = next(
            (k["min_version"], k["max_version"]) for k in versions["api_keys"] if k["api_key"] == API_BY_NAME[api].key
        )
        version = hi + 1 if past == "above" else lo - 1
        w.sock.sendall(w.frame("ApiVersions", 0, {}) + request(API_BY_NAME[api].key, version, b"\x00" * 16, 99))
        name, answered = w.read()
        assert (name, answered["error_code"]) == ("ApiVersions", 0)
        assert w.sock.recv(1) == b""


def test_unknown_api_key_closes_only_that_connection(groupd: GroupdProcess) -> None:
    hdr = REQUEST_HEADER.codec(1).encode(
        {"request_api_key": 999, "request_api_version": 0, "correlation_id": 1, "client_id": "t"}
    )
    assert _raw(groupd.port, hdr) == b""
    # The daemon still answers others.
    ok = REQUEST_HEADER.codec(1).encode(
        {"request_api_key": 18, "request_api_version": 0, "correlation_id": 2, "client_id": "t"}
    )
    assert struct.unpack(">i", _raw(groupd.port, ok)[:4])[0] == 2


def test_oversize_frame_closes_connection(groupd: GroupdProcess) -> None:
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=5) as s:
        s.sendall(struct.pack(">i", 2**31 - 1))
        assert s.recv(1) == b""


def test_truncated_body_closes_connection(groupd: GroupdProcess) -> None:
    hdr = REQUEST_HEADER.codec(1).encode(
        {"request_api_key": 11, "request_api_version": 5, "correlation_id": 3, "client_id": "t"}
    )
    assert _raw(groupd.port, hdr + b"\x00\x05ab") == b""


def test_pipelined_requests_answered_in_order(groupd: GroupdProcess) -> None:
    frames = b""
    for cid in range(50):
        hdr = REQUEST_HEADER.codec(1).encode(
            {"request_api_key": 18 if cid % 2 else 3, "request_api_version": 0, "correlation_id": cid, "client_id": "t"}
        )
        body = b"" if cid % 2 else b"\x00\x00\x00\x00"
        frames += struct.pack(">i", len(hdr + body)) + hdr + body
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=5) as s:
        s.sendall(frames)
        seen = []
        buf = b""
        while len(seen) < 50:
            chunk = s.recv(65536)
            assert chunk
            buf += chunk
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                n = struct.unpack(">i", buf[:4])[0]
                seen.append(struct.unpack(">i", buf[4:8])[0])
                buf = buf[4 + n :]
    assert seen == list(range(50))


def test_restart_keeps_cluster_id_and_topics(tmp_path, unique: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    d = GroupdProcess(tmp_path / "data")
    with d:
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        admin.create_topics([NewTopic("persist", num_partitions=5, replication_factor=1)])["persist"].result(15)
        md1 = admin.list_topics(timeout=15)
    with d:
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        md2 = admin.list_topics(timeout=15)
    assert md1.cluster_id == md2.cluster_id
    assert len(md2.topics["persist"].partitions) == 5
