"""The fetch session cache (``broker/data_plane/fetch_sessions.py``) against a simple model, with a
fake clock: Kafka 4.2's ``FetchManager.newContext``, ``updateAndGenerateResponseData``,
``FetchSessionCacheShard.maybeCreateSession``/``tryEvict``/``touch`` and
``CachedPartition.maybeUpdateResponseData``, driven through the public entry points only.

The model keeps, per session: its shard, epoch, partitions in order with what was last answered of
each, creation and last-use times and what the last touch recorded (size, age), and decides by
itself which session an eviction takes (stale first, else the least (privileged, size, id) of those
the newcomer may evict, when the newcomer is worth at least as much).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from groupd.broker.data_plane.fetch_sessions import (
    INT32_MAX,
    NUM_SHARDS,
    CachedPartition,
    ErrorContext,
    FetchSessionCache,
    FullContext,
    IncrementalContext,
    SessionlessContext,
    new_context,
    next_epoch,
)
from groupd.protocol.errors import ErrorCode
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

KEYS = [(t, p) for t in ("a", "b") for p in range(3)]
keys_st = st.lists(st.sampled_from(KEYS), unique=True, max_size=len(KEYS))


def req_entry(offset: int = 0) -> dict[str, Any]:
    return {
        "partition_max_bytes": 1024,
        "fetch_offset": offset,
        "log_start_offset": -1,
        "current_leader_epoch": -1,
        "last_fetched_epoch": -1,
    }


def answer(keys: list[tuple[str, int]], logs: dict[tuple[str, int], tuple[int, int]], data: set, errors: set) -> dict:
    """The handler's answer for ``keys`` in order (runs of one topic), from the fake logs."""
    responses: list[dict[str, Any]] = []
    for topic, p in keys:
        hw, lso = logs[(topic, p)]
        err = ErrorCode.NOT_LEADER_OR_FOLLOWER if (topic, p) in errors else 0
        entry = {
            "partition_index": p,
            "error_code": err,
            "high_watermark": -1 if err else hw,
            "log_start_offset": -1 if err else lso,
            "preferred_read_replica": -1,
            "records": b"x" if (topic, p) in data and not err else b"",
        }
        if responses and responses[-1]["topic"] == topic:
            responses[-1]["partitions"].append(entry)
        else:
            responses.append({"topic": topic, "partitions": [entry]})
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}


def answered(resp: dict) -> list[tuple[str, int]]:
    return [(t["topic"], p["partition_index"]) for t in resp["responses"] for p in t["partitions"]]


@dataclass
class MSession:
    id: int
    privileged: bool
    created: int
    last_used: int
    epoch: int = 1
    # key -> [last high watermark answered, last log start answered], in the session's order
    parts: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    touched_size: int = 0
    old_at_touch: bool = False

    def touch(self, now: int, eviction_ms: int) -> None:
        self.last_used = now
        self.touched_size = len(self.parts)
        self.old_at_touch = now - self.created > eviction_ms


