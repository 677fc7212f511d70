"""The steady-heartbeat shortcut (``ConsumerGroupManager._steady``, issue 26) answers exactly as the
long way (``update_member``): two cores driven in lockstep by the same random heartbeats, joins,
leaves, fields, stale epochs, regexes, topic changes and session expiries, one of them with the
shortcut turned off, give the same answers, the same records and the same session expiries."""

from __future__ import annotations

from typing import Any

from consumer_harness import Shell, image
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

NAMES = ["a", "b", "c", "d"]
OVERRIDES = st.sampled_from(
    [
        *[{}] * 12,  # mostly plain heartbeats, so that groups get Stable and the shortcut is taken
        {"topic_partitions": None},
        {"rack_id": "r1"},
        {"rebalance_timeout_ms": 45000},
        {"subscribed_topic_names": ["t"]},
        {"subscribed_topic_names": ["t", "u"]},
        {"subscribed_topic_regex": "u.*"},
        {"server_assignor": "range"},
        {"instance_id": "i1"},
        {"member_epoch": 1},
        {"member_epoch": 99},
    ]
)
OPS = st.lists(
    st.one_of(
        *[st.tuples(st.just("hb"), st.sampled_from(NAMES), OVERRIDES)] * 6,
        st.tuples(st.just("leave"), st.sampled_from(NAMES), st.just({})),
        st.tuples(st.just("advance"), st.sampled_from([100, 5000, 30000, 46000]), st.just({})),
        st.tuples(st.just("topics"), st.sampled_from([1, 2]), st.just({})),
    ),
    max_size=150,
)


def _pair() -> tuple[Shell, Shell, dict[str, Any], dict[str, Any]]:
    fast, slow = Shell(topics=image(t=6, u=3)), Shell(topics=image(t=6, u=3))
    slow.mgr._steady = lambda *a: None  # type: ignore[method-assign]
    return fast, slow, {n: fast.client(n) for n in NAMES}, {n: slow.client(n) for n in NAMES}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_shortcut_answers_as_the_long_way(ops):
    fast, slow, fc, sc = _pair()
    real, taken = fast.mgr._steady, []
    fast.mgr._steady = lambda *a: (lambda m: taken.append(m is not None) or m)(real(*a))  # type: ignore[method-assign]
    for _ in range(4):  # a Stable group first: the shortcut's case
        for n in NAMES:
            assert fc[n].heartbeat() == sc[n].heartbeat()
    for op, arg, over in ops:
        if op == "hb":
            assert fc[arg].heartbeat(**over) == sc[arg].heartbeat(**over)
        elif op == "leave":
            if fc[arg].epoch > 0:
                assert fc[arg].leave() == sc[arg].leave()
                fc[arg].epoch = sc[arg].epoch = 0
        elif op == "advance":
            fast.advance(arg)
            slow.advance(arg)
        else:
            img = image(version=arg + 1, t=6, u=3 + arg)
            fast.set_topics(img)
            slow.set_topics(img)
        assert fast.log == slow.log
    assert fast.recovered().get("g") == slow.recovered().get("g")
    event("shortcut taken" if any(taken) else "shortcut not taken")


def test_steady_members_take_the_shortcut():
    fast, _slow, fc, _sc = _pair()
    for _ in range(4):
        for c in fc.values():
            c.heartbeat()
    calls = []
    real = fast.mgr.update_member
    fast.mgr.update_member = lambda *a, **k: calls.append(1) or real(*a, **k)  # type: ignore[method-assign]
    n = len(fast.log)
    for c in fc.values():
        r = c.heartbeat(topic_partitions=None)
        assert r["error_code"] == 0 and r["assignment"] is None
    assert calls == [] and len(fast.log) == n


def test_a_steady_heartbeat_renews_the_session():
    fast, slow, fc, sc = _pair()
    for _ in range(4):
        for n in NAMES:
            assert fc[n].heartbeat() == sc[n].heartbeat()
    for shell in (fast, slow):
        shell.advance(30000)
    assert fc["a"].heartbeat() == sc["a"].heartbeat()  # the shortcut, in `fast`
    for shell in (fast, slow):
        shell.advance(30000)  # the others' sessions (45 s) expire; a's was renewed 30 s ago
    assert fast.log == slow.log
    assert set(fast.group().members) == {"a"}


def _steady_body(group: str, mid: str, epoch: int) -> dict[str, Any]:
    from consumer_harness import _as_read

    return _as_read(1, {"group_id": group, "member_id": mid, "member_epoch": epoch, "instance_id": None,
                        "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
                        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None})  # fmt: skip


def test_sessions_renewed_by_the_shell_path_alone_expire_when_kafka_would() -> None:
    # steady_heartbeat moves a session later in the slot it holds per member id (issue 26): only its
    # own group's session moves (the same member id in a second group heartbeating in between), and a
    # member heartbeating only that way expires exactly one session timeout after its last
    # heartbeat, as the long way's Deadlines.set has it.
    shell = Shell(topics=image(t=6))
    c = shell.client("a")
    for _ in range(3):
        c.heartbeat()
    mid, epoch = c.member_id, c.epoch
    session = shell.mgr.config.session_timeout_ms
    # the same member id in group g2, Stable too
    req: dict[str, Any] = {"group_id": "g2", "member_id": mid, "member_epoch": 0, "rebalance_timeout_ms": 30000,
                           "subscribed_topic_names": ["t"], "topic_partitions": []}  # fmt: skip
    for _ in range(4):
        resp = shell.mgr.heartbeat(shell.now, req).response
        req = {"group_id": "g2", "member_id": mid, "member_epoch": resp["member_epoch"], "topic_partitions":
               [{"topic_id": a["topic_id"], "partitions": a["partitions"]}
                for a in (resp["assignment"] or {"topic_partitions": []})["topic_partitions"]] if resp["assignment"]
               else req["topic_partitions"]}  # fmt: skip
    epoch2 = req["member_epoch"]
    for step in range(5):
        shell.advance(session - 1000)
        g2_before = shell.mgr.deadlines.get(("g2", mid, "session"))
        assert shell.mgr.steady_heartbeat(shell.now, _steady_body("g", mid, epoch), 1, "", "", False), step
        assert shell.mgr.deadlines.get(("g", mid, "session")) == shell.now + session
        assert shell.mgr.deadlines.get(("g2", mid, "session")) == g2_before
        if step < 2:  # g2's member heartbeats twice, then stops
            assert shell.mgr.steady_heartbeat(shell.now, _steady_body("g2", mid, epoch2), 1, "", "", False)
            assert shell.mgr.deadlines.get(("g2", mid, "session")) == shell.now + session
    last = shell.now
    shell.advance(session - 1)
    assert mid in shell.group().members
    shell.advance(1)
    assert mid not in shell.group().members and shell.now == last + session
