"""Issue 21: the live dashboard in headless Chromium, against a real daemon with real consumers.

Playwright drives Debian's chromium (``/usr/bin/chromium``, installed by ``.ci/run``; Playwright's own
browser download is never used). The page must show a group forming (Stable, two members, each with
partitions) and then a rebalance happening (a third consumer joins: a timeline entry names it, with
the time consumers were paused), without reloading: everything arrives over the event stream. The
screenshot is kept as an artifact (its path is printed) and copied to ``tests/artifacts/``.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.coordinator.harness import assignment, sub
from tests.support.daemon import GroupdProcess
from tests.support.groups import Member, admin_for, wait_balanced
from tests.support.raw_client import RawClient

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
PAUSED = re.compile(r"(ms| s)$")  # a pause time shown ("\u2013": none yet)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("the dashboard test needs Debian's chromium (apt-get install chromium)")
    return exe


@pytest.mark.e2e
def test_dashboard_shows_a_group_forming_and_a_rebalance_in_headless_chromium(tmp_path: Path) -> None:
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
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
                # the page re-renders every second: what follows is awaited, not read once (a read
                # right after a wait for another element may meet the render before or after it)
                expect(page.locator(f'{card} .timeline li[data-generation="{generation}"]')).to_have_count(
                    1, timeout=10_000
                )
                expect(page.locator(f"{card} .badge")).to_have_text("Stable", timeout=10_000)

                # A third consumer joins: the group rebalances and the timeline says who came.
                members.append(Member("confluent-kafka", d.bootstrap, group, topic, client_id="billing-2").start())
                wait_balanced(d.bootstrap, group, topic, 3, 4)
                page.wait_for_selector(f'{card}[data-state="Stable"][data-members="3"]', timeout=15_000)
                newest = page.locator(f'{card} .timeline li[data-outcome="stable"]').first
                newest.locator(".joined", has_text="billing-2").wait_for(timeout=10_000)
                assert int(newest.get_attribute("data-generation") or 0) > generation
                assert int(newest.get_attribute("data-from") or 0) >= generation
                # "\u2013" until the last SyncGroup answer is known
                expect(newest.locator(".paused")).to_have_text(PAUSED, timeout=10_000)
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


def _join(client: RawClient, group: str, member_id: str, topic: str) -> int:
    """Send a JoinGroup v3 (no MEMBER_ID_REQUIRED round) without waiting: it parks during a rebalance."""
    body = {
        "group_id": group,
        "session_timeout_ms": 30_000,
        "rebalance_timeout_ms": 60_000,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": sub(topic)}],
    }
    return client.send("JoinGroup", 3, body)


def _sync(client: RawClient, group: str, generation: int, member_id: str, assignments: list[Any]) -> int:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id, "assignments": assignments}
    return client.send("SyncGroup", 1, body)


@pytest.mark.e2e
def test_dashboard_of_a_cluster_shows_the_brokers_and_whom_a_rebalance_waits_for(tmp_path: Path) -> None:
    # Issue 29: in cluster mode the page showed no brokers, and a rebalancing group not whom it waited
    # for. Three brokers; a group whose members are raw clients, so the test decides when each rejoins.
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    from confluent_kafka.admin import NewTopic

    unique = uuid.uuid4().hex[:8]
    topic, group = f"orders-{unique}", f"billing-{unique}"
    d = GroupdProcess(
        tmp_path / "data", "--brokers", "3", "--dashboard-port", "0", "--group-initial-rebalance-delay-ms", "0"
    ).start()
    clients: list[RawClient] = []
    try:
        (listening,) = d.events("groupd_listening")
        url = str(listening["dashboard"])
        addresses = {int(n): str(a) for n, a in dict(listening["brokers"]).items()}  # type: ignore[call-overload]
        assert len(addresses) == 3
        admin_for(d.bootstrap).create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])[topic].result(
            15
        )
        probe = RawClient(d.port)
        found = probe.request("FindCoordinator", 3, {"key": group, "key_type": 0})
        probe.close()
        assert found["error_code"] == 0
        coordinator, coordinator_port = found["node_id"], found["port"]

        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1100})
                page.goto(url)
                page.wait_for_selector('#status[data-status="live"]', timeout=10_000)

                # The brokers: each with its address, state and the __consumer_offsets partitions it
                # leads (partition p on the (p % 3)-th broker), the 6 partitions' leaders among them.
                page.wait_for_selector("#brokers:not([hidden]) table.brokers tbody tr", timeout=10_000)
                rows = page.locator("table.brokers tbody tr")
                assert rows.count() == 3
                nodes = sorted(addresses)
                leaders = 0
                for i in range(3):
                    row = rows.nth(i)
                    node = int(row.get_attribute("data-node") or -1)
                    assert row.locator("td.address").inner_text() == addresses[node]
                    assert row.get_attribute("data-state") == "live"
                    parts = [int(p) for p in (row.get_attribute("data-coordinator-partitions") or "").split(",")]
                    assert parts == [p for p in range(50) if nodes[p % 3] == node], node
                    assert row.locator("td.coordinator-partitions").inner_text().startswith(f"{len(parts)} (")
                    leaders += int(row.get_attribute("data-leaders") or 0)
                page.wait_for_function(
                    "() => [...document.querySelectorAll('table.brokers tbody tr')]"
                    ".reduce((s, r) => s + Number(r.dataset.leaders), 0) === 6",
                    timeout=10_000,
                )

                # A group of one member (b), formed and synced.
                b, c = RawClient(coordinator_port), RawClient(coordinator_port)
                clients += [b, c]
                joined = b.receive("JoinGroup", 3, _join(b, group, "", topic))
                assert joined["error_code"] == 0, joined
                b_id, gen = joined["member_id"], joined["generation_id"]
                everything = [{"member_id": b_id, "assignment": assignment(topic, *range(6))}]
                assert b.receive("SyncGroup", 1, _sync(b, group, gen, b_id, everything))["error_code"] == 0
                card = f'article[data-group="{group}"]'
                page.wait_for_selector(f'{card}[data-state="Stable"][data-members="1"]', timeout=10_000)
                expect(page.locator(card)).to_have_attribute("data-coordinator", str(coordinator), timeout=10_000)
                expect(page.locator(f"{card} .coordinator")).to_have_text(str(coordinator), timeout=10_000)
                expect(page.locator(f"{card} .waiting")).to_have_count(0, timeout=10_000)

                # c joins: the rebalance waits for b, who has not rejoined (it would on a heartbeat).
                c_join = _join(c, group, "", topic)
                waiting = f"{card} .waiting li"
                page.wait_for_selector(f'{card}[data-state="PreparingRebalance"] .waiting li[data-waiting="rejoin"]')
                expect(page.locator(waiting)).to_have_count(1, timeout=10_000)
                expect(page.locator(waiting)).to_have_attribute("data-member", b_id, timeout=10_000)
                expect(page.locator(waiting)).to_contain_text("has not rejoined", timeout=10_000)

                # b rejoins: the join phase ends; now the leader's SyncGroup (the assignment) and the
                # follower's are awaited, the leader first.
                b_joined = b.receive("JoinGroup", 3, _join(b, group, b_id, topic))
                c_joined = c.receive("JoinGroup", 3, c_join)
                gen = b_joined["generation_id"]
                leader_id = b_joined["leader"]
                c_id = c_joined["member_id"]
                page.wait_for_selector(
                    f'{card}[data-state="CompletingRebalance"] .waiting li[data-waiting="assignment"]'
                )
                got = [
                    (
                        page.locator(waiting).nth(i).get_attribute("data-member"),
                        page.locator(waiting).nth(i).get_attribute("data-waiting"),
                    )
                    for i in range(page.locator(waiting).count())
                ]
                follower_id = c_id if leader_id == b_id else b_id
                assert got == [(leader_id, "assignment"), (follower_id, "sync")]

                # Both sync: Stable, nobody awaited; the entry shows paused and sync phase apart.
                split = [
                    {"member_id": b_id, "assignment": assignment(topic, 0, 1, 2)},
                    {"member_id": c_id, "assignment": assignment(topic, 3, 4, 5)},
                ]
                leader, follower = (b, c) if leader_id == b_id else (c, b)
                follower_sync = _sync(follower, group, gen, follower_id, [])
                assert leader.receive("SyncGroup", 1, _sync(leader, group, gen, leader_id, split))["error_code"] == 0
                assert follower.receive("SyncGroup", 1, follower_sync)["error_code"] == 0
                page.wait_for_selector(f'{card}[data-state="Stable"][data-members="2"]', timeout=10_000)
                expect(page.locator(f"{card} .waiting")).to_have_count(0, timeout=10_000)
                newest = page.locator(f'{card} .timeline li[data-outcome="stable"]').first
                expect(newest).to_have_attribute("data-generation", str(gen), timeout=10_000)
                # (the sync phase here lasts as long as the checks above held the leader's SyncGroup back)
                page.wait_for_function(
                    f"() => /(ms| s)$/.test(document.querySelector('{card} .timeline li .sync-phase')?.textContent)",
                    timeout=10_000,
                )
                expect(newest.locator(".paused")).to_have_text(PAUSED, timeout=10_000)
                assert "analyze report" in (newest.locator(".sync-phase").locator("..").get_attribute("title") or "")

                shot = tmp_path / "dashboard-cluster.png"
                page.screenshot(path=str(shot), full_page=True)
                ARTIFACTS.mkdir(exist_ok=True)
                shutil.copy(shot, ARTIFACTS / "dashboard-cluster.png")
                print(f"dashboard screenshot: {shot} (copied to {ARTIFACTS / 'dashboard-cluster.png'})")
            finally:
                browser.close()
    finally:
        for cl in clients:
            cl.close()
        d.stop()
