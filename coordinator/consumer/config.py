"""What a consumer group manager is configured with and reads: the broker's consumer-group settings
(Kafka's ``GroupCoordinatorConfig``) and the image of the topics that exist (Kafka's ``MetadataImage``,
reduced to names, ids and partition counts). Leaf module: the manager and its collaborators share it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import field

from groupd.protocol.frozen import DEFAULT_FACTORY, frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


@frozen_record
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

    def __init__(
        self,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 5000,
        max_size: int = 2**31 - 1,
        assignors: tuple[str, ...] = ("uniform", "range"),
        migration_policy: str = "bidirectional",
        classic_max_size: int = 2**31 - 1,
        regex_refresh_interval_ms: int = 10000,
    ) -> None:
        _set(self, "session_timeout_ms", session_timeout_ms)
        _set(self, "heartbeat_interval_ms", heartbeat_interval_ms)
        _set(self, "max_size", max_size)
        _set(self, "assignors", assignors)
        _set(self, "migration_policy", migration_policy)
        _set(self, "classic_max_size", classic_max_size)
        _set(self, "regex_refresh_interval_ms", regex_refresh_interval_ms)

    @property
    def upgrade_enabled(self) -> bool:
        """``ConsumerGroupMigrationPolicy.isUpgradeEnabled``."""
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        """``ConsumerGroupMigrationPolicy.isDowngradeEnabled``."""
        return self.migration_policy in ("downgrade", "bidirectional")


MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@frozen_record
class TopicsImage:
    """The topics that exist (name -> (topic id, partitions)); ``version`` grows with every change."""

    version: int = 0
    topics: Mapping[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    def __init__(self, version: int = 0, topics: Mapping[str, tuple[uuid.UUID, int]] = DEFAULT_FACTORY) -> None:
        _set(self, "version", version)
        _set(self, "topics", {} if topics is DEFAULT_FACTORY else topics)

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self.topics.get(name)
        return None if t is None else t[0]
