"""Config alteration rules (``broker/configs.py``) as Kafka's ``ConfigAdminManager`` and ``LogConfig``
apply them: incremental operations, the legacy API's replace-all and null refusal, validation."""

from __future__ import annotations

from typing import Any

import pytest
from groupd.broker.configs import (
    APPEND,
    DELETE,
    GROUP_CONFIGS,
    SET,
    SUBTRACT,
    TOPIC_CONFIGS,
    ConfigError,
    ConfigHandlers,
    _check_group_bounds,
    group_config_defs,
)
from groupd.broker.settings import Config
from groupd.protocol.errors import ErrorCode


def op(name: str, value: str | None, operation: int = SET) -> dict[str, Any]:
    return {"name": name, "value": value, "config_operation": operation}


def apply(current: dict[str, str], *ops: dict[str, Any], incremental: bool = True) -> dict[str, str]:
    return ConfigHandlers._apply(current, TOPIC_CONFIGS, list(ops), incremental, "topic")


def refused(*ops: dict[str, Any], incremental: bool = True) -> tuple[int, str]:
    with pytest.raises(ConfigError) as exc:
        apply({}, *ops, incremental=incremental)
    return exc.value.code, exc.value.message


def test_incremental_set_delete_append_subtract() -> None:
    cur = {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert apply(cur, op("retention.ms", None, DELETE)) == {"cleanup.policy": "compact"}
    assert apply(cur, op("segment.ms", "60000")) == {**cur, "segment.ms": "60000"}
    assert apply(cur, op("cleanup.policy", "delete", APPEND))["cleanup.policy"] == "compact,delete"
    assert apply(cur, op("cleanup.policy", "compact", APPEND))["cleanup.policy"] == "compact"  # no duplicates
    # SUBTRACT from the default when the topic has no override of its own
    assert apply({}, op("cleanup.policy", "compact", APPEND))["cleanup.policy"] == "delete,compact"
    assert apply({"cleanup.policy": "compact,delete"}, op("cleanup.policy", "compact", SUBTRACT)) == {
        "cleanup.policy": "delete"
    }


def test_legacy_alter_replaces_every_override_and_refuses_nulls() -> None:
    assert apply({"retention.ms": "1000"}, op("segment.ms", "60000"), incremental=False) == {"segment.ms": "60000"}
    # ConfigAdminManager.validateLegacyAlterConfigsResources
    assert refused(op("retention.ms", None), incremental=False) == (
        ErrorCode.INVALID_REQUEST,
        "Null value not supported for : retention.ms",
    )


@pytest.mark.parametrize(
    ("ops", "code", "message"),
    [
        ([op("nope", "1")], ErrorCode.INVALID_CONFIG, "Unknown topic config name: nope"),
        (
            [op("retention.ms", "soon")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
        (
            [op("retention.ms", "-2")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        (
            [op("min.cleanable.dirty.ratio", "1.5")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            [op("preallocate", "yes")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value yes for configuration preallocate: Expected value to be either true or false",
        ),
        (
            [op("message.timestamp.type", "Now")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
        ),
        (
            [op("retention.ms", "5", APPEND)],
            ErrorCode.INVALID_CONFIG,
            "Config value append is not allowed for config key: retention.ms",
        ),
        ([op("retention.ms", None)], ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
    ],
)
def test_refusals(ops: list[dict[str, Any]], code: int, message: str) -> None:
    assert refused(*ops) == (code, message)


def test_group_bounds() -> None:
    ok = ConfigHandlers._apply({}, GROUP_CONFIGS, [op("consumer.session.timeout.ms", "60000")], True, "group")
    _check_group_bounds(ok)
    with pytest.raises(ConfigError) as exc:
        ConfigHandlers._apply({}, GROUP_CONFIGS, [op("consumer.session.timeout.ms", "61000")], True, "group")
    assert exc.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(ConfigError) as exc:
        _check_group_bounds({"share.heartbeat.interval.ms": "45000"})  # the session timeout is 45000 by default
    assert exc.value.message == "share.heartbeat.interval.ms must be less than share.session.timeout.ms"


def test_group_config_defaults_and_bounds_are_the_brokers_GroupConfig_extractGroupConfigMap() -> None:
    """A group's consumer.* defaults are the broker's group.consumer.* settings and its bounds their min/max
    (GroupConfig.validateValues against GroupCoordinatorConfig), not Kafka's defaults."""
    cfg = Config(
        group_consumer_session_timeout_ms=6000,
        group_consumer_min_session_timeout_ms=3000,
        group_consumer_heartbeat_interval_ms=500,
        group_consumer_min_heartbeat_interval_ms=500,
    )
    defs = group_config_defs(cfg)
    assert defs["consumer.session.timeout.ms"].default == "6000"
    assert defs["consumer.heartbeat.interval.ms"].default == "500"
    ok = ConfigHandlers._apply({}, defs, [op("consumer.session.timeout.ms", "3000")], True, "group")
    _check_group_bounds(ok, defs)  # 500 ms heartbeats (the broker's) below a 3 s session
    with pytest.raises(ConfigError) as exc:
        ConfigHandlers._apply({}, defs, [op("consumer.session.timeout.ms", "2999")], True, "group")
    assert exc.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(ConfigError):
        ConfigHandlers._apply({}, defs, [op("consumer.heartbeat.interval.ms", "499")], True, "group")
    assert defs["share.session.timeout.ms"] == GROUP_CONFIGS["share.session.timeout.ms"]
