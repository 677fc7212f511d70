"""Incremental fetch sessions (KIP-227): Kafka 4.2's ``FetchSession.scala``, sans IO.

A client that opens a session (Fetch v7+, epoch 0) names its partitions once; later requests
(epoch 1, 2, ...) name only the partitions whose fetch position changed and the ones it forgets,
and their answers carry only the partitions that changed (``CachedPartition.maybe_update``). The
broker keeps each session's partitions with the client's last request parameters and the high
watermark and log start offset it last answered.

This module has no IO and no clock of its own: the caller passes ``now`` (ms) and a ``random.Random``
for the session ids, so tests drive it with a fake clock. ``fetch.py`` puts it in front of the
Fetch handler (``FetchHandler.with_sessions``).

- ``FetchSessionCache``: Kafka's ``FetchSessionCache`` of ``NUM_SHARDS`` ``FetchSessionCacheShard``,
  each with ``slots // NUM_SHARDS`` entries (``max.incremental.fetch.session.cache.slots`` is
  divided equally, BrokerServer), sessions created round robin, eviction within a shard
  (``FetchSessionCacheShard.tryEvict``: a stale session first, else the least valuable one by
  (privileged, size, id) if the new one is worth more). Kafka keeps the evictable sessions in
  trees; a shard here scans its at most ``slots // 8`` sessions, and only when it is full.
- ``new_context``: ``FetchManager.newContext``, returning one of the four contexts; each context's
  ``finish`` is ``updateAndGenerateResponseData``: it turns the answer of the partitions read into
  the answer sent (and creates or updates the session).

Deliberate differences: a session id outside every shard's range (negative, or in the few ids above
8 x range) is not found (Kafka's ``getCacheShard`` would throw and answer UNKNOWN_SERVER_ERROR);
``min.incremental.fetch.session.eviction.ms`` is a setting (a constant in Kafka 4.2,
``KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``). Fetch v13+ (topic ids) is not served,
so sessions never use topic ids and FETCH_SESSION_TOPIC_ID_ERROR never arises.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from groupd.protocol.errors import ErrorCode

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "NUM_SHARDS",
    "CachedPartition",
    "ErrorContext",
    "FetchSession",
    "FetchSessionCache",
    "FetchSessionCacheShard",
    "FullContext",
    "IncrementalContext",
    "SessionlessContext",
    "new_context",
    "next_epoch",
]

INVALID_SESSION_ID = 0  # FetchMetadata: no session
INITIAL_EPOCH = 0  # a full fetch that asks for a session
FINAL_EPOCH = -1  # a full fetch that closes any session and opens none
INT32_MAX = 2**31 - 1
# KafkaBroker.NumFetchSessionCacheShards
NUM_SHARDS = 8

Key = tuple[str, int]
Body = dict[str, Any]


def next_epoch(prev: int) -> int:
    """``FetchMetadata.nextEpoch``: FINAL stays FINAL, INT32_MAX wraps to 1."""
    if prev < 0:
        return FINAL_EPOCH
    return 1 if prev == INT32_MAX else prev + 1


def is_full(epoch: int) -> bool:
    """``FetchMetadata.isFull``."""
    return epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class CachedPartition:
    """Kafka's ``CachedPartition``: a session partition's last request parameters and what was last
    answered of it (high watermark, log start offset)."""

    __slots__ = (
        "fetch_offset",
        "fetcher_log_start_offset",
        "high_watermark",
        "last_fetched_epoch",
        "leader_epoch",
        "local_log_start_offset",
        "max_bytes",
    )

    def __init__(self, req: Body) -> None:
        self.high_watermark = -1
        self.local_log_start_offset = -1
        self.update_request_params(req)

    def update_request_params(self, req: Body) -> None:
        """``CachedPartition.updateRequestParams``: from a request's partition entry."""
        self.max_bytes = req["partition_max_bytes"]
        self.fetch_offset = req["fetch_offset"]
        self.fetcher_log_start_offset = req.get("log_start_offset", -1)
        self.leader_epoch = req.get("current_leader_epoch", -1)
        self.last_fetched_epoch = req.get("last_fetched_epoch", -1)

    def request_entry(self, partition: int) -> Body:
        """``CachedPartition.reqData``, as a request's partition entry (a new dict each time: the
        wrappers in front of the handler may change the entries they are handed)."""
        return {
            "partition": partition,
            "current_leader_epoch": self.leader_epoch,
            "fetch_offset": self.fetch_offset,
            "last_fetched_epoch": self.last_fetched_epoch,
            "log_start_offset": self.fetcher_log_start_offset,
            "partition_max_bytes": self.max_bytes,
        }

    def maybe_update(self, resp: Body, update: bool) -> bool:
        """``CachedPartition.maybeUpdateResponseData``: whether the answer must carry this partition
        (records, a new high watermark or log start offset, a preferred replica, an error, a
        diverging epoch), remembering what it carries when ``update``."""
        must = bool(resp.get("records"))
        hw = resp["high_watermark"]
        if self.high_watermark != hw:
            must = True
            if update:
                self.high_watermark = hw
        start = resp["log_start_offset"]
        if self.local_log_start_offset != start:
            must = True
            if update:
                self.local_log_start_offset = start
        if resp.get("preferred_read_replica", -1) != -1:
            must = True
        if resp["error_code"]:
            # -1 so that the partition is answered again once the error goes away
            if update:
                self.high_watermark = -1
            must = True
        diverging = resp.get("diverging_epoch")
        if diverging is not None and (diverging.get("epoch", -1) >= 0 or diverging.get("end_offset", -1) >= 0):
            must = True
        return must


