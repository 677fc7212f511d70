"""The core's event hooks (``CoordinatorListener``), driven by the fake shell and its fake clock.

Metrics count rebalances and expiries through these hooks, so each test pins down when a hook fires,
with which generation, reason and duration, and that it fires exactly once per event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from groupd.coordinator import CoordinatorConfig, CoordinatorListener, GroupCoordinator
from groupd.coordinator import listener as events
from harness import Client, Shell, assignment

PR, CR, S, E = "PreparingRebalance", "CompletingRebalance", "Stable", "Empty"


class Recorder(CoordinatorListener):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def rebalance_started(self, group_id: str, generation: int, members: int, reason: str) -> None:
        self.calls.append(("started", group_id, generation, members))

    def rebalance_completed(
        self, group_id: str, generation: int, members: int, duration_ms: int | None, outcome: str
    ) -> None:
        self.calls.append(("completed", group_id, generation, members, duration_ms, outcome))

    def member_expired(self, group_id: str, member_id: str, generation: int, reason: str) -> None:
        self.calls.append(("expired", group_id, member_id, generation, reason))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == kind]


def shell(**config: Any) -> tuple[Shell, Recorder]:
    s = Shell(CoordinatorConfig(**config)) if config else Shell()
    rec = Recorder()
    s.coord.listener = rec
    return s, rec


def sync_all(s: Shell, clients: list[Client]) -> None:
    leader = next(c for c in clients if c.is_leader)
    leader.sync({m["member_id"]: assignment("t", i) for i, m in enumerate(leader.members)})
    for c in clients:
        if c is not leader:
            c.sync()


def form(s: Shell, n: int, **kw: Any) -> list[Client]:
    cs = [s.client(f"c{i}", **kw) for i in range(n)]
    for c in cs:
        c.join()
    for c in cs:
        if c.pending_join is None and s.state() == PR:
            c.join()
    sync_all(s, cs)
    assert s.state() == S
    return cs


def test_default_listener_is_a_no_op() -> None:
    # A core built without a listener (tools, the other tests) works and reports to nobody.
    coord = GroupCoordinator()
    assert type(coord.listener) is CoordinatorListener
    coord.listener.rebalance_started("g", 0, 0, "x")
    coord.listener.rebalance_completed("g", 1, 0, None, events.STABLE)
    coord.listener.member_expired("g", "m", 1, events.SESSION_TIMEOUT)


def test_first_rebalance_started_and_completed_with_duration_from_the_fake_clock() -> None:
    s, rec = shell(group_initial_rebalance_delay_ms=3_000)
    a, b = s.client("a"), s.client("b")
    s.now = 1_000
    a.join()
    assert rec.calls == [("started", "g", 0, 1)]  # left generation 0 with its first member
    s.advance(250)
    b.join()  # arriving during the initial delay: part of the same rebalance
    s.advance(6_000)  # two delay steps (the second because b arrived), then the join completes
    assert s.state() == CR and not rec.of("completed")  # the join phase is not the end
    s.advance(500)
    sync_all(s, [a, b])
    assert s.state() == S and s.now == 7_750
    assert rec.calls == [("started", "g", 0, 1), ("completed", "g", 1, 2, 6_750, events.STABLE)]


def test_interrupted_rebalance_starts_twice_and_completes_once() -> None:
    s, rec = shell()
    a, b = form(s, 2)
    rec.calls.clear()
    gen = a.generation
    a.join()
    b.join()
    assert s.state() == CR
    c = s.client("c")
    c.join()  # a newcomer during CompletingRebalance sends the group back to PreparingRebalance
    assert s.state() == PR
    assert rec.of("started") == [("started", "g", gen, 2), ("started", "g", gen + 1, 3)]
    a.join()
    b.join()
    sync_all(s, [a, b, c])
    assert rec.of("completed") == [("completed", "g", gen + 2, 3, 0, events.STABLE)]


def test_session_timeout_expiry_then_rebalance() -> None:
    s, rec = shell()
    a, b = form(s, 2)
    rec.calls.clear()
    s.advance(9_000)
    assert a.heartbeat() == 0
    s.advance(1_000)  # b's 10 s session ends
    gen = a.generation
    assert rec.calls == [("expired", "g", b.member_id, gen, events.SESSION_TIMEOUT), ("started", "g", gen, 1)]
    assert a.heartbeat() == 27
    a.join()
    s.advance(40)
    sync_all(s, [a])
    assert rec.of("completed") == [("completed", "g", gen + 1, 1, 40, events.STABLE)]


def test_member_that_does_not_rejoin_expires_on_the_rebalance_timeout() -> None:
    s, rec = shell()
    # The rebalance timeout (8 s) is shorter than the session (10 s), and b heartbeats throughout:
    # only the join phase's deadline can remove it.
    a, b = form(s, 2, rebalance_timeout_ms=8_000)
    rec.calls.clear()
    gen = a.generation
    a.join()
    s.advance(5_000)
    assert b.heartbeat() == 27
    s.advance(3_000)
    assert rec.of("expired") == [("expired", "g", b.member_id, gen, events.REBALANCE_TIMEOUT)]
    assert s.state() == CR and b.member_id not in s.group().members


def test_member_that_does_not_sync_expires_on_the_rebalance_timeout() -> None:
    s, rec = shell()
    a, b = form(s, 2, rebalance_timeout_ms=8_000)
    a.join()
    b.join()
    assert s.state() == CR
    rec.calls.clear()
    leader, follower = (a, b) if a.is_leader else (b, a)
    follower.sync()  # parked; the leader never sends its assignment
    s.advance(8_000)
    gen = follower.generation
    assert rec.of("expired") == [("expired", "g", leader.member_id, gen, events.REBALANCE_TIMEOUT)]
    assert rec.of("started") == [("started", "g", gen, 1)]


def test_pending_member_id_that_never_comes_back_expires_as_pending() -> None:
    s, rec = shell()
    p = s.client("p")
    resp = s.answer(s.send("JoinGroup", 4, p.join_request(), client_id="p"))
    assert resp is not None and resp["error_code"] == 79
    s.advance(10_000)
    assert rec.calls == [("expired", "g", resp["member_id"], 0, events.PENDING)]


def test_abandoned_first_join_expires_on_the_new_member_join_timeout() -> None:
    s, rec = shell()
    (a,) = form(s, 1, session_timeout_ms=600_000, rebalance_timeout_ms=900_000)
    b = s.client("b", session_timeout_ms=600_000, rebalance_timeout_ms=900_000)
    b.join()
    rec.calls.clear()
    new_id = b.member_id  # handed out with MEMBER_ID_REQUIRED, then parked in the rejoin
    assert new_id in s.group().members
    s.advance(300_000)  # a keeps the group waiting; b's 5 minutes run out first
    assert rec.of("expired") == [("expired", "g", new_id, a.generation, events.NEW_MEMBER_JOIN_TIMEOUT)]


def test_last_member_leaving_completes_the_rebalance_as_empty() -> None:
    s, rec = shell()
    (a,) = form(s, 1)
    rec.calls.clear()
    gen = a.generation
    s.advance(100)
    a.leave()
    assert s.state() == E
    assert rec.calls == [("started", "g", gen, 0), ("completed", "g", gen + 1, 0, 0, events.EMPTY)]


def test_rebalances_started_and_completed_balance_out_over_a_history() -> None:
    # Every rebalance that is not superseded ends exactly once: in Stable or in Empty.
    s, rec = shell()
    for _ in range(3):
        cs = form(s, 3)
        for c in cs:
            c.leave()
        assert s.state() == E
    started, completed = rec.of("started"), rec.of("completed")
    assert len(completed) == 6  # three times: one to Stable, one to Empty
    assert len(started) >= len(completed)
    assert [c[5] for c in completed] == [events.STABLE, events.EMPTY] * 3


def test_core_stays_unaware_of_prometheus() -> None:
    core = Path(__file__).resolve().parents[2] / "coordinator"
    for path in core.glob("*.py"):
        assert "prometheus" not in path.read_text(), path
