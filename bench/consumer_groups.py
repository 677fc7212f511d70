"""KIP-848 consumer groups under load: ConsumerGroupHeartbeat throughput and the convergence of a large
group after one member joins, with raw protocol clients (``simulator.Connection``), as the classic
heartbeat and rebalance workloads do.

A group of M members is written into ``__consumer_offsets`` before the daemon starts (``preload``):
M members subscribed to one topic, Stable at epoch 1 with nothing assigned yet. Joining 10,000
members one heartbeat at a time would cost one assignor run per join (each O(members + partitions),
as in Kafka), minutes of set-up for a figure about steady heartbeats. Once the daemon has loaded it
and the topic exists, the members' first heartbeats see the new subscription metadata: one epoch
bump, one assignor run, and every member reconciles to its share -- then the measurements start.

- **heartbeats**: every member heartbeats in a closed loop (C connections x K in flight, each slot
  cycling through its members), as a client at its heartbeat interval would but as fast as the
  daemon answers; a steady heartbeat carries only group, member id and epoch (librdkafka's form).
- **join**: in a Stable 1,000-member group, one member joins (epoch 0 with its subscription). From
  that heartbeat to every member answered at the new target epoch and ConsumerGroupDescribe saying
  Stable (the partition it takes revoked by its owner, then released to it). Measured twice:
  members heartbeating at the broker's interval (as real clients: a member that must revoke or got
  a new assignment heartbeats at once, the others wait for their interval), and in a closed loop (the
  coordinator's own cost, no interval in the way).

Figures (issue 26, 2-core machine shared with other jobs, ``python -m bench.run --quick --only
heartbeats,consumer``, two rounds alternating the source before/after, server CPU per request and its
ratio to the classic Heartbeat of the same run): before (b37f2de) 15.7 / 16.9 us and 13.0 / 13.1 us at
1,000 / 10,000 members, 1.70x / 1.34x and 1.81x / 1.41x; after (a steady heartbeat answered without a
Result, ``ConsumerGroupRequests.steady_heartbeat``) 8.9 / 9.3 us and 9.1 / 10.3 us, 1.04x / 1.17x and
1.13x / 1.29x. What is left between the two is mostly not the handler: the event loop and the socket
writes are ~60% of either, and they cost more per request when the client (whose KIP-848 answers are
bigger to decode) sends fewer requests per read.

Then (issue 26, the same command, six rounds alternating base 69728ef and this source, both driven by
this client: the answers taken raw, decoded only when they differ from the member's last unchanged
answer, as the classic driver does): the steady request read in place and its answer's bytes made
once per member and epoch (``coordinator/consumer_wire.py``), ``_steady``'s checks in one pass.
KIP-848 server CPU per heartbeat, medians, 9.9 -> 8.3 us at 1,000 members and 10.5 -> 9.4 us at
10,000; its ratio to the classic Heartbeat of the same run 1.47x -> 1.20x and 1.20x -> 1.20x (single
rounds 1.07x-1.47x: the host is shared, its load moves the figures more than the change does).

Then (issue 26): the steady reader as the dispatcher's decoder itself, in C, handing a member's
unchanged bytes the body it read from them last time while that body is unchanged
(``steady_consumer_reader`` in coordinator/_native.c), and ``steady_heartbeat`` without the
lru_cache of ``partition_for``, the share stand-in's calls and an enum read through its class.
Daemon instructions per steady heartbeat at 1,000 members (``python -m bench.heartbeat_callgrind``,
load-insensitive): KIP-848 41,040 (``--seconds 6``: 41,067) -> 35,428-35,895 (``--seconds 6``; a first
cut 35,212-35,683), classic 36,869-37,089 (the classic path is the same in both trees): 1.11x ->
0.96-0.97x. A member's first heartbeat at a new epoch is read anew, so a short phase after the
members converged (``--seconds 3`` on a loaded host: 2,720 heartbeats) shows more (39,595).
Server CPU ratio KIP-848 / classic of the
same run (``python -m bench.run --quick --only heartbeats,consumer --no-mock``, 8 runs of the old
tree alternating with 5 of this one and 7 of a first cut of it, one sitting), medians: 1,000 members
1.24x -> 1.08x; 10,000 members 1.20x -> 1.20x (first cut 1.23x). At 10,000 members the time does
not follow the instruction count: probably cache misses on per-member state, which the held bodies
add to (a guess, not measured: no cache profile was taken).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from groupd.coordinator.consumer.member import MemberState
from groupd.coordinator.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from groupd.coordinator.routing import partition_for
from groupd.coordinator.serde import encode_record
from groupd.protocol.messages import API_BY_NAME
from groupd.storage import LogConfig, LogManager

from .simulator import Connection, ConnectionLost, DecodeFailure, decode_raw, percentile

OFFSETS_TOPIC = "__consumer_offsets"
HEARTBEAT = API_BY_NAME["ConsumerGroupHeartbeat"]
EPOCH_AT_LOAD = 1


def member_ids(n: int) -> list[str]:
    return [f"bench-cg-member-{i:06d}" for i in range(n)]


def preload(data_dir: Path, group: str, topic: str, n: int, rebalance_timeout_ms: int = 300_000) -> list[str]:
    """Write a Stable consumer group of ``n`` members (epoch 1, nothing assigned, subscribed to
    ``topic``) into the ``__consumer_offsets`` log of ``data_dir``, as the coordinator writes its
    records; returns the member ids."""
    ids = member_ids(n)
    records: list[Any] = [
        (ConsumerGroupMetadataKey(group), ConsumerGroupMetadataValue(EPOCH_AT_LOAD)),
        (ConsumerGroupTargetAssignmentMetadataKey(group), ConsumerGroupTargetAssignmentMetadataValue(EPOCH_AT_LOAD)),
    ]
    for mid in ids:
        meta = ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id=None,
            client_id=mid,
            client_host="/127.0.0.1",
            subscribed_topic_names=(topic,),
            subscribed_topic_regex=None,
            rebalance_timeout_ms=rebalance_timeout_ms,
            server_assignor=None,
        )
        current = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=EPOCH_AT_LOAD,
            previous_member_epoch=0,
            state=int(MemberState.STABLE.value),
            assigned_partitions=(),
            partitions_pending_revocation=(),
        )
        records += [
            (ConsumerGroupMemberMetadataKey(group, mid), meta),
            (ConsumerGroupTargetAssignmentMemberKey(group, mid), ConsumerGroupTargetAssignmentMemberValue(())),
            (ConsumerGroupCurrentMemberAssignmentKey(group, mid), current),
        ]
    config = LogConfig(cleanup_policy="compact", retention_ms=None)
    mgr = LogManager(data_dir, config, topic_config=lambda t: config if t == OFFSETS_TOPIC else None)
    mgr.open_all()
    try:
        now = int(time.time() * 1000)
        log = mgr.get_or_create(OFFSETS_TOPIC, partition_for(group))
        for i in range(0, len(records), 1000):
            log.append_records([(*encode_record(r), (), now) for r in records[i : i + 1000]])
        mgr.flush_all()
    finally:
        mgr.close()
    return ids


class CgMember:
    """One member as a fast client: what it owns is what it was last given (revocations are acked at
    once), and it reports its partitions only in the heartbeat after a change."""

    __slots__ = ("dirty", "epoch", "member_id", "ok_raw", "owned", "steady", "subscribe")

    def __init__(self, member_id: str, epoch: int, subscribe: bool = False) -> None:
        self.member_id = member_id
        self.epoch = epoch
        self.owned: list[dict[str, Any]] = []
        self.dirty = subscribe  # a new member's first heartbeat carries its whole state
        self.subscribe = subscribe
        # the encoded steady heartbeat (header suffix + body) at ``epoch``: only the correlation id
        # changes from one to the next, so it is built once per epoch, as the classic driver does
        self.steady: tuple[int, bytes] | None = None
        # the bytes of its last answer that changed nothing (no error, no assignment): an answer
        # equal to them needs no decoding, as the classic driver skips its all-fine answers
        self.ok_raw: bytes | None = None

    def body(self, group: str, topic: str) -> dict[str, Any]:
        full = self.dirty or self.subscribe
        return {
            "group_id": group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 300_000 if self.subscribe else -1,
            "subscribed_topic_names": [topic] if self.subscribe else None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": self.owned if full else None,
        }

    def answered(self, resp: Any) -> int:
        """Apply an answer; returns its error code."""
        code = int(resp["error_code"])
        if code:
            return code
        self.subscribe = False
        self.dirty = False
        self.epoch = resp["member_epoch"]
        if resp.get("member_id"):
            self.member_id = resp["member_id"]
        a = resp.get("assignment")
        if a is not None:
            self.owned = [
                {"topic_id": tp["topic_id"], "partitions": list(tp["partitions"])} for tp in a["topic_partitions"]
            ]
            self.dirty = True  # ack the new assignment at once, as librdkafka does after its callbacks
        return 0


class CgDriver:
    """Drives a consumer group's members over a few connections to one daemon."""

    def __init__(self, host: str, port: int, group: str, topic: str, conns: int = 4, inflight: int = 16) -> None:
        self.host, self.port, self.group, self.topic = host, port, group, topic
        self.n_conns, self.inflight = conns, inflight
        self.conns: list[Connection] = []
        self.version = 0
        self.errors: dict[int, int] = {}
        self.latencies: list[float] = []
        self.answered = 0
        self.interval_ms = 5000  # the broker's, from its answers

    async def start(self) -> None:
        for _ in range(self.n_conns):
            c = await Connection.open(self.host, self.port, client_id="bench-cg")
            versions = await c.negotiate()
            self.version = min(versions[HEARTBEAT.key][1], HEARTBEAT.max_version)
            self.conns.append(c)

    def close(self) -> None:
        for c in self.conns:
            c.close()

    def send(self, conn: Connection, m: CgMember, then: Callable[[int], None]) -> None:
        spec = conn.spec(HEARTBEAT, self.version)

        def done(resp: Any, lat: float) -> None:
            if resp == m.ok_raw and not (m.dirty or m.subscribe):
                self.answered += 1  # what answered() would do with it: nothing
                self.latencies.append(lat)
                then(0)
                return
            raw = resp if type(resp) is bytes else None
            if raw is not None:
                resp = decode_raw(spec, raw)
            if isinstance(resp, (ConnectionLost, DecodeFailure)):
                self.errors[-1] = self.errors.get(-1, 0) + 1
                then(-1)
                return
            code = m.answered(resp)
            self.answered += 1
            if not code:
                self.interval_ms = resp["heartbeat_interval_ms"]
                if resp.get("assignment") is None and raw is not None:
                    m.ok_raw = raw
            self.latencies.append(lat)
            if code:
                self.errors[code] = self.errors.get(code, 0) + 1
            then(code)

        if m.dirty or m.subscribe:
            conn.send_payload(spec, spec.suffix + spec.encode(m.body(self.group, self.topic)), done, raw=True)
            return
        if m.steady is None or m.steady[0] != m.epoch:
            m.steady = (m.epoch, spec.suffix + spec.encode(m.body(self.group, self.topic)))
        conn.send_payload(spec, m.steady[1], done, raw=True)

    async def closed_loop(self, members: list[CgMember], until: Callable[[], bool], timeout: float) -> float:
        """Each of conns x inflight slots heartbeats its members in turn, one answer after the other,
        until ``until()`` (checked after every answer) or ``timeout``; returns the seconds it took."""
        loop = asyncio.get_running_loop()
        finished = loop.create_future()
        slots = self.n_conns * self.inflight
        t0 = time.perf_counter()

        def chain(slot: int) -> None:
            conn = self.conns[slot % self.n_conns]
            mine = members[slot::slots]
            if not mine:
                return
            i = 0

            def next_one(_code: int = 0) -> None:
                nonlocal i
                if finished.done():
                    return
                if until():
                    finished.set_result(None)
                    return
                m = mine[i % len(mine)]
                i += 1
                self.send(conn, m, next_one)

            next_one()

        for s in range(slots):
            chain(s)
        try:
            await asyncio.wait_for(asyncio.shield(finished), timeout)
        except TimeoutError:
            finished.cancel()
            raise
        return time.perf_counter() - t0

    async def paced(
        self, members: list[CgMember], interval_s: float, until: Callable[[], bool], timeout: float
    ) -> float:
        """Members heartbeat every ``interval_s`` (first ones spread over one interval), and at once
        after an answer that changed what they own; returns the seconds until ``until()``."""
        loop = asyncio.get_running_loop()
        finished = loop.create_future()
        t0 = time.perf_counter()

        def beat(k: int) -> None:
            if finished.done():
                return
            m = members[k]

            def after(_code: int) -> None:
                if finished.done():
                    return
                if until():
                    finished.set_result(None)
                    return
                loop.call_later(0 if m.dirty else interval_s, beat, k)

            self.send(self.conns[k % self.n_conns], m, after)

        for k in range(len(members) - 1):
            loop.call_later(interval_s * k / len(members), beat, k)
        beat(len(members) - 1)  # the last one (the joiner, when there is one) goes first
        try:
            await asyncio.wait_for(asyncio.shield(finished), timeout)
        except TimeoutError:
            finished.cancel()
            raise
        return time.perf_counter() - t0


def settled(members: list[CgMember], epoch: int | None = None) -> bool:
    """Every member answered at one epoch (``epoch`` if given) with nothing left to ack."""
    want = members[0].epoch if epoch is None else epoch
    return all(m.epoch == want and not m.dirty and not m.subscribe for m in members)


async def heartbeat_throughput(driver: CgDriver, members: list[CgMember], seconds: float) -> dict[str, Any]:
    driver.latencies.clear()
    driver.errors.clear()
    start = driver.answered
    stop_at = time.perf_counter() + seconds
    c0 = time.process_time()
    took = await driver.closed_loop(members, lambda: time.perf_counter() >= stop_at, seconds + 30)
    client_s = time.process_time() - c0
    n = driver.answered - start
    lat = driver.latencies
    return {
        "requests": n,
        "rps": n / took,
        "p50_ms": percentile(lat, 50) * 1000 if lat else None,
        "p99_ms": percentile(lat, 99) * 1000 if lat else None,
        "errors": dict(driver.errors),
        # this process's CPU (the client's) per answer
        "client_us_per_req": client_s / n * 1e6 if n else None,
    }


def new_member() -> CgMember:
    return CgMember(str(uuid.uuid4()), 0, subscribe=True)
