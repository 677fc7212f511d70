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

Regular expressions are not resolved in the heartbeat: ``maybeUpdateRegularExpressions`` arms a
``regex`` deadline due at once (Kafka's executor), at most one per group per
``regex_refresh_interval_ms`` and only for an unresolved regex or topics created since; firing it
writes every resolution and, if one changed, one new group epoch.

Members speaking the classic protocol (KIP-848's migration path, ``group.consumer.migration.policy``):
``convert_from_classic`` turns a live classic group into a consumer group (``fromClassicGroup``);
``classic_join`` runs steps 2-5 for a JoinGroup (subscription and owned partitions from the embedded
consumer protocol, no epoch checks) and answers with the member epoch as the generation;
``classic_sync`` hands out the member's assignment; ``classic_heartbeat`` answers
REBALANCE_IN_PROGRESS when the member must rejoin to move on (its join is the revocation
acknowledgement: an eager client owns nothing when it rejoins); ``classic_leave`` removes members.
Removing the last consumer-protocol member while classic ones stay deletes the group and records a
``Downgrade`` the shell turns into a classic group (``convertToClassicGroup``).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import errors
from ..consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from ..timers import Deadlines
from .assignors import ASSIGNORS, MemberSpec, PartitionAssignorError
from .group import ConsumerGroup, ConsumerGroups
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
    ClassicMemberMetadata,
    ClassicProtocol,
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
    # group.consumer.migration.policy (Kafka 4's default): whether a classic group with members may
    # become a consumer group (upgrade) and back (downgrade) while its members stay in it
    migration_policy: str = "bidirectional"
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgrade must fit in a classic group
    # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (a constant there): at most one resolution of a
    # group's regular expressions per interval
    regex_refresh_interval_ms: int = 10000

    @property
    def upgrade_enabled(self) -> bool:
        """``ConsumerGroupMigrationPolicy.isUpgradeEnabled``."""
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        """``ConsumerGroupMigrationPolicy.isDowngradeEnabled``."""
        return self.migration_policy in ("downgrade", "bidirectional")


MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True)
class ClassicMemberSpec:
    """One member of a classic group being converted (what ``ConsumerGroup.fromClassicGroup`` reads)."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


@dataclass(frozen=True)
class ClassicJoin:
    """A classic member's JoinGroup as the consumer-group core reads it."""

    metadata: ClassicMemberMetadata
    subscription: Subscription
    known_member: bool


@dataclass(frozen=True)
class Downgrade:
    """A consumer group that has just been deleted to become a classic group again
    (``convertToClassicGroup``): the group as it was, and who left."""

    group: ConsumerGroup
    leaving: frozenset[str]
    # a member left (a rebalance follows); not when a classic static member replaced the last
    # consumer-protocol one in its JoinGroup (validateOnlineDowngradeWithReplacedMemberId)
    rebalance: bool = True


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


class UpgradeRefused(Exception):
    """``convertToConsumerGroup`` could not build a consumer group from the classic one (answered
    GROUP_ID_NOT_FOUND with this message)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
            classic_member_metadata=m.classic,
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
        # The topics image version that last brought new topics (``lastMetadataImageWithNewTopics``):
        # regular expressions resolved against an older one are resolved again
        self.last_image_with_new_topics = 0
        # Groups that a call has just converted back to classic; the shell takes them
        # (``take_downgrade``) and builds the classic group in the same write.
        self.downgrades: dict[str, Downgrade] = {}
        # A group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (its group configs,
        # Kafka's GroupConfigManager): group id -> (session, interval), None where the group has none
        self.group_configs: dict[str, tuple[int | None, int | None]] = {}

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
                self.deadlines.set((g.group_id, mid, "session"), now_ms + self._session_timeout(g.group_id, m))

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
            self._apply(records)
            return records
        m = g.members.get(mid) if g is not None else None
        if g is None or m is None:
            return []
        if kind == "rebalance" and (m.member_epoch != key[3] or m.state != MemberState.UNREVOKED_PARTITIONS):
            return []
        # join/sync: a classic member told to rejoin (or answered) did not come back within its
        # rebalance timeout (consumerGroupJoinTimeout / consumerGroupSyncTimeout): fenced
        records = self._fence(g, mid)
        self._apply(records)
        return records

    def _cancel_timers(self, gid: str, mid: str) -> None:
        for kind in ("session", "join", "sync"):
            self.deadlines.cancel((gid, mid, kind))
        # a rebalance deadline carries the epoch it was armed at; a stale one is ignored when it fires

    # -- removing members ------------------------------------------------------------------------

    def _fence(self, g: ConsumerGroup, *member_ids: str) -> list[ConsumerRecord]:
        """``consumerGroupFenceMember(s)``: remove the members and bump the group epoch so the others get
        their partitions; or convert the group to classic when only classic members would stay
        (``validateOnlineDowngradeWithFencedMembers``)."""
        gid = g.group_id
        for mid in member_ids:
            self._cancel_timers(gid, mid)
        if self._can_downgrade(g, set(member_ids)):
            return self._downgrade(g, set(member_ids))
        records: list[ConsumerRecord] = []
        members = _Members(g.members)
        for mid in member_ids:
            records += _tombstones(gid, mid)
            members.remove(mid)
        records += self._regex_records(g, members)
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
            return HeartbeatResult(self._error_response(e))

    def check_request(self, request: Mapping[str, Any], version: int) -> dict[str, Any] | None:
        """The error answer to a heartbeat whose request is invalid, before any group is looked at."""
        try:
            self._validate(request, version)
        except _Error as e:
            return self._error_response(e)
        return None

    @staticmethod
    def _error_response(e: _Error) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": e.code,
            "error_message": e.message,
            "member_id": None,
            "member_epoch": 0,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

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
        return HeartbeatResult(self._response(gid, mid, epoch, None), records)

    def _response(self, group_id: str, member_id: str, epoch: int, assignment: Partitions | None) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": errors.NONE,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": epoch,
            "heartbeat_interval_ms": self._heartbeat_interval(group_id),
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

    def _heartbeat(
        self,
        now_ms: int,
        req: Mapping[str, Any],
        client_id: str,
        client_host: str,
        classic: ClassicJoin | None = None,
    ) -> HeartbeatResult:
        """``consumerGroupHeartbeat``, and with ``classic`` the same steps for a classic member's
        JoinGroup (``classicGroupJoinToConsumerGroup``): no epoch checks, the subscription and the
        owned partitions from the embedded consumer protocol, the session from the JoinGroup."""
        gid, epoch, instance_id = req["group_id"], req["member_epoch"], req.get("instance_id")
        mid = req.get("member_id") or self._uuid()
        owned = _owned(req) if classic is None else self._owned_from_subscription(classic.subscription)
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
        had_static = instance_id is not None and instance_id in g.static_members
        if instance_id is None:
            member = g.members.get(mid)
            if member is None:
                if epoch != JOIN_GROUP_MEMBER_EPOCH and classic is None:
                    raise _Error(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
                member, new_member = ConsumerGroupMember(mid, client_id=client_id, client_host=client_host), True
            elif epoch != JOIN_GROUP_MEMBER_EPOCH and classic is None:
                self._check_epoch(member, epoch, owned)
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
                if classic is None:
                    self._check_epoch(member, epoch, owned)

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
        bump = g.group_epoch == 0  # a new group moves away from epoch 0 at once
        if new_member or (updated is not member and updated != member):
            records.append(member_metadata_record(gid, updated))
            # hasMemberSubscriptionChanged: only a change of names bumps (a new member subscribed to
            # nothing joins at the current target epoch); a regex change is maybeUpdateRegularExpressions'
            bump = bump or updated.subscribed_topic_names != member.subscribed_topic_names
        members.set(updated)
        records += self._regex_records(g, members)
        bump = self._maybe_update_regexes(now_ms, g, member, updated, members) or bump
        group_epoch = g.group_epoch
        if bump or g.metadata_refresh_needed:
            meta = self._metadata_records(g, members, self._resolved_after(g, records))
            records += meta
            bump = bump or bool(meta)
        if bump:
            group_epoch += 1
            records.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(group_epoch)))
        self.deadlines.set((gid, mid, "session"), now_ms + self._session_timeout(gid, updated))

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

        if classic is not None:
            # answered once the records are durable; then the member has its rebalance timeout to sync
            self.deadlines.cancel((gid, mid, "join"))
            self.deadlines.set((gid, mid, "sync"), now_ms + max(reconciled.rebalance_timeout_ms, 0))
            if had_static and g_now is not None and self._can_downgrade(g_now, set()):
                # validateOnlineDowngradeWithReplacedMemberId: the static member it replaced was the
                # last one speaking the consumer protocol; the group is classic again, no rebalance
                down = self._downgrade(g_now, set(), rebalance=False)
                self._apply(down)
                records += down
            return HeartbeatResult(
                {
                    "error_code": errors.NONE,
                    "member_id": mid,
                    "generation_id": reconciled.member_epoch,
                    "protocol_name": classic.metadata.supported_protocols[0].name,
                },
                records,
            )

        # 6. the answer
        full = epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.get("rebalance_timeout_ms", -1) != -1
            and req.get("subscribed_topic_names") is not None
            and req.get("topic_partitions") is not None
        )
        send = full or reconciled.assigned != member.assigned
        return HeartbeatResult(
            self._response(gid, mid, reconciled.member_epoch, reconciled.assigned if send else None), records
        )

    # -- classic members in a consumer group (KIP-848's migration path) ---------------------------

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

    def _session_timeout(self, group_id: str, m: ConsumerGroupMember) -> int:
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

    def _owned_from_subscription(self, sub: Subscription) -> list[tuple[uuid.UUID, list[int]]]:
        """``Utils.toTopicPartitions``: the owned partitions a classic member reports, by topic id (an
        unknown topic is dropped). An eager client reports none: it revoked everything to rejoin."""
        out = []
        for tp in sub.owned_partitions:
            tid = self.topics.topic_id(tp.topic)
            if tid is not None:
                out.append((tid, list(tp.partitions)))
        return out

    def _topic_names(self) -> dict[uuid.UUID, str]:
        return {t[0]: name for name, t in self.topics.topics.items()}

    def assignment_bytes(self, parts: Partitions, version: int) -> bytes:
        """``toConsumerProtocolAssignment`` + ``ConsumerProtocol.serializeAssignment``."""
        names = self._topic_names()
        tps = tuple(
            TopicPartitions(names[t], ps)
            for t, ps in sorted(to_tuple(parts), key=lambda x: names.get(x[0], ""))
            if t in names
        )
        return encode_assignment(Assignment(tps, None, max(0, min(version, 3))))

    def supports_classic_protocols(self, g: ConsumerGroup, protocol_type: str, names: Iterable[str]) -> bool:
        """``ConsumerGroup.supportsClassicProtocols``: the consumer protocol type, and a protocol every
        classic member of the group also supports."""
        names = set(names)
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        classic = [m.classic for m in g.members.values() if m.classic is not None]
        return not classic or any(all(any(p.name == n for p in c.supported_protocols) for c in classic) for n in names)

    def convert_from_classic(
        self, now_ms: int, group_id: str, generation: int, protocol_name: str | None, members: list[ClassicMemberSpec]
    ) -> list[ConsumerRecord]:
        """``convertToConsumerGroup``: ``ConsumerGroup.fromClassicGroup`` then
        ``createConsumerGroupRecords`` (members' subscriptions, the group epoch, the targets = the classic
        assignment, the target epoch, the current assignments), applied; every member's session
        deadline from its own session timeout. Each member is Stable at the classic generation."""
        converted: list[ConsumerGroupMember] = []
        seen: set[tuple[uuid.UUID, int]] = set()
        for spec in members:
            metadata = next((md for name, md in spec.protocols if name == protocol_name), None)
            if metadata is None and spec.protocols:
                metadata = spec.protocols[0][1]
            try:
                sub = decode_subscription(metadata or b"")
                decoded = decode_assignment(spec.assignment) if spec.assignment else None
            except ConsumerProtocolError:
                raise UpgradeRefused(
                    f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
                    "consumer protocol is malformed.",
                ) from None
            if decoded is not None and decoded.user_data:
                # Kafka (trunk, ConsumerProtocolMigrationTest.testOnlineMigrationWithNonEmptyUserDataInAssignment):
                # a client-side assignor's user data (sticky state, ...) has no place in a consumer group
                raise UpgradeRefused(
                    f"Cannot upgrade classic group {group_id} to consumer group because an unsupported custom "
                    "assignor is in use. Please refer to the documentation or switch to a default assignor "
                    "before re-attempting the upgrade.",
                )
            assigned = decoded.assigned_partitions if decoded is not None else ()
            parts: dict[uuid.UUID, set[int]] = {}
            for tp in assigned:
                tid = self.topics.topic_id(tp.topic)
                if tid is None:
                    continue
                for p in tp.partitions:
                    if (tid, p) in seen:
                        # two members of one generation given one partition: no valid consumer group
                        raise UpgradeRefused(
                            f"Cannot upgrade the classic group {group_id} to consumer group because partition "
                            f"{tp.topic}-{p} is assigned twice.",
                        )
                    seen.add((tid, p))
                    parts.setdefault(tid, set()).add(p)
            converted.append(
                ConsumerGroupMember(
                    spec.member_id,
                    instance_id=spec.instance_id,
                    rack_id=sub.rack_id,
                    client_id=spec.client_id,
                    client_host=spec.client_host,
                    subscribed_topic_names=tuple(sorted(set(sub.topics))),
                    rebalance_timeout_ms=spec.rebalance_timeout_ms,
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    assigned={t: frozenset(ps) for t, ps in parts.items()},
                    classic=ClassicMemberMetadata(
                        spec.session_timeout_ms, tuple(ClassicProtocol(n, md) for n, md in spec.protocols)
                    ),
                )
            )
        records: list[ConsumerRecord] = [member_metadata_record(group_id, m) for m in converted]
        records.append((ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(generation)))
        records += [target_record(group_id, m.member_id, m.assigned) for m in converted]
        records.append(
            (ConsumerGroupTargetAssignmentMetadataKey(group_id), ConsumerGroupTargetAssignmentMetadataValue(generation))
        )
        records += [current_assignment_record(group_id, m) for m in converted]
        self._apply(records)
        for m in converted:
            self.deadlines.set((group_id, m.member_id, "session"), now_ms + self._session_timeout(group_id, m))
        return records

    def _can_downgrade(self, g: ConsumerGroup, leaving: set[str]) -> bool:
        """``validateOnlineDowngradeWithFencedMembers``: only classic members would stay, there are some,
        the policy allows it and they fit in a classic group."""
        staying = [m for mid, m in g.members.items() if mid not in leaving]
        return (
            bool(staying)
            and all(m.uses_classic_protocol for m in staying)
            and self.config.downgrade_enabled
            and len(staying) <= self.config.classic_max_size
        )

    def _downgrade(self, g: ConsumerGroup, leaving: set[str], *, rebalance: bool = True) -> list[ConsumerRecord]:
        """``convertToClassicGroup``: the consumer group's tombstones; the shell builds the classic group
        (``ClassicGroup.fromConsumerGroup``) from what ``take_downgrade`` hands it."""
        for mid in g.members:
            self._cancel_timers(g.group_id, mid)
        self.downgrades[g.group_id] = Downgrade(g.copy(), frozenset(leaving), rebalance)
        return self.groups.tombstones(g.group_id)

    def take_downgrade(self, group_id: str) -> Downgrade | None:
        return self.downgrades.pop(group_id, None)

    def classic_join(
        self, now_ms: int, req: Mapping[str, Any], version: int, *, client_id: str = "", client_host: str = ""
    ) -> HeartbeatResult:
        """``classicGroupJoinToConsumerGroup``: a classic member's JoinGroup answered by a consumer group
        with members. The answer (``response``: error_code, member_id, generation_id = the member's
        epoch, protocol_name) waits for the records; the member is no leader and assigns nothing."""
        gid = req["group_id"]
        g = self.groups.get(gid)
        member_id = req.get("member_id") or ""
        known = bool(member_id)
        mid = member_id or self._uuid()
        instance_id = req.get("group_instance_id") if version >= 5 else None
        protocols = tuple((p.get("name") or "", bytes(p.get("metadata") or b"")) for p in req.get("protocols") or [])
        try:
            if g is None:
                raise _Error(errors.UNKNOWN_MEMBER_ID)
            if len(g.members) >= self.config.max_size and mid not in g.members:
                raise _Error(
                    errors.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
                )
            if not self.supports_classic_protocols(g, req.get("protocol_type") or "", (n for n, _ in protocols)):
                raise _Error(errors.INCONSISTENT_GROUP_PROTOCOL, f"Member {mid}'s protocols are not supported.")
            if not known and instance_id is None and version >= 4:
                # JoinGroupRequest.requiresKnownMemberId: hand out the id, nothing is written
                return HeartbeatResult({"error_code": errors.MEMBER_ID_REQUIRED, "member_id": mid})
            try:
                sub = decode_subscription(protocols[0][1])
            except ConsumerProtocolError:
                raise _Error(
                    errors.INCONSISTENT_GROUP_PROTOCOL, f"Member {mid}'s protocols are not supported."
                ) from None
            session = int(req.get("session_timeout_ms", 0))
            rebalance = int(req.get("rebalance_timeout_ms", -1)) if version >= 1 else -1
            hb_req = {
                "group_id": gid,
                "member_id": mid,
                "member_epoch": JOIN_GROUP_MEMBER_EPOCH,
                "instance_id": instance_id,
                "rebalance_timeout_ms": rebalance if rebalance >= 0 else session,
            }
            join = ClassicJoin(
                ClassicMemberMetadata(session, tuple(ClassicProtocol(n, md) for n, md in protocols)), sub, known
            )
            return self._heartbeat(now_ms, hb_req, client_id, client_host, join)
        except _Error as e:
            return HeartbeatResult({"error_code": e.code, "member_id": member_id, "error_message": e.message})

    def _classic_member(self, g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise _Error(errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g.group_id}.")
        else:
            static_mid = g.static_members.get(instance_id)
            m = g.members.get(static_mid) if static_mid is not None else None
            if m is None:
                raise _Error(
                    errors.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group {g.group_id}.",
                )
            if m.member_id != member_id:
                raise _Error(
                    errors.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member {m.member_id}.",
                )
        if not m.uses_classic_protocol:
            raise _Error(errors.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")
        return m

    def _waiting_on_unreleased(self, g: ConsumerGroup, m: ConsumerGroupMember) -> bool:
        """``ConsumerGroup.waitingOnUnreleasedPartition``: a partition of its target still held by another."""
        for t, ps in g.target.get(m.member_id, {}).items():
            have = m.assigned.get(t, frozenset())
            if any(p not in have and g.current_partition_epoch(t, p) != -1 for p in ps):
                return True
        return False

    def _throw_if_rebalance_in_progress(self, now_ms: int, g: ConsumerGroup, m: ConsumerGroupMember) -> None:
        """``throwIfRebalanceInProgress``: the group moved on, the member must rejoin (within its
        rebalance timeout, ``scheduleConsumerGroupJoinTimeoutIfAbsent``)."""
        if g.group_epoch > m.member_epoch and m.state != MemberState.UNREVOKED_PARTITIONS:
            self._arm_join(now_ms, g.group_id, m)
            raise _Error(
                errors.REBALANCE_IN_PROGRESS,
                f"A new rebalance is triggered in group {g.group_id} and member {m.member_id} should rejoin to catch up.",
            )

    def _arm_join(self, now_ms: int, gid: str, m: ConsumerGroupMember) -> None:
        key = (gid, m.member_id, "join")
        if key not in self.deadlines:
            self.deadlines.set(key, now_ms + max(m.rebalance_timeout_ms, 0))

    def classic_sync(self, now_ms: int, req: Mapping[str, Any], version: int) -> dict[str, Any]:
        """``classicGroupSyncToConsumerGroup``: the member's current assignment, by topic name, in the
        consumer protocol's format at the version of its subscription."""
        g = self.groups.get(req["group_id"])
        try:
            if g is None or not g.members:
                raise _Error(errors.UNKNOWN_MEMBER_ID)
            m = self._classic_member(
                g, req.get("member_id") or "", req.get("group_instance_id") if version >= 3 else None
            )
            if int(req.get("generation_id", -1)) != m.member_epoch:
                raise _Error(errors.ILLEGAL_GENERATION)
            assert m.classic is not None
            name = m.classic.supported_protocols[0].name
            ptype, pname = (req.get("protocol_type"), req.get("protocol_name")) if version >= 5 else (None, None)
            if (ptype is not None and ptype != CONSUMER_PROTOCOL_TYPE) or (pname is not None and pname != name):
                raise _Error(errors.INCONSISTENT_GROUP_PROTOCOL)
            self._throw_if_rebalance_in_progress(now_ms, g, m)
        except _Error as e:
            return {"error_code": e.code, "assignment": b""}
        self.deadlines.cancel((g.group_id, m.member_id, "sync"))
        self.deadlines.set((g.group_id, m.member_id, "session"), now_ms + self._session_timeout(g.group_id, m))
        try:
            sub_version = decode_subscription(m.classic.supported_protocols[0].metadata).version
        except ConsumerProtocolError:
            sub_version = 0
        return {
            "error_code": errors.NONE,
            "assignment": self.assignment_bytes(m.assigned, sub_version),
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocol_name": name,
        }

    def classic_heartbeat(
        self, now_ms: int, group_id: str, member_id: str, generation: int, instance_id: str | None
    ) -> int:
        """``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS makes the member rejoin when the
        group epoch moved past it, it must revoke, or what it waits for has been released."""
        g = self.groups.get(group_id)
        try:
            if g is None:
                raise _Error(errors.UNKNOWN_MEMBER_ID)
            m = self._classic_member(g, member_id, instance_id)
        except _Error as e:
            return e.code
        if generation != m.member_epoch:
            return errors.ILLEGAL_GENERATION
        self.deadlines.set((group_id, m.member_id, "session"), now_ms + self._session_timeout(group_id, m))
        if (
            m.member_epoch < g.group_epoch
            or m.state == MemberState.UNREVOKED_PARTITIONS
            or (m.state == MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(g, m))
        ):
            self._arm_join(now_ms, group_id, m)
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def classic_leave(
        self, now_ms: int, group_id: str, identities: list[tuple[str, str | None]]
    ) -> tuple[list[int], list[ConsumerRecord]]:
        """``classicGroupLeaveToConsumerGroup``: an error code per (member id, instance id), and the
        records that remove the valid ones (a downgrade when only classic members would stay)."""
        g = self.groups.get(group_id)
        codes: list[int] = []
        leaving: list[str] = []
        for member_id, instance_id in identities:
            try:
                if g is None:
                    raise _Error(errors.UNKNOWN_MEMBER_ID)
                if instance_id is not None and not member_id:
                    # administrative removal by instance id alone
                    static_mid = g.static_members.get(instance_id)
                    if static_mid is None:
                        raise _Error(errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    m = g.members[static_mid]
                else:
                    m = self._classic_member(g, member_id, instance_id)
                codes.append(errors.NONE)
                if m.member_id not in leaving:
                    leaving.append(m.member_id)
            except _Error as e:
                codes.append(e.code)
        if g is None or not leaving:
            return codes, []
        records = self._fence(g, *leaving)
        self._apply(records)
        return codes, records

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
