"""Issue 16 item 15: a corrupt batch in the middle of a log, with a real daemon and real clients.

Bytes are flipped on disk between two runs of ``groupd serve``. In ``__consumer_offsets`` the
start-up replay must check every batch's CRC, report a bad one (an error event and
``groupd_log_corrupt_batches_total``), skip it and go on: the groups of every partition load, and
what was committed after the damage survives, also a later crash recovery. A user topic's damaged
batch is stepped over by Fetch, and the batches around it are served (test_damage_e2e.py has every
position and kind of damage).
"""

from __future__ import annotations

import socket
import struct
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from groupd.coordinator import partition_for
from groupd.storage import records as rec

from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e

TOPIC = "orders"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_in(partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(100_000) if partition_for(f"{prefix}-{i}") == partition)


def _committer(bootstrap: str, group: str) -> Any:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    c.assign([TopicPartition(TOPIC, 0)])
    return c


def _commit(c: Any, offset: int) -> None:
    from kafka import OffsetAndMetadata, TopicPartition

    c.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(offset, "", -1)})


def _committed(bootstrap: str, groups: list[str], timeout: float = 10.0) -> dict[str, int | None]:
    """Each group's committed offset of orders-0, asked with OffsetFetch until every group's
    partition has loaded (COORDINATOR_LOAD_IN_PROGRESS is retried by the client)."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    deadline = time.monotonic() + timeout
    out: dict[str, int | None] = {}
    try:
        for g in groups:
            while True:
                try:
                    offsets = admin.list_group_offsets({g: [TopicPartition(TOPIC, 0)]})[g]
                    break
                except KafkaError as exc:  # load in progress: retried until the deadline
                    if time.monotonic() > deadline:
                        raise AssertionError(f"group {g} never answered: {exc!r}") from exc
                    time.sleep(0.1)
            meta = offsets.get(TopicPartition(TOPIC, 0))
            out[g] = meta.offset if meta is not None and meta.offset >= 0 else None
    finally:
        admin.close()
    return out


def _flip(path: Path, find: Callable[[bytes], int], bit: int = 0) -> int:
    """Flip one bit of the byte `find` picks in `path`; returns that byte's position."""
    data = bytearray(path.read_bytes())
    pos = find(bytes(data))
    data[pos] ^= 1 << bit
    path.write_bytes(bytes(data))
    return pos


def _batch_at(data: bytes, pos: int) -> rec.BatchView:
    return next(v for v in rec.iter_batches(data) if v.position <= pos < v.position + v.size)


