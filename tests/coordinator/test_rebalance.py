"""JoinGroup / SyncGroup behaviour, one test per rule (Kafka's GroupMetadataManager, classic groups)."""

from __future__ import annotations

import pytest
from groupd.coordinator import CoordinatorConfig
from groupd.coordinator.classic.group import ClassicGroup, GroupState, IllegalStateTransition
from harness import Shell, assignment, sub

PR, CR, S, E = "PreparingRebalance", "CompletingRebalance", "Stable", "Empty"


def stable_group(n: int, shell: Shell | None = None, **kw):  # type: ignore[no-untyped-def]
    s = shell or Shell()
    cs = [s.client(f"c{i}", **kw) for i in range(1, n + 1)]
    cs[0].join()
    for c in cs[1:]:
        c.join()
    for c in cs:
        if c.pending_join is None and s.state() == PR:
            c.join()
    leader = next(c for c in cs if c.is_leader)
    leader.sync({m["member_id"]: assignment("t", i) for i, m in enumerate(leader.members)})
    for c in cs:
        if not c.is_leader:
            c.sync()
    assert s.state() == S, s.state()
    return s, cs


# -- the state table --------------------------------------------------------------------------


def test_illegal_transition_raises_with_the_rule() -> None:
    g = ClassicGroup("g", GroupState.EMPTY, 0)
    with pytest.raises(IllegalStateTransition, match="Empty -> Stable"):
        g.transition_to(GroupState.STABLE, 1)
    g.transition_to(GroupState.PREPARING_REBALANCE, 1)
    g.transition_to(GroupState.COMPLETING_REBALANCE, 2)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(GroupState.EMPTY, 3)
    g.transition_to(GroupState.DEAD, 3)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(GroupState.PREPARING_REBALANCE, 4)


# -- join validation ----------------------------------------------------------------------------


def test_invalid_session_timeout() -> None:
    s = Shell()
    for timeout in (5999, 1800001):
        c = s.client("c", session_timeout_ms=timeout)
        c.join()
        assert c.last_join["error_code"] == 26
    assert s.coord.group("g") is None


def test_empty_group_id_is_invalid() -> None:
    s = Shell()
    c = s.client("c", group="")
    c.join()
    assert c.last_join["error_code"] == 24


def test_join_v7_empty_protocol_name_is_null() -> None:
    # The JoinGroupResponse constructor: from v7 (nullable) an empty protocol name is sent as null,
    # below v7 a null one as "".
    for version, expected in ((6, ""), (7, None), (9, None)):
        s = Shell()
        c = s.client("c", protocols=[("", sub("t"))], join_version=version)
        c.join()
        s.advance(0)
        assert c.last_join["error_code"] == 0, c.last_join
        assert c.last_join["protocol_name"] == expected, version
        assert s.group().protocol_name == ""


def test_member_id_required_v4_only() -> None:
    s = Shell()
    ctx = s.send("JoinGroup", 4, s.client("a").join_request(), client_id="a")
    resp = s.answer(ctx)
    assert resp["error_code"] == 79 and resp["member_id"] == "a-uuid1"
    assert s.group().pending_join_members == {"a-uuid1"}
    old = s.client("b", join_version=3)
    old.join()
    assert old.last_join["error_code"] == 0 and old.member_id == "b-uuid2"


def test_pending_member_blocks_join_until_it_expires() -> None:
    s = Shell()
    c1 = s.client("c1")
    c1.join()
    c1.sync({c1.member_id: b"x"})
    ghost = s.send("JoinGroup", 5, s.client("ghost").join_request(), client_id="ghost")
    assert s.answer(ghost)["error_code"] == 79  # and it never comes back
    c2 = s.client("c2")
    c2.join()
    c1.join()
    assert s.state() == PR  # waiting for the pending member too
    s.advance(10000)  # its session timeout
    assert s.state() == CR and c1.generation == 2 and c2.generation == 2
    assert not s.group().pending_join_members


def test_unknown_member_id_for_missing_group() -> None:
    s = Shell()
    c = s.client("c", member_id="stale-id")
    c.join()
    assert c.last_join["error_code"] == 25


def test_protocol_type_must_match() -> None:
    s, _ = stable_group(1)
    other = s.client("x", protocol_type="connect")
    other.join()
    assert other.last_join["error_code"] == 23


def test_no_common_protocol_is_inconsistent() -> None:
    s, _ = stable_group(1)
    other = s.client("x", protocols=[("roundrobin", sub("t"))])
    other.join()
    assert other.last_join["error_code"] == 23


