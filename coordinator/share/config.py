"""The broker's share-group settings (``group.share.*``): read at start, before any share group
exists, so apart from the share-group core that is built on first use (coordinator/lazy.py)."""

from __future__ import annotations

from groupd.protocol.frozen import frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


@frozen_record
class ShareGroupConfig:
    """Kafka 4.2's ``GroupCoordinatorConfig`` share settings (``group.share.*``) and their defaults."""

    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    min_session_timeout_ms: int = 45000  # group.share.min.session.timeout.ms
    max_session_timeout_ms: int = 60000  # group.share.max.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    min_heartbeat_interval_ms: int = 5000  # group.share.min.heartbeat.interval.ms
    max_heartbeat_interval_ms: int = 15000  # group.share.max.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    initialize_retry_interval_ms: int = 30000  # group.share.initialize.retry.interval.ms

    def __init__(
        self,
        session_timeout_ms: int = 45000,
        min_session_timeout_ms: int = 45000,
        max_session_timeout_ms: int = 60000,
        heartbeat_interval_ms: int = 5000,
        min_heartbeat_interval_ms: int = 5000,
        max_heartbeat_interval_ms: int = 15000,
        max_size: int = 200,
        initialize_retry_interval_ms: int = 30000,
    ) -> None:
        _set(self, "session_timeout_ms", session_timeout_ms)
        _set(self, "min_session_timeout_ms", min_session_timeout_ms)
        _set(self, "max_session_timeout_ms", max_session_timeout_ms)
        _set(self, "heartbeat_interval_ms", heartbeat_interval_ms)
        _set(self, "min_heartbeat_interval_ms", min_heartbeat_interval_ms)
        _set(self, "max_heartbeat_interval_ms", max_heartbeat_interval_ms)
        _set(self, "max_size", max_size)
        _set(self, "initialize_retry_interval_ms", initialize_retry_interval_ms)
