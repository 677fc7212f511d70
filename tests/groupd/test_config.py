from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from groupd import config


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    config.add_arguments(p)
    return p.parse_args(list(argv))


def test_precedence_flag_over_env_over_file(tmp_path: Path) -> None:
    f = tmp_path / "g.toml"
    f.write_text('port = 1000\nhost = "0.0.0.0"\ngroup_max_size = 7\nauto_create_topics = false\n')
    cfg = config.load(_args("--config", str(f), "--port", "3000"), env={"GROUPD_PORT": "2000", "GROUPD_HOST": "::1"})
    assert cfg.port == 3000
    assert cfg.host == "::1"
    assert cfg.group_max_size == 7
    assert cfg.auto_create_topics is False


def test_env_and_bool_flags() -> None:
    cfg = config.load(_args("--no-auto-create-topics"), env={"GROUPD_NUM_PARTITIONS": "4"})
    assert cfg.auto_create_topics is False
    assert cfg.num_partitions == 4
    assert config.load(_args(), env={}).port == 9092


def test_unknown_file_setting_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "g.toml"
    f.write_text("bogus = 1\n")
    with pytest.raises(ValueError, match="bogus"):
        config.load(_args("--config", str(f)), env={})


def test_bad_value_is_an_error() -> None:
    with pytest.raises(ValueError):
        config.load(_args(), env={"GROUPD_PORT": "abc"})


# --- every setting is checked against its domain (groupd serve exits 2 naming it) -------------------
BAD_VALUES: list[tuple[str, str]] = [
    ("port", "99999"),
    ("port", "-1"),
    ("port", "abc"),
    ("port", "9092.5"),
    ("metrics_port", "65536"),
    ("node_id", "-1"),
    ("host", " "),
    ("data_dir", ""),
    ("log_format", "xml"),
    ("log_level", "loud"),
    ("fsync", "sometimes"),
    ("fsync", "interval:soon"),
    ("fsync", "interval:-5"),
    ("ssl_client_auth", "maybe"),
    ("sasl_mechanisms", "GSSAPI"),
    ("sasl_mechanisms", " , "),
    ("listeners", "PLAINTEXT://127.0.0.1:70000"),
    ("listeners", "FOO://127.0.0.1:9092"),
    ("max_request_bytes", "0"),
    ("max_connections", "-1"),
    ("connections_max_idle_ms", "-1"),
    ("max_inflight_requests", "0"),
    ("max_inflight_bytes", "0"),
    ("max_write_buffer_bytes", "-4"),
    ("max_partitions", "-1"),
    ("num_partitions", "0"),
    ("group_initial_rebalance_delay_ms", "-1"),
    ("group_min_session_timeout_ms", "-1"),
    ("group_max_session_timeout_ms", "2147483648"),
    ("group_max_size", "0"),
    ("group_consumer_session_timeout_ms", "0"),
    ("group_consumer_heartbeat_interval_ms", "-5"),
    ("group_consumer_max_size", "0"),
    ("offsets_retention_minutes", "0"),
    ("offsets_retention_check_interval_ms", "0"),
    ("offset_metadata_max_bytes", "-1"),
    ("segment_bytes", "10"),
    ("segment_ms", "0"),
    ("delete_retention_ms", "-1"),
    ("log_retention_check_interval_ms", "-1"),
    ("log_cleaner_backoff_ms", "-1"),
    ("producer_id_expiration_ms", "0"),
    ("connection_failed_authentication_delay_ms", "-1"),
    ("auto_create_topics", "perhaps"),
]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_a_bad_value_names_its_setting_from_every_source(tmp_path: Path, name: str, value: str) -> None:
    flag = "--" + name.replace("_", "-")
    var = "GROUPD_" + name.upper()
    with pytest.raises(config.ConfigError, match=f"^{flag}: .*from {var}") as env_err:
        config.load(_args(), env={var: value})
    assert env_err.value.setting == name
    if name != "auto_create_topics":  # a BooleanOptionalAction flag takes no value
        with pytest.raises(config.ConfigError, match=f"^{flag}: .*from the command line"):
            config.load(_args(flag, value), env={})
    f = tmp_path / "g.toml"
    f.write_text(f"{name} = {value!r}\n".replace("'", '"'))
    with pytest.raises(config.ConfigError, match=f"^{flag}: .*from {name} in {f}"):
        config.load(_args("--config", str(f)), env={})


