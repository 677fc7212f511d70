"""Classic <-> consumer group conversion, the consumer-group side (KIP-848's online migration,
``group.consumer.migration.policy``): a live classic group becomes a consumer group with its members
and their partitions (``GroupMetadataManager.convertToConsumerGroup``, ``ConsumerGroup.fromClassicGroup``),
and a consumer group left with only classic members is deleted for the shell to rebuild it as a
classic group (``convertToClassicGroup``, ``validateOnlineDowngradeWithFencedMembers``).

``Migration`` is a collaborator of ``ConsumerGroupManager``: it is handed the manager (what ``Host``
names) and keeps only the downgrades the shell has not taken yet."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Protocol

from groupd.protocol.frozen import frozen_record

from ..consumer_protocol import ConsumerProtocolError, decode_assignment, decode_subscription
from ..timers import Deadlines
from .config import ConsumerGroupConfig, TopicsImage
from .group import ConsumerGroup, ConsumerGroups
from .member import ConsumerGroupMember, MemberState
from .record_helpers import current_assignment_record, member_metadata_record, target_record
from .records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecord,
)

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


@frozen_record
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

    def __init__(
        self,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: tuple[tuple[str, bytes], ...],
        assignment: bytes,
    ) -> None:
        _set(self, "member_id", member_id)
        _set(self, "instance_id", instance_id)
        _set(self, "client_id", client_id)
        _set(self, "client_host", client_host)
        _set(self, "rebalance_timeout_ms", rebalance_timeout_ms)
        _set(self, "session_timeout_ms", session_timeout_ms)
        _set(self, "protocols", protocols)
        _set(self, "assignment", assignment)


@frozen_record
class Downgrade:
    """A consumer group that has just been deleted to become a classic group again
    (``convertToClassicGroup``): the group as it was, and who left."""

    group: ConsumerGroup
    leaving: frozenset[str]
    # a member left (a rebalance follows); not when a classic static member replaced the last
    # consumer-protocol one in its JoinGroup (validateOnlineDowngradeWithReplacedMemberId)
    rebalance: bool = True

    def __init__(self, group: ConsumerGroup, leaving: frozenset[str], rebalance: bool = True) -> None:
        _set(self, "group", group)
        _set(self, "leaving", leaving)
        _set(self, "rebalance", rebalance)


class UpgradeRefused(Exception):
    """``convertToConsumerGroup`` could not build a consumer group from the classic one (answered
    GROUP_ID_NOT_FOUND with this message)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Host(Protocol):
    """What ``Migration`` reads and calls on its ``ConsumerGroupManager``."""

    config: ConsumerGroupConfig
    topics: TopicsImage
    groups: ConsumerGroups
    deadlines: Deadlines

    def apply(self, records: list[ConsumerRecord]) -> None: ...

    def session_timeout(self, group_id: str, m: ConsumerGroupMember) -> int: ...

    def cancel_timers(self, gid: str, mid: str) -> None: ...


class Migration:
    def __init__(self, host: Host) -> None:
        self.host = host
        # Groups that a call has just converted back to classic; the shell takes them
        # (``take_downgrade``) and builds the classic group in the same write.
        self.downgrades: dict[str, Downgrade] = {}

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
                tid = self.host.topics.topic_id(tp.topic)
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
        self.host.apply(records)
        for m in converted:
            self.host.deadlines.set((group_id, m.member_id, "session"), now_ms + self.host.session_timeout(group_id, m))
        return records

    def can_downgrade(self, g: ConsumerGroup, leaving: Iterable[str]) -> bool:
        """``validateOnlineDowngradeWithFencedMembers``: only classic members would stay, there are some,
        the policy allows it and they fit in a classic group."""
        leaving = set(leaving)
        staying = [m for mid, m in g.members.items() if mid not in leaving]
        config = self.host.config
        return (
            bool(staying)
            and all(m.uses_classic_protocol for m in staying)
            and config.downgrade_enabled
            and len(staying) <= config.classic_max_size
        )

    def downgrade(self, g: ConsumerGroup, leaving: Iterable[str], *, rebalance: bool = True) -> list[ConsumerRecord]:
        """``convertToClassicGroup``: the consumer group's tombstones; the shell builds the classic group
        (``ClassicGroup.fromConsumerGroup``) from what ``take_downgrade`` hands it."""
        for mid in g.members:
            self.host.cancel_timers(g.group_id, mid)
        self.downgrades[g.group_id] = Downgrade(g.copy(), frozenset(leaving), rebalance)
        return self.host.groups.tombstones(g.group_id)

    def take_downgrade(self, group_id: str) -> Downgrade | None:
        return self.downgrades.pop(group_id, None)
