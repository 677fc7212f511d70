"""DataPlane in-process: Produce, Fetch, ListOffsets, InitProducerId against real logs in tmp_path.

Requests are fake (a body dict, a version, a connection that records a close); every response is
also pushed through the real codec of its version, so a dict that could not be encoded fails here.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
import time
from pathlib import Path
from typing import Any

import pytest
from groupd.broker.data_plane import (
    FETCH_VERSIONS,
    INIT_PRODUCER_ID_VERSIONS,
    LIST_OFFSETS_VERSIONS,
    PRODUCE_VERSIONS,
    DataPlane,
    PartitionProducers,
    ProducerIdManager,
    topic_log_config,
)
from groupd.broker.topics import OFFSETS_TOPIC, TopicRegistry
from groupd.protocol.errors import ErrorCode
from groupd.protocol.messages import API_BY_NAME
from groupd.storage import Appender, LogConfig, LogManager, StorageError
from groupd.storage import records as rec

from groupd.config import Config
from tests.storage.test_storage_legacy import message_set, read_legacy

E = ErrorCode
NOW = 1_700_000_000_000


class FakeConn:
    def __init__(self) -> None:
        self.closed = False
        self.close_reason: str | None = None

    def close(self, reason: str, **fields: Any) -> None:
        self.closed = True
        self.close_reason = reason


class FakeRequest:
    def __init__(self, api: str, version: int, body: dict[str, Any], conn: FakeConn | None = None) -> None:
        self.api = API_BY_NAME[api]
        self.api_version = version
        # Round-trip the body through the codec so it looks exactly like a decoded request.
        self.body = self.api.request.codec(version).decode(self.api.request.codec(version).encode(body))
        self.client_id = "test"
        self.conn = conn or FakeConn()
        self.response: dict[str, Any] | None = None
        self.answered = asyncio.get_running_loop().create_future()
        self.silent = False

    def respond(self, response: dict[str, Any]) -> None:
        codec = self.api.response.codec(self.api_version)
        self.response = codec.decode(codec.encode(response))
        if not self.answered.done():
            self.answered.set_result(self.response)

    def no_response(self) -> None:
        self.silent = True
        if not self.answered.done():
            self.answered.set_result(None)


async def call(handler: Any, req: FakeRequest, timeout: float = 5.0) -> dict[str, Any] | None:
    result = handler(req)
    if inspect.isawaitable(result):
        result = await result
    if result is not None:
        req.respond(result)
    return await asyncio.wait_for(req.answered, timeout)


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Harness:
    def __init__(self, tmp: Path, clock: Clock | None = None, **config: Any) -> None:
        self.tmp = tmp
        self.clock = clock or Clock()
        self.config = Config(data_dir=str(tmp), **config)
        self.open()

    def open(self) -> None:
        self.topics = TopicRegistry(self.tmp)
        self.topics.load()
        self.logs = LogManager(self.tmp, LogConfig(), topic_config=self._topic_config, clock=self.clock)
        self.logs.open_all()
        self.appender = Appender("never")
        self.dp = DataPlane(
            self.config, self.topics, self.logs, self.appender, clock=self.clock, retention_check_interval_ms=0
        )
        self.dp.start()

    def _topic_config(self, topic: str) -> LogConfig | None:
        t = self.topics.get(topic)
        return topic_log_config(LogConfig(), t.configs) if t is not None and topic != OFFSETS_TOPIC else None

    async def restart(self) -> None:
        await self.dp.close()
        await self.appender.close()
        self.logs.close()
        self.open()

    def create(self, name: str, partitions: int = 1, **configs: str) -> None:
        t = self.topics.create(name, partitions, {k.replace("_", "."): v for k, v in configs.items()})
        self.dp.topic_created(t)

    async def produce(
        self,
        topic: str,
        batch: bytes | None,
        partition: int = 0,
        *,
        version: int = 9,
        acks: int = -1,
        conn: FakeConn | None = None,
        txn_id: str | None = None,
    ) -> dict[str, Any]:
        req = self.produce_request(topic, batch, partition, version=version, acks=acks, conn=conn, txn_id=txn_id)
        resp = await call(self.dp.produce, req)
        if resp is None:
            return {}
        return resp["responses"][0]["partition_responses"][0]

    def produce_request(
        self,
        topic: str,
        batch: bytes | None,
        partition: int = 0,
        *,
        version: int = 9,
        acks: int = -1,
        conn=None,
        txn_id: str | None = None,
    ) -> FakeRequest:
        body = {
            "transactional_id": txn_id,
            "acks": acks,
            "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        }
        return FakeRequest("Produce", version, body, conn)

    async def fetch(
        self,
        parts: list[tuple[str, int, int]],
        *,
        version: int = 12,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        isolation_level: int = 0,
        session_id: int = 0,
        session_epoch: int = -1,
        current_leader_epoch: int = -1,
    ) -> dict[str, Any]:
        req = self.fetch_request(
            parts,
            version=version,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            partition_max_bytes=partition_max_bytes,
            isolation_level=isolation_level,
            session_id=session_id,
            session_epoch=session_epoch,
            current_leader_epoch=current_leader_epoch,
        )
        resp = await call(self.dp.fetch, req)
        assert resp is not None
        return resp

    def fetch_request(self, parts, *, version=12, partition_max_bytes=1024 * 1024, current_leader_epoch=-1, **kw):
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, p, offset in parts:
            topics.setdefault(topic, []).append(
                {
                    "partition": p,
                    "fetch_offset": offset,
                    "partition_max_bytes": partition_max_bytes,
                    "current_leader_epoch": current_leader_epoch,
                    "log_start_offset": -1,
                    "last_fetched_epoch": -1,
                }
            )
        body = {
            "replica_id": -1,
            "max_wait_ms": kw.get("max_wait_ms", 0),
            "min_bytes": kw.get("min_bytes", 1),
            "max_bytes": kw.get("max_bytes", 50 * 1024 * 1024),
            "isolation_level": kw.get("isolation_level", 0),
            "session_id": kw.get("session_id", 0),
            "session_epoch": kw.get("session_epoch", -1),
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        return FakeRequest("Fetch", version, body)

    async def list_offsets(
        self, topic: str, partition: int, timestamp: int, version: int = 8, isolation_level: int = 0
    ) -> dict[str, Any]:
        body = {
            "replica_id": -1,
            "isolation_level": isolation_level,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}],
        }
        resp = await call(self.dp.list_offsets, FakeRequest("ListOffsets", version, body))
        assert resp is not None
        return resp["topics"][0]["partitions"][0]

    async def init_pid(self, version: int = 4, **body: Any) -> dict[str, Any]:
        b = {"transactional_id": None, "transaction_timeout_ms": 60000, **body}
        resp = await call(self.dp.init_producer_id, FakeRequest("InitProducerId", version, b))
        assert resp is not None
        return resp

    async def close(self) -> None:
        await self.dp.close()
        await self.appender.close()
        self.logs.close()


@pytest.fixture
async def h(tmp_path: Path):
    harness = Harness(tmp_path / "data")
    yield harness
    await harness.close()


def batch(
    values: list[bytes],
    *,
    keys: list[bytes | None] | None = None,
    ts: int = NOW,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    compression: int = rec.COMPRESSION_NONE,
    transactional: bool = False,
    control: bool = False,
    timestamps: list[int] | None = None,
) -> bytes:
    keys = keys or [None] * len(values)
    stamps = timestamps or [ts + i for i in range(len(values))]
    records = [(k, v, (), t) for k, v, t in zip(keys, values, stamps)]
    return rec.build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        compression=compression,
        transactional=transactional,
        control=control,
    )


def records_of(data: bytes) -> list[tuple]:
    return list(rec.iter_records(data))


def with_codec(raw: bytes, codec: int) -> bytes:
    """A batch re-labelled with another codec id (payload untouched) and a valid CRC."""
    buf = bytearray(raw)
    attrs = int.from_bytes(buf[21:23], "big")
    buf[21:23] = ((attrs & ~0x07) | codec).to_bytes(2, "big")
    buf[17:21] = rec.compute_crc(buf, 0, len(buf)).to_bytes(4, "big")
    return bytes(buf)


# --------------------------------------------------------------------------------------------
# Produce


async def test_produce_assigns_offsets_and_fetch_reads_them_back(h: Harness) -> None:
    h.create("t", 2)
    r1 = await h.produce("t", batch([b"a", b"b", b"c"]))
    r2 = await h.produce("t", batch([b"d"]))
    r3 = await h.produce("t", batch([b"x"]), partition=1)
    assert (r1["error_code"], r1["base_offset"], r1["log_start_offset"], r1["log_append_time_ms"]) == (0, 0, 0, -1)
    assert (r2["error_code"], r2["base_offset"]) == (0, 3)
    assert (r3["error_code"], r3["base_offset"]) == (0, 0)
    f = await h.fetch([("t", 0, 0), ("t", 1, 0)])
    p0, p1 = f["responses"][0]["partitions"]
    assert (p0["error_code"], p0["high_watermark"], p0["last_stable_offset"], p0["log_start_offset"]) == (0, 4, 4, 0)
    assert [(o, v) for o, _t, _k, v in records_of(p0["records"])] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert [v for *_, v in records_of(p1["records"])] == [b"x"]
    assert f["error_code"] == 0 and f["session_id"] == 0


async def test_an_answered_produce_leaves_no_reference_cycle(h: Harness) -> None:
    """A Produce's objects are freed by reference counting once it is answered: a cycle through
    the append's callbacks (Settled -> the request's callback -> its PendingAppend -> Settled) left
    them to the cyclic collector, whose young collections took ~7% of a small Produce's CPU."""
    h.create("t")
    await h.produce("t", batch([b"warm"]))
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            assert (await h.produce("t", batch([b"v"])))["error_code"] == 0
        gc.collect()
        cyclic = sorted({type(o).__name__ for o in gc.garbage if type(o).__module__.startswith("groupd")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert cyclic == []


@pytest.mark.parametrize("version", range(PRODUCE_VERSIONS[0], PRODUCE_VERSIONS[1] + 1))
async def test_produce_every_version(h: Harness, version: int) -> None:
    h.create("t")
    r = await h.produce("t", batch([b"v"]), version=version)
    assert r["error_code"] == 0 and r["base_offset"] == 0
    if version >= 8:
        assert r["record_errors"] == [] and r["error_message"] is None


async def test_log_append_time_topic(h: Harness) -> None:
    h.create("lat", message_timestamp_type="LogAppendTime")
    h.clock.now = NOW + 5000
    r = await h.produce("lat", batch([b"a", b"b"], ts=NOW - 10_000))
    assert r["log_append_time_ms"] == NOW + 5000
    data = (await h.fetch([("lat", 0, 0)]))["responses"][0]["partitions"][0]["records"]
    (view,) = rec.iter_batches(data)
    assert view.timestamp_type == rec.TIMESTAMP_LOG_APPEND_TIME
    assert view.crc_ok()
    assert [t for _o, t, _k, _v in records_of(data)] == [NOW + 5000, NOW + 5000]


async def test_create_time_topic_keeps_client_timestamps(h: Harness) -> None:
    h.create("ct")
    await h.produce("ct", batch([b"a", b"b"], ts=NOW - 10_000))
    data = (await h.fetch([("ct", 0, 0)]))["responses"][0]["partitions"][0]["records"]
    assert [t for _o, t, _k, _v in records_of(data)] == [NOW - 10_000, NOW - 9_999]


async def test_compressed_batch_is_stored_as_sent(h: Harness) -> None:
    h.create("z")
    raw = batch([b"x" * 1000] * 20, compression=rec.COMPRESSION_GZIP)
    assert len(raw) < 1000
    r = await h.produce("z", raw)
    assert r["error_code"] == 0
    data = (await h.fetch([("z", 0, 0)]))["responses"][0]["partitions"][0]["records"]
    # Only the broker-owned, CRC-free header bytes differ: base offset and partition leader epoch.
    assert data[16:] == raw[16:]
    assert [v for *_, v in records_of(data)] == [b"x" * 1000] * 20


async def test_codecs_without_a_local_library_are_stored_untouched(h: Harness) -> None:
    """lz4/snappy/zstd batches are stored as sent even when Python cannot decompress them."""
    h.create("codecs")
    for codec in (rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4, rec.COMPRESSION_ZSTD):
        raw = with_codec(batch([b"opaque"]), codec)
        r = await h.produce("codecs", raw)
        assert r["error_code"] == 0, codec
    data = (await h.fetch([("codecs", 0, 0)]))["responses"][0]["partitions"][0]["records"]
    assert [v.compression for v in rec.iter_batches(data)] == [2, 3, 4]


async def test_zstd_needs_produce_v7(h: Harness) -> None:
    h.create("t")
    raw = with_codec(batch([b"a"]), rec.COMPRESSION_ZSTD)
    r = await h.produce("t", raw, version=6)
    assert r["error_code"] == E.UNSUPPORTED_COMPRESSION_TYPE
    assert (await h.produce("t", raw, version=7))["error_code"] == 0
    r = await h.produce("t", with_codec(batch([b"a"]), 6), version=9)
    assert r["error_code"] == E.UNSUPPORTED_COMPRESSION_TYPE


async def test_corrupt_batch_is_refused_and_not_stored(h: Harness) -> None:
    h.create("t")
    raw = bytearray(batch([b"hello"]))
    raw[-3] ^= 0xFF
    r = await h.produce("t", bytes(raw))
    assert r["error_code"] == E.CORRUPT_MESSAGE and r["base_offset"] == -1
    assert "corrupt" in r["error_message"]
    assert h.logs.get("t", 0).log_end_offset == 0


async def test_batch_whose_records_do_not_fill_it_is_refused(h: Harness) -> None:
    """The CRC matches but the records end before the batch does: produced batches are framed in
    place, not decoded (issue 26), and this one is still refused and not stored."""
    h.create("t")
    raw = bytearray(batch([b"hello", b"world"]) + b"\x02\x00")
    raw[8:12] = (len(raw) - 12).to_bytes(4, "big")
    raw[rec.CRC_OFFSET : rec.CRC_OFFSET + 4] = rec.compute_crc(raw, 0, len(raw)).to_bytes(4, "big")
    r = await h.produce("t", bytes(raw))
    assert r["error_code"] == E.CORRUPT_MESSAGE and r["base_offset"] == -1
    assert h.logs.get("t", 0).log_end_offset == 0
    assert (await h.produce("t", batch([b"hello", b"world"])))["error_code"] == 0


async def test_malformed_batches_are_invalid_records(h: Harness) -> None:
    h.create("t")
    good = batch([b"a"])
    cases = {
        "none": None,
        "empty": b"",
        "two batches": good + good,
        "magic 1": good[:16] + b"\x01" + good[17:],
        "base offset": (5).to_bytes(8, "big") + good[8:],
        "control": batch([b"a"], control=True),
        "pid without sequence": batch([b"a"], pid=7, epoch=0, seq=-1),
    }
    for what, raw in cases.items():
        r = await h.produce("t", raw)
        assert r["error_code"] == E.INVALID_RECORD, what
        assert r["error_message"], what
    assert h.logs.get("t", 0).log_end_offset == 0


async def test_message_too_large_uses_topic_max_message_bytes(h: Harness) -> None:
    h.create("small", max_message_bytes="200")
    r = await h.produce("small", batch([b"x" * 300]))
    assert r["error_code"] == E.MESSAGE_TOO_LARGE
    assert "200" in r["error_message"]
    assert (await h.produce("small", batch([b"x" * 50])))["error_code"] == 0


async def test_unknown_topic_and_partition(h: Harness) -> None:
    h.create("t", 2)
    assert (await h.produce("nope", batch([b"a"])))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await h.produce("t", batch([b"a"]), partition=2))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await h.produce("t", batch([b"a"]), partition=-1))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_invalid_required_acks(h: Harness) -> None:
    h.create("t")
    r = await h.produce("t", batch([b"a"]), acks=2)
    assert r["error_code"] == E.INVALID_REQUIRED_ACKS
    assert h.logs.get("t", 0).log_end_offset == 0


