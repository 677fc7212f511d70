"""report.html: self-contained, with every plot and the anomaly list."""

from __future__ import annotations

import base64
import re

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_is_self_contained_with_three_plots(analyzed) -> None:
    page = analyzed.report.read_text(encoding="utf-8")
    images = re.findall(r'<img class="plot" id="plot-(\w+)"[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert [name for name, _ in images] == ["generations", "rebalances", "progress"]
    for _, data in images:
        png = base64.b64decode(data)
        assert png.startswith(PNG) and len(png) > 10_000
    # nothing to fetch: no external scripts, styles, fonts or images
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert "http://" not in page and "https://" not in page


def test_report_lists_the_anomalies_and_rebalances(analyzed) -> None:
    page = analyzed.report.read_text(encoding="utf-8")
    assert "Anomalies (4)" in page
    assert page.count('class="kind-') == 4
    assert "committed offset went from 20 back to 15" in page
    assert "assigned to 2 members: m1, m4" in page
    assert page.count("subscribed but assigned to no member") == 2
    assert "billing g1→g2" not in page  # the rebalance labels live in the plot, the table has columns
    assert page.count("<tr>") >= 4 + 4 + 7
