"""bench.cluster_group's pipeline figure: each TestGroupETL subtest's time to its last group's first
leave, read from the daemon's JSON log (issue 29 item 4)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.cluster_group import chain_done

ROOT = Path(__file__).resolve().parents[2]


def _line(at: float, event: str, **kw: object) -> str:
    seconds = f"{at:09.6f}"
    return json.dumps({"event": event, "timestamp": f"2026-11-29T10:00:{seconds}Z", **kw})


def test_each_subtest_ends_when_its_last_group_first_loses_a_member() -> None:
    lines = [
        _line(0.0, "topic_created", topic="t1"),  # the first producer's topic opens subtest 0
        _line(0.02, "topic_created", topic="a2"),
        _line(0.3, "rebalance_started", group="a-g1"),
        _line(0.3, "rebalance_started", group="a-g2"),
        _line(0.31, "rebalance_started", group="a-g3"),
        _line(0.8, "member_left", group="a-g1"),  # a member that quits after one poll
        _line(1.0, "member_left", group="a-g2"),
        _line(4.5, "member_left", group="a-g1"),
        _line(4.6, "member_left", group="a-g3"),  # level 3: the pipeline is through
        _line(4.6, "member_left", group="a-g3"),
        "not json",
        _line(5.0, "topic_deleted", topic="a2"),
        _line(5.1, "topic_created", topic="b2"),
        _line(5.2, "topic_created", topic="b3"),
        _line(5.4, "rebalance_started", group="b-g1"),
        _line(5.4, "rebalance_started", group="b-g3"),
        _line(6.0, "member_left", group="b-g1"),
        _line(14.1, "member_left", group="b-g3"),
    ]
    done = chain_done(lines)
    assert [round(x, 2) for x in done] == [4.6, 9.0]


def test_a_subtest_whose_group_never_lost_a_member_has_no_figure() -> None:
    lines = [
        _line(0.0, "topic_created", topic="t1"),
        _line(0.3, "rebalance_started", group="g1"),
        _line(0.4, "rebalance_started", group="g3"),
        _line(1.0, "member_left", group="g1"),
    ]
    assert chain_done(lines) == []


def test_the_events_it_reads_are_the_ones_the_daemon_logs() -> None:
    # the figure is only as good as these names: a rename in the daemon must fail here, not go quiet
    admin = (ROOT / "broker" / "admin_handlers.py").read_text()
    assert '"topic_created"' in admin and '"topic_deleted"' in admin
    classic = (ROOT / "coordinator" / "classic" / "manager.py").read_text()
    assert '"member_left"' in classic
