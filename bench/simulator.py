"""Member simulator: the client side of Kafka's classic group protocol, many members per process.

Theory of operation
-------------------
A *member* plays what the seeds describe as the consumer's ``AbstractCoordinator``: it starts
UNJOINED, sends JoinGroup and becomes REBALANCING; a v4+ coordinator answers MEMBER_ID_REQUIRED
with a member id, and the member joins again with it. The join response names a leader; the leader
decodes every member's subscription and computes the assignment (range or round-robin, as the
coordinator chose from the protocols offered), and every member sends SyncGroup (the leader with
the assignments). A successful sync makes the member STABLE and starts its heartbeat loop: one
Heartbeat every ``heartbeat_interval_ms`` after the previous answer. REBALANCE_IN_PROGRESS sends
the member back to JoinGroup with its member id; UNKNOWN_MEMBER_ID resets the member id and
ILLEGAL_GENERATION the generation, then it rejoins. A STABLE member can commit offsets for its
assigned partitions, and leaving sends LeaveGroup.

Members are callback-driven objects, not tasks: a request is ``Connection.request(api, version,
body, callback)``, and the callback is the next step of the state machine. Thousands of members
share a few connections: requests are pipelined (matched by correlation id) and every request
queued in one event-loop iteration goes out in one ``write``. Long-polling requests (JoinGroup,
SyncGroup) travel on their own pool of connections, because a broker answers each connection in
request order: a heartbeat queued behind a JoinGroup that waits for a rebalance would wait too.

The simulator does its own discovery: ApiVersions on every connection (every API is used at the
highest version both sides know, further capped by ``caps``), Metadata for brokers and topic
partition counts (CreateTopics first if the broker offers it), and FindCoordinator for each group
(batched with v4+). A *raw* target (the echo baseline) gets no discovery: versions are given.

    python -m bench.simulator --bootstrap 127.0.0.1:9092 --groups 10 --members 10 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import multiprocessing
import os
import random
import socket
import struct
import sys
import time
import uuid
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from groupd.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER
from groupd.protocol.schema import ApiSchema, Codec

perf_counter = time.perf_counter
process_time = time.process_time

# --- error codes (clients' Errors.java) ------------------------------------------------------------
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_REQUEST = 42
MEMBER_ID_REQUIRED = 79
ERROR_NAMES = {
    0: "NONE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    5: "LEADER_NOT_AVAILABLE",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    22: "ILLEGAL_GENERATION",
    23: "INCONSISTENT_GROUP_PROTOCOL",
    25: "UNKNOWN_MEMBER_ID",
    26: "INVALID_SESSION_TIMEOUT",
    27: "REBALANCE_IN_PROGRESS",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    79: "MEMBER_ID_REQUIRED",
    81: "GROUP_MAX_SIZE_REACHED",
}
_RETRIABLE_COORDINATOR = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)

# Versions the librdkafka mock cluster mis-handles above these (see ../shared/reference.md).
MOCK_CAPS = {"JoinGroup": 5, "SyncGroup": 3, "LeaveGroup": 2}
# OffsetCommit v9+ belongs to KIP-848 groups; classic consumers stop at v8.
DEFAULT_CAPS = {"OffsetCommit": 8}

UNJOINED, REBALANCING, STABLE = "UNJOINED", "REBALANCING", "STABLE"
# groupd stops reading a connection with 1024 unanswered requests: stay well below with long polls.
MEMBERS_PER_LONG_POLL_CONN = 250

JOIN_GROUP = API_BY_NAME["JoinGroup"]
SYNC_GROUP = API_BY_NAME["SyncGroup"]
HEARTBEAT = API_BY_NAME["Heartbeat"]
LEAVE_GROUP = API_BY_NAME["LeaveGroup"]
OFFSET_COMMIT = API_BY_NAME["OffsetCommit"]
FIND_COORDINATOR = API_BY_NAME["FindCoordinator"]
METADATA = API_BY_NAME["Metadata"]
API_VERSIONS = API_BY_NAME["ApiVersions"]
CREATE_TOPICS = API_BY_NAME["CreateTopics"]
GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit")

_PREFIX = struct.Struct(">ihhi")  # frame size, api key, api version, correlation id
_SIZE_CORR = struct.Struct(">ii")


class ConnectionLost(Exception):
    pass


# an offset no commit of the bench uses, found in the encoded body to join each commit's offset in
_OFFSET_PATTERN = 0x5A5A5A5A5A5A5A5A
_OFFSET_PATTERN_BYTES = _OFFSET_PATTERN.to_bytes(8, "big")
_Q = struct.Struct(">q")


class DecodeFailure:
    """Handed to a callback instead of a dict when a response body does not decode. ``error_code``
    is the top-level error code read from its fixed place, when the response has one there."""

    __slots__ = ("error", "error_code")

    def __init__(self, error: Exception, error_code: int | None = None) -> None:
        self.error = error
        self.error_code = error_code

    def __repr__(self) -> str:
        return f"DecodeFailure({self.error!r})"


# (response dict | DecodeFailure | ConnectionLost, latency in seconds)
Callback = Callable[[Any, float], None]


def decode_raw(s: _Spec, frame: bytes) -> Any:
    """An answer received with ``send_payload(raw=True)``, decoded as ``request`` would have."""
    p = 0
    try:
        if s.flexible_response:
            p = _skip_tagged_fields(frame, 0)
        return s.response_codec.parse_at(frame, p)[0]
    except Exception as e:
        return DecodeFailure(e, _peek_error_code(s.response_codec, frame, p))


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    def uvarint(pos: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, pos
            shift += 7

    count, pos = uvarint(pos)
    for _ in range(count):
        _tag, pos = uvarint(pos)
        size, pos = uvarint(pos)
        pos += size
    return pos


def _peek_error_code(codec: Codec, frame: bytes, pos: int) -> int | None:
    """The top-level error code of a response that does not decode as a whole (the librdkafka mock
    sends a null assignment in some SyncGroup errors), when it sits at a fixed offset."""
    names = [f.name for f in codec.struct.fields]
    if "error_code" not in names[:2]:
        return None
    off = pos + (4 if names[0] == "throttle_time_ms" else 0)
    if len(frame) < off + 2:
        return None
    return int.from_bytes(frame[off : off + 2], "big", signed=True)


class _Spec:
    """What a connection needs to frame one (api, version): header bytes after the correlation id,
    the request/response codecs and whether the response header carries tagged fields."""

    __slots__ = ("api_key", "encode", "flexible_response", "response_codec", "suffix", "version")

    def __init__(self, api: ApiSchema, version: int, client_id: str) -> None:
        header_version = 2 if api.is_flexible(version) else 1
        header = REQUEST_HEADER.codec(header_version).encode(
            {"request_api_key": api.key, "request_api_version": version, "correlation_id": 0, "client_id": client_id}
        )
        self.api_key = api.key
        self.version = version
        self.suffix = header[8:]  # client id (+ tagged fields): the header after the correlation id
        self.encode: Callable[[Any], bytes] = api.request.codec(version).encode
        self.response_codec: Codec = api.response.codec(version)
        # ApiVersions answers with response header v0 at every version (KIP-511).
        self.flexible_response = api.is_flexible(version) and api.key != API_VERSIONS.key


class Connection(asyncio.Protocol):
    """One TCP connection: pipelined requests, responses matched by correlation id."""

    def __init__(self, client_id: str = "groupd-sim", on_error: Callable[[str], None] | None = None) -> None:
        self.client_id = client_id
        self.on_error = on_error
        self.transport: asyncio.Transport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lost: BaseException | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        self._buf = bytearray()
        self._pending: dict[int, tuple[Callback, Codec, float, bool]] = {}
        self._specs: dict[tuple[int, int], _Spec] = {}
        self._corr = 0
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self.sent = 0
        self.received = 0

    @classmethod
    async def open(cls, host: str, port: int, **kw: Any) -> Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: cls(**kw), host, port)
        return conn

    @property
    def inflight(self) -> int:
        return len(self._pending)

    # --- asyncio.Protocol -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.loop = asyncio.get_running_loop()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionLost("connection closed")
        pending, self._pending = self._pending, {}
        now = perf_counter()
        err = ConnectionLost(str(self.lost))
        for cb, _codec, t0, _flex in pending.values():
            self._call(cb, err, now - t0)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        end = len(buf)
        pending = self._pending
        while end - pos >= 8:
            size, corr = _SIZE_CORR.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 8 : pos + 4 + size])
            pos += 4 + size
            entry = pending.pop(corr, None)
            if entry is None:
                if self.on_error:
                    self.on_error(f"response with unknown correlation id {corr}")
                continue
            cb, codec, t0, flexible = entry
            lat = perf_counter() - t0
            self.received += 1
            if codec is None:  # send_payload(raw=True)
                self._call(cb, frame, lat)
                continue
            p = 0
            try:
                if flexible:
                    p = _skip_tagged_fields(frame, 0)
                resp: Any = codec.parse_at(frame, p)[0]
            except Exception as e:
                resp = DecodeFailure(e, _peek_error_code(codec, frame, p))
            self._call(cb, resp, lat)
        if pos:
            del buf[:pos]

    def _call(self, cb: Callback, resp: Any, lat: float) -> None:
        try:
            cb(resp, lat)
        except Exception as e:  # a simulator bug must not take the other members down with it
            if self.on_error:
                self.on_error(f"callback failed: {e!r}")
            else:
                raise

    # --- requests -------------------------------------------------------------------------------
    def spec(self, api: ApiSchema, version: int) -> _Spec:
        s = self._specs.get((api.key, version))
        if s is None:
            s = self._specs[(api.key, version)] = _Spec(api, version, self.client_id)
        return s

    def request(self, api: ApiSchema, version: int, body: Any, cb: Callback) -> None:
        """Queue a request; ``cb(response, latency_s)`` runs when the answer arrives (or the
        connection is lost: then ``response`` is a ConnectionLost)."""
        if self.lost is not None:
            assert self.loop is not None
            self.loop.call_soon(cb, ConnectionLost(str(self.lost)), 0.0)
            return
        s = self._specs.get((api.key, version)) or self.spec(api, version)
        self._corr = corr = (self._corr + 1) & 0x7FFFFFFF
        payload = s.suffix + s.encode(body)
        self._pending[corr] = (cb, s.response_codec, perf_counter(), s.flexible_response)
        self._out.append(_PREFIX.pack(len(payload) + 8, s.api_key, s.version, corr) + payload)
        self.sent += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)  # type: ignore[union-attr]

    def send_payload(self, s: _Spec, payload: bytes, cb: Callback, *, raw: bool = False) -> None:
        """``request`` for a body encoded ahead of time: ``payload`` is ``s.suffix + body bytes``
        (a stable member's Heartbeat never changes, only its correlation id does). ``raw``: the
        answer is handed over undecoded (the response header's tagged fields and body, as bytes:
        ``decode_raw``)."""
        if self.lost is not None:
            assert self.loop is not None
            self.loop.call_soon(cb, ConnectionLost(str(self.lost)), 0.0)
            return
        self._corr = corr = (self._corr + 1) & 0x7FFFFFFF
        self._pending[corr] = (cb, None if raw else s.response_codec, perf_counter(), s.flexible_response)
        self._out.append(_PREFIX.pack(len(payload) + 8, s.api_key, s.version, corr) + payload)
        self.sent += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)  # type: ignore[union-attr]

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if out and self.transport is not None and self.lost is None:
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])

    def call(self, api: ApiSchema, version: int, body: Any) -> asyncio.Future[Any]:
        """The awaitable form, for the control plane (discovery, topic creation)."""
        assert self.loop is not None
        fut = self.loop.create_future()

        def done(resp: Any, _lat: float) -> None:
            if fut.done():
                return
            if isinstance(resp, ConnectionLost):
                fut.set_exception(resp)
            elif isinstance(resp, DecodeFailure):
                fut.set_exception(resp.error)
            else:
                fut.set_result(resp)

        self.request(api, version, body, done)
        return fut

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v3, falling back to the version the broker says it has."""
        version = min(3, API_VERSIONS.max_version)
        for _ in range(3):
            resp = await self.call(
                API_VERSIONS, version, {"client_software_name": "groupd-sim", "client_software_version": "1.0"}
            )
            if resp["error_code"] == UNSUPPORTED_VERSION:
                theirs = {k["api_key"]: k["max_version"] for k in resp.get("api_keys", [])}
                version = min(version - 1, theirs.get(API_VERSIONS.key, 0))
                continue
            if resp["error_code"] != NONE:
                raise RuntimeError(f"ApiVersions failed with error {resp['error_code']}")
            self.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
            return self.versions
        raise RuntimeError("ApiVersions negotiation failed")

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class LongPollPool:
    """Connections for the long polls (JoinGroup, SyncGroup) to one coordinator.

    Kafka, the librdkafka mock and groupd read a connection's next request only after answering the
    previous one: two members' joins on one connection wait for each other. ``exclusive`` mode
    gives each long poll a connection of its own, taken from a pool that grows on demand
    (``reserve`` opens them ahead of a measured run).
    """

    def __init__(self, sim: Simulator, addr: tuple[str, int], exclusive: bool, max_conns: int = 15000) -> None:
        self.sim = sim
        self.addr = addr
        self.exclusive = exclusive
        self.max_conns = max_conns
        self.conns: list[Connection] = []
        self.idle: list[Connection] = []
        self.waiting: deque[tuple[ApiSchema, int, Any, Callback]] = deque()
        self.opening = 0
        self.closed = False

    async def reserve(self, n: int) -> None:
        """Open connections until the pool has ``n`` (in batches of ``connect_batch``)."""
        n = min(n, self.max_conns)
        failed: BaseException | None = None
        while not self.closed and len(self.conns) + self.opening < n:
            k = min(self.sim.config.connect_batch, n - len(self.conns) - self.opening)
            self.opening += k
            try:
                # ApiVersions on each (as clients do) also paces the connects to what the broker accepts.
                opened = await asyncio.gather(*(self.sim._open(*self.addr) for _ in range(k)), return_exceptions=True)
            finally:
                self.opening -= k
            for c in opened:
                if isinstance(c, Connection):
                    if self.closed:
                        c.close()
                    else:
                        self.conns.append(c)
                        self.idle.append(c)
                elif isinstance(c, Exception):
                    failed = c
            if failed is not None:
                break
        self._dispatch()
        if failed is not None:
            raise failed

    def request(self, api: ApiSchema, version: int, body: Any, cb: Callback) -> None:
        if self.idle:
            self._send(self.idle.pop(), api, version, body, cb)
            return
        self.waiting.append((api, version, body, cb))
        self._maybe_grow()

    def _maybe_grow(self) -> None:
        # At most ``connect_batch`` connects in flight, and no more than there are waiting requests.
        if (
            not self.closed
            and self.waiting
            and len(self.conns) + self.opening < self.max_conns
            and self.opening < min(len(self.waiting), self.sim.config.connect_batch)
        ):
            self.sim.loop.create_task(self._grow())

    async def _grow(self) -> None:
        try:
            await self.reserve(len(self.conns) + self.opening + 1)
        except (OSError, ConnectionLost, RuntimeError) as e:
            # The broker refused or reset the connection (a full listen backlog): the waiting
            # request goes out on the next connection that frees up or opens.
            self.sim.stats.failures["long-poll connect"] += 1
            self.sim.stats.error(f"long-poll connection to {self.addr} failed: {e!r}")
            await asyncio.sleep(0.5)
            self._maybe_grow()

    def _send(self, conn: Connection, api: ApiSchema, version: int, body: Any, cb: Callback) -> None:
        def done(resp: Any, lat: float) -> None:
            if conn.lost is None and not self.closed:
                self.idle.append(conn)
                self._dispatch()
            elif conn in self.conns:
                self.conns.remove(conn)
                self._maybe_grow()
            cb(resp, lat)

        conn.request(api, version, body, done)

    def _dispatch(self) -> None:
        while self.waiting and self.idle:
            self._send(self.idle.pop(), *self.waiting.popleft())

    def close(self) -> None:
        self.closed = True
        self.waiting.clear()
        for c in self.conns:
            c.close()
        self.conns = []
        self.idle = []


def pick_versions(advertised: dict[int, tuple[int, int]], caps: dict[str, int], names: Iterable[str]) -> dict[str, int]:
    """The highest version of each API that the broker advertises, our codec knows and the caps allow."""
    out = {}
    for name in names:
        api = API_BY_NAME[name]
        if api.key not in advertised:
            continue
        lo, hi = advertised[api.key]
        hi = min(hi, api.max_version, caps.get(name, api.max_version))
        lo = max(lo, api.min_version)
        if lo <= hi:
            out[name] = hi
    return out


# --- assignors ----------------------------------------------------------------------------------------
def range_assign(
    subscriptions: dict[str, tuple[str, ...]], partitions: dict[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, consecutive ranges to the subscribed members in id order."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    by_topic: dict[str, list[str]] = {}
    for member, topics in subscriptions.items():
        for t in topics:
            by_topic.setdefault(t, []).append(member)
    for topic, members in sorted(by_topic.items()):
        n = partitions.get(topic, 0)
        members.sort()
        per, extra = divmod(n, len(members))
        for i, m in enumerate(members):
            start = per * i + min(i, extra)
            length = per + (1 if i < extra else 0)
            if length:
                out[m][topic] = list(range(start, start + length))
    return out


def roundrobin_assign(
    subscriptions: dict[str, tuple[str, ...]], partitions: dict[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RoundRobinAssignor: all topic-partitions in order, dealt to members in id order,
    skipping members not subscribed to the partition's topic."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    subscribed = {m: set(subscriptions[m]) for m in members}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    i = 0
    for topic in topics:
        for p in range(partitions.get(topic, 0)):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if topic in subscribed[m]:
                    out[m].setdefault(topic, []).append(p)
                    break
    return out


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign}


# --- statistics ---------------------------------------------------------------------------------------
class Stats:
    def __init__(self) -> None:
        self.answers: Counter[tuple[str, int]] = Counter()  # (api, error code) -> count
        self.failures: Counter[str] = Counter()  # connection losses, undecodable answers, callback bugs
        self.errors: list[str] = []
        self.hb_latency = array("d")
        self.commit_latency = array("d")
        self.record_latency = True
        self.spurious: Counter[tuple[str, int]] = Counter()  # bad answers to a STABLE member after settling
        self.partition_errors: Counter[int] = Counter()

    def error(self, msg: str) -> None:
        self.failures["error"] += 1
        if len(self.errors) < 50:
            self.errors.append(msg)

    def reset(self) -> None:
        self.answers.clear()
        self.hb_latency = array("d")
        self.commit_latency = array("d")
        self.spurious.clear()
        self.partition_errors.clear()

    def summary(self) -> dict[str, Any]:
        return {
            "answers": {f"{api}:{ERROR_NAMES.get(code, code)}": n for (api, code), n in sorted(self.answers.items())},
            "failures": dict(self.failures),
            "errors": self.errors[:10],
            "spurious": {f"{api}:{ERROR_NAMES.get(code, code)}": n for (api, code), n in self.spurious.items()},
            "heartbeats": len(self.hb_latency),
            "hb_p50_ms": percentile(self.hb_latency, 50) * 1000,
            "hb_p99_ms": percentile(self.hb_latency, 99) * 1000,
            "hb_max_ms": max(self.hb_latency, default=float("nan")) * 1000,
            "partition_errors": {ERROR_NAMES.get(c, c): n for c, n in self.partition_errors.items()},
        }


def percentile(values: Iterable[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class HeartbeatWheel:
    """When each stable member sends its next Heartbeat: slots of ``resolution`` seconds and one
    loop timer for the lot, instead of a timer handle per member and heartbeat (100,000 members
    at 3 s would churn 33,000 handles a second). An entry is (member, token): it fires only if the
    member's ``hb_token`` is unchanged, which is how a scheduled heartbeat is cancelled."""

    def __init__(self, loop: asyncio.AbstractEventLoop, resolution: float = 0.001) -> None:
        self.loop = loop
        self.res = resolution
        self.slots: dict[int, list[tuple[Member, int]]] = {}
        self.cursor = int(perf_counter() / resolution)
        self.handle: asyncio.TimerHandle | None = None

    def add(self, delay: float, member: Member, token: int) -> None:
        self.add_at(perf_counter() + delay, member, token)

    def add_at(self, when: float, member: Member, token: int) -> None:
        slot = max(int(when / self.res), self.cursor + 1)
        entries = self.slots.get(slot)
        if entries is None:
            self.slots[slot] = [(member, token)]
        else:
            entries.append((member, token))
        if self.handle is None:
            self.handle = self.loop.call_later(self.res, self._tick)

    def _tick(self) -> None:
        now = int(perf_counter() / self.res)
        slots = self.slots
        for slot in range(self.cursor + 1, now + 1):
            entries = slots.pop(slot, None)
            if entries:
                for member, token in entries:
                    if member.hb_token == token:
                        member.heartbeat()
        self.cursor = now
        self.handle = self.loop.call_later(self.res, self._tick) if slots else None

    def close(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        self.slots.clear()


# --- members and groups -------------------------------------------------------------------------------
class Member:
    """One simulated consumer (the seeds' client-side state machine)."""

    __slots__ = (
        "_commit_template",
        "assignment",
        "conn",
        "generation",
        "group",
        "hb_at",
        "hb_body",
        "hb_payload",
        "hb_token",
        "index",
        "jconn",
        "leader",
        "member_id",
        "protocol",
        "sim",
        "state",
        "stopped",
        "timer",
        "waiting_barrier",
    )

    def __init__(self, sim: Simulator, group: SimGroup, index: int) -> None:
        self.sim = sim
        self.group = group
        self.index = index
        self.conn: Connection | None = None  # heartbeats, commits, leaves
        self.jconn: Connection | LongPollPool | None = None  # JoinGroup / SyncGroup (long polls)
        self.state = UNJOINED
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.protocol: str | None = None
        self.assignment: tuple[TopicPartitions, ...] = ()
        self.timer: asyncio.TimerHandle | None = None
        self.stopped = False
        self.waiting_barrier = False
        self.hb_body: dict[str, Any] = {}
        self.hb_payload = b""
        # (what it was built for, the commit's bytes split at its offsets): ``commit_raw``
        self._commit_template: tuple[Any, list[bytes] | None] | None = None
        self.hb_token = 0
        self.hb_at = 0.0  # when the scheduled (or last) heartbeat is due to leave

    def __repr__(self) -> str:
        return f"Member({self.group.group_id}#{self.index} {self.state} gen={self.generation} id={self.member_id})"

    def _set_state(self, state: str) -> None:
        if state == self.state:
            return
        if self.state == STABLE:
            self.group.stable -= 1
        self.state = state
        if state == STABLE:
            self.group.stable += 1

    def _later(self, delay: float, fn: Callable[[], None]) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.sim.loop.call_later(delay, fn)

    # --- JoinGroup ------------------------------------------------------------------------------
    def join(self) -> None:
        if self.stopped:
            return
        self._set_state(REBALANCING)
        g = self.group
        sim = self.sim
        body = {
            "group_id": g.group_id,
            "session_timeout_ms": sim.config.session_timeout_ms,
            "rebalance_timeout_ms": sim.config.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": g.protocols,
            "reason": None,
        }
        g.last_join_sent = perf_counter()
        g.joins_sent += 1
        self.jconn.request(JOIN_GROUP, sim.versions["JoinGroup"], body, self._on_join)  # type: ignore[union-attr]

    def _failed(self, api: str, resp: Any, retry: Callable[[], None]) -> None:
        self.sim.stats.failures[f"{api}:{type(resp).__name__}"] += 1
        if isinstance(resp, DecodeFailure):
            code = resp.error_code
            self.sim.stats.error(
                f"{api} answer did not decode ({resp.error}); its error code: {ERROR_NAMES.get(code, code)}"
            )
            if code is not None:
                self.sim.stats.answers[(api, code)] += 1
        if not self.stopped and not isinstance(resp, ConnectionLost):
            self._later(self.sim.config.retry_backoff_s, retry)

    def _on_join(self, resp: Any, _lat: float) -> None:
        if self.stopped:
            return
        if type(resp) is not dict:
            self._failed("JoinGroup", resp, self.join)
            return
        sim = self.sim
        code = resp["error_code"]
        sim.stats.answers[("JoinGroup", code)] += 1
        if code == NONE:
            self.member_id = resp["member_id"]
            self.generation = resp["generation_id"]
            self.leader = resp["leader"]
            self.protocol = resp["protocol_name"]
            g = self.group
            if self.member_id == self.leader and not resp.get("skip_assignment"):
                t0 = perf_counter()
                assignments = g.assign(self.protocol, resp["members"])
                g.leader_assign_s += perf_counter() - t0
                if sim.config.leader_syncs_last:
                    # The librdkafka mock completes SyncGroup when the leader syncs: followers that
                    # sync later get INVALID_REQUEST. Let this process's followers go first.
                    deadline = perf_counter() + 0.2
                    self._leader_sync(self.generation, assignments, len(resp["members"]) - 1, deadline)
                    return
                self.sync(assignments)
            else:
                self.sync([])
        elif code == MEMBER_ID_REQUIRED:
            self.member_id = resp["member_id"]
            g = self.group
            if g.barrier is not None:
                self.waiting_barrier = True
                g.barrier.append(self)
                g.on_member_id(self)
            else:
                self.join()
        elif code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.join()
        elif code in _RETRIABLE_COORDINATOR or code == REBALANCE_IN_PROGRESS:
            self._later(sim.config.retry_backoff_s, self.join)
        else:
            sim.stats.error(f"{self.group.group_id}: JoinGroup failed with {ERROR_NAMES.get(code, code)}")
            self._later(1.0, self.join)

    # --- SyncGroup ------------------------------------------------------------------------------
    def _leader_sync(self, generation: int, assignments: list[dict[str, Any]], followers: int, deadline: float) -> None:
        if self.stopped or self.generation != generation or self.state != REBALANCING:
            return
        if self.group.followers_synced.get(generation, 0) >= followers or perf_counter() > deadline:
            # Their SyncGroups are written by now (same loop iteration at the latest); give the broker
            # a moment to read them before the leader's.
            self._later(0.005, lambda: self.sync(assignments))
        else:
            self._later(0.002, lambda: self._leader_sync(generation, assignments, followers, deadline))

    def sync(self, assignments: list[dict[str, Any]]) -> None:
        if self.stopped:
            return
        g = self.group
        body = {
            "group_id": g.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": self.protocol,
            "assignments": assignments,
        }
        if self.member_id != self.leader:
            g.followers_synced[self.generation] = g.followers_synced.get(self.generation, 0) + 1
        self.jconn.request(SYNC_GROUP, self.sim.versions["SyncGroup"], body, self._on_sync)  # type: ignore[union-attr]

    def _on_sync(self, resp: Any, _lat: float) -> None:
        if self.stopped:
            return
        if type(resp) is not dict:
            self._failed("SyncGroup", resp, self.join)
            return
        sim = self.sim
        code = resp["error_code"]
        sim.stats.answers[("SyncGroup", code)] += 1
        if code == NONE:
            raw = resp["assignment"]
            try:
                self.assignment = decode_assignment(raw).assigned_partitions if raw else ()
            except ValueError as e:
                sim.stats.error(f"{self.group.group_id}: undecodable assignment: {e}")
                self.assignment = ()
            self.set_heartbeat(self.generation)
            self._set_state(STABLE)
            self.group.on_synced(self)
            if sim.periodic_heartbeats:
                self.schedule_heartbeat(sim.config.heartbeat_interval_s)
        elif code == REBALANCE_IN_PROGRESS:
            self.join()
        elif code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation = -1
            self.join()
        elif code == ILLEGAL_GENERATION:
            self.generation = -1
            self.join()
        else:
            # INVALID_REQUEST from the librdkafka mock when the leader synced first, coordinator moves...
            sim.stats.error(f"{self.group.group_id}: SyncGroup failed with {ERROR_NAMES.get(code, code)}")
            self._later(sim.config.retry_backoff_s, self.join)

    # --- Heartbeat ------------------------------------------------------------------------------
    def set_heartbeat(self, generation: int) -> None:
        """The Heartbeat this member sends while stable in ``generation``, encoded once."""
        self.hb_body = {
            "group_id": self.group.group_id,
            "generation_id": generation,
            "member_id": self.member_id,
            "group_instance_id": None,
        }
        spec = self.conn.spec(HEARTBEAT, self.sim.versions["Heartbeat"])  # type: ignore[union-attr]
        self.hb_payload = spec.suffix + spec.encode(self.hb_body)

    def schedule_heartbeat(self, delay: float) -> None:
        self.hb_token += 1
        self.hb_at = perf_counter() + delay
        self.sim.wheel.add_at(self.hb_at, self, self.hb_token)

    def next_heartbeat(self) -> None:
        """One interval after the previous heartbeat was due to leave, not after its answer came:
        librdkafka and the Java client time heartbeats from the send. Timed from the answer, every
        member answered late in one batch (a stall anywhere) would heartbeat together from then on,
        a burst that repeats every interval."""
        self.hb_token += 1
        # An answer later than a whole interval: the next one leaves now (one in flight at a time).
        self.hb_at = max(self.hb_at + self.sim.config.heartbeat_interval_s, perf_counter())
        self.sim.wheel.add_at(self.hb_at, self, self.hb_token)

    def cancel_heartbeat(self) -> None:
        self.hb_token += 1

    def heartbeat(self) -> None:
        if self.stopped or self.state != STABLE:
            return
        conn = self.conn
        conn.send_payload(conn.spec(HEARTBEAT, self.sim.versions["Heartbeat"]), self.hb_payload, self._on_heartbeat)  # type: ignore[union-attr]

    def _on_heartbeat(self, resp: Any, lat: float) -> None:
        sim = self.sim
        if sim.stats.record_latency:
            sim.stats.hb_latency.append(lat)
        if self.stopped:
            return
        if type(resp) is not dict:
            self._failed("Heartbeat", resp, self.heartbeat)
            return
        code = resp["error_code"]
        sim.stats.answers[("Heartbeat", code)] += 1
        if code == NONE:
            if sim.periodic_heartbeats and self.state == STABLE:
                self.next_heartbeat()
            return
        if sim.expect_stable and self.state == STABLE:
            sim.stats.spurious[("Heartbeat", code)] += 1
        self.on_heartbeat_error(code)

    def on_heartbeat_error(self, code: int) -> None:
        if code == REBALANCE_IN_PROGRESS:
            self.join()
        elif code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation = -1
            self._set_state(UNJOINED)
            self.join()
        elif code == ILLEGAL_GENERATION:
            self.generation = -1
            self._set_state(UNJOINED)
            self.join()
        elif code in _RETRIABLE_COORDINATOR:
            self._later(self.sim.config.retry_backoff_s, self.heartbeat)
        else:
            self.sim.stats.error(f"{self.group.group_id}: Heartbeat failed with {ERROR_NAMES.get(code, code)}")
            self.schedule_heartbeat(self.sim.config.heartbeat_interval_s)

    # --- OffsetCommit ---------------------------------------------------------------------------
    def commit_body(self, offset: int) -> dict[str, Any]:
        return {
            "group_id": self.group.group_id,
            "generation_id_or_member_epoch": self.generation,
            "member_id": self.member_id,
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": tp.topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "commit_timestamp": -1,
                            "committed_metadata": "",
                        }
                        for p in tp.partitions
                    ],
                }
                for tp in self.assignment
            ],
        }

    def commit(self, offset: int, cb: Callback) -> None:
        self.conn.request(OFFSET_COMMIT, self.sim.versions["OffsetCommit"], self.commit_body(offset), cb)  # type: ignore[union-attr]

    def commit_raw(self, offset: int, cb: Callback) -> bool:
        """``commit`` from bytes encoded once (only the offsets change: they are joined in) with the
        answer undecoded (``decode_raw``): the bench's client spent ~100 us encoding and decoding
        each 100-partition commit, more than the brokers it measures. False: not possible (an
        offset pattern found elsewhere in the body), use ``commit``."""
        conn = self.conn
        assert conn is not None
        spec = conn.spec(OFFSET_COMMIT, self.sim.versions["OffsetCommit"])
        key = (spec, self.generation, self.member_id, tuple(self.assignment))
        template = self._commit_template
        if template is None or template[0] != key:
            payload = spec.suffix + spec.encode(self.commit_body(_OFFSET_PATTERN))
            segments = payload.split(_OFFSET_PATTERN_BYTES)
            n_parts = sum(len(tp.partitions) for tp in self.assignment)
            template = self._commit_template = (key, segments if len(segments) == n_parts + 1 else None)
        if template[1] is None:
            return False
        conn.send_payload(spec, _Q.pack(offset).join(template[1]), cb, raw=True)
        return True

    # --- LeaveGroup -----------------------------------------------------------------------------
    def stop(self) -> None:
        self.stopped = True
        self.hb_token += 1
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def leave(self, cb: Callback | None = None) -> None:
        """Stop and send LeaveGroup (if the member has an id)."""
        was_member = self.member_id and self.state != UNJOINED
        self.stop()
        self._set_state(UNJOINED)
        if not was_member:
            if cb:
                self.sim.loop.call_soon(cb, None, 0.0)
            return
        v = self.sim.versions["LeaveGroup"]
        g = self.group
        body: dict[str, Any] = {"group_id": g.group_id}
        if v < 3:
            body["member_id"] = self.member_id
        else:
            body["members"] = [{"member_id": self.member_id, "group_instance_id": None, "reason": "bench done"}]

        def done(resp: Any, lat: float) -> None:
            if type(resp) is dict:
                self.sim.stats.answers[("LeaveGroup", resp["error_code"])] += 1
            else:
                self.sim.stats.failures[f"LeaveGroup:{type(resp).__name__}"] += 1
            if cb:
                cb(resp, lat)

        self.conn.request(LEAVE_GROUP, v, body, done)  # type: ignore[union-attr]


class SimGroup:
    """The simulator's view of one consumer group: its members (all in this process), subscription,
    and the timing of its rebalances."""

    def __init__(
        self, sim: Simulator, group_id: str, topics: tuple[str, ...], n_members: int, assignor: str | None = None
    ) -> None:
        self.sim = sim
        self.group_id = group_id
        self.topics = topics
        sub = encode_subscription(Subscription(topics=topics))
        first = assignor or sim.config.assignor
        names = [first, *(a for a in ASSIGNORS if a != first)]
        self.protocols = [{"name": n, "metadata": sub} for n in names]
        self.members = [Member(sim, self, i) for i in range(n_members)]
        self.stable = 0  # members in STABLE
        self.last_join_sent = 0.0
        self.last_sync_answer = 0.0
        self.leader_assign_s = 0.0  # the leader's time decoding subscriptions and computing the plan
        self.joins_sent = 0
        self.followers_synced: dict[int, int] = {}
        self.barrier: list[Member] | None = None
        self.on_stable: Callable[[SimGroup], None] | None = None
        self.on_member_id: Callable[[Member], None] = lambda m: None
        self._sub_cache: dict[bytes, tuple[str, ...]] = {}

    def assign(self, protocol: str | None, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        subs = {}
        cache = self._sub_cache
        for m in members:
            md = m["metadata"]
            topics = cache.get(md)
            if topics is None:
                try:
                    topics = cache[md] = decode_subscription(md).topics
                except ValueError as e:
                    self.sim.stats.error(f"{self.group_id}: undecodable subscription: {e}")
                    topics = ()
            subs[m["member_id"]] = topics
        plan = ASSIGNORS.get(protocol or "range", range_assign)(subs, self.sim.partitions)
        return [
            {
                "member_id": mid,
                "assignment": encode_assignment(
                    Assignment(tuple(TopicPartitions(t, tuple(ps)) for t, ps in sorted(tps.items())))
                ),
            }
            for mid, tps in plan.items()
        ]

    def on_synced(self, member: Member) -> None:
        self.last_sync_answer = perf_counter()
        if self.on_stable is not None and self.is_stable():
            cb, self.on_stable = self.on_stable, None
            cb(self)

    def is_stable(self) -> bool:
        if self.stable != len(self.members):
            return False
        gen = self.members[0].generation
        return all(m.generation == gen for m in self.members)

    def start(self, *, barrier: bool = False) -> None:
        """Every member sends its first JoinGroup now (in one write per connection)."""
        self.barrier = [] if barrier else None
        for m in self.members:
            m.stopped = False
            m.join()

    def release_barrier(self) -> None:
        """Send every waiting member's second JoinGroup (with its member id) together."""
        waiting, self.barrier = self.barrier or [], None
        for m in waiting:
            m.waiting_barrier = False
            m.join()

    def check_assignment(self) -> list[str]:
        """Problems with the group's current assignment: every partition of the subscribed topics
        must be owned by exactly one member, and all members must share the generation."""
        problems = []
        gens = {m.generation for m in self.members}
        if len(gens) != 1:
            problems.append(f"{self.group_id}: members in generations {sorted(gens)}")
        states = Counter(m.state for m in self.members)
        if states[STABLE] != len(self.members):
            problems.append(f"{self.group_id}: member states {dict(states)}")
        owned: Counter[tuple[str, int]] = Counter()
        for m in self.members:
            for tp in m.assignment:
                for p in tp.partitions:
                    owned[(tp.topic, p)] += 1
        expected = {(t, p) for t in self.topics for p in range(self.sim.partitions.get(t, 0))}
        missing = expected - set(owned)
        doubled = [tp for tp, n in owned.items() if n > 1]
        extra = set(owned) - expected
        if missing:
            problems.append(f"{self.group_id}: {len(missing)} partitions unassigned, e.g. {sorted(missing)[:3]}")
        if doubled:
            problems.append(f"{self.group_id}: {len(doubled)} partitions assigned twice, e.g. {doubled[:3]}")
        if extra:
            problems.append(f"{self.group_id}: unknown partitions assigned: {sorted(extra)[:3]}")
        return problems

    def stop(self) -> None:
        for m in self.members:
            m.stop()


@dataclass
class SimConfig:
    bootstrap: str
    conns: int = 4  # per coordinator: heartbeats, commits, leaves
    join_conns: int = 0  # per coordinator: JoinGroup/SyncGroup (0: same count as conns)
    exclusive_long_polls: bool = True  # one JoinGroup/SyncGroup per connection (Kafka, the mock, groupd)
    connect_batch: int = 200  # connections opened at once (the librdkafka mock has a short listen backlog)
    client_id: str = "groupd-sim"
    caps: dict[str, int] = field(default_factory=dict)
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 30_000
    heartbeat_interval_ms: int = 3_000
    assignor: str = "range"  # offered first; the other one is offered too
    leader_syncs_last: bool = False  # for the librdkafka mock (see Member._on_join)
    retry_backoff_ms: int = 100
    raw: bool = False  # not a Kafka broker (echo baseline): no discovery, use ``versions``
    versions: dict[str, int] = field(default_factory=dict)
    # Heartbeat wheel resolution: the heartbeats due in one tick leave together. 100,000 consumers
    # with their own timers send ~33 heartbeats per ms; a 10 ms tick sent them in lumps of 333 that
    # only this simulator makes (steady p99 27-51 ms against groupd, 14 ms against the echo server).
    tick_ms: float = 1.0

    @property
    def heartbeat_interval_s(self) -> float:
        return self.heartbeat_interval_ms / 1000

    @property
    def retry_backoff_s(self) -> float:
        return self.retry_backoff_ms / 1000


def parse_hostport(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class Simulator:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.stats = Stats()
        self.loop = asyncio.get_event_loop()
        self.versions: dict[str, int] = dict(config.versions)
        self.partitions: dict[str, int] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.coordinators: dict[str, tuple[str, int]] = {}
        self.pools: dict[tuple[str, int], tuple[list[Connection], list[Connection]]] = {}
        self.long_poll_pools: dict[tuple[str, int], LongPollPool] = {}
        self.groups: list[SimGroup] = []
        self.periodic_heartbeats = True
        self.expect_stable = False
        self.bootstrap_conn: Connection | None = None
        self.advertised: dict[int, tuple[int, int]] = {}
        self.requires_member_id: bool | None = None
        self.wheel = HeartbeatWheel(self.loop)

    # --- connections and discovery --------------------------------------------------------------
    async def _open(self, host: str, port: int, negotiate: bool = True) -> Connection:
        conn = await Connection.open(host, port, client_id=self.config.client_id, on_error=self.stats.error)
        if negotiate and not self.config.raw:
            await conn.negotiate()
        return conn

    async def start(self) -> Simulator:
        self.loop = asyncio.get_running_loop()
        self.wheel = HeartbeatWheel(self.loop, self.config.tick_ms / 1000)
        host, port = parse_hostport(self.config.bootstrap)
        if self.config.raw:
            self.coordinators = {}
            return self
        self.bootstrap_conn = await self._open(host, port)
        self.advertised = self.bootstrap_conn.versions
        caps = {**DEFAULT_CAPS, **self.config.caps}
        names = ("Metadata", "FindCoordinator", "CreateTopics", *GROUP_APIS)
        self.versions = {**pick_versions(self.advertised, caps, names), **self.config.versions}
        missing = [n for n in ("Metadata", "FindCoordinator", *GROUP_APIS) if n not in self.versions]
        if missing:
            raise RuntimeError(f"{self.config.bootstrap} lacks {missing}")
        await self.metadata([])
        return self

    async def metadata(self, topics: list[str]) -> dict[str, Any]:
        v = self.versions["Metadata"]
        body = {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": t} for t in topics],
            "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        assert self.bootstrap_conn is not None
        resp = await self.bootstrap_conn.call(METADATA, v, body)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}
        return resp

    async def ensure_topics(self, topics: dict[str, int], timeout: float = 20.0) -> dict[str, int]:
        """Create the topics (CreateTopics when offered, else the broker's auto-creation) and learn
        their partition counts, which the leaders' assignors use."""
        if self.config.raw:
            self.partitions.update(topics)
            return dict(topics)
        assert self.bootstrap_conn is not None
        if "CreateTopics" in self.versions and topics:
            resp = await self.bootstrap_conn.call(
                CREATE_TOPICS,
                self.versions["CreateTopics"],
                {
                    "topics": [
                        {"name": t, "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": []}
                        for t, n in topics.items()
                    ],
                    "timeout_ms": 10_000,
                    "validate_only": False,
                },
            )
            for t in resp["topics"]:
                if t["error_code"] not in (NONE, TOPIC_ALREADY_EXISTS):
                    raise RuntimeError(f"CreateTopics {t['name']}: error {t['error_code']} {t.get('error_message')}")
        deadline = perf_counter() + timeout
        while True:
            resp = await self.metadata(list(topics))
            found = {
                t["name"]: len(t["partitions"]) for t in resp["topics"] if t["error_code"] == NONE and t["partitions"]
            }
            if all(t in found for t in topics):
                self.partitions.update(found)
                return {t: found[t] for t in topics}
            if perf_counter() > deadline:
                raise RuntimeError(f"topics not available: {sorted(set(topics) - set(found))}")
            await asyncio.sleep(0.1)

    async def find_coordinators(self, group_ids: list[str], timeout: float = 30.0) -> None:
        todo = [g for g in group_ids if g not in self.coordinators]
        v = self.versions["FindCoordinator"]
        assert self.bootstrap_conn is not None
        conn = self.bootstrap_conn
        deadline = perf_counter() + timeout
        while todo:
            retry: list[str] = []
            if v >= 4:
                futs = [
                    conn.call(FIND_COORDINATOR, v, {"key_type": 0, "coordinator_keys": todo[i : i + 500]})
                    for i in range(0, len(todo), 500)
                ]
                for resp in await asyncio.gather(*futs):
                    for c in resp["coordinators"]:
                        if c["error_code"] == NONE:
                            self.coordinators[c["key"]] = (c["host"], c["port"])
                        else:
                            retry.append(c["key"])
            else:
                for i in range(0, len(todo), 1000):
                    chunk = todo[i : i + 1000]
                    resps = await asyncio.gather(
                        *(conn.call(FIND_COORDINATOR, v, {"key": g, "key_type": 0}) for g in chunk)
                    )
                    for g, resp in zip(chunk, resps, strict=True):
                        if resp["error_code"] == NONE:
                            self.coordinators[g] = (resp["host"], resp["port"])
                        else:
                            retry.append(g)
            if retry and perf_counter() > deadline:
                raise RuntimeError(f"no coordinator for {len(retry)} groups, e.g. {retry[:3]}")
            todo = retry
            if todo:
                await asyncio.sleep(0.1)

    async def pool(self, addr: tuple[str, int]) -> tuple[list[Connection], list[Connection]]:
        p = self.pools.get(addr)
        if p is None:
            n_join = 0 if self.config.exclusive_long_polls else self.config.join_conns or self.config.conns
            conns = await asyncio.gather(*(self._open(*addr) for _ in range(self.config.conns + n_join)))
            p = self.pools[addr] = (list(conns[: self.config.conns]), list(conns[self.config.conns :]))
            if self.config.exclusive_long_polls:
                self.long_poll_pools[addr] = LongPollPool(self, addr, exclusive=True)
        return p

    def release_long_polls(self) -> None:
        """Exclusive mode: close the idle long-poll connections (a broker that polls every socket pays
        for each one it holds); the pools grow again on demand."""
        for lp in self.long_poll_pools.values():
            idle = set(map(id, lp.idle))
            for c in lp.idle:
                c.close()
            lp.conns = [c for c in lp.conns if id(c) not in idle]
            lp.idle = []

    async def reserve_long_polls(self, groups: list[SimGroup], members: int) -> None:
        """Exclusive mode: open connections for ``members`` simultaneous long polls ahead of time."""
        for addr in {self.coordinators[g.group_id] for g in groups}:
            lp = self.long_poll_pools.get(addr)
            if lp is not None:
                await lp.reserve(members)

    # --- groups ---------------------------------------------------------------------------------
    def add_group(self, group_id: str, n_members: int, topics: Iterable[str], assignor: str | None = None) -> SimGroup:
        """A group of ``n_members`` simulated consumers subscribed to ``topics``, offering ``assignor``
        first (default: the simulator's) and the other one second."""
        g = SimGroup(self, group_id, tuple(topics), n_members, assignor)
        self.groups.append(g)
        return g

    async def attach(self, groups: list[SimGroup]) -> None:
        """Find each group's coordinator and spread its members over that coordinator's connections."""
        if self.config.raw:
            addr = parse_hostport(self.config.bootstrap)
            for g in groups:
                self.coordinators[g.group_id] = addr
        else:
            await self.find_coordinators([g.group_id for g in groups])
        counters: dict[tuple[str, int], tuple[int, int]] = {}
        for g in groups:
            addr = self.coordinators[g.group_id]
            steady, join = await self.pool(addr)
            i, j = counters.get(addr, (0, 0))
            lp = self.long_poll_pools.get(addr)
            # A group's long polls share one connection (or, for a big group, a few consecutive ones,
            # at most MEMBERS_PER_LONG_POLL_CONN each). Answers on a connection come back in request
            # order, so interleaving several groups' members across connections lets one group's
            # waiting JoinGroup hold back the answers another group needs to complete, and back:
            # a cycle that only the rebalance or session timeout breaks.
            spread = max(1, math.ceil(len(g.members) / MEMBERS_PER_LONG_POLL_CONN)) if join else 1
            for k, m in enumerate(g.members):
                m.conn = steady[i % len(steady)]
                m.jconn = lp if lp is not None else join[(j + k % spread) % len(join)]
                i += 1
            counters[addr] = (i, j + spread)

    async def probe_member_id_required(self, timeout: float = 10.0) -> bool:
        """Does the coordinator answer a first JoinGroup with MEMBER_ID_REQUIRED (KIP-394)?"""
        if self.requires_member_id is None:
            g = self.add_group(f"probe-{uuid.uuid4().hex[:8]}", 1, ())
            await self.attach([g])
            m = g.members[0]
            got = self.loop.create_future()
            g.on_member_id = lambda _m: got.done() or got.set_result(True)
            g.on_stable = lambda _g: got.done() or got.set_result(False)
            g.start(barrier=True)
            try:
                self.requires_member_id = await asyncio.wait_for(got, timeout)
            finally:
                m.leave()
                self.groups.remove(g)
        return self.requires_member_id

    async def join_all(
        self, groups: list[SimGroup], *, concurrency: int = 1000, timeout: float = 120.0, partial: bool = False
    ) -> float:
        """Start the groups, at most ``concurrency`` of them joining at a time (a ramp, as a fleet of
        consumers starting up), and wait until every one is stable. Returns the seconds it took.
        On timeout: TimeoutError, or with ``partial`` the groups not started yet are started anyway
        and the ones not stable keep trying while the caller goes on."""
        if self.long_poll_pools:
            await self.reserve_long_polls(groups, min(len(groups), concurrency) * max(len(g.members) for g in groups))
        t0 = perf_counter()
        todo = deque(groups)
        active = 0
        done = self.loop.create_future()

        def on_stable(_g: SimGroup) -> None:
            nonlocal active
            active -= 1
            launch()

        def launch() -> None:
            nonlocal active
            while todo and active < concurrency:
                g = todo.popleft()
                active += 1
                g.on_stable = on_stable
                g.start()
            if not todo and active == 0 and not done.done():
                done.set_result(None)

        launch()
        try:
            await asyncio.wait_for(done, timeout)
        except TimeoutError:
            unstable = [g for g in groups if not g.is_stable()]
            if partial:
                self.stats.error(f"{len(unstable)} of {len(groups)} groups not stable after {timeout}s")
                while todo:
                    todo.popleft().start()
                return perf_counter() - t0
            raise TimeoutError(
                f"{len(unstable)} of {len(groups)} groups not stable after {timeout}s; "
                f"e.g. {unstable[0].members[:3] if unstable else ''}; stats {self.stats.summary()}"
            ) from None
        return perf_counter() - t0

    async def wait_stable(self, groups: list[SimGroup], timeout: float) -> bool:
        deadline = perf_counter() + timeout
        while perf_counter() < deadline:
            if all(g.is_stable() for g in groups):
                return True
            await asyncio.sleep(0.01)
        return False

    def fake_stable(self, groups: list[SimGroup]) -> None:
        """Members that skip the join (for the echo baseline): stable with made-up ids."""
        for g in groups:
            for m in g.members:
                m.member_id = f"{self.config.client_id}-{uuid.uuid4()}"
                m.generation = 1
                m.set_heartbeat(1)
                m.assignment = tuple(TopicPartitions(t, tuple(range(self.partitions.get(t, 0)))) for t in g.topics)
                m._set_state(STABLE)

    async def leave_all(self, groups: list[SimGroup], timeout: float = 60.0) -> float:
        t0 = perf_counter()
        members = [m for g in groups for m in g.members]
        if not members:
            return 0.0
        left = 0
        done = self.loop.create_future()

        def cb(_resp: Any, _lat: float) -> None:
            nonlocal left
            left += 1
            if left == len(members) and not done.done():
                done.set_result(None)

        for m in members:
            m.leave(cb)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done, timeout)
        for g in groups:
            if g in self.groups:
                self.groups.remove(g)
        return perf_counter() - t0

    async def drain_heartbeats(self, timeout: float = 10.0) -> None:
        """Wait until no heartbeat is unanswered (after ``pause_heartbeats``)."""
        conns = [c for hb, _join in self.pools.values() for c in hb]
        deadline = perf_counter() + timeout
        while any(c.inflight for c in conns) and perf_counter() < deadline:
            await asyncio.sleep(0.01)

    def pause_heartbeats(self) -> None:
        self.periodic_heartbeats = False
        for g in self.groups:
            for m in g.members:
                m.cancel_heartbeat()

    def resume_heartbeats(self, groups: list[SimGroup] | None = None) -> None:
        self.periodic_heartbeats = True
        interval = self.config.heartbeat_interval_s
        for g in groups or self.groups:
            for m in g.members:
                if m.state == STABLE:
                    m.schedule_heartbeat(random.uniform(0, interval))

    # --- closed-loop drivers --------------------------------------------------------------------
    async def drive_heartbeats(
        self,
        members: list[Member],
        seconds: float,
        inflight_per_conn: int,
        warmup: float = 0.5,
        on_phase: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Heartbeats as fast as the target answers: per connection, ``inflight_per_conn`` chains,
        each sending the next heartbeat of a member on that connection when the previous answer
        arrives. Periodic heartbeats are paused meanwhile."""
        self.pause_heartbeats()
        by_conn: dict[int, list[Member]] = {}
        for m in members:
            by_conn.setdefault(id(m.conn), []).append(m)
        lat = array("d")
        counts: Counter[int] = Counter()
        state = {"measuring": False, "running": True, "n": 0}
        ok = [0]  # answers equal to the all-fine bytes, counted apart from ``counts`` while measuring

        def chain(ms: list[Member], start: int, step: int) -> None:
            i = start
            conn = ms[0].conn
            assert conn is not None
            spec = conn.spec(HEARTBEAT, self.versions["Heartbeat"])
            n = len(ms)
            send = conn.send_payload
            append = lat.append
            # The answer's bytes when it decoded to error NONE: an answer equal to them needs no
            # decoding (a steady member's answer never changes), as drive_commits does. What differs
            # is decoded: every target gets the same client, the echo baseline included.
            all_ok: list[bytes] = []

            def on_answer(resp: Any, latency: float) -> None:
                nonlocal i
                if all_ok and resp == all_ok[0]:
                    if state["measuring"]:
                        append(latency)
                        ok[0] += 1
                    if state["running"]:
                        i += step
                        send(spec, ms[i % n].hb_payload, on_answer, raw=True)
                    return
                if type(resp) is bytes:
                    raw, resp = resp, decode_raw(spec, resp)
                    if type(resp) is dict and resp["error_code"] == NONE:
                        all_ok[:] = [raw]
                if state["measuring"]:
                    append(latency)
                    counts[resp["error_code"] if type(resp) is dict else -1] += 1
                if not state["running"]:
                    return
                if type(resp) is dict and resp["error_code"] != NONE:
                    m = ms[i % n]
                    if m.state == STABLE and not m.stopped:
                        self.stats.spurious[("Heartbeat", resp["error_code"])] += 1
                i += step
                send(spec, ms[i % n].hb_payload, on_answer, raw=True)

            send(spec, ms[i % n].hb_payload, on_answer, raw=True)

        for ms in by_conn.values():
            for k in range(min(inflight_per_conn, len(ms))):
                chain(ms, k, min(inflight_per_conn, len(ms)))
        await asyncio.sleep(warmup)
        state["measuring"] = True
        if on_phase:
            on_phase("start")
        t0 = perf_counter()
        c0 = process_time()
        await asyncio.sleep(seconds)
        state["measuring"] = False
        client_s = process_time() - c0
        elapsed = perf_counter() - t0
        if on_phase:
            on_phase("end")
        state["running"] = False
        await asyncio.sleep(0.2)  # let the chains drain
        if ok[0]:
            counts[NONE] += ok[0]
        return {
            "requests": len(lat),
            "seconds": elapsed,
            "rps": len(lat) / elapsed,
            "p50_ms": percentile(lat, 50) * 1000,
            "p99_ms": percentile(lat, 99) * 1000,
            # this process's CPU (the client's) per answer: what the figure costs on the client side
            "client_us_per_req": client_s / len(lat) * 1e6 if lat else None,
            "answers": {ERROR_NAMES.get(c, c): n for c, n in counts.items()},
        }

    async def drive_commits(
        self,
        members: list[Member],
        seconds: float,
        warmup: float = 0.5,
        check: bool = True,
        on_phase: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Each member commits its whole assignment, one OffsetCommit in flight, as fast as answered."""
        lat = array("d")
        partitions = 0
        part_errors: Counter[int] = Counter()
        failures = 0
        state = {"measuring": False, "running": True}

        def committer(m: Member) -> None:
            offset = 0
            n_parts = sum(len(tp.partitions) for tp in m.assignment)
            # The answer's bytes when every partition was committed: an answer equal to them needs
            # no decoding (the same topics, partitions and zero error codes every time).
            all_ok: list[bytes] = []

            def on_answer(resp: Any, latency: float) -> None:
                nonlocal offset, partitions, failures
                if state["measuring"]:
                    lat.append(latency)
                    partitions += n_parts
                if type(resp) is bytes:
                    if not check or (all_ok and resp == all_ok[0]):
                        resp = None  # the echo baseline's zero-filled answers do not decode: count them only
                    else:
                        raw, resp = resp, decode_raw(m.conn.spec(OFFSET_COMMIT, self.versions["OffsetCommit"]), resp)  # type: ignore[union-attr]
                        if type(resp) is dict and not any(
                            p["error_code"] for t in resp["topics"] for p in t["partitions"]
                        ):
                            all_ok[:] = [raw]
                if state["measuring"] and resp is not None:
                    if not check:
                        pass
                    elif type(resp) is dict:
                        for t in resp["topics"]:
                            for p in t["partitions"]:
                                if p["error_code"]:
                                    part_errors[p["error_code"]] += 1
                    else:
                        failures += 1
                if state["running"]:
                    offset += 1
                    if not m.commit_raw(offset, on_answer):
                        m.commit(offset, on_answer)

            if not m.commit_raw(offset, on_answer):
                m.commit(offset, on_answer)

        for m in members:
            committer(m)
        await asyncio.sleep(warmup)
        state["measuring"] = True
        if on_phase:
            on_phase("start")
        t0 = perf_counter()
        await asyncio.sleep(seconds)
        state["measuring"] = False
        elapsed = perf_counter() - t0
        if on_phase:
            on_phase("end")
        state["running"] = False
        await asyncio.sleep(0.3)
        return {
            "commits": len(lat),
            "seconds": elapsed,
            "commits_per_s": len(lat) / elapsed,
            "partitions_per_s": partitions / elapsed,
            "p50_ms": percentile(lat, 50) * 1000,
            "p99_ms": percentile(lat, 99) * 1000,
            "partition_errors": {ERROR_NAMES.get(c, c): n for c, n in part_errors.items()},
            "failures": failures,
        }

    async def close(self) -> None:
        for g in self.groups:
            g.stop()
        self.wheel.close()
        conns = [c for steady, join in self.pools.values() for c in (*steady, *join)]
        for lp in self.long_poll_pools.values():
            lp.close()
        if self.bootstrap_conn is not None:
            conns.append(self.bootstrap_conn)
        for c in conns:
            c.close()
        await asyncio.sleep(0)


class LoopLag:
    """How late a 10 ms ticker runs on this process's event loop: separates the simulator's own
    stalls (GC, bursts of callbacks) from the broker's in the latency it reports."""

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float = 0.01) -> None:
        self.loop = loop
        self.period = period
        self.lags = array("d")
        self._next = perf_counter() + period
        self._handle = loop.call_later(period, self._tick)

    def _tick(self) -> None:
        now = perf_counter()
        self.lags.append(max(0.0, now - self._next))
        self._next = now + self.period
        self._handle = self.loop.call_later(self.period, self._tick)

    def stop(self) -> None:
        self._handle.cancel()

    def p99_ms(self) -> float:
        return percentile(self.lags, 99) * 1000

    def max_ms(self) -> float:
        return max(self.lags, default=0.0) * 1000


# --- scenario: G groups x M members, open-loop heartbeats for a while --------------------------------
@dataclass
class Scenario:
    bootstrap: str
    groups: int = 10
    members: int = 10
    topics: dict[str, int] = field(default_factory=lambda: {"sim-topic": 8})
    duration: float = 10.0
    conns: int = 4
    join_conns: int = 0
    caps: dict[str, int] = field(default_factory=dict)
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 30_000
    heartbeat_interval_ms: int = 3_000
    assignor: str = "range"
    leader_syncs_last: bool = False
    exclusive_long_polls: bool = True
    connect_batch: int = 200
    group_prefix: str = "sim"
    first_group: int = 0
    concurrency: int = 500  # groups joining at once during the ramp
    commit_every_s: float = 0.0  # 0: no commits
    leave: bool = True
    raw: bool = False
    versions: dict[str, int] = field(default_factory=dict)
    barrier: Any = None  # multiprocessing.Barrier: all processes start measuring together
    on_phase: Callable[[str], None] | None = None  # "start" / "end" of the measured phase (same process)
    join_timeout: float = 300.0
    partial_join: bool = False  # on join timeout, measure anyway (counting the members that are stable)
    tick_ms: float = 1.0


async def run_scenario(sc: Scenario) -> dict[str, Any]:
    """Join every group, then heartbeat open-loop for ``duration`` seconds, counting every answer that
    should not reach a stable member; then leave. Returns the figures (raw latencies included)."""
    cfg = SimConfig(
        bootstrap=sc.bootstrap,
        conns=sc.conns,
        join_conns=sc.join_conns,
        caps=sc.caps,
        session_timeout_ms=sc.session_timeout_ms,
        rebalance_timeout_ms=sc.rebalance_timeout_ms,
        heartbeat_interval_ms=sc.heartbeat_interval_ms,
        assignor=sc.assignor,
        leader_syncs_last=sc.leader_syncs_last,
        exclusive_long_polls=sc.exclusive_long_polls,
        connect_batch=sc.connect_batch,
        raw=sc.raw,
        versions=sc.versions,
        tick_ms=sc.tick_ms,
    )
    sim = Simulator(cfg)
    out: dict[str, Any] = {}
    try:
        await sim.start()
        await sim.ensure_topics(sc.topics)
        groups = [
            sim.add_group(f"{sc.group_prefix}-{i}", sc.members, tuple(sc.topics))
            for i in range(sc.first_group, sc.first_group + sc.groups)
        ]
        await sim.attach(groups)
        if sc.raw:
            sim.fake_stable(groups)
            out["join_s"] = 0.0
        else:
            out["join_s"] = await sim.join_all(
                groups, concurrency=sc.concurrency, timeout=sc.join_timeout, partial=sc.partial_join
            )
            sim.release_long_polls()
        out["join_stats"] = sim.stats.summary()
        problems = [p for g in groups for p in g.check_assignment()]
        out["assignment_problems"] = problems[:20]
        out["assignment_problem_count"] = len(problems)
        # Settled: from here on, any REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION
        # answer to a stable member is spurious (nobody joined, left or crashed).
        if sc.barrier is not None:
            # Keep heartbeating while the other processes finish joining.
            await asyncio.get_running_loop().run_in_executor(None, sc.barrier.wait, sc.join_timeout)
        sim.pause_heartbeats()  # and resume at once with random phases
        # The members are long-lived: keep the collector from rescanning them (a full collection
        # over 100k members would stall this loop and show up as heartbeat latency).
        # Heartbeats sent before the pause and answered during the collection would count its
        # pause (~0.5 s over 100k members) as their latency: they are not recorded.
        sim.stats.record_latency = False
        gc.collect()
        gc.freeze()
        await sim.drain_heartbeats()
        sim.stats.record_latency = True
        lag = LoopLag(sim.loop)
        # Heartbeats answered during the ramp-up (groups joining and syncing while earlier ones
        # heartbeat): kept apart, so the figures cover the steady state and the whole soak both.
        ramp_latency = sim.stats.hb_latency
        sim.stats.reset()
        sim.expect_stable = True
        sim.resume_heartbeats(groups)
        if sc.on_phase is not None:
            sc.on_phase("start")
        commits = 0

        async def committer() -> None:
            nonlocal commits
            offset = 0
            while True:
                await asyncio.sleep(sc.commit_every_s)
                offset += 1
                for g in groups:
                    for m in g.members:
                        if m.state == STABLE and m.assignment:
                            m.commit(
                                offset, lambda r, _l: sim.stats.answers.update([("OffsetCommit", _commit_code(r))])
                            )
                            commits += 1

        task = asyncio.create_task(committer()) if sc.commit_every_s > 0 else None
        t0, cpu0 = perf_counter(), process_time()
        await asyncio.sleep(sc.duration)
        elapsed = perf_counter() - t0
        out["client_cpu_pct"] = (process_time() - cpu0) / elapsed * 100
        lag.stop()
        if sc.on_phase is not None:
            sc.on_phase("end")
        sim.expect_stable = False
        if task is not None:
            task.cancel()
        summary = sim.stats.summary()
        out.update(summary)
        out["heartbeats_per_s"] = summary["heartbeats"] / elapsed
        out["client_lag_p99_ms"] = lag.p99_ms()
        out["client_lag_max_ms"] = lag.max_ms()
        out["hb_latency"] = sim.stats.hb_latency
        whole = ramp_latency + sim.stats.hb_latency
        out["hb_ramp_heartbeats"] = len(ramp_latency)
        out["hb_all_p50_ms"] = percentile(whole, 50) * 1000
        out["hb_all_p99_ms"] = percentile(whole, 99) * 1000
        out["hb_all_max_ms"] = max(whole, default=float("nan")) * 1000
        out["stable_members_end"] = sum(g.stable for g in groups)
        out["members"] = sum(len(g.members) for g in groups)
        out["versions"] = dict(sim.versions)
        out["commits"] = commits
        if sc.leave and not sc.raw:
            sim.pause_heartbeats()
            out["leave_s"] = await sim.leave_all(groups)
    finally:
        gc.unfreeze()
        await sim.close()
    return out


def _commit_code(resp: Any) -> int:
    if type(resp) is not dict:
        return -1
    for t in resp["topics"]:
        for p in t["partitions"]:
            if p["error_code"]:
                return p["error_code"]
    return 0


def _install_uvloop() -> Callable[[Any], Any]:
    try:
        import uvloop

        return uvloop.run
    except ImportError:
        return asyncio.run


def _worker(sc: Scenario, q: Any) -> None:
    try:
        res = _install_uvloop()(run_scenario(sc))
        res["hb_latency"] = res["hb_latency"].tobytes()
        q.put(("ok", res))
    except BaseException as e:
        q.put(("error", repr(e)))


def run_processes(sc: Scenario, procs: int) -> dict[str, Any]:
    """Split the groups over ``procs`` processes (spawned, each with its own event loop and
    connections) and merge their figures. With ``procs == 1`` it runs here."""
    if procs <= 1:
        return _install_uvloop()(run_scenario(sc))
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    per = math.ceil(sc.groups / procs)
    parts = [min(per, sc.groups - k * per) for k in range(procs)]
    parts = [n for n in parts if n > 0]
    # All processes start the measured phase together, after every one has joined.
    barrier = ctx.Barrier(len(parts))
    workers = []
    for k, n in enumerate(parts):
        part = Scenario(
            **{
                **sc.__dict__,
                "groups": n,
                "first_group": sc.first_group + k * per,
                "barrier": barrier,
                "on_phase": None,
            }
        )
        p = ctx.Process(target=_worker, args=(part, q), daemon=True)
        p.start()
        workers.append(p)
    results = []
    try:
        for _ in workers:
            status, res = q.get(timeout=sc.join_timeout + sc.duration + 120)
            if status != "ok":
                raise RuntimeError(f"simulator process failed: {res}")
            results.append(res)
    finally:
        for p in workers:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    lat = array("d")
    merged: dict[str, Any] = {"answers": Counter(), "spurious": Counter(), "failures": Counter(), "errors": []}
    for r in results:
        lat.frombytes(r["hb_latency"])
        merged["answers"].update(r["answers"])
        merged["spurious"].update(r["spurious"])
        merged["failures"].update(r["failures"])
        merged["errors"] += r["errors"]
    merged.update(
        {
            "hb_latency": lat,
            "heartbeats": len(lat),
            "hb_p50_ms": percentile(lat, 50) * 1000,
            "hb_p99_ms": percentile(lat, 99) * 1000,
            "heartbeats_per_s": sum(r["heartbeats_per_s"] for r in results),
            "client_lag_p99_ms": max(r["client_lag_p99_ms"] for r in results),
            "client_lag_max_ms": max(r["client_lag_max_ms"] for r in results),
            "join_s": max(r["join_s"] for r in results),
            "members": sum(r["members"] for r in results),
            "stable_members_end": sum(r["stable_members_end"] for r in results),
            "assignment_problem_count": sum(r["assignment_problem_count"] for r in results),
            "assignment_problems": [p for r in results for p in r["assignment_problems"]][:20],
            "versions": results[0]["versions"],
            "leave_s": max(r.get("leave_s", 0.0) for r in results),
        }
    )
    return {k: (dict(v) if isinstance(v, Counter) else v) for k, v in merged.items()}


def _parse_kv(items: list[str], conv: Callable[[str], Any] = int) -> dict[str, Any]:
    out = {}
    for item in items:
        k, _, v = item.partition("=")
        out[k] = conv(v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.simulator", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True, help="host:port of any broker")
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--members", type=int, default=10, help="members per group")
    ap.add_argument("--topic", action="append", default=[], help="NAME=PARTITIONS (repeatable; default sim-topic=8)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of heartbeating once stable (max 3600)")
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--join-conns", type=int, default=0)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--cap", action="append", default=[], help="API=MAXVERSION, e.g. JoinGroup=5 (repeatable)")
    ap.add_argument(
        "--mock",
        action="store_true",
        help="target is the librdkafka mock cluster: its version caps, one long poll per connection, leader syncs last",
    )
    ap.add_argument(
        "--shared-long-polls",
        action="store_true",
        help="pipeline many members' JoinGroup/SyncGroup on a few connections (only for a broker that does not "
        "serialize a connection's requests; Kafka and groupd do, and the default is one long poll per connection)",
    )
    ap.add_argument("--session-timeout-ms", type=int, default=10_000)
    ap.add_argument("--rebalance-timeout-ms", type=int, default=30_000)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=3_000)
    ap.add_argument("--assignor", choices=sorted(ASSIGNORS), default="range")
    ap.add_argument("--commit-every", type=float, default=0.0, help="seconds between commits of every member")
    ap.add_argument("--group-prefix", default=f"sim-{os.getpid()}")
    ap.add_argument("--concurrency", type=int, default=500, help="groups joining at once")
    ap.add_argument("--tick-ms", type=float, default=1.0, help="heartbeat wheel resolution, ms")
    args = ap.parse_args(argv)
    caps = _parse_kv(args.cap)
    if args.mock:
        caps = {**MOCK_CAPS, **caps}
    sc = Scenario(
        bootstrap=args.bootstrap,
        groups=args.groups,
        members=args.members,
        topics=_parse_kv(args.topic) or {"sim-topic": 8},
        duration=min(args.duration, 3600.0),
        conns=args.conns,
        join_conns=args.join_conns,
        caps=caps,
        session_timeout_ms=args.session_timeout_ms,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        assignor=args.assignor,
        leader_syncs_last=args.mock,
        exclusive_long_polls=not args.shared_long_polls,
        connect_batch=4 if args.mock else 200,
        group_prefix=args.group_prefix,
        concurrency=args.concurrency,
        commit_every_s=args.commit_every,
        tick_ms=args.tick_ms,
    )
    res = run_processes(sc, args.procs)
    res.pop("hb_latency", None)
    json.dump(res, sys.stdout, indent=2, default=str)
    print()
    ok = not res.get("assignment_problem_count") and not res.get("spurious") and not res.get("errors")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