class FetchSession:
    """Kafka's ``FetchSession``. ``partitions`` keeps Kafka's ``ImplicitLinkedHashCollection`` order
    (a dict: a partition answered with records moves to the end, so the others are read first next
    time)."""

    __slots__ = (
        "cached_size",
        "creation_ms",
        "epoch",
        "evictable_by_all",
        "evictable_by_privileged",
        "id",
        "last_used_ms",
        "partitions",
        "privileged",
    )

    def __init__(self, session_id: int, privileged: bool, partitions: dict[Key, CachedPartition], now: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.creation_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        # FetchSessionCacheShard.touch's bookkeeping: the size last recorded (-1: not in a cache) and
        # which of Kafka's evictable trees the session is in.
        self.cached_size = -1
        self.evictable_by_all = False
        self.evictable_by_privileged = False

    def evictable_key(self) -> tuple[bool, int, int]:
        """``FetchSession.evictableKey``: the lowest is evicted first."""
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch_data: dict[Key, Body], to_forget: Iterable[Key]) -> tuple[list[Key], list[Key], list[Key]]:
        """``FetchSession.update``: add or update the requested partitions, drop the forgotten ones."""
        added, updated, removed = [], [], []
        parts = self.partitions
        for key, req in fetch_data.items():
            cp = parts.get(key)
            if cp is None:
                parts[key] = CachedPartition(req)
                added.append(key)
            else:
                cp.update_request_params(req)
                updated.append(key)
        for key in to_forget:
            if parts.pop(key, None) is not None:
                removed.append(key)
        return added, updated, removed


class FetchSessionCacheShard:
    """Kafka's ``FetchSessionCacheShard``: at most ``max_entries`` sessions, ids in
    [max(1, shard * id_range), (shard + 1) * id_range)."""

    def __init__(self, max_entries: int, eviction_ms: int, id_range: int, shard_num: int, rng: random.Random) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.id_range = id_range
        self.shard_num = shard_num
        self.rng = rng
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.evictions = 0

    def new_session_id(self) -> int:
        lo = max(1, self.shard_num * self.id_range)
        hi = (self.shard_num + 1) * self.id_range - 1
        while True:
            sid = self.rng.randint(lo, hi)
            if sid not in self.sessions and sid != INVALID_SESSION_ID:
                return sid

    def maybe_create_session(
        self, now: int, privileged: bool, size: int, create: Callable[[], dict[Key, CachedPartition]]
    ) -> int:
        """``maybeCreateSession``: the new session's id, or INVALID_SESSION_ID when there is no room."""
        if len(self.sessions) < self.max_entries or self._try_evict(privileged, (privileged, size, 0), now):
            session = FetchSession(self.new_session_id(), privileged, create(), now)
            self.sessions[session.id] = session
            self.touch(session, now)
            return session.id
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        """``tryEvict``: a stale session (unused for more than ``eviction_ms``), else the least
        valuable evictable one, if the new one is worth at least as much."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            self.remove(stale)
            self.evictions += 1
            return True
        candidates = [
            s for s in self.sessions.values() if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if key < victim.evictable_key():
            return False
        self.remove(victim)
        self.evictions += 1
        return True

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session: FetchSession) -> FetchSession | None:
        """``remove``: the session out of the cache (None if it was not in it)."""
        if self.sessions.get(session.id) is not session:
            return None
        del self.sessions[session.id]
        self.num_partitions -= session.cached_size
        session.evictable_by_all = session.evictable_by_privileged = False
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        """``touch``: record the use, the session's size, and whether it may be evicted (a session
        is evictable by anyone only once it is older than ``eviction_ms``; an unprivileged one by
        privileged newcomers at once)."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        old = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old
        self.num_partitions += session.cached_size


