"""ShareFetch (78) and ShareAcknowledge (79) on the wire against a real daemon: every version, share
sessions and their errors, acquisition, acknowledgement, lock expiry, Kafka's answers to bad input
(``KafkaApis.handleShareFetchRequest`` / ``handleShareAcknowledgeRequest``, ``SharePartition``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from groupd.protocol.errors import ErrorCode
from groupd.storage import records as rec

from tests.support.daemon import GroupdProcess
from tests.support.share import join
from tests.support.wire import Wire

LOCK_MS = 1500


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    d = GroupdProcess(
        Path(tmp_path_factory.mktemp("share")) / "data",
        "--group-share-record-lock-duration-ms",
        str(LOCK_MS),
        "--group-share-delivery-count-limit",
        "3",
        "--group-share-max-share-sessions",
        "50",
    )
    d.start()
    try:
        yield d
    finally:
        d.stop()


def _call(w: Wire, name: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
    w.pipeline((name, version, body))
    got, answer = w.read()
    assert got == name
    return answer


def _topic(
    d: GroupdProcess, n: int, partitions: int = 1, *, batch_each: bool = False, group: str | None = None
) -> tuple[str, uuid.UUID]:
    """A new topic with ``n`` records; with ``group``, a member of it has joined and been assigned
    the topic (the group coordinator initialized its share-partitions)."""
    name = "share-" + uuid.uuid4().hex[:8]
    with Wire(d.port) as w:
        w.create_topic(name, partitions)
        md = _call(
            w,
            "Metadata",
            12,
            {
                "topics": [{"topic_id": uuid.UUID(int=0), "name": name}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    tid = md["topics"][0]["topic_id"]
    p = Producer({"bootstrap.servers": d.bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(name, value=f"v{i}".encode(), partition=i % partitions)
        if batch_each:
            p.flush(10)
    assert p.flush(10) == 0
    if group is not None:
        join(d.port, group, name)
    return name, tid


def _fetch(
    member: str,
    epoch: int,
    tid: uuid.UUID | None = None,
    acks: list[tuple[int, int, list[int]]] | None = None,
    *,
    group: str = "g",
    version: int = 1,
    max_records: int = 500,
    max_wait_ms: int = 0,
    partitions: tuple[int, ...] = (0,),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": max_records,
        "batch_size": 500,
        "topics": [],
        "forgotten_topics_data": [],
    }
    if tid is not None:
        body["topics"] = [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition_index": p,
                        "acknowledgement_batches": [
                            {"first_offset": a, "last_offset": b, "acknowledge_types": t} for a, b, t in (acks or [])
                        ],
                    }
                    for p in partitions
                ],
            }
        ]
    return body


def _ack(
    member: str,
    epoch: int,
    tid: uuid.UUID,
    acks: list[tuple[int, int, list[int]]],
    group: str = "g",
    partition: int = 0,
) -> dict[str, Any]:
    return {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition_index": partition,
                        "acknowledgement_batches": [
                            {"first_offset": a, "last_offset": b, "acknowledge_types": t} for a, b, t in acks
                        ],
                    }
                ],
            }
        ],
    }


def _acquired(answer: dict[str, Any]) -> list[tuple[int, int, int]]:
    assert answer["error_code"] == 0, answer
    out = []
    for t in answer["responses"]:
        for p in t["partitions"]:
            assert p["error_code"] == 0, p
            out += [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p["acquired_records"]]
    return out


def _values(answer: dict[str, Any]) -> list[bytes]:
    out = []
    for t in answer["responses"]:
        for p in t["partitions"]:
            for b in rec.iter_batches(p["records"] or b""):
                out += [r.value for r in b.records()]
    return out


def _earliest(d: GroupdProcess, group: str, reset: str = "earliest") -> None:
    """share.auto.offset.reset=earliest for ``group`` (IncrementalAlterConfigs on the group)."""
    with Wire(d.port) as w:
        r = _call(
            w,
            "IncrementalAlterConfigs",
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [{"name": "share.auto.offset.reset", "config_operation": 0, "value": reset}],
                    }
                ],
                "validate_only": False,
            },
        )
    assert r["responses"][0]["error_code"] == 0, r


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_acquires_and_accept_is_final(daemon: GroupdProcess, version: int) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _earliest(daemon, group)
    _name, tid = _topic(daemon, 10, group=group)
    with Wire(daemon.port) as w:
        first = _call(w, "ShareFetch", version, _fetch("m1", 0, tid, group=group, version=version))
        assert first["acquisition_lock_timeout_ms"] == LOCK_MS
        assert _acquired(first) == [(0, 9, 1)]
        assert _values(first) == [f"v{i}".encode() for i in range(10)]
        # a second member gets nothing: everything is acquired
        with Wire(daemon.port) as w2:
            other = _call(w2, "ShareFetch", version, _fetch("m2", 0, tid, group=group, version=version))
            assert _acquired(other) == []
        acked = _call(w, "ShareAcknowledge", version, _ack("m1", 1, tid, [(0, 9, [1])], group=group))
        assert acked["error_code"] == 0
        assert acked["responses"][0]["partitions"][0]["error_code"] == 0
        time.sleep(LOCK_MS / 1000 + 0.5)
        again = _call(w, "ShareFetch", version, _fetch("m1", 2, group=group, version=version))
        assert _acquired(again) == []


def test_release_redelivers_and_reject_archives(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _earliest(daemon, group)
    _name, tid = _topic(daemon, 4, group=group)
    with Wire(daemon.port) as w, Wire(daemon.port) as w2:
        assert _acquired(_call(w, "ShareFetch", 1, _fetch("a", 0, tid, group=group))) == [(0, 3, 1)]
        # per-offset types: 0 accept, 1 release, 2 reject, 3 release; piggybacked on the next fetch
        r = _call(w, "ShareFetch", 1, _fetch("a", 1, tid, [(0, 3, [1, 2, 3, 2])], group=group))
        assert r["responses"][0]["partitions"][0]["acknowledge_error_code"] == 0
        # the released offsets 1 and 3 went to "a" again in that same fetch, delivery count 2
        assert _acquired(r) == [(1, 1, 2), (3, 3, 2)]
        # "b" may not acknowledge what "a" holds
        _call(w2, "ShareFetch", 1, _fetch("b", 0, tid, group=group))
        bad = _call(w2, "ShareAcknowledge", 1, _ack("b", 1, tid, [(1, 1, [1])], group=group))
        assert bad["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_RECORD_STATE
        # an acknowledgement of the accepted offset 0 again: not acquired any more
        again = _call(w, "ShareAcknowledge", 1, _ack("a", 2, tid, [(1, 1, [1]), (3, 3, [1])], group=group))
        assert again["responses"][0]["partitions"][0]["error_code"] == 0


def test_lock_expiry_redelivers_until_the_delivery_limit(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _earliest(daemon, group)
    _name, tid = _topic(daemon, 1, group=group)
    with Wire(daemon.port) as w:
        counts = []
        for epoch in range(4):
            body = _fetch("m", epoch, tid if epoch == 0 else None, group=group, max_wait_ms=LOCK_MS * 2)
            counts += [c for _a, _b, c in _acquired(_call(w, "ShareFetch", 1, body))]
        # delivered 3 times (the limit), then archived: the fourth fetch waits and gets nothing
        assert counts == [1, 2, 3]


def test_session_errors(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _name, tid = _topic(daemon, 1)
    with Wire(daemon.port) as w:
        assert _call(w, "ShareFetch", 1, _fetch("x", 5, group=group))["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert (
            _call(w, "ShareFetch", 1, _fetch("x", -1, group=group))["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
        )
        assert _call(w, "ShareFetch", 1, _fetch("", 0, tid, group=group))["error_code"] == ErrorCode.INVALID_REQUEST
        assert (
            _call(w, "ShareFetch", 1, _fetch("x" * 37, 0, tid, group=group))["error_code"] == ErrorCode.INVALID_REQUEST
        )
        # acknowledgements in an opening request
        r = _call(w, "ShareFetch", 1, _fetch("x", 0, tid, [(0, 0, [1])], group=group))
        assert r["error_code"] == ErrorCode.INVALID_REQUEST
        assert _call(w, "ShareFetch", 1, _fetch("x", 0, tid, group=group))["error_code"] == 0
        assert (
            _call(w, "ShareFetch", 1, _fetch("x", 3, group=group))["error_code"]
            == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        )
        assert _call(w, "ShareFetch", 1, _fetch("x", 1, group=group))["error_code"] == 0
        ack0 = _call(w, "ShareAcknowledge", 1, _ack("x", 0, tid, [(0, 0, [1])], group=group))
        assert ack0["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert _call(w, "ShareAcknowledge", 1, _ack("y", 1, tid, [(0, 0, [1])], group=group))["error_code"] == (
            ErrorCode.SHARE_SESSION_NOT_FOUND
        )
        # epoch -1 closes the session; then it is gone
        assert _call(w, "ShareFetch", 1, _fetch("x", -1, group=group))["error_code"] == 0
        assert _call(w, "ShareFetch", 1, _fetch("x", 2, group=group))["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_unknown_topic_id_and_partition(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _name, tid = _topic(daemon, 1)
    with Wire(daemon.port) as w:
        r = _call(w, "ShareFetch", 1, _fetch("m", 0, uuid.uuid4(), group=group))
        assert r["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        r = _call(w, "ShareFetch", 1, _fetch("n", 0, tid, group=group, partitions=(7,)))
        assert r["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        r = _call(w, "ShareAcknowledge", 1, _ack("n", 1, uuid.uuid4(), [(0, 0, [1])], group=group))
        assert r["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_bad_acknowledgement_batches(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _earliest(daemon, group)
    _name, tid = _topic(daemon, 3, group=group)
    with Wire(daemon.port) as w:
        assert _acquired(_call(w, "ShareFetch", 1, _fetch("m", 0, tid, group=group))) == [(0, 2, 1)]
        cases = [
            [(2, 1, [1])],  # first > last
            [(0, 2, [1, 1])],  # wrong number of types
            [(0, 0, [9])],  # unknown type
            [(0, 0, [4])],  # RENEW without is_renew_ack
            [(1, 1, [1]), (0, 0, [1])],  # out of order
            [(0, 5, [1])],  # past what was acquired
        ]
        epoch = 1
        for acks in cases:
            r = _call(w, "ShareAcknowledge", 1, _ack("m", epoch, tid, acks, group=group))
            epoch += 1
            assert r["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REQUEST, acks
        # nothing of a refused request was applied: all three are still acquired by "m"
        r = _call(w, "ShareAcknowledge", 1, _ack("m", epoch, tid, [(0, 2, [1])], group=group))
        assert r["responses"][0]["partitions"][0]["error_code"] == 0


def test_renew_keeps_the_lock(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _earliest(daemon, group)
    _name, tid = _topic(daemon, 2, group=group)
    with Wire(daemon.port) as w, Wire(daemon.port) as w2:
        assert _acquired(_call(w, "ShareFetch", 2, _fetch("m", 0, tid, group=group, version=2))) == [(0, 1, 1)]
        for epoch in (1, 2, 3):
            time.sleep(LOCK_MS / 2000)
            body = _ack("m", epoch, tid, [(0, 1, [4])], group=group)
            body["is_renew_ack"] = True
            r = _call(w, "ShareAcknowledge", 2, body)
            assert r["responses"][0]["partitions"][0]["error_code"] == 0
            assert r["acquisition_lock_timeout_ms"] == LOCK_MS
        # 1.5 lock durations later the records are still "m"'s
        assert _acquired(_call(w2, "ShareFetch", 2, _fetch("o", 0, tid, group=group, version=2))) == []
        assert (
            _call(w, "ShareAcknowledge", 2, _ack("m", 4, tid, [(0, 1, [1])], group=group))["responses"][0][
                "partitions"
            ][0]["error_code"]
            == 0
        )


def test_long_poll_is_woken_by_an_append(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    name, tid = _topic(daemon, 0, group=group)
    with Wire(daemon.port) as w:
        # the opening fetch initializes the share-partition at the end of the log (latest)
        assert _acquired(_call(w, "ShareFetch", 1, _fetch("m", 0, tid, group=group))) == []
        w.pipeline(("ShareFetch", 1, _fetch("m", 1, group=group, max_wait_ms=30_000)))
        time.sleep(0.3)
        p = Producer({"bootstrap.servers": daemon.bootstrap})
        p.produce(name, value=b"late")
        assert p.flush(10) == 0
        _, r = w.read()  # answered by the append, long before 30 s (the socket times out at 10 s)
        assert _acquired(r) == [(0, 0, 1)]
        assert _values(r) == [b"late"]


def test_session_limit(tmp_path: Path) -> None:
    with GroupdProcess(tmp_path / "data", "--group-share-max-share-sessions", "1") as d:
        _name, tid = _topic(d, 1)
        with Wire(d.port) as w:
            assert _call(w, "ShareFetch", 1, _fetch("a", 0, tid))["error_code"] == 0
            r = _call(w, "ShareFetch", 1, _fetch("b", 0, tid))
            assert r["error_code"] == ErrorCode.SHARE_SESSION_LIMIT_REACHED


@pytest.mark.parametrize(
    ("reset", "expected"), [("latest", []), ("by_duration:PT1H", [(0, 2, 1)]), ("by_duration:PT0S", [])]
)
def test_share_auto_offset_reset(daemon: GroupdProcess, reset: str, expected: list[tuple[int, int, int]]) -> None:
    # ShareGroupAutoOffsetResetStrategy: latest (the default) starts at the log end; by_duration at
    # the first record written within the duration (none within 0 s: the log end)
    group = "g-" + uuid.uuid4().hex[:6]
    if reset != "latest":
        _earliest(daemon, group, reset)
    _name, tid = _topic(daemon, 3, group=group)
    with Wire(daemon.port) as w:
        assert _acquired(_call(w, "ShareFetch", 1, _fetch("m", 0, tid, group=group))) == expected


def test_a_fetch_carries_only_the_batches_of_its_acquired_records(daemon: GroupdProcess) -> None:
    group = "g-" + uuid.uuid4().hex[:6]
    _earliest(daemon, group)
    _name, tid = _topic(daemon, 4, batch_each=True, group=group)
    with Wire(daemon.port) as w, Wire(daemon.port) as w2:
        assert _acquired(_call(w, "ShareFetch", 1, _fetch("a", 0, tid, group=group, max_records=4))) == [(0, 3, 1)]
        r = _call(w, "ShareAcknowledge", 1, _ack("a", 1, tid, [(1, 1, [2]), (3, 3, [2])], group=group))
        assert r["responses"][0]["partitions"][0]["error_code"] == 0
        # "b" gets offsets 1 and 3 again; the batches of 0 and 2 ("a" holds them) are not in its answer
        r = _call(w2, "ShareFetch", 1, _fetch("b", 0, tid, group=group))
        assert _acquired(r) == [(1, 1, 2), (3, 3, 2)]
        assert _values(r) == [b"v1", b"v3"]


def test_an_uninitialized_share_partition_is_refused(daemon: GroupdProcess) -> None:
    # no member of the group was ever assigned the topic: the share coordinator has no state for it
    # (SharePartition.maybeInitialize fails: UNKNOWN_SERVER_ERROR; an acknowledgement finds no
    # share-partition: UNKNOWN_TOPIC_OR_PARTITION)
    group = "g-" + uuid.uuid4().hex[:6]
    _name, tid = _topic(daemon, 2)
    with Wire(daemon.port) as w:
        r = _call(w, "ShareFetch", 1, _fetch("m", 0, tid, group=group))
        (part,) = r["responses"][0]["partitions"]
        assert part["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR and part["acquired_records"] == []
        r = _call(w, "ShareAcknowledge", 1, _ack("m", 1, tid, [(0, 0, [1])], group=group))
        assert r["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