def test_empty_protocol_type_or_list_refused_on_empty_group() -> None:
    s = Shell()
    a = s.client("a", protocol_type="")
    a.join()
    b = s.client("b", protocols=[])
    b.join()
    assert a.last_join["error_code"] == b.last_join["error_code"] == 23


def test_protocol_selected_by_vote() -> None:
    s = Shell()
    both = [("range", sub("t")), ("roundrobin", sub("t"))]
    rr_first = [("roundrobin", sub("t")), ("range", sub("t"))]
    a = s.client("a", protocols=both)
    b = s.client("b", protocols=rr_first)
    c = s.client("c", protocols=rr_first)
    a.join()
    b.join()
    c.join()
    a.join()
    assert s.group().protocol_name == "roundrobin"
    assert a.last_join["protocol_name"] == "roundrobin"


# Ties as Kafka's ClassicGroup.selectProtocol breaks them: the votes are counted in a HashMap and
# Stream.max keeps the first of equal maxima in that map's iteration order. The expected winners
# were computed by running selectProtocol's code (java.util.HashMap members and votes, Kafka 4)
# under OpenJDK on the same member ids and preference lists.
@pytest.mark.parametrize(
    ("x_prefers", "y_prefers", "winner"),
    [
        # Different buckets ("range" 9, "roundrobin" 10 of 16): the lower bucket wins, whoever voted first.
        (("roundrobin", "range"), ("range", "roundrobin"), "range"),
        (("range", "roundrobin"), ("roundrobin", "range"), "range"),
        # One bucket ("a" and "q" both 1): the first vote in the members map's order (y-uuid2 before x-uuid1).
        (("a", "q"), ("q", "a"), "q"),
        (("q", "a"), ("a", "q"), "a"),
    ],
)
def test_protocol_vote_tie_broken_as_kafka(x_prefers: tuple[str, str], y_prefers: tuple[str, str], winner: str) -> None:
    s = Shell()
    x = s.client("x", protocols=[(p, sub("t")) for p in x_prefers])
    y = s.client("y", protocols=[(p, sub("t")) for p in y_prefers])
    x.join()
    y.join()
    x.join()
    assert (x.member_id, y.member_id) == ("x-uuid1", "y-uuid2")
    assert s.state() == CR and s.group().protocol_name == winner
    assert x.last_join["protocol_name"] == y.last_join["protocol_name"] == winner


def test_protocol_vote_tie_after_the_group_shrank() -> None:
    # Kafka's members HashMap grew to 32 buckets with 14 members and never shrinks: with only m0
    # and m1 left it iterates m1-uuid2 first (at 16 buckets it would be m0-uuid1), so m1's
    # favourite wins the 1:1 tie (OpenJDK run of selectProtocol: "q").
    s = Shell()
    ms = [
        s.client(f"m{i}", protocols=[(p, sub("t")) for p in (("q", "a") if i == 1 else ("a", "q"))]) for i in range(14)
    ]
    for m in ms:
        m.join()
    for m in ms:
        if m.pending_join is None and s.state() == PR:
            m.join()
    assert [m.member_id for m in ms[:2]] == ["m0-uuid1", "m1-uuid2"] and s.state() == CR
    for m in ms[2:]:
        m.leave()
    ms[0].join()
    ms[1].join()
    assert s.state() == CR and len(s.group().members) == 2
    assert s.group().protocol_name == "q"


def test_group_max_size() -> None:
    s = Shell(config=CoordinatorConfig(group_max_size=2))
    stable_group(2, s)
    extra = s.client("c3")
    extra.join()
    assert extra.last_join["error_code"] == 81 and len(s.group().members) == 2


# -- the delayed join ---------------------------------------------------------------------------


def test_leader_gets_member_list_followers_do_not() -> None:
    _s, (c1, c2, c3) = stable_group(3)
    assert c1.is_leader
    assert sorted(m["member_id"] for m in c1.members) == sorted(c.member_id for c in (c1, c2, c3))
    assert all(m["metadata"] == sub("t") for m in c1.members)
    assert c2.members == [] and c3.members == []


def test_leader_kept_when_it_rejoins() -> None:
    s, (c1, c2) = stable_group(2)
    c3 = s.client("c3")
    c3.join()
    c2.join()
    c1.join()
    assert c1.is_leader and c3.leader == c1.member_id