class FetchSessionCache:
    """Kafka's ``FetchSessionCache``: ``NUM_SHARDS`` shards of ``slots // NUM_SHARDS`` sessions each
    (fewer than 8 slots: none at all, as Kafka), new sessions round robin over the shards. (Other
    shard counts are for tests: they let a few sessions fill a shard.)"""

    def __init__(
        self, slots: int, eviction_ms: int, rng: random.Random | None = None, shards: int = NUM_SHARDS
    ) -> None:
        rng = rng or random.Random()
        self.id_range = INT32_MAX // shards
        per_shard = slots // shards
        self.shards = [FetchSessionCacheShard(per_shard, eviction_ms, self.id_range, n, rng) for n in range(shards)]
        self.counter = 0
        self.enabled = per_shard > 0

    def shard_of(self, session_id: int) -> FetchSessionCacheShard | None:
        """``getCacheShard``; None for an id no shard hands out."""
        n = session_id // self.id_range
        return self.shards[n] if 0 <= n < len(self.shards) else None

    def next_shard(self) -> FetchSessionCacheShard:
        """``getNextCacheShard``: round robin."""
        shard = self.shards[self.counter % len(self.shards)]
        self.counter += 1
        return shard

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return None if shard is None else shard.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        if shard is None:
            return None
        session = shard.get(session_id)
        return None if session is None else shard.remove(session)

    @property
    def size(self) -> int:
        """Kafka's NumIncrementalFetchSessions gauge."""
        return sum(len(s.sessions) for s in self.shards)

    @property
    def total_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached gauge."""
        return sum(s.num_partitions for s in self.shards)

    @property
    def evictions(self) -> int:
        """Kafka's IncrementalFetchSessionEvictionsPerSec meter, as a count."""
        return sum(s.evictions for s in self.shards)

    def clear(self) -> None:
        """Forget every session (a broker that stops: a restarted Kafka broker has none)."""
        for shard in self.shards:
            shard.sessions.clear()
            shard.num_partitions = 0

    def sessions(self) -> Iterator[FetchSession]:
        for s in self.shards:
            yield from s.sessions.values()


# --- the contexts (FetchContext and its four kinds) ---------------------------------------------


def error_answer(code: int, session_id: int = INVALID_SESSION_ID) -> Body:
    """An answer with a top-level error and no partitions (``SessionErrorContext``)."""
    return {"throttle_time_ms": 0, "error_code": code, "session_id": session_id, "responses": []}


class ErrorContext:
    """``SessionErrorContext``: the request is answered ``error`` alone: which partitions it meant
    is not known."""

    __slots__ = ("error",)

    def __init__(self, error: int) -> None:
        self.error = error


class SessionlessContext:
    """``SessionlessFetchContext``: the request's partitions, answered in full, session id 0."""

    __slots__ = ()


class FullContext:
    """``FullFetchContext``: the request's partitions answered in full; ``finish`` opens a session of
    the partitions answered, if the cache has room."""

    __slots__ = ("cache", "fetch_data", "privileged")

    def __init__(self, cache: FetchSessionCache, fetch_data: dict[Key, CachedPartition], privileged: bool) -> None:
        self.cache = cache
        self.fetch_data = fetch_data  # the request's parameters as received (wrappers may alter the body)
        self.privileged = privileged

    def finish(self, resp: Body, now: int) -> Body:
        """``updateAndGenerateResponseData``: ``resp`` with the new session's id (0 if none)."""
        fetch_data = self.fetch_data

        def partitions() -> dict[Key, CachedPartition]:
            out: dict[Key, CachedPartition] = {}
            for key, p in _answered(resp):
                cp = fetch_data.get(key)
                if cp is None:  # answered without being asked (cannot happen): not cached
                    continue
                cp.high_watermark = p["high_watermark"]
                cp.local_log_start_offset = p["log_start_offset"]
                out[key] = cp
            return out

        size = sum(len(t["partitions"] or ()) for t in resp.get("responses") or ())
        sid = self.cache.next_shard().maybe_create_session(now, self.privileged, size, partitions)
        resp["session_id"] = sid
        return resp


