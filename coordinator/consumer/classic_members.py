"""Members speaking the classic protocol in a consumer group (KIP-848's migration path): their
JoinGroup, SyncGroup, Heartbeat and LeaveGroup answered by the consumer group (Kafka's
``GroupMetadataManager.classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup``, ``classicGroupLeaveToConsumerGroup``).

A JoinGroup runs the heartbeat's steps 2-5 (``ConsumerGroupManager.update_member`` with a
``ClassicJoin``: subscription and owned partitions from the embedded consumer protocol, no epoch
checks) and answers with the member epoch as the generation; a SyncGroup hands out the member's
assignment; a Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin to move on (its
join is the revocation acknowledgement: an eager client owns nothing when it rejoins); a LeaveGroup
removes members. Removing the last consumer-protocol member while classic ones stay is a downgrade
(``migration.py``).

``ClassicMembers`` is a collaborator of ``ConsumerGroupManager``: it is handed the manager (what
``Host`` names) and keeps no state of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from groupd.protocol.frozen import frozen_record

from .. import errors
from ..consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartitions,
    decode_subscription,
    encode_assignment,
)
from ..timers import Deadlines
from .config import ConsumerGroupConfig, TopicsImage
from .group import ConsumerGroup, ConsumerGroups
from .member import JOIN_GROUP_MEMBER_EPOCH, ConsumerGroupMember, MemberState, Partitions, to_tuple
from .migration import Migration
from .records import ClassicMemberMetadata, ClassicProtocol, ConsumerRecord
from .validation import HeartbeatResult, RequestError

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

CONSUMER_PROTOCOL_TYPE = "consumer"


@frozen_record
class ClassicJoin:
    """A classic member's JoinGroup as the consumer-group core reads it."""

    metadata: ClassicMemberMetadata
    subscription: Subscription
    known_member: bool
    # the partitions it reports owning, by topic id (``Utils.toTopicPartitions``)
    owned: list[tuple[uuid.UUID, list[int]]]

    def __init__(
        self,
        metadata: ClassicMemberMetadata,
        subscription: Subscription,
        known_member: bool,
        owned: list[tuple[uuid.UUID, list[int]]],
    ) -> None:
        _set(self, "metadata", metadata)
        _set(self, "subscription", subscription)
        _set(self, "known_member", known_member)
        _set(self, "owned", owned)


class Host(Protocol):
    """What ``ClassicMembers`` reads and calls on its ``ConsumerGroupManager``."""

    config: ConsumerGroupConfig
    topics: TopicsImage
    groups: ConsumerGroups
    deadlines: Deadlines
    migration: Migration

    def new_member_id(self) -> str: ...

    def update_member(
        self, now_ms: int, req: Mapping[str, Any], client_id: str, client_host: str, classic: ClassicJoin | None = None
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember, list[ConsumerRecord]]: ...

    def session_timeout(self, group_id: str, m: ConsumerGroupMember) -> int: ...

    def fence(
        self, g: ConsumerGroup, *member_ids: str, reason: str = ..., now_ms: int | None = None
    ) -> list[ConsumerRecord]: ...

    def apply(self, records: list[ConsumerRecord]) -> None: ...


