"""The admin commands' refusals a newcomer meets before any broker is asked (issue 29, item 8)."""

from __future__ import annotations

import pytest

from groupd import cli


def test_groups_list_refuses_an_unknown_state_with_kafkas_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["groups", "list", "--bootstrap-server", "127.0.0.1:1", "--state", "Bogus"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "'Bogus'" in err
    for state in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"):
        assert state in err


def test_groups_list_state_is_case_insensitive() -> None:
    args = cli.build_parser().parse_args(["groups", "list", "--state", "stable", "--state", "EMPTY"])
    assert args.state == ["Stable", "Empty"]
