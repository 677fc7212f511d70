"""Configuration: defaults < TOML file < ``GROUPD_*`` environment variables < command-line flags.

Every field of ``Config`` is a setting under all three names: ``--group-max-size`` on the command
line, ``GROUPD_GROUP_MAX_SIZE`` in the environment, ``group_max_size`` in the TOML file.

Every setting is checked against its domain before anything starts (``DOMAINS``; a test keeps the
table complete), and a bad one is a ``ConfigError`` naming the flag and where the value came from:
``groupd serve`` exits 2 with it instead of, say, binding port 99999 modulo 65536.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from groupd.broker.settings import KAFKA_RELEASE_DEFAULTS, Config
from groupd.protocol.kafka_releases import RELEASES
from groupd.security.acl import Authorizer
from groupd.security.authorizer import parse_super_users
from groupd.security.listeners import CLIENT_AUTH, parse_listeners
from groupd.security.scram import ALL_MECHANISMS, CredentialStore
from groupd.storage import FsyncPolicy
from groupd.storage.records import HEADER_SIZE

__all__ = ["DOMAINS", "Config", "ConfigError", "add_arguments", "load", "validate"]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A setting that cannot be used; the message names it (as its flag) and its origin."""

    def __init__(self, name: str, problem: str, origin: str = "") -> None:
        self.setting = name
        where = f" (from {origin})" if origin else ""
        super().__init__(f"{flag(name)}: {problem}{where}")


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# --- domains: each returns what is wrong with a value, or None --------------------------------------
Check = Callable[[Any], str | None]


def between(lo: int, hi: int) -> Check:
    def check(v: int) -> str | None:
        return None if lo <= v <= hi else f"must be between {lo} and {hi}, not {v}"

    return check


def one_of(*choices: str) -> Check:
    def check(v: str) -> str | None:
        return None if v.strip().lower() in choices else f"must be one of {', '.join(choices)}, not {v!r}"

    return check


def _parses(parse: Callable[[str], object]) -> Check:
    def check(v: str) -> str | None:
        try:
            parse(v)
        except ValueError as e:
            return str(e)
        return None

    return check


def _non_empty(v: str) -> str | None:
    return None if v.strip() else "must not be empty"


def _sasl_mechanisms(v: str) -> str | None:
    names = [m.strip().upper() for m in v.split(",") if m.strip()]
    if not names:
        return f"must list at least one of {', '.join(ALL_MECHANISMS)}"
    bad = [m for m in names if m not in ALL_MECHANISMS]
    return f"unknown mechanism {bad[0]!r} (supported: {', '.join(ALL_MECHANISMS)})" if bad else None


def _kafka_version(v: str) -> str | None:
    # "" = no release: every version groupd implements
    if not v.strip() or v.strip() in RELEASES:
        return None
    return f"must be one of {', '.join(RELEASES)} (or empty), not {v!r}"


def _anything(_v: object) -> str | None:
    return None


_port = between(0, 65535)
_count = between(0, INT32_MAX)  # 0 = no limit / off, where the setting says so
_positive = between(1, INT32_MAX)
_ms = between(0, INT32_MAX)  # Kafka's int-typed durations (session timeouts, delays)
_long_ms = between(0, INT64_MAX)
_positive_long_ms = between(1, INT64_MAX)

