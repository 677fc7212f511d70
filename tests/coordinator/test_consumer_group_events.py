"""Issue 28: KIP-848 consumer groups log their changes at info, as Kafka's ``GroupMetadataManager`` does
(a member joins, the epoch is bumped, a target is computed, the group converges, a member leaves or is
fenced), quietly in steady state, and what a client can repeat per request only through the limiter."""

from __future__ import annotations

import logging
from typing import Any

import structlog
from consumer_harness import Shell, image
from groupd.coordinator.consumer.events import ConsumerGroupEvents
from groupd.protocol.ratelimit import LogLimiter
from harness import Shell as CoordinatorShell
from test_consumer_group_coordinator import hb

INFO_EVENTS = {
    "member_joined",
    "member_left",
    "member_fenced",
    "group_epoch_bumped",
    "target_assignment_computed",
    "group_converged",
}


def capture(level: int = logging.INFO) -> tuple[structlog.testing.LogCapture, Any]:
    cap = structlog.testing.LogCapture()
    logger = structlog.wrap_logger(None, processors=[cap], wrapper_class=structlog.make_filtering_bound_logger(level))
    return cap, logger


def names(cap: structlog.testing.LogCapture, since: int = 0) -> list[str]:
    return [e["event"] for e in cap.entries[since:]]


def test_join_bump_assign_converge_leave_fence_in_order() -> None:
    cap, logger = capture()
    s = Shell()
    s.mgr.events.attach(logger)
    a, b = s.client("a"), s.client("b")

    a.heartbeat()
    assert names(cap) == ["member_joined", "group_epoch_bumped", "target_assignment_computed", "group_converged"]
    joined, bumped, computed, converged = cap.entries
    assert joined["group"] == "g" and joined["member"] == "a" and joined["generation"] == 1
    assert joined["protocol"] == "consumer" and joined["topics"] == ["t"]
    assert bumped["from_epoch"] == 0 and bumped["generation"] == 1 and bumped["reason"] == "member_joined"
    assert computed["assignor"] == "uniform" and computed["members"] == 1 and computed["generation"] == 1
    assert converged["generation"] == 1 and converged["members"] == 1 and converged["partitions"] == 6
    assert all(e["log_level"] == "info" for e in cap.entries)

    # b joins: a must give up half before b gets it; the group converges once, when the last step is made
    n = len(cap.entries)
    s.now += 100
    b.heartbeat()
    assert names(cap, n) == ["member_joined", "group_epoch_bumped", "target_assignment_computed"]
    assert cap.entries[n + 2]["changed"] == 2 and cap.entries[n + 2]["members"] == 2
    s.now += 250
    a.heartbeat()  # told to revoke
    assert "group_converged" not in names(cap, n)
    a.heartbeat()  # revoked: its half is released
    b.heartbeat()  # b takes it
    assert names(cap, n).count("group_converged") == 1
    done = cap.entries[-1]
    assert done["event"] == "group_converged" and done["generation"] == 2 and done["duration_ms"] == 250
    assert s.group().state.value == "Stable"

    # steady state: heartbeats log nothing
    n = len(cap.entries)
    for _ in range(5):
        s.now += 5000
        a.heartbeat()
        b.heartbeat()
    assert cap.entries[n:] == []

    # b leaves: member_left, then the epoch is bumped for a; a converges alone
    b.leave()
    assert names(cap, n) == ["member_left", "group_epoch_bumped"]
    assert cap.entries[n]["member"] == "b" and cap.entries[n]["reason"] == "leave"
    assert cap.entries[n + 1]["reason"] == "member_left" and cap.entries[n + 1]["generation"] == 3
    a.heartbeat()
    assert names(cap, n)[-2:] == ["target_assignment_computed", "group_converged"]

    # c joins and never heartbeats again: fenced when its session expires
    n = len(cap.entries)
    c = s.client("c")
    c.heartbeat()
    for _ in range(10):
        s.advance(5000)
        a.heartbeat()
    fenced = [e for e in cap.entries[n:] if e["event"] == "member_fenced"]
    assert len(fenced) == 1 and fenced[0]["member"] == "c" and fenced[0]["reason"] == "session_timeout"
    assert fenced[0]["session_timeout_ms"] == 45000
    after = names(cap, cap.entries.index(fenced[0]))
    assert after[:2] == ["member_fenced", "group_epoch_bumped"]
    assert after.count("group_converged") == 1  # a alone again
    assert {e["event"] for e in cap.entries} <= INFO_EVENTS