def _metric(port: int, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return 0.0


def test_corrupt_offsets_batches_are_skipped_and_commits_after_them_survive_a_crash(tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    p, later = 3, 41
    a, b, d_ = _group_in(p, "a"), _group_in(p, "b"), _group_in(p, "d")
    c_ = _group_in(later, "c")
    metrics_port = _free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(metrics_port)).start()
    committers: dict[str, Any] = {}
    try:
        admin = KafkaAdminClient(bootstrap_servers=d.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        admin.close()
        committers = {g: _committer(d.bootstrap, g) for g in (a, b, c_, d_)}
        # Enough commits before and after the damaged ones that they sit between offset-index
        # entries in the middle of the segment, where a clean start-up does not re-read them.
        for off in range(1, 61):
            _commit(committers[a], off)
        _commit(committers[a], 4241)
        _commit(committers[a], 4242)
        _commit(committers[d_], 777)
        for off in range(10_001, 10_061):
            _commit(committers[b], off)
        _commit(committers[c_], 7000)
        for c in committers.values():
            c.close()
        committers = {}
        assert d.stop() == 0

        seg_dir = tmp_path / "data" / f"__consumer_offsets-{p}"
        (seg,) = sorted(seg_dir.glob("*.log"))
        # 4242 -> 4243 in A's last commit (OffsetCommitValue v3: int16 version, int64 offset)...
        needle = b"\x00\x03" + struct.pack(">q", 4242)
        flipped_value = _flip(seg, lambda data: data.index(needle) + len(needle) - 1)
        # ...and the length of D's record, which makes it undecodable.
        flipped_length = _flip(seg, lambda data: _batch_at(data, data.index(d_.encode())).position + rec.HEADER_SIZE)
        data = seg.read_bytes()
        bad_offsets = sorted({_batch_at(data, flipped_value).base_offset, _batch_at(data, flipped_length).base_offset})
        assert (seg_dir / "00000000000000000000.index").stat().st_size > 0  # damage is mid-segment

        d.start()
        got = _committed(d.bootstrap, [a, b, c_, d_])
        assert got == {a: 4241, b: 10_060, c_: 7000, d_: None}
        events = [e for e in d.events("storage.batch.corrupt") if e["level"] == "error"]
        assert sorted(e["offset"] for e in events) == bad_offsets
        assert {(e["topic"], e["partition"]) for e in events} == {("__consumer_offsets", p)}
        assert _metric(metrics_port, "groupd_log_corrupt_batches_total", log="offsets") == 2
        assert d.events("offsets_loaded")[-1]["corrupt_batches"] == 2

        # (b) Commits acknowledged after that restart survive a crash: recovery must not truncate
        # the log at the old damage in its middle.
        committers = {g: _committer(d.bootstrap, g) for g in (a, b)}
        _commit(committers[a], 5000)
        for off in range(20_001, 20_031):
            _commit(committers[b], off)
        for c in committers.values():
            c.close()
        committers = {}
        d.kill()
        d.start()
        assert _committed(d.bootstrap, [a, b, c_, d_]) == {a: 5000, b: 20_030, c_: 7000, d_: None}
        assert not d.events("storage.recovery.truncated")
    finally:
        for c in committers.values():
            c.close()
        d.stop()


def test_fetch_steps_over_a_corrupt_user_batch_and_serves_the_rest(tmp_path: Path) -> None:
    """Kafka serves a damaged batch as stored, and a consumer that checks CRCs (kafka-python's
    ``check_crcs``, Java's ``check.crcs``, both on by default) then stops there until the
    application seeks past it; librdkafka by default delivers the damaged record. groupd checks
    the CRC of a batch it did not write in this run once, reports a bad one and steps over it
    (issue 29 item 1): the batches around it are served and no client sees the damage."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    d = GroupdProcess(tmp_path / "data").start()
    consumer = None
    try:
        producer = KafkaProducer(bootstrap_servers=d.bootstrap, linger_ms=0)
        for i in range(3):  # one batch each
            producer.send(TOPIC, value=b"value-%d" % i).get(timeout=10)
        producer.close()
        assert d.stop() == 0
        (seg,) = sorted((tmp_path / "data" / f"{TOPIC}-0").glob("*.log"))
        _flip(seg, lambda data: data.index(b"value-1") + 6)
        d.start()

        tp = TopicPartition(TOPIC, 0)
        consumer = KafkaConsumer(bootstrap_servers=d.bootstrap, auto_offset_reset="earliest")
        consumer.assign([tp])
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(values) < 2 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in batch]
        assert values == [b"value-0", b"value-2"]
        # librdkafka checking CRCs itself finds nothing bad either.
        assert _confluent_values(d.bootstrap, tp.partition) == [b"value-0", b"value-2"]
        (event,) = d.events("storage.batch.corrupt")
        assert (event["topic"], event["offset"], event["reason"]) == (TOPIC, 1, "CRC mismatch")
        assert d.proc is not None and d.proc.poll() is None
    finally:
        if consumer is not None:
            consumer.close()
        d.stop()


def _confluent_values(bootstrap: str, partition: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crc-check", "check.crcs": True})
    values: list[bytes] = []
    try:
        c.assign([TopicPartition(TOPIC, partition, 0)])
        deadline = time.monotonic() + 10
        while len(values) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                values.append(m.value())
        return values
    finally:
        c.close()
