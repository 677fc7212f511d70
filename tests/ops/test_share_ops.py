"""Issue 27, everything around share groups (KIP-932) with real confluent-kafka ``ShareConsumer``s:
the pytest plugin's fixture, fault injection on the share APIs (errors and delays per API key, expire
a member, expire the acquisition locks: control endpoint, client and ``groupd fault``), and the per
share-group metrics of a real daemon's ``/metrics``."""

from __future__ import annotations

import contextlib
import io
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from groupd.ops.control_client import ControlError
from groupd.ops.pytest_plugin import GroupdBroker

from groupd import cli
from tests.e2e.test_share_consumer_e2e import Member
from tests.e2e.test_share_consumer_e2e import wait_for as wait_until
from tests.ops.test_metrics import free_port, scrape, value
from tests.support.daemon import GroupdProcess
from tests.support.wire import Wire


def _names() -> tuple[str, str]:
    u = uuid.uuid4().hex[:8]
    return f"jobs-{u}", f"tasks-{u}"


def _topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v.encode())
    assert p.flush(10) == 0


@contextlib.contextmanager
def share_consumer(bootstrap: str, group: str, topic: str, **conf: str) -> Iterator[ShareConsumer]:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    try:
        yield c
    finally:
        c.close()


def poll_until(c: ShareConsumer, enough: Callable[[list[Any]], bool], timeout: float = 30.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while not enough(got):
        assert time.monotonic() < deadline, f"only {[(m.offset(), m.delivery_count()) for m in got]}"
        got += [m for m in c.poll(0.5) if m.error() is None]
    return got


# --- the pytest plugin ------------------------------------------------------------------------------


def test_plugin_broker_serves_share_consumers_and_expires_their_locks(groupd_broker: GroupdBroker) -> None:
    """The fixture as a project would use it: a share group reading from the start, one consumer
    holding records until ``expire_locks`` hands them to another with delivery count 2."""
    group, topic = _names()
    _topic(groupd_broker.bootstrap, topic)
    groupd_broker.group_configs(group, share_auto_offset_reset="earliest")
    _produce(groupd_broker.bootstrap, topic, [f"r{i}" for i in range(10)])
    with share_consumer(groupd_broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}) as a:
        held = poll_until(a, lambda got: len(got) >= 10)
        assert sorted(m.offset() for m in held) == list(range(10))
        done = groupd_broker.expire_locks(group, topic, 0)
        assert (done["records"], done["partitions"]) == (10, 1)
        with share_consumer(groupd_broker.bootstrap, group, topic) as b:
            again = poll_until(b, lambda got: len(got) >= 10)
            assert sorted((m.offset(), m.delivery_count()) for m in again) == [(o, 2) for o in range(10)]
            b.commit_sync(30)


def test_plugin_group_configs_reports_a_bad_value(groupd_broker: GroupdBroker) -> None:
    from groupd.ops.kafka_client import KafkaError

    with pytest.raises(KafkaError):
        groupd_broker.group_configs("g", share_auto_offset_reset="sometimes")


# --- fault injection --------------------------------------------------------------------------------


def _heartbeat(w: Wire, group: str, member: str, topic: str) -> dict[str, Any]:
    body = {
        "group_id": group,
        "member_id": member,
        "member_epoch": 0,
        "rack_id": None,
        "subscribed_topic_names": [topic],
    }
    w.pipeline(("ShareGroupHeartbeat", 1, body))
    return w.read()[1]


