"""A user topic's configs as its partitions' ``LogConfig`` (Kafka's ``LogConfig.fromProps``).

The broker's defaults, overridden by the topic's ``retention.*``, ``segment.*``, ``cleanup.policy``,
``max.message.bytes``, ``message.timestamp.type``... Produce's timestamp limits read the topic's
configs through ``int_config`` too (``batch_checks.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import structlog
from groupd.storage import LogConfig
from groupd.storage import records as rec

from .state import INT32_MAX

__all__ = ["int_config", "topic_log_config"]

log = structlog.get_logger("groupd.data")


def int_config(configs: dict[str, str], name: str) -> int | None:
    raw = configs.get(name)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        log.warning("topic_config_ignored", config=name, value=raw, reason="not an integer")
        return None


def topic_log_config(base: LogConfig, configs: dict[str, str]) -> LogConfig:
    """The LogConfig of a user topic: the broker's defaults overridden by the topic's configs.

    Kafka semantics: ``retention.ms`` / ``retention.bytes`` of -1 mean unlimited; ``cleanup.policy``
    is ``delete``, ``compact`` or both. Values that do not parse, or that storage cannot honour, are
    ignored with a warning rather than making the partition unopenable.
    """
    changes: dict[str, Any] = {}
    retention_ms = int_config(configs, "retention.ms")
    if retention_ms is not None:
        changes["retention_ms"] = None if retention_ms < 0 else retention_ms
    retention_bytes = int_config(configs, "retention.bytes")
    if retention_bytes is not None:
        changes["retention_bytes"] = None if retention_bytes < 0 else retention_bytes
    segment_bytes = int_config(configs, "segment.bytes")
    if segment_bytes is not None:
        if rec.HEADER_SIZE <= segment_bytes <= INT32_MAX:
            changes["segment_bytes"] = segment_bytes
        else:
            log.warning("topic_config_ignored", config="segment.bytes", value=segment_bytes, reason="out of range")
    segment_ms = int_config(configs, "segment.ms")
    if segment_ms is not None and segment_ms > 0:
        changes["segment_ms"] = segment_ms
    delete_retention_ms = int_config(configs, "delete.retention.ms")
    if delete_retention_ms is not None and delete_retention_ms >= 0:
        changes["delete_retention_ms"] = delete_retention_ms
    max_message_bytes = int_config(configs, "max.message.bytes")
    if max_message_bytes is not None and max_message_bytes >= 0:
        changes["max_message_bytes"] = max_message_bytes
    index_interval = int_config(configs, "index.interval.bytes")
    if index_interval is not None and index_interval >= 0:
        changes["index_interval_bytes"] = index_interval
    policy = configs.get("cleanup.policy")
    if policy is not None:
        parts = sorted({p.strip() for p in str(policy).split(",") if p.strip()})
        if parts and set(parts) <= {"compact", "delete"}:
            changes["cleanup_policy"] = ",".join(parts)
        else:
            log.warning("topic_config_ignored", config="cleanup.policy", value=policy, reason="unknown policy")
    ts_type = configs.get("message.timestamp.type")
    if ts_type is not None:
        if ts_type in ("CreateTime", "LogAppendTime"):
            changes["message_timestamp_type"] = ts_type
        else:
            log.warning("topic_config_ignored", config="message.timestamp.type", value=ts_type, reason="unknown type")
    return replace(base, **changes) if changes else base