class IncrementalContext:
    """``IncrementalFetchContext``: the session's partitions are read (``request_topics``), and
    ``finish`` answers only those that changed."""

    __slots__ = ("req_epoch", "session")

    def __init__(self, session: FetchSession, req_epoch: int) -> None:
        self.session = session
        self.req_epoch = req_epoch

    def request_topics(self, named: dict[Key, Body] | None = None) -> list[Body]:
        """The session's partitions as a request's ``topics`` (consecutive runs of one topic, in the
        session's order, as ``FetchRequest`` builds them). A partition the request named is handed
        on as its own entry (decoded for this request, the parameters the session just took from
        it); the others as ``request_entry`` makes them."""
        topics: list[Body] = []
        last = None
        parts: list[Body] = []
        get = named.get if named else None
        for key, cp in self.session.partitions.items():
            topic = key[0]
            if topic != last:
                parts = []
                topics.append({"topic": topic, "partitions": parts})
                last = topic
            entry = get(key) if get is not None else None
            parts.append(entry if entry is not None else cp.request_entry(key[1]))
        return topics

    def finish(self, resp: Body, now: int = 0) -> Body:
        """``updateAndGenerateResponseData``: INVALID_FETCH_SESSION_EPOCH if another request of the
        session came in between, else ``resp`` less the partitions that did not change (``now`` is
        not used: the session was touched by ``new_context``)."""
        session = self.session
        if session.epoch != next_epoch(self.req_epoch):
            return error_answer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id)
        parts = session.partitions
        out = []
        for t in resp.get("responses") or ():
            name = t["topic"]
            kept = []
            for p in t["partitions"] or ():
                key = (name, p["partition_index"])
                cp = parts.get(key)
                if cp is None:
                    kept.append(p)  # not the session's (cannot happen): passed on as it is
                    continue
                if cp.maybe_update(p, True):
                    kept.append(p)
                    if p.get("records"):
                        del parts[key]  # to the end: the others are read first next time
                        parts[key] = cp
            if kept:
                out.append({"topic": name, "partitions": kept})
        return {**resp, "responses": out, "session_id": session.id}


Context = ErrorContext | SessionlessContext | FullContext | IncrementalContext


def _answered(resp: Body) -> Iterator[tuple[Key, Body]]:
    for t in resp.get("responses") or ():
        name = t["topic"]
        for p in t["partitions"] or ():
            yield (name, p["partition_index"]), p


def request_partitions(topics: Iterable[Body] | None) -> dict[Key, Body]:
    """A request's ``topics`` as {(topic, partition): entry}."""
    return {(t["topic"], p["partition"]): p for t in topics or () for p in t["partitions"] or ()}


def forgotten(entries: Iterable[Body] | None) -> list[Key]:
    """A request's ``forgotten_topics_data`` as keys."""
    return [(t["topic"], p) for t in entries or () for p in t["partitions"] or ()]


def new_context(
    cache: FetchSessionCache,
    now: int,
    session_id: int,
    epoch: int,
    privileged: bool,
    fetch_data: dict[Key, Body],
    to_forget: list[Key],
) -> Context:
    """``FetchManager.newContext``. A full request closes the session it names; epoch -1 opens none.
    An incremental one updates its session and moves its epoch on; a session left with no
    partitions is closed and the request answered sessionless."""
    if is_full(epoch):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return SessionlessContext()
        return FullContext(cache, {k: CachedPartition(p) for k, p in fetch_data.items()}, privileged)
    shard = cache.shard_of(session_id)
    session = None if shard is None else shard.get(session_id)
    if shard is None or session is None:
        return ErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return ErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    session.update(fetch_data, to_forget)
    if not session.partitions:
        shard.remove(session)
        return SessionlessContext()
    shard.touch(session, now)
    session.epoch = next_epoch(session.epoch)
    return IncrementalContext(session, epoch)
