"""Heartbeat, LeaveGroup and session expiry in every state; static membership (KIP-345, KIP-814)."""

from __future__ import annotations

from harness import Shell, assignment, sub
from test_rebalance import stable_group

PR, CR, S, E = "PreparingRebalance", "CompletingRebalance", "Stable", "Empty"


def in_completing_rebalance():  # type: ignore[no-untyped-def]
    s, (a, b) = stable_group(2, session_timeout_ms=45000)
    a.join()
    b.join()
    assert s.state() == CR
    return s, a, b


def in_preparing_rebalance():  # type: ignore[no-untyped-def]
    s, (a, b) = stable_group(2, session_timeout_ms=45000)
    a.join()
    assert s.state() == PR
    return s, a, b


# -- Heartbeat ----------------------------------------------------------------------------------


def test_heartbeat_answers_per_state() -> None:
    s, (a, b) = stable_group(2)
    assert a.heartbeat() == 0 and b.heartbeat() == 0  # Stable
    a.join()
    assert b.heartbeat() == 27  # PreparingRebalance
    b.join()
    assert s.state() == CR
    assert a.heartbeat() == 0  # CompletingRebalance: fine, Kafka 2.x+ treats it as a normal heartbeat
    a.leave()
    b.leave()
    assert s.state() == E
    b.member_id, b.generation = "gone", s.group().generation
    assert b.heartbeat() == 25  # Empty


def test_heartbeat_errors() -> None:
    _s, (a, _b) = stable_group(2)
    gen = a.generation
    a.generation = gen - 1
    assert a.heartbeat() == 22  # ILLEGAL_GENERATION
    a.generation, a.member_id = gen, "nobody"
    assert a.heartbeat() == 25
    a.group = "no-such-group"
    assert a.heartbeat() == 25
    a.group = ""
    assert a.heartbeat() == 24


def test_heartbeat_keeps_session_alive_and_expiry_rebalances(transitions) -> None:  # type: ignore[no-untyped-def]
    s, (a, b) = stable_group(2)
    for _ in range(5):
        s.advance(9000)
        assert a.heartbeat() == 0 and b.heartbeat() == 0
    s.advance(9000)
    assert a.heartbeat() == 0  # b stops: crashed
    s.advance(1000)
    assert b.member_id not in s.group().members and s.state() == PR
    assert transitions["g"][-1] == PR


def test_expiry_in_stable_rebalances() -> None:
    s, (a, b) = stable_group(2)
    s.advance(9000)
    assert a.heartbeat() == 0
    s.advance(1000)
    assert b.member_id not in s.group().members and s.state() == PR


def test_expiry_in_completing_rebalance_cancels_parked_syncs() -> None:
    s, (a, b) = stable_group(2)
    a.join()
    b.join()
    follower = b if a.is_leader else a
    leader = a if a.is_leader else b
    follower.sync()
    assert s.state() == CR and follower.pending_sync
    s.advance(10000)  # the leader never syncs; the parked follower is kept alive meanwhile
    assert follower.last_sync["error_code"] == 27
    assert leader.member_id not in s.group().members and follower.member_id in s.group().members
    assert s.state() == PR


def test_expiry_in_preparing_rebalance_completes_the_join() -> None:
    s, (a, b) = stable_group(2)
    a.join()
    assert s.state() == PR
    s.advance(10000)  # b neither rejoins nor heartbeats: its session ends before the rebalance timeout
    assert s.state() == CR and b.member_id not in s.group().members and a.generation == 3


def test_expiry_of_pending_member_in_empty_group() -> None:
    s = Shell()
    resp = s.answer(s.send("JoinGroup", 4, s.client("p").join_request(), client_id="p"))
    assert resp["error_code"] == 79 and s.state() == E
    s.advance(10000)
    assert not s.group().pending_join_members and s.state() == E


def test_parked_member_is_not_expired() -> None:
    s, (a, b) = stable_group(2)  # 10 s sessions, 30 s rebalance timeout
    a.join()  # a is parked in JoinGroup; b keeps consuming and heartbeating, slow to rejoin
    for _ in range(3):
        s.advance(9000)
        assert b.heartbeat() == 27
    assert s.now == 27000 and a.member_id in s.group().members  # 27 s parked > a's 10 s session
    b.join()
    assert s.state() == CR and a.generation == b.generation == 3


