"""The live dashboard (``--dashboard-port``): groups, their members, assignment and lag, a timeline of
rebalances per group, and topics with their end offsets, in a page that updates itself.

How it stays off the hot path:

- **Events are appends.** The coordinator's ``CoordinatorListener`` hooks (rebalance started and
  completed, member expired) fire per rebalance, never per heartbeat; each one updates a small
  record in ``Timeline``. The dispatcher observer that times pauses returns after one integer
  comparison for every API but JoinGroup and SyncGroup.
- **Rendering happens per tick, only while someone watches.** A page holds one server-sent-events
  stream (``/events``); while at least one is open the whole view is built at most once per tick
  (one second) and shared by every stream; with none open nothing is built at all.
- **Memory is bounded.** The timeline keeps the last ``per_group`` rebalances of at most
  ``max_groups`` groups (the least recently active group goes first); a view shows at most
  ``view_groups`` groups (rebalancing and lagging ones first), ``view_partition_rows`` partition
  rows and ``view_topics`` topics; streams are capped at ``max_streams``.

Who joined and who left a generation is the difference between the members at the end of the
previous rebalance and at the end of this one (the core tells *that* a rebalance started and ended,
the group's member dict tells *who*); expired members are named by the core's ``member_expired``.
Three durations per rebalance, named apart because they measure different things (README "Dashboard"):

- **paused**: from the first JoinGroup request of the rebalance (its arrival, as a member stops
  fetching and revokes its partitions when it sends it) to the answer of the last SyncGroup of the
  generation it formed (when the last member gets its partitions back): the consumers' view, the
  whole stop-the-world window, join phase included (members finishing their poll and rejoining,
  bounded by the rebalance timeout: seconds).
- **sync phase**: from the end of the join phase (the group entering CompletingRebalance: the
  JoinGroup answers go out; the group-metadata record's ``currentStateTimestamp``) to the leader's
  SyncGroup handing the assignment to the log (the record's log time). This is the ``groupd
  analyze`` report's "sync phase", the only part of the window the log holds (Kafka writes nothing
  when a rebalance starts): the same two instants, read from the live requests instead of the log.
  Usually milliseconds, where "paused" is seconds.
- **coordinator**: the core's own duration, from its last entry into PreparingRebalance to Stable.

Whom a rebalance waits for is read from the core at each tick (``_waiting_for``): for a classic group
in PreparingRebalance the members that have not rejoined, in CompletingRebalance (and just after,
until the sync timeout) those that have not sent SyncGroup, the leader first (its SyncGroup carries
the assignment); for a KIP-848 consumer group in Reconciling the members not yet at the target
assignment epoch, with what holds them: partitions they are still revoking, partitions they wait for
another member to release, or a heartbeat that has not yet fetched the new target.

In cluster mode (``--brokers N``) the view lists the brokers: address, state, the ``__consumer_offsets``
partitions each leads (so the groups it coordinates), the ``__transaction_state`` partitions (its
transactional ids) and how many partitions of user topics it leads; each group names its coordinator.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import structlog
from groupd.broker.cluster import Cluster
from groupd.broker.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicRegistry
from groupd.coordinator import CoordinatorListener, GroupCoordinator
from groupd.coordinator import listener as events
from groupd.coordinator.consumer.member import MemberState
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.partitioning import coordinator_partition
from groupd.protocol.server import Request
from groupd.storage import LogManager

from . import group_view
from .http import HttpRequest, HttpServer, Response, Stream, text

log = structlog.get_logger("groupd.ops.dashboard")

JOIN_GROUP = API_BY_NAME["JoinGroup"].key
SYNC_GROUP = API_BY_NAME["SyncGroup"].key
MAX_REASONS = 5  # a rebalance restarted over and over keeps its first reasons, and counts the rest

STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}


def static_asset(name: str) -> bytes:
    """A file of ``groupd/ops/static`` (package data in the wheel, the source folder when editable)."""
    return resources.files("groupd.ops").joinpath("static", name).read_bytes()


MemberInfo = tuple[str, str]  # client id, client host


@dataclass
class Rebalance:
    """One rebalance of a group: from its first PreparingRebalance to Stable or Empty."""

    from_generation: int
    started_ms: int
    reasons: list[str] = field(default_factory=list)
    restarts: int = 0  # PreparingRebalance entered again before the group got stable
    generation: int | None = None  # the generation it formed, once known
    ended_ms: int | None = None
    outcome: str | None = None  # events.STABLE / events.EMPTY; None while in progress
    coordinator_ms: int | None = None  # the core's duration: last entry into PreparingRebalance to the end
    first_join_ms: int | None = None
    last_sync_ms: int | None = None
    # the sync phase (module docstring): the join phase's end and the leader's assignment handed over
    join_ended_ms: int | None = None
    assignment_ms: int | None = None
    leader_id: str | None = None
    members: int = 0
    joined: list[tuple[str, MemberInfo]] = field(default_factory=list)
    left: list[tuple[str, MemberInfo]] = field(default_factory=list)
    expired: list[tuple[str, MemberInfo, str]] = field(default_factory=list)

    @property
    def paused_ms(self) -> int | None:
        if self.first_join_ms is None or self.last_sync_ms is None:
            return None
        return max(self.last_sync_ms - self.first_join_ms, 0)

    @property
    def sync_phase_ms(self) -> int | None:
        if self.join_ended_ms is None or self.assignment_ms is None:
            return None
        return max(self.assignment_ms - self.join_ended_ms, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "from_generation": self.from_generation,
            "generation": self.generation,
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "in_progress": self.outcome is None,
            "outcome": self.outcome,
            "reasons": self.reasons,
            "restarts": self.restarts,
            "coordinator_ms": self.coordinator_ms,
            "paused_ms": self.paused_ms,
            "sync_phase_ms": self.sync_phase_ms,
            "members": self.members,
            "joined": [_member_json(mid, info) for mid, info in self.joined],
            "left": [_member_json(mid, info) for mid, info in self.left],
            "expired": [{**_member_json(mid, info), "reason": reason} for mid, info, reason in self.expired],
        }


def _member_json(member_id: str, info: MemberInfo) -> dict[str, str]:
    return {"member_id": member_id, "client_id": info[0], "host": info[1]}


@dataclass
class GroupHistory:
    entries: deque[Rebalance]
    open: Rebalance | None = None
    known: dict[str, MemberInfo] | None = None  # members at the end of the last rebalance seen
    expired_early: list[tuple[str, MemberInfo, str]] = field(default_factory=list)  # before the next start


class Timeline:
    """Rebalances per group, fed by the core's listener hooks and the JoinGroup/SyncGroup answers.

    Plain Python, clock handed in: the coordinator tests drive it with their fake clock."""

    def __init__(
        self,
        core: GroupCoordinator,
        clock: Callable[[], float] = time.time,
        *,
        per_group: int = 20,
        max_groups: int = 1000,
    ) -> None:
        self.core = core
        self.clock = clock
        self.per_group = per_group
        self.max_groups = max_groups
        self.groups: OrderedDict[str, GroupHistory] = OrderedDict()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def history(self, group_id: str) -> GroupHistory:
        h = self.groups.get(group_id)
        if h is None:
            h = self.groups[group_id] = GroupHistory(deque(maxlen=self.per_group))
            while len(self.groups) > self.max_groups:
                self.groups.popitem(last=False)
        else:
            self.groups.move_to_end(group_id)
        return h

    def _members(self, group_id: str, *, settled_only: bool = False) -> dict[str, MemberInfo]:
        group = self.core.groups.get(group_id)
        if group is None:
            return {}
        return {
            mid: (m.client_id, m.client_host) for mid, m in group.members.items() if not (settled_only and m.is_new)
        }

    def started(self, group_id: str, generation: int, reason: str) -> None:
        h = self.history(group_id)
        if h.open is not None:
            h.open.restarts += 1
            if len(h.open.reasons) < MAX_REASONS:
                h.open.reasons.append(reason)
            return
        if h.known is None:
            # First sight of the group (the dashboard started after it formed, or the daemon was
            # restarted): its previous generation is everyone but the members added by this join.
            h.known = self._members(group_id, settled_only=True)
        entry = Rebalance(from_generation=generation, started_ms=self._now_ms(), reasons=[reason])
        entry.expired, h.expired_early = h.expired_early, []
        h.open = entry
        h.entries.append(entry)

    def completed(self, group_id: str, generation: int, members: int, duration_ms: int | None, outcome: str) -> None:
        h = self.history(group_id)
        entry = h.open
        if entry is None:  # its start came before the dashboard was attached
            entry = Rebalance(from_generation=generation - 1, started_ms=self._now_ms())
            h.entries.append(entry)
        h.open = None
        entry.generation = generation
        entry.ended_ms = self._now_ms()
        entry.outcome = outcome
        entry.coordinator_ms = duration_ms
        entry.members = members
        before = h.known or {}
        after = self._members(group_id)
        gone = {mid for mid, _, _ in entry.expired}
        entry.joined = [(mid, info) for mid, info in after.items() if mid not in before]
        entry.left = [(mid, info) for mid, info in before.items() if mid not in after and mid not in gone]
        h.known = after

    def expired(self, group_id: str, member_id: str, reason: str) -> None:
        h = self.history(group_id)
        info = (h.known or {}).get(member_id) or self._members(group_id).get(member_id) or ("", "")
        if reason == events.PENDING and member_id not in (h.known or {}):
            return  # a member id handed out with MEMBER_ID_REQUIRED and never used: nobody was paused
        target = h.open.expired if h.open is not None else h.expired_early
        target.append((member_id, info, reason))

    def join_answered(
        self,
        group_id: str,
        generation: int,
        received_ms: int,
        answered_ms: int | None = None,
        leader: str | None = None,
    ) -> None:
        h = self.groups.get(group_id)
        if h is None or h.open is None:
            return  # a known member rejoining a Stable group with nothing changed: no rebalance
        entry = h.open
        if entry.first_join_ms is None or received_ms < entry.first_join_ms:
            entry.first_join_ms = received_ms
        if generation != entry.generation or entry.join_ended_ms is None:
            # The join phase of this generation just ended (a restarted rebalance forms a newer one):
            # the time the group entered CompletingRebalance, what its record will carry as
            # currentStateTimestamp; the answer's own time if the group has moved on already.
            group = self.core.groups.get(group_id)
            formed = group is not None and group.generation == generation and str(group.state) == "CompletingRebalance"
            entry.join_ended_ms = group.state_timestamp if formed and group is not None else answered_ms
            entry.assignment_ms = None
        entry.leader_id = leader or entry.leader_id
        entry.generation = generation

    def sync_answered(
        self, group_id: str, generation: int, answered_ms: int, received_ms: int | None = None, member_id: str = ""
    ) -> None:
        h = self.groups.get(group_id)
        if h is None:
            return
        # Late followers sync after the group went Stable: the entry is closed by then.
        for entry in reversed(h.entries):
            if entry.generation == generation:
                if entry.last_sync_ms is None or answered_ms > entry.last_sync_ms:
                    entry.last_sync_ms = answered_ms
                if member_id and member_id == entry.leader_id and entry.assignment_ms is None:
                    # the leader's SyncGroup arrived with the assignment: the coordinator wrote it then
                    entry.assignment_ms = received_ms
                return


class Dashboard(CoordinatorListener):
    """The timeline's feeds, the view and the HTTP endpoint that serves the page and its stream."""

    def __init__(
        self,
        core: GroupCoordinator,
        *,
        topics: TopicRegistry | None = None,
        logs: LogManager | None = None,
        cluster: Cluster | None = None,
        share: Any = None,
        clock: Callable[[], float] = time.time,
        tick_s: float = 1.0,
        per_group: int = 20,
        max_groups: int = 1000,
        view_groups: int = 200,
        view_partition_rows: int = 2000,
        view_topics: int = 500,
        max_streams: int = 16,
    ) -> None:
        self.core = core
        self.topics = topics
        self.logs = logs
        self.cluster = cluster
        self.share = share  # the broker's SharePartitions: the share-partitions' in-flight records
        self.clock = clock
        self.tick_s = tick_s
        self.timeline = Timeline(core, clock, per_group=per_group, max_groups=max_groups)
        self.view_groups = view_groups
        self.view_partition_rows = view_partition_rows
        self.view_topics = view_topics
        self.max_streams = max_streams
        self.streams = 0
        self.views_built = 0  # how many times the view was rendered (tests: nothing without a stream)
        self._next: CoordinatorListener = CoordinatorListener()
        self._cached: bytes | None = None
        self._cached_at = 0.0
        self._http: HttpServer | None = None

    # --- wiring -----------------------------------------------------------------------------------
    def bind(self, *, dispatcher: Dispatcher | None = None) -> None:
        """Become the core's listener, passing every event on to the one it had (the metrics)."""
        self._next = self.core.listener
        self.core.listener = self
        if dispatcher is not None:
            dispatcher.observers.append(self.observe)

    def rebalance_started(self, group_id: str, generation: int, members: int, reason: str) -> None:
        self._next.rebalance_started(group_id, generation, members, reason)
        self.timeline.started(group_id, generation, reason)

    def rebalance_completed(
        self, group_id: str, generation: int, members: int, duration_ms: int | None, outcome: str
    ) -> None:
        self._next.rebalance_completed(group_id, generation, members, duration_ms, outcome)
        self.timeline.completed(group_id, generation, members, duration_ms, outcome)

    def member_expired(self, group_id: str, member_id: str, generation: int, reason: str) -> None:
        self._next.member_expired(group_id, member_id, generation, reason)
        self.timeline.expired(group_id, member_id, reason)

    def observe(self, req: Request, body: dict[str, Any], elapsed: float) -> None:
        key = req.api_key
        if key != JOIN_GROUP and key != SYNC_GROUP:
            return
        if body.get("error_code"):
            return
        now = self.clock()
        gid = req.body.get("group_id", "")
        received = now - elapsed if req.received_ns else now
        if key == JOIN_GROUP:
            self.timeline.join_answered(
                gid, body.get("generation_id", -1), int(received * 1000), int(now * 1000), body.get("leader")
            )
        else:
            self.timeline.sync_answered(
                gid,
                req.body.get("generation_id", -1),
                int(now * 1000),
                int(received * 1000),
                req.body.get("member_id") or "",
            )

    # --- the view ---------------------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        self.views_built += 1
        core = self.core
        lags = {g.group_id: g for g in group_view.all_lags(core, self.logs)}
        gids = group_view.group_ids(core) | set(self.timeline.groups)

        def rank(gid: str) -> tuple[int, int, int, str]:
            h = self.timeline.groups.get(gid)
            lag = lags[gid].total if gid in lags else 0
            last = h.entries[-1].started_ms if h is not None and h.entries else 0
            return (0 if h is not None and h.open is not None else 1, -lag, -last, gid)

        shown = sorted(sorted(gids, key=rank)[: self.view_groups])
        rows_left = self.view_partition_rows
        groups = []
        for gid in shown:
            g, rows_left = self._group_view(gid, lags.get(gid), rows_left)
            groups.append(g)
        topics = self._topics_view()
        return {
            "now_ms": int(self.clock() * 1000),
            "brokers": self._brokers_view(),
            "groups_total": len(gids),
            "groups": groups,
            "topics_total": self._topic_count(),
            "topics": topics,
        }

    # --- cluster mode -----------------------------------------------------------------------------
    def _leader(self, topic: str, partition: int) -> int | None:
        t = self.topics.topics.get(topic) if self.cluster is not None and self.topics is not None else None
        if t is None or self.cluster is None:
            return None
        return self.cluster.leaders.describe(t, partition)[0]  # what Metadata answers

    def _brokers_view(self) -> list[dict[str, Any]] | None:
        """Every broker of the cluster with what it leads; None for a single broker."""
        cluster, topics = self.cluster, self.topics
        if cluster is None or topics is None:
            return None
        out: dict[int, dict[str, Any]] = {}
        for node_id, node in cluster.nodes.items():
            host, port = node.endpoint
            out[node_id] = {
                "node_id": node_id,
                "address": f"{host}:{port}",
                "state": node.state,
                "controller": node_id == cluster.controller_id(),
                "coordinator_partitions": [],  # of __consumer_offsets: the groups it coordinates
                "transaction_partitions": [],  # of __transaction_state: the transactional ids it coordinates
                "leaders": 0,  # partitions of user topics it leads
            }
        for name, t in list(topics.topics.items()):
            for p in range(t.partitions):
                b = out.get(cluster.leaders.describe(t, p)[0])
                if b is None:
                    continue
                if name == OFFSETS_TOPIC:
                    b["coordinator_partitions"].append(p)
                elif name == TRANSACTION_STATE_TOPIC:
                    b["transaction_partitions"].append(p)
                elif not t.internal:
                    b["leaders"] += 1
        return list(out.values())

    def _coordinator_of(self, gid: str) -> int | None:
        t = self.topics.topics.get(OFFSETS_TOPIC) if self.cluster is not None and self.topics is not None else None
        return self._leader(OFFSETS_TOPIC, coordinator_partition(gid, t.partitions)) if t is not None else None

    # --- whom a rebalance waits for ---------------------------------------------------------------
    def _waiting_for(self, gid: str) -> list[dict[str, Any]]:
        """The members a rebalance waits for now, each with why (module docstring); [] when none."""
        core = self.core
        group = core.groups.get(gid)
        out: list[dict[str, Any]] = []
        if group is not None:
            state = str(group.state)
            for mid, m in group.members.items():
                why = None
                if state == "PreparingRebalance" and not m.awaiting_join:
                    why = "rejoin"  # JoinGroup not yet sent: it learns of the rebalance on a heartbeat
                elif state in ("CompletingRebalance", "Stable") and mid in group.pending_sync_members:
                    # CompletingRebalance waits for the leader's SyncGroup (the assignment); a
                    # follower that never syncs is removed when the sync timeout fires
                    why = "assignment" if mid == group.leader_id and state == "CompletingRebalance" else "sync"
                if why is not None:
                    out.append({"member_id": mid, "client_id": m.client_id, "host": m.client_host, "waiting": why})
            out.sort(key=lambda w: (w["waiting"] != "assignment", w["client_id"], w["member_id"]))
            return out
        modern = group_view.consumer_group(core, gid)
        if modern is None or str(modern.state.value) not in ("Assigning", "Reconciling"):
            return out
        for mid, cm in sorted(modern.members.items()):
            if cm.is_reconciled_to(modern.target_epoch):
                continue
            entry: dict[str, Any] = {
                "member_id": mid,
                "client_id": cm.client_id,
                "host": cm.client_host,
                "member_epoch": cm.member_epoch,
                "target_epoch": modern.target_epoch,
            }
            if cm.state == MemberState.UNREVOKED_PARTITIONS:
                entry.update(waiting="revoke", partitions=group_view.consumer_assignment(core, cm.pending_revocation))
            elif cm.state == MemberState.UNRELEASED_PARTITIONS:
                target = modern.target.get(mid, {})
                missing = {t: ps - cm.assigned.get(t, frozenset()) for t, ps in target.items()}
                entry.update(
                    waiting="release",
                    partitions=group_view.consumer_assignment(core, {t: ps for t, ps in missing.items() if ps}),
                )
            else:
                entry.update(waiting="heartbeat")  # still at its epoch: its next heartbeat gets the target
            out.append(entry)
        return out

    def _group_view(self, gid: str, lag: group_view.GroupLag | None, rows_left: int) -> tuple[dict[str, Any], int]:
        core = self.core
        group = core.groups.get(gid)
        owners: dict[tuple[str, int], str] = {}
        members = []
        if group is not None:
            for mid, m in group.members.items():
                assignment = group_view.assignment_of(group, m)
                for topic, parts in assignment:
                    for p in parts:
                        owners[topic, p] = mid
                members.append(
                    {
                        "member_id": mid,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "instance_id": m.group_instance_id,
                        "leader": mid == group.leader_id,
                        "assignment": assignment,
                    }
                )
        modern = group_view.consumer_group(core, gid) if group is None else None
        if modern is not None:  # KIP-848: members own partitions by topic id, at their member epoch
            for mid, cm in sorted(modern.members.items()):
                assignment = group_view.consumer_assignment(core, cm.assigned)
                for topic, parts in assignment:
                    for p in parts:
                        owners[topic, p] = mid
                members.append(
                    {
                        "member_id": mid,
                        "client_id": cm.client_id,
                        "host": cm.client_host,
                        "instance_id": cm.instance_id,
                        "leader": False,  # the coordinator assigns: no leader
                        "member_epoch": cm.member_epoch,
                        "assignment": assignment,
                    }
                )
        shared = group_view.share_group(core, gid) if group is None and modern is None else None
        names = {t.topic_id: name for name, t in self.topics.topics.items()} if self.topics is not None else None
        if shared is not None:  # KIP-932: members share partitions; the coordinator assigns
            for mid, sm in sorted(shared.members.items()):
                members.append(
                    {
                        "member_id": mid,
                        "client_id": sm.client_id,
                        "host": sm.client_host,
                        "instance_id": None,
                        "leader": False,
                        "member_epoch": sm.member_epoch,
                        "assignment": group_view.consumer_assignment(core, sm.assigned, names),
                    }
                )
        committed = {(p.topic, p.partition): p for p in lag.partitions} if lag is not None else {}
        keys = sorted(set(owners) | set(committed))
        partitions = []
        for topic, p in keys[: max(rows_left, 0)]:
            c = committed.get((topic, p))
            end = c.end if c is not None else self._end_offset(topic, p)
            partitions.append(
                {
                    "topic": topic,
                    "partition": p,
                    "owner": owners.get((topic, p)),
                    "committed": c.committed if c is not None else None,
                    "end": end,
                    "lag": c.lag if c is not None else None,
                }
            )
        in_flight = []
        if shared is not None and self.share is not None:
            for f in group_view.share_in_flight(self.share, self.logs, gid, names or {})[: max(rows_left, 0)]:
                in_flight.append(
                    {
                        "topic": f.topic,
                        "partition": f.partition,
                        "start": f.start,
                        "end": f.end,
                        "available": f.available,
                        "acquired": f.acquired,
                        "acknowledged": f.acknowledged,
                        "archived": f.archived,
                        "log_end": f.log_end,
                    }
                )
            rows_left -= len(in_flight)
        h = self.timeline.groups.get(gid)
        kind = "consumer" if modern is not None else "share" if shared is not None else "classic"
        out = {
            "group_id": gid,
            "type": kind,
            "state": str(group.state) if group is not None else self._state_without_group(gid),
            # a consumer group's generation is its group epoch
            "generation": group.generation
            if group is not None
            else (modern or shared).group_epoch
            if (modern or shared)
            else None,
            "protocol_type": group.protocol_type
            if group is not None
            else "consumer"
            if modern
            else "share"
            if shared
            else None,
            "protocol": group.protocol_name if group is not None else None,
            "leader": group.leader_id if group is not None else None,
            "members": members,
            "lag": lag.total if lag is not None else 0,
            "partitions": partitions,
            "partitions_omitted": len(keys) - len(partitions),
            "timeline": [e.to_json() for e in reversed(h.entries)] if h is not None else [],
            "waiting_for": self._waiting_for(gid),
            "coordinator": self._coordinator_of(gid),
            "share_partitions": in_flight,
        }
        return out, rows_left - len(partitions)

    def _state_without_group(self, gid: str) -> str:
        # Only committed offsets left: what DescribeGroups answers (Empty). Not even those: the
        # group was deleted (or emptied and expired) and only the timeline remembers it.
        modern = group_view.consumer_group(self.core, gid) or group_view.share_group(self.core, gid)
        if modern is not None:
            return modern.state.value
        return group_view.EMPTY if gid in self.core.offsets else "Dead"

    def _end_offset(self, topic: str, partition: int) -> int | None:
        plog = self.logs.get(topic, partition) if self.logs is not None else None
        return plog.log_end_offset if plog is not None else None

    def _topic_count(self) -> int:
        return sum(not t.internal for t in self.topics.topics.values()) if self.topics is not None else 0

    def _topics_view(self) -> list[dict[str, Any]]:
        if self.topics is None:
            return []
        out = []
        for name in sorted(t for t, meta in self.topics.topics.items() if not meta.internal)[: self.view_topics]:
            t = self.topics.topics[name]
            parts = []
            for p in range(t.partitions):
                plog = self.logs.get(name, p) if self.logs is not None else None
                parts.append(
                    {
                        "partition": p,
                        "start": plog.log_start_offset if plog is not None else None,
                        "end": plog.log_end_offset if plog is not None else None,
                        "leader": self._leader(name, p),
                    }
                )
            out.append({"name": name, "partitions": parts})
        return out

    def _payload(self) -> bytes:
        """The view as JSON, built at most once per tick however many streams are open."""
        now = time.monotonic()
        if self._cached is None or now - self._cached_at >= self.tick_s * 0.9:
            self._cached = json.dumps(self.view(), separators=(",", ":")).encode()
            self._cached_at = now
        return self._cached

    # --- the endpoint -----------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> tuple[str, int]:
        routes: dict[str, Any] = {path: self._static(name, ctype) for path, (name, ctype) in STATIC_FILES.items()}
        routes["/events"] = self._serve_events
        routes["/api/view"] = self._serve_view
        self._http = HttpServer("dashboard", routes)
        host, port = await self._http.start(host, port)
        log.info("dashboard_listening", dashboard=f"http://{host}:{port}/")
        return host, port

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _static(self, name: str, content_type: str) -> Any:
        body = static_asset(name)  # read once, at start: a missing asset fails the start, not a page

        async def serve(req: HttpRequest) -> Response:
            return Response("200 OK", body, content_type, {"Cache-Control": "no-cache"})

        return serve

    async def _serve_view(self, req: HttpRequest) -> Response:
        return Response("200 OK", self._payload(), "application/json", {"Cache-Control": "no-store"})

    async def _serve_events(self, req: HttpRequest) -> Response | Stream:
        if self.streams >= self.max_streams:
            return text("503 Service Unavailable", f"at most {self.max_streams} dashboards at a time")
        return Stream(self._events(), "text/event-stream", {"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def _events(self) -> AsyncIterator[bytes]:
        self.streams += 1
        try:
            yield b"retry: 2000\n\n"
            while True:
                yield b"data: " + self._payload() + b"\n\n"
                await asyncio.sleep(self.tick_s)
        finally:
            self.streams -= 1