DOMAINS: dict[str, Check] = {
    "host": _non_empty,
    "port": _port,
    "advertised_host": _anything,
    "data_dir": _non_empty,
    "node_id": between(0, INT32_MAX),
    "brokers": between(1, 64),
    "kafka_version": _kafka_version,
    "log_format": one_of("console", "json"),
    "log_level": one_of("debug", "info", "warning", "error"),
    "max_request_bytes": _positive,
    "max_connections": _count,
    "connections_max_idle_ms": _long_ms,
    "max_inflight_requests": _positive,
    "max_inflight_bytes": _positive,
    "max_write_buffer_bytes": _positive,
    "max_partitions": _count,
    "auto_create_topics": _anything,
    "num_partitions": _positive,
    "group_initial_rebalance_delay_ms": _ms,
    "group_min_session_timeout_ms": _ms,
    "group_max_session_timeout_ms": _ms,
    "group_max_size": _positive,
    # KIP-848 consumer groups (GroupCoordinatorConfig: atLeast(1) each)
    "group_consumer_session_timeout_ms": _positive,
    "group_consumer_heartbeat_interval_ms": _positive,
    "group_consumer_min_session_timeout_ms": _positive,
    "group_consumer_max_session_timeout_ms": _positive,
    "group_consumer_min_heartbeat_interval_ms": _positive,
    "group_consumer_max_heartbeat_interval_ms": _positive,
    "group_consumer_max_size": _positive,
    "group_consumer_regex_refresh_interval_ms": _positive,
    "group_consumer_migration_policy": one_of("disabled", "upgrade", "downgrade", "bidirectional"),
    # KIP-932 share groups (GroupCoordinatorConfig: atLeast(1) each)
    "group_share_session_timeout_ms": _positive,
    "group_share_heartbeat_interval_ms": _positive,
    "group_share_min_session_timeout_ms": _positive,
    "group_share_max_session_timeout_ms": _positive,
    "group_share_min_heartbeat_interval_ms": _positive,
    "group_share_max_heartbeat_interval_ms": _positive,
    "group_share_max_size": between(1, 1000),
    # KIP-932 share groups, delivery (ShareGroupConfig's bounds)
    "group_share_record_lock_duration_ms": between(1000, 3_600_000),
    "group_share_delivery_count_limit": between(2, 10),
    "group_share_partition_max_record_locks": between(100, 10_000),
    "group_share_max_share_sessions": _positive,
    "offsets_retention_minutes": _positive,
    "offsets_retention_check_interval_ms": _positive_long_ms,
    "offset_metadata_max_bytes": _count,
    "fsync": _parses(FsyncPolicy.parse),
    # A segment holds at least one batch header (the same floor as the topic config segment.bytes).
    "segment_bytes": between(HEADER_SIZE, INT32_MAX),
    "segment_ms": _positive_long_ms,
    "delete_retention_ms": _long_ms,
    "log_retention_check_interval_ms": _long_ms,
    "log_cleaner_backoff_ms": _long_ms,
    "producer_id_expiration_ms": _positive_long_ms,
    "transaction_max_timeout_ms": between(1, INT32_MAX),  # TransactionStateManagerConfig: atLeast(1), an int
    "listeners": _anything,  # parsed as a whole in validate() (it needs --host and --port)
    "listener_security_protocol_map": _anything,  # with --listeners
    "advertised_listeners": _anything,  # with --listeners
    "ssl_certfile": _anything,  # files are read at start-up
    "ssl_keyfile": _anything,
    "ssl_cafile": _anything,
    "ssl_client_auth": one_of(*CLIENT_AUTH),
    "sasl_mechanisms": _sasl_mechanisms,
    "connection_failed_authentication_delay_ms": _ms,
    "sasl_server_max_receive_size": _positive,
    "max_incremental_fetch_session_cache_slots": _count,  # KafkaConfig: atLeast(0)
    "min_incremental_fetch_session_eviction_ms": _long_ms,
    "oauthbearer_principal_claim_name": _non_empty,
    "oauthbearer_scope_claim_name": _non_empty,
    "oauthbearer_required_scope": _anything,
    "oauthbearer_allowable_clock_skew_ms": _ms,
    "super_users": _parses(parse_super_users),
    "allow_everyone_if_no_acl_found": _anything,
    "users": _parses(CredentialStore),
    "acl": _parses(Authorizer),
    "metrics_port": _port,
    "metrics_host": _anything,
    "metrics_max_groups": _count,
    "dashboard_port": between(-1, 65535),  # -1: off, 0: any free port
    "dashboard_host": _anything,
    "control_port": between(-1, 65535),  # -1: off, 0: any free port
    "control_host": _anything,
}


