"""The README's API table must list exactly what ApiVersions advertises, and which versions Kafka 4 removed."""

from __future__ import annotations

import re
from pathlib import Path

from groupd.broker.node import Broker
from groupd.protocol.messages import API_BY_KEY

from groupd.config import Config
from tests.protocol.kio_oracle import kio_class


def _readme_rows() -> list[tuple[str, ...]]:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = text.split("<!-- api-table:start -->")[1].split("<!-- api-table:end -->")[0]
    return re.findall(r"^\| (\w+) \| (\d+) \| (\d+)-(\d+) \| ([\d-]+|—) \|$", table, re.M)


async def test_readme_table_matches_advertised_versions(tmp_path: Path) -> None:
    # async: Server() asks for the current event loop, which earlier async tests leave unset.
    documented = {int(k): (name, int(lo), int(hi)) for name, k, lo, hi, _removed in _readme_rows()}
    broker = Broker(Config(data_dir=str(tmp_path)))
    advertised = {
        v["api_key"]: (API_BY_KEY[v["api_key"]].name, v["min_version"], v["max_version"])
        for v in broker.dispatcher.supported_versions()
    }
    assert documented == advertised


def _as_range(versions: list[int]) -> str:
    if not versions:
        return "—"
    assert versions == list(range(versions[0], versions[-1] + 1)), versions
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]}-{versions[-1]}"


def test_readme_says_which_versions_kafka_4_removed() -> None:
    # kio is generated from Kafka 4.x's message specs: the versions it lacks are the ones 4.0 removed
    # (KIP-896), and they are all at the bottom of a range.
    for name, _key, lo, hi, removed in _readme_rows():
        missing = [v for v in range(int(lo), int(hi) + 1) if kio_class(name, v, "request") is None]
        assert removed == _as_range(missing), name
