"""LogLimiter: one line per key per interval, then the count of what was held back."""

from __future__ import annotations

import asyncio
from typing import Any

from groupd.protocol import ratelimit
from groupd.protocol.ratelimit import LogLimiter


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event, fields))

    def error(self, event: str, **fields: Any) -> None:
        self.lines.append(("error", event, fields))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_is_one_line_then_the_count_with_the_next_line_after_the_interval() -> None:
    rec, clock = Recorder(), Clock()
    lim = LogLimiter(rec, 10.0, clock=clock)
    assert lim.warning("connection_refused", key="max", peer="a:1") is True
    for i in range(3517):
        assert lim.warning("connection_refused", key="max", peer=f"a:{i + 2}") is False
    assert rec.lines == [("warning", "connection_refused", {"peer": "a:1"})]
    clock.now += 10.0  # no event loop here: the count goes out with the next line
    assert lim.warning("connection_refused", key="max", peer="b:1") is True
    assert rec.lines[-1] == (
        "warning",
        "connection_refused",
        {"peer": "b:1", "suppressed": 3517, "suppressed_window_s": 10.0},
    )


def test_keys_and_events_are_limited_separately() -> None:
    rec, clock = Recorder(), Clock()
    lim = LogLimiter(rec, 10.0, clock=clock)
    for _ in range(5):
        lim.error("storage.append.failed", key="/d/t-0", path="/d/t-0")
        lim.error("storage.append.failed", key="/d/t-1", path="/d/t-1")
        lim.error("storage.fsync.failed", key="/d/t-0", path="/d/t-0")
    assert [(e, f["path"]) for _, e, f in rec.lines] == [
        ("storage.append.failed", "/d/t-0"),
        ("storage.append.failed", "/d/t-1"),
        ("storage.fsync.failed", "/d/t-0"),
    ]


def test_too_many_keys_share_one_window() -> None:
    rec, clock = Recorder(), Clock()
    lim = LogLimiter(rec, 10.0, max_keys=3, clock=clock)
    for host in range(100):
        lim.warning("sasl_authentication_failed", key=f"10.0.0.{host}")
    assert len(rec.lines) == 4  # three keys of their own, then everyone else together
    lim.flush()
    assert rec.lines[-1][2]["suppressed"] == 95  # 97 shared the window: the first and this line are two


def test_flush_reports_every_pending_count_and_forgets() -> None:
    rec, clock = Recorder(), Clock()
    lim = LogLimiter(rec, 10.0, clock=clock)
    lim.warning("e", key=1, n=1)
    lim.warning("e", key=1, n=2)
    lim.warning("e", key=1, n=3)
    lim.warning("f", key=1, n=1)
    ratelimit.flush_all()
    # The last held line is logged; it stands for itself and the one before it.
    assert rec.lines[-1] == ("warning", "e", {"n": 3, "suppressed": 1, "suppressed_window_s": 10.0})
    assert len(rec.lines) == 3  # "f" held nothing back
    lim.warning("e", key=1, n=4)  # a new window: logged at once
    assert rec.lines[-1] == ("warning", "e", {"n": 4})


async def test_on_a_loop_the_window_end_logs_the_count_even_when_the_flood_stopped() -> None:
    rec = Recorder()
    lim = LogLimiter(rec, 0.05)
    for i in range(10):
        lim.error("offsets_append_failed", key=7, partition=7, i=i)
    assert len(rec.lines) == 1
    await asyncio.sleep(0.2)
    assert rec.lines[1] == (
        "error",
        "offsets_append_failed",
        {"partition": 7, "i": 9, "suppressed": 8, "suppressed_window_s": 0.05},
    )
    # The closing line opened a window of its own; it ended empty and the key is forgotten.
    assert len(rec.lines) == 2
    assert lim.error("offsets_append_failed", key=7, partition=7, i=10) is True


def test_a_burst_logs_the_first_lines_of_a_window_then_holds_back() -> None:
    rec, clock = Recorder(), Clock()
    lim = LogLimiter(rec, 10.0, burst=3, clock=clock)
    logged = [lim.warning("connection_closed", key=("bad frame", "h"), conn=i) for i in range(100)]
    assert logged == [True] * 3 + [False] * 97
    assert [f["conn"] for _, _, f in rec.lines] == [0, 1, 2]
    clock.now += 10.0
    assert lim.warning("connection_closed", key=("bad frame", "h"), conn=100) is True
    assert rec.lines[-1][2] == {"conn": 100, "suppressed": 97, "suppressed_window_s": 10.0}
