"""``--brokers``: its domain and what it cannot be combined with, refused before anything starts."""

from __future__ import annotations

import pytest
from groupd.broker.settings import Config

from groupd import config


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"brokers": 0}, "brokers"),
        ({"brokers": 65}, "brokers"),
        ({"brokers": 3, "port": 65534}, "ports 65534\\+2 pass 65535"),
        ({"brokers": 2, "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"}, "need a single listener"),
    ],
)
def test_impossible_clusters_are_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(config.ConfigError, match=message):
        config.validate(Config(**settings))  # type: ignore[arg-type]


def test_a_cluster_on_free_ports_or_consecutive_ones_is_accepted() -> None:
    assert config.validate(Config(brokers=3, port=0)).brokers == 3
    assert config.validate(Config(brokers=3, port=65533)).brokers == 3