async def test_internal_topic_is_not_writable(h: Harness) -> None:
    r = await h.produce(OFFSETS_TOPIC, batch([b"a"]))
    assert r["error_code"] == E.INVALID_TOPIC_EXCEPTION


async def test_transactional_batches_without_a_transactional_id_are_refused_for_the_whole_request(h: Harness) -> None:
    # KafkaApis.handleProduceRequest: hasTransactionalRecords needs the request's transactional id.
    h.create("t", 2)
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [
            {
                "name": "t",
                "partition_data": [
                    {"index": 0, "records": batch([b"a"], pid=1, epoch=0, seq=0, transactional=True)},
                    {"index": 1, "records": batch([b"b"])},
                ],
            }
        ],
    }
    resp = await call(h.dp.produce, FakeRequest("Produce", 9, body))
    codes = [p["error_code"] for p in resp["responses"][0]["partition_responses"]]
    assert codes == [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 2
    assert "transactional id" in resp["responses"][0]["partition_responses"][0]["error_message"]
    assert h.logs.get("t", 1).log_end_offset == 0


async def test_acks_zero_sends_nothing_and_closes_on_error(h: Harness) -> None:
    h.create("t")
    conn = FakeConn()
    req = h.produce_request("t", batch([b"a"]), acks=0, conn=conn)
    assert await call(h.dp.produce, req) is None
    assert req.silent and not conn.closed
    assert h.logs.get("t", 0).log_end_offset == 1
    req = h.produce_request("missing", batch([b"a"]), acks=0, conn=conn)
    await asyncio.wait_for(h.dp.produce(req), 5)
    assert conn.closed and "acks=0" in conn.close_reason


async def test_compacted_topic_needs_keys(h: Harness) -> None:
    h.create("c", cleanup_policy="compact")
    r = await h.produce("c", batch([b"a", b"b", b"c"], keys=[b"k", None, None]))
    assert r["error_code"] == E.INVALID_RECORD
    assert [e["batch_index"] for e in r["record_errors"]] == [1, 2]
    assert "without key" in r["record_errors"][0]["batch_index_error_message"]
    assert (await h.produce("c", batch([b"a"], keys=[b"k"])))["error_code"] == 0


async def test_timestamp_limits(h: Harness) -> None:
    h.create("ts", message_timestamp_before_max_ms="1000", message_timestamp_after_max_ms="1000")
    r = await h.produce("ts", batch([b"a", b"b", b"c"], timestamps=[NOW, NOW - 5000, NOW + 5000]))
    assert r["error_code"] == E.INVALID_TIMESTAMP
    assert [e["batch_index"] for e in r["record_errors"]] == [1, 2]
    assert (await h.produce("ts", batch([b"a"], ts=NOW - 500)))["error_code"] == 0


# --------------------------------------------------------------------------------------------
# idempotent producers


async def test_sequence_checks(h: Harness) -> None:
    h.create("t")

    async def send(seq: int, n: int = 1, epoch: int = 0, pid: int = 42) -> dict[str, Any]:
        return await h.produce("t", batch([b"v%d" % i for i in range(n)], pid=pid, epoch=epoch, seq=seq))

    assert (await send(0, 2))["base_offset"] == 0  # seqs 0-1
    assert (await send(2))["base_offset"] == 2
    r = await send(4)
    assert r["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "Out of order" in r["error_message"]
    assert (await send(3))["base_offset"] == 3
    # A retry of a cached batch gets the original offset back and writes nothing (Kafka answers NONE).
    end = h.logs.get("t", 0).log_end_offset
    r = await send(0, 2)
    assert (r["error_code"], r["base_offset"]) == (0, 0)
    assert h.logs.get("t", 0).log_end_offset == end
    # A partial overlap is not a duplicate.
    assert (await send(1, 1))["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    # Older epoch: fenced. New epoch: must start at 0.
    assert (await send(4, epoch=1))["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (await send(0, epoch=1))["error_code"] == 0
    r = await send(4, epoch=0)
    assert r["error_code"] == E.INVALID_PRODUCER_EPOCH
    # An unknown producer may start at any sequence (KIP-360).
    assert (await send(77, pid=43))["error_code"] == 0


async def test_only_the_last_five_batches_are_deduplicated(h: Harness) -> None:
    h.create("t")
    offsets = []
    for seq in range(7):
        r = await h.produce("t", batch([b"x"], pid=5, epoch=0, seq=seq))
        offsets.append(r["base_offset"])
    for seq in range(2, 7):
        r = await h.produce("t", batch([b"x"], pid=5, epoch=0, seq=seq))
        assert (r["error_code"], r["base_offset"]) == (0, offsets[seq])
    r = await h.produce("t", batch([b"x"], pid=5, epoch=0, seq=1))
    assert r["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert h.logs.get("t", 0).log_end_offset == 7


async def test_sequence_wraps_at_int32_max(h: Harness) -> None:
    h.create("t")
    top = 2**31 - 1
    assert (await h.produce("t", batch([b"a", b"b"], pid=9, epoch=0, seq=top - 1)))["error_code"] == 0
    assert (await h.produce("t", batch([b"c"], pid=9, epoch=0, seq=0)))["error_code"] == 0
    assert (await h.produce("t", batch([b"d", b"e", b"f"], pid=9, epoch=0, seq=top)))["error_code"] == (
        E.OUT_OF_ORDER_SEQUENCE_NUMBER
    )


async def test_retry_while_the_original_is_being_written(h: Harness) -> None:
    """Two identical batches in one loop iteration (a retry racing its original): one write."""
    h.create("t")
    raw = batch([b"a", b"b"], pid=3, epoch=0, seq=0)
    reqs = [h.produce_request("t", raw) for _ in range(2)]
    results = await asyncio.gather(*(call(h.dp.produce, r) for r in reqs))
    parts = [r["responses"][0]["partition_responses"][0] for r in results]
    assert [(p["error_code"], p["base_offset"]) for p in parts] == [(0, 0), (0, 0)]
    assert h.logs.get("t", 0).log_end_offset == 2


async def test_pipelined_batches_keep_their_order(h: Harness) -> None:
    h.create("t")
    reqs = [h.produce_request("t", batch([b"%d" % s], pid=1, epoch=0, seq=s)) for s in range(20)]
    results = await asyncio.gather(*(call(h.dp.produce, r) for r in reqs))
    assert [r["responses"][0]["partition_responses"][0]["base_offset"] for r in results] == list(range(20))


async def test_failed_write_is_taken_back_so_the_retry_is_in_sequence(h: Harness, monkeypatch) -> None:
    h.create("t")
    assert (await h.produce("t", batch([b"a"], pid=8, epoch=0, seq=0)))["error_code"] == 0
    real = h.appender.append_future
    calls = {"n": 0}

    def failing(plog, item, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(StorageError("disk on fire"))
            if kw.get("on_settled") is not None:  # as the appender settles a failed write
                asyncio.get_running_loop().call_soon(kw["on_settled"], fut)
            return fut
        return real(plog, item, **kw)

    # Produce queues its batches through append_future (no task per partition)
    monkeypatch.setattr(h.appender, "append_future", failing)
    r = await h.produce("t", batch([b"b"], pid=8, epoch=0, seq=1))
    assert r["error_code"] == E.KAFKA_STORAGE_ERROR
    r = await h.produce("t", batch([b"b"], pid=8, epoch=0, seq=1))
    assert (r["error_code"], r["base_offset"]) == (0, 1)


async def test_producer_state_survives_a_restart(tmp_path: Path) -> None:
    h = Harness(tmp_path / "data")
    try:
        h.create("t", 2)
        for seq in range(3):
            await h.produce("t", batch([b"a", b"b"], pid=11, epoch=2, seq=seq * 2), partition=1)
        await h.produce("t", batch([b"z"]), partition=1)  # a non-idempotent batch in between
        await h.restart()
        r = await h.produce("t", batch([b"a", b"b"], pid=11, epoch=2, seq=4), partition=1)
        assert (r["error_code"], r["base_offset"]) == (0, 4)  # duplicate found from the log
        assert h.logs.get("t", 1).log_end_offset == 7
        r = await h.produce("t", batch([b"c"], pid=11, epoch=2, seq=7), partition=1)
        assert r["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert (await h.produce("t", batch([b"c"], pid=11, epoch=1, seq=6), partition=1))["error_code"] == (
            E.INVALID_PRODUCER_EPOCH
        )
        r = await h.produce("t", batch([b"c"], pid=11, epoch=2, seq=6), partition=1)
        assert (r["error_code"], r["base_offset"]) == (0, 7)
    finally:
        await h.close()


async def test_batches_arriving_during_the_state_rebuild_keep_their_order(tmp_path: Path) -> None:
    h = Harness(tmp_path / "data")
    try:
        h.create("t")
        await h.produce("t", batch([b"a"], pid=4, epoch=0, seq=0))
        await h.restart()
        reqs = [h.produce_request("t", batch([b"%d" % s], pid=4, epoch=0, seq=s)) for s in range(0, 12)]
        results = await asyncio.gather(*(call(h.dp.produce, r) for r in reqs))
        offsets = [r["responses"][0]["partition_responses"][0]["base_offset"] for r in results]
        assert offsets == list(range(12))  # seq 0 is the duplicate of offset 0
        later = await h.produce("t", batch([b"x"], pid=4, epoch=0, seq=12))
        assert later["base_offset"] == 12
    finally:
        await h.close()


def test_producer_expiry_and_state_from_batches() -> None:
    views = [
        rec.BatchView(rec.build_batch([(None, b"a", (), 100)], producer_id=1, producer_epoch=0, base_sequence=0)),
        rec.BatchView(rec.build_batch([(None, b"a", (), 900)], producer_id=2, producer_epoch=3, base_sequence=5)),
    ]
    pp = PartitionProducers.from_batches(views)
    assert set(pp.producers) == {1, 2}
    assert pp.producers[2].epoch == 3 and pp.producers[2].batches[-1].last_seq == 5
    assert pp.expire(500) == 1
    assert set(pp.producers) == {2}


# --------------------------------------------------------------------------------------------
# InitProducerId


@pytest.mark.parametrize("version", range(INIT_PRODUCER_ID_VERSIONS[0], INIT_PRODUCER_ID_VERSIONS[1] + 1))
async def test_init_producer_id_versions(h: Harness, version: int) -> None:
    a = await h.init_pid(version)
    b = await h.init_pid(version)
    assert a["error_code"] == b["error_code"] == 0
    assert (a["producer_epoch"], b["producer_epoch"]) == (0, 0)
    assert b["producer_id"] == a["producer_id"] + 1


async def test_producer_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    h = Harness(tmp_path / "data")
    try:
        first = [(await h.init_pid())["producer_id"] for _ in range(3)]
        assert first == [0, 1, 2]
        await h.restart()
        after = (await h.init_pid())["producer_id"]
        assert after >= 1000  # the rest of the persisted block is skipped, never handed out twice
    finally:
        await h.close()


def test_producer_id_blocks_are_persisted_before_use(tmp_path: Path) -> None:
    m = ProducerIdManager(tmp_path / "ids", block=3)
    m.load()
    assert [m.allocate() for _ in range(4)] == [0, 1, 2, 3]
    assert (tmp_path / "ids").read_text().strip() == "6"
    m2 = ProducerIdManager(tmp_path / "ids", block=3)
    m2.load()
    assert m2.allocate() == 6


async def test_init_producer_id_with_existing_id_gets_a_new_one(h: Harness) -> None:
    a = await h.init_pid()
    b = await h.init_pid(producer_id=a["producer_id"], producer_epoch=0)
    assert b["error_code"] == 0 and b["producer_id"] != a["producer_id"] and b["producer_epoch"] == 0
    bad = await h.init_pid(producer_id=a["producer_id"], producer_epoch=-1)
    assert (bad["error_code"], bad["producer_id"], bad["producer_epoch"]) == (E.INVALID_REQUEST, -1, -1)


async def test_transactional_init_producer_id_is_refused(h: Harness) -> None:
    r = await h.init_pid(transactional_id="my-tx")
    assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    assert (await h.init_pid(transactional_id=""))["error_code"] == E.INVALID_REQUEST


# --------------------------------------------------------------------------------------------
# Produce v0-2 with message sets (magic 0/1): stored as Kafka 3.x's LogValidator stored them


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (2, 0)])
@pytest.mark.parametrize("codec", [rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP])
async def test_message_sets_are_up_converted_to_one_v2_batch(h: Harness, version: int, magic: int, codec: int) -> None:
    h.create("t")
    await h.produce("t", batch([b"first"]))
    sent = [(0, NOW, b"k0", b"v0"), (1, NOW + 7, None, b"v1")]
    r = await h.produce("t", message_set(magic, codec, sent), version=version)
    assert (r["error_code"], r["base_offset"]) == (0, 1)
    if version == 2:
        assert r["log_append_time_ms"] == -1
    data = (await h.fetch([("t", 0, 1)]))["responses"][0]["partitions"][0]["records"]
    (view,) = rec.iter_batches(data)
    view.validate()
    # convertAndAssignOffsetsNonCompressed / buildRecordsAndAssignOffsets: the source codec, offsets
    # assigned by the log, no producer id, the producer's timestamps (magic 0 has none: -1).
    assert (view.compression, view.base_offset, view.producer_id, view.record_count) == (codec, 1, -1, 2)
    ts = [NOW, NOW + 7] if magic == 1 else [-1, -1]
    assert records_of(data) == [(1, ts[0], b"k0", b"v0"), (2, ts[1], None, b"v1")]


async def test_message_sets_on_a_log_append_time_topic(h: Harness) -> None:
    h.create("lat", message_timestamp_type="LogAppendTime")
    r = await h.produce("lat", message_set(1, 0, [(0, 5, b"k", b"v")]), version=2)
    assert (r["error_code"], r["log_append_time_ms"]) == (0, NOW)
    f = await h.fetch([("lat", 0, 0)], version=2)
    assert read_legacy(f["responses"][0]["partitions"][0]["records"]) == [(1, 0, 0, NOW, b"k", b"v")]


async def test_bad_message_sets_get_kafkas_errors(h: Harness) -> None:
    h.create("t")
    h.create("c", cleanup_policy="compact")
    good = message_set(0, 0, [(0, None, b"k", b"v")])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    r = await h.produce("t", bytes(bad_crc), version=0)
    assert r["error_code"] == E.CORRUPT_MESSAGE
    r = await h.produce("c", message_set(0, 0, [(0, None, None, b"v")]), version=0)
    assert r["error_code"] == E.INVALID_RECORD  # "Compacted topic cannot accept message without key"
    assert (await h.produce("c", good, version=1))["error_code"] == 0
    # Produce v3+ must carry a v2 batch (ProduceRequest.validateRecords).
    r = await h.produce("t", good, version=3)
    assert r["error_code"] == E.INVALID_RECORD
    assert (await h.list_offsets("t", 0, -1))["offset"] == 0


async def test_timestamp_limits_apply_to_magic_1_not_magic_0(h: Harness) -> None:
    # LogValidator.validateTimestamp: only messages that have timestamps (magic > 0) are checked.
    h.create("t", message_timestamp_difference_max_ms="1000")
    r = await h.produce("t", message_set(1, 0, [(0, NOW - 5000, b"k", b"v")]), version=2)
    assert r["error_code"] == E.INVALID_TIMESTAMP
    assert (await h.produce("t", message_set(1, 0, [(0, NOW, b"k", b"v")]), version=2))["error_code"] == 0
    assert (await h.produce("t", message_set(0, 0, [(0, None, b"k", b"v")]), version=0))["error_code"] == 0


async def test_message_sets_never_look_transactional(h: Harness) -> None:
    # Byte 22 of a message set is a key or value length byte, not a batch's attributes.
    h.create("t")
    r = await h.produce("t", message_set(0, 0, [(0, None, b"\x10" * 8, b"v")]), version=0)
    assert r["error_code"] == 0


# --------------------------------------------------------------------------------------------
# Fetch


@pytest.mark.parametrize("version", range(FETCH_VERSIONS[0], FETCH_VERSIONS[1] + 1))
async def test_fetch_every_version(h: Harness, version: int) -> None:
    h.create("t")
    await h.produce("t", batch([b"a", b"b"]))
    f = await h.fetch([("t", 0, 1)], version=version)
    p = f["responses"][0]["partitions"][0]
    assert (p["error_code"], p["high_watermark"]) == (0, 2)
    if version <= 3:
        # Down-converted (KafkaApis: magic 0 for Fetch v0-1, magic 1 for v2-3), from the fetch offset on.
        assert read_legacy(p["records"]) == [
            (0 if version <= 1 else 1, 0, 1, NOW + 1 if version >= 2 else None, None, b"b")
        ]
    else:
        assert [v for o, _t, _k, v in records_of(p["records"]) if o >= 1] == [b"b"]


async def test_fetch_v0_3_down_converts_with_the_batch_codec(h: Harness) -> None:
    h.create("t")
    await h.produce("t", batch([b"a", b"b"], keys=[b"x", None], compression=rec.COMPRESSION_GZIP))
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        p = (await h.fetch([("t", 0, 1)], version=version))["responses"][0]["partitions"][0]
        assert read_legacy(p["records"]) == [(magic, rec.COMPRESSION_GZIP, 1, NOW + 1 if magic else None, None, b"b")]


async def test_fetch_below_v10_refuses_to_down_convert_zstd(h: Harness) -> None:
    h.create("t")
    await h.produce("t", with_codec(batch([b"a"]), rec.COMPRESSION_ZSTD), version=7)
    for version in (0, 3):
        p = (await h.fetch([("t", 0, 0)], version=version))["responses"][0]["partitions"][0]
        assert p["error_code"] == E.UNSUPPORTED_COMPRESSION_TYPE
    p = (await h.fetch([("t", 0, 0)], version=4))["responses"][0]["partitions"][0]
    assert p["error_code"] == 0 and p["records"]


async def test_long_poll_is_woken_by_an_append(h: Harness) -> None:
    h.create("t")
    req = h.fetch_request([("t", 0, 0)], max_wait_ms=10_000, min_bytes=1)
    t0 = time.monotonic()
    assert h.dp.fetch(req) is None  # parked
    await asyncio.sleep(0.05)
    assert not req.answered.done()
    await h.produce("t", batch([b"wake"]))
    resp = await asyncio.wait_for(req.answered, 2)
    assert time.monotonic() - t0 < 2
    assert [v for *_, v in records_of(resp["responses"][0]["partitions"][0]["records"])] == [b"wake"]
    assert not h.dp.fetch_handler.waiters


async def test_long_poll_waits_for_min_bytes(h: Harness) -> None:
    h.create("t", 2)
    one = batch([b"x" * 100])
    req = h.fetch_request([("t", 0, 0), ("t", 1, 0)], max_wait_ms=10_000, min_bytes=2 * len(one))
    assert h.dp.fetch(req) is None
    await h.produce("t", one, partition=0)
    await asyncio.sleep(0.01)
    assert not req.answered.done()
    await h.produce("t", one, partition=1)
    resp = await asyncio.wait_for(req.answered, 2)
    assert [len(p["records"]) for p in resp["responses"][0]["partitions"]] == [len(one), len(one)]


async def test_long_poll_woken_in_an_iteration_answers_every_append_of_it(h: Harness) -> None:
    """Appends to the parked fetch's partitions that arrive in one loop iteration wake it once, and
    its answer holds all of them, not just the first (DelayedFetch completes on min_bytes and reads
    the log as it is then: the appender writes what one iteration queued before waking anyone)."""
    h.create("t", 3)
    req = h.fetch_request([("t", 0, 0), ("t", 1, 0), ("t", 2, 0)], max_wait_ms=10_000, min_bytes=1)
    assert h.dp.fetch(req) is None
    answers = []
    req.answered.add_done_callback(lambda f: answers.append(f.result()))
    produced = [h.produce_request("t", batch([f"p{p}".encode()]), p) for p in range(3)]
    for r in produced:  # one iteration: no await in between (each answers later, from its append)
        assert h.dp.produce(r) is None
    await asyncio.wait_for(asyncio.gather(*(r.answered for r in produced)), 2)
    resp = await asyncio.wait_for(req.answered, 2)
    values = [[v for *_, v in records_of(p["records"])] for p in resp["responses"][0]["partitions"]]
    assert values == [[b"p0"], [b"p1"], [b"p2"]]
    await asyncio.sleep(0.01)
    assert len(answers) == 1 and not h.dp.fetch_handler.waiters


async def test_long_poll_times_out_empty(h: Harness) -> None:
    h.create("t")
    t0 = time.monotonic()
    f = await h.fetch([("t", 0, 0)], max_wait_ms=150, min_bytes=1)
    assert 0.12 < time.monotonic() - t0 < 2
    p = f["responses"][0]["partitions"][0]
    assert (p["error_code"], p["high_watermark"], p["records"]) == (0, 0, b"")


async def test_parked_fetch_answers_when_its_topic_is_deleted(h: Harness) -> None:
    h.create("gone")
    req = h.fetch_request([("gone", 0, 0)], max_wait_ms=10_000)
    assert h.dp.fetch(req) is None
    t = h.topics.delete("gone")
    h.dp.topic_deleted(t)
    resp = await asyncio.wait_for(req.answered, 2)
    assert resp["responses"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_errors_answer_a_long_poll_at_once(h: Harness) -> None:
    h.create("t")
    t0 = time.monotonic()
    f = await h.fetch([("t", 0, 0), ("missing", 0, 0)], max_wait_ms=10_000)
    assert time.monotonic() - t0 < 1
    (_t, missing) = f["responses"]
    assert missing["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert missing["partitions"][0]["high_watermark"] == -1


async def test_fetch_size_limits(h: Harness) -> None:
    h.create("t", 3)
    big = batch([b"x" * 5000])
    for p in range(3):
        await h.produce("t", big, partition=p)
        await h.produce("t", batch([b"y" * 10]), partition=p)
    # The first partition with data returns a whole batch even when it exceeds the limits...
    f = await h.fetch([("t", 0, 0), ("t", 1, 0), ("t", 2, 1)], partition_max_bytes=1000, max_bytes=1000)
    p0, p1, p2 = f["responses"][0]["partitions"]
    assert len(p0["records"]) == len(big)
    # ...later ones stay within what is left of max_bytes (nothing here).
    assert p1["records"] == b"" and p2["records"] == b""
    assert p1["high_watermark"] == 2
    # With room left, later partitions return whole batches up to partition_max_bytes.
    f = await h.fetch([("t", 0, 0), ("t", 2, 1)], partition_max_bytes=1000, max_bytes=100_000)
    p0, p2 = f["responses"][0]["partitions"]
    assert len(p0["records"]) == len(big)
    assert [v for *_, v in records_of(p2["records"])] == [b"y" * 10]


async def test_fetch_response_size_is_capped_by_the_broker(h: Harness, monkeypatch) -> None:
    import groupd.broker.data_plane.fetch as fetch_module

    monkeypatch.setattr(fetch_module, "FETCH_MAX_BYTES", 300)
    h.create("t", 2)
    one = batch([b"x" * 100])
    for _ in range(5):
        await h.produce("t", one, partition=0)
        await h.produce("t", one, partition=1)
    f = await h.fetch([("t", 0, 0), ("t", 1, 0)], max_bytes=2**31 - 1, partition_max_bytes=2**31 - 1)
    sizes = [len(p["records"]) for p in f["responses"][0]["partitions"]]
    assert sizes == [len(one), 0]  # 2 batches would exceed the cap; nothing is left for partition 1


async def test_offset_out_of_range(h: Harness) -> None:
    h.create("t")
    await h.produce("t", batch([b"a"]))
    f = await h.fetch([("t", 0, 5)], max_wait_ms=10_000)
    p = f["responses"][0]["partitions"][0]
    assert (p["error_code"], p["high_watermark"], p["log_start_offset"]) == (E.OFFSET_OUT_OF_RANGE, -1, -1)
    f = await h.fetch([("t", 0, -1)])
    assert f["responses"][0]["partitions"][0]["error_code"] == E.OFFSET_OUT_OF_RANGE
    f = await h.fetch([("t", 0, 1)])  # the log end itself is in range: empty
    assert (f["responses"][0]["partitions"][0]["error_code"], f["responses"][0]["partitions"][0]["records"]) == (0, b"")


async def test_read_committed(h: Harness) -> None:
    # Fetch sessions (in front of ``dp.fetch``): tests/broker/test_fetch_sessions_wire.py
    h.create("t")
    await h.produce("t", batch([b"a"]))
    f = await h.fetch([("t", 0, 0)], isolation_level=1)
    p = f["responses"][0]["partitions"][0]
    assert p["aborted_transactions"] == [] and p["last_stable_offset"] == 1
    f = await h.fetch([("t", 0, 0)], isolation_level=0)
    assert f["responses"][0]["partitions"][0]["aborted_transactions"] is None


async def test_fetch_leader_epoch_check(h: Harness) -> None:
    h.create("t")
    f = await h.fetch([("t", 0, 0)], current_leader_epoch=0)
    assert f["responses"][0]["partitions"][0]["error_code"] == 0
    f = await h.fetch([("t", 0, 0)], current_leader_epoch=3)
    assert f["responses"][0]["partitions"][0]["error_code"] == E.UNKNOWN_LEADER_EPOCH


# --------------------------------------------------------------------------------------------
# ListOffsets


@pytest.mark.parametrize("version", range(1, LIST_OFFSETS_VERSIONS[1] + 1))  # v0: old_style_offsets below
async def test_list_offsets(h: Harness, version: int) -> None:
    h.create("t")
    await h.produce("t", batch([b"a", b"b"], timestamps=[1000, 3000]))
    await h.produce("t", batch([b"c"], timestamps=[2000]))
    latest = await h.list_offsets("t", 0, -1, version)
    assert (latest["error_code"], latest["offset"], latest["timestamp"]) == (0, 3, -1)
    earliest = await h.list_offsets("t", 0, -2, version)
    assert earliest["offset"] == 0
    by_ts = await h.list_offsets("t", 0, 1500, version)
    assert (by_ts["offset"], by_ts["timestamp"]) == (1, 3000)
    by_ts = await h.list_offsets("t", 0, 3000, version)
    assert (by_ts["offset"], by_ts["timestamp"]) == (1, 3000)
    none = await h.list_offsets("t", 0, 4000, version)
    assert (none["error_code"], none["offset"], none["timestamp"]) == (0, -1, -1)
    if version >= 4:
        assert latest["leader_epoch"] == 0 and none["leader_epoch"] == -1
    if version >= 7:
        mx = await h.list_offsets("t", 0, -3, version)
        assert (mx["offset"], mx["timestamp"]) == (1, 3000)


async def test_list_offsets_v0_old_style_offsets(h: Harness) -> None:
    """UnifiedLog.legacyFetchOffsetsBefore: segment base offsets by last-modified time, plus the
    log end offset; newest first; at most max_num_offsets."""
    h.create("t", segment_bytes="100")
    for _ in range(3):
        await h.produce("t", batch([b"x" * 50]))
    plog = h.logs.get("t", 0)
    assert [s.base_offset for s in plog.segments] == [0, 1, 2]
    for i, seg in enumerate(plog.segments):
        os.utime(seg.log_path, ns=(0, (1000 + i * 1000) * 1_000_000))  # modified at 1000, 2000, 3000

    async def v0(timestamp: int, max_num: int, topic: str = "t", partition: int = 0) -> dict[str, Any]:
        body = {
            "replica_id": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "timestamp": timestamp, "max_num_offsets": max_num}],
                }
            ],
        }
        resp = await call(h.dp.list_offsets, FakeRequest("ListOffsets", 0, body))
        return resp["topics"][0]["partitions"][0]

    assert (await v0(-1, 1)) == {"partition_index": 0, "error_code": 0, "old_style_offsets": [3]}
    assert (await v0(-1, 10))["old_style_offsets"] == [3, 2, 1, 0]
    assert (await v0(-2, 10))["old_style_offsets"] == [0]
    assert (await v0(2500, 10))["old_style_offsets"] == [1, 0]
    assert (await v0(2500, 1))["old_style_offsets"] == [1]
    assert (await v0(500, 10))["old_style_offsets"] == []
    assert (await v0(NOW, 2))["old_style_offsets"] == [3, 2]
    assert (await v0(-1, 1, "nope"))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await v0(-1, 1, "t", 1))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    h.create("empty")
    assert (await v0(-1, 5, "empty"))["old_style_offsets"] == [0]  # an empty active segment adds nothing


async def test_list_offsets_edge_cases(h: Harness) -> None:
    h.create("t")
    assert (await h.list_offsets("t", 0, -3))["offset"] == -1
    assert (await h.list_offsets("t", 0, -1))["offset"] == 0
    assert (await h.list_offsets("t", 0, -4))["offset"] == 0
    assert (await h.list_offsets("t", 1, -1))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await h.list_offsets("nope", 0, -1))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}] * 2}],
    }
    resp = await call(h.dp.list_offsets, FakeRequest("ListOffsets", 8, body))
    assert [p["error_code"] for p in resp["topics"][0]["partitions"]] == [E.INVALID_REQUEST] * 2


