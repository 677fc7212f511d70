"""Issue 27: share groups on the live dashboard in headless Chromium, against a real daemon with
confluent-kafka ``ShareConsumer``s: the group, its member and assignment, and per share-partition the
in-flight records (acquired while a consumer holds them, then acknowledged and the start offset moved
past them once another consumer accepts them after the lock expired)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.test_share_consumer_e2e import Member, _setup, produce, wait_for
from tests.ops.test_dashboard_browser import ARTIFACTS, _chromium
from tests.support.daemon import GroupdProcess

LOCK_MS = 10_000


@pytest.mark.e2e
def test_dashboard_shows_a_share_group_and_its_in_flight_records(tmp_path: Path) -> None:
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    # The held records show as acquired only until their lock expires: 2 s was shorter than a loaded
    # machine can take from the consumer's fetch to the page's check (the row was already back to
    # available). 10 s keeps that window wide; the second consumer waits for the expiry.
    d = GroupdProcess(
        tmp_path / "data", "--dashboard-port", "0", "--group-share-record-lock-duration-ms", str(LOCK_MS)
    ).start()
    members: list[Member] = []
    try:
        (listening,) = d.events("groupd_listening")
        url = str(listening["dashboard"])
        group, topic = _setup(d)
        produce(d, topic, [f"r{i}" for i in range(5)])
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url)
                page.wait_for_selector('#status[data-status="live"]', timeout=10_000)
                card = f'article[data-group="{group}"]'

                holder = Member(d, group, topic, "hold")
                members.append(holder)
                wait_for(lambda: holder.printed("holding"), 30, "the consumer to hold its records")
                # The member's first heartbeat joins it with no partitions (they are not initialized in
                # the share-state persister yet, as with Kafka) and the group is already Stable then;
                # its next one brings them. A render of that first state can still be on the page
                # when the consumer holds its records (one render a second, later under load), so
                # the cell is awaited in a Stable one-member card, not read once.
                stable = f'{card}[data-type="share"][data-state="Stable"][data-members="1"]'
                expect(page.locator(f"{stable} table.members td.assignment")).to_have_text(
                    f"{topic}: 0", timeout=15_000
                )
                # one row element per render: its attributes and its cell are read from the same one
                row = f'{card} table.in-flight tr[data-topic="{topic}"][data-partition="0"]'
                expect(
                    page.locator(f'{row}[data-acquired="5"][data-start="0"][data-end="5"] td.available')
                ).to_have_text("0", timeout=15_000)

                # SIGKILL: the lock (LOCK_MS) expires, another consumer gets them and accepts them all
                holder.kill()
                taker = Member(d, group, topic, "accept")
                members.append(taker)
                wait_for(lambda: len(taker.records()) >= 5, 30, "the records at the second consumer")
                page.wait_for_selector(f'{row}[data-acquired="0"][data-start="5"]', timeout=15_000)

                shot = tmp_path / "dashboard-share.png"
                page.screenshot(path=str(shot), full_page=True)
                ARTIFACTS.mkdir(exist_ok=True)
                shutil.copy(shot, ARTIFACTS / "dashboard-share.png")
            finally:
                browser.close()
    finally:
        for m in members:
            m.kill()
        d.stop()
