"""Offset retention (KIP-211, Kafka's ``OffsetMetadataManager.cleanupExpiredOffsets`` and
``GroupMetadataManager.maybeDeleteGroup``): the periodic check that expires committed offsets and
deletes the Empty groups left with none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .classic.group import ClassicGroup, D, E, S
from .config import CoordinatorConfig
from .records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from .result import Result
from .runtime import CoordinatorRuntime

if TYPE_CHECKING:  # the consumer core is imported by its first use (coordinator/lazy.py)
    from .consumer import ConsumerGroup, ConsumerGroupManager


class OffsetStore(Protocol):
    """The offset manager as retention sees it: its state and its collaborators."""

    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]]
    inflight: dict[str, Any]  # commits written, not yet durable, per group
    config: CoordinatorConfig
    rt: CoordinatorRuntime[Result]
    classic: Any  # offsets.ClassicGroups
    consumer: ConsumerGroupManager
    consumer_side: Any  # offsets.ConsumerWrites
    log: Any

    def has_pending(self, group_id: str, tp: tuple[str, int] | None = None) -> bool: ...
    def partition_for(self, group_id: str) -> int: ...


class OffsetRetention:
    """Works on the offset manager's state and collaborators; writes tombstones through its runtime."""

    def __init__(self, offsets: OffsetStore) -> None:
        self.m = offsets

    def cleanup_group_metadata(self) -> None:
        """The periodic check: expire offsets, then delete Empty groups left with none."""
        now = self.m.rt.now
        retention_ms = self.m.config.offsets_retention_ms
        by_partition: dict[int, list[Record]] = {}
        deleted: dict[int, list[str]] = {}
        for gid in sorted(set(self.m.classic.groups) | set(self.m.offsets)):
            p = self.m.partition_for(gid)
            if p in self.m.rt.loading or not self.m.rt.is_local(p):
                continue
            group = self.m.classic.groups.get(gid)
            if group is None:
                consumer_group = self.m.consumer.group(gid)
                if consumer_group is not None and gid not in self.m.consumer_side.busy:
                    self._expire_consumer_group_offsets(consumer_group, now, retention_ms, by_partition, p)
                continue
            tombstones, all_expired = self._expired_offsets(group, now, retention_ms)
            records = by_partition.setdefault(p, [])
            records.extend(tombstones)
            if tombstones:
                self.m.classic.glog(group).info("offsets_expired", partitions=len(tombstones))
            if all_expired and group.is_in(E) and not self.m.inflight.get(gid) and not self.m.has_pending(gid):
                # cleanupExpiredOffsets: not while a transaction has offsets of the group pending.
                # The group's offset tombstones are already in ``records``; only the group's own.
                self._delete_group_shell(group)
                records.append((GroupMetadataKey(gid), None))
                deleted.setdefault(p, []).append(gid)
        for p, records in by_partition.items():
            if not records:
                continue
            gone = deleted.get(p, [])

            def done(error: int | None, gone: list[str] = gone) -> None:
                if error is not None:
                    for gid in gone:
                        self.m.classic.restore_group(gid)

            # Any group id of the partition routes the append there.
            self.m.rt.append(p, records, done)

    def _expire_consumer_group_offsets(
        self, group: ConsumerGroup, now: int, retention_ms: int, by_partition: dict[int, list[Record]], p: int
    ) -> None:
        """``ConsumerGroup.offsetExpirationCondition`` (the commit time, always) and
        ``OffsetMetadataManager.cleanupExpiredOffsets`` (only topics the group does not subscribe to);
        an empty consumer group left without offsets is deleted (``maybeDeleteGroup``)."""
        gid = group.group_id
        subscribed: set[str] = set()
        for m in group.members.values():
            subscribed.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex and m.subscribed_topic_regex in group.resolved_regexes:
                subscribed |= group.resolved_regexes[m.subscribed_topic_regex].topics
        tombstones: list[Record] = []
        all_expired = True
        for (topic, index), value in sorted(self.m.offsets.get(gid, {}).items()):
            if topic in subscribed or self.m.has_pending(gid, (topic, index)):
                all_expired = False
                continue
            if value.expire_timestamp != -1:
                expired = now >= value.expire_timestamp
            else:
                expired = now - value.commit_timestamp >= retention_ms
            if expired:
                tombstones.append((OffsetCommitKey(gid, topic, index), None))
            else:
                all_expired = False
        if tombstones:
            by_partition.setdefault(p, []).extend(tombstones)
            self.m.log.info("offsets_expired", group=gid, partitions=len(tombstones))
        if all_expired and not group.members and not self.m.inflight.get(gid) and not self.m.has_pending(gid):
            self.m.consumer_side.delete_consumer_group(gid, "empty and no offsets left")

    def _expired_offsets(self, group: ClassicGroup, now: int, retention_ms: int) -> tuple[list[Record], bool]:
        gid = group.group_id
        committed = self.m.offsets.get(gid)
        if not committed:
            return [], True
        # Which clock an offset's retention runs on (ClassicGroup.offsetExpirationCondition).
        if group.protocol_type is None:

            def base(o: OffsetCommitValue) -> int:
                return o.commit_timestamp  # standalone commits
        elif group.is_in(E):

            def base(o: OffsetCommitValue) -> int:
                return group.state_timestamp  # since the group became Empty
        elif group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_in(S):

            def base(o: OffsetCommitValue) -> int:
                return o.commit_timestamp  # topics nobody subscribes to any more
        else:
            return [], False
        tombstones: list[Record] = []
        all_expired = True
        for (topic, index), value in sorted(committed.items()):
            if group.is_subscribed_to_topic(topic) or self.m.has_pending(gid, (topic, index)):
                # cleanupExpiredOffsets: an offset with a pending transactional one does not expire yet.
                all_expired = False
                continue
            if value.expire_timestamp != -1:
                expired = now >= value.expire_timestamp  # an explicit per-commit retention (v2-4)
            else:
                expired = now - base(value) >= retention_ms
            if expired:
                tombstones.append((OffsetCommitKey(gid, topic, index), None))
            else:
                all_expired = False
        return tombstones, all_expired

    def _delete_group_shell(self, group: ClassicGroup) -> None:
        group.transition_to(D, self.m.rt.now)
        self.m.classic.forget_group(group)
        del self.m.classic.groups[group.group_id]
        self.m.classic.glog(group).info("group_deleted", reason="empty and no offsets left")
