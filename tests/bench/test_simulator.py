"""The bench's member simulator against a real groupd: it must drive groups to Stable with every
partition assigned exactly once, heartbeat, commit and leave without a single error answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.simulator import (
    ERROR_NAMES,
    NONE,
    STABLE,
    HeartbeatWheel,
    SimConfig,
    Simulator,
    range_assign,
    roundrobin_assign,
)
from tests.support.daemon import GroupdProcess


def test_range_assignor_gives_consecutive_ranges_in_member_order() -> None:
    plan = range_assign({"c2": ("t0",), "c1": ("t0", "t1"), "c3": ("t0",)}, {"t0": 7, "t1": 2})
    assert plan == {"c1": {"t0": [0, 1, 2], "t1": [0, 1]}, "c2": {"t0": [3, 4]}, "c3": {"t0": [5, 6]}}


def test_roundrobin_assignor_deals_partitions_to_subscribed_members() -> None:
    plan = roundrobin_assign({"a": ("t0", "t1"), "b": ("t1",), "c": ("t0", "t1")}, {"t0": 3, "t1": 3})
    owned = sorted((t, p) for tps in plan.values() for t, ps in tps.items() for p in ps)
    assert owned == [("t0", 0), ("t0", 1), ("t0", 2), ("t1", 0), ("t1", 1), ("t1", 2)]
    assert "t0" not in plan["b"]
    # Kafka's circular iterator: t0-0 a, t0-1 c (b skipped), t0-2 a, t1-0 b, t1-1 c, t1-2 a
    assert plan == {"a": {"t0": [0, 2], "t1": [2]}, "b": {"t1": [0]}, "c": {"t0": [1], "t1": [1]}}


@pytest.fixture
def groupd(tmp_path: Path) -> Iterator[GroupdProcess]:
    d = GroupdProcess(tmp_path / "data")
    d.start()
    try:
        yield d
    finally:
        d.stop()


class _Beater:
    def __init__(self, fired: list[tuple[int, float]], n: int) -> None:
        self.fired, self.n, self.hb_token = fired, n, 0

    def heartbeat(self) -> None:
        self.fired.append((self.n, asyncio.get_running_loop().time()))


async def test_heartbeat_wheel_sends_each_heartbeat_in_its_own_tick_not_in_10ms_lumps() -> None:
    # 100,000 consumers' own timers spread their heartbeats; the simulator's wheel must not gather
    # those due 3 ms apart into one burst (a 10 ms wheel did, and the soak measured its lumps).
    loop = asyncio.get_running_loop()
    wheel = HeartbeatWheel(loop, SimConfig("x").tick_ms / 1000)
    fired: list[tuple[int, float]] = []
    beaters = [_Beater(fired, i) for i in range(3)]
    for i, b in enumerate(beaters):
        wheel.add(0.005 + 0.0015 * i, b, b.hb_token)
    # Due 1.5 ms apart: three ticks (a 10 ms wheel holds them in one or two).
    assert len(wheel.slots) == 3
    cancelled = _Beater(fired, 99)
    wheel.add(0.004, cancelled, cancelled.hb_token)
    cancelled.hb_token += 1  # how a member cancels its scheduled heartbeat
    for _ in range(200):
        if len(fired) == 3:
            break
        await asyncio.sleep(0.005)
    wheel.close()
    assert [n for n, _ in fired] == [0, 1, 2]
    assert fired[0][1] >= loop.time() - 2.0


async def test_simulated_groups_become_stable_heartbeat_commit_and_leave(groupd: GroupdProcess) -> None:
    sim = Simulator(
        SimConfig(bootstrap=groupd.bootstrap, conns=2, join_conns=2, heartbeat_interval_ms=300, session_timeout_ms=6000)
    )
    try:
        await sim.start()
        assert sim.versions["JoinGroup"] >= 4  # so MEMBER_ID_REQUIRED is exercised
        assert await sim.ensure_topics({"sim-a": 7, "sim-b": 5}) == {"sim-a": 7, "sim-b": 5}
        ranged = sim.add_group("sim-range", 10, ("sim-a", "sim-b"), assignor="range")
        robin = sim.add_group("sim-roundrobin", 10, ("sim-a", "sim-b"), assignor="roundrobin")
        groups = [ranged, robin]
        await sim.attach(groups)
        await sim.join_all(groups, timeout=10)

        sim.expect_stable = True
        await asyncio.sleep(1.5)  # about five heartbeats each
        assert [p for g in groups for p in g.check_assignment()] == []
        assert {m.protocol for m in ranged.members} == {"range"}
        assert {m.protocol for m in robin.members} == {"roundrobin"}
        assert all(m.state == STABLE for g in groups for m in g.members)
        answers = sim.stats.answers
        assert answers[("JoinGroup", 79)] >= 20  # every member was asked for a member id first
        assert answers[("Heartbeat", NONE)] >= 20 * 3
        assert {code for (api, code) in answers if api == "Heartbeat"} == {NONE}

        done: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        codes: list[int] = []

        def committed(resp: object, _lat: float) -> None:
            assert isinstance(resp, dict)
            codes.extend(p["error_code"] for t in resp["topics"] for p in t["partitions"])
            if len(codes) == 2 * 12 and not done.done():
                done.set_result(codes)

        for g in groups:
            for m in g.members:
                m.commit(42, committed)
        assert set(await asyncio.wait_for(done, 5)) == {NONE}  # 12 partitions per group, each once

        # drive_commits sends pre-encoded commits and reads their answers undecoded when they are
        # the all-fine bytes: an error answer must still be decoded and counted
        r = await sim.drive_commits(list(ranged.members), 0.3, warmup=0.1)
        assert r["commits"] > 0 and r["partition_errors"] == {} and r["failures"] == 0
        stale = robin.members[0]
        stale.generation += 1
        r = await sim.drive_commits([stale], 0.3, warmup=0.1)
        stale.generation -= 1
        assert r["commits"] > 0 and set(r["partition_errors"]) == {ERROR_NAMES.get(22, 22)}  # ILLEGAL_GENERATION
        assert sum(r["partition_errors"].values()) == r["commits"] * sum(len(tp.partitions) for tp in stale.assignment)

        await sim.leave_all(groups, timeout=5)
        assert answers[("LeaveGroup", NONE)] == 20
        assert sim.stats.spurious == {}
        assert sim.stats.errors == []
        assert not sim.stats.failures
    finally:
        await sim.close()


async def test_next_heartbeat_is_timed_from_the_previous_send_not_from_its_answer() -> None:
    # Timed from the answer, members whose answers came late together (any stall) heartbeat
    # together from then on: a burst every interval that the soak then measured as latency.
    sim = Simulator(SimConfig(bootstrap="127.0.0.1:9", heartbeat_interval_ms=3_000))
    sim.wheel = HeartbeatWheel(asyncio.get_running_loop(), 0.001)
    member = sim.add_group("g", 1, ("t",)).members[0]
    member.schedule_heartbeat(0.5)
    sent_at = member.hb_at
    member.next_heartbeat()  # its answer, however late it came
    assert member.hb_at == pytest.approx(sent_at + 3.0)
    member.hb_at -= 60.0  # an answer more than an interval late: the next one leaves now
    before = time.perf_counter()
    member.next_heartbeat()
    assert before <= member.hb_at <= time.perf_counter()
    sim.wheel.close()
