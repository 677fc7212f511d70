"""Issue 9: Prometheus metrics and request-scoped log fields.

The end-to-end test scrapes ``/metrics`` of a real ``groupd serve`` while real confluent-kafka
consumers form a group and rebalance, then restarts the daemon on the same data directory and
reads the replay figures. The in-process tests pin down the cheap request statistics, the
appender's timing hooks and the log context that the dispatcher gives a request's handler.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import socket
import struct
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import structlog
from groupd.broker.group_shell import GroupShell
from groupd.broker.txn_shell import TxnShell
from groupd.coordinator import GroupCoordinator
from groupd.coordinator import listener as events
from groupd.ops.metrics import REQUEST_BUCKETS, Metrics, RequestStats
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.faults import FaultInjector
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.server import Server
from groupd.storage import Appender, LogConfig, LogManager, PartitionLog
from groupd.transactions.coordinator import TransactionConfig, TransactionCoordinator
from groupd.transactions.producer_ids import CountingProducerIds
from prometheus_client.parser import text_string_to_metric_families

from groupd.logs import add_request_context
from tests.coordinator.harness import Shell, assignment
from tests.support.daemon import GroupdProcess
from tests.support.groups import Member, wait_balanced

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name, frozenset(s.labels.items())] = s.value
    return out


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        return parse(resp.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every series of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def wait_for(port: int, check: Callable[[Samples], bool], what: str, timeout: float = 30.0) -> Samples:
    deadline = time.monotonic() + timeout
    samples = scrape(port)
    while not check(samples):
        if time.monotonic() > deadline:
            interesting = {k: v for k, v in samples.items() if k[0].startswith("groupd_")}
            raise AssertionError(f"metrics never showed {what}: {interesting}")
        time.sleep(0.2)
        samples = scrape(port)
    return samples


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(15)


# --- end to end ----------------------------------------------------------------------------------


@pytest.mark.e2e
def test_metrics_of_a_real_daemon_through_rebalances_and_a_restart(tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:8]
    topic, group = f"t-{unique}", f"g-{unique}"
    port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(port)).start()
    members: list[Member] = []
    try:
        assert d.events("metrics_listening")[0]["metrics"] == f"http://127.0.0.1:{port}/metrics"
        create_topic(d.bootstrap, topic, 6)
        before = scrape(port)
        assert value(before, "groupd_rebalances_completed_total", outcome="stable") == 0
        assert value(before, "groupd_offsets_load_partitions_loaded") == 50

        members = [Member("confluent-kafka", d.bootstrap, group, topic, client_id=f"m{i}").start() for i in range(2)]
        wait_balanced(d.bootstrap, group, topic, 2, 6)
        first = wait_for(
            port,
            lambda s: (
                total(s, "groupd_requests_total", api="Heartbeat", error_code="0") > 0
                and total(s, "groupd_log_fsyncs_total", log="offsets", result="ok") > 0
            ),
            "heartbeats and an fsync of __consumer_offsets",
        )
        assert total(first, "groupd_requests_total", api="JoinGroup") >= 2
        assert total(first, "groupd_requests_total", api="SyncGroup", error_code="0") >= 2
        assert total(first, "groupd_requests_total", api="Metadata", error_code="none") >= 1
        assert value(first, "groupd_request_duration_seconds_count", api="Heartbeat") > 0
        assert value(first, "groupd_rebalances_completed_total", outcome="stable") >= 1
        assert value(first, "groupd_rebalances_started_total") >= 1
        assert value(first, "groupd_rebalance_duration_seconds_count") >= 1
        assert value(first, "groupd_groups", state="Stable") == 1
        assert value(first, "groupd_group_members") == 2
        assert value(first, "groupd_connections") >= 2
        assert value(first, "groupd_log_appends_total", log="offsets", result="ok") >= 1
        assert value(first, "groupd_log_append_duration_seconds_count", log="offsets") >= 1

        # A third consumer: the group rebalances again and every counter on the way moves.
        members.append(Member("confluent-kafka", d.bootstrap, group, topic, client_id="m2").start())
        wait_balanced(d.bootstrap, group, topic, 3, 6)
        second = wait_for(port, lambda s: value(s, "groupd_group_members") == 3, "the third member")
        for name, labels in [
            ("groupd_rebalances_started_total", {}),
            ("groupd_rebalances_completed_total", {"outcome": "stable"}),
            ("groupd_log_appends_total", {"log": "offsets", "result": "ok"}),
        ]:
            assert value(second, name, **labels) > value(first, name, **labels), name
        assert total(second, "groupd_requests_total", api="JoinGroup") > total(
            first, "groupd_requests_total", api="JoinGroup"
        )
        assert value(second, "groupd_groups", state="Stable") == 1

        for m in members:
            m.stop()
        assert not [m.error for m in members if m.error]
        members = []
        gone = wait_for(port, lambda s: value(s, "groupd_groups", state="Empty") == 1, "the group emptied")
        assert value(gone, "groupd_rebalances_completed_total", outcome="empty") >= 1
        assert value(gone, "groupd_group_members") == 0
        items_written = value(gone, "groupd_log_append_items_total", log="offsets")
        assert items_written >= 3
    finally:
        for m in members:
            m.stop()
        d.stop()

    # The restart replays what was written: every record set the previous run appended holds at
    # least one record, and the group comes back (Empty, as it was left).
    port2 = free_port()
    d2 = GroupdProcess(tmp_path / "data", "--metrics-port", str(port2)).start()
    try:
        after = wait_for(
            port2, lambda s: value(s, "groupd_offsets_load_partitions_loaded") == 50, "the replay finished"
        )
        assert value(after, "groupd_offsets_load_partitions") == 50
        assert value(after, "groupd_offsets_load_records_total") >= items_written
        assert value(after, "groupd_offsets_load_skipped_records_total") == 0
        assert value(after, "groupd_offsets_load_duration_seconds") > 0
        assert value(after, "groupd_groups", state="Empty") == 1
        assert value(after, "groupd_rebalances_started_total") == 0  # counters are per process
    finally:
        d2.stop()


@pytest.mark.e2e
def test_request_log_fields_and_no_info_lines_per_heartbeat(tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:8]
    topic, group = f"t-{unique}", f"g-{unique}"
    port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(port)).start()
    m: Member | None = None
    try:
        create_topic(d.bootstrap, topic, 2)
        m = Member("confluent-kafka", d.bootstrap, group, topic, client_id="log-probe").start()
        wait_balanced(d.bootstrap, group, topic, 1, 2)
        # Logged while handling the member's JoinGroup, with no client fields of its own.
        started = [e for e in d.events("rebalance_started") if e.get("group") == group]
        assert started and started[0]["client_id"] == "log-probe"
        assert str(started[0]["peer"]).startswith("127.0.0.1:")
        assert started[0]["generation"] == 0 and started[0]["level"] == "info"
        completed = [e for e in d.events("rebalance_completed") if e.get("group") == group]
        assert completed and completed[0]["generation"] == 1

        # Once the group is stable, heartbeats (and everything else a quiet group does) log nothing.
        def heartbeats(s: Samples) -> float:
            return total(s, "groupd_requests_total", api="Heartbeat")

        base = heartbeats(wait_for(port, lambda s: heartbeats(s) > 0, "a heartbeat"))
        lines = len(d.log_path.read_text().splitlines())
        wait_for(port, lambda s: heartbeats(s) >= base + 3, "three more heartbeats")
        assert len(d.log_path.read_text().splitlines()) == lines, "INFO lines while the group is idle"
    finally:
        if m is not None:
            m.stop()
        d.stop()


# --- request statistics --------------------------------------------------------------------------


class _Req:
    def __init__(self, api_key: int, version: int, received_ns: int = 1) -> None:
        self.api_key, self.api_version, self.received_ns = api_key, version, received_ns


def test_request_stats_count_by_api_version_error_and_histogram_by_api() -> None:
    stats = RequestStats()
    hb, md = API_BY_NAME["Heartbeat"].key, API_BY_NAME["Metadata"].key
    for _ in range(3):
        stats.observe(_Req(hb, 4), {"error_code": 0}, 0.00002)  # type: ignore[arg-type]
    stats.observe(_Req(hb, 4), {"error_code": 27}, 0.0003)  # type: ignore[arg-type]
    stats.observe(_Req(hb, 3), {"error_code": 0}, 100.0)  # type: ignore[arg-type]
    stats.observe(_Req(md, 12), {"topics": []}, 0.002)  # type: ignore[arg-type]
    stats.observe(_Req(md, 12, received_ns=0), {"topics": []}, 5e9)  # type: ignore[arg-type]
    m = Metrics(process_metrics=False)
    m.requests = stats
    s = parse(m.render()[0].decode())
    assert value(s, "groupd_requests_total", api="Heartbeat", version="4", error_code="0") == 3
    assert value(s, "groupd_requests_total", api="Heartbeat", version="4", error_code="27") == 1
    assert value(s, "groupd_requests_total", api="Heartbeat", version="3", error_code="0") == 1
    assert value(s, "groupd_requests_total", api="Metadata", version="12", error_code="none") == 2
    # Latency by api only; a request with no start time (received_ns 0) is counted but not timed.
    assert value(s, "groupd_request_duration_seconds_count", api="Heartbeat") == 5
    assert value(s, "groupd_request_duration_seconds_count", api="Metadata") == 1
    assert value(s, "groupd_request_duration_seconds_bucket", api="Heartbeat", le="5e-05") == 3
    assert value(s, "groupd_request_duration_seconds_bucket", api="Heartbeat", le="0.0005") == 4
    assert value(s, "groupd_request_duration_seconds_bucket", api="Heartbeat", le="60.0") == 4
    assert value(s, "groupd_request_duration_seconds_bucket", api="Heartbeat", le="300.0") == 5
    assert value(s, "groupd_request_duration_seconds_bucket", api="Heartbeat", le="+Inf") == 5
    assert value(s, "groupd_request_duration_seconds_sum", api="Heartbeat") == pytest.approx(100.00036)
    assert len(REQUEST_BUCKETS) + 1 == len(
        [k for k in s if k[0] == "groupd_request_duration_seconds_bucket" and ("api", "Metadata") in k[1]]
    )


def test_listener_hooks_feed_the_rebalance_and_expiry_metrics() -> None:
    m = Metrics(process_metrics=False)
    m.rebalance_started("g", 0, 1, "new member")
    m.rebalance_completed("g", 1, 2, 1500, events.STABLE)
    m.rebalance_completed("g", 2, 0, None, events.EMPTY)
    m.member_expired("g", "m-1", 1, events.SESSION_TIMEOUT)
    m.member_expired("g", "m-2", 1, events.PENDING)
    s = parse(m.render()[0].decode())
    assert value(s, "groupd_rebalances_started_total") == 1
    assert value(s, "groupd_rebalances_completed_total", outcome="stable") == 1
    assert value(s, "groupd_rebalances_completed_total", outcome="empty") == 1
    assert value(s, "groupd_rebalance_duration_seconds_count") == 1
    assert value(s, "groupd_rebalance_duration_seconds_sum") == 1.5
    assert value(s, "groupd_member_expirations_total", reason="session_timeout") == 1
    assert value(s, "groupd_member_expirations_total", reason="pending") == 1
    assert ("groupd_member_expirations_total", frozenset({("reason", "rebalance_timeout")})) in s


async def test_appender_reports_writes_and_fsyncs(tmp_path: Path) -> None:
    m = Metrics(process_metrics=False)
    appender = Appender("always")
    m.bind(appender=appender)
    offsets = PartitionLog.open(tmp_path / "__consumer_offsets-7", LogConfig())
    data = PartitionLog.open(tmp_path / "orders-0", LogConfig())
    try:
        await asyncio.gather(
            appender.append(offsets, [(b"k1", b"v1", [], 1000)]),
            appender.append(offsets, [(b"k2", b"v2", [], 1000)]),
            appender.append(data, [(b"k", b"v", [], 1000)]),
        )
    finally:
        await appender.close()
        offsets.close()
        data.close()
    s = parse(m.render()[0].decode())
    # Group commit: both offsets callers went out in one write (and one fsync, under `always`).
    assert value(s, "groupd_log_appends_total", log="offsets", result="ok") == 1
    assert value(s, "groupd_log_append_items_total", log="offsets") == 2
    assert value(s, "groupd_log_appends_total", log="data", result="ok") == 1
    assert value(s, "groupd_log_fsyncs_total", log="offsets", result="ok") == 1
    assert value(s, "groupd_log_fsyncs_total", log="data", result="ok") == 1
    assert value(s, "groupd_log_fsync_duration_seconds_count", log="offsets") == 1
    assert value(s, "groupd_log_append_duration_seconds_sum", log="offsets") > 0


# --- the endpoint and the log context, over real sockets ----------------------------------------


def _heartbeat_frame(client_id: bytes, correlation_id: int = 7) -> bytes:
    api = API_BY_NAME["Heartbeat"]
    header = struct.pack(">hhih", api.key, 0, correlation_id, len(client_id)) + client_id
    body = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"m"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


async def test_log_events_while_handling_a_request_carry_its_client_id_and_peer() -> None:
    out = io.StringIO()
    logger = structlog.wrap_logger(
        structlog.PrintLogger(out), processors=[add_request_context, structlog.processors.JSONRenderer()]
    )
    dispatcher = Dispatcher()
    loop = asyncio.get_running_loop()
    later: asyncio.Future[None] = loop.create_future()
    tasks: list[asyncio.Task[None]] = []

    def handler(req: Any) -> dict[str, Any]:
        logger.info("inside_handler", group="g")
        # A task started by the handler inherits the request's context, as the shell's appends do.
        tasks.append(loop.create_task(_log_later(logger, later)))
        return {"throttle_time_ms": 0, "error_code": 0}

    dispatcher.register(API_BY_NAME["Heartbeat"], handler)
    server = Server(dispatcher)
    host, port = await server.start("127.0.0.1", 0)
    metrics = Metrics(process_metrics=False)
    metrics.bind(dispatcher=dispatcher, server=server)
    try:
        reader, writer = await asyncio.open_connection(host, port)
        local_port = writer.get_extra_info("sockname")[1]
        writer.write(_heartbeat_frame(b"probe-client"))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        corr = struct.unpack(">i", (await reader.readexactly(size))[:4])[0]
        assert corr == 7
        await asyncio.wait_for(later, 5)
        logger.info("outside_any_request")
        writer.close()
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        inside, task_line, outside = lines
        assert inside["event"] == "inside_handler"
        assert inside["client_id"] == "probe-client" and inside["peer"] == f"127.0.0.1:{local_port}"
        assert task_line["client_id"] == "probe-client"
        assert "client_id" not in outside and "peer" not in outside
        s = parse(metrics.render()[0].decode())
        assert value(s, "groupd_requests_total", api="Heartbeat", version="0", error_code="0") == 1
        assert value(s, "groupd_connections") == 1
    finally:
        await server.close()


async def _log_later(logger: Any, done: asyncio.Future[None]) -> None:
    await asyncio.sleep(0)
    logger.info("in_task_started_by_handler")
    done.set_result(None)


async def test_metrics_endpoint_serves_prometheus_text_and_refuses_the_rest() -> None:
    m = Metrics(process_metrics=False)
    host, port = await m.start("127.0.0.1", 0)
    try:

        def get(path: str, method: str = "GET", accept: str = "") -> tuple[int, str, bytes]:
            req = urllib.request.Request(f"http://{host}:{port}{path}", method=method)
            if accept:
                req.add_header("Accept", accept)
            try:
                with urllib.request.urlopen(req, timeout=5) as resp:
                    return resp.status, resp.headers["Content-Type"], resp.read()
            except urllib.error.HTTPError as e:
                return e.code, e.headers["Content-Type"], e.read()

        status, ctype, body = await asyncio.to_thread(get, "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        assert b"groupd_rebalances_started_total 0.0" in body
        status, ctype, body = await asyncio.to_thread(get, "/metrics", accept="application/openmetrics-text")
        assert status == 200 and ctype.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")
        assert (await asyncio.to_thread(get, "/nothing"))[0] == 404
        assert (await asyncio.to_thread(get, "/metrics", "POST"))[0] == 405
    finally:
        await m.close()


_SHARE_STATS = (
    "share_partitions",
    "in_flight",
    "acquired",
    "sessions",
    "deliveries",
    "redeliveries",
    "lock_expiries",
    "archived",
)


def test_readme_documents_every_groupd_metric() -> None:
    core = GroupCoordinator()
    m = Metrics(process_metrics=False)
    txns = TxnShell(TransactionCoordinator(TransactionConfig(), CountingProducerIds()), None, None, None, None)  # type: ignore[arg-type]
    m.bind(core=core, shell=GroupShell(core, lambda p: None, None), faults=FaultInjector(), txns=txns)  # type: ignore[arg-type,return-value]
    share = SimpleNamespace(stats=lambda: dict.fromkeys(_SHARE_STATS, 0))
    m.bind(share=share)  # type: ignore[arg-type]
    exported = set()
    for family in m.registry.collect():
        if family.name.startswith("groupd_"):
            exported.add(family.name + "_total" if family.type == "counter" else family.name)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Metrics and logs") : readme.index("**Logs.**")]
    documented = set(re.findall(r"`(groupd_[a-z_]+)`", section))
    assert exported == documented


async def test_coordinator_deadlines_fire_outside_the_request_that_armed_them() -> None:
    # The shell arms its timer while handling a request; without a context of its own the timer
    # would run in that request's context, and an expiry would be logged with that client's id.
    from groupd.coordinator import Result
    from groupd.protocol.dispatch import current_request

    seen: list[object] = []
    fired = asyncio.get_running_loop().create_future()

    class StubCore:
        deadline: int | None = 0

        def next_deadline(self) -> int | None:
            return self.deadline

        def tick(self, now_ms: int) -> Result:
            seen.append(current_request.get())
            self.deadline = None
            fired.set_result(None)
            return Result()

    shell = GroupShell(StubCore(), lambda p: None, None, clock=lambda: 0)  # type: ignore[arg-type,return-value]
    token = current_request.set("a request")  # type: ignore[arg-type]
    try:
        shell.apply(Result())  # arms the timer, as the handler of a request does
    finally:
        current_request.reset(token)
    await asyncio.wait_for(fired, 5)
    assert seen == [None]


# --- per-group series --------------------------------------------------------------------------


@pytest.mark.e2e
def test_group_lag_of_a_real_consumer_goes_from_n_to_zero(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    unique = uuid.uuid4().hex[:8]
    topic, group = f"t-{unique}", f"g-{unique}"
    port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(port)).start()
    c = Consumer(
        {
            "bootstrap.servers": d.bootstrap,
            "group.id": group,
            "client.id": "lagging",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        create_topic(d.bootstrap, topic, 2)
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 2:
            assert time.monotonic() < deadline, "the consumer never got its partitions"
            c.poll(0.1)
        c.commit(offsets=[TopicPartition(topic, p, 0) for p in (0, 1)], asynchronous=False)
        p = Producer({"bootstrap.servers": d.bootstrap})
        for i in range(30):
            p.produce(topic, value=b"v%d" % i, partition=i % 2)
        assert p.flush(15) == 0

        s = wait_for(port, lambda s: value(s, "groupd_group_lag", group=group, topic=topic) == 30, "a lag of 30")
        assert value(s, "groupd_group_state", group=group, state="Stable") == 1
        assert value(s, "groupd_group_size", group=group) == 1
        assert value(s, "groupd_group_metrics_omitted_groups") == 0

        got = 0
        while got < 30:
            assert time.monotonic() < deadline + 30, f"consumed only {got} of 30"
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        c.commit(asynchronous=False)
        wait_for(port, lambda s: value(s, "groupd_group_lag", group=group, topic=topic) == 0, "the lag back at 0")
    finally:
        c.close()
        d.stop()


def _lagging_groups(tmp_path: Path, lags: dict[str, int]) -> tuple[Metrics, LogManager]:
    """A core whose groups committed offset 0 of ``orders-0`` (100 records), so each group's lag is
    100 minus what it committed, and a log manager holding the partition."""
    shell = Shell()
    logs = LogManager(tmp_path)
    logs.get_or_create("orders", 0).append_records([(b"k", b"v", [], 1000)] * 100)
    for gid, lag in lags.items():
        c = shell.client("m", group=gid, topics=("orders",))
        c.join()
        c.sync({c.member_id: assignment("orders", 0)})
        c.commit({("orders", 0): 100 - lag})
    m = Metrics(process_metrics=False, max_groups=2)
    m.bind(core=shell.coord, logs=logs)
    return m, logs


def test_per_group_series_are_capped_most_lagging_first(tmp_path: Path) -> None:
    m, logs = _lagging_groups(tmp_path, {"a": 5, "b": 40, "c": 2, "d": 20})
    try:
        s = parse(m.render()[0].decode())
        lagged = {dict(ls)["group"]: v for (n, ls), v in s.items() if n == "groupd_group_lag"}
        assert lagged == {"b": 40, "d": 20}
        assert value(s, "groupd_group_state", group="b", state="Stable") == 1
        assert value(s, "groupd_group_size", group="d") == 1
        assert not [k for k in s if k[0] == "groupd_group_size" and ("group", "a") in k[1]]
        assert value(s, "groupd_group_metrics_omitted_groups") == 2
        assert value(s, "groupd_group_metrics_omitted_lag") == 7  # a + c: the sum over groups adds up
        m.max_groups = 0  # no cap
        s = parse(m.render()[0].decode())
        assert len([k for k in s if k[0] == "groupd_group_lag"]) == 4
        assert value(s, "groupd_group_metrics_omitted_groups") == 0
    finally:
        logs.close()


@pytest.mark.e2e
def test_consumer_group_metrics_of_a_real_daemon_with_kip848_members(tmp_path: Path) -> None:
    """Issue 18: KIP-848 groups (confluent-kafka, group.protocol=consumer) in the scrape: by type and
    state, members, heartbeats, epoch bumps, assignor runs, reconciliation steps, rebalance time."""
    unique = uuid.uuid4().hex[:8]
    topic, group = f"t-{unique}", f"g-{unique}"
    port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(port)).start()
    members: list[Member] = []
    try:
        create_topic(d.bootstrap, topic, 4)
        before = scrape(port)
        assert value(before, "groupd_groups_by_type", type="consumer", state="Stable") == 0
        assert value(before, "groupd_consumer_group_epoch_bumps_total") == 0
        members = [
            Member("confluent-kafka", d.bootstrap, group, topic, client_id=f"m{i}", group_protocol="consumer").start()
            for i in range(2)
        ]
        wait_balanced(d.bootstrap, group, topic, 2, 4)
        first = wait_for(
            port,
            lambda s: (
                value(s, "groupd_groups_by_type", type="consumer", state="Stable") == 1
                and value(s, "groupd_consumer_group_heartbeats_total", error_code="0") > 2
            ),
            "a Stable consumer group and its heartbeats",
        )
        assert value(first, "groupd_consumer_group_members") == 2
        assert value(first, "groupd_group_members") == 0  # the classic gauge counts classic groups only
        assert value(first, "groupd_groups_by_type", type="classic", state="Stable") == 0
        assert value(first, "groupd_group_state", group=group, state="Stable") == 1
        assert value(first, "groupd_group_size", group=group) == 2
        epoch = value(first, "groupd_consumer_group_epoch", group=group, epoch="group")
        assert epoch >= 2 and value(first, "groupd_consumer_group_epoch", group=group, epoch="target") == epoch
        assert value(first, "groupd_consumer_group_epoch_bumps_total") == epoch  # every bump of its only group
        assert value(first, "groupd_consumer_group_target_assignments_total") >= 1
        assert value(first, "groupd_consumer_group_member_assignment_changes_total") >= 2
        assert value(first, "groupd_consumer_group_rebalance_duration_seconds_count") >= 1
        assert value(first, "groupd_consumer_group_members_removed_total") == 0

        members.pop().stop()  # leaves with epoch -1: a bump, a removal, the survivor takes everything
        wait_balanced(d.bootstrap, group, topic, 1, 4)
        second = wait_for(
            port,
            lambda s: (
                value(s, "groupd_consumer_group_members") == 1
                and value(s, "groupd_groups_by_type", type="consumer", state="Stable") == 1
            ),
            "the member that left",
        )
        assert value(second, "groupd_consumer_group_members_removed_total") == 1
        assert value(second, "groupd_consumer_group_epoch_bumps_total") == epoch + 1
        assert value(second, "groupd_consumer_group_epoch", group=group, epoch="group") == epoch + 1
        assert value(second, "groupd_consumer_group_rebalance_duration_seconds_count") > value(
            first, "groupd_consumer_group_rebalance_duration_seconds_count"
        )
        assert value(second, "groupd_consumer_group_heartbeats_total", error_code="0") > value(
            first, "groupd_consumer_group_heartbeats_total", error_code="0"
        )
    finally:
        for m in members:
            m.stop()
        d.stop()


def test_transaction_metrics_of_a_real_daemon(tmp_path: Path) -> None:
    # the transaction shell counts the core's transaction_completed / transaction_timed_out events
    from confluent_kafka import Producer

    port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(port)).start()
    try:
        assert value(scrape(port), "groupd_transactions_committed_total") == 0
        p = Producer({"bootstrap.servers": d.bootstrap, "transactional.id": "m-tx", "transaction.timeout.ms": 1000})
        p.init_transactions(15)
        for commit in (True, True, False):
            p.begin_transaction()
            p.produce("m-out", b"x")
            p.flush(15)  # else librdkafka aborts a transaction it never registered without an EndTxn
            (p.commit_transaction if commit else p.abort_transaction)(15)
        p.begin_transaction()
        p.produce("m-out", b"hung")
        p.flush(15)
        assert value(scrape(port), "groupd_transactions_open") == 1
        s = wait_for(port, lambda s: value(s, "groupd_transactions_timed_out_total") == 1, "a timeout")
        assert value(s, "groupd_transactions_committed_total") == 2
        s = wait_for(port, lambda s: value(s, "groupd_transactions_aborted_total") == 2, "two aborts")
        assert value(s, "groupd_transactions_open") == 0
        assert value(s, "groupd_transactional_ids") == 1
    finally:
        d.stop()


def test_share_delivery_metrics_of_a_real_daemon(tmp_path: Path) -> None:
    # ShareFetch / ShareAcknowledge on the wire: deliveries, a redelivery after a release, an archive
    import uuid as _uuid

    from confluent_kafka import Producer

    from tests.support.share import join
    from tests.support.wire import Wire

    port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(port)).start()
    try:
        with Wire(d.port) as w:
            w.create_topic("sm")
            w.pipeline(
                (
                    "IncrementalAlterConfigs",
                    1,
                    {
                        "resources": [
                            {
                                "resource_type": 32,
                                "resource_name": "sg",
                                "configs": [
                                    {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}
                                ],
                            }
                        ],
                        "validate_only": False,
                    },
                )
            )
            w.read()
            w.pipeline(
                (
                    "Metadata",
                    12,
                    {
                        "topics": [{"topic_id": _uuid.UUID(int=0), "name": "sm"}],
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                    },
                )
            )
            tid = w.read()[1]["topics"][0]["topic_id"]
            join(d.port, "sg", "sm")
            p = Producer({"bootstrap.servers": d.bootstrap})
            for v in (b"a", b"b"):
                p.produce("sm", v)
            assert p.flush(10) == 0

            def fetch(epoch: int, acks: list[dict[str, object]]) -> dict[str, object]:
                body = {
                    "group_id": "sg",
                    "member_id": "m",
                    "share_session_epoch": epoch,
                    "max_wait_ms": 0,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "max_records": 10,
                    "batch_size": 10,
                    "topics": [
                        {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}
                    ],
                    "forgotten_topics_data": [],
                }
                w.pipeline(("ShareFetch", 1, body))
                return w.read()[1]

            fetch(0, [])
            s = scrape(port)
            assert value(s, "groupd_share_acquired_records") == 2 and value(s, "groupd_share_sessions") == 1
            # offset 0 rejected, offset 1 released and handed out again in the same fetch
            fetch(1, [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [3, 2]}])
            s = scrape(port)
        assert value(s, "groupd_share_deliveries_total") == 3
        assert value(s, "groupd_share_redeliveries_total") == 1
        assert value(s, "groupd_share_archived_total") == 1
        assert value(s, "groupd_share_in_flight_records") == 1 and value(s, "groupd_share_partitions") == 1
    finally:
        d.stop()
