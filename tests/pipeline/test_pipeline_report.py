"""report.html: self-contained, with every plot and the anomaly list."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess

import pytest

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


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("headless check needs Debian's chromium (apt-get install chromium)")
    return exe


def _headless(exe: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_report_renders_in_headless_chromium(analyzed, tmp_path) -> None:
    exe = _chromium()
    # A copy of the page that, once loaded, writes every image's state into its title.
    probe = tmp_path / "probe.html"
    probe.write_text(
        analyzed.report.read_text(encoding="utf-8").replace(
            "</body>",
            "<script>window.addEventListener('load', () => { document.title = 'IMAGES ' + "
            "[...document.images].map(i => i.id + '=' + (i.complete && i.naturalWidth > 0 ? "
            "i.naturalWidth + 'x' + i.naturalHeight : 'broken')).join(' '); });</script></body>",
        ),
        encoding="utf-8",
    )
    dom = _headless(exe, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    title = re.search(r"<title>IMAGES ([^<]*)</title>", dom.stdout)
    assert title, dom.stderr[-2000:]
    images = dict(item.split("=") for item in title.group(1).split())
    assert set(images) == {"plot-generations", "plot-rebalances", "plot-progress"}
    for name, size in images.items():
        width, height = map(int, size.split("x"))  # "broken" fails here
        assert width > 300 and height > 100, (name, size)

    shot = analyzed.out / "report.png"
    _headless(exe, "--window-size=1280,2600", f"--screenshot={shot}", analyzed.report.as_uri())
    assert shot.read_bytes().startswith(PNG)
    print(f"report screenshot: {shot}")