def test_share_api_errors_are_injected_per_api_key(groupd_broker: GroupdBroker) -> None:
    # FaultInjector matches on the API key like any other: the share APIs' own top-level error_code
    group, topic = _names()
    _topic(groupd_broker.bootstrap, topic)
    faults = groupd_broker.faults
    faults.add(api="ShareGroupHeartbeat", error="COORDINATOR_NOT_AVAILABLE", count=1, group=group)
    faults.add(api="ShareFetch", error="GROUP_AUTHORIZATION_FAILED", count=1, group=group)
    faults.add(api="ShareAcknowledge", error="INVALID_SHARE_SESSION_EPOCH", count=1, group=group)
    member = uuid.uuid4().hex[:22]
    with Wire(groupd_broker.port) as w:
        assert _heartbeat(w, group, member, topic)["error_code"] == 15  # injected
        assert _heartbeat(w, group, member, topic)["error_code"] == 0  # count 1: the real answer
        fetch = {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": 0,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1024,
            "max_records": 10,
            "batch_size": 10,
            "topics": [],
            "forgotten_topics_data": [],
        }
        w.pipeline(("ShareFetch", 1, fetch))
        assert w.read()[1]["error_code"] == 30
        ack = {"group_id": group, "member_id": member, "share_session_epoch": 1, "topics": []}
        w.pipeline(("ShareAcknowledge", 1, ack))
        assert w.read()[1]["error_code"] == 123  # INVALID_SHARE_SESSION_EPOCH
    assert faults.list() == []  # each rule injected its count and is gone


def test_share_consumer_gets_every_record_through_share_api_errors_and_delays(groupd_broker: GroupdBroker) -> None:
    group, topic = _names()
    _topic(groupd_broker.bootstrap, topic)
    groupd_broker.group_configs(group, share_auto_offset_reset="earliest")
    _produce(groupd_broker.bootstrap, topic, [f"r{i}" for i in range(20)])
    faults = groupd_broker.faults
    faults.add(api="ShareGroupHeartbeat", error="COORDINATOR_LOAD_IN_PROGRESS", count=2, group=group)
    faults.add(api="ShareFetch", delay_ms=300, count=1, group=group)
    with share_consumer(groupd_broker.bootstrap, group, topic) as c:
        got = poll_until(c, lambda got: len({m.offset() for m in got}) >= 20, timeout=60)
        c.commit_sync(30)
    assert sorted({m.offset() for m in got}) == list(range(20))
    assert faults.list() == []  # both rules used up their counts on the consumer's requests


def _share_member_ids(bootstrap: str, group: str) -> list[str]:
    from groupd.ops.kafka_client import KafkaClient

    with KafkaClient(bootstrap) as client:
        _, resp = client.coordinator(group).send(
            "ShareGroupDescribe", {"group_ids": [group], "include_authorized_operations": False}
        )
    return [m["member_id"] for m in resp["groups"][0]["members"]]


def test_expire_member_fences_a_share_consumer_which_joins_again(groupd_broker: GroupdBroker) -> None:
    group, topic = _names()
    _topic(groupd_broker.bootstrap, topic)
    groupd_broker.group_configs(group, share_auto_offset_reset="earliest")
    _produce(groupd_broker.bootstrap, topic, ["a0", "a1"])
    with share_consumer(groupd_broker.bootstrap, group, topic) as c:
        poll_until(c, lambda got: len(got) >= 2)
        (member,) = _share_member_ids(groupd_broker.bootstrap, group)
        assert groupd_broker.faults.expire_member(group, member) == {
            "action": "expire_member",
            "group": group,
            "member": member,
        }
        # the plugin copies the daemon's output to the log file from a thread: wait for the line
        deadline = time.monotonic() + 10
        while True:
            log = groupd_broker.log_path.read_text(errors="replace")
            if '"share_member_fenced"' in log and member in log:
                break
            assert time.monotonic() < deadline, "no share_member_fenced event for " + member
            time.sleep(0.05)
        with pytest.raises(ControlError):  # gone now: a second expiry names no member
            groupd_broker.faults.expire_member(group, member)
        # ShareGroupHeartbeat answers FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: it joins again and reads on
        _produce(groupd_broker.bootstrap, topic, ["b0", "b1"])
        later = poll_until(c, lambda got: {"b0", "b1"} <= {m.value().decode() for m in got})
        assert {m.value().decode() for m in later} >= {"b0", "b1"}
        # its next heartbeat (share.heartbeat.interval.ms, 5 s) is fenced and it joins again
        deadline = time.monotonic() + 30
        while not _share_member_ids(groupd_broker.bootstrap, group):
            assert time.monotonic() < deadline, "the fenced consumer never joined again"
            c.poll(0.5)


