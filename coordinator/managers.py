"""The shard's managers and how they are wired together (Kafka's ``GroupCoordinatorShard.Builder``).

Each manager gets the collaborators it works through, explicitly: the coordinator runtime, the
persisted group-metadata records (the shard's ``replay`` folds records into them; a migration
between protocols and an unload change them too, as in the shard before), the consumer group
core, and the other managers where a request crosses kinds of group (a classic JoinGroup to a
consumer group, a commit validated by its group). The ones that need each other are wired once
all exist.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from groupd.protocol.frozen import mutable_record

from .classic.admin import GroupAdmin
from .classic.join import JoinGroupHandler
from .classic.manager import ClassicGroupManager
from .config import CoordinatorConfig
from .consumer.config import ConsumerGroupConfig, TopicsImage
from .consumer_requests import ConsumerGroupRequests
from .find_coordinator import CoordinatorFinder
from .lazy import DeferredGroups
from .listener import CoordinatorListener
from .migration import Migration
from .offsets import OffsetManager
from .records import GroupMetadataValue
from .result import Result
from .runtime import CoordinatorRuntime
from .share.config import ShareGroupConfig
from .share_requests import ShareGroupRequests
from .timers import Deadlines

if TYPE_CHECKING:
    from .consumer import ConsumerGroupManager
    from .share import ShareGroupManager


@mutable_record
class Managers:
    group_records: dict[str, GroupMetadataValue]  # persisted: the shard's replay folds records into them
    consumer: ConsumerGroupManager  # the KIP-848 consumer groups' core
    deadlines: Deadlines  # classic sessions and phases, and the retention check
    classic: ClassicGroupManager  # classic groups: sessions, phases, SyncGroup, Heartbeat, LeaveGroup
    join: JoinGroupHandler  # JoinGroup
    admin: GroupAdmin  # DescribeGroups, ListGroups, DeleteGroups
    finder: CoordinatorFinder  # FindCoordinator
    consumer_requests: ConsumerGroupRequests  # ConsumerGroupHeartbeat, ConsumerGroupDescribe, timers
    migration: Migration  # classic <-> consumer groups
    offset_manager: OffsetManager  # OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit, retention
    share: ShareGroupManager  # the KIP-932 share groups' core
    share_requests: ShareGroupRequests  # ShareGroupHeartbeat, ShareGroupDescribe, share offsets, timers
    log: Any = None

    def __init__(
        self,
        group_records: dict[str, GroupMetadataValue],
        consumer: ConsumerGroupManager,
        deadlines: Deadlines,
        classic: ClassicGroupManager,
        join: JoinGroupHandler,
        admin: GroupAdmin,
        finder: CoordinatorFinder,
        consumer_requests: ConsumerGroupRequests,
        migration: Migration,
        offset_manager: OffsetManager,
        share: ShareGroupManager,
        share_requests: ShareGroupRequests,
        log: Any = None,
    ) -> None:
        self.group_records = group_records
        self.consumer = consumer
        self.deadlines = deadlines
        self.classic = classic
        self.join = join
        self.admin = admin
        self.finder = finder
        self.consumer_requests = consumer_requests
        self.migration = migration
        self.offset_manager = offset_manager
        self.share = share
        self.share_requests = share_requests
        self.log = log

    def on_loaded(self, partition: int) -> None:
        """``GroupMetadataManager.onLoaded``: each kind of group of the loaded partition comes to life."""
        self.classic.on_loaded(partition)
        self.offset_manager.on_partition_loaded(partition)
        self.consumer_requests.on_loaded(partition)
        self.share_requests.on_loaded(partition)

    def on_unloaded(self, partition: int, was_loading: bool, writes_abandoned: int) -> None:
        """``onUnloaded``: the partition's groups, offsets and timers leave memory (logged with how
        many groups of each kind and how many writes were abandoned)."""
        groups = {
            "classic_groups": self.classic.on_unloaded(partition),
            "consumer_groups": self.consumer_requests.on_unloaded(partition),
            "share_groups": self.share_requests.on_unloaded(partition),
        }
        self.offset_manager.on_unloaded(partition)
        if any(groups.values()) or writes_abandoned:
            self.log.info(
                "partition_unloaded",
                partition=partition,
                **groups,
                writes_abandoned=writes_abandoned,
                was_loading=was_loading,
            )

    def hold_cores(self, holder: object) -> None:
        """``holder.consumer`` and ``holder.share`` become the real cores when they are built."""
        for name in ("consumer", "share"):
            if isinstance(core := getattr(self, name), DeferredGroups):
                core.hold(holder, name)

    def set_config(self, config: CoordinatorConfig) -> None:
        for holder in (self.classic, self.join, self.admin, self.offset_manager):
            holder.config = config


def build_managers(
    config: CoordinatorConfig,
    runtime: CoordinatorRuntime[Result],
    log: Any,
    listener: CoordinatorListener | None,
    uuid_factory: Callable[[], str] | None,
    topics_image: Callable[[], TopicsImage] | None,
    topic_partitions: Callable[[str], int | None] | None,
    consumer_config: ConsumerGroupConfig | None,
    share_config: ShareGroupConfig | None = None,
) -> Managers:
    group_records: dict[str, GroupMetadataValue] = {}
    # KIP-848 consumer groups live beside the classic ones; a group id is one or the other. A
    # downgrade must fit in a classic group (group.max.size).
    consumer_config = replace(consumer_config or ConsumerGroupConfig(), classic_max_size=config.group_max_size)

    # The KIP-848 and KIP-932 cores are built (and their ~30 modules imported) by their first use,
    # not at start (coordinator/lazy.py; issue 26): the stand-ins answer "no such group" meanwhile.
    def build_consumer() -> ConsumerGroupManager:
        from .consumer.manager import ConsumerGroupManager

        return ConsumerGroupManager(consumer_config, uuid_factory=uuid_factory)

    def build_share() -> ShareGroupManager:
        from .share.manager import ShareGroupManager

        return ShareGroupManager(share_config)

    consumer: Any = DeferredGroups(build_consumer)
    deadlines = Deadlines()
    listener = listener or CoordinatorListener()
    classic = ClassicGroupManager(config, runtime, deadlines, group_records, consumer, log=log, listener=listener)
    consumer_requests = ConsumerGroupRequests(runtime, consumer, classic, log=log, topics_image=topics_image)
    migration = Migration(runtime, consumer, classic, consumer_requests, log=log)
    offsets = OffsetManager(
        config, runtime, classic, consumer, consumer_requests, log=log, topic_partitions=topic_partitions
    )
    classic.offset_manager, classic.consumer_side, classic.migration = offsets, consumer_requests, migration
    consumer_requests.migration = migration
    # KIP-932 share groups: a third kind of group in the same id namespace
    share: Any = DeferredGroups(build_share)
    share_requests = ShareGroupRequests(runtime, share, classic, consumer, log=log, topics_image=topics_image)
    classic.share_side = share_requests
    consumer_requests.share_side = share_requests
    offsets.share_side = share_requests
    admin = GroupAdmin(classic)
    for holder in (classic, consumer_requests, migration, offsets, share_requests, admin):
        consumer.hold(holder, "consumer")
    share.hold(share_requests, "share")
    m = Managers(
        group_records=group_records,
        consumer=consumer,
        deadlines=deadlines,
        classic=classic,
        join=JoinGroupHandler(classic, uuid_factory),
        admin=admin,
        finder=CoordinatorFinder(runtime, config.num_offsets_partitions),
        consumer_requests=consumer_requests,
        migration=migration,
        offset_manager=offsets,
        share=share,
        share_requests=share_requests,
        log=log,
    )
    m.hold_cores(m)
    return m