def test_every_setting_has_a_domain() -> None:
    assert set(config.DOMAINS) == {f.name for f in dataclasses.fields(config.Config)}
    config.validate(config.Config())  # the defaults are in their domains


def test_toml_types_are_not_coerced(tmp_path: Path) -> None:
    # int(True) == 1 and int(1.5) == 1: a TOML bool or float is not an integer setting.
    for text in ("port = true", "port = 1.5", "host = 5", "auto_create_topics = 1"):
        f = tmp_path / "g.toml"
        f.write_text(text + "\n")
        with pytest.raises(config.ConfigError):
            config.load(_args("--config", str(f)), env={})


def test_edges_of_the_domains_are_accepted() -> None:
    cfg = config.load(
        _args("--port", "65535", "--metrics-port", "0", "--fsync", "interval:0", "--log-level", "WARNING"),
        env={"GROUPD_GROUP_MIN_SESSION_TIMEOUT_MS": "5000", "GROUPD_GROUP_MAX_SESSION_TIMEOUT_MS": "5000"},
    )
    assert (cfg.port, cfg.metrics_port, cfg.fsync, cfg.group_min_session_timeout_ms) == (65535, 0, "interval:0", 5000)


def test_min_session_timeout_above_max_is_refused() -> None:
    with pytest.raises(config.ConfigError, match=r"^--group-min-session-timeout-ms: 7000 is above"):
        config.load(_args("--group-min-session-timeout-ms", "7000", "--group-max-session-timeout-ms", "6999"), env={})


def test_consumer_heartbeat_interval_not_below_the_session_timeout_is_refused() -> None:
    # GroupCoordinatorConfig requires group.consumer.heartbeat.interval.ms < group.consumer.session.timeout.ms
    with pytest.raises(config.ConfigError, match=r"^--group-consumer-heartbeat-interval-ms: 45000 must be less"):
        config.load(
            _args(
                "--group-consumer-heartbeat-interval-ms", "45000", "--group-consumer-max-heartbeat-interval-ms", "60000"
            ),
            env={},
        )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--group-consumer-session-timeout-ms", "6000"),
            "session-timeout-ms: 6000 is below --group-consumer-min-session",
        ),
        (
            ("--group-consumer-session-timeout-ms", "61000"),
            "session-timeout-ms: 61000 is above --group-consumer-max-session",
        ),
        (("--group-consumer-heartbeat-interval-ms", "100"), "interval-ms: 100 is below --group-consumer-min-heartbeat"),
        (
            ("--group-consumer-heartbeat-interval-ms", "16000"),
            "interval-ms: 16000 is above --group-consumer-max-heartbeat",
        ),
        (
            ("--group-consumer-max-session-timeout-ms", "44000"),
            "max-session-timeout-ms: 44000 is below --group-consumer-min",
        ),
        (
            ("--group-consumer-max-heartbeat-interval-ms", "200"),
            "max-heartbeat-interval-ms: 200 is below --group-consumer-min",
        ),
    ],
)
def test_consumer_group_timings_outside_their_bounds_are_refused(flags: tuple[str, str], message: str) -> None:
    """GroupCoordinatorConfig's constructor: group.consumer.session.timeout.ms and heartbeat.interval.ms within
    their min/max (Kafka's 45000-60000; groupd's 250-15000 where Kafka's are 5000-15000), each min below its max."""
    with pytest.raises(config.ConfigError, match=re.escape(message)):
        config.load(_args(*flags), env={})


def test_consumer_group_timings_below_kafkas_bounds_are_taken_with_lower_bounds() -> None:
    cfg = config.load(
        _args(
            *("--group-consumer-session-timeout-ms", "6000", "--group-consumer-min-session-timeout-ms", "6000"),
            *("--group-consumer-heartbeat-interval-ms", "500", "--group-consumer-min-heartbeat-interval-ms", "500"),
        ),
        env={},
    )
    assert (cfg.group_consumer_session_timeout_ms, cfg.group_consumer_heartbeat_interval_ms) == (6000, 500)


def test_serve_with_port_99999_exits_2_naming_the_setting(tmp_path: Path) -> None:
    # Before: the port was taken modulo 65536 (99999 -> 34463) and the daemon started.
    r = subprocess.run(
        [sys.executable, "-m", "groupd", "serve", "--port", "99999", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2, r.stderr
    assert "--port: must be between 0 and 65535, not 99999" in r.stderr
    assert not (tmp_path / "d").exists()
