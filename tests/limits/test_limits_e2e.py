"""Connection limits of a real ``groupd serve``: --max-connections, --connections-max-idle-ms,
--max-request-bytes and the bound on unsent output (--max-write-buffer-bytes)."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from groupd.protocol.messages import API_BY_NAME
from groupd.storage.records import build_batch

from bench.netfuzz import request, rss_kb
from tests.support.daemon import GroupdProcess
from tests.support.wire import Wire, fetch_body, request_frame

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    d = GroupdProcess(
        Path(tmp_path_factory.mktemp("limits")) / "data",
        "--max-connections",
        "3",
        "--connections-max-idle-ms",
        "400",
        "--max-request-bytes",
        "1000",
    )
    d.start()
    try:
        yield d
    finally:
        d.stop()


def _connect(d: GroupdProcess) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    return s


def _api_versions_answered(s: socket.socket) -> bool:
    try:
        s.sendall(request(18, 0, b"", 1))
        head = s.recv(4)
    except OSError:
        return False
    return len(head) == 4


def _closed_by_peer(s: socket.socket) -> bool:
    """Blocks (socket timeout 10 s) until the daemon closes the connection."""
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _wait_event(d: GroupdProcess, name: str, **fields: object) -> dict[str, object]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for ev in d.events(name):
            if all(ev.get(k) == v for k, v in fields.items()):
                return ev
        time.sleep(0.05)
    raise AssertionError(f"no {name} {fields} in the log: {d.log_tail()}")


def test_connections_beyond_max_connections_are_refused_and_logged(daemon: GroupdProcess) -> None:
    open_ = [_connect(daemon) for _ in range(3)]
    try:
        assert all(_api_versions_answered(s) for s in open_)
        extra = _connect(daemon)  # the kernel accepts; the daemon closes it at once
        assert _closed_by_peer(extra)
        _wait_event(daemon, "connection_refused", reason="max connections")
        extra.close()
        open_.pop().close()
        # A slot is free again once the daemon has seen the close.
        deadline = time.monotonic() + 10
        while True:
            s = _connect(daemon)
            if _api_versions_answered(s):
                open_.append(s)
                break
            s.close()
            assert time.monotonic() < deadline, "no connection accepted after one closed"
    finally:
        for s in open_:
            s.close()


def test_idle_connections_are_closed(daemon: GroupdProcess) -> None:
    s = _connect(daemon)
    try:
        assert _api_versions_answered(s)
        s.recv(65536)  # the rest of the answer
        assert _closed_by_peer(s)  # nothing more is sent: closed after ~400 ms idle
        _wait_event(daemon, "connection_closed", reason="idle")
    finally:
        s.close()


@pytest.mark.parametrize("size", [1001, 2**31 - 1, 0, 7, -1, -(2**31)])
def test_frames_outside_the_size_bounds_close_the_connection(daemon: GroupdProcess, size: int) -> None:
    s = _connect(daemon)
    try:
        s.sendall(struct.pack(">i", size))
        assert _closed_by_peer(s)
        _wait_event(daemon, "connection_closed", reason="frame size out of bounds", frame_size=size)
    finally:
        s.close()
    ok = _connect(daemon)
    try:
        assert _api_versions_answered(ok)  # the daemon is fine
    finally:
        ok.close()


def test_a_client_that_never_reads_does_not_grow_the_daemon(tmp_path: Path) -> None:
    # Its own daemon: with a short idle timeout a connection that is not read is closed as idle.
    with GroupdProcess(tmp_path / "data", "--max-write-buffer-bytes", "65536") as daemon:
        _never_reads(daemon)


def _never_reads(daemon: GroupdProcess) -> None:
    # 300 partitions make a Metadata answer ~12 KB for a 21-byte request: a client pipelining
    # requests without reading would make the daemon buffer ~600x what it sends. With the bound the
    # daemon stops reading once 64 KB wait unsent, the kernel's buffers fill and sends block.
    ct = API_BY_NAME["CreateTopics"]
    body = ct.request.codec(2).encode({"topics": [{"name": "wide", "num_partitions": 300, "replication_factor": 1}]})
    s = _connect(daemon)
    s.sendall(request(ct.key, 2, body, 1))
    assert s.recv(65536)
    assert daemon.proc is not None
    before = rss_kb(daemon.proc.pid)
    md = request(API_BY_NAME["Metadata"].key, 1, b"\xff\xff\xff\xff", 2) * 64  # v1, all topics
    s.setblocking(False)
    sent = 0
    blocked_since = None
    grown_mb = 0.0
    try:
        while sent < 64 * 1024 * 1024:
            try:
                sent += s.send(md)
                blocked_since = None
            except BlockingIOError:
                blocked_since = blocked_since or time.monotonic()
                if time.monotonic() - blocked_since > 1.0:
                    break  # the daemon stopped reading from us: backpressure reached the client
                time.sleep(0.01)
            if sent % (256 * 1024) < len(md):
                grown_mb = (rss_kb(daemon.proc.pid) - before) / 1024
                assert grown_mb < 150, f"daemon grew {grown_mb:.0f} MB while the client sent {sent} bytes"
        assert blocked_since is not None, f"the daemon kept reading: {sent} bytes sent, grew {grown_mb:.0f} MB"
        grown_mb = (rss_kb(daemon.proc.pid) - before) / 1024
        assert grown_mb < 150
    finally:
        s.close()


def _status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_pipelined_fetches_of_a_client_that_never_reads_stay_near_the_limits(tmp_path: Path) -> None:
    # 64 Fetches of a partition holding ~5 MB, pipelined by a client that reads nothing. When every
    # pipelined request was dispatched at once, the daemon built all 64 answers (~320 MB, several
    # copies of each on the way). Now the fetches run one at a time (Kafka's muted channel), answers
    # go to the transport once max_write_buffer_bytes (4 MiB by default) of them are ready, and once
    # the transport holds more than that unsent, nothing more is dispatched: one answer being built
    # (~5 MB, a few copies) plus ~4 MiB unsent is what the daemon holds.
    with GroupdProcess(tmp_path / "data") as daemon, Wire(daemon.port) as w:
        assert daemon.proc is not None
        pid = daemon.proc.pid
        w.create_topic("big")
        for n in range(5):
            records = [(None, bytes([n, i]) * 60_000, (), 1_700_000_000_000) for i in range(8)]  # 960 KB
            w.pipeline(
                (
                    "Produce",
                    7,
                    {
                        "transactional_id": None,
                        "acks": 1,
                        "timeout_ms": 10_000,
                        "topic_data": [
                            {"name": "big", "partition_data": [{"index": 0, "records": build_batch(records)}]}
                        ],
                    },
                )
            )
            _, produced = w.read()
            assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0
        time.sleep(0.3)
        before = _status_kb(pid, "VmRSS")
        hwm_before = _status_kb(pid, "VmHWM")
        fetch = fetch_body("big", max_wait_ms=0, min_bytes=1, max_bytes=50 * 1024 * 1024)
        w.pipeline(*[("Fetch", 11, fetch)] * 64)
        peak = before
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            peak = max(peak, _status_kb(pid, "VmRSS"))
            time.sleep(0.02)
        grown_mb = (max(peak, _status_kb(pid, "VmHWM")) - max(before, hwm_before)) / 1024
        assert grown_mb < 64, f"the daemon grew {grown_mb:.0f} MB for 64 unread pipelined fetches"
        # The client that reads gets every answer, in order, each the whole partition.
        for _ in range(64):
            name, fetched = w.read()
            assert name == "Fetch"
            assert len(fetched["responses"][0]["partitions"][0]["records"]) > 4_500_000


def test_connections_that_never_read_pin_one_answer_each(tmp_path: Path) -> None:
    # 20 clients pipeline 64 Fetches of a ~4.8 MB partition each and read nothing, with the
    # default limits. Kafka keeps a channel muted while a response send is in flight, so a client
    # that does not read costs the broker one response. With a high-water mark of
    # max_write_buffer_bytes (4 MiB) the daemon dispatched the next Fetch whenever the kernel had
    # taken enough of the last answer to bring the rest under 4 MiB: two answers per connection
    # (9.6 MiB each, 192 MB for 20). Now nothing more is dispatched while any answer is unsent.
    with GroupdProcess(tmp_path / "data") as daemon, Wire(daemon.port) as w:
        assert daemon.proc is not None
        pid = daemon.proc.pid
        w.create_topic("big")
        for n in range(5):
            records = [(None, bytes([n, i]) * 60_000, (), 1_700_000_000_000) for i in range(8)]  # 960 KB
            w.pipeline(
                (
                    "Produce",
                    7,
                    {
                        "transactional_id": None,
                        "acks": 1,
                        "timeout_ms": 10_000,
                        "topic_data": [
                            {"name": "big", "partition_data": [{"index": 0, "records": build_batch(records)}]}
                        ],
                    },
                )
            )
            assert w.read()[1]["responses"][0]["partition_responses"][0]["error_code"] == 0
        time.sleep(0.3)
        before = _status_kb(pid, "VmRSS")
        fetch = fetch_body("big", max_wait_ms=0, min_bytes=1, max_bytes=50 * 1024 * 1024)
        frames = b"".join(request_frame("Fetch", 11, fetch, i) for i in range(64))
        answer_mb = 4_800_000 / 2**20
        silent: list[socket.socket] = []
        slow = Wire(daemon.port)
        try:
            for _ in range(20):
                s = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.send(frames)
                silent.append(s)
            slow.pipeline(*[("Fetch", 11, fetch)] * 8)  # reads, but only once the others are stuck
            grown_mb, peak = 0.0, before
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                peak = max(peak, _status_kb(pid, "VmRSS"))
                time.sleep(0.02)
            grown_mb = (peak - before) / 1024
            per_conn = grown_mb / 21
            assert per_conn < 1.5 * answer_mb, (
                f"{per_conn:.1f} MiB per connection that does not read ({grown_mb:.0f} MiB)"
            )
            # Another client is served meanwhile.
            with Wire(daemon.port) as other:
                other.pipeline(("Metadata", 1, {"topics": None}))
                assert other.read()[0] == "Metadata"
            # The slow client gets every answer, in order, each the whole partition.
            for i in range(8):
                name, fetched = slow.read()
                assert name == "Fetch", i
                assert len(fetched["responses"][0]["partitions"][0]["records"]) > 4_500_000
        finally:
            slow.close()
            for s in silent:
                s.close()
