"""The README's API table must list exactly what ApiVersions advertises."""

from __future__ import annotations

import re
from pathlib import Path

from groupd.broker.node import Broker
from groupd.protocol.messages import API_BY_KEY

from groupd.config import Config


async def test_readme_table_matches_advertised_versions(tmp_path: Path) -> None:
    # async: Server() asks for the current event loop, which earlier async tests leave unset.
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = text.split("<!-- api-table:start -->")[1].split("<!-- api-table:end -->")[0]
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)-(\d+) \|$", table, re.M)
    documented = {int(k): (name, int(lo), int(hi)) for name, k, lo, hi in rows}
    broker = Broker(Config(data_dir=str(tmp_path)))
    advertised = {
        v["api_key"]: (API_BY_KEY[v["api_key"]].name, v["min_version"], v["max_version"])
        for v in broker.dispatcher.supported_versions()
    }
    assert documented == advertised
