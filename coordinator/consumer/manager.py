"""The KIP-848 consumer-group coordinator, sans-IO (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``
and its helpers).

``heartbeat(now_ms, request, version)`` takes a ConsumerGroupHeartbeat request (the message's fields in
snake_case) and returns the response and the records that carry every change; the records are applied
with ``replay`` before the call returns (Kafka's runtime replays a write's records at once and answers
when they are committed). ``tick(now_ms)`` fires the session and rebalance (revocation) deadlines.
``next_deadline()`` tells the shell when to tick. Deadlines are not persisted: after a load,
``end_load(now_ms)`` arms a session deadline for every member, as Kafka's ``onLoaded`` does.

A heartbeat, in Kafka's order:
1. validate the request (``throwIfConsumerGroupHeartbeatRequestIsInvalid``, ``validation.py``); epochs
   -1/-2 leave.
2. find or create the group and the member (``getOrMaybeSubscribeDynamicConsumerGroupMember`` /
   ``...StaticConsumerGroupMember``), fencing stale epochs (``throwIfMemberEpochIsInvalid``).
3. apply the request's subscription; a changed subscription, a newly resolved regular expression
   or changed topic metadata bumps the group epoch (``hasMemberSubscriptionChanged``,
   ``maybeUpdateRegularExpressions``, ``updateSubscriptionMetadata``).
4. when the group epoch is ahead of the target assignment epoch, run the assignor
   (``updateTargetAssignment``); write only the members whose target changed.
5. reconcile the member towards its target (``maybeReconcile`` with ``CurrentAssignmentBuilder``),
   arm its revocation deadline while it holds partitions others wait for.
6. answer with the member epoch, the heartbeat interval, and the assignment when the request was a
   full one or the assignment changed.
Steps 2-5 are ``update_member``, which a classic member's JoinGroup runs too.

Regular expressions are not resolved in the heartbeat: ``maybeUpdateRegularExpressions`` arms a
``regex`` deadline due at once (Kafka's executor), at most one per group per
``regex_refresh_interval_ms`` and only for an unresolved regex or topics created since; firing it
writes every resolution and, if one changed, one new group epoch.

Two collaborators are handed the manager (composition, as the seams of Kafka's
``GroupMetadataManager``): ``ClassicMembers`` (``classic_members.py``) answers the JoinGroup, SyncGroup,
Heartbeat and LeaveGroup of members speaking the classic protocol (``classicGroup*ToConsumerGroup``);
``Migration`` (``migration.py``) converts a classic group into a consumer group and, when only classic
members would stay, back (``convertToConsumerGroup`` / ``convertToClassicGroup``). The manager keeps
their public entry points (``classic_join``, ``convert_from_classic``, ...) for the shell.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from .. import errors
from ..timers import Deadlines, Slot
from .assignor_spec import (
    GroupSpec,
    consumer_subscription_type,
    java_member_spec,
    target_assignment_member_order,
)
from .assignors import ASSIGNORS, PartitionAssignorError
from .classic_members import CONSUMER_PROTOCOL_TYPE, ClassicJoin, ClassicMembers
from .config import MIGRATION_POLICIES, ConsumerGroupConfig, TopicsImage
from .events import (
    FENCE_REASONS,
    GROUP_CREATED,
    MEMBER_FENCED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    REGEX_RESOLVED,
    REGEX_SUBSCRIPTION_CHANGED,
    STATIC_MEMBER_REPLACED,
    SUBSCRIPTION_CHANGED,
    TOPIC_METADATA_CHANGED,
    ConsumerGroupEvents,
)
from .group import ConsumerGroup, ConsumerGroups
from .member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    FencedMemberEpoch,
    MemberState,
    Partitions,
    reconcile,
    subscribed_topic_ids,
    to_tuple,
)
from .migration import ClassicMemberSpec, Downgrade, Migration, UpgradeRefused
from .record_helpers import current_assignment_record, member_metadata_record, member_tombstones, target_record
from .records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecord,
    TopicMetadata,
)
from .regex import resolve
from .validation import (
    HeartbeatResult,
    RequestError,
    check_member_epoch,
    error_response,
    leaves_unset,
    validate_request,
)

# Importers of this module before the collaborators were cut out keep their names.
__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "MIGRATION_POLICIES",
    "ClassicJoin",
    "ClassicMemberSpec",
    "ConsumerGroupConfig",
    "ConsumerGroupManager",
    "Downgrade",
    "HeartbeatResult",
    "TopicsImage",
    "UpgradeRefused",
    "current_assignment_record",
    "member_metadata_record",
    "target_record",
]


class _Members(Mapping[str, ConsumerGroupMember]):
    """The group's members as a heartbeat would leave them, without copying the group's dict (a
    steady heartbeat must not cost O(members))."""

    def __init__(self, base: Mapping[str, ConsumerGroupMember]) -> None:
        self.base = base
        self.changed: dict[str, ConsumerGroupMember] = {}
        self.removed: set[str] = set()

    def set(self, member: ConsumerGroupMember) -> None:
        self.removed.discard(member.member_id)
        self.changed[member.member_id] = member

    def remove(self, member_id: str) -> None:
        self.changed.pop(member_id, None)
        self.removed.add(member_id)

    def changes(self) -> list[tuple[ConsumerGroupMember | None, ConsumerGroupMember | None]]:
        out: list[tuple[ConsumerGroupMember | None, ConsumerGroupMember | None]] = [
            (self.base.get(mid), None) for mid in self.removed
        ]
        out += [(self.base.get(mid), m) for mid, m in self.changed.items()]
        return out

    def __getitem__(self, key: str) -> ConsumerGroupMember:
        if key in self.removed:
            raise KeyError(key)
        m = self.changed.get(key)
        return m if m is not None else self.base[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.changed
        for k in self.base:
            if k not in self.changed and k not in self.removed:
                yield k

    def __len__(self) -> int:
        return sum(1 for _ in self)


# An enum member read from its class costs a call (EnumType.__getattr__ makes the class's attribute
# reads go through slot_tp_getattr_hook: ~400 instructions of a steady heartbeat, issue 26); read once.
_STABLE = MemberState.STABLE


def _steady_answer(member_id: str, epoch: int, interval_ms: int) -> dict[str, Any]:
    """``ConsumerGroupManager._response`` with no assignment (``steady_answer``)."""
    return {
        "throttle_time_ms": 0,
        "error_code": errors.NONE,
        "error_message": None,
        "member_id": member_id,
        "member_epoch": epoch,
        "heartbeat_interval_ms": interval_ms,
        "assignment": None,
    }


def _owned(request: Mapping[str, Any]) -> list[tuple[uuid.UUID, list[int]]] | None:
    tps = request.get("topic_partitions")
    if tps is None:
        return None
    return [(tp["topic_id"], list(tp["partitions"])) for tp in tps]


class ConsumerGroupManager:
    def __init__(
        self,
        config: ConsumerGroupConfig | None = None,
        topics: TopicsImage | None = None,
        uuid_factory: Callable[[], str] | None = None,
        *,
        log: Any = None,
        limited_log: Any = None,
    ) -> None:
        self.config = config or ConsumerGroupConfig()
        self.topics = topics or TopicsImage()
        self.groups = ConsumerGroups()
        self.deadlines = Deadlines()
        # member id -> (the slot of its session deadline, epoch, interval, answer), steady_heartbeat's
        # (as the classic short path holds Member.session; members here are immutable records)
        self._sessions: dict[str, tuple[Slot, int, int, dict[str, Any]]] = {}
        counter = itertools.count(1)
        self._uuid = uuid_factory or (lambda: f"member-{next(counter)}-{uuid.uuid4().hex[:8]}")
        # Told the group id before a call's records are applied (the shell keeps a copy to roll
        # back to if their write fails); every record of one call belongs to one group.
        self.before_write: Callable[[str], None] | None = None
        # The topics image version that last brought new topics (``lastMetadataImageWithNewTopics``):
        # regular expressions resolved against an older one are resolved again
        self.last_image_with_new_topics = 0
        # A group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (its group configs,
        # Kafka's GroupConfigManager): group id -> (session, interval), None where the group has none
        self.group_configs: dict[str, tuple[int | None, int | None]] = {}
        self.migration = Migration(self)
        self.classic = ClassicMembers(self)
        # The info-level events (events.py): the shell hands in its logger and rate limiter
        self.events = ConsumerGroupEvents(log, limited_log)

    @property
    def downgrades(self) -> dict[str, Downgrade]:
        """Groups that a call has just converted back to classic, not yet taken by the shell."""
        return self.migration.downgrades

    def new_member_id(self) -> str:
        return self._uuid()

    # -- state ---------------------------------------------------------------------------------

    def replay(self, record: ConsumerRecord) -> None:
        self.groups.replay(record)

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def next_deadline(self) -> int | None:
        return self.deadlines.next_deadline()

    def end_load(self, now_ms: int, group_ids: Iterable[str] | None = None) -> None:
        """``GroupMetadataManager.onLoaded``: every loaded member gets a fresh session deadline, and a
        member still holding partitions it was asked to revoke a fresh revocation deadline
        (``scheduleConsumerGroupRebalanceTimeout``)."""
        for gid in self.groups.groups if group_ids is None else group_ids:
            self._rearm_revocations(now_ms, self.groups.groups[gid])
            g = self.groups.groups[gid]
            for mid, m in g.members.items():
                self.deadlines.set((g.group_id, mid, "session"), now_ms + self.session_timeout(g.group_id, m))

    def _rearm_revocations(self, now_ms: int, g: ConsumerGroup) -> None:
        for mid, m in g.members.items():
            if m.state == MemberState.UNREVOKED_PARTITIONS:
                self.deadlines.set(
                    (g.group_id, mid, "rebalance", m.member_epoch), now_ms + max(m.rebalance_timeout_ms, 0)
                )

    def set_topics(self, image: TopicsImage) -> None:
        """A topic was created, deleted or grew (``onNewMetadataImage``): groups look at their
        subscription metadata and regular expressions again on their next heartbeat. Kafka flags only
        the groups subscribed to a changed topic; flagging every group costs a recomputation that
        finds nothing changed, never a spurious rebalance."""
        if set(image.topics) - set(self.topics.topics):
            self.last_image_with_new_topics = image.version
        self.topics = image
        for g in self.groups.groups.values():
            g.metadata_refresh_needed = True

    def apply(self, records: list[ConsumerRecord]) -> None:
        if records and self.before_write is not None:
            self.before_write(records[0][0].group_id)
        for r in records:
            self.groups.replay(r)

    # -- timers ----------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[ConsumerRecord]:
        """Fire every due deadline (``due`` then ``fire``); the fencing records, applied."""
        out: list[ConsumerRecord] = []
        for key in self.due(now_ms):
            out.extend(self.fire(key, now_ms))
        return out

    def due(self, now_ms: int) -> list[tuple[Any, ...]]:
        """The deadlines that expired, removed. An expired session fences its member
        (``consumerGroupSessionTimeoutExpired``); an expired revocation fences a member still holding
        what it was asked to revoke at the epoch the deadline was armed for
        (``consumerGroupRebalanceTimeoutExpired``). A shell with a write of the group in flight
        fires the key once it is done."""
        out: list[tuple[Any, ...]] = []
        limit = self.deadlines.seq
        while (key := self.deadlines.pop_due(now_ms, limit)) is not None:
            out.append(key)
        return out

    def fire(self, key: tuple[Any, ...], now_ms: int = 0) -> list[ConsumerRecord]:
        """One expired deadline (at ``now_ms``): its records (applied), or none when it no longer applies."""
        gid, mid, kind = key[:3]
        g = self.groups.get(gid)
        if kind == "regex":
            records = self._refresh_regexes(g, now_ms) if g is not None else []
            self.apply(records)
            return records
        m = g.members.get(mid) if g is not None else None
        if g is None or m is None:
            return []
        if kind == "rebalance" and (m.member_epoch != key[3] or m.state != MemberState.UNREVOKED_PARTITIONS):
            return []
        # join/sync: a classic member told to rejoin (or answered) did not come back within its
        # rebalance timeout (consumerGroupJoinTimeout / consumerGroupSyncTimeout): fenced
        if kind == "session":
            timeout = {"session_timeout_ms": self.session_timeout(gid, m)}
        else:
            timeout = {"rebalance_timeout_ms": m.rebalance_timeout_ms, "member_epoch": m.member_epoch}
        self.events.member_fenced(gid, mid, g.group_epoch, FENCE_REASONS.get(kind, kind), **timeout)
        records = self.fence(g, mid, reason=MEMBER_FENCED, now_ms=now_ms)
        self.apply(records)
        return records

    def cancel_timers(self, gid: str, mid: str) -> None:
        for kind in ("session", "join", "sync"):
            self.deadlines.cancel((gid, mid, kind))
        # a rebalance deadline carries the epoch it was armed at; a stale one is ignored when it fires

    # -- removing members ------------------------------------------------------------------------

    def fence(
        self, g: ConsumerGroup, *member_ids: str, reason: str = MEMBER_LEFT, now_ms: int | None = None
    ) -> list[ConsumerRecord]:
        """``consumerGroupFenceMember(s)``: remove the members and bump the group epoch so the others get
        their partitions; or convert the group to classic when only classic members would stay
        (``validateOnlineDowngradeWithFencedMembers``). ``reason``: why the epoch is bumped, for its
        log line (the callers log the members' own events)."""
        gid = g.group_id
        for mid in member_ids:
            self.cancel_timers(gid, mid)
        if self.migration.can_downgrade(g, member_ids):
            return self.migration.downgrade(g, member_ids)
        records: list[ConsumerRecord] = []
        members = _Members(g.members)
        for mid in member_ids:
            records += member_tombstones(gid, mid)
            members.remove(mid)
        records += self._regex_records(g, members)
        records += self._metadata_records(g, members, self._resolved_after(g, records))
        records.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(g.group_epoch + 1)))
        self.events.epoch_bumped(gid, g.group_epoch, g.group_epoch + 1, reason, now_ms)
        return records

    # -- heartbeat -------------------------------------------------------------------------------

    def heartbeat(
        self, now_ms: int, request: Mapping[str, Any], version: int = 1, *, client_id: str = "", client_host: str = ""
    ) -> HeartbeatResult:
        try:
            validate_request(request, version, self.config.assignors)
            epoch = request["member_epoch"]
            if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(now_ms, request)
            return self._heartbeat(now_ms, request, client_id, client_host)
        except RequestError as e:
            self.events.refused(
                request.get("group_id") or "",
                request.get("member_id") or "",
                request.get("member_epoch", 0),
                e.code,
                e.message,
            )
            return HeartbeatResult(error_response(e))

    def check_request(self, request: Mapping[str, Any], version: int) -> dict[str, Any] | None:
        """The error answer to a heartbeat whose request is invalid, before any group is looked at."""
        try:
            validate_request(request, version, self.config.assignors)
        except RequestError as e:
            return error_response(e)
        return None

    def _leave(self, now_ms: int, req: Mapping[str, Any]) -> HeartbeatResult:
        """``consumerGroupLeave``: epoch -1 removes the member; -2 (static only) keeps its partitions,
        at epoch -2, until it comes back under the same instance id or its session expires."""
        gid, mid, epoch, instance_id = req["group_id"], req["member_id"], req["member_epoch"], req.get("instance_id")
        g = self.groups.get(gid)
        if g is None:
            raise RequestError(errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if instance_id is None:
            if mid not in g.members:
                raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
            self.events.member_left(gid, g.members[mid], g.group_epoch, "leave")
            records = self.fence(g, mid, now_ms=now_ms)
        else:
            static_mid = g.static_members.get(instance_id)
            if static_mid is None:
                raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if static_mid != mid:
                raise RequestError(
                    errors.FENCED_INSTANCE_ID,
                    f"Static member {mid} with instance id {instance_id} was fenced by member {static_mid}.",
                )
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # consumerGroupStaticMemberGroupLeave: the session deadline keeps running
                m = g.members[mid]
                self.events.member_left(gid, m, g.group_epoch, "static_temporary_leave")
                records = [
                    current_assignment_record(
                        gid, replace(m, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                    )
                ]
            else:
                self.events.member_left(gid, g.members[mid], g.group_epoch, "leave")
                records = self.fence(g, mid, now_ms=now_ms)
        self.apply(records)
        return HeartbeatResult(self._response(gid, mid, epoch, None), records)

    def steady_heartbeat(
        self, now_ms: int, request: Mapping[str, Any], version: int, cid: str, host: str, steady_form: bool = False
    ) -> dict[str, Any] | None:
        """``heartbeat``'s answer when it takes the ``_steady`` shortcut (the session renewed), else
        None with nothing changed: every other case is ``heartbeat``'s, which answers it with its
        events (the shell's hot path, as ``GroupCoordinator.heartbeat`` is the classic one's), in one
        pass (issue 26). ``steady_form``: the wire reader saw the unset fields unset (``SteadyBody``)."""
        if not steady_form and not leaves_unset(request, version):
            return None
        member_id, group_id, epoch = request.get("member_id"), request.get("group_id"), request["member_epoch"]
        # What validate_request checks of a request _steady can take: a positive epoch and its ids;
        # the optional fields it checks (instance, rack, assignor, regex) _steady requires unset
        # before it changes anything. Past these, validate_request cannot refuse it.
        # (``not s or s.isspace()`` is ``not s.strip()`` without making the stripped copy)
        if epoch <= 0 or not member_id or member_id.isspace() or not group_id or group_id.isspace():
            return None
        g = self.groups.groups.get(group_id)
        if g is None or g.metadata_refresh_needed or g.regex_counts or g.resolved_regexes:
            return None
        target_epoch = g.target_epoch
        if g.group_epoch == 0 or g.group_epoch > target_epoch:
            return None
        member = g.members.get(member_id)
        if (
            member is None
            or member.classic is not None
            or member.instance_id is not None
            or member.client_id != cid
            or member.client_host != host
            or member.state != _STABLE
            or member.member_epoch != target_epoch
        ):
            return None
        if epoch != member.member_epoch:  # the same epoch always passes throwIfMemberEpochIsInvalid
            try:
                check_member_epoch(member, epoch, _owned(request))
            except RequestError:
                return None  # a fenced epoch, answered by heartbeat before anything is renewed
        own = self.group_configs.get(group_id)
        config = self.config
        if own is None:
            session, interval = config.session_timeout_ms, config.heartbeat_interval_ms
        else:  # session_timeout and _heartbeat_interval: the group's config, else the broker's
            session = own[0] if own[0] is not None else config.session_timeout_ms
            interval = own[1] if own[1] is not None else config.heartbeat_interval_ms
        # The session moved later in the held slot, as Deadlines.set would (timers.Slot), and the last
        # answer given again while its epoch and interval stay; else by key (the members gone
        # dropped once they outnumber the live deadlines).
        deadline, epoch, held = now_ms + session, member.member_epoch, self._sessions.get(member_id)
        if held is not None and (slot := held[0]).due is not None and slot.live <= deadline and slot.key[0] == group_id:
            slot.due = deadline
            if held[1] == epoch and held[2] == interval:
                return held[3]  # type: ignore[no-any-return]
        else:
            if len(self._sessions) > 2 * len(self.deadlines) + 64:
                self._sessions = {m: h for m, h in self._sessions.items() if h[0].due is not None}
            slot = self.deadlines.set((group_id, member_id, "session"), deadline)
        answer = self.steady_answer(member.member_id, epoch, interval)
        self._sessions[member_id] = (slot, epoch, interval, answer)
        return answer

    steady_answer = staticmethod(_steady_answer)  # the shell may put one that carries its bytes here

    def _response(self, group_id: str, member_id: str, epoch: int, assignment: Partitions | None) -> dict[str, Any]:
        answer = _steady_answer(member_id, epoch, self._heartbeat_interval(group_id))
        if assignment is not None:
            answer["assignment"] = {
                "topic_partitions": [{"topic_id": t, "partitions": list(ps)} for t, ps in to_tuple(assignment)]
            }
        return answer

    def _heartbeat(self, now_ms: int, req: Mapping[str, Any], client_id: str, client_host: str) -> HeartbeatResult:
        """``consumerGroupHeartbeat``: steps 2-5, then the answer (step 6)."""
        member = self._steady(now_ms, req, client_id, client_host)
        if member is not None:
            # what update_member answers a steady member: no records, no assignment, no events
            return HeartbeatResult(self._response(req["group_id"], member.member_id, member.member_epoch, None), [])
        member, reconciled, records = self.update_member(now_ms, req, client_id, client_host)
        full = req["member_epoch"] == JOIN_GROUP_MEMBER_EPOCH or (
            req.get("rebalance_timeout_ms", -1) != -1
            and req.get("subscribed_topic_names") is not None
            and req.get("topic_partitions") is not None
        )
        send = full or reconciled.assigned != member.assigned
        return HeartbeatResult(
            self._response(
                req["group_id"], reconciled.member_id, reconciled.member_epoch, reconciled.assigned if send else None
            ),
            records,
        )

    def _steady(
        self, now_ms: int, req: Mapping[str, Any], client_id: str, client_host: str
    ) -> ConsumerGroupMember | None:
        """The member, when this heartbeat is one of a dynamic member of a Stable group that changes
        nothing: the same member at its epoch, reconciled to the target, no field of the request set
        (Kafka's clients send them only when they change), no regex in the group, no metadata refresh
        due. Then ``update_member``'s steps come to the epoch check and a new session deadline; it
        costs ~40% of a steady heartbeat's coordinator time to find that out the long way. None:
        take the long way (every other case, errors included, is update_member's)."""
        g = self.groups.get(req["group_id"])
        if g is None or g.metadata_refresh_needed or g.regex_counts or g.resolved_regexes:
            return None
        target_epoch = g.target_epoch
        if g.group_epoch == 0 or g.group_epoch > target_epoch:
            return None
        epoch = req["member_epoch"]
        member = g.members.get(req.get("member_id") or "")
        if (
            member is None
            or epoch == JOIN_GROUP_MEMBER_EPOCH
            or member.classic is not None
            or member.instance_id is not None
            or member.client_id != client_id
            or member.client_host != client_host
            or not member.is_reconciled_to(target_epoch)
            or req.get("instance_id") is not None
            or req.get("rack_id") is not None
            or req.get("rebalance_timeout_ms", -1) != -1
            or req.get("server_assignor") is not None
            or req.get("subscribed_topic_names") is not None
            or req.get("subscribed_topic_regex") is not None
        ):
            return None
        check_member_epoch(member, epoch, _owned(req))
        gid = g.group_id
        self.deadlines.set((gid, member.member_id, "session"), now_ms + self.session_timeout(gid, member))
        return member

    def update_member(
        self,
        now_ms: int,
        req: Mapping[str, Any],
        client_id: str,
        client_host: str,
        classic: ClassicJoin | None = None,
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember, list[ConsumerRecord]]:
        """A heartbeat's steps 2-5, and with ``classic`` the same steps for a classic member's JoinGroup
        (``classicGroupJoinToConsumerGroup``): no epoch checks, the subscription and the owned
        partitions from the embedded consumer protocol, the session from the JoinGroup. The member as it
        was and as it is now, and the records, applied."""
        gid, epoch, instance_id = req["group_id"], req["member_epoch"], req.get("instance_id")
        mid = req.get("member_id") or self._uuid()
        owned = _owned(req) if classic is None else classic.owned
        records: list[ConsumerRecord] = []
        g = self.groups.get(gid)
        if g is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise RequestError(errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
            g = ConsumerGroup(gid)  # created by this heartbeat's records (getOrMaybeCreateConsumerGroup)
        if len(g.members) >= self.config.max_size and mid not in g.members:
            raise RequestError(
                errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        members = _Members(g.members)
        new_member = False
        replaced_from: str | None = None
        if instance_id is None:
            member = g.members.get(mid)
            if member is None:
                if epoch != JOIN_GROUP_MEMBER_EPOCH and classic is None:
                    raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
                member, new_member = ConsumerGroupMember(mid, client_id=client_id, client_host=client_host), True
            elif epoch != JOIN_GROUP_MEMBER_EPOCH and classic is None:
                check_member_epoch(member, epoch, owned)
        else:
            static_mid = g.static_members.get(instance_id)
            existing = g.members.get(static_mid) if static_mid is not None else None
            if (epoch == JOIN_GROUP_MEMBER_EPOCH) if classic is None else not classic.known_member:
                if existing is None:
                    member, new_member = ConsumerGroupMember(mid, client_id=client_id, client_host=client_host), True
                elif existing.member_id == mid:
                    member = existing
                elif (
                    existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    and classic is None
                    and not existing.uses_classic_protocol
                ):
                    # getOrMaybeSubscribeStaticConsumerGroupMember: only between two consumer-protocol
                    # members must the old one have left first
                    raise RequestError(
                        errors.UNRELEASED_INSTANCE_ID,
                        f"Static member {mid} with instance id {instance_id} cannot join the group because the "
                        f"instance id is owned by {existing.member_id} member.",
                    )
                else:
                    # replaceStaticMember: the new member id takes the old one's place, partitions and target
                    member = replace(existing, member_id=mid, member_epoch=0, previous_member_epoch=0)
                    records += member_tombstones(gid, existing.member_id)
                    records.append(member_metadata_record(gid, member))
                    records.append(target_record(gid, mid, g.target.get(existing.member_id, {})))
                    records.append(current_assignment_record(gid, member))
                    members.remove(existing.member_id)
                    self.cancel_timers(gid, existing.member_id)
                    replaced_from = existing.member_id
            else:
                if existing is None:
                    raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if existing.member_id != mid:
                    raise RequestError(
                        errors.FENCED_INSTANCE_ID,
                        f"Static member {mid} with instance id {instance_id} was fenced by member {existing.member_id}.",
                    )
                member = existing
                if classic is None:
                    check_member_epoch(member, epoch, owned)

        # 3. the subscription: one replace with what actually changed (a steady heartbeat changes
        # nothing, and replace() is most of its cost)
        changed: dict[str, Any] = {}
        if member.client_id != client_id:
            changed["client_id"] = client_id
        if member.client_host != client_host:
            changed["client_host"] = client_host
        if classic is not None:
            changed["classic"] = classic.metadata
            changed["subscribed_topic_names"] = tuple(sorted(set(classic.subscription.topics)))
            if classic.subscription.rack_id is not None:
                changed["rack_id"] = classic.subscription.rack_id
        elif member.classic is not None:
            changed["classic"] = None
        if (v := req.get("instance_id")) is not None and v != member.instance_id:
            changed["instance_id"] = v
        if (v := req.get("rack_id")) is not None and v != member.rack_id:
            changed["rack_id"] = v
        if (v := req.get("rebalance_timeout_ms", -1)) != -1 and v != member.rebalance_timeout_ms:
            changed["rebalance_timeout_ms"] = v
        if (v := req.get("server_assignor")) is not None and v != member.server_assignor:
            changed["server_assignor"] = v
        if (v := req.get("subscribed_topic_names")) is not None:
            names = tuple(sorted(set(v)))
            if names != member.subscribed_topic_names:
                changed["subscribed_topic_names"] = names
        if (v := req.get("subscribed_topic_regex")) is not None and (v or None) != member.subscribed_topic_regex:
            changed["subscribed_topic_regex"] = v or None
        updated = replace(member, **changed) if changed else member
        names_changed = False
        if new_member or (updated is not member and updated != member):
            records.append(member_metadata_record(gid, updated))
            # hasMemberSubscriptionChanged: only a change of names bumps (a new member subscribed to
            # nothing joins at the current target epoch); a regex change is maybeUpdateRegularExpressions'
            names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        members.set(updated)
        records += self._regex_records(g, members)
        regex_bump = self._maybe_update_regexes(now_ms, g, member, updated, members)
        # a new group moves away from epoch 0 at once
        bump = g.group_epoch == 0 or names_changed or regex_bump
        old_epoch = group_epoch = g.group_epoch
        meta: list[ConsumerRecord] = []
        if bump or g.metadata_refresh_needed:
            meta = self._metadata_records(g, members, self._resolved_after(g, records))
            records += meta
            bump = bump or bool(meta)
        if bump:
            group_epoch += 1
            records.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(group_epoch)))
        self.deadlines.set((gid, mid, "session"), now_ms + self.session_timeout(gid, updated))

        # 4. the target assignment
        resolved = self._resolved_after(g, records)
        target_epoch = g.target_epoch
        # a replaced static member inherits its target
        my_target = g.target.get(replaced_from if replaced_from is not None else mid, {})
        computed: tuple[str, int, int] | None = None  # (assignor, members, targets changed), for the log
        if group_epoch > target_epoch:
            targets = {m: g.target.get(m, {}) for m in members}
            targets[mid] = my_target
            try:
                new_targets = self._assign(g, members, mid, replaced_from, targets, resolved)
            except PartitionAssignorError as e:
                raise RequestError(errors.UNKNOWN_SERVER_ERROR, str(e)) from None
            moved = 0
            for m in sorted(members):
                if new_targets.get(m, {}) != targets.get(m, {}):
                    records.append(target_record(gid, m, new_targets.get(m, {})))
                    moved += 1
            computed = (self.preferred_assignor(members), len(targets), moved)
            records.append(
                (ConsumerGroupTargetAssignmentMetadataKey(gid), ConsumerGroupTargetAssignmentMetadataValue(group_epoch))
            )
            my_target, target_epoch = new_targets.get(mid, {}), group_epoch

        # 5. reconciliation
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            try:
                reconciled = reconcile(
                    updated,
                    target_epoch,
                    my_target,
                    g.current_partition_epoch,
                    owned,
                    subscribed_topic_ids(updated, resolved, self.topics.topic_id),
                )
            except FencedMemberEpoch as e:
                raise RequestError(errors.FENCED_MEMBER_EPOCH, str(e)) from None
        # a steady heartbeat leaves the member as it was (the same object): no field-by-field compare
        stepped = reconciled is not updated and reconciled != updated
        if stepped or new_member:
            records.append(current_assignment_record(gid, reconciled))
            if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
                self.deadlines.set(
                    (gid, mid, "rebalance", reconciled.member_epoch), now_ms + max(reconciled.rebalance_timeout_ms, 0)
                )
        self.apply(records)
        g_now = self.groups.get(gid)
        if g_now is not None:
            g_now.metadata_refresh_needed = False
        # the events, once the records are applied (an error above leaves nothing to log)
        events = self.events
        if replaced_from is not None:
            events.member_fenced(
                gid, replaced_from, group_epoch, STATIC_MEMBER_REPLACED, instance=instance_id, replaced_by=mid
            )
            events.member_joined(gid, reconciled, group_epoch, replaces=replaced_from)
        elif new_member:
            events.member_joined(gid, reconciled, group_epoch)
        elif epoch == JOIN_GROUP_MEMBER_EPOCH and classic is None:
            events.member_rejoined(gid, reconciled, group_epoch)
        if bump:
            reason = (
                MEMBER_JOINED
                if new_member and (names_changed or regex_bump or old_epoch == 0)
                else SUBSCRIPTION_CHANGED
                if names_changed
                else REGEX_SUBSCRIPTION_CHANGED
                if regex_bump
                else TOPIC_METADATA_CHANGED
                if meta
                else GROUP_CREATED
            )
            events.epoch_bumped(gid, old_epoch, group_epoch, reason, now_ms)
        if computed is not None:
            events.target_computed(gid, group_epoch, *computed)
        if stepped:
            events.member_updated(gid, reconciled, target_epoch)
        if g_now is not None and (stepped or new_member):
            events.maybe_converged(g_now, reconciled, now_ms)
        return member, reconciled, records

    # -- the group's own configs -----------------------------------------------------------------

    def set_group_config(
        self, group_id: str, session_timeout_ms: int | None = None, heartbeat_interval_ms: int | None = None
    ) -> None:
        """The group's configs changed (IncrementalAlterConfigs on its GROUP resource, or loaded at start-up).
        As in Kafka they take effect at each member's next heartbeat: its next session deadline and the
        interval in its next answer; deadlines already armed keep running."""
        if session_timeout_ms is None and heartbeat_interval_ms is None:
            self.group_configs.pop(group_id, None)
        else:
            self.group_configs[group_id] = (session_timeout_ms, heartbeat_interval_ms)

    def session_timeout(self, group_id: str, m: ConsumerGroupMember) -> int:
        """A classic member keeps the session timeout of its JoinGroup (``classicProtocolSessionTimeout``);
        the others get the group's (``consumerGroupSessionTimeoutMs``: its group config, else the broker's)."""
        if m.classic is not None:
            return m.classic.session_timeout_ms
        own = self.group_configs.get(group_id)
        return own[0] if own is not None and own[0] is not None else self.config.session_timeout_ms

    def _heartbeat_interval(self, group_id: str) -> int:
        """``consumerGroupHeartbeatIntervalMs``: the group's config, else the broker's."""
        own = self.group_configs.get(group_id)
        return own[1] if own is not None and own[1] is not None else self.config.heartbeat_interval_ms

    # -- the collaborators' entry points, kept here for the shell ------------------------------------

    def classic_join(
        self, now_ms: int, req: Mapping[str, Any], version: int, *, client_id: str = "", client_host: str = ""
    ) -> HeartbeatResult:
        return self.classic.join(now_ms, req, version, client_id=client_id, client_host=client_host)

    def classic_sync(self, now_ms: int, req: Mapping[str, Any], version: int) -> dict[str, Any]:
        return self.classic.sync(now_ms, req, version)

    def classic_heartbeat(
        self, now_ms: int, group_id: str, member_id: str, generation: int, instance_id: str | None
    ) -> int:
        return self.classic.heartbeat(now_ms, group_id, member_id, generation, instance_id)

    def classic_leave(
        self, now_ms: int, group_id: str, identities: list[tuple[str, str | None]]
    ) -> tuple[list[int], list[ConsumerRecord]]:
        return self.classic.leave(now_ms, group_id, identities)

    def assignment_bytes(self, parts: Partitions, version: int) -> bytes:
        return self.classic.assignment_bytes(parts, version)

    def supports_classic_protocols(self, g: ConsumerGroup, protocol_type: str, names: Iterable[str]) -> bool:
        return self.classic.supports_protocols(g, protocol_type, names)

    def convert_from_classic(
        self, now_ms: int, group_id: str, generation: int, protocol_name: str | None, members: list[ClassicMemberSpec]
    ) -> list[ConsumerRecord]:
        return self.migration.convert_from_classic(now_ms, group_id, generation, protocol_name, members)

    def take_downgrade(self, group_id: str) -> Downgrade | None:
        return self.migration.take_downgrade(group_id)

    # -- helpers ---------------------------------------------------------------------------------

    def _resolved_after(self, g: ConsumerGroup, records: list[ConsumerRecord]) -> dict[str, frozenset[str]]:
        """The group's resolved regular expressions once ``records`` are applied."""
        out = {r: v.topics for r, v in g.resolved_regexes.items()}
        for key, value in records:
            if isinstance(key, ConsumerGroupRegularExpressionKey):
                if value is None:
                    out.pop(key.regular_expression, None)
                else:
                    assert isinstance(value, ConsumerGroupRegularExpressionValue)
                    out[key.regular_expression] = frozenset(value.topics)
        return out

    @staticmethod
    def _regexes_in_use(g: ConsumerGroup, members: _Members) -> set[str]:
        """The regular expressions some member subscribes with once ``members``' changes are made."""
        counts = g.regex_counts
        changes = members.changes()
        if any(m is not None and m.subscribed_topic_regex for pair in changes for m in pair):
            counts = dict(counts)
            for old, new in changes:
                for m, d in ((old, -1), (new, 1)):
                    if m is not None and m.subscribed_topic_regex:
                        counts[m.subscribed_topic_regex] = counts.get(m.subscribed_topic_regex, 0) + d
        return {rx for rx, n in counts.items() if n > 0}

    def _regex_records(self, g: ConsumerGroup, members: _Members) -> list[ConsumerRecord]:
        """The tombstones of resolved regular expressions no member subscribes with any more (when the
        last one changes its regex or leaves)."""
        if not g.resolved_regexes:
            return []
        in_use = self._regexes_in_use(g, members)
        return [
            (ConsumerGroupRegularExpressionKey(g.group_id, rx), None) for rx in sorted(set(g.resolved_regexes) - in_use)
        ]

    def _maybe_update_regexes(
        self,
        now_ms: int,
        g: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        members: _Members,
    ) -> bool:
        """``maybeUpdateRegularExpressions``: whether the group epoch must be bumped now (the member moved
        to a regex the group has already resolved), and maybe a refresh of all the group's regexes,
        batched as Kafka does: none while one is scheduled, at most one per
        ``regex_refresh_interval_ms``, and only for an unresolved regex or when topics were created
        since the last resolution (``lastMetadataImageWithNewTopics``). The refresh is not done here:
        it is a deadline due at once, fired by ``tick`` (Kafka's executor runs it asynchronously), whose
        records bump the epoch if a resolution changed; members learn it at their next heartbeat."""
        old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
        bump = require = False
        if old != new and new:
            if g.regex_counts.get(new, 0) == 0:
                require = True  # a regex new to the group: resolve it
            else:
                bump = new in g.resolved_regexes
        if not old and not new and not g.regex_counts:
            return bump  # nobody in the group subscribes with a regex (the common case: no work)
        in_use = self._regexes_in_use(g, members)
        key = (g.group_id, "", "regex")
        if not in_use or key in self.deadlines:
            return bump
        resolved = g.resolved_regexes.values()
        if resolved and now_ms <= max(r.timestamp for r in resolved) + self.config.regex_refresh_interval_ms:
            return bump
        require = require or len(in_use) != len(g.resolved_regexes)
        require = require or max((r.version for r in resolved), default=-1) < self.last_image_with_new_topics
        if require:
            self.deadlines.set(key, now_ms)
        return bump

    def _refresh_regexes(self, g: ConsumerGroup, now_ms: int) -> list[ConsumerRecord]:
        """``refreshRegularExpressions`` + ``handleRegularExpressionsResult``: every regex in use resolved
        against the topics of now (RE2 syntax, full-name match), a record for each; when one resolves
        differently, the subscription metadata and a new group epoch (one rebalance for the batch)."""
        gid = g.group_id
        records: list[ConsumerRecord] = []
        changed = False
        for rx in sorted(rx for rx, n in g.regex_counts.items() if n > 0):
            topics = resolve(rx, self.topics.topics)
            have = g.resolved_regexes.get(rx)
            changed = changed or have is None or have.topics != topics
            records.append(
                (
                    ConsumerGroupRegularExpressionKey(gid, rx),
                    ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), self.topics.version, now_ms),
                )
            )
        if changed:
            records += self._metadata_records(g, g.members, self._resolved_after(g, records))
            records.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(g.group_epoch + 1)))
            self.events.epoch_bumped(gid, g.group_epoch, g.group_epoch + 1, REGEX_RESOLVED, now_ms)
        return records

    def _metadata_records(
        self, g: ConsumerGroup, members: Mapping[str, ConsumerGroupMember], resolved: Mapping[str, frozenset[str]]
    ) -> list[ConsumerRecord]:
        """``updateSubscriptionMetadata``: the partition metadata of every topic some member subscribes
        to (by name or through its regex) that exists; a record when it changed."""
        names: set[str] = set()
        for m in members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names |= resolved.get(m.subscribed_topic_regex, frozenset())
        meta: dict[str, TopicMetadata] = {}
        for n in names:
            t = self.topics.topics.get(n)
            if t is not None:
                meta[n] = TopicMetadata(t[0], n, t[1])
        if meta == g.subscription_metadata:
            return []
        return [
            (
                ConsumerGroupPartitionMetadataKey(g.group_id),
                ConsumerGroupPartitionMetadataValue(tuple(meta[n] for n in sorted(meta))),
            )
        ]

    def preferred_assignor(self, members: Mapping[str, ConsumerGroupMember]) -> str:
        """``ConsumerGroup.computePreferredServerAssignor``: the assignor most members name, else the default."""
        counts: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        return max(sorted(counts), key=lambda a: counts[a]) if counts else self.config.assignors[0]

    def _assign(
        self,
        g: ConsumerGroup,
        members: Mapping[str, ConsumerGroupMember],
        updated_member_id: str,
        replaced_member_id: str | None,
        targets: Mapping[str, Partitions],
        resolved: Mapping[str, frozenset[str]],
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """``updateTargetAssignment`` with the group's preferred assignor (``computePreferredServerAssignor``:
        the one most members name, the default when none does), handed what Kafka's
        ``TargetAssignmentBuilder`` hands it: the members in its ``HashMap``'s order, each with its
        topic ids, instance id and current target in Java's iteration order, and the group's
        subscription type (``ConsumerGroup.subscriptionType``)."""
        name = self.preferred_assignor(members)
        # g.members iterates in insertion order, the order Kafka's replay puts members into its
        # TimelineHashMap; `members` is g.members with this heartbeat's changes
        order = target_assignment_member_order(g.members, updated_member_id, replaced_member_id)
        if len(order) != len(members):  # not reached: a heartbeat changes one member (and a replaced one)
            listed = set(order)
            order += [mid for mid in members if mid not in listed]
        specs = {}
        for mid in order:
            m = members.get(mid)
            if m is None:
                continue
            rx = m.subscribed_topic_regex
            specs[mid] = java_member_spec(
                m.subscribed_topic_names,
                self.topics.topic_id,
                targets.get(mid, {}),
                m.instance_id,
                resolved.get(rx) if rx else None,
            )
        subscription = consumer_subscription_type(
            ((m.subscribed_topic_names, m.subscribed_topic_regex) for m in members.values()), resolved
        )
        num_partitions = {t[0]: t[1] for t in self.topics.topics.values()}
        return ASSIGNORS[name].assign(GroupSpec(specs, subscription), num_partitions)
