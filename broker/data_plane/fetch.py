"""Fetch: reading the partitions, read_committed, and fetches parked until data arrives.

Partitions are read in request order; the first partition with data may return one batch larger
than the limits (Kafka's ``minOneMessage``), later ones stay within ``partition_max_bytes`` and what
is left of ``max_bytes``. Reads return whole batches (Kafka may end a response with a partial
batch; clients accept both), and a response never exceeds Kafka's broker ``fetch.max.bytes``
(55 MiB) whatever the request asks for. The high watermark of a partition is its log end offset
(one shared log per partition: ``produce.py``).

Fetch sessions (KIP-227, ``fetch_sessions.py``). ``with_sessions`` is put in front of everything
else on the Fetch route (the ACL check, the cluster's leader check: ``Broker._register``), as
``FetchManager.newContext`` runs first in ``KafkaApis.handleFetchRequest``: a session error is
answered at once with no partitions; an incremental request is handed on naming all of its
session's partitions with their cached parameters (so the ACL and leader checks see them all, as
KafkaApis authorizes ``fetchContext.foreachPartition``), and its answer, once merged with what the
wrappers refused, is cut down to the partitions that changed when it is encoded
(``updateAndGenerateResponseData``), also when it was parked first. One cache per broker (node id),
keyed by session id, not by connection: a connection closing leaves its sessions to eviction, as
Kafka.

read_committed. The last stable offset is the first offset of the oldest transaction still open in
the partition, else the high watermark. A read_committed Fetch returns whole batches below the LSO
and the aborted transactions overlapping them; the partition's producer state is loaded first if
need be (``producers.py``: start-up reads nothing).

Parked fetches. If fewer than ``min_bytes`` are available, no partition had an error and
``max_wait_ms`` > 0, the fetch is parked: it registers with each partition it reads, each append
adds its size to the parked fetch's count (capped per partition at ``partition_max_bytes``:
``notify``, called by Produce and the markers), and the fetch is read again and answered once
``min_bytes`` is reached or its max wait is over (``DelayedFetch.tryComplete`` / ``onExpiration``:
the fetches parked with one ``max_wait_ms`` expire in the order they parked, from one queue each
under a single loop timer, as Kafka's purgatory keeps delayed operations on its timing wheel
rather than a timer each). Nothing polls. A read_committed
fetch is woken by a marker that moves the LSO, not by appends above it. A parked fetch holds its
request's in-flight slot, so the server's ``max_inflight`` bounds them per connection, and it is
dropped as soon as its connection closes (a close callback), not when its timer fires. Appends that
do not go through the data plane (the coordinator's own writes to ``__consumer_offsets``) do not
wake fetches; a fetch of that topic waits out ``max_wait_ms``.

On the wire. Fetch v4-12 requests are read and answers written in C where it can
(``fetch_wire.py``, ``_fetch.c``: the generic codecs are the reference and take the rest), and an
incremental session request takes ``new_context``'s branch inline and hands on the entries it named
(issue 29 item 4: franz-go's ~40k small fetches at three brokers).

Old versions. Fetch v0-3, which Kafka 4.0 removed, is served as Kafka 3.x served it: the answer is
down-converted to the magic the client reads (RecordsUtil.downConvert; zstd batches answer
UNSUPPORTED_COMPRESSION_TYPE, as KafkaApis does below Fetch v10). Fetch v0-2 keep Kafka 3.x's v3+
rule of returning at least one whole batch (Kafka sent a truncated one for v0-2, which old clients
read as "grow the fetch size").
"""

from __future__ import annotations

import asyncio
import math
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.ratelimit import LogLimiter
from groupd.protocol.server import Request
from groupd.storage import legacy
from groupd.storage import records as rec
from groupd.storage.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    StorageError,
    UnsupportedCompressionError,
)

