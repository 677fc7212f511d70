"""Coordinator settings, with Kafka's ``GroupCoordinatorConfig`` defaults (see reference.md)."""

from __future__ import annotations

from groupd.protocol.frozen import frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


@frozen_record
class CoordinatorConfig:
    # The sans-IO default is 0 so that scenarios opt in to the delay; the daemon's default
    # (broker/settings.py, 300 ms, Kafka's is 3000) is always passed in by broker/node.py.
    group_initial_rebalance_delay_ms: int = 0
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2**31 - 1
    # Kafka's group.coordinator.new.member.join.timeout: a new member parked in JoinGroup cannot
    # heartbeat, so it is dropped after this long and is expected to retry.
    group_new_member_join_timeout_ms: int = 300000
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    num_offsets_partitions: int = 50

    def __init__(
        self,
        group_initial_rebalance_delay_ms: int = 0,
        group_min_session_timeout_ms: int = 6000,
        group_max_session_timeout_ms: int = 1800000,
        group_max_size: int = 2**31 - 1,
        group_new_member_join_timeout_ms: int = 300000,
        offsets_retention_minutes: int = 10080,
        offsets_retention_check_interval_ms: int = 600000,
        offset_metadata_max_bytes: int = 4096,
        num_offsets_partitions: int = 50,
    ) -> None:
        _set(self, "group_initial_rebalance_delay_ms", group_initial_rebalance_delay_ms)
        _set(self, "group_min_session_timeout_ms", group_min_session_timeout_ms)
        _set(self, "group_max_session_timeout_ms", group_max_session_timeout_ms)
        _set(self, "group_max_size", group_max_size)
        _set(self, "group_new_member_join_timeout_ms", group_new_member_join_timeout_ms)
        _set(self, "offsets_retention_minutes", offsets_retention_minutes)
        _set(self, "offsets_retention_check_interval_ms", offsets_retention_check_interval_ms)
        _set(self, "offset_metadata_max_bytes", offset_metadata_max_bytes)
        _set(self, "num_offsets_partitions", num_offsets_partitions)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000
