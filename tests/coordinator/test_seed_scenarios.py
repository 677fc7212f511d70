"""The seeds' scenarios (seed 001: three consumers, lost JoinGroup answers, SyncGroup during a rebalance).

The seeds describe Kafka 0.10; groupd is Kafka 3.x/4.x, where a new group starts Empty rather than
Stable and a group whose members all leave goes back to Empty through a last (memberless) join
phase. Otherwise the state sequences are the seeds'.
"""

from __future__ import annotations

from harness import Shell, assignment

PR, CR, S, E = "PreparingRebalance", "CompletingRebalance", "Stable", "Empty"


def leader_sync(leader, clients, topic="t"):  # type: ignore[no-untyped-def]
    """The leader assigns partition i to the i-th member of its member list."""
    plan = {m["member_id"]: assignment(topic, i) for i, m in enumerate(leader.members)}
    leader.sync(plan)
    return plan


def test_three_consumers_one_rebalance(transitions):  # type: ignore[no-untyped-def]
    """Scenario 1: c3's join is handled first and completes alone; c2 and c1 arrive before c3 syncs."""
    s = Shell()
    c1, c2, c3 = s.client("consumer-1"), s.client("consumer-2"), s.client("consumer-3")

    c3.join()  # (1)(2) the first join completes at once (initial delay 0): c3 is leader of gen 1
    assert (s.state(), c3.generation, c3.is_leader) == (CR, 1, True)
    c2.join()  # (3) back to PreparingRebalance: the join cannot complete without c3
    assert s.state() == PR and c2.pending_join is not None
    c1.join()  # (4)
    assert s.state() == PR and c1.pending_join is not None
    c3.sync({c3.member_id: assignment("t", 0, 1, 2)})  # (4) c3's assignment for gen 1 is void
    assert c3.last_sync["error_code"] == 27  # REBALANCE_IN_PROGRESS
    c3.join()  # (5)(6) c3 rejoins: everyone has joined, the join completes for all three
    for c in (c1, c2):
        assert c.last_join["error_code"] == 0
    assert {c.generation for c in (c1, c2, c3)} == {2}
    assert c3.is_leader and len(c3.members) == 3 and c1.members == [] and c2.members == []
    c2.sync()
    c1.sync()
    assert c1.pending_sync is not None and c2.pending_sync is not None  # followers wait for the leader
    plan = leader_sync(c3, (c1, c2, c3))  # (7)(8)
    for c in (c1, c2, c3):
        assert c.last_sync["error_code"] == 0
        assert c.assignment == plan[c.member_id]
    assert transitions["g"] == [E, PR, CR, PR, CR, S]
    # Each consumer received exactly one successful assignment: one partition assignment in total.
    assert len([r for r in s.records() if r[1] is not None and r[1].members]) == 1

    for c in (c1, c2, c3):  # (9) the application closes
        c.leave()
    assert transitions["g"][6:] == [PR, E]
    assert s.group().generation == 3


def test_three_consumers_two_rebalances(transitions):  # type: ignore[no-untyped-def]
    """Scenario 2: c1 forms the group alone; c2 and c3 start a second rebalance together."""
    s = Shell()
    c1, c2, c3 = s.client("consumer-1"), s.client("consumer-2"), s.client("consumer-3")
    c1.join()
    leader_sync(c1, [c1])  # (1) first rebalance: all three partitions to c1
    assert c1.last_sync["error_code"] == 0 and s.state() == S
    s.advance(1000)
    c2.join()  # (2)
    c3.join()  # (3)
    assert s.state() == PR
    assert c1.heartbeat() == 27  # how the busy c1 learns it must rejoin
    c1.join()  # (4) the delayed join completes for all three
    assert c1.is_leader and {c.generation for c in (c1, c2, c3)} == {2}
    plan = leader_sync(c1, [c1, c2, c3])  # (5)
    c2.sync()  # (6) the leader already synced: followers are answered at once
    c3.sync()
    for c in (c1, c2, c3):
        assert c.last_sync["error_code"] == 0 and c.assignment == plan[c.member_id]
    assert transitions["g"] == [E, PR, CR, S, PR, CR, S]


