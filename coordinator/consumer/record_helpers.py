"""Builders of a member's records (Kafka's ``GroupCoordinatorRecordHelpers``), shared by the heartbeat
path, the conversions and the classic members. Beside ``records.py`` rather than in it: these read a
``ConsumerGroupMember`` (``member.py``), and ``member.py`` already imports ``records.py``."""

from __future__ import annotations

from .member import ConsumerGroupMember, Partitions, to_tuple
from .records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerRecord,
)


def member_tombstones(group_id: str, member_id: str) -> list[ConsumerRecord]:
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
    """``newConsumerGroupTargetAssignmentRecord``."""
    return (
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_tuple(parts)),
    )
