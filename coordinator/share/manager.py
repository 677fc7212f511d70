"""The KIP-932 share-group coordinator, sans-IO (Kafka 4.2's ``GroupMetadataManager.shareGroupHeartbeat``
and its helpers).

``heartbeat(now_ms, request, client_id, client_host)`` takes a ShareGroupHeartbeat request (the
message's fields in snake_case) and returns the answer, the records carrying every change (already
applied with ``replay``, as Kafka's runtime applies a write's records at once) and, when subscribed
share partitions are not yet initialized in the share-state persister, which ones to initialize
(``maybeCreateInitializeShareGroupStateRequest``). The caller initializes them once the records are
durable and reports back with ``initialized`` (or ``uninitialized`` on failure), whose records mark
them initialized: only initialized share partitions are assigned, so a member joining a new group
gets its partitions on its next heartbeat, as with Kafka.

A heartbeat, in Kafka's order:
1. ``validate`` (the service's ``throwIfShareGroupHeartbeatRequestIsInvalid``); epoch -1 leaves
   (``shareGroupLeave``).
2. find or create the group and the member (``getOrMaybeCreateShareGroup``, ``throwIfShareGroupIsFull``,
   ``getOrMaybeSubscribeShareGroupMember``), fencing a wrong epoch (``throwIfShareGroupMemberEpochIsInvalid``).
3. a changed subscription, new topic metadata (the group's metadata hash) or initialized share
   partitions not yet in the target assignment (``initializedAssignmentPending``) bump the group epoch.
4. the group epoch ahead of the target epoch: the ``simple`` assignor (``coordinator/consumer/simple.py``,
   Kafka's ``SimpleAssignor``) over the initialized partitions (``updateTargetAssignment``).
5. the member takes its target at once (``ShareGroupAssignmentBuilder``: no revocation in share groups).
6. the session deadline is re-armed and the answer carries the assignment when the request was a
   full one, a join, or the assignment changed.

A session deadline that fires fences its member (``shareGroupFenceMember``): its records gone and the
group epoch bumped, so the others share its partitions at their next heartbeat.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record

from .. import errors
from ..consumer.assignor_spec import (
    GroupSpec,
    PartitionAssignorError,
    SubscriptionType,
    java_member_spec,
    target_assignment_member_order,
)
from ..consumer.config import TopicsImage
from ..consumer.simple import NAME as SIMPLE_ASSIGNOR
from ..consumer.simple import simple_assign
from ..timers import Deadlines
from .config import ShareGroupConfig
from .group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    InitValue,
    Partitions,
    ShareGroup,
    ShareGroupMember,
    ShareGroups,
    to_tuple,
)
from .records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareRecord,
    TopicInfo,
    TopicPartitionsInfo,
)


class RequestError(Exception):
    """A request refused with ``code`` (and ``message``, the answer's error message)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@mutable_record
class ShareHeartbeatResult:
    response: dict[str, Any]
    records: list[ShareRecord] = field(default_factory=list)
    # share partitions to initialize in the persister once the records are durable:
    # topic id -> (name, partitions); the group epoch they are initialized at
    initialize: dict[uuid.UUID, InitValue] = field(default_factory=dict)
    group_epoch: int = 0

    def __init__(
        self,
        response: dict[str, Any],
        records: list[ShareRecord] = DEFAULT_FACTORY,
        initialize: dict[uuid.UUID, InitValue] = DEFAULT_FACTORY,
        group_epoch: int = 0,
    ) -> None:
        self.response = response
        self.records = [] if records is DEFAULT_FACTORY else records
        self.initialize = {} if initialize is DEFAULT_FACTORY else initialize
        self.group_epoch = group_epoch


def error_response(code: int, message: str | None) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def validate(req: Mapping[str, Any]) -> RequestError | None:
    """``KafkaApis.isMemberIdValid`` (a member id of 1 to 36 characters: the client's UUID), then
    ``GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid``."""
    member_id = req.get("member_id") or ""
    if not member_id or len(member_id) > 36:
        return RequestError(errors.INVALID_REQUEST, "Invalid member id in the request.")
    if not req.get("group_id"):
        return RequestError(errors.INVALID_REQUEST, "GroupId can't be empty.")
    if req.get("rack_id") == "":
        return RequestError(errors.INVALID_REQUEST, "RackId can't be empty.")
    epoch = req.get("member_epoch", 0)
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not req.get("subscribed_topic_names"):
            return RequestError(errors.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return RequestError(errors.INVALID_REQUEST, "MemberEpoch is invalid.")
    return None


def metadata_hash(names: Iterable[str], topics: TopicsImage) -> int:
    """The group's metadata hash over its subscribed topics that exist (id, name, partition count):
    what ``ModernGroup.computeMetadataHash`` is for, not its value (Kafka hashes with murmur3 and the
    racks; a Kafka broker loading groupd's records recomputes it and bumps the epoch once)."""
    h = hashlib.blake2b(digest_size=8)
    found = False
    for n in sorted(set(names)):
        t = topics.topics.get(n)
        if t is not None:
            found = True
            h.update(f"{t[0]}\0{n}\0{t[1]}\n".encode())
    if not found:
        return 0
    return int.from_bytes(h.digest(), "big", signed=True)


def _member_tombstones(gid: str, mid: str) -> list[ShareRecord]:
    return [
        (ShareGroupCurrentMemberAssignmentKey(gid, mid), None),
        (ShareGroupTargetAssignmentMemberKey(gid, mid), None),
        (ShareGroupMemberMetadataKey(gid, mid), None),
    ]


class ShareGroupManager:
    def __init__(self, config: ShareGroupConfig | None = None, topics: TopicsImage | None = None) -> None:
        self.config = config or ShareGroupConfig()
        self.topics = topics or TopicsImage()
        self.groups = ShareGroups()
        self.deadlines = Deadlines()
        # A group's own share.session.timeout.ms / share.heartbeat.interval.ms (Kafka's
        # GroupConfigManager): group id -> (session, interval), None where the group has none
        self.group_configs: dict[str, tuple[int | None, int | None]] = {}
        # Told the group id before a call's records are applied (the shell keeps a copy to roll back to)
        self.before_write: Any = None
        self.log: Any = None

    # -- state ---------------------------------------------------------------------------------
    def group(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def replay(self, record: ShareRecord) -> None:
        self.groups.replay(record)

    def apply(self, now_ms: int, records: list[ShareRecord]) -> None:
        if records and self.before_write is not None:
            self.before_write(records[0][0].group_id)
        self.groups.now_ms = now_ms
        for r in records:
            self.groups.replay(r)

    def set_topics(self, image: TopicsImage) -> None:
        self.topics = image
        for g in self.groups.groups.values():
            g.metadata_refresh_deadline = 0

    # -- the group's configs ---------------------------------------------------------------------
    def set_group_config(
        self, group_id: str, session_timeout_ms: int | None = None, heartbeat_interval_ms: int | None = None
    ) -> None:
        if session_timeout_ms is None and heartbeat_interval_ms is None:
            self.group_configs.pop(group_id, None)
        else:
            self.group_configs[group_id] = (session_timeout_ms, heartbeat_interval_ms)

    def session_timeout(self, group_id: str) -> int:
        """``shareGroupSessionTimeoutMs``: the group's config, else the broker's."""
        own = self.group_configs.get(group_id)
        return own[0] if own is not None and own[0] is not None else self.config.session_timeout_ms

    def heartbeat_interval(self, group_id: str) -> int:
        """``shareGroupHeartbeatIntervalMs``: the group's config, else the broker's."""
        own = self.group_configs.get(group_id)
        return own[1] if own is not None and own[1] is not None else self.config.heartbeat_interval_ms

    # -- timers ----------------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        return self.deadlines.next_deadline()

    def end_load(self, now_ms: int, group_ids: Iterable[str] | None = None) -> None:
        """``onLoaded``: every loaded member gets a fresh session deadline."""
        for gid in list(self.groups.groups) if group_ids is None else group_ids:
            g = self.groups.groups.get(gid)
            if g is None:
                continue
            for mid in g.members:
                self.deadlines.set((gid, mid, "share-session"), now_ms + self.session_timeout(gid))

    def due(self, now_ms: int) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        limit = self.deadlines.seq
        while (key := self.deadlines.pop_due(now_ms, limit)) is not None:
            out.append(key)  # type: ignore[arg-type]
        return out

    def fire(self, key: tuple[Any, ...], now_ms: int) -> list[ShareRecord]:
        """An expired session fences its member (``shareGroupFenceMemberOperation``, "the member
        session expired"); records applied, or none when the member is gone already."""
        gid, mid = key[0], key[1]
        g = self.groups.get(gid)
        if g is None or mid not in g.members:
            return []
        if self.log is not None:
            self.log.info("share_member_fenced", group=gid, member=mid, reason="the member session expired")
        records = self.fence(g, mid)
        self.apply(now_ms, records)
        return records

    # -- removing members ------------------------------------------------------------------------
    def fence(self, g: ShareGroup, member_id: str) -> list[ShareRecord]:
        """``shareGroupFenceMember``: the member's records go and the group epoch is bumped (with the
        metadata hash of the subscriptions left), so the others take its partitions."""
        gid = g.group_id
        self.deadlines.cancel((gid, member_id, "share-session"))
        records = _member_tombstones(gid, member_id)
        names = [n for mid, m in g.members.items() if mid != member_id for n in m.subscribed_topic_names]
        records.append(
            (ShareGroupMetadataKey(gid), ShareGroupMetadataValue(g.group_epoch + 1, metadata_hash(names, self.topics)))
        )
        return records

    # -- heartbeat -------------------------------------------------------------------------------
    def heartbeat(
        self, now_ms: int, req: Mapping[str, Any], *, client_id: str = "", client_host: str = ""
    ) -> ShareHeartbeatResult:
        invalid = validate(req)
        if invalid is not None:
            return ShareHeartbeatResult(error_response(invalid.code, invalid.message))
        try:
            if req["member_epoch"] == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(now_ms, req["group_id"], req["member_id"])
            return self._heartbeat(now_ms, req, client_id, client_host)
        except RequestError as e:
            return ShareHeartbeatResult(error_response(e.code, e.message))

    def _leave(self, now_ms: int, gid: str, mid: str) -> ShareHeartbeatResult:
        """``shareGroupLeave``: answered with the member id and epoch -1."""
        g = self.groups.get(gid)
        if g is None:
            raise RequestError(errors.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
        if mid not in g.members:
            raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        if self.log is not None:
            self.log.info("share_member_left", group=gid, member=mid)
        records = self.fence(g, mid)
        self.apply(now_ms, records)
        response = {
            "throttle_time_ms": 0,
            "error_code": errors.NONE,
            "error_message": None,
            "member_id": mid,
            "member_epoch": LEAVE_GROUP_MEMBER_EPOCH,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }
        return ShareHeartbeatResult(response, records)

    def _heartbeat(self, now_ms: int, req: Mapping[str, Any], client_id: str, client_host: str) -> ShareHeartbeatResult:
        gid, mid, epoch = req["group_id"], req["member_id"], req["member_epoch"]
        create = epoch == JOIN_GROUP_MEMBER_EPOCH
        g = self.groups.get(gid)
        if g is None:
            if not create:
                raise RequestError(errors.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
            g = ShareGroup(gid)
        # throwIfShareGroupIsFull
        if len(g.members) >= self.config.max_size and mid not in g.members:
            raise RequestError(
                errors.GROUP_MAX_SIZE_REACHED,
                f"The share group has reached its maximum capacity of {self.config.max_size} members.",
            )
        member = g.members.get(mid)
        new_member = member is None
        if member is None:
            if not create:
                raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
            member = ShareGroupMember(mid)
        self._check_epoch(member, epoch)
        if new_member and self.log is not None:
            self.log.info("share_member_joined", group=gid, member=mid, client_id=client_id)

        records: list[ShareRecord] = []
        names = req.get("subscribed_topic_names")
        rack = req.get("rack_id")
        updated = ShareGroupMember(
            mid,
            member.member_epoch,
            member.previous_member_epoch,
            rack if rack is not None else member.rack_id,
            client_id,
            client_host,
            tuple(names) if names is not None else member.subscribed_topic_names,
            member.assigned,
        )
        # 1. hasMemberSubscriptionChanged (a new member is never equal to its blank self)
        bump = False
        subscription_changed = False
        if new_member or updated != member:
            records.append((ShareGroupMemberMetadataKey(gid, mid), updated.metadata_value()))
            if set(updated.subscribed_topic_names) != set(member.subscribed_topic_names):
                bump = subscription_changed = True
        # the group's subscribed names once this member's change is in (O(its topics))
        if subscription_changed:
            counts = dict(g.subscribed_counts)
            for n in set(member.subscribed_topic_names):
                counts[n] -= 1
            for n in set(updated.subscribed_topic_names):
                counts[n] = counts.get(n, 0) + 1
            subscribed = {n for n, c in counts.items() if c > 0}
        else:
            subscribed = set(g.subscribed_counts)
        bump = bump or self._initialized_assignment_pending(g, subscribed)
        group_epoch = g.group_epoch
        new_hash = g.metadata_hash
        if bump or now_ms >= g.metadata_refresh_deadline:
            new_hash = metadata_hash(subscribed, self.topics)
            if new_hash != g.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                records.append((ShareGroupMetadataKey(gid), ShareGroupMetadataValue(group_epoch, new_hash)))
                if self.log is not None:
                    self.log.info("share_group_epoch_bumped", group=gid, epoch=group_epoch)
            # the metadata is compared again when the topics image changes (set_topics) or on a bump
            g.metadata_refresh_deadline = 2**62

        # 2. updateTargetAssignment
        if group_epoch > g.target_epoch:
            members_after = dict(g.members)
            members_after[mid] = updated
            targets = self._assign(g, members_after, mid)
            for m_id, parts in targets.items():
                if g.target.get(m_id, {}) != parts or m_id not in g.target:
                    records.append(
                        (
                            ShareGroupTargetAssignmentMemberKey(gid, m_id),
                            ShareGroupTargetAssignmentMemberValue(to_tuple(parts)),
                        )
                    )
            records.append(
                (ShareGroupTargetAssignmentMetadataKey(gid), ShareGroupTargetAssignmentMetadataValue(group_epoch))
            )
            target_epoch, my_target = group_epoch, targets.get(mid, {})
        else:
            target_epoch, my_target = g.target_epoch, g.target.get(mid, {})

        # 3. maybeReconcile (ShareGroupAssignmentBuilder)
        reconciled = updated
        if target_epoch != updated.member_epoch or subscription_changed:
            assigned = self._filter(my_target, updated.subscribed_topic_names)
            if target_epoch != updated.member_epoch:
                reconciled = ShareGroupMember(
                    mid,
                    target_epoch,
                    updated.member_epoch,
                    updated.rack_id,
                    updated.client_id,
                    updated.client_host,
                    updated.subscribed_topic_names,
                    assigned,
                )
            else:
                reconciled = ShareGroupMember(**{**vars(updated), "assigned": assigned})
            if reconciled != updated or new_member:
                records.append((ShareGroupCurrentMemberAssignmentKey(gid, mid), reconciled.assignment_value()))

        # share partitions to initialize (maybeCreateInitializeShareGroupStateRequest)
        initialize = self._subscribed_topics_change_map(g, subscribed, now_ms)
        if initialize:
            records.append(self._initializing_record(g, initialize))

        self.apply(now_ms, records)
        self.deadlines.set((gid, mid, "share-session"), now_ms + self.session_timeout(gid))
        response: dict[str, Any] = {
            "throttle_time_ms": 0,
            "error_code": errors.NONE,
            "error_message": None,
            "member_id": mid,
            "member_epoch": reconciled.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval(gid),
            "assignment": None,
        }
        if epoch == JOIN_GROUP_MEMBER_EPOCH or names is not None or reconciled.assigned != member.assigned:
            response["assignment"] = {
                "topic_partitions": [{"topic_id": t, "partitions": list(ps)} for t, ps in to_tuple(reconciled.assigned)]
            }
        return ShareHeartbeatResult(response, records, initialize, group_epoch)

    @staticmethod
    def _check_epoch(member: ShareGroupMember, received: int) -> None:
        """``throwIfShareGroupMemberEpochIsInvalid``."""
        if received == JOIN_GROUP_MEMBER_EPOCH:
            return
        if received > member.member_epoch:
            raise RequestError(
                errors.FENCED_MEMBER_EPOCH,
                f"The share group member has a greater member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if received < member.member_epoch and received != member.previous_member_epoch:
            raise RequestError(
                errors.FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}), and it does not match the previous member epoch "
                f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    def _filter(self, parts: Partitions, names: Iterable[str]) -> Partitions:
        """``ShareGroupAssignmentBuilder.filterAssignedPartitions``: only subscribed topics."""
        ids = {self.topics.topic_id(n) for n in names}
        return {t: ps for t, ps in parts.items() if t in ids and ps}

    def _initialized_assignment_pending(self, g: ShareGroup, subscribed: set[str]) -> bool:
        """``initializedAssignmentPending``: an initialized share partition of a subscribed topic
        that the target assignment does not cover yet."""
        if not g.members or g.state_metadata is None or not g.state_metadata.initialized or not subscribed:
            return False
        assigned = g.assigned_union()
        for tid, v in g.state_metadata.initialized.items():
            # a topic deleted (or deleted and created again under a new id) since it was initialized
            # is not assignable: Kafka drops it from the record (maybeCleanupShareGroupState)
            if v.name in subscribed and self.topics.topic_id(v.name) == tid and assigned.get(tid) != set(v.partitions):
                return True
        return False

    def _subscribed_topics_change_map(
        self, g: ShareGroup, subscribed: set[str], now_ms: int
    ) -> dict[uuid.UUID, InitValue]:
        """``subscribedTopicsChangeMap``: subscribed share partitions neither initialized nor being
        initialized for less than ``group.share.initialize.retry.interval.ms``."""
        if not subscribed:
            return {}
        info = g.state_metadata
        out: dict[uuid.UUID, InitValue] = {}
        for name in sorted(subscribed):
            t = self.topics.topics.get(name)
            if t is None:
                continue
            tid, count = t
            done = info.initialized.get(tid) if info is not None else None
            if done is not None and len(done.partitions) >= count:
                continue  # the steady case: every partition initialized
            have: set[int] = set(done.partitions) if done is not None else set()
            pending = info.initializing.get(tid) if info is not None else None
            if pending is not None and now_ms - pending.timestamp < self.config.initialize_retry_interval_ms:
                have |= pending.partitions
            if not have or len(have) < count:
                missing = frozenset(p for p in range(count) if p not in have)
                if missing:
                    out[tid] = InitValue(name, missing, now_ms)
        return out

    def _initializing_record(self, g: ShareGroup, change: dict[uuid.UUID, InitValue]) -> ShareRecord:
        """``addInitializingTopicsRecords``."""
        info = g.state_metadata
        initializing = dict(info.initializing) if info is not None else {}
        for tid, v in change.items():
            have = initializing.get(tid)
            initializing[tid] = InitValue(
                v.name, v.partitions | (have.partitions if have else frozenset()), v.timestamp
            )
        initialized = info.initialized if info is not None else {}
        deleting = {t: n for t, n in (info.deleting.items() if info is not None else ()) if t not in change}
        return self._state_record(g.group_id, initializing, initialized, deleting)

    @staticmethod
    def _state_record(
        gid: str,
        initializing: Mapping[uuid.UUID, InitValue],
        initialized: Mapping[uuid.UUID, InitValue],
        deleting: Mapping[uuid.UUID, str],
    ) -> ShareRecord:
        def infos(m: Mapping[uuid.UUID, InitValue]) -> tuple[TopicPartitionsInfo, ...]:
            return tuple(
                TopicPartitionsInfo(t, v.name, tuple(sorted(v.partitions)))
                for t, v in sorted(m.items())
                if v.partitions
            )

        return (
            ShareGroupStatePartitionMetadataKey(gid),
            ShareGroupStatePartitionMetadataValue(
                infos(initializing),
                infos(initialized),
                tuple(TopicInfo(t, n) for t, n in sorted(deleting.items())),
            ),
        )

    def initialized(self, now_ms: int, gid: str, parts: Mapping[uuid.UUID, Iterable[int]]) -> list[ShareRecord]:
        """``initializeShareGroupState``: the persister initialized ``parts``: they move from
        initializing to initialized (records applied)."""
        g = self.groups.get(gid)
        if g is None or not parts:
            return []
        info = g.state_metadata
        initialized = dict(info.initialized) if info is not None else {}
        initializing = dict(info.initializing) if info is not None else {}
        for tid, ps in parts.items():
            name = self.topics_name(tid) or (initializing[tid].name if tid in initializing else "<UNKNOWN>")
            have = initialized.get(tid)
            initialized[tid] = InitValue(name, frozenset(ps) | (have.partitions if have else frozenset()), now_ms)
            if tid in initializing:
                left = initializing[tid].partitions - frozenset(ps)
                if left:
                    initializing[tid] = InitValue(initializing[tid].name, left, initializing[tid].timestamp)
                else:
                    del initializing[tid]
        records = [self._state_record(gid, initializing, initialized, info.deleting if info is not None else {})]
        self.apply(now_ms, records)
        return records

    def uninitialized(self, now_ms: int, gid: str, parts: Mapping[uuid.UUID, Iterable[int]]) -> list[ShareRecord]:
        """``uninitializeShareGroupState``: the persister failed; the partitions leave initializing."""
        g = self.groups.get(gid)
        info = g.state_metadata if g is not None else None
        if info is None or not info.initializing or not parts:
            return []
        initializing = {}
        for tid, v in info.initializing.items():
            left = v.partitions - frozenset(parts.get(tid, ()))
            if left:
                initializing[tid] = InitValue(v.name, left, v.timestamp)
        records = [self._state_record(gid, initializing, info.initialized, info.deleting)]
        self.apply(now_ms, records)
        return records

    def topics_name(self, topic_id: uuid.UUID) -> str | None:
        for name, (tid, _n) in self.topics.topics.items():
            if tid == topic_id:
                return name
        return None

    def _assign(self, g: ShareGroup, members: Mapping[str, ShareGroupMember], updated_id: str) -> dict[str, Partitions]:
        """``updateTargetAssignment`` with ``SimpleAssignor`` through ``ShareTargetAssignmentBuilder``:
        the members in its ``HashMap``'s order, each with its topic ids and current target, only the
        initialized share partitions assignable."""
        order = target_assignment_member_order(g.members, updated_id)
        specs = {
            m_id: java_member_spec(members[m_id].subscribed_topic_names, self.topics.topic_id, g.target.get(m_id, {}))
            for m_id in order
            if m_id in members
        }
        counts: dict[str, int] = {}
        for m in members.values():
            for n in set(m.subscribed_topic_names):
                counts[n] = counts.get(n, 0) + 1
        # ModernGroup.subscriptionType: HOMOGENEOUS when every subscribed name has every member
        homogeneous = all(c == len(members) for c in counts.values())
        subscription = SubscriptionType.HOMOGENEOUS if homogeneous else SubscriptionType.HETEROGENEOUS
        num_partitions = {t[0]: t[1] for t in self.topics.topics.values()}
        try:
            out = simple_assign(GroupSpec(specs, subscription, g.initialized_partitions()), num_partitions)
        except PartitionAssignorError as e:
            raise RequestError(
                errors.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {g.group_epoch + 1}: {e}",
            ) from None
        return {m_id: dict(parts) for m_id, parts in out.items()}

    @property
    def assignor_name(self) -> str:
        return SIMPLE_ASSIGNOR

    # -- the admin APIs' changes of the share partitions' states ----------------------------------
    def initializing(self, now_ms: int, gid: str, parts: Mapping[uuid.UUID, InitValue]) -> list[ShareRecord]:
        """``alterShareGroupOffsets``' ``addInitializingTopicsRecords`` (records applied): the altered
        share partitions are being initialized; a group that does not exist yet is created by it."""
        if not parts:
            return []
        g = self.groups.get(gid) or ShareGroup(gid)
        records = [self._initializing_record(g, dict(parts))]
        self.apply(now_ms, records)
        return records

    def start_deleting(
        self, now_ms: int, gid: str, names: Iterable[str], errors_out: list[dict[str, Any]]
    ) -> tuple[dict[uuid.UUID, tuple[str, list[int]]], list[ShareRecord]]:
        """``sharePartitionsEligibleForOffsetDeletion``: each named topic's initialized share
        partitions move to deleting (records applied); what to delete from the share-partition
        state; a topic with nothing to delete is answered in ``errors_out``."""
        g = self.groups.get(gid)
        info = g.state_metadata if g is not None else None
        if g is None or info is None:
            return {}, []
        initialized = dict(info.initialized)
        deleting = dict(info.deleting)
        out: dict[uuid.UUID, tuple[str, list[int]]] = {}
        for name in names:
            t = self.topics.topics.get(name)
            if t is None:
                errors_out.append(
                    {
                        "topic_name": name,
                        "topic_id": uuid.UUID(int=0),
                        "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                        "error_message": "This server does not host this topic-partition.",
                    }
                )
                continue
            tid, count = t
            if tid in initialized:
                out[tid] = (name, sorted(initialized.pop(tid).partitions))
                deleting[tid] = name
            elif tid in deleting:
                out[tid] = (name, list(range(count)))
            else:
                errors_out.append(
                    {
                        "topic_name": name,
                        "topic_id": uuid.UUID(int=0),
                        "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                        "error_message": "There is no offset information to delete.",
                    }
                )
        records = [self._state_record(gid, info.initializing, initialized, deleting)]
        self.apply(now_ms, records)
        return out, records

    def finish_deleting(self, now_ms: int, gid: str, done: Mapping[uuid.UUID, str]) -> list[ShareRecord]:
        """``completeDeleteShareGroupOffsets``: the deleted topics leave deleting (records applied)."""
        g = self.groups.get(gid)
        info = g.state_metadata if g is not None else None
        if info is None:
            return []
        deleting = {t: n for t, n in info.deleting.items() if t not in done}
        records = [self._state_record(gid, info.initializing, info.initialized, deleting)]
        self.apply(now_ms, records)
        return records