def test_a_member_that_does_not_revoke_in_time_is_fenced_for_its_rebalance_timeout() -> None:
    cap, logger = capture()
    s = Shell()
    s.mgr.events.attach(logger)
    a, b = s.client("a"), s.client("b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat(topic_partitions=None)  # told to revoke; never acknowledges
    for _ in range(7):
        s.advance(5000)
        b.heartbeat()
    fenced = [e for e in cap.entries if e["event"] == "member_fenced"]
    assert [(e["member"], e["reason"]) for e in fenced] == [("a", "rebalance_timeout")]
    assert fenced[0]["rebalance_timeout_ms"] == 30000 and fenced[0]["member_epoch"] == 1


def test_static_members_leave_for_a_while_and_are_replaced() -> None:
    cap, logger = capture()
    s = Shell()
    s.mgr.events.attach(logger)
    a = s.client("a", instance_id="i-a")
    a.heartbeat()
    n = len(cap.entries)
    a.leave(epoch=-2)
    assert names(cap, n) == ["member_left"]
    assert cap.entries[n]["reason"] == "static_temporary_leave" and cap.entries[n]["instance"] == "i-a"
    n = len(cap.entries)
    a2 = s.client("a2", instance_id="i-a")
    a2.heartbeat()
    fenced, joined = cap.entries[n], cap.entries[n + 1]
    assert fenced["event"] == "member_fenced" and fenced["member"] == "a"
    assert fenced["reason"] == "static_member_replaced" and fenced["replaced_by"] == "a2"
    assert joined["event"] == "member_joined" and joined["member"] == "a2" and joined["replaces"] == "a"
    assert joined["instance"] == "i-a"


def test_topic_changes_and_subscription_changes_say_why_the_epoch_moved() -> None:
    cap, logger = capture()
    s = Shell(topics=image(1, t=6, u=2))
    s.mgr.events.attach(logger)
    a = s.client("a")
    a.heartbeat()
    a.heartbeat(subscribed_topic_names=["t", "u"])
    s.set_topics(image(2, t=8, u=2))
    a.heartbeat()
    reasons = [e["reason"] for e in cap.entries if e["event"] == "group_epoch_bumped"]
    assert reasons == ["member_joined", "subscription_changed", "topic_metadata_changed"]


def test_reconciliation_steps_are_debug_only() -> None:
    cap, logger = capture(logging.DEBUG)
    s = Shell()
    s.mgr.events.attach(logger)
    a, b = s.client("a"), s.client("b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()
    steps = [e for e in cap.entries if e["event"] == "member_assignment_updated"]
    assert steps and all(e["log_level"] == "debug" for e in steps)
    assert steps[-1]["member"] == "a" and steps[-1]["state"] == "UNREVOKED_PARTITIONS"


def test_a_fenced_zombie_heartbeating_is_one_line_per_interval() -> None:
    cap, logger = capture()
    clock = [0.0]
    s = Shell()
    s.mgr.events.attach(logger, LogLimiter(logger, 10.0, clock=lambda: clock[0]))
    a = s.client("a")
    a.heartbeat()
    n = len(cap.entries)
    for _ in range(50):
        resp = a.heartbeat(member_epoch=a.epoch + 5)  # a newer epoch than the coordinator's: fenced
        assert resp["error_code"] == 110
    assert names(cap, n) == ["heartbeat_refused"]
    line = cap.entries[n]
    assert line["error"] == "FENCED_MEMBER_EPOCH" and line["group"] == "g" and line["member"] == "a"
    clock[0] = 11.0
    a.heartbeat(member_epoch=a.epoch + 5)
    assert names(cap, n) == ["heartbeat_refused"] * 2 and cap.entries[-1]["suppressed"] == 49
    # a known member sending epoch 0 again and again: member_rejoined, limited the same way
    n = len(cap.entries)
    for _ in range(20):
        rejoin = a.heartbeat(
            member_epoch=0, rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[]
        )
        assert rejoin["error_code"] == 0
    assert names(cap, n) == ["member_rejoined"]


def test_convergence_is_logged_once_per_epoch_even_after_a_temporary_leave() -> None:
    cap, logger = capture()
    s = Shell()
    s.mgr.events.attach(logger)
    a = s.client("a", instance_id="i-a")
    a.heartbeat()
    a.leave(epoch=-2)
    a.epoch = 0
    a.heartbeat()  # back under the same member id, at the same epoch
    assert names(cap).count("group_converged") == 1


def test_a_core_without_a_logger_logs_nothing_and_works() -> None:
    s = Shell()
    assert isinstance(s.mgr.events, ConsumerGroupEvents)
    a = s.client("a")
    assert a.heartbeat()["error_code"] == 0


def test_the_coordinator_wires_its_logger_and_limiter_into_the_consumer_groups() -> None:
    cap, logger = capture()
    shell = CoordinatorShell(topics_image=lambda: image(1, t=4), logger=logger)
    first = hb(shell, "m1")
    assert first["error_code"] == 0 and first["member_epoch"] == 1
    events = names(cap)
    for name in ("member_joined", "group_epoch_bumped", "target_assignment_computed", "group_converged"):
        assert name in events, name
    joined = next(e for e in cap.entries if e["event"] == "member_joined")
    assert joined["group"] == "cg" and joined["member"] == "m1" and joined["client_id"] == "client"
    n = len(cap.entries)
    for _ in range(5):
        shell.now += 1000
        assert hb(shell, "m1", epoch=1, owned=[0, 1, 2, 3])["error_code"] == 0
    assert cap.entries[n:] == []  # steady state
    for _ in range(30):
        assert hb(shell, "m1", epoch=7, owned=[])["error_code"] == 110
    assert names(cap, n) == ["heartbeat_refused"]
    shell.now += 10_001  # the limiter runs on the coordinator's clock
    hb(shell, "m1", epoch=7, owned=[])
    assert names(cap, n) == ["heartbeat_refused"] * 2 and cap.entries[-1]["suppressed"] == 29


def test_classic_members_of_a_consumer_group_join_and_are_fenced_on_their_timeouts() -> None:
    from test_consumer_migration import REBALANCE_IN_PROGRESS, classic_pair, shell_with

    cap, logger = capture()
    shell = shell_with(logger=logger)
    a, b = classic_pair(shell)
    n = len(cap.entries)
    hb(shell, "m1", group="g")  # upgrades the group; m1 joins it
    assert a.heartbeat() == REBALANCE_IN_PROGRESS
    joined = [e for e in cap.entries[n:] if e["event"] == "member_joined"]
    assert [(e["member"], e["protocol"]) for e in joined] == [("m1", "consumer")]
    c = shell.client("c", join_version=7, sync_version=5)
    c.member_id = shell.answer(shell.send("JoinGroup", 7, c.join_request()))["member_id"]
    c.join()
    joined = [e for e in cap.entries[n:] if e["event"] == "member_joined"]
    assert [(e["member"], e["protocol"]) for e in joined][-1] == (c.member_id, "classic")
    # the classic members go silent; m1 keeps heartbeating
    epoch = hb(shell, "m1", 0, group="g")["member_epoch"]
    for _ in range(7):
        shell.advance(5000)
        epoch = hb(shell, "m1", epoch, [], group="g")["member_epoch"]
    fenced = {e["member"]: e["reason"] for e in cap.entries[n:] if e["event"] == "member_fenced"}
    # their sessions (10 s) run out before their rebalance timeouts
    assert fenced == {m: "session_timeout" for m in (a.member_id, b.member_id, c.member_id)}


def test_a_regex_resolved_later_bumps_the_epoch_with_its_reason() -> None:
    cap, logger = capture()
    s = Shell()
    s.mgr.events.attach(logger)
    a = s.client("a", topics=[], regex="t.*")
    a.heartbeat()
    s.advance(1)  # the resolution is a deadline due at once (Kafka's executor)
    a.heartbeat()
    bumps = [e for e in cap.entries if e["event"] == "group_epoch_bumped"]
    assert [e["reason"] for e in bumps][-1] == "regex_resolved"
    joined = next(e for e in cap.entries if e["event"] == "member_joined")
    assert joined["regex"] == "t.*" and joined["topics"] == []
    assert names(cap)[-1] == "group_converged"