from ..producer_state import PartitionProducers
from .fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    ErrorContext,
    FetchSessionCache,
    FullContext,
    IncrementalContext,
    SessionlessContext,
    error_answer,
    forgotten,
    new_context,
    next_epoch,
    request_partitions,
)
from .producers import ProducerStates
from .state import INT32_MAX, LEADER_EPOCH, DataState, Key, Wake

__all__ = [
    "FETCH_MAX_BYTES",
    "FETCH_VERSIONS",
    "LEGACY_FETCH_MAX",
    "FetchHandler",
    "FetchSessionStats",
    "ParkedFetch",
    "stable_prefix",
]

# What Fetch serves (and ApiVersions advertises): the whole range of the schema.
FETCH_VERSIONS = (0, 12)
# Fetch v0-1 answers magic 0, v2-3 magic 1 (Kafka 3.x's KafkaApis.handleFetchRequest).
LEGACY_FETCH_MAX = 3
# The first Fetch version with session ids and epochs (KIP-227).
SESSION_VERSION = 7
# Kafka's broker-side fetch.max.bytes: the most one Fetch response may carry, whatever it asks for.
FETCH_MAX_BYTES = 57_671_680
_BASE_AND_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")

log = structlog.get_logger("groupd.data")
limited_log = LogLimiter(log)


class ParkedFetch:
    """A Fetch waiting for min_bytes or max_wait_ms (its ``deadline``, on the loop's clock)."""

    __slots__ = ("accumulated", "caps", "deadline", "done", "keys", "min_bytes", "read_committed", "req")

    def __init__(self, req: Request, min_bytes: int, accumulated: int, caps: dict[Key, int]) -> None:
        self.req: Request | None = req  # None once answered (the expiry queue may hold it a while)
        self.read_committed = req.body.get("isolation_level", 0) == 1
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.caps = caps  # remaining bytes each partition may still contribute
        self.keys = list(caps)
        self.deadline = 0.0
        self.done = False


class FetchSessionStats:
    """Fetch requests by the context ``FetchManager.newContext`` gave them (the metrics' counters)."""

    __slots__ = ("error", "full", "incremental", "sessionless")

    def __init__(self) -> None:
        self.sessionless = 0
        self.full = 0
        self.incremental = 0
        self.error = 0


