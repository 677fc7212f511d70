"""The network fuzzer, bounded: 8,000 random and mutated frames over many connections to a real
daemon while a real consumer group works; the group sees nothing, the daemon lives, RSS stays put.

The full run (>= 100,000 frames) is ``python -m bench.netfuzz --frames 100000 --group --pid PID``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import netfuzz
from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e


def test_fuzzed_frames_leave_the_daemon_and_a_real_group_unharmed(tmp_path: Path) -> None:
    with GroupdProcess(tmp_path / "data") as d:
        assert d.proc is not None
        result = netfuzz.run(d.bootstrap, frames=8000, connections=40, seed=3, pid=d.proc.pid, group=True)
        assert d.proc.poll() is None
        assert result["alive"]
        assert result["frames"] == 8000
        assert result["closed_by_daemon"] > 0  # the bad frames were answered by closes, as they should be
        assert result["group_events_during_fuzz"] == [] and result["group_errors"] == []
        assert result["rss_kb_after"] - result["rss_kb_before"] < 50 * 1024
        # Closes of bad frames are warnings; anything logged as an error is a bug.
        errors = d.events("handler_failed") + d.events("response_encode_failed")
        assert not errors, errors