def test_three_consumers_three_rebalances(transitions):  # type: ignore[no-untyped-def]
    """Scenario 3: each consumer joins after the previous rebalance finished."""
    s = Shell()
    c1, c2, c3 = s.client("consumer-1"), s.client("consumer-2"), s.client("consumer-3")
    c1.join()
    leader_sync(c1, [c1])  # (1)
    s.advance(1000)
    c2.join()  # (2)
    c1.join()  # (3)
    leader_sync(c1, [c1, c2])
    c2.sync()  # (4)
    assert s.state() == S and c2.last_sync["error_code"] == 0
    s.advance(2000)
    c3.join()  # (5)
    assert s.state() == PR
    c1.join()
    c2.join()  # (6)
    assert {c.generation for c in (c1, c2, c3)} == {3}
    plan = leader_sync(c1, [c1, c2, c3])
    c2.sync()
    c3.sync()  # (7)
    for c in (c1, c2, c3):
        assert c.last_sync["error_code"] == 0 and c.assignment == plan[c.member_id]
    assert transitions["g"] == [E, PR, CR, S, PR, CR, S, PR, CR, S]


def _three_in_completing_rebalance(lose: str) -> tuple[Shell, list]:  # type: ignore[type-arg]
    """Gen 1 has c1 alone; c2 and c3 join, c1 rejoins: gen 2 is CompletingRebalance."""
    s = Shell()
    cs = [s.client(f"consumer-{i}") for i in (1, 2, 3)]
    cs[0].join()
    leader_sync(cs[0], cs[:1])
    cs[1].join()
    cs[2].join()
    {c.name: c for c in cs}[lose].lose_next_join = True
    cs[0].join()
    assert s.state() == CR
    return s, cs


def test_follower_misses_join_response(transitions):  # type: ignore[no-untyped-def]
    """The follower that lost its JoinGroup answer rejoins in Stable and is answered at once."""
    s, (c1, c2, c3) = _three_in_completing_rebalance(lose="consumer-3")  # (1)(2)
    assert c3.generation == -1 and c3.member_id != ""  # it knows its id from MEMBER_ID_REQUIRED
    c2.sync()  # (3) parked
    plan = leader_sync(c1, [c1, c2, c3])  # (4) Stable
    assert c1.last_sync["error_code"] == 0 and c2.last_sync["error_code"] == 0  # (5)
    assert s.state() == S
    c3.join()  # (6)(7) answered at once with the current generation, no rebalance
    assert c3.generation == 2 and not c3.is_leader and s.state() == S
    c3.sync()  # (8)(9)
    assert c3.last_sync["error_code"] == 0 and c3.assignment == plan[c3.member_id]
    assert transitions["g"][-3:] == [PR, CR, S] and s.group().generation == 2


def test_leader_misses_join_response(transitions):  # type: ignore[no-untyped-def]
    """The leader that lost its JoinGroup answer rejoins in CompletingRebalance and gets it again."""
    s, (c1, c2, c3) = _three_in_completing_rebalance(lose="consumer-1")  # (1)(2)
    assert c1.generation == 1 and c2.generation == c3.generation == 2
    c2.sync()
    c3.sync()  # (3) both parked: nobody can assign
    assert s.state() == CR and c2.pending_sync and c3.pending_sync
    c1.join()  # (4)(5) answered at once, as leader, with the member list
    assert c1.is_leader and c1.generation == 2 and len(c1.members) == 3 and s.state() == CR
    plan = leader_sync(c1, [c1, c2, c3])  # (6)(7)
    for c in (c1, c2, c3):
        assert c.last_sync["error_code"] == 0 and c.assignment == plan[c.member_id]
    assert s.state() == S and s.group().generation == 2
    assert transitions["g"][-3:] == [PR, CR, S]


def test_sync_during_preparing_rebalance_gets_rebalance_in_progress(transitions):  # type: ignore[no-untyped-def]
    """Seed: the leader is still assigning when a new member joins; its SyncGroup is refused."""
    s = Shell()
    c1, c2 = s.client("c1"), s.client("c2")
    c1.join()  # (1)
    c2.join()  # (2)
    assert s.state() == PR
    c1.sync({c1.member_id: assignment("t", 0)})  # (3)(4)
    assert c1.last_sync["error_code"] == 27
    c1.join()  # (5)
    assert s.state() == CR and c1.generation == c2.generation == 2


def test_follower_sync_order_before_and_after_leader(transitions):  # type: ignore[no-untyped-def]
    """Seed: followers synced before the leader are answered with it; a later one at once."""
    s = Shell()
    c1, c2, c3 = s.client("c1"), s.client("c2"), s.client("c3")
    c1.join()
    leader_sync(c1, [c1])
    c2.join()
    c3.join()
    c1.join()
    c2.sync()  # (1)
    plan = leader_sync(c1, [c1, c2, c3])  # (2)(3)(4)
    assert c2.last_sync["assignment"] == plan[c2.member_id]
    assert c3.sync_answers == []
    c3.sync()  # (5)
    assert c3.last_sync["assignment"] == plan[c3.member_id]