def validate(cfg: Config, origins: dict[str, str] | None = None) -> Config:
    """Raise ConfigError for the first setting outside its domain."""
    origins = origins or {}
    for f in fields(Config):
        problem = DOMAINS[f.name](getattr(cfg, f.name))
        if problem is not None:
            raise ConfigError(f.name, problem, origins.get(f.name, ""))
    if cfg.group_min_session_timeout_ms > cfg.group_max_session_timeout_ms:
        name = "group_min_session_timeout_ms"
        raise ConfigError(
            name,
            f"{cfg.group_min_session_timeout_ms} is above --group-max-session-timeout-ms "
            f"{cfg.group_max_session_timeout_ms}",
            origins.get(name, ""),
        )
    # GroupCoordinatorConfig's constructor checks: each bound pair in order, the two settings between
    # their bounds (the message names the flag to change, not Kafka's property)
    for setting, low, high in (
        (
            "group_consumer_heartbeat_interval_ms",
            "group_consumer_min_heartbeat_interval_ms",
            "group_consumer_max_heartbeat_interval_ms",
        ),
        (
            "group_consumer_session_timeout_ms",
            "group_consumer_min_session_timeout_ms",
            "group_consumer_max_session_timeout_ms",
        ),
        (
            "group_share_heartbeat_interval_ms",
            "group_share_min_heartbeat_interval_ms",
            "group_share_max_heartbeat_interval_ms",
        ),
        (
            "group_share_session_timeout_ms",
            "group_share_min_session_timeout_ms",
            "group_share_max_session_timeout_ms",
        ),
    ):
        value, lo, hi = getattr(cfg, setting), getattr(cfg, low), getattr(cfg, high)
        if hi < lo:
            raise ConfigError(high, f"{hi} is below {flag(low)} {lo}", origins.get(high, ""))
        if value < lo:
            raise ConfigError(setting, f"{value} is below {flag(low)} {lo}", origins.get(setting, ""))
        if value > hi:
            raise ConfigError(setting, f"{value} is above {flag(high)} {hi}", origins.get(setting, ""))
    if cfg.group_consumer_heartbeat_interval_ms >= cfg.group_consumer_session_timeout_ms:
        # GroupCoordinatorConfig: "group.consumer.heartbeat.interval.ms must be less than
        # group.consumer.session.timeout.ms"
        name = "group_consumer_heartbeat_interval_ms"
        raise ConfigError(
            name,
            f"{cfg.group_consumer_heartbeat_interval_ms} must be less than --group-consumer-session-timeout-ms "
            f"{cfg.group_consumer_session_timeout_ms}",
            origins.get(name, ""),
        )
    try:
        listeners = parse_listeners(cfg)
    except ValueError as e:
        raise ConfigError("listeners", str(e), origins.get("listeners", "")) from None
    if cfg.brokers > 1 and len(listeners) > 1:
        # Cluster mode gives each broker the next port; several listeners per broker would collide.
        raise ConfigError("brokers", f"{cfg.brokers} brokers need a single listener", origins.get("brokers", ""))
    if cfg.brokers > 1 and listeners[0].port and listeners[0].port + cfg.brokers - 1 > 65535:
        raise ConfigError(
            "brokers", f"ports {listeners[0].port}+{cfg.brokers - 1} pass 65535", origins.get("brokers", "")
        )
    return cfg


# --- conversion --------------------------------------------------------------------------------
def _parse_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {s!r}")


def _kind(f: dataclasses.Field[Any]) -> str:
    return f.type if isinstance(f.type, str) else f.type.__name__


def _convert(f: dataclasses.Field[Any], raw: Any, origin: str) -> Any:
    try:
        return _convert_value(f, raw)
    except ValueError as e:
        raise ConfigError(f.name, str(e), origin) from None


def _convert_value(f: dataclasses.Field[Any], raw: Any) -> Any:
    if f.metadata.get("table"):
        if not isinstance(raw, dict):
            raise ValueError("must be a TOML table")
        return raw
    kind = _kind(f)
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            return _parse_bool(raw)
        raise ValueError(f"not a boolean: {raw!r}")
    if kind == "int":
        # TOML gives ints, bools and floats as such: true or 1.5 must not become 1.
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            try:
                return int(raw.strip())
            except ValueError:
                pass
        raise ValueError(f"not an integer: {raw!r}")
    if not isinstance(raw, str):
        raise ValueError(f"not a string: {raw!r}")
    return raw


