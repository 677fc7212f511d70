"""The KIP-848 consumer-group coordinator, sans-IO (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``
and its helpers).

``heartbeat(now_ms, request, version)`` takes a ConsumerGroupHeartbeat request (the message's fields in
snake_case) and returns the response and the records that carry every change; the records are applied
with ``replay`` before the call returns (Kafka's runtime replays a write's records at once and answers
when they are committed). ``tick(now_ms)`` fires the session and rebalance (revocation) deadlines.
``next_deadline()`` tells the shell when to tick. Deadlines are not persisted: after a load,
``end_load(now_ms)`` arms a session deadline for every member, as Kafka's ``onLoaded`` does.

A heartbeat, in Kafka's order:
1. validate the request (``throwIfConsumerGroupHeartbeatRequestIsInvalid``); epochs -1/-2 leave.
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
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import errors
from ..timers import Deadlines
from .assignors import ASSIGNORS, MemberSpec, PartitionAssignorError
from .group import ConsumerGroup, ConsumerGroups, ResolvedRegex
from .member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    FencedMemberEpoch,
    MemberState,
    Partitions,
    is_subset,
    reconcile,
    subscribed_topic_ids,
    to_tuple,
)
from .records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecord,
    TopicMetadata,
)
from .regex import InvalidRegularExpression, compile_regex, resolve


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """Kafka's ``GroupCoordinatorConfig`` consumer-group settings, at Kafka's defaults."""

    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default


@dataclass(frozen=True)
class TopicsImage:
    """The topics that exist (name -> (topic id, partitions)); ``version`` grows with every change."""

    version: int = 0
    topics: Mapping[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self.topics.get(name)
        return None if t is None else t[0]


@dataclass
class HeartbeatResult:
    response: dict[str, Any]
    records: list[ConsumerRecord] = field(default_factory=list)


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


class _Error(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _owned(request: Mapping[str, Any]) -> list[tuple[uuid.UUID, list[int]]] | None:
    tps = request.get("topic_partitions")
    if tps is None:
        return None
    return [(tp["topic_id"], list(tp["partitions"])) for tp in tps]


def _tombstones(group_id: str, member_id: str) -> list[ConsumerRecord]:
    """``removeMember``: current assignment, then target, then subscription (replay checks that order)."""
    return [
        (ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        (ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        (ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> ConsumerRecord:
    """``newConsumerGroupMemberSubscriptionRecord``."""
    return (
        ConsumerGroupMemberMetadataKey(group_id, m.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=m.server_assignor,
        ),
    )


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> ConsumerRecord:
    """``newConsumerGroupCurrentAssignmentRecord``."""
    return (
        ConsumerGroupCurrentMemberAssignmentKey(group_id, m.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch,
            previous_member_epoch=m.previous_member_epoch,
            state=int(m.state),
            assigned_partitions=to_tuple(m.assigned),
            partitions_pending_revocation=to_tuple(m.pending_revocation),
        ),
    )


def target_record(group_id: str, member_id: str, parts: Partitions) -> ConsumerRecord:
    return (
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_tuple(parts)),
    )


class ConsumerGroupManager:
    def __init__(
        self,
        config: ConsumerGroupConfig | None = None,
        topics: TopicsImage | None = None,
        uuid_factory: Callable[[], str] | None = None,
    ) -> None:
        self.config = config or ConsumerGroupConfig()
        self.topics = topics or TopicsImage()
        self.groups = ConsumerGroups()
        self.deadlines = Deadlines()
        counter = itertools.count(1)
        self._uuid = uuid_factory or (lambda: f"member-{next(counter)}-{uuid.uuid4().hex[:8]}")
        # Told the group id before a call's records are applied (the shell keeps a copy to roll
        # back to if their write fails); every record of one call belongs to one group.
        self.before_write: Callable[[str], None] | None = None

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
            for mid in g.members:
                self.deadlines.set((g.group_id, mid, "session"), now_ms + self.config.session_timeout_ms)

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
        self.topics = image
        for g in self.groups.groups.values():
            g.metadata_refresh_needed = True

    def _apply(self, records: list[ConsumerRecord]) -> None:
        if records and self.before_write is not None:
            self.before_write(records[0][0].group_id)
        for r in records:
            self.groups.replay(r)

    # -- timers ----------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[ConsumerRecord]:
        """Fire every due deadline (``due`` then ``fire``); the fencing records, applied."""
        out: list[ConsumerRecord] = []
        for key in self.due(now_ms):
            out.extend(self.fire(key))
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

    def fire(self, key: tuple[Any, ...]) -> list[ConsumerRecord]:
        """One expired deadline: the fencing records (applied), or none when it no longer applies."""
        gid, mid, kind = key[:3]
        g = self.groups.get(gid)
        m = g.members.get(mid) if g is not None else None
        if g is None or m is None:
            return []
        if kind == "rebalance" and (m.member_epoch != key[3] or m.state != MemberState.UNREVOKED_PARTITIONS):
            return []
        records = self._fence(g, mid)
        self._apply(records)
        return records

    def _cancel_timers(self, gid: str, mid: str) -> None:
        self.deadlines.cancel((gid, mid, "session"))
        # a rebalance deadline carries the epoch it was armed at; a stale one is ignored when it fires

    # -- removing members ------------------------------------------------------------------------

    def _fence(self, g: ConsumerGroup, member_id: str) -> list[ConsumerRecord]:
        """``consumerGroupFenceMember``: remove the member and bump the group epoch so the others get
        its partitions."""
        gid = g.group_id
        self._cancel_timers(gid, member_id)
        records = _tombstones(gid, member_id)
        members = _Members(g.members)
        members.remove(member_id)
        records += self._regex_records(g, members, 0, force=False)
        records += self._metadata_records(g, members, self._resolved_after(g, records))
        records.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(g.group_epoch + 1)))
        return records

    # -- heartbeat -------------------------------------------------------------------------------

    def heartbeat(
        self, now_ms: int, request: Mapping[str, Any], version: int = 1, *, client_id: str = "", client_host: str = ""
    ) -> HeartbeatResult:
        try:
            self._validate(request, version)
            epoch = request["member_epoch"]
            if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(now_ms, request)
            return self._heartbeat(now_ms, request, client_id, client_host)
        except _Error as e:
            return HeartbeatResult(
                {
                    "throttle_time_ms": 0,
                    "error_code": e.code,
                    "error_message": e.message,
                    "member_id": None,
                    "member_epoch": 0,
                    "heartbeat_interval_ms": 0,
                    "assignment": None,
                }
            )

    def _validate(self, req: Mapping[str, Any], version: int) -> None:
        """``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (a blank string counts as empty, as its
        ``throwIfEmptyString`` trims). groupd also compiles a regex here; Kafka does it in
        ``maybeUpdateRegularExpressions`` when the regex is new to the group: same error, same
        absence of records."""
        invalid = errors.INVALID_REQUEST
        epoch = req["member_epoch"]

        def blank(name: str) -> bool:
            v = req.get(name)
            return v is not None and not v.strip()

        if (version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and (
            blank("member_id") or req.get("member_id") is None
        ):
            raise _Error(invalid, "MemberId can't be empty.")
        if blank("group_id") or not req.get("group_id"):
            raise _Error(invalid, "GroupId can't be empty.")
        if blank("instance_id"):
            raise _Error(invalid, "InstanceId can't be empty.")
        if blank("rack_id"):
            raise _Error(invalid, "RackId can't be empty.")
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.get("rebalance_timeout_ms", -1) == -1:
                raise _Error(invalid, "RebalanceTimeoutMs must be provided in first request.")
            if req.get("topic_partitions") is None or req["topic_partitions"]:
                raise _Error(invalid, "TopicPartitions must be empty when (re-)joining.")
            # an empty list or an empty regex is accepted: a member subscribed to nothing
            if req.get("subscribed_topic_names") is None and req.get("subscribed_topic_regex") is None:
                raise _Error(
                    invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.get("instance_id") is None:
                raise _Error(invalid, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _Error(invalid, "MemberEpoch is invalid.")
        assignor = req.get("server_assignor")
        if assignor is not None and assignor not in self.config.assignors:
            raise _Error(
                errors.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {assignor} is not supported. Supported assignors: {', '.join(self.config.assignors)}.",
            )
        regex = req.get("subscribed_topic_regex")
        if regex:
            try:
                compile_regex(regex)
            except InvalidRegularExpression as e:
                raise _Error(
                    errors.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.",
                ) from None

    def _leave(self, now_ms: int, req: Mapping[str, Any]) -> HeartbeatResult:
        """``consumerGroupLeave``: epoch -1 removes the member; -2 (static only) keeps its partitions,
        at epoch -2, until it comes back under the same instance id or its session expires."""
        gid, mid, epoch, instance_id = req["group_id"], req["member_id"], req["member_epoch"], req.get("instance_id")
        g = self.groups.get(gid)
        if g is None:
            raise _Error(errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if instance_id is None:
            if mid not in g.members:
                raise _Error(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
            records = self._fence(g, mid)
        else:
            static_mid = g.static_members.get(instance_id)
            if static_mid is None:
                raise _Error(errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if static_mid != mid:
                raise _Error(
                    errors.FENCED_INSTANCE_ID,
                    f"Static member {mid} with instance id {instance_id} was fenced by member {static_mid}.",
                )
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # consumerGroupStaticMemberGroupLeave: the session deadline keeps running
                m = g.members[mid]
                records = [
                    current_assignment_record(
                        gid, replace(m, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                    )
                ]
            else:
                records = self._fence(g, mid)
        self._apply(records)
        return HeartbeatResult(self._response(mid, epoch, None), records)

    def _response(self, member_id: str, epoch: int, assignment: Partitions | None) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": errors.NONE,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": epoch,
            "heartbeat_interval_ms": self.config.heartbeat_interval_ms,
            "assignment": None
            if assignment is None
            else {"topic_partitions": [{"topic_id": t, "partitions": list(ps)} for t, ps in to_tuple(assignment)]},
        }

    @staticmethod
    def _check_epoch(
        member: ConsumerGroupMember, received: int, owned: list[tuple[uuid.UUID, list[int]]] | None
    ) -> None:
        """``throwIfMemberEpochIsInvalid``: a newer epoch than ours is fenced; an older one is accepted only
        when it is the previous epoch and the member owns nothing beyond its assignment (it missed our
        last answer)."""
        if received > member.member_epoch:
            raise _Error(
                errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if received < member.member_epoch and not (
            received == member.previous_member_epoch and is_subset(owned, member.assigned)
        ):
            raise _Error(
                errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    def _heartbeat(self, now_ms: int, req: Mapping[str, Any], client_id: str, client_host: str) -> HeartbeatResult:
        gid, epoch, instance_id = req["group_id"], req["member_epoch"], req.get("instance_id")
        mid = req.get("member_id") or self._uuid()
        owned = _owned(req)
        records: list[ConsumerRecord] = []
        g = self.groups.get(gid)
        if g is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise _Error(errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
            g = ConsumerGroup(gid)  # created by this heartbeat's records (getOrMaybeCreateConsumerGroup)
        if len(g.members) >= self.config.max_size and mid not in g.members:
            raise _Error(
                errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        members = _Members(g.members)
        new_member = False
        replaced_from: str | None = None
        if instance_id is None:
            member = g.members.get(mid)
            if member is None:
                if epoch != JOIN_GROUP_MEMBER_EPOCH:
                    raise _Error(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
                member, new_member = ConsumerGroupMember(mid, client_id=client_id, client_host=client_host), True
            elif epoch != JOIN_GROUP_MEMBER_EPOCH:
                self._check_epoch(member, epoch, owned)
        else:
            static_mid = g.static_members.get(instance_id)
            existing = g.members.get(static_mid) if static_mid is not None else None
            if epoch == JOIN_GROUP_MEMBER_EPOCH:
                if existing is None:
                    member, new_member = ConsumerGroupMember(mid, client_id=client_id, client_host=client_host), True
                elif existing.member_id == mid:
                    member = existing
                elif existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise _Error(
                        errors.UNRELEASED_INSTANCE_ID,
                        f"Static member {mid} with instance id {instance_id} cannot join the group because the "
                        f"instance id is owned by {existing.member_id} member.",
                    )
                else:
                    # replaceStaticMember: the new member id takes the old one's place, partitions and target
                    member = replace(existing, member_id=mid, member_epoch=0, previous_member_epoch=0)
                    records += _tombstones(gid, existing.member_id)
                    records.append(member_metadata_record(gid, member))
                    records.append(target_record(gid, mid, g.target.get(existing.member_id, {})))
                    records.append(current_assignment_record(gid, member))
                    members.remove(existing.member_id)
                    self._cancel_timers(gid, existing.member_id)
                    replaced_from = existing.member_id
            else:
                if existing is None:
                    raise _Error(errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if existing.member_id != mid:
                    raise _Error(
                        errors.FENCED_INSTANCE_ID,
                        f"Static member {mid} with instance id {instance_id} was fenced by member {existing.member_id}.",
                    )
                member = existing
                self._check_epoch(member, epoch, owned)

        # 3. the subscription
        updated = replace(member, client_id=client_id, client_host=client_host)
        if req.get("instance_id") is not None:
            updated = replace(updated, instance_id=req["instance_id"])
        if req.get("rack_id") is not None:
            updated = replace(updated, rack_id=req["rack_id"])
        if req.get("rebalance_timeout_ms", -1) != -1:
            updated = replace(updated, rebalance_timeout_ms=req["rebalance_timeout_ms"])
        if req.get("server_assignor") is not None:
            updated = replace(updated, server_assignor=req["server_assignor"])
        if req.get("subscribed_topic_names") is not None:
            updated = replace(updated, subscribed_topic_names=tuple(sorted(set(req["subscribed_topic_names"]))))
        if req.get("subscribed_topic_regex") is not None:
            updated = replace(updated, subscribed_topic_regex=req["subscribed_topic_regex"] or None)
        bump = g.group_epoch == 0  # a new group moves away from epoch 0 at once
        if updated != member or new_member:
            records.append(member_metadata_record(gid, updated))
            # hasMemberSubscriptionChanged: only a change of names bumps (a new member subscribed to
            # nothing joins at the current target epoch); a regex change is maybeUpdateRegularExpressions'
            bump = (
                bump
                or updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        members.set(updated)
        regex_records = self._regex_records(g, members, now_ms, force=g.metadata_refresh_needed)
        records += regex_records
        bump = bump or bool(regex_records)
        group_epoch = g.group_epoch
        if bump or g.metadata_refresh_needed:
            meta = self._metadata_records(g, members, self._resolved_after(g, records))
            records += meta
            bump = bump or bool(meta)
        if bump:
            group_epoch += 1
            records.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(group_epoch)))
        self.deadlines.set((gid, mid, "session"), now_ms + self.config.session_timeout_ms)

        # 4. the target assignment
        resolved = self._resolved_after(g, records)
        target_epoch = g.target_epoch
        # a replaced static member inherits its target
        my_target = g.target.get(replaced_from if replaced_from is not None else mid, {})
        if group_epoch > target_epoch:
            targets = {m: g.target.get(m, {}) for m in members}
            targets[mid] = my_target
            try:
                new_targets = self._assign(members, targets, resolved)
            except PartitionAssignorError as e:
                raise _Error(errors.UNKNOWN_SERVER_ERROR, str(e)) from None
            for m in sorted(members):
                if new_targets.get(m, {}) != targets.get(m, {}):
                    records.append(target_record(gid, m, new_targets.get(m, {})))
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
                raise _Error(errors.FENCED_MEMBER_EPOCH, str(e)) from None
        if reconciled != updated or new_member:
            records.append(current_assignment_record(gid, reconciled))
            if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
                self.deadlines.set(
                    (gid, mid, "rebalance", reconciled.member_epoch), now_ms + max(reconciled.rebalance_timeout_ms, 0)
                )
        self._apply(records)
        g_now = self.groups.get(gid)
        if g_now is not None:
            g_now.metadata_refresh_needed = False

        # 6. the answer
        full = epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.get("rebalance_timeout_ms", -1) != -1
            and req.get("subscribed_topic_names") is not None
            and req.get("topic_partitions") is not None
        )
        send = full or reconciled.assigned != member.assigned
        return HeartbeatResult(
            self._response(mid, reconciled.member_epoch, reconciled.assigned if send else None), records
        )

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

    def _regex_records(self, g: ConsumerGroup, members: _Members, now_ms: int, *, force: bool) -> list[ConsumerRecord]:
        """``maybeUpdateRegularExpressions``, done synchronously: resolve a regex nobody resolved yet,
        re-resolve all when the topics changed since (``force``), delete one no member uses any more.
        Kafka resolves in the background and throttles refreshes to one per 10 s per group; groupd
        resolves in the heartbeat that needs it."""
        counts = g.regex_counts
        changes = members.changes()
        if any(m is not None and m.subscribed_topic_regex for pair in changes for m in pair):
            counts = dict(counts)
            for old, new in changes:
                for m, d in ((old, -1), (new, 1)):
                    if m is not None and m.subscribed_topic_regex:
                        counts[m.subscribed_topic_regex] = counts.get(m.subscribed_topic_regex, 0) + d
        in_use = {rx for rx, n in counts.items() if n > 0}
        if not in_use and not g.resolved_regexes:
            return []
        out: list[ConsumerRecord] = []
        for rx in sorted(set(g.resolved_regexes) - in_use):
            out.append((ConsumerGroupRegularExpressionKey(g.group_id, rx), None))
        for rx in sorted(in_use):
            have: ResolvedRegex | None = g.resolved_regexes.get(rx)
            if have is not None and not (force and have.version < self.topics.version):
                continue
            topics = resolve(rx, self.topics.topics)
            if have is not None and have.topics == topics:
                continue
            out.append(
                (
                    ConsumerGroupRegularExpressionKey(g.group_id, rx),
                    ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), self.topics.version, now_ms),
                )
            )
        return out

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
        members: Mapping[str, ConsumerGroupMember],
        targets: Mapping[str, Partitions],
        resolved: Mapping[str, frozenset[str]],
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """``updateTargetAssignment`` with the group's preferred assignor (``computePreferredServerAssignor``:
        the one most members name, the default when none does)."""
        name = self.preferred_assignor(members)
        specs = {
            mid: MemberSpec(frozenset(subscribed_topic_ids(m, resolved, self.topics.topic_id)), targets.get(mid, {}))
            for mid, m in members.items()
        }
        num_partitions = {t[0]: t[1] for t in self.topics.topics.values()}
        return ASSIGNORS[name].assign(specs, num_partitions)
