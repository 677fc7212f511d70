"""Connections closed for bad frames are logged a few at a time, then counted (issue 29, item 6):
two minutes of fuzzing wrote one ``connection_closed`` warning per connection, 102,842 lines."""

from __future__ import annotations

import struct

from groupd.protocol import ratelimit
from structlog.testing import capture_logs

from tests.fuzz.harness import FuzzTarget

CONNECTIONS = 1000


def test_a_storm_of_bad_frames_is_a_few_lines_and_a_count(target: FuzzTarget) -> None:
    ratelimit.flush_all()  # a window another test opened would hold back this test's first lines
    bad_frame = struct.pack(">i", -7)  # a negative frame size: the connection is closed at once
    with capture_logs() as logs:
        for _ in range(CONNECTIONS):
            conn = target.feed(bad_frame, [len(bad_frame)])
            assert conn.close_reasons == ["frame size out of bounds"]
        during = [e for e in logs if e["event"] == "connection_closed"]
        ratelimit.flush_all()  # at shutdown the count held back is logged
    closed = [e for e in logs if e["event"] == "connection_closed"]
    assert len(during) <= 10, len(during)  # the burst of server.closed_log
    assert all(e["log_level"] == "warning" and e["reason"] == "frame size out of bounds" for e in closed)
    # Every connection is accounted for: each line stands for itself and the ones it suppressed.
    assert sum(1 + e.get("suppressed", 0) for e in closed) == CONNECTIONS
    assert closed[-1]["suppressed"] > 0