def test_expire_locks_refuses_bad_input(groupd_broker: GroupdBroker) -> None:
    with pytest.raises(ControlError) as e:
        groupd_broker.faults.expire_locks("no-such-group")
    assert e.value.status == 404
    with pytest.raises(ControlError) as e:
        groupd_broker.faults._call("POST", "/actions/expire-locks", {"group": "g", "partition": 0})
    assert e.value.status == 400 and "needs 'topic'" in e.value.message
    with pytest.raises(ControlError) as e:
        groupd_broker.faults._call("POST", "/actions/expire-locks", {"group": "g", "member": "m"})
    assert e.value.status == 400


def test_openapi_describes_expire_locks(groupd_broker: GroupdBroker) -> None:
    import json
    import urllib.request

    assert groupd_broker.control_url is not None
    with urllib.request.urlopen(groupd_broker.control_url.rstrip("/") + "/openapi.json", timeout=10) as resp:
        doc = json.loads(resp.read())
    op = doc["paths"]["/actions/expire-locks"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["required"] == ["group"]
    assert set(op["responses"]) == {"200", "400", "404"}


# --- metrics per share group, and `groupd fault expire-locks` -----------------------------------------


def test_share_group_metrics_of_a_real_daemon_and_the_fault_cli(tmp_path: Path) -> None:
    """A consumer holding 5 records (it stopped polling, its connection open); ``groupd fault
    expire-locks`` releases them (the lock is 30 s by default: nothing else would within the test);
    another consumer gets them again and accepts them."""
    port = free_port()
    d = GroupdProcess(tmp_path / "data", "--metrics-port", str(port), "--control-port", "0").start()
    holder = taker = None
    try:
        (listening,) = d.events("groupd_listening")
        control = str(listening["control"])
        group, topic = _names()
        _topic(d.bootstrap, topic)
        with Wire(d.port) as w:
            w.pipeline(
                (
                    "IncrementalAlterConfigs",
                    1,
                    {
                        "resources": [
                            {
                                "resource_type": 32,
                                "resource_name": group,
                                "configs": [
                                    {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}
                                ],
                            }
                        ],
                        "validate_only": False,
                    },
                )
            )
            assert w.read()[1]["responses"][0]["error_code"] == 0
        _produce(d.bootstrap, topic, [f"r{i}" for i in range(5)])
        holder = Member(d, group, topic, "hold")
        wait_until(lambda: holder.printed("holding"), 30, "the consumer to hold its records")
        s = scrape(port)
        assert value(s, "groupd_share_group_acquired_records", group=group) == 5
        assert value(s, "groupd_share_group_in_flight_records", group=group) == 5
        assert value(s, "groupd_share_group_deliveries_total", group=group) == 5
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["fault", "expire-locks", "--group", group, "--control", control]) == 0
        assert "expired the locks of 5 record(s) in 1 share-partition(s)" in out.getvalue()
        holder.kill()  # after the expiry: its connection closing releases nothing more
        s = scrape(port)
        assert value(s, "groupd_share_group_lock_expiries_total", group=group) == 5
        assert value(s, "groupd_share_group_acquired_records", group=group) == 0
        taker = Member(d, group, topic, "accept")
        wait_until(lambda: len(taker.records()) >= 5, 30, "the records at the second consumer")
        taker.stop()
        assert sorted(taker.records()) == [(o, f"r{o}", 2) for o in range(5)]
        s = scrape(port)
        assert value(s, "groupd_share_group_deliveries_total", group=group) == 10
        assert value(s, "groupd_share_group_redeliveries_total", group=group) == 5
        assert value(s, "groupd_share_group_archived_total", group=group) == 0
        assert value(s, "groupd_share_group_in_flight_records", group=group) == 0
    finally:
        for m in (holder, taker):
            if m is not None:
                m.kill()
        d.stop()
