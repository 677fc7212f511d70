"""Fetch sessions (KIP-227) on the wire, against a real daemon: a full fetch at epoch 0 opens a
session, incremental fetches answer only the partitions that changed (Kafka's
``CachedPartition.maybeUpdateResponseData``), FETCH_SESSION_ID_NOT_FOUND and
INVALID_FETCH_SESSION_EPOCH come back with no partitions, epoch -1 closes, a session outlives its
connection, a parked incremental fetch answers what changed, unknown partitions stay in the session
and answer their error each time, and ``--max-incremental-fetch-session-cache-slots 0`` answers
every Fetch sessionless. ACLs and cluster mode: test_fetch_sessions_acl_cluster.py.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from groupd.protocol.errors import ErrorCode
from groupd.storage import records as rec
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient

from .test_fetch_parking import free_port

pytestmark = pytest.mark.e2e

E = ErrorCode
V = 12  # the highest Fetch version groupd serves
Parts = dict[tuple[str, int], int]  # (topic, partition) -> fetch offset


def fetch(
    c: RawClient,
    session_id: int,
    epoch: int,
    parts: Parts,
    *,
    forget: list[tuple[str, int]] = (),  # type: ignore[assignment]
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    send_only: bool = False,
) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), offset in parts.items():
        topics.setdefault(t, []).append(
            {
                "partition": p,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
            }
        )
    forgotten: dict[str, list[int]] = {}
    for t, p in forget:
        forgotten.setdefault(t, []).append(p)
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
        "rack_id": "",
    }
    if send_only:
        return c.send("Fetch", V, body)
    return c.request("Fetch", V, body)


def answered(resp: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(t["topic"], p["partition_index"]): p for t in resp["responses"] for p in t["partitions"]}


def create_topic(c: RawClient, name: str, partitions: int) -> None:
    r = c.request(
        "CreateTopics",
        5,
        {
            "topics": [
                {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
            ],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    )
    assert r["topics"][0]["error_code"] == 0, r


def produce(c: RawClient, topic: str, partition: int, *values: bytes) -> int:
    records = [(None, v, (), 1_700_000_000_000 + i) for i, v in enumerate(values)]
    r = c.request(
        "Produce",
        9,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": rec.build_batch(records)}]}
            ],
        },
    )
    p = r["responses"][0]["partition_responses"][0]
    assert p["error_code"] == 0, p
    return int(p["base_offset"])


def session_requests(metrics_port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "groupd_fetch_session_requests_total":
                out[s.labels["context"]] = s.value
            elif s.name in ("groupd_fetch_sessions", "groupd_fetch_session_partitions"):
                out[s.name] = s.value
    return out


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GroupdProcess, int]]:
    port = free_port()
    d = GroupdProcess(tmp_path_factory.mktemp("fetch-sessions") / "data", "--metrics-port", str(port)).start()
    try:
        yield d, port
    finally:
        d.stop()


@pytest.fixture
def client(daemon: tuple[GroupdProcess, int]) -> Iterator[RawClient]:
    c = RawClient(daemon[0].port)
    yield c
    c.close()


@pytest.fixture
def topic(client: RawClient) -> str:
    name = f"fs-{uuid.uuid4().hex[:8]}"
    create_topic(client, name, 3)
    return name


def test_incremental_fetches_answer_only_what_changed(client: RawClient, topic: str, daemon: Any) -> None:
    before = session_requests(daemon[1])
    p0, p1, p2 = ((topic, i) for i in range(3))
    produce(client, topic, 0, b"a", b"b")
    full = fetch(client, 0, 0, {p0: 0, p1: 0, p2: 0})
    sid = full["session_id"]
    assert (full["error_code"], sid != 0) == (0, True)
    got = answered(full)
    assert set(got) == {p0, p1, p2}  # a full answer: every partition
    assert (got[p0]["high_watermark"], bool(got[p0]["records"])) == (2, True)
    # The client moves p0's position on; nothing else changed: an empty answer.
    r = fetch(client, sid, 1, {p0: 2})
    assert (r["error_code"], r["session_id"], answered(r)) == (0, sid, {})
    produce(client, topic, 1, b"c")
    r = fetch(client, sid, 2, {})
    assert list(answered(r)) == [p1]
    assert answered(r)[p1]["high_watermark"] == 1 and answered(r)[p1]["records"]
    # p1's position is not moved on: its records come again, though its high watermark did not change
    r = fetch(client, sid, 3, {})
    assert list(answered(r)) == [p1] and answered(r)[p1]["records"]
    r = fetch(client, sid, 4, {p1: 1})
    assert answered(r) == {}
    # p2 forgotten: its new data is not answered
    r = fetch(client, sid, 5, {}, forget=[p2])
    assert answered(r) == {}
    produce(client, topic, 2, b"d")
    produce(client, topic, 0, b"e")
    r = fetch(client, sid, 6, {})
    assert list(answered(r)) == [p0]
    # and added again: answered in full once
    r = fetch(client, sid, 7, {p2: 0, p0: 3})
    assert list(answered(r)) == [p2] and answered(r)[p2]["high_watermark"] == 1
    after = session_requests(daemon[1])
    assert after["incremental"] - before["incremental"] == 7
    assert after["full"] - before["full"] == 1


def test_session_errors_carry_no_partitions(client: RawClient, topic: str) -> None:
    p0 = (topic, 0)
    r = fetch(client, 12345, 1, {p0: 0})
    assert (r["error_code"], r["session_id"], r["responses"]) == (E.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    r = fetch(client, 0, 4, {p0: 0})  # an incremental epoch without a session
    assert r["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND
    sid = fetch(client, 0, 0, {p0: 0})["session_id"]
    for wrong in (2, 7, -2):
        r = fetch(client, sid, wrong, {p0: 0})
        assert (r["error_code"], r["session_id"], r["responses"]) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert fetch(client, sid, 1, {})["error_code"] == 0  # the wrong epochs did not move it on
    r = fetch(client, sid, 1, {})  # the same epoch again (a duplicate request)
    assert r["error_code"] == E.INVALID_FETCH_SESSION_EPOCH
    assert fetch(client, sid, 2, {})["error_code"] == 0


def test_epoch_minus_one_closes_and_epoch_zero_replaces(client: RawClient, topic: str) -> None:
    p0 = (topic, 0)
    sid = fetch(client, 0, 0, {p0: 0})["session_id"]
    r = fetch(client, sid, -1, {p0: 0})  # closes the session, answers sessionless
    assert (r["error_code"], r["session_id"], list(answered(r))) == (0, 0, [p0])
    assert fetch(client, sid, 1, {})["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND
    a = fetch(client, 0, 0, {p0: 0})["session_id"]
    b = fetch(client, a, 0, {p0: 0})["session_id"]  # a full fetch naming a session closes it
    assert a != b and b != 0
    assert fetch(client, a, 1, {})["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(client, b, 1, {})["error_code"] == 0
    # forgetting every partition closes the session: answered sessionless
    r = fetch(client, b, 2, {}, forget=[p0])
    assert (r["error_code"], r["session_id"], r["responses"]) == (0, 0, [])
    assert fetch(client, b, 3, {})["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_outlives_its_connection(daemon: Any, topic: str) -> None:
    a = RawClient(daemon[0].port)
    sid = fetch(a, 0, 0, {(topic, 0): 0})["session_id"]
    a.close()
    b = RawClient(daemon[0].port)
    try:
        r = fetch(b, sid, 1, {})
        assert (r["error_code"], r["session_id"]) == (0, sid)
    finally:
        b.close()


def test_a_parked_incremental_fetch_answers_the_partition_that_changed(daemon: Any, topic: str) -> None:
    c, other = RawClient(daemon[0].port, timeout=30), RawClient(daemon[0].port)
    try:
        parts = {(topic, i): 0 for i in range(3)}
        sid = fetch(c, 0, 0, parts)["session_id"]
        assert answered(fetch(c, sid, 1, {})) == {}
        corr = fetch(c, sid, 2, {}, max_wait_ms=30_000, min_bytes=1, send_only=True)  # parks
        produce(other, topic, 2, b"x")  # wakes it
        r = c.receive("Fetch", V, corr)
        assert (r["error_code"], r["session_id"], list(answered(r))) == (0, sid, [(topic, 2)])
        assert answered(r)[(topic, 2)]["records"]
    finally:
        c.close()
        other.close()


def test_unknown_partitions_stay_in_the_session_and_answer_their_error(client: RawClient, topic: str) -> None:
    missing = (f"missing-{uuid.uuid4().hex[:6]}", 0)
    beyond = (topic, 7)
    sid = fetch(client, 0, 0, {(topic, 0): 0, missing: 0, beyond: 0})["session_id"]
    for epoch in (1, 2):
        r = fetch(client, sid, epoch, {})
        assert {k: p["error_code"] for k, p in answered(r).items()} == {
            missing: E.UNKNOWN_TOPIC_OR_PARTITION,
            beyond: E.UNKNOWN_TOPIC_OR_PARTITION,
        }


def test_no_slots_means_sessionless(tmp_path: Path) -> None:
    d = GroupdProcess(tmp_path / "data", "--max-incremental-fetch-session-cache-slots", "0").start()
    c = RawClient(d.port)
    try:
        create_topic(c, "t", 1)
        r = fetch(c, 0, 0, {("t", 0): 0})
        assert (r["error_code"], r["session_id"], list(answered(r))) == (0, 0, [("t", 0)])
        assert fetch(c, 1, 1, {})["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND
    finally:
        c.close()
        d.stop()


def test_a_full_cache_evicts_by_kafkas_rules(tmp_path: Path) -> None:
    # 8 slots: one session per shard (Kafka's 8 shards), sessions handed out round robin. With an
    # eviction time of 0 a session unused for a millisecond is stale: the ninth session, in the
    # first one's shard, evicts it; with the default two minutes it is refused (session id 0).
    port = free_port()
    d = GroupdProcess(
        tmp_path / "data",
        "--max-incremental-fetch-session-cache-slots",
        "8",
        "--min-incremental-fetch-session-eviction-ms",
        "0",
        "--metrics-port",
        str(port),
    ).start()
    c = RawClient(d.port)
    try:
        create_topic(c, "t", 1)
        sids = [fetch(c, 0, 0, {("t", 0): 0})["session_id"] for _ in range(8)]
        assert 0 not in sids and len(set(sids)) == 8
        time.sleep(0.01)  # the daemon's clock moves past the first session's last use: it is stale
        ninth = fetch(c, 0, 0, {("t", 0): 0})["session_id"]
        assert ninth != 0
        assert fetch(c, sids[0], 1, {})["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND
        assert fetch(c, ninth, 1, {})["error_code"] == 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert "groupd_fetch_session_evictions_total 1.0" in text
        assert "groupd_fetch_sessions 8.0" in text
    finally:
        c.close()
        d.stop()
    d = GroupdProcess(tmp_path / "data2", "--max-incremental-fetch-session-cache-slots", "8").start()
    c = RawClient(d.port)
    try:
        create_topic(c, "t", 1)
        sids = [fetch(c, 0, 0, {("t", 0): 0})["session_id"] for _ in range(8)]
        assert 0 not in sids
        assert fetch(c, 0, 0, {("t", 0): 0})["session_id"] == 0  # no room: sessionless
        assert all(fetch(c, s, 1, {})["error_code"] == 0 for s in sids)
    finally:
        c.close()
        d.stop()


def test_a_parked_fetch_overtaken_by_its_sessions_next_answers_invalid_epoch(daemon: Any, topic: str) -> None:
    # IncrementalFetchContext.updateAndGenerateResponseData: the session's epoch moved on while the
    # fetch was parked ("possible duplicate request"): INVALID_FETCH_SESSION_EPOCH, the session's id,
    # no partitions. The later request is served as usual.
    a, b, other = (RawClient(daemon[0].port, timeout=30) for _ in range(3))
    try:
        sid = fetch(a, 0, 0, {(topic, 0): 0})["session_id"]
        corr = fetch(a, sid, 1, {}, max_wait_ms=30_000, min_bytes=1, send_only=True)  # parks
        r = fetch(b, sid, 2, {})  # the next epoch, on another connection
        assert (r["error_code"], r["session_id"]) == (0, sid)
        produce(other, topic, 0, b"x")  # wakes the parked one
        r = a.receive("Fetch", V, corr)
        assert (r["error_code"], r["session_id"], r["responses"]) == (E.INVALID_FETCH_SESSION_EPOCH, sid, [])
        r = fetch(b, sid, 3, {})
        assert (r["error_code"], list(answered(r))) == (0, [(topic, 0)])
    finally:
        for c in (a, b, other):
            c.close()
