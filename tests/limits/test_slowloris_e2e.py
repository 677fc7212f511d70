"""Slow-loris: 1,000 connections that trickle a few bytes a second without ever completing a frame
(and some that never send at all) must not delay anyone's heartbeats past a session timeout.

A real confluent-kafka group (3 members, session timeout 6 s) must see no revocation, no new
assignment and no error during the attack, and a raw-protocol member heartbeating every 200 ms
must get every heartbeat answered with NONE; its worst round trip is reported, not asserted
against a tight number (the functional bound is the session timeout).
"""

from __future__ import annotations

import asyncio
import random
import resource
import struct
import threading
import time
import uuid
from pathlib import Path

import pytest

from bench.netfuzz import GroupWatch, create_topic, rss_kb
from tests.limits.probe import HeartbeatProbe
from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e

TRICKLERS = 800
SILENT = 200
ATTACK_SECONDS = 15.0


def _raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        pytest.skip(f"needs {need} file descriptors, the hard limit is {hard}")


async def _attack(port: int, stop: threading.Event, opened: list[int]) -> None:
    writers: list[asyncio.StreamWriter] = []

    async def open_one() -> asyncio.StreamWriter:
        _r, w = await asyncio.open_connection("127.0.0.1", port)
        writers.append(w)
        opened[0] += 1
        return w

    async def trickle(w: asyncio.StreamWriter, rng: random.Random) -> None:
        # A 100 KB frame announced, then 1-3 bytes every 0.3-1 s: it never completes.
        w.write(struct.pack(">i", 100_000))
        while not stop.is_set():
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            w.write(rng.randbytes(rng.randint(1, 3)))

    rng = random.Random(7)
    tasks = []
    for batch in range(0, TRICKLERS + SILENT, 100):
        ws = await asyncio.gather(*(open_one() for _ in range(100)))
        if batch < TRICKLERS:
            tasks += [asyncio.create_task(trickle(w, random.Random(rng.random()))) for w in ws]
    while not stop.is_set():
        await asyncio.sleep(0.1)
    for t in tasks:
        t.cancel()
    for w in writers:
        w.close()


def test_slow_loris_does_not_delay_heartbeats(tmp_path: Path) -> None:
    _raise_fd_limit(TRICKLERS + SILENT + 200)
    with GroupdProcess(tmp_path / "data") as d:
        topic = f"loris-{uuid.uuid4().hex[:6]}"
        create_topic(d.bootstrap, topic, 6)
        watch = GroupWatch(d.bootstrap, topic, members=3, session_timeout_ms=6000).start()
        probe = None
        try:
            watch.wait_settled(6)
            time.sleep(2)  # the joins' last round
            baseline = list(watch.events)
            probe = HeartbeatProbe("127.0.0.1", d.port, f"loris-probe-{uuid.uuid4().hex[:6]}", 6000).join()
            assert d.proc is not None
            rss_before = rss_kb(d.proc.pid)

            stop = threading.Event()
            opened = [0]
            attacker = threading.Thread(target=lambda: asyncio.run(_attack(d.port, stop, opened)), daemon=True)
            attacker.start()
            stop.wait(ATTACK_SECONDS)
            connections_open = opened[0]
            rss_during = rss_kb(d.proc.pid)
            stop.set()
            attacker.join(30)

            assert connections_open == TRICKLERS + SILENT
            assert watch.events == baseline, f"the real group rebalanced: {watch.events[len(baseline) :]}"
            assert not watch.errors, watch.errors
            assert not probe.errors, f"heartbeat errors during the attack: {probe.errors}"
            assert len(probe.latencies) >= ATTACK_SECONDS / 0.2 / 2
            worst = max(probe.latencies)
            assert worst < 6.0  # inside the session timeout: the functional bound
            print(
                f"slow-loris: {connections_open} connections, {len(probe.latencies)} heartbeats, "
                f"max heartbeat RTT {worst * 1000:.1f} ms, RSS {rss_before} -> {rss_during} kB"
            )
        finally:
            if probe is not None:
                probe.stop()
            watch.stop()
