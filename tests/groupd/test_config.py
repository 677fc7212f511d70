from __future__ import annotations

import argparse
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
