"""A fake shell for the sans-IO coordinator: fake clock, in-memory log, clients that remember their ids."""

from __future__ import annotations

import functools
import io
import itertools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import structlog
from groupd.coordinator import CoordinatorConfig, GroupCoordinator, Record, Result
from groupd.coordinator.classic.group import ClassicGroup
from groupd.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)
from groupd.coordinator.consumer_wire import parse_body_for
from groupd.coordinator.result import Append
from groupd.coordinator.serde import decode_record
from groupd.protocol.messages import API_BY_NAME
from groupd.storage.records import iter_records


def quiet_logger() -> Any:
    return structlog.wrap_logger(
        structlog.PrintLogger(io.StringIO()),
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
    )


def sub(*topics: str) -> bytes:
    return encode_subscription(Subscription(tuple(topics)))


def assignment(topic: str, *parts: int) -> bytes:
    return encode_assignment(Assignment((TopicPartitions(topic, tuple(parts)),)))


@functools.cache
def _reader(version: int) -> Any:
    """One reader per version, as the dispatcher keeps one: a member's unchanged bytes get the body
    read from them last time (coordinator/_native.c steady_consumer_reader), which the hot path and
    the generic path are then both handed, as they are in the daemon."""
    return parse_body_for(version)


def _as_read(version: int, request: dict[str, Any]) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat body as the dispatcher hands it to the handler: encoded, then read by
    the steady reader (``consumer_wire.parse_body_for``), which takes the generic decoder for the rest;
    a body the codec cannot encode (a test's malformed request) as it is."""
    try:
        wire = API_BY_NAME["ConsumerGroupHeartbeat"].request.codec(version).encode(request)
    except Exception:
        return request
    body = _reader(version)(wire, 0)[0]
    return body


@dataclass(eq=False)
class Ctx:
    """Stands for one request's way back to its client."""

    n: int
    api: str

    def __repr__(self) -> str:
        return f"<{self.api} #{self.n}>"


@dataclass
class Shell:
    config: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    auto_append: bool = True
    topic_partitions: Any = None
    topics_image: Any = None  # KIP-848 consumer groups: () -> TopicsImage
    consumer_config: Any = None  # KIP-848 consumer groups: ConsumerGroupConfig
    logger: Any = None
    now: int = 0
    node_id: int | None = None  # the broker requests are sent to (a cluster sharing the core)

    def __post_init__(self) -> None:
        counter = itertools.count(1)
        self.coord = GroupCoordinator(
            self.config,
            uuid_factory=lambda: f"uuid{next(counter)}",
            topic_partitions=self.topic_partitions,
            topics_image=self.topics_image,
            consumer_config=self.consumer_config,
            logger=self.logger or quiet_logger(),
        )
        self.answers: dict[Ctx, dict[str, Any]] = {}
        self.log: list[tuple[int, Record]] = []  # durable records, in append order
        # Durable appends as batches, in order: what a start-up load reads (producer ids, markers).
        self.batches: list[Append] = []
        self.queued: deque[Append] = deque()  # appends not yet completed
        self._ctx = itertools.count(1)
        self.clients: list[Client] = []
        self.sent: list[Ctx] = []

    # -- driving ---------------------------------------------------------------------------

    def absorb(self, result: Result) -> None:
        for ctx, response in result.responses:
            assert ctx not in self.answers, f"{ctx} answered twice"
            self.answers[ctx] = response
        for a in result.appends:
            self.queued.append(a)
        if self.auto_append:
            self.flush()

    def flush(self, error: BaseException | int | None = None, count: int | None = None) -> None:
        """Complete queued appends in order (all of them, or ``count``), successfully unless ``error``."""
        done = 0
        while self.queued and (count is None or done < count):
            a = self.queued.popleft()
            if error is None:
                self.log.extend((a.partition, r) for r in records_of(a))
                self.batches.append(a)
            self.absorb(self.coord.append_done(self.now, a.token, error))
            done += 1

    def send(
        self, api: str, version: int, request: dict[str, Any], client_id: str = "client", node_id: int | None = None
    ) -> Ctx:
        ctx = Ctx(next(self._ctx), api)
        self.sent.append(ctx)
        node = self.node_id if node_id is None else node_id
        fast = None
        if api == "ConsumerGroupHeartbeat":
            # The shell's hot path (GroupCoordinator.enter, then the steady heartbeat, no Result)
            # answers a steady member as the generic path does and leaves every other heartbeat to it
            # untouched; the generic path then runs too (a session renewed twice at one time is idempotent).
            # It is handed the body as the dispatcher reads it: a steady one read in place
            # (consumer_wire.SteadyBody, whose unset fields the steady path does not look at again).
            self.coord.enter(self.now, node)
            fast = self.coord.consumer_requests.steady_heartbeat(
                version, _as_read(version, request), client_id, "/127.0.0.1"
            )
        self.absorb(
            self.coord.handle(
                self.now, api, version, request, ctx, client_id=client_id, client_host="/127.0.0.1", node_id=node
            )
        )
        self.settle()
        if fast is not None:
            assert self.answers.get(ctx) == fast, (fast, self.answers.get(ctx))
            # and the bytes the hot path made for it (consumer_wire.steady_answer) are the codec's
            wire = getattr(fast, "wire_payload", None)
            codec = API_BY_NAME["ConsumerGroupHeartbeat"].response.codec(version)
            assert wire is None or wire == codec.encode(self.answers[ctx]), (wire, self.answers[ctx])
        return ctx

    def deliver(self) -> None:
        """Hand each client the answers that came in for it (clients read their sockets)."""
        for c in self.clients:
            c.collect_join()
            c.collect_sync()

    def settle(self) -> None:
        """What the shell's timer does: fire whatever is due at the current time."""
        while (d := self.coord.next_deadline()) is not None and d <= self.now:
            self.absorb(self.coord.tick(self.now))

    def advance(self, ms: int) -> None:
        """Move the clock, firing every deadline on the way at its own time."""
        target = self.now + ms
        while (d := self.coord.next_deadline()) is not None and d <= target:
            self.now = max(self.now, d)
            self.absorb(self.coord.tick(self.now))
        self.now = target
        self.settle()
        self.deliver()

    def end_load(self, partition: int) -> None:
        """What the shell's start-up load does after ``begin_load``: replay the log, end the load."""
        if self.batches:
            replay_batches(self.coord, [a for a in self.batches if a.partition == partition])
        else:  # a log the test wrote itself (plain records)
            for key, value in self.records():
                self.coord.replay(key, value)
        self.absorb(self.coord.end_load(partition, self.now))

    def reloaded(self) -> GroupCoordinator:
        """A fresh coordinator that loaded this log (a restart): batch by batch, as the shell does."""
        fresh = GroupCoordinator(self.config, topic_partitions=self.topic_partitions, logger=quiet_logger())
        parts = list(fresh.ownership.local_partitions())
        for p in parts:
            fresh.begin_load(p)
        replay_batches(fresh, self.batches)
        for p in parts:
            fresh.end_load(p, self.now)
        return fresh

    def answer(self, ctx: Ctx) -> dict[str, Any] | None:
        return self.answers.get(ctx)

    def group(self, gid: str = "g") -> ClassicGroup:
        g = self.coord.group(gid)
        assert g is not None, f"no group {gid}"
        return g

    def state(self, gid: str = "g") -> str:
        g = self.coord.group(gid)
        return "Dead" if g is None else str(g.state)

    def unload(self, partition: int, epoch: int | None = None) -> None:
        """The partition is resigned (``GroupCoordinator.unload_partition``)."""
        self.absorb(self.coord.unload_partition(self.now, partition, epoch))

    def begin_load(self, partition: int, epoch: int | None = None, node: Any = None) -> None:
        self.absorb(self.coord.begin_load(partition, epoch, node))

    def finish_load(self, partition: int) -> None:
        """What the shell's run-time load does after ``begin_load``: wait for the appends still
        in flight (GroupShell._settle_writes), replay the partition's durable records (only them:
        the others are live), then end the load."""
        self.flush()
        for p, (key, value) in self.log:
            if p == partition:
                self.coord.replay(key, value)
        self.absorb(self.coord.end_load(partition, self.now, self.coord.partition_epoch(partition)))

    def reload(self, partition: int, epoch: int | None = None, node: Any = None) -> None:
        self.begin_load(partition, epoch, node)
        self.finish_load(partition)

    def records(self) -> list[Record]:
        return [r for _, r in self.log]

    def client(self, name: str, group: str = "g", **kw: Any) -> Client:
        c = Client(self, name, group, **kw)
        self.clients.append(c)
        return c


def replay_batches(coord: GroupCoordinator, batches: list[Append]) -> None:
    """Replay durable appends as the shell's load replays batches: plain records, transactional
    records with their producer, end-transaction markers."""
    for a in batches:
        if a.marker is not None:
            coord.replay_end_txn_marker(a.partition, a.producer_id, a.producer_epoch, *a.marker)
        elif a.producer_id >= 0:
            for key, value in a.records:
                coord.replay_transactional(key, value, a.producer_id, a.producer_epoch)
        else:
            for key, value in records_of(a):
                coord.replay(key, value)


def records_of(a: Append) -> list[Record]:
    """The records an append writes: its own, or those of the batch an OffsetCommit built in C
    carries (decoded as a load decodes them)."""
    if a.batch is None:
        return a.records
    return [decode_record(k, v) for _o, _t, k, v in iter_records(a.batch)]


@dataclass(eq=False)
class Client:
    """A consumer as the coordinator sees it: ids and generation it learnt from answers."""

    shell: Shell
    name: str
    group: str = "g"
    join_version: int = 5
    sync_version: int = 3
    instance_id: str | None = None
    topics: tuple[str, ...] = ("t",)
    protocols: list[tuple[str, bytes]] | None = None
    session_timeout_ms: int = 10000
    rebalance_timeout_ms: int = 30000
    protocol_type: str = "consumer"
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    protocol_name: str | None = None  # from the last JoinGroup answer, sent back in SyncGroup v5+
    members: list[dict[str, Any]] = field(default_factory=list)
    assignment: bytes | None = None
    pending_join: Ctx | None = None
    pending_sync: Ctx | None = None
    lose_next_join: bool = False  # the next JoinGroup answer is lost on the way
    join_answers: list[dict[str, Any]] = field(default_factory=list)
    sync_answers: list[dict[str, Any]] = field(default_factory=list)

    def join_request(self) -> dict[str, Any]:
        protocols = self.protocols if self.protocols is not None else [("range", sub(*self.topics))]
        return {
            "group_id": self.group,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols],
        }

    def join(self, *, version: int | None = None) -> Ctx:
        """Send JoinGroup; a MEMBER_ID_REQUIRED answer is followed straight away by the rejoin."""
        v = self.join_version if version is None else version
        ctx = self.shell.send("JoinGroup", v, self.join_request(), client_id=self.name)
        resp = self.shell.answer(ctx)
        if resp is not None and resp["error_code"] == 79:
            self.member_id = resp["member_id"]
            ctx = self.shell.send("JoinGroup", v, self.join_request(), client_id=self.name)
        self.pending_join = ctx
        self.shell.deliver()
        return ctx

    @property
    def last_join(self) -> dict[str, Any] | None:
        return self.join_answers[-1] if self.join_answers else None

    @property
    def last_sync(self) -> dict[str, Any] | None:
        return self.sync_answers[-1] if self.sync_answers else None

    def collect_join(self) -> dict[str, Any] | None:
        if self.pending_join is None:
            return None
        resp = self.shell.answer(self.pending_join)
        if resp is None:
            return None
        self.pending_join = None
        if self.lose_next_join:
            self.lose_next_join = False
            return None
        self.join_answers.append(resp)
        if resp["error_code"] == 0:
            self.member_id = resp["member_id"]
            self.generation = resp["generation_id"]
            self.leader = resp["leader"]
            self.members = resp["members"]
            self.protocol_name = resp["protocol_name"]
        elif resp["error_code"] in (25, 22):
            self.member_id, self.generation = "", -1
        return resp

    @property
    def is_leader(self) -> bool:
        return self.member_id != "" and self.leader == self.member_id

    def sync(self, assignments: dict[str, bytes] | None = None, *, version: int | None = None) -> Ctx:
        v = self.sync_version if version is None else version
        req = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        }
        ctx = self.pending_sync = self.shell.send("SyncGroup", v, req, client_id=self.name)
        self.shell.deliver()
        return ctx

    def collect_sync(self) -> dict[str, Any] | None:
        if self.pending_sync is None:
            return None
        resp = self.shell.answer(self.pending_sync)
        if resp is None:
            return None
        self.pending_sync = None
        self.sync_answers.append(resp)
        if resp["error_code"] == 0:
            self.assignment = resp["assignment"]
        return resp

    def heartbeat(self, *, version: int = 3) -> int:
        req = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
        }
        # The shell's hot path (GroupCoordinator.heartbeat, no Result) must answer what the
        # generic path answers, in every state every test reaches; asking twice at the same time
        # is idempotent (the session deadline is set to the same value).
        # Its short path (heartbeat_code's, taken only while heartbeats log no debug line) too.
        classic = self.shell.coord.classic
        logs_debug = classic._debug_per_request
        classic._debug_per_request = False
        try:
            fast = self.shell.coord.heartbeat(self.shell.now, version, req, self.shell.node_id)
        finally:
            classic._debug_per_request = logs_debug
        resp = self.shell.answer(self.shell.send("Heartbeat", version, req, client_id=self.name))
        self.shell.deliver()
        assert resp is not None
        assert fast == resp["error_code"], (fast, resp)
        return resp["error_code"]

    def leave(self, *, version: int = 3) -> dict[str, Any]:
        if version >= 3:
            req = {
                "group_id": self.group,
                "members": [{"member_id": self.member_id, "group_instance_id": self.instance_id, "reason": None}],
            }
        else:
            req = {"group_id": self.group, "member_id": self.member_id}
        resp = self.shell.answer(self.shell.send("LeaveGroup", version, req, client_id=self.name))
        self.shell.deliver()
        if resp is not None and version >= 3 and resp["error_code"] == 0 and resp["members"][0]["error_code"] == 0:
            self.member_id, self.generation = "", -1
        assert resp is not None
        return resp

    def commit(self, offsets: dict[tuple[str, int], int], *, version: int = 8, generation: int | None = None) -> Ctx:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_metadata": ""})
        req = {
            "group_id": self.group,
            "generation_id_or_member_epoch": self.generation if generation is None else generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        return self.shell.send("OffsetCommit", version, req, client_id=self.name)
