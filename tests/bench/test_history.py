"""The bench's regression guard: figures become scores against the same run's baseline, and a score
more than 15% below the last committed one of the same mode is reported as a regression."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import history


def _results(groupd_rate: float, mock_rate: float, groupd_p99: float, mock_p99: float) -> dict:
    return {
        "quick": True,
        "commits": {
            "groupd": {"commits_per_s": groupd_rate, "p99_ms": groupd_p99},
            "mock": {"commits_per_s": mock_rate, "p99_ms": mock_p99},
        },
    }


def test_scores_are_times_better_than_the_baseline_for_rates_and_costs() -> None:
    figs = history.figures(_results(500.0, 1000.0, 20.0, 5.0))
    assert figs["commits 50x100: commits/s"]["score"] == pytest.approx(0.5)
    assert figs["commits 50x100: p99 ms"]["score"] == pytest.approx(0.25)
    # a figure whose baseline did not run is left out, not compared raw
    assert "commits 1 partition: p99 ms" not in figs


def test_a_score_more_than_15_percent_below_the_last_recorded_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history.json"
    history.record(history.figures(_results(500.0, 1000.0, 20.0, 5.0)), True, path)
    # the host got twice as slow for both: same ratio, no regression
    same = history.figures(_results(250.0, 500.0, 40.0, 10.0))
    assert history.compare(same, history.load(path), True) == []
    # groupd alone got slower: 0.5 -> 0.4 of the mock's rate (-20%); p99 -10% stays within tolerance
    worse = history.figures(_results(400.0, 1000.0, 22.0, 5.0))
    assert history.compare(worse, history.load(path), True) == ["commits 50x100: commits/s"]
    assert "REGRESSION" in capsys.readouterr().out
    # a full run is never compared with quick figures
    assert history.compare(worse, history.load(path), False) == []
