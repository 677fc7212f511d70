"""The embedded consumer protocol decoder; the deadline heap; structured logging."""

from __future__ import annotations

import logging
import struct

import pytest
import structlog
from groupd.coordinator import CoordinatorConfig
from groupd.coordinator.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupd.coordinator.timers import Deadlines
from harness import Shell, assignment
from hypothesis import given
from hypothesis import strategies as st

names = st.text(min_size=0, max_size=8)
tps = st.lists(
    st.builds(TopicPartitions, names, st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4).map(tuple)),
    max_size=3,
).map(tuple)


@given(
    version=st.integers(0, 3),
    topics=st.lists(names, max_size=4).map(tuple),
    user_data=st.none() | st.binary(max_size=8),
    owned=tps,
    generation=st.integers(-1, 1000),
    rack=st.none() | names,
)
def test_subscription_round_trip(version, topics, user_data, owned, generation, rack) -> None:  # type: ignore[no-untyped-def]
    sub = Subscription(
        topics,
        user_data,
        owned if version >= 1 else (),
        generation if version >= 2 else -1,
        rack if version >= 3 else None,
        version,
    )
    assert decode_subscription(encode_subscription(sub)) == sub


@given(version=st.integers(0, 3), parts=tps, user_data=st.none() | st.binary(max_size=8))
def test_assignment_round_trip(version, parts, user_data) -> None:  # type: ignore[no-untyped-def]
    a = Assignment(parts, user_data, version)
    assert decode_assignment(encode_assignment(a)) == a


def test_known_bytes_from_a_java_client() -> None:
    # ConsumerProtocol.serializeSubscription(new Subscription(["t"]), v0) as the Java client writes it.
    v0 = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(v0) == Subscription(("t",), None, (), -1, None, 0)


def test_newer_version_read_as_known_prefix() -> None:
    newer = struct.pack(">h", 7) + encode_subscription(Subscription(("a",), b"u", (), 5, "r", 3))[2:] + b"future"
    got = decode_subscription(newer)
    assert (got.topics, got.user_data, got.generation_id, got.rack_id, got.version) == (
        ("a",),
        b"u",
        5,
        "r",
        7,
    )
    a = decode_assignment(struct.pack(">h", 9) + encode_assignment(Assignment((), None, 3))[2:] + b"more")
    assert a.assigned_partitions == () and a.version == 9


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\xff\xff",
        b"\x00\x00\x7f\xff\xff\xff",
        b"\x00\x00\x00\x00\x00\x01\x00\x05ab",
        b"\x00\x00\xff\xff\xff\xff",
    ],
)
def test_garbage_is_a_clean_error(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def test_undecodable_subscription_does_not_break_the_group() -> None:
    s = Shell()
    c = s.client("c", protocols=[("range", b"\x00")])
    c.join()
    c.sync({c.member_id: b""})
    assert s.state() == "Stable" and s.group().subscribed_topics is None


# -- deadlines ------------------------------------------------------------------------------------


def test_deadline_extension_does_not_push() -> None:
    d = Deadlines()
    for m in range(1000):
        d.set(("hb", m), 10000)
    heap_size = len(d._heap)
    for now in range(0, 9000, 1000):  # every member heartbeats every second
        for m in range(1000):
            d.set(("hb", m), now + 10000)
    assert len(d._heap) == heap_size  # no churn
    assert d.pop_due(9999) is None
    assert d.pop_due(10000) is None  # the entries are re-checked and re-armed at 18000
    assert len(d._heap) == heap_size
    assert d.next_deadline() == 18000


def test_deadline_shortening_and_cancel() -> None:
    d = Deadlines()
    d.set("a", 100)
    d.set("a", 50)
    d.set("b", 70)
    d.cancel("b")
    assert d.next_deadline() == 50
    assert d.pop_due(60) == "a"
    assert d.pop_due(1000) is None and len(d) == 0


def test_heartbeats_of_many_members_keep_heap_small() -> None:
    s = Shell(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    cs = [s.client(f"c{i}") for i in range(200)]
    for c in cs:
        c.join(version=3)
    s.advance(6000)  # two steps of the initial delay: everyone is in generation 1
    leader = next(c for c in cs if c.is_leader)
    leader.sync({})
    for c in cs:
        if not c.is_leader:
            c.sync()
    size = len(s.coord._deadlines._heap)
    for _ in range(20):
        s.advance(1000)
        for c in cs:
            assert c.heartbeat() == 0
    assert len(s.coord._deadlines._heap) <= size


# -- logging --------------------------------------------------------------------------------------


def test_structured_events_for_a_rebalance() -> None:
    cap = structlog.testing.LogCapture()
    logger = structlog.wrap_logger(
        None, processors=[cap], wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG)
    )
    s = Shell(logger=logger)
    a, b = s.client("a"), s.client("b")
    a.join()
    a.sync({a.member_id: assignment("t", 0)})
    b.join()
    s.advance(1500)
    a.join()
    a.sync({})
    b.sync()
    b.leave()
    s.advance(30000)
    events = [e["event"] for e in cap.entries]
    for name in (
        "member_joined",
        "rebalance_started",
        "join_phase_completed",
        "rebalance_completed",
        "member_left",
    ):
        assert name in events, name
    done = [e for e in cap.entries if e["event"] == "rebalance_completed"][-1]
    assert done["group"] == "g" and done["generation"] == 2 and done["members"] == 2
    assert done["protocol"] == "range" and done["duration_ms"] == 1500
    assert any(e["event"] == "member_expired" and e["member"] == a.member_id for e in cap.entries)
    levels = {e["event"]: e["log_level"] for e in cap.entries}
    assert levels["rebalance_started"] == "info"