def env_var(name: str) -> str:
    """The environment variable of setting ``name`` (``port`` -> ``GROUPD_PORT``)."""
    return "GROUPD_" + name.upper()


def _help(f: dataclasses.Field[Any]) -> str:
    """A flag's help: its text, then its environment variable and one default (a help text that
    says its own default, such as "default: --host", keeps it instead of the field's raw value)."""
    text = f.metadata.get("help", "")
    if "(default:" in text:
        return f"{text} (env {env_var(f.name)})"
    default = "none" if f.default == "" else f.default
    return f"{text} (default: {default}; env {env_var(f.name)})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML configuration file (env GROUPD_CONFIG)")
    for f in fields(Config):
        if f.metadata.get("table"):
            continue
        help_ = _help(f)
        if _kind(f) == "bool":
            parser.add_argument(
                flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=help_
            )
        else:
            parser.add_argument(flag(f.name), dest=f.name, default=None, help=help_)


def load(args: argparse.Namespace | None = None, env: dict[str, str] | None = None) -> Config:
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    by_name = {f.name: f for f in fields(Config)}
    path = getattr(args, "config", None) or env.get("GROUPD_CONFIG")
    if path:
        import tomllib  # only with a config file: most daemons start from flags (issue 26)

        with Path(path).open("rb") as fh:
            data = tomllib.load(fh)
        section = data.get("groupd", data)
        # `[users.*]` and `[acl.*]` may sit beside a `[groupd]` table as well as inside it.
        if section is not data:
            section = {**{k: data[k] for k in ("users", "acl") if k in data}, **section}
        for k, v in section.items():
            key = k.replace("-", "_").replace(".", "_")
            if key not in by_name:
                raise ValueError(f"unknown setting {k!r} in {path}")
            origins[key] = f"{k} in {path}"
            values[key] = _convert(by_name[key], v, origins[key])
    for name, f in by_name.items():
        var = env_var(name)
        raw = None if f.metadata.get("table") else env.get(var)
        if raw is not None:
            origins[name] = var
            values[name] = _convert(f, raw, var)
    if args is not None:
        for name, f in by_name.items():
            raw = getattr(args, name, None)
            if raw is not None:
                origins[name] = f"the command line: {flag(name)} {raw}"
                values[name] = _convert(f, raw, origins[name])
    _release_defaults(values, origins)
    _heartbeat_default_within_bounds(values, origins, by_name)
    return validate(Config(**values), origins)


def _heartbeat_default_within_bounds(
    values: dict[str, Any], origins: dict[str, str], by_name: dict[str, dataclasses.Field[Any]]
) -> None:
    """groupd's default consumer heartbeat interval (250 ms, README "Consumer-group heartbeat
    interval") is its own minimum, as Kafka's 5000 is: a minimum raised on its own (to Kafka's 5000,
    say) takes the default interval up with it instead of refusing a value nobody gave."""
    for kind in ("consumer", "share"):
        hb, low = f"group_{kind}_heartbeat_interval_ms", f"group_{kind}_min_heartbeat_interval_ms"
        if hb in values or low not in values or not isinstance(values[low], int):
            continue
        default = by_name[hb].default
        if isinstance(default, int) and values[low] > default:
            values[hb] = values[low]
            origins[hb] = f"{flag(low)} (groupd's default interval raised to it)"


def _release_defaults(values: dict[str, Any], origins: dict[str, str]) -> None:
    """``--kafka-version``: the release's defaults for the settings not given explicitly (a bad
    version is left for ``validate`` to refuse)."""
    release = str(values.get("kafka_version", "")).strip()
    if release not in KAFKA_RELEASE_DEFAULTS:
        return
    values["kafka_version"] = release
    for name, value in KAFKA_RELEASE_DEFAULTS[release].items():
        if name not in values:
            values[name] = value
            origins[name] = f"Kafka {release}'s default ({origins['kafka_version']})"