def test_new_member_join_times_out() -> None:
    s, (a,) = stable_group(1, session_timeout_ms=600000, rebalance_timeout_ms=900000)
    b = s.client("b", session_timeout_ms=600000, rebalance_timeout_ms=900000)
    b.join()
    assert s.state() == PR
    s.advance(300000)  # the new member's 5 minutes run out before the 15 min rebalance timeout
    assert b.last_join["error_code"] == 25 and b.member_id == ""
    assert set(s.group().members) == {a.member_id}


# -- LeaveGroup ---------------------------------------------------------------------------------


def test_leave_in_stable_rebalances(transitions) -> None:  # type: ignore[no-untyped-def]
    s, (a, b) = stable_group(2)
    resp = b.leave()
    assert resp["error_code"] == 0 and resp["members"][0]["error_code"] == 0
    assert s.state() == PR
    a.join()
    assert s.state() == CR and len(s.group().members) == 1


def test_leave_in_completing_rebalance_cancels_parked_syncs() -> None:
    s, a, b = in_completing_rebalance()
    follower, leader = (b, a) if a.is_leader else (a, b)
    follower.sync()
    leader.leave()
    assert follower.last_sync["error_code"] == 27 and s.state() == PR


def test_leave_in_preparing_rebalance_completes_join() -> None:
    s, a, b = in_preparing_rebalance()
    b.leave()
    assert s.state() == CR and a.generation == 3 and a.is_leader


def test_last_leave_makes_group_empty_and_writes_it() -> None:
    s, (a,) = stable_group(1)
    a.leave(version=1)
    assert s.state() == E and s.group().generation == 2
    last = s.records()[-1][1]
    assert last.generation == 2 and last.members == () and last.protocol is None


def test_leave_errors() -> None:
    s, (a, _b) = stable_group(2)
    assert s.answer(s.send("LeaveGroup", 1, {"group_id": "nope", "member_id": "x"}))["error_code"] == 25
    resp = s.answer(
        s.send(
            "LeaveGroup",
            4,
            {
                "group_id": "g",
                "members": [
                    {"member_id": "nobody", "group_instance_id": None},
                    {"member_id": a.member_id, "group_instance_id": None},
                    {"member_id": "", "group_instance_id": "unknown-instance"},
                ],
            },
        )
    )
    assert resp["error_code"] == 0
    assert [m["error_code"] for m in resp["members"]] == [25, 0, 25]
    assert a.member_id not in s.group().members
    v0 = s.answer(s.send("LeaveGroup", 0, {"group_id": "g", "member_id": "nobody"}))
    assert v0 == {"throttle_time_ms": 0, "error_code": 25}


def test_leave_unknown_group_v3_answers_per_member_as_group_coordinator_service_leave_group() -> None:
    """Kafka's GroupCoordinatorService.leaveGroup: a missing group is no top-level error from v3;
    every member named gets UNKNOWN_MEMBER_ID (v0-2 carry it at the top)."""
    s = Shell()
    members = [{"member_id": "m1", "group_instance_id": None}, {"member_id": "", "group_instance_id": "i2"}]
    for version in (3, 4, 5):
        resp = s.answer(s.send("LeaveGroup", version, {"group_id": "nope", "members": members}))
        assert resp["error_code"] == 0
        assert resp["members"] == [
            {"member_id": "m1", "group_instance_id": None, "error_code": 25},
            {"member_id": "", "group_instance_id": "i2", "error_code": 25},
        ]
    assert s.answer(s.send("LeaveGroup", 2, {"group_id": "nope", "member_id": "m1"}))["error_code"] == 25
    assert s.coord.group("nope") is None


def test_pending_member_can_leave() -> None:
    s = Shell()
    resp = s.answer(s.send("JoinGroup", 5, s.client("p").join_request(), client_id="p"))
    pid = resp["member_id"]
    out = s.answer(s.send("LeaveGroup", 3, {"group_id": "g", "members": [{"member_id": pid}]}))
    assert out["members"][0]["error_code"] == 0 and not s.group().pending_join_members