def test_new_leader_elected_when_leader_does_not_rejoin() -> None:
    s, (c1, c2) = stable_group(2, session_timeout_ms=45000)
    c3 = s.client("c3", session_timeout_ms=45000)
    c3.join()
    c2.join()
    s.advance(30000)  # rebalance timeout: c1 is removed
    assert c1.member_id not in s.group().members
    assert s.group().leader_id in (c2.member_id, c3.member_id)
    assert s.state() == CR and c2.generation == 3


def test_join_completes_at_rebalance_timeout_removing_laggards(transitions) -> None:  # type: ignore[no-untyped-def]
    s, (c1, c2, _c3) = stable_group(3, session_timeout_ms=45000)
    c1.join()  # the leader asks for a rebalance
    c2.join()
    s.advance(29999)
    assert s.state() == PR
    s.advance(1)
    assert s.state() == CR and set(s.group().members) == {c1.member_id, c2.member_id}
    assert c1.generation == 3 and len(c1.members) == 2


def test_rebalance_timeout_is_the_largest_among_members() -> None:
    s = Shell()
    a = s.client("a", rebalance_timeout_ms=5000, session_timeout_ms=90000)
    b = s.client("b", rebalance_timeout_ms=60000, session_timeout_ms=90000)
    a.join()
    a.sync({})
    b.join()
    assert s.group().rebalance_timeout_ms() == 60000
    s.advance(59999)
    assert s.state() == PR
    s.advance(1)
    assert s.state() == CR and a.member_id not in s.group().members