class FetchHandler:
    """Fetch (KafkaApis.handleFetchRequest) and the fetches parked on partitions (DelayedFetch)."""

    def __init__(self, state: DataState, producer_states: ProducerStates) -> None:
        self.state = state
        self.producer_states = producer_states
        # The fetch session cache of each broker (node id; None: a data plane used on its own).
        self.session_caches: dict[int | None, FetchSessionCache] = {}
        self.session_stats = FetchSessionStats()
        self.waiters: dict[Key, set[ParkedFetch]] = {}
        # The same parked fetches by connection, dropped when it closes (``connection_closed``).
        self.parked: dict[Any, set[ParkedFetch]] = {}
        # Other readers woken by the same appends and markers (share fetches: ``broker.share``).
        self.listeners: list[Wake] = []
        # Max wait expiry: the parked fetches of each max_wait_ms in the order they parked, so in
        # deadline order, and one loop timer for the earliest head (Kafka's purgatory keeps its
        # delayed operations on a timing wheel, ``SystemTimer``, not a timer each). A call_later per
        # fetch cost a uvloop timer made, cancelled and freed for every parked fetch, almost all of
        # them woken by an append long before their max wait. Answered fetches stay queued until
        # they reach the head or the queues are compacted (``_expired``, ``complete``).
        self._expiry: dict[int, deque[ParkedFetch]] = {}
        self._expiry_done = 0  # answered fetches still queued
        self._expiry_live = 0  # parked fetches queued: at 0 the queues are emptied
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        # ``connection_closed`` bound once: a parking fetch registers it on its connection (the
        # same object each time, so the connection keeps one entry)
        self._on_close = self.connection_closed

    def handle(self, req: Request) -> Any:
        """The answer, None when parked (answered later), or an awaitable when the producer states of
        a read_committed request load first."""
        body = req.body
        v = req.api_version
        if body.get("isolation_level", 0) == 1:
            missing = self.producer_states.unloaded(body)
            if missing:
                return self.producer_states.after_load(missing, lambda: self.handle(req))
        response, total, error, caps = self.read(body, v)
        if body["max_wait_ms"] <= 0 or total >= body["min_bytes"] or error or not caps:
            return response
        w = ParkedFetch(req, body["min_bytes"], total, caps)
        waiters = self.waiters
        for key in w.keys:
            ws = waiters.get(key)
            if ws is None:
                waiters[key] = {w}
            else:
                ws.add(w)
        ws = self.parked.get(req.conn)
        if ws is None:
            self.parked[req.conn] = {w}
        else:
            ws.add(w)
        loop = asyncio.get_running_loop()
        max_wait = body["max_wait_ms"]
        w.deadline = deadline = loop.time() + max_wait / 1000
        if self._expiry_done > 1024 and self._expiry_done * 2 > sum(map(len, self._expiry.values())):
            self._compact()
        queue = self._expiry.get(max_wait)
        if queue is None:
            queue = self._expiry[max_wait] = deque()
        queue.append(w)
        self._expiry_live += 1
        if deadline < self._timer_at:
            self._arm(loop, deadline)
        # A closed connection's fetches go at once, not after max_wait_ms (up to 24 days): a client
        # that parks fetches and reconnects must not pile them up. Its parked fetches are bounded
        # while it is open by the server's max in-flight requests (they hold their slots).
        add_close_callback = getattr(req.conn, "add_close_callback", None)
        if add_close_callback is not None:  # test doubles may not have it
            add_close_callback(self._on_close)
        return None

    def session_cache(self, node_id: int | None = None) -> FetchSessionCache:
        """Broker ``node_id``'s fetch session cache (Kafka's ``FetchManager``, one per broker)."""
        cache = self.session_caches.get(node_id)
        if cache is None:
            config = self.state.config
            cache = self.session_caches[node_id] = FetchSessionCache(
                config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms
            )
        return cache

    def with_sessions(self, inner: Callable[[Request], Any], node_id: int | None = None) -> Callable[[Request], Any]:
        """``inner`` (the Fetch route as wrapped so far) behind broker ``node_id``'s fetch sessions:
        ``FetchManager.newContext`` before it, ``updateAndGenerateResponseData`` on its answer."""
        cache = self.session_cache(node_id)
        clock = self.state.clock
        stats = self.session_stats

        def fetch(req: Request) -> Any:
            if req.api_version < SESSION_VERSION:
                stats.sessionless += 1
                return inner(req)  # FetchMetadata.LEGACY: no session fields
            body = req.body
            session_id = body["session_id"]
            epoch = body["session_epoch"]
            if session_id == INVALID_SESSION_ID and (
                epoch == FINAL_EPOCH or (epoch == INITIAL_EPOCH and not cache.enabled)
            ):
                # Sessionless, or a session asked of a cache without slots: nothing to open or close
                # (librdkafka's every Fetch).
                stats.sessionless += 1
                return inner(req)
            fetch_data = request_partitions(body["topics"])
            if epoch > 0 and session_id != INVALID_SESSION_ID:
                # The common case first (franz-go's every Fetch after the first): new_context's
                # incremental branch, inlined.
                shard = cache.shard_of(session_id)
                session = None if shard is None else shard.sessions.get(session_id)
                if session is not None and session.epoch == epoch:
                    session.update(fetch_data, forgotten(body.get("forgotten_topics_data")))
                    if session.partitions:
                        shard.touch(session, clock())
                        session.epoch = next_epoch(epoch)
                        stats.incremental += 1
                        inc = IncrementalContext(session, epoch)
                        req.body = {**body, "topics": inc.request_topics(fetch_data), "forgotten_topics_data": []}
                        finish_inc = inc.finish
                        encode_inc = req.encode_response

                        def finished_inc(r: Request, resp: dict[str, Any]) -> bytes:
                            return encode_inc(r, finish_inc(resp))

                        req.encode_response = finished_inc
                        return inner(req)
                    shard.remove(session)
                    stats.sessionless += 1
                    return inner(req)
            ctx = new_context(
                cache,
                clock(),
                session_id,
                epoch,
                body.get("replica_id", -1) >= 0,  # a follower's session is privileged
                fetch_data,
                forgotten(body.get("forgotten_topics_data")),
            )
            if isinstance(ctx, ErrorContext):
                stats.error += 1
                log.debug("fetch_session_error", node=node_id, session_id=session_id, epoch=epoch, error=ctx.error)
                return error_answer(ctx.error)
            if isinstance(ctx, SessionlessContext):
                stats.sessionless += 1
                return inner(req)
            if isinstance(ctx, IncrementalContext):
                stats.incremental += 1
                req.body = {**body, "topics": ctx.request_topics(fetch_data), "forgotten_topics_data": []}
            else:
                stats.full += 1
            finish = ctx.finish
            encode = req.encode_response
            full = isinstance(ctx, FullContext)

            def finished(r: Request, resp: dict[str, Any]) -> bytes:
                out = finish(resp) if not full else finish(resp, clock())
                if full:
                    log.debug("fetch_session_opened", node=node_id, session_id=out["session_id"], closed=session_id)
                return encode(r, out)

            req.encode_response = finished
            return inner(req)

        return fetch

    def forget_sessions(self, node_id: int | None) -> None:
        """Broker ``node_id`` stopped: its sessions go (its clients open new ones when it is back)."""
        cache = self.session_caches.get(node_id)
        if cache is not None:
            cache.clear()

    @property
    def fetch_sessions(self) -> int:
        """Fetch sessions cached by every broker (the ``groupd_fetch_sessions`` gauge)."""
        return sum(c.size for c in self.session_caches.values())

    @property
    def fetch_session_partitions(self) -> int:
        """Partitions those sessions hold (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(c.total_partitions for c in self.session_caches.values())

    @property
    def fetch_session_evictions(self) -> int:
        return sum(c.evictions for c in self.session_caches.values())

    @property
    def parked_fetches(self) -> int:
        """Fetches waiting for min_bytes or max_wait_ms (the ``groupd_fetch_parked`` gauge)."""
        return sum(map(len, self.parked.values()))

    def connection_closed(self, conn: Any) -> None:
        """The connection's close callback: its parked fetches go now, not when their timers fire."""
        for w in list(self.parked.pop(conn, ())):
            self.complete(w)

    def notify(self, key: Key, size: int, *, stable_moved: bool = False) -> None:
        """``size`` bytes were appended to ``key`` (Produce, markers: the ``Wake`` they are handed):
        answer the parked fetches that now have ``min_bytes``, and tell the ``listeners``."""
        for listener in self.listeners:
            listener(key, size, stable_moved=stable_moved)
        waiters = self.waiters.get(key)
        if not waiters:
            return
        for w in list(waiters):
            if w.read_committed:
                if stable_moved:
                    # The LSO moved: how much became readable is only known by reading.
                    req = w.req
                    assert req is not None  # still parked
                    response, total, error, _caps = self.read(req.body, req.api_version)
                    if error or total >= w.min_bytes:
                        self.complete(w, response)
                    continue
                producers = self.state.producers.get(key)
                if producers is not None and producers.unstable:
                    continue  # the append is above the LSO: nothing new for a read_committed reader
            cap = w.caps.get(key, 0)
            n = min(size, cap)
            w.caps[key] = cap - n
            w.accumulated += n
            if w.accumulated >= w.min_bytes:
                self.complete(w)

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(at, self._expired)
        self._timer_at = at

    def _compact(self) -> None:
        """Mostly answered fetches queued (woken long before their max wait): drop them."""
        for max_wait, queue in list(self._expiry.items()):
            live = deque(x for x in queue if not x.done)
            if live:
                self._expiry[max_wait] = live
            else:
                del self._expiry[max_wait]
        self._expiry_done = 0

    def _expired(self) -> None:
        """The expiry timer: answer the fetches whose max wait is over, drop the answered ones at
        the queues' heads, and arm the timer for the earliest deadline left."""
        self._timer = None
        self._timer_at = math.inf
        loop = asyncio.get_running_loop()
        # a timer may fire up to a clock tick early (uvloop counts in ms): within a ms is due
        now = loop.time() + 0.001
        due = []
        for max_wait, queue in list(self._expiry.items()):
            while queue:
                w = queue[0]
                if w.done:
                    queue.popleft()
                    self._expiry_done -= 1
                elif w.deadline <= now:
                    due.append(queue.popleft())
                else:
                    break
            if not queue:
                del self._expiry[max_wait]
        for w in due:
            self._answer(w, None, queued=False)
        heads = [q[0].deadline for q in self._expiry.values() if q]
        if heads and self._timer is None:
            self._arm(loop, min(heads))

    def complete(self, w: ParkedFetch, response: dict[str, Any] | None = None) -> None:
        """Unpark ``w`` and answer it (read again unless ``response`` is given)."""
        self._answer(w, response, queued=True)

    def _answer(self, w: ParkedFetch, response: dict[str, Any] | None, *, queued: bool) -> None:
        """``complete``; ``queued``: ``w`` is still in its expiry queue (not popped by the timer)."""
        if w.done:
            return
        w.done = True
        self._expiry_live -= 1
        if not self._expiry_live:
            # Nothing left to expire: no queue kept. The timer stays armed (when it fires it finds
            # nothing, or re-arms for what parked since): cancelled here it was made again by the
            # next fetch that parks, a timer per fetch once more for a client with one in flight.
            self._expiry.clear()
            self._expiry_done = 0
        elif queued:
            self._expiry_done += 1
        req = w.req
        w.req = None  # the request (and its answer) is not kept alive by the expiry queue
        assert req is not None
        for key in w.keys:
            ws = self.waiters.get(key)
            if ws is not None:
                ws.discard(w)
                if not ws:
                    del self.waiters[key]
        ws = self.parked.get(req.conn)
        if ws is not None:
            ws.discard(w)
            if not ws:
                del self.parked[req.conn]
        if req.conn.closed:
            return
        try:
            if response is None:
                response = self.read(req.body, req.api_version)[0]
        except Exception:
            log.exception("fetch_failed")
            req.conn.close("internal error while handling fetch")
            return
        req.respond(response)

    def read(self, body: dict[str, Any], v: int) -> tuple[dict[str, Any], int, bool, dict[Key, int]]:
        """Read every requested partition now: (response, bytes read, any error, per-partition caps
        of the partitions that can still grow)."""
        limit = min(body.get("max_bytes", INT32_MAX), FETCH_MAX_BYTES)  # absent below v3: no limit
        min_one = True
        total = 0
        error = False
        caps: dict[Key, int] = {}
        read_committed = body.get("isolation_level", 0) == 1
        responses = []
        state = self.state
        topics = state.topics.topics  # the registry's dict (TopicRegistry.get without the call)
        logs = state.logs
        loaded = state.producers
        for tp in body["topics"] or ():
            name = tp["topic"]
            t = topics.get(name)
            parts: list[dict[str, Any]] = []
            responses.append({"topic": name, "partitions": parts})
            for fp in tp["partitions"] or ():
                index = fp["partition"]
                if t is None or not 0 <= index < t.partitions:
                    parts.append(_failed(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, read_committed))
                    error = True
                    continue
                epoch = fp.get("current_leader_epoch", -1)
                if epoch is not None and epoch > LEADER_EPOCH:
                    parts.append(_failed(index, ErrorCode.UNKNOWN_LEADER_EPOCH, read_committed))
                    error = True
                    continue
                key = (name, index)
                aborted = None
                try:
                    plog = logs.get(name, index) or state.log_for(t, index)
                    hw = plog.log_end_offset
                    start = plog.log_start_offset
                    pmax = fp["partition_max_bytes"]
                    if pmax > FETCH_MAX_BYTES:
                        pmax = FETCH_MAX_BYTES
                    want = pmax if pmax < limit else limit
                    offset = fp["fetch_offset"]
                    if want <= 0 and not min_one:
                        if not start <= offset <= hw:
                            raise OffsetOutOfRangeError(f"offset {offset} outside [{start}, {hw}]")
                        data = b""
                    else:
                        data = plog.read(offset, want if want > 0 else 0, min_one_batch=min_one)
                    producers = loaded.get(key)
                    if read_committed:
                        if producers is None:
                            producers = PartitionProducers()
                        lso = producers.last_stable_offset(hw, start)
                        data, upper = stable_prefix(data, lso)
                        aborted = [
                            {"producer_id": a.producer_id, "first_offset": a.first_offset}
                            for a in (producers.collect_aborted(offset, upper) if data else ())
                        ]
                    else:
                        # Kafka fills the LSO whatever the isolation level (LogReadResult); a partition
                        # whose producer state is not rebuilt yet answers its high watermark here.
                        lso = (
                            hw
                            if producers is None or not producers.unstable
                            else producers.last_stable_offset(hw, start)
                        )
                    if v <= LEGACY_FETCH_MAX and data:
                        data = legacy.down_convert(data, 0 if v <= 1 else 1, offset)
                except OffsetOutOfRangeError:
                    parts.append(_failed(index, ErrorCode.OFFSET_OUT_OF_RANGE, read_committed))
                    error = True
                    continue
                except UnsupportedCompressionError:
                    # KafkaApis: zstd batches are not down-converted for Fetch below v10.
                    parts.append(_failed(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, read_committed))
                    error = True
                    continue
                except (StorageError, CorruptRecordError, ValueError) as exc:
                    limited_log.error(
                        "fetch_read_failed", key=(name, index), topic=name, partition=index, error=str(exc)
                    )
                    parts.append(_failed(index, ErrorCode.KAFKA_STORAGE_ERROR, read_committed))
                    error = True
                    continue
                parts.append(
                    {
                        "partition_index": index,
                        "error_code": ErrorCode.NONE,
                        "high_watermark": hw,
                        "last_stable_offset": lso,
                        "log_start_offset": start,
                        "aborted_transactions": aborted,
                        "preferred_read_replica": -1,
                        "records": data,
                    }
                )
                n = len(data)
                if n:
                    min_one = False
                    total += n
                    limit = limit - n if limit > n else 0
                caps[key] = pmax - n if pmax > n else 0
        response = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}
        return response, total, error, caps

    def drop_topic(self, name: str) -> None:
        """Answer the fetches parked on a deleted topic now (they read UNKNOWN_TOPIC_OR_PARTITION)."""
        for key in [k for k in self.waiters if k[0] == name]:
            for w in list(self.waiters.get(key, ())):
                self.complete(w)

    def complete_all(self) -> None:
        """Answer every parked fetch now (a clean shutdown)."""
        for waiters in list(self.waiters.values()):
            for w in list(waiters):
                self.complete(w)


def _failed(index: int, code: int, read_committed: bool) -> dict[str, Any]:
    """The answer of a partition that could not be read (no records, offsets -1)."""
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [] if read_committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }


def stable_prefix(data: bytes, end: int) -> tuple[bytes, int]:
    """The whole batches of ``data`` that lie below offset ``end`` (the LSO: it always falls on a
    batch boundary), and the offset after the last of them (collectAbortedTxns' upper bound)."""
    pos = 0
    n = len(data)
    upper = -1
    while pos + rec.HEADER_SIZE <= n:
        base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
        if base >= end:
            break
        upper = base + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
        pos += rec.LOG_OVERHEAD + length
    return (data if pos >= n else data[:pos]), upper
