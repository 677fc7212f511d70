"""Repetitive warnings of a real ``groupd serve`` are rate-limited with a count, and running out of
file descriptors is logged.

Before: every refused connection, every failed disk write was a line (3,518 lines in a second,
3,037 in 6 s), and a daemon out of descriptors said nothing while libuv closed every new
connection unserved. Now each is one line per key per 10 s; the lines held back are counted in the
next one (``suppressed``), and a graceful stop reports what is still pending, so the lines add up to
exactly what happened.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest
from groupd.ops.kafka_client import BrokerConnection
from groupd.protocol.errors import ErrorCode
from groupd.storage import build_batch

from tests.limits.test_limits_e2e import _api_versions_answered, _closed_by_peer, _connect, _wait_event
from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e


def occurrences(events: list[dict[str, object]]) -> int:
    """What rate-limited lines stand for: each line itself plus the ones it says it held back."""
    return sum(1 + int(e.get("suppressed", 0)) for e in events)  # type: ignore[call-overload]


def _limit(kind: int, n: int):  # type: ignore[no-untyped-def]
    def preexec() -> None:
        resource.setrlimit(kind, (n, n))

    return preexec


def test_a_storm_of_refused_connections_is_one_line_and_a_count(tmp_path: Path) -> None:
    d = GroupdProcess(tmp_path / "data", "--max-connections", "1").start()
    try:
        held = _connect(d)
        assert _api_versions_answered(held)
        n = 300
        for _ in range(n):
            s = _connect(d)
            assert _closed_by_peer(s)
            s.close()
        assert len(d.events("connection_refused")) == 1
        held.close()
    finally:
        d.stop()
    lines = d.events("connection_refused")
    assert len(lines) == 2 and lines[1]["suppressed"] == n - 2  # the first line, the last one and n - 2 between
    assert occurrences(lines) == n


def test_failed_disk_writes_are_one_line_per_log_and_a_count(tmp_path: Path) -> None:
    # RLIMIT_FSIZE: every write past 200 kB fails with EFBIG (Python ignores SIGXFSZ), a real failing disk.
    d = GroupdProcess(tmp_path / "data", preexec_fn=_limit(resource.RLIMIT_FSIZE, 200_000)).start()
    failed = 0
    try:
        conn = BrokerConnection("127.0.0.1", d.port, timeout=10, client_id="flood")
        meta = {"topics": [{"name": "full"}], "allow_auto_topic_creation": True}
        conn.send("Metadata", meta, 12)  # creates it
        assert conn.send("Metadata", meta, 12)[1]["topics"][0]["error_code"] == 0
        batch = build_batch([(None, b"x" * 1000, [], int(time.time() * 1000))])
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": "full", "partition_data": [{"index": 0, "records": batch}]}],
        }
        for _ in range(400):
            [topic] = conn.send("Produce", body, 9)[1]["responses"]
            code = topic["partition_responses"][0]["error_code"]
            assert code in (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR)
            failed += code == ErrorCode.KAFKA_STORAGE_ERROR
        conn.close()
        assert failed > 150
        assert len(d.events("storage.append.failed")) == 1
    finally:
        d.stop()
    lines = d.events("storage.append.failed")
    assert len(lines) == 2 and "File too large" in str(lines[0]["error"])
    assert occurrences(lines) == failed  # one write per request: each answered KAFKA_STORAGE_ERROR


def test_running_out_of_file_descriptors_is_logged(tmp_path: Path) -> None:
    limit = 300  # the daemon needs ~165 (50 __consumer_offsets partitions of 3 files each)
    d = GroupdProcess(tmp_path / "data", preexec_fn=_limit(resource.RLIMIT_NOFILE, limit)).start()
    held = []
    try:
        while len(held) < limit:
            s = _connect(d)
            if not _api_versions_answered(s):
                s.close()  # accepted and closed unserved by libuv: the descriptors are gone
                break
            held.append(s)
        assert 50 < len(held) < limit
        ev = _wait_event(d, "fd_limit_reached")
        assert ev["limit"] == limit and ev["connections"] == len(held) and ev["level"] == "error"
        for s in held[:20]:
            s.close()
        _wait_event(d, "fd_limit_recovered")
        s = _connect(d)
        assert _api_versions_answered(s)
        held.append(s)
    finally:
        for s in held:
            s.close()
        d.stop()