class ClassicMembers:
    def __init__(self, host: Host) -> None:
        self.host = host

    # -- what the classic side reads -------------------------------------------------------------

    def owned_from_subscription(self, sub: Subscription) -> list[tuple[uuid.UUID, list[int]]]:
        """``Utils.toTopicPartitions``: the owned partitions a classic member reports, by topic id (an
        unknown topic is dropped). An eager client reports none: it revoked everything to rejoin."""
        out = []
        for tp in sub.owned_partitions:
            tid = self.host.topics.topic_id(tp.topic)
            if tid is not None:
                out.append((tid, list(tp.partitions)))
        return out

    def assignment_bytes(self, parts: Partitions, version: int) -> bytes:
        """``toConsumerProtocolAssignment`` + ``ConsumerProtocol.serializeAssignment``."""
        names = {t[0]: name for name, t in self.host.topics.topics.items()}
        tps = tuple(
            TopicPartitions(names[t], ps)
            for t, ps in sorted(to_tuple(parts), key=lambda x: names.get(x[0], ""))
            if t in names
        )
        return encode_assignment(Assignment(tps, None, max(0, min(version, 3))))

    @staticmethod
    def supports_protocols(g: ConsumerGroup, protocol_type: str, names: Iterable[str]) -> bool:
        """``ConsumerGroup.supportsClassicProtocols``: the consumer protocol type, and a protocol every
        classic member of the group also supports."""
        names = set(names)
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        classic = [m.classic for m in g.members.values() if m.classic is not None]
        return not classic or any(all(any(p.name == n for p in c.supported_protocols) for c in classic) for n in names)

    # -- the four classic APIs -------------------------------------------------------------------

    def join(
        self, now_ms: int, req: Mapping[str, Any], version: int, *, client_id: str = "", client_host: str = ""
    ) -> HeartbeatResult:
        """``classicGroupJoinToConsumerGroup``: a classic member's JoinGroup answered by a consumer group
        with members. The answer (``response``: error_code, member_id, generation_id = the member's
        epoch, protocol_name) waits for the records; the member is no leader and assigns nothing."""
        host = self.host
        gid = req["group_id"]
        g = host.groups.get(gid)
        member_id = req.get("member_id") or ""
        known = bool(member_id)
        mid = member_id or host.new_member_id()
        instance_id = req.get("group_instance_id") if version >= 5 else None
        protocols = tuple((p.get("name") or "", bytes(p.get("metadata") or b"")) for p in req.get("protocols") or [])
        try:
            if g is None:
                raise RequestError(errors.UNKNOWN_MEMBER_ID)
            if len(g.members) >= host.config.max_size and mid not in g.members:
                raise RequestError(
                    errors.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of {host.config.max_size} members.",
                )
            if not self.supports_protocols(g, req.get("protocol_type") or "", (n for n, _ in protocols)):
                raise RequestError(errors.INCONSISTENT_GROUP_PROTOCOL, f"Member {mid}'s protocols are not supported.")
            if not known and instance_id is None and version >= 4:
                # JoinGroupRequest.requiresKnownMemberId: hand out the id, nothing is written
                return HeartbeatResult({"error_code": errors.MEMBER_ID_REQUIRED, "member_id": mid})
            try:
                sub = decode_subscription(protocols[0][1])
            except ConsumerProtocolError:
                raise RequestError(
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
                ClassicMemberMetadata(session, tuple(ClassicProtocol(n, md) for n, md in protocols)),
                sub,
                known,
                self.owned_from_subscription(sub),
            )
            had_static = instance_id is not None and instance_id in g.static_members
            _, reconciled, records = host.update_member(now_ms, hb_req, client_id, client_host, join)
        except RequestError as e:
            return HeartbeatResult({"error_code": e.code, "member_id": member_id, "error_message": e.message})
        # answered once the records are durable; then the member has its rebalance timeout to sync
        host.deadlines.cancel((gid, mid, "join"))
        host.deadlines.set((gid, mid, "sync"), now_ms + max(reconciled.rebalance_timeout_ms, 0))
        g_now = host.groups.get(gid)
        if had_static and g_now is not None and host.migration.can_downgrade(g_now, ()):
            # validateOnlineDowngradeWithReplacedMemberId: the static member it replaced was the
            # last one speaking the consumer protocol; the group is classic again, no rebalance
            down = host.migration.downgrade(g_now, (), rebalance=False)
            host.apply(down)
            records += down
        return HeartbeatResult(
            {
                "error_code": errors.NONE,
                "member_id": mid,
                "generation_id": reconciled.member_epoch,
                "protocol_name": join.metadata.supported_protocols[0].name,
            },
            records,
        )

    def sync(self, now_ms: int, req: Mapping[str, Any], version: int) -> dict[str, Any]:
        """``classicGroupSyncToConsumerGroup``: the member's current assignment, by topic name, in the
        consumer protocol's format at the version of its subscription."""
        host = self.host
        g = host.groups.get(req["group_id"])
        try:
            if g is None or not g.members:
                raise RequestError(errors.UNKNOWN_MEMBER_ID)
            m = self._member(g, req.get("member_id") or "", req.get("group_instance_id") if version >= 3 else None)
            if int(req.get("generation_id", -1)) != m.member_epoch:
                raise RequestError(errors.ILLEGAL_GENERATION)
            assert m.classic is not None
            name = m.classic.supported_protocols[0].name
            ptype, pname = (req.get("protocol_type"), req.get("protocol_name")) if version >= 5 else (None, None)
            if (ptype is not None and ptype != CONSUMER_PROTOCOL_TYPE) or (pname is not None and pname != name):
                raise RequestError(errors.INCONSISTENT_GROUP_PROTOCOL)
            self._throw_if_rebalance_in_progress(now_ms, g, m)
        except RequestError as e:
            return {"error_code": e.code, "assignment": b""}
        host.deadlines.cancel((g.group_id, m.member_id, "sync"))
        host.deadlines.set((g.group_id, m.member_id, "session"), now_ms + host.session_timeout(g.group_id, m))
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

    def heartbeat(self, now_ms: int, group_id: str, member_id: str, generation: int, instance_id: str | None) -> int:
        """``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS makes the member rejoin when the
        group epoch moved past it, it must revoke, or what it waits for has been released."""
        g = self.host.groups.get(group_id)
        try:
            if g is None:
                raise RequestError(errors.UNKNOWN_MEMBER_ID)
            m = self._member(g, member_id, instance_id)
        except RequestError as e:
            return e.code
        if generation != m.member_epoch:
            return errors.ILLEGAL_GENERATION
        self.host.deadlines.set((group_id, m.member_id, "session"), now_ms + self.host.session_timeout(group_id, m))
        if (
            m.member_epoch < g.group_epoch
            or m.state == MemberState.UNREVOKED_PARTITIONS
            or (m.state == MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(g, m))
        ):
            self._arm_join(now_ms, group_id, m)
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def leave(
        self, now_ms: int, group_id: str, identities: list[tuple[str, str | None]]
    ) -> tuple[list[int], list[ConsumerRecord]]:
        """``classicGroupLeaveToConsumerGroup``: an error code per (member id, instance id), and the
        records that remove the valid ones (a downgrade when only classic members would stay)."""
        g = self.host.groups.get(group_id)
        codes: list[int] = []
        leaving: list[str] = []
        for member_id, instance_id in identities:
            try:
                if g is None:
                    raise RequestError(errors.UNKNOWN_MEMBER_ID)
                if instance_id is not None and not member_id:
                    # administrative removal by instance id alone
                    static_mid = g.static_members.get(instance_id)
                    if static_mid is None:
                        raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    m = g.members[static_mid]
                else:
                    m = self._member(g, member_id, instance_id)
                codes.append(errors.NONE)
                if m.member_id not in leaving:
                    leaving.append(m.member_id)
            except RequestError as e:
                codes.append(e.code)
        if g is None or not leaving:
            return codes, []
        # their member_left lines are the shell's (coordinator/migration.py), with the client's reasons
        records = self.host.fence(g, *leaving, now_ms=now_ms)
        self.host.apply(records)
        return codes, records

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _member(g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise RequestError(
                    errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g.group_id}."
                )
        else:
            static_mid = g.static_members.get(instance_id)
            m = g.members.get(static_mid) if static_mid is not None else None
            if m is None:
                raise RequestError(
                    errors.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group {g.group_id}.",
                )
            if m.member_id != member_id:
                raise RequestError(
                    errors.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member {m.member_id}.",
                )
        if not m.uses_classic_protocol:
            raise RequestError(errors.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")
        return m

    @staticmethod
    def _waiting_on_unreleased(g: ConsumerGroup, m: ConsumerGroupMember) -> bool:
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
            raise RequestError(
                errors.REBALANCE_IN_PROGRESS,
                f"A new rebalance is triggered in group {g.group_id} and member {m.member_id} should rejoin to catch up.",
            )

    def _arm_join(self, now_ms: int, gid: str, m: ConsumerGroupMember) -> None:
        key = (gid, m.member_id, "join")
        if key not in self.host.deadlines:
            self.host.deadlines.set(key, now_ms + max(m.rebalance_timeout_ms, 0))