# --------------------------------------------------------------------------------------------
# topics, configs, retention


def test_topic_log_config() -> None:
    base = LogConfig()
    cfg = topic_log_config(
        base,
        {
            "retention.ms": "-1",
            "retention.bytes": "1000",
            "segment.bytes": "4096",
            "cleanup.policy": "delete,compact",
            "message.timestamp.type": "LogAppendTime",
            "max.message.bytes": "2048",
            "segment.ms": "60000",
        },
    )
    assert cfg.retention_ms is None and cfg.retention_bytes == 1000 and cfg.segment_bytes == 4096
    assert cfg.cleanup_policy == "compact,delete" and cfg.compact and cfg.delete
    assert cfg.message_timestamp_type == "LogAppendTime" and cfg.max_message_bytes == 2048 and cfg.segment_ms == 60000
    assert topic_log_config(base, {}) is base
    assert topic_log_config(base, {"segment.bytes": "1", "retention.ms": "soon", "cleanup.policy": "x"}) == base


async def test_topic_lifecycle_creates_and_deletes_logs(h: Harness) -> None:
    h.create("life", 2)
    assert h.logs.partitions("life") == [("life", 0), ("life", 1)]
    t = h.topics.add_partitions("life", 4)
    h.dp.partitions_added(t, 2)
    assert len(h.logs.partitions("life")) == 4
    await h.produce("life", batch([b"a"]), partition=3)
    t = h.topics.delete("life")
    h.dp.topic_deleted(t)
    assert h.logs.partitions("life") == []
    assert not any(p.name.startswith("life-") for p in h.tmp.iterdir())
    assert (await h.produce("life", batch([b"a"])))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_stray_logs_are_removed_at_start(tmp_path: Path) -> None:
    h = Harness(tmp_path / "data")
    try:
        h.create("keep", 1)
        h.logs.get_or_create("orphan", 0)
        h.logs.get_or_create("keep", 5)
        await h.restart()
        assert h.logs.partitions("orphan") == [] and h.logs.partitions("keep") == [("keep", 0)]
    finally:
        await h.close()


