"""groupd's own command line as a newcomer meets it (issue 29, item 8)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

GROUPD = [sys.executable, "-m", "groupd"]


def test_scram_credential_without_a_terminal_reads_stdin() -> None:
    done = subprocess.run(
        [*GROUPD, "scram-credential", "alice", "--mechanism", "SCRAM-SHA-256"],
        input="secret\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('[users."alice"]')
    assert "SCRAM-SHA-256" in done.stdout
    assert "Warning" not in done.stderr


def test_scram_credential_with_nothing_on_stdin_is_one_line() -> None:
    done = subprocess.run(
        [*GROUPD, "scram-credential", "alice"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_serve_help_names_each_env_var_and_one_default() -> None:
    from groupd import cli

    parser = cli.build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    helps = {a.dest: a.help or "" for a in serve._actions if a.dest not in ("help",)}
    assert helps["config"].endswith("(env GROUPD_CONFIG)")
    for dest, text in helps.items():
        if dest == "config":
            continue
        assert f"env GROUPD_{dest.upper()})" in text, (dest, text)
        assert text.count("(default:") == 1, (dest, text)
    assert helps["port"].endswith("(default: 9092; env GROUPD_PORT)")


def test_log_lines_leave_out_an_absent_instance(capsys: pytest.CaptureFixture[str]) -> None:
    import structlog

    from groupd import logs

    saved = structlog.get_config()
    try:
        logs.configure("json", "info")
        log = structlog.get_logger("test")
        log.info("member_joined", member="m-1", instance=None)
        log.info("member_joined", member="m-2", instance="i-2")
    finally:
        structlog.configure(**saved)
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert "instance" not in first
    assert second["instance"] == "i-2"
