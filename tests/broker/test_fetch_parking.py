"""Parked (long-poll) fetches do not outlive their connection.

A Fetch with ``max_wait_ms`` up to 2**31-1 and ``min_bytes`` above what is there parks until data
arrives or its timer fires. Before the fix it stayed parked after its connection closed, for up to
24 days: a client that parks fetches and reconnects grew the daemon without bound, and every append
to the partition went on scanning the dead waiters. Now the connection's close drops them at once.

In-process tests drive the real ``Server``/``Connection``/``Dispatcher`` stack (a real socket, and a
``Connection`` with a stand-in transport for the server-side close); the end-to-end test watches
the ``groupd_fetch_parked`` gauge of a real daemon while connections park fetches and go away.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from groupd.broker.data_plane import DataPlane
from groupd.broker.topics import TopicRegistry
from groupd.ops.kafka_client import BrokerConnection
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.server import Connection, Request, Server
from groupd.storage import Appender, LogConfig, LogManager
from groupd.storage import records as rec
from prometheus_client.parser import text_string_to_metric_families

from groupd.config import Config
from tests.support.daemon import GroupdProcess
from tests.support.wire import fetch_body, request_frame

FETCH = API_BY_NAME["Fetch"]
FETCH_VERSION = 12


def fetch_frame(body: dict[str, Any], correlation_id: int = 1) -> bytes:
    return request_frame("Fetch", FETCH_VERSION, body, correlation_id, client_id="parker")


def decoded(body: dict[str, Any]) -> dict[str, Any]:
    codec = FETCH.request.codec(FETCH_VERSION)
    return codec.decode(codec.encode(body))


class Plane:
    """A DataPlane over real logs in tmp_path, with one topic."""

    def __init__(self, tmp: Path, topic: str = "t", partitions: int = 2) -> None:
        self.topics = TopicRegistry(tmp)
        self.topics.load()
        self.logs = LogManager(tmp, LogConfig())
        self.logs.open_all()
        self.appender = Appender("never")
        self.dp = DataPlane(
            Config(data_dir=str(tmp)), self.topics, self.logs, self.appender, retention_check_interval_ms=0
        )
        self.dp.start()
        self.dp.topic_created(self.topics.create(topic, partitions, {}))

    def assert_nothing_parked(self) -> None:
        assert self.dp.parked_fetches == 0
        assert self.dp.fetch_handler.waiters == {}
        assert self.dp.fetch_handler.parked == {}

    async def close(self) -> None:
        await self.dp.close()
        await self.appender.close()
        self.logs.close()


@pytest.fixture
async def plane(tmp_path: Path):
    p = Plane(tmp_path)
    yield p
    await p.close()


def live_expiries(handler: Any) -> int:
    """Parked fetches still queued to expire at their max wait (``FetchHandler``'s expiry queues:
    one loop timer for all of them); with none, no queue is kept."""
    n = sum(1 for q in handler._expiry.values() for w in q if not w.done)
    assert n or not handler._expiry, handler._expiry
    return n


async def wait_until(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


# --- the real server stack, over a socket ----------------------------------------------------------


async def test_client_disconnect_drops_its_parked_fetches(plane: Plane) -> None:
    dispatcher = Dispatcher()
    for name, handler, (lo, hi) in plane.dp.handlers():
        dispatcher.register(API_BY_NAME[name], handler, min_version=lo, max_version=hi)
    server = Server(dispatcher, idle_timeout_ms=0)
    host, port = await server.start("127.0.0.1", 0)
    try:
        clients = []
        for i in range(5):
            _reader, writer = await asyncio.open_connection(host, port)
            # Each client pipelines two fetches on both partitions: the first parks, the second
            # waits for its turn behind it (one request at a time per connection, as Kafka).
            writer.write(fetch_frame(fetch_body("t", 2), 2 * i) + fetch_frame(fetch_body("t", 2), 2 * i + 1))
            await writer.drain()
            clients.append(writer)
        await wait_until(lambda: plane.dp.parked_fetches == 5, "5 parked fetches")
        assert set(plane.dp.fetch_handler.waiters) == {("t", 0), ("t", 1)}
        assert live_expiries(plane.dp.fetch_handler) == 5

        # One client goes: exactly its fetch goes with it, and the one held behind it never parks.
        clients[0].close()
        await wait_until(lambda: len(server.connections) == 4, "the server to see the close")
        assert plane.dp.parked_fetches == 4
        assert live_expiries(plane.dp.fetch_handler) == 4

        for w in clients[1:]:
            w.close()
        await wait_until(lambda: not server.connections, "the server to see every close")
        plane.assert_nothing_parked()
        assert live_expiries(plane.dp.fetch_handler) == 0

        # An append after all that finds nobody to wake (and a parked fetch of a live client still
        # works as before).
        reader, writer = await asyncio.open_connection(host, port)
        body = fetch_body("t", 1)
        body["min_bytes"] = 1
        writer.write(fetch_frame(body, 99))
        await writer.drain()
        await wait_until(lambda: plane.dp.parked_fetches == 1, "a parked fetch of a live client")
        await plane.appender.append(plane.logs.get("t", 0), rec.build_batch([(None, b"v", (), 0)]))
        plane.dp.fetch_handler.notify(("t", 0), 100)
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        (correlation_id,) = struct.unpack(">i", (await reader.readexactly(size))[:4])
        assert correlation_id == 99
        plane.assert_nothing_parked()
        writer.close()
    finally:
        await server.close()


# --- the server closing the connection itself -------------------------------------------------------


class StubTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False
        self.written: list[bytes] = []

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def request_on(conn: Connection, body: dict[str, Any], encoded: list[int]) -> Request:
    def encode(req: Request, response: dict[str, Any]) -> bytes:
        encoded.append(req.correlation_id)
        return b"answer"

    req = Request(conn, FETCH.key, FETCH_VERSION, 7, "parker", decoded(body), encode)
    conn.enqueue(req)
    return req


@pytest.mark.parametrize("how", ["close", "connection_lost", "close_after_write"])
async def test_server_side_close_drops_parked_fetches_at_once(plane: Plane, how: str) -> None:
    server = Server(lambda conn, frame: None, idle_timeout_ms=0)
    conn = Connection(server)
    conn.connection_made(StubTransport())
    encoded: list[int] = []
    other = Connection(server)
    other.connection_made(StubTransport())
    for _ in range(3):
        assert plane.dp.fetch(request_on(conn, fetch_body("t", 2), encoded)) is None
    assert plane.dp.fetch(request_on(other, fetch_body("t", 1), encoded)) is None
    assert plane.dp.parked_fetches == 4
    assert len(plane.dp.fetch_handler.waiters[("t", 0)]) == 4

    if how == "close":
        conn.close("test")
    elif how == "connection_lost":
        conn.connection_lost(None)
    else:
        conn.close_after_write("test")
        await asyncio.sleep(0)  # it closes on the next loop iteration
        await asyncio.sleep(0)

    # Gone at once, not after max_wait_ms; the other connection's fetch is untouched.
    assert plane.dp.parked_fetches == 1
    assert set(plane.dp.fetch_handler.parked) == {other}
    assert len(plane.dp.fetch_handler.waiters[("t", 0)]) == 1 and ("t", 1) not in plane.dp.fetch_handler.waiters
    assert live_expiries(plane.dp.fetch_handler) == 1
    assert encoded == []  # nothing was read or encoded for the closed connection
    # The close callback ran once and is not kept.
    assert conn._close_callbacks == {}

    other.connection_lost(None)
    plane.assert_nothing_parked()
    assert live_expiries(plane.dp.fetch_handler) == 0


async def test_fetch_parked_on_an_already_closed_connection_is_not_kept(plane: Plane) -> None:
    server = Server(lambda conn, frame: None, idle_timeout_ms=0)
    conn = Connection(server)
    conn.connection_made(StubTransport())
    encoded: list[int] = []
    req = request_on(conn, fetch_body("t", 1), encoded)
    conn.close("before the handler ran")
    assert plane.dp.fetch(req) is None
    plane.assert_nothing_parked()
    assert encoded == []


async def test_a_long_lived_connection_keeps_one_close_callback(plane: Plane) -> None:
    # Every parked fetch registers the data plane's callback; on one connection that stays one entry.
    server = Server(lambda conn, frame: None, idle_timeout_ms=0)
    conn = Connection(server)
    conn.connection_made(StubTransport())
    encoded: list[int] = []
    for _ in range(50):
        assert plane.dp.fetch(request_on(conn, fetch_body("t", 1, max_wait_ms=1), encoded)) is None
    await wait_until(lambda: len(encoded) == 50, "50 timed-out fetches")
    plane.assert_nothing_parked()
    assert len(conn._close_callbacks) == 1


async def test_close_callbacks_run_once() -> None:
    calls: list[Connection] = []
    server = Server(lambda conn, frame: None, idle_timeout_ms=0)
    conn = Connection(server)
    conn.connection_made(StubTransport())
    conn.add_close_callback(calls.append)
    conn.add_close_callback(calls.append)  # the same callback: once

    def broken(c: Connection) -> None:
        raise RuntimeError("a broken callback does not stop the others")

    conn.add_close_callback(broken)
    conn.add_close_callback(lambda c: calls.append(c))
    conn.close("test")
    conn.connection_lost(None)  # the transport reports the close later: nothing runs twice
    assert calls == [conn, conn]
    late: list[Connection] = []
    conn.add_close_callback(late.append)  # added after the close: runs at once
    assert late == [conn]


# --- end to end: the gauge of a real daemon ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parked_gauge(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "groupd_fetch_parked":
                return s.value
    raise AssertionError("no groupd_fetch_parked gauge")


def wait_gauge(metrics_port: int, want: float, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    seen = parked_gauge(metrics_port)
    while seen != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"groupd_fetch_parked stayed at {seen}, expected {want}")
        time.sleep(0.05)
        seen = parked_gauge(metrics_port)


@pytest.mark.e2e
def test_reconnecting_long_pollers_do_not_pile_up_in_a_real_daemon(tmp_path: Path) -> None:
    metrics_port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(metrics_port)).start()
    try:
        admin = BrokerConnection("127.0.0.1", d.port, timeout=10, client_id="admin")
        _, created = admin.send(
            "CreateTopics",
            {
                "topics": [
                    {"name": "lp", "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
        assert created["topics"][0]["error_code"] == 0
        assert parked_gauge(metrics_port) == 0

        rounds, per_round, per_conn = 4, 25, 2
        for _ in range(rounds):
            socks = []
            for i in range(per_round):
                s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
                s.sendall(b"".join(fetch_frame(fetch_body("lp", 2), 100 * i + k) for k in range(per_conn)))
                socks.append(s)
            # One parked per connection (the other waits for its turn), not piling up across rounds.
            wait_gauge(metrics_port, per_round)
            for s in socks:
                s.close()
            wait_gauge(metrics_port, 0)  # and gone with their connections, not after 24 days
        assert d.proc is not None and d.proc.poll() is None
    finally:
        d.stop()


async def test_parked_fetches_expire_by_their_own_max_wait_under_one_timer(plane: Plane) -> None:
    # Fetches of several max waits, parked in an order that is not their deadlines' order: each is
    # answered once its own max wait is over (DelayedFetch.onExpiration), the later ones stay parked,
    # and a woken fetch leaves the expiry queues (none kept once nothing is parked).
    server = Server(lambda conn, frame: None, idle_timeout_ms=0)
    conn = Connection(server)
    conn.connection_made(StubTransport())
    done: list[int] = []
    handler = plane.dp.fetch_handler

    def park(max_wait_ms: int, partition: int = 0) -> None:
        body = fetch_body("t", 1, max_wait_ms=max_wait_ms, min_bytes=1)
        body["topics"][0]["partitions"][0]["partition"] = partition
        enc: list[int] = []
        req = request_on(conn, body, enc)
        assert plane.dp.fetch(req) is None
        original = req.encode_response

        def answered(r: Request, resp: dict[str, Any]) -> bytes:
            done.append(max_wait_ms)
            return original(r, resp)

        req.encode_response = answered

    park(60_000)
    park(300)
    park(60_000, partition=1)
    park(50)
    assert plane.dp.parked_fetches == 4 and live_expiries(handler) == 4
    await wait_until(lambda: done == [50, 300], "the two short max waits, in deadline order")
    assert plane.dp.parked_fetches == 2 and live_expiries(handler) == 2
    # an append to partition 1 wakes its fetch; the one on partition 0 waits on
    await plane.appender.append(plane.logs.get("t", 1), rec.build_batch([(None, b"v" * 200, (), 0)]))
    handler.notify(("t", 1), 300)
    assert done == [50, 300, 60_000] and live_expiries(handler) == 1
    conn.connection_lost(None)
    plane.assert_nothing_parked()
    assert live_expiries(handler) == 0


async def test_woken_fetches_do_not_pile_up_in_the_expiry_queue(plane: Plane) -> None:
    # Every fetch woken long before its max wait: the queue is compacted, not grown by each one.
    server = Server(lambda conn, frame: None, idle_timeout_ms=0)
    conn = Connection(server)
    conn.connection_made(StubTransport())
    handler = plane.dp.fetch_handler
    keep = request_on(conn, fetch_body("t", 1, max_wait_ms=60_000), [])
    assert plane.dp.fetch(keep) is None  # one stays parked throughout: the queues are kept
    plog = plane.logs.get("t", 0)
    for i in range(2100):
        body = fetch_body("t", 1, max_wait_ms=60_000, min_bytes=1)
        body["topics"][0]["partitions"][0]["partition"] = 1
        body["topics"][0]["partitions"][0]["fetch_offset"] = i
        assert plane.dp.fetch(request_on(conn, body, [])) is None
        await plane.appender.append(plane.logs.get("t", 1), rec.build_batch([(None, b"v", (), 0)]))
        handler.notify(("t", 1), 100)
    assert plane.dp.parked_fetches == 1 and live_expiries(handler) == 1
    assert sum(map(len, handler._expiry.values())) <= 1024 + 3
    assert plog.log_end_offset == 0
    conn.connection_lost(None)
    plane.assert_nothing_parked()