async def test_retention_from_topic_configs(h: Harness) -> None:
    h.create("r", retention_ms="60000", segment_bytes="200")
    for i in range(5):
        await h.produce("r", batch([b"x" * 100], ts=NOW + i))
    plog = h.logs.get("r", 0)
    assert len(plog.segments) >= 4
    h.clock.now = NOW + 120_000
    await h.dp.run_maintenance()
    assert plog.log_start_offset > 0
    f = await h.fetch([("r", 0, 0)])
    assert f["responses"][0]["partitions"][0]["error_code"] == E.OFFSET_OUT_OF_RANGE
    assert (await h.list_offsets("r", 0, -2))["offset"] == plog.log_start_offset


async def test_responses_for_every_version_through_the_codec(h: Harness) -> None:
    """Every advertised version of every data-plane API answers with an encodable response."""
    h.create("t")
    for v in range(PRODUCE_VERSIONS[0], PRODUCE_VERSIONS[1] + 1):
        assert (await h.produce("nope", batch([b"a"]), version=v))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    for v in range(FETCH_VERSIONS[0], FETCH_VERSIONS[1] + 1):
        f = await h.fetch([("nope", 0, 0)], version=v)
        assert f["responses"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    for v in range(LIST_OFFSETS_VERSIONS[0], LIST_OFFSETS_VERSIONS[1] + 1):
        assert (await h.list_offsets("nope", 0, -1, v))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
