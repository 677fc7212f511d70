"""Frames cut anywhere by the reads: ``Connection.data_received`` hands the dispatcher every frame
whole, as ``bytes``, once and in order, whether a frame arrives in one read, across several, or
ends inside a read that carries the next ones (a producer's 256 KiB reads of ~100 KB Produce
requests, issue 26: only the rest of a buffered frame joins the buffer, the frames after it are
sliced out of the read itself)."""

from __future__ import annotations

import asyncio
import itertools
import struct

from groupd.protocol.server import Connection, Request, Server
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import FakeTransport


class Recording:
    """Answers every request at once (or parks it, ``park``) and keeps the frames it was handed."""

    def __init__(self, park: bool) -> None:
        self.park = park
        self.frames: list[bytes] = []
        self.parked: list[Request] = []

    def __call__(self, conn: Connection, frame: bytes) -> None:
        assert type(frame) is bytes
        self.frames.append(frame)
        req = Request(conn, 12, 0, 0, None, {}, lambda _r, _b: b"")
        conn.enqueue(req)
        if self.park:
            self.parked.append(req)
        else:
            req.respond_raw(b"\x00\x00\x00\x04resp")

    def answer_all(self) -> None:
        parked, self.parked = self.parked, []
        for r in parked:
            r.respond_raw(b"\x00\x00\x00\x04resp")


def _payload(n: int, corr: int) -> bytes:
    return struct.pack(">hhi", 12, 0, corr) + bytes((corr + i) % 251 for i in range(n - 8))


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([8, 9, 64, 300, 4096, 70_000]), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 200_000), max_size=12),
    park=st.booleans(),
)
def test_every_frame_reaches_the_dispatcher_whole_and_in_order(sizes: list[int], cuts: list[int], park: bool) -> None:
    payloads = [_payload(n, i) for i, n in enumerate(sizes)]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})

    async def feed() -> Recording:
        rec = Recording(park)
        server = Server(rec, max_inflight=1000, max_inflight_bytes=0, idle_timeout_ms=0)
        conn = Connection(server)
        t = FakeTransport(asyncio.get_running_loop())
        t.protocol = conn
        conn.connection_made(t)
        for a, b in itertools.pairwise(bounds):
            conn.data_received(stream[a:b])
            if park:  # answered between reads: the frames read meanwhile were held, then go in order
                for _ in range(len(payloads)):
                    rec.answer_all()
                    for _ in range(3):
                        await asyncio.sleep(0)
            assert not conn.closed
        for _ in range(len(payloads) + 1):
            rec.answer_all()
            for _ in range(3):
                await asyncio.sleep(0)
        return rec

    rec = asyncio.run(feed())
    assert rec.frames == payloads