class CacheMachine(RuleBasedStateMachine):
    @initialize(
        slots=st.sampled_from([0, 2, 7, 8, 16, 24]),
        eviction_ms=st.sampled_from([0, 50, 1000]),
        shards=st.sampled_from([1, 2, NUM_SHARDS]),
    )
    def setup(self, slots: int, eviction_ms: int, shards: int) -> None:
        # Kafka's 8 shards, and 1 or 2 so that a few sessions fill a shard and evict
        self.cache = FetchSessionCache(slots, eviction_ms, random.Random(7), shards)
        self.shards = shards
        self.per_shard = slots // shards
        self.eviction_ms = eviction_ms
        self.now = 1_000
        self.counter = 0
        self.model: dict[int, MSession] = {}
        self.closed: list[int] = []  # ids once handed out, now gone
        self.logs = {k: (0, 0) for k in KEYS}

    # --- the world ---------------------------------------------------------------------------------
    @rule(ms=st.sampled_from([0, 1, 30, 60, 1001, 1500]))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(key=st.sampled_from(KEYS), grow=st.integers(1, 5), trim=st.booleans())
    def append(self, key: tuple[str, int], grow: int, trim: bool) -> None:
        hw, lso = self.logs[key]
        self.logs[key] = (hw + grow, hw if trim else lso)

    # --- full fetches ------------------------------------------------------------------------------
    def _evict_for(self, privileged: bool, size: int, shard: int) -> bool:
        """The model's ``tryEvict``: True (and the victim gone) if room was made in ``shard``."""
        in_shard = [s for s in self.model.values() if s.id // self.cache.id_range == shard]
        if not in_shard:
            return False
        stale = min(in_shard, key=lambda s: (s.last_used, s.id))
        if self.now - stale.last_used > self.eviction_ms:
            self._gone(stale.id)
            return True
        if privileged:
            candidates = [s for s in in_shard if not s.privileged or s.old_at_touch]
        else:
            candidates = [s for s in in_shard if s.old_at_touch]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.touched_size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.touched_size, victim.id):
            return False
        self._gone(victim.id)
        return True

    def _gone(self, sid: int) -> None:
        del self.model[sid]
        self.closed.append(sid)

    @rule(
        keys=keys_st,
        close=st.booleans(),
        privileged=st.booleans(),
        data=st.sets(st.sampled_from(KEYS)),
        errors=st.sets(st.sampled_from(KEYS), max_size=2),
        data_draw=st.data(),
    )
    def full_fetch(self, keys, close, privileged, data, errors, data_draw) -> None:
        known = list(self.model) + self.closed[-3:] + [0]
        sid = data_draw.draw(st.sampled_from(known))
        ctx = new_context(self.cache, self.now, sid, -1 if close else 0, privileged, {k: req_entry() for k in keys}, [])
        if sid in self.model:
            self._gone(sid)
        if close:
            assert isinstance(ctx, SessionlessContext)
            return
        assert isinstance(ctx, FullContext)
        resp = ctx.finish(answer(keys, self.logs, data, errors), self.now)
        assert answered(resp) == keys  # a full answer carries every partition
        shard = self.counter % self.shards
        self.counter += 1
        in_shard = sum(1 for s in self.model.values() if s.id // self.cache.id_range == shard)
        room = in_shard < self.per_shard or (self.per_shard > 0 and self._evict_for(privileged, len(keys), shard))
        new_id = resp["session_id"]
        if not room:
            assert new_id == 0
            return
        assert new_id != 0 and new_id // self.cache.id_range == shard and new_id not in self.model
        s = MSession(new_id, privileged, self.now, self.now)
        for k in keys:
            hw, lso = self.logs[k]
            s.parts[k] = [-1, -1] if k in errors else [hw, lso]
        s.touch(self.now, self.eviction_ms)
        self.model[new_id] = s

    # --- incremental fetches -----------------------------------------------------------------------
    @precondition(lambda self: bool(self.model))
    @rule(
        adds=keys_st,
        forgets=keys_st,
        wrong_epoch=st.sampled_from([0, 0, 0, 1, -1]),
        data=st.sets(st.sampled_from(KEYS)),
        errors=st.sets(st.sampled_from(KEYS), max_size=2),
        data_draw=st.data(),
    )
    def incremental(self, adds, forgets, wrong_epoch, data, errors, data_draw) -> None:
        sid = data_draw.draw(st.sampled_from(sorted(self.model)))
        s = self.model[sid]
        epoch = s.epoch + wrong_epoch if s.epoch + wrong_epoch > 0 else s.epoch + 1
        ctx = new_context(self.cache, self.now, sid, epoch, False, {k: req_entry(7) for k in adds}, forgets)
        if epoch != s.epoch:
            assert isinstance(ctx, ErrorContext) and ctx.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return
        for k in adds:
            s.parts.setdefault(k, [-1, -1])
        for k in forgets:
            s.parts.pop(k, None)
        if not s.parts:
            assert isinstance(ctx, SessionlessContext)  # the session is closed
            self._gone(sid)
            return
        assert isinstance(ctx, IncrementalContext)
        s.touch(self.now, self.eviction_ms)
        s.epoch = next_epoch(s.epoch)
        order = list(s.parts)
        asked = [(t["topic"], p["partition"]) for t in ctx.request_topics() for p in t["partitions"]]
        assert asked == order
        resp = ctx.finish(answer(order, self.logs, data, errors), self.now)
        assert resp["error_code"] == 0 and resp["session_id"] == sid
        expected = []
        for k in order:
            last = s.parts[k]
            hw, lso = self.logs[k]
            if k in errors:
                last[0] = -1
                expected.append(k)
                continue
            if k in data or last != [hw, lso]:
                expected.append(k)
                s.parts[k] = [hw, lso]
                if k in data:
                    del s.parts[k]
                    s.parts[k] = [hw, lso]
        assert answered(resp) == expected

    @rule(sid=st.integers(-5, 5) | st.integers(INT32_MAX - 10, INT32_MAX), epoch=st.integers(1, 3))
    def unknown_session(self, sid: int, epoch: int) -> None:
        if sid in self.model:
            return
        ctx = new_context(self.cache, self.now, sid, epoch, False, {}, [])
        assert isinstance(ctx, ErrorContext) and ctx.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    @precondition(lambda self: bool(self.closed))
    @rule(data_draw=st.data())
    def closed_session(self, data_draw) -> None:
        sid = data_draw.draw(st.sampled_from(self.closed))
        if sid in self.model:
            return
        ctx = new_context(self.cache, self.now, sid, 1, False, {KEYS[0]: req_entry()}, [])
        assert isinstance(ctx, ErrorContext) and ctx.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    @invariant()
    def same_sessions(self) -> None:
        assert {s.id for s in self.cache.sessions()} == set(self.model)
        assert self.cache.size <= self.per_shard * self.shards
        for shard in self.cache.shards:
            assert len(shard.sessions) <= self.per_shard
        assert self.cache.total_partitions == sum(s.touched_size for s in self.model.values())
        for sid, m in self.model.items():
            real = self.cache.get(sid)
            assert real is not None and real.epoch == m.epoch and list(real.partitions) == list(m.parts)


TestFetchSessionCache = CacheMachine.TestCase
TestFetchSessionCache.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# --- single cases, named ------------------------------------------------------------------------


def test_next_epoch_wraps_and_final_stays_final() -> None:
    assert next_epoch(0) == 1 and next_epoch(INT32_MAX) == 1 and next_epoch(-1) == -1


def test_maybe_update_response_data() -> None:
    cp = CachedPartition(req_entry())
    base = {"error_code": 0, "high_watermark": 5, "log_start_offset": 0, "records": b"", "preferred_read_replica": -1}
    assert cp.maybe_update(base, True)  # a new high watermark
    assert not cp.maybe_update(base, True)  # nothing new
    assert cp.maybe_update({**base, "records": b"r"}, True)  # records
    assert cp.maybe_update({**base, "log_start_offset": 3}, False)  # a new log start (not remembered)
    assert cp.maybe_update({**base, "log_start_offset": 3}, True) and not cp.maybe_update(
        {**base, "log_start_offset": 3}, True
    )
    assert cp.maybe_update({**base, "log_start_offset": 3, "preferred_read_replica": 2}, True)
    assert cp.maybe_update({**base, "log_start_offset": 3, "diverging_epoch": {"epoch": 1, "end_offset": 4}}, True)
    err = {**base, "error_code": 6, "high_watermark": -1, "log_start_offset": -1}
    assert cp.maybe_update(err, True) and cp.maybe_update(err, True)  # an error: always
    assert cp.maybe_update({**base, "log_start_offset": 3}, True)  # and the next clean answer too


def test_stale_session_is_evicted_by_a_smaller_one_and_fresh_larger_ones_are_not() -> None:
    cache = FetchSessionCache(8, 100, random.Random(1))  # one session per shard
    big = {k: req_entry() for k in KEYS}
    logs = dict.fromkeys(KEYS, (0, 0))
    first = new_context(cache, 0, 0, 0, False, big, [])
    assert isinstance(first, FullContext)
    sid = first.finish(answer(list(big), logs, set(), set()), 0)["session_id"]
    cache.counter = 0  # the next session goes to the same shard
    small = {KEYS[0]: req_entry()}
    ctx = new_context(cache, 50, 0, 0, False, small, [])
    assert isinstance(ctx, FullContext)
    assert ctx.finish(answer(list(small), logs, set(), set()), 50)["session_id"] == 0  # neither stale nor smaller
    cache.counter = 0
    ctx = new_context(cache, 150, 0, 0, False, small, [])
    assert isinstance(ctx, FullContext)
    new_id = ctx.finish(answer(list(small), logs, set(), set()), 150)["session_id"]
    assert new_id != 0 and cache.get(sid) is None and cache.evictions == 1  # stale: unused for > 100 ms


def _open(cache: FetchSessionCache, now: int, keys: list[tuple[str, int]], privileged: bool = False) -> int:
    ctx = new_context(cache, now, 0, 0, privileged, {k: req_entry() for k in keys}, [])
    assert isinstance(ctx, FullContext)
    return ctx.finish(answer(keys, dict.fromkeys(KEYS, (0, 0)), set(), set()), now)["session_id"]


def test_an_old_session_in_use_is_evicted_by_a_larger_one_only() -> None:
    cache = FetchSessionCache(1, 100, random.Random(2), shards=1)
    sid = _open(cache, 0, KEYS[:2])
    ctx = new_context(cache, 150, sid, 1, False, {}, [])  # in use after 150 ms: old, not stale
    assert isinstance(ctx, IncrementalContext)
    assert _open(cache, 200, KEYS[:2]) == 0  # as large: kept
    assert cache.get(sid) is not None
    new_id = _open(cache, 200, KEYS[:3])  # larger
    assert new_id != 0 and cache.get(sid) is None


def test_a_privileged_session_evicts_a_fresh_unprivileged_one() -> None:
    cache = FetchSessionCache(1, 100_000, random.Random(3), shards=1)
    sid = _open(cache, 0, KEYS)
    assert _open(cache, 1, KEYS[:1]) == 0  # a fresh session is not evictable by a consumer
    follower = _open(cache, 1, KEYS[:1], privileged=True)  # but is by a follower
    assert follower != 0 and cache.get(sid) is None
    assert _open(cache, 2, KEYS) == 0  # and a fresh privileged one by nobody


def test_fewer_slots_than_shards_means_no_sessions() -> None:
    cache = FetchSessionCache(7, 100, random.Random(4))
    assert not cache.enabled and _open(cache, 0, KEYS) == 0