# -- static membership --------------------------------------------------------------------------


def static_group():  # type: ignore[no-untyped-def]
    s = Shell()
    a = s.client("a", instance_id="ia", join_version=9)
    b = s.client("b", instance_id="ib", join_version=9)
    a.join()
    b.join()
    a.join()
    a.sync({a.member_id: assignment("t", 0), b.member_id: assignment("t", 1)})
    b.sync()
    assert s.state() == S and a.is_leader
    return s, a, b


def test_static_member_id_derives_from_instance_id() -> None:
    _s, a, b = static_group()
    assert a.member_id.startswith("ia-") and b.member_id.startswith("ib-")


def test_static_follower_restart_takes_old_place_without_rebalance(transitions) -> None:  # type: ignore[no-untyped-def]
    s, _a, b = static_group()
    gen = s.group().generation
    old_id = b.member_id
    restarted = s.client("b2", instance_id="ib", join_version=9)
    restarted.join()
    assert restarted.last_join["error_code"] == 0
    assert restarted.member_id != old_id and restarted.generation == gen
    assert s.state() == S and s.group().generation == gen and transitions["g"][-1] == S
    assert s.records()[-1][1].members[1].member_id == restarted.member_id  # persisted
    restarted.sync()
    assert restarted.assignment == assignment("t", 1)  # its old partitions
    # The zombie with the old id is fenced everywhere.
    assert b.heartbeat() == 82
    b.sync()
    assert b.last_sync["error_code"] == 82
    b.join()
    assert b.last_join["error_code"] == 82
    b.commit({("t", 1): 5})
    assert b.leave()["members"][0]["error_code"] == 82


def test_static_leader_restart_v9_gets_skip_assignment() -> None:
    s, _a, _b = static_group()
    again = s.client("a2", instance_id="ia", join_version=9)
    again.join()
    resp = again.last_join
    assert resp["skip_assignment"] is True and resp["leader"] == again.member_id and len(resp["members"]) == 2
    assert s.state() == S


def test_static_leader_restart_before_v9_is_told_the_old_leader() -> None:
    s, a, _b = static_group()
    again = s.client("a2", instance_id="ia", join_version=7)
    again.join()
    resp = again.last_join
    assert resp["skip_assignment"] is False and resp["leader"] == a.member_id and resp["members"] == []
    assert s.group().leader_id == again.member_id and s.state() == S


def test_static_rejoin_with_new_protocol_rebalances() -> None:
    s, _a, _b = static_group()
    again = s.client("b2", instance_id="ib", join_version=9, protocols=[("range", sub("t")), ("x", b"")])
    again.join()
    assert s.state() == S  # range still wins, no rebalance
    other = s.client("b3", instance_id="ib", join_version=9, protocols=[("rr", sub("t"))])
    other.join()
    assert other.last_join["error_code"] == 23


def test_static_rejoin_during_completing_rebalance_rebalances() -> None:
    s, a, b = static_group()
    a.join()
    b.join()
    assert s.state() == CR
    again = s.client("b2", instance_id="ib", join_version=9)
    again.join()
    assert s.state() == PR


def test_static_replacement_failed_write_restores_old_member() -> None:
    s, _a, b = static_group()
    s.auto_append = False
    again = s.client("b2", instance_id="ib", join_version=9)
    again.join()
    assert again.pending_join
    s.flush(error=OSError("boom"))
    s.deliver()
    assert again.last_join["error_code"] == 16
    assert b.member_id in s.group().members and b.heartbeat() == 0


def test_leave_by_instance_id_only() -> None:
    s, _a, b = static_group()
    resp = s.answer(
        s.send("LeaveGroup", 4, {"group_id": "g", "members": [{"member_id": "", "group_instance_id": "ib"}]})
    )
    assert resp["members"][0]["error_code"] == 0 and b.member_id not in s.group().members
    assert s.state() == PR


def test_static_member_not_dropped_when_not_rejoining_but_expires() -> None:
    s, a, b = static_group()
    a.join()  # b is static and does not rejoin: the join waits, b is kept
    s.advance(10000)  # b's session expires: removed
    assert b.member_id not in s.group().members
    assert s.state() == CR and a.generation == 3
