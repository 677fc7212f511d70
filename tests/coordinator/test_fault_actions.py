"""The coordinator's fault-injection entry points: expire a member now, trigger a rebalance
(sans-IO, fake clock). Both end where Kafka's own paths end: ``onExpireHeartbeat`` and
``prepareRebalance``."""

from __future__ import annotations

from test_rebalance import stable_group

PR, CR, S, E = "PreparingRebalance", "CompletingRebalance", "Stable", "Empty"


def test_expire_member_now_rebalances_the_others_into_a_new_generation() -> None:
    s, (c1, c2) = stable_group(2)
    gen = s.group().generation
    code, result = s.coord.expire_member(s.now, "g", c2.member_id)
    s.absorb(result)
    assert code == 0
    assert c2.member_id not in s.group().members
    assert s.state() == PR  # as onExpireHeartbeat: the survivor must rejoin
    assert c1.heartbeat() == 27
    c1.join()
    assert s.state() == CR and s.group().generation == gen + 1
    assert c2.heartbeat() == 25  # the expired member is unknown from now on


def test_expire_last_member_empties_the_group() -> None:
    s, (c1,) = stable_group(1)
    code, result = s.coord.expire_member(s.now, "g", c1.member_id)
    s.absorb(result)
    assert code == 0 and s.state() == E


def test_expire_member_unknown_group_or_member() -> None:
    s, _ = stable_group(1)
    assert s.coord.expire_member(s.now, "nope", "m")[0] == 69
    assert s.coord.expire_member(s.now, "g", "nobody")[0] == 25


def test_trigger_rebalance_members_rejoin_into_the_next_generation() -> None:
    s, (c1, c2) = stable_group(2)
    gen = s.group().generation
    code, result = s.coord.trigger_rebalance(s.now, "g", "test")
    s.absorb(result)
    assert code == 0 and s.state() == PR
    assert c1.heartbeat() == 27 and c2.heartbeat() == 27
    c1.join()
    c2.join()
    assert s.state() == CR and s.group().generation == gen + 1
    assert set(s.group().members) == {c1.member_id, c2.member_id}


def test_trigger_rebalance_refused_when_nothing_to_rebalance() -> None:
    s, (c1,) = stable_group(1)
    assert s.coord.trigger_rebalance(s.now, "nope")[0] == 69
    s.absorb(s.coord.trigger_rebalance(s.now, "g")[1])
    assert s.coord.trigger_rebalance(s.now, "g")[0] == 27  # already rebalancing
    c1.join()
    c1.leave()
    assert s.state() == E
    assert s.coord.trigger_rebalance(s.now, "g")[0] == 27  # an Empty group has nobody to rebalance
