"""Issue 21: the live dashboard in headless Chromium, against a real daemon with real consumers.

Playwright drives Debian's chromium (``/usr/bin/chromium``, installed by ``.ci/run``; Playwright's own
browser download is never used). The page must show a group forming (Stable, two members, each with
partitions) and then a rebalance happening (a third consumer joins: a timeline entry names it, with
the time consumers were paused), without reloading: everything arrives over the event stream. The
screenshot is kept as an artifact (its path is printed) and copied to ``tests/artifacts/``.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from tests.support.daemon import GroupdProcess
from tests.support.groups import Member, admin_for, wait_balanced

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("the dashboard test needs Debian's chromium (apt-get install chromium)")
    return exe


@pytest.mark.e2e
def test_dashboard_shows_a_group_forming_and_a_rebalance_in_headless_chromium(tmp_path: Path) -> None:
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    from confluent_kafka.admin import NewTopic

    unique = uuid.uuid4().hex[:8]
    topic, group = f"orders-{unique}", f"billing-{unique}"
    d = GroupdProcess(tmp_path / "data", "--dashboard-port", "0").start()
    members: list[Member] = []
    try:
        (listening,) = d.events("groupd_listening")
        url = str(listening["dashboard"])
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        admin_for(d.bootstrap).create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(
            15
        )
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url)
                page.wait_for_selector('#status[data-status="live"]', timeout=10_000)
                card = f'article[data-group="{group}"]'

                members = [
                    Member("confluent-kafka", d.bootstrap, group, topic, client_id=f"billing-{i}").start()
                    for i in range(2)
                ]
                wait_balanced(d.bootstrap, group, topic, 2, 4)
                page.wait_for_selector(f'{card}[data-state="Stable"][data-members="2"]', timeout=15_000)
                rows = page.locator(f"{card} table.members tbody tr")
                assert sorted(rows.locator("td").nth(0).all_inner_texts()) != []
                assignments = {
                    rows.nth(i).get_attribute("data-client"): rows.nth(i).locator("td.assignment").inner_text()
                    for i in range(rows.count())
                }
                assert set(assignments) == {"billing-0", "billing-1"}
                assert all(text.startswith(f"{topic}: ") for text in assignments.values()), assignments
                owned = sorted(int(p) for text in assignments.values() for p in text.split(": ")[1].split(","))
                assert owned == [0, 1, 2, 3]
                generation = int(page.get_attribute(card, "data-generation") or 0)
                assert page.locator(f'{card} .timeline li[data-generation="{generation}"]').count() == 1
                assert page.locator(f"{card} .badge").inner_text() == "Stable"

                # A third consumer joins: the group rebalances and the timeline says who came.
                members.append(Member("confluent-kafka", d.bootstrap, group, topic, client_id="billing-2").start())
                wait_balanced(d.bootstrap, group, topic, 3, 4)
                page.wait_for_selector(f'{card}[data-state="Stable"][data-members="3"]', timeout=15_000)
                newest = page.locator(f'{card} .timeline li[data-outcome="stable"]').first
                newest.locator(".joined", has_text="billing-2").wait_for(timeout=10_000)
                assert int(newest.get_attribute("data-generation") or 0) > generation
                assert int(newest.get_attribute("data-from") or 0) >= generation
                deadline = time.monotonic() + 10
                while newest.locator(".paused").inner_text() == "\u2013":  # no last SyncGroup answer yet
                    assert time.monotonic() < deadline, "no pause time shown"
                    time.sleep(0.2)
                assert newest.locator(".paused").inner_text().endswith(("ms", " s"))
                page.wait_for_selector(f'.topic[data-topic="{topic}"]', timeout=5_000)

                shot = tmp_path / "dashboard.png"
                page.screenshot(path=str(shot), full_page=True)
                ARTIFACTS.mkdir(exist_ok=True)
                shutil.copy(shot, ARTIFACTS / "dashboard.png")
                print(f"dashboard screenshot: {shot} (copied to {ARTIFACTS / 'dashboard.png'})")
            finally:
                browser.close()
        for m in members:
            m.stop()
        assert not [m.error for m in members if m.error]
        members = []
    finally:
        for m in members:
            m.stop()
        d.stop()