def test_initial_rebalance_delay_steps() -> None:
    s = Shell(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    cs = [s.client(f"c{i}", rebalance_timeout_ms=10000) for i in range(4)]
    cs[0].join()  # t=0: first step ends at 3000, 7000 left
    s.advance(2000)
    cs[1].join()  # t=2000
    s.advance(1000)  # t=3000: someone arrived -> extend to 6000 (4000 left)
    assert s.state() == PR
    s.advance(2000)
    cs[2].join()  # t=5000
    s.advance(1000)  # t=6000: extend to 9000 (1000 left)
    assert s.state() == PR
    s.advance(2000)
    cs[3].join()  # t=8000
    s.advance(1000)  # t=9000: extend by the 1000 left, to 10000 = the rebalance timeout
    assert s.state() == PR
    s.advance(999)
    assert s.state() == PR
    s.advance(1)
    assert s.state() == CR and all(c.generation == 1 for c in cs)


def test_initial_rebalance_delay_completes_when_nobody_new_arrives() -> None:
    s = Shell(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    a, b = s.client("a"), s.client("b")
    a.join()
    b.join()  # joined during the first step: all have joined, but the step still runs out first
    s.advance(2999)
    assert s.state() == PR
    s.advance(1)  # b arrived during step 1 -> one more step
    assert s.state() == PR
    s.advance(3000)
    assert s.state() == CR and a.generation == b.generation == 1


# -- the sync phase -----------------------------------------------------------------------------


def test_missing_member_gets_empty_assignment() -> None:
    s = Shell()
    a, b = s.client("a"), s.client("b")
    a.join()
    b.join()
    a.join()
    b.sync()
    a.sync({a.member_id: assignment("t", 0)})  # b left out
    assert b.last_sync["error_code"] == 0 and b.assignment == b""
    assert a.assignment == assignment("t", 0)


def test_sync_timeout_removes_members_that_never_sync(transitions) -> None:  # type: ignore[no-untyped-def]
    s = Shell()
    a, b = s.client("a", session_timeout_ms=45000), s.client("b", session_timeout_ms=45000)
    a.join()
    b.join()
    a.join()
    a.sync({a.member_id: b"1", b.member_id: b"2"})
    assert s.state() == S
    s.advance(29999)  # b heartbeats but never sends SyncGroup
    assert b.heartbeat() == 0
    s.advance(1)
    assert b.member_id not in s.group().members and s.state() == PR


def test_sync_errors() -> None:
    s, (a, b) = stable_group(2)
    assert (
        s.answer(s.send("SyncGroup", 3, {"group_id": "nope", "generation_id": 1, "member_id": "x"}))["error_code"] == 25
    )
    b.generation = 7
    b.sync()
    assert b.last_sync["error_code"] == 22
    b.generation = a.generation
    b.member_id = "who"
    b.sync()
    assert b.last_sync["error_code"] == 25


def test_sync_v5_protocol_checks() -> None:
    s, (_a, b) = stable_group(2)
    req = {"group_id": "g", "generation_id": b.generation, "member_id": b.member_id, "assignments": []}
    for ptype, pname in (("consumer", "roundrobin"), ("connect", "range")):
        resp = s.answer(s.send("SyncGroup", 5, {**req, "protocol_type": ptype, "protocol_name": pname}))
        assert resp["error_code"] == 23
    ok = s.answer(s.send("SyncGroup", 5, {**req, "protocol_type": "consumer", "protocol_name": "range"}))
    assert ok["error_code"] == 0 and ok["protocol_name"] == "range" and ok["protocol_type"] == "consumer"
    # Before v5 the fields do not exist and are not checked.
    old = s.answer(s.send("SyncGroup", 4, {**req, "protocol_type": "x", "protocol_name": "y"}))
    assert old["error_code"] == 0


def test_sync_v5_without_protocol_type_or_name_is_inconsistent_before_anything_else() -> None:
    # KafkaApis.handleSyncGroupRequest: !areMandatoryProtocolTypeAndNamePresent() is answered
    # INCONSISTENT_GROUP_PROTOCOL before the ACL check and before the coordinator sees the group.
    s, (_a, b) = stable_group(2)
    good = {"group_id": "g", "generation_id": b.generation, "member_id": b.member_id, "assignments": []}
    named = {"protocol_type": "consumer", "protocol_name": "range"}
    for missing in ({"protocol_type": None}, {"protocol_name": None}, {"protocol_type": None, "protocol_name": None}):
        for req in (
            good,
            {**good, "group_id": ""},  # else INVALID_GROUP_ID
            {**good, "group_id": "nope"},  # else UNKNOWN_MEMBER_ID
            {**good, "generation_id": 99},  # else ILLEGAL_GENERATION
        ):
            resp = s.answer(s.send("SyncGroup", 5, {**req, **named, **missing}))
            assert resp["error_code"] == 23, (req, missing)
            assert (resp["protocol_type"], resp["protocol_name"], resp["assignment"]) == (None, None, b"")
    # Below v5 the fields do not exist: nothing to check.
    assert s.answer(s.send("SyncGroup", 4, {**good, "protocol_type": None, "protocol_name": None}))["error_code"] == 0
    assert s.answer(s.send("SyncGroup", 5, {**good, **named}))["error_code"] == 0


def test_failed_assignment_write_resets_and_rebalances() -> None:
    s = Shell(auto_append=False)
    a, b = s.client("a"), s.client("b")
    a.join()
    b.join()
    a.join()
    b.sync()
    a.sync({a.member_id: b"1", b.member_id: b"2"})
    assert s.state() == CR and a.pending_sync and b.pending_sync
    s.flush(error=OSError("disk full"))
    s.deliver()
    assert a.last_sync["error_code"] == 16 and b.last_sync["error_code"] == 16  # NOT_COORDINATOR
    assert s.state() == PR and s.log == []
    assert all(m.assignment == b"" for m in s.group().members.values())
    assert s.coord.group_records == {}


def test_followers_answered_only_once_the_record_is_durable() -> None:
    s = Shell(auto_append=False)
    a, b = s.client("a"), s.client("b")
    a.join()
    s.flush()
    b.join()
    a.join()
    b.sync()
    a.sync({a.member_id: b"1", b.member_id: b"2"})
    assert a.pending_sync and b.pending_sync and s.state() == CR
    s.flush()
    s.deliver()
    assert a.assignment == b"1" and b.assignment == b"2" and s.state() == S


def test_join_during_pending_write_voids_that_generation() -> None:
    s = Shell(auto_append=False)
    a, b = s.client("a"), s.client("b")
    a.join()
    a.sync({a.member_id: b"1"})
    b.join()  # before the assignment is durable: gen 1 is abandoned
    assert a.last_sync["error_code"] == 27 and s.state() == PR
    s.flush()  # the record lands but changes nothing live
    assert s.state() == PR and s.coord.group_records["g"].generation == 1


def test_duplicate_protocol_names_count_once() -> None:
    s = Shell()
    a = s.client("a", protocols=[("range", sub("t")), ("range", sub("t"))])
    b = s.client("b")
    a.join()
    a.sync({})
    b.join()
    assert b.last_join is None or b.last_join["error_code"] == 0
    a.join()
    assert s.state() == CR and s.group().protocol_name == "range"
