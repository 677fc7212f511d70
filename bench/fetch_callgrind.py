"""The daemon's instructions per small Fetch request (issue 29 item 4), load-insensitive: one
``groupd serve`` under callgrind, raw clients, the counters zeroed before and dumped after N
requests (as ``bench.produce_callgrind`` does for Produce). What it counts is the server's whole cost
of the request (read, frame, header, dispatch, fetch session, cluster leader check, read of the
logs, answer, write), the figure that franz-go's TestGroupETL multiplies by ~40k Fetch requests at
three brokers.

Shapes (``--shape``), franz-go's Fetch (v12, a KIP-227 session, min_bytes 1, max_wait 5 s, the
partitions' current leader epochs):
  session  incremental fetches of a session of 2 partitions with data ready: each request names
           both partitions at their new fetch offsets and is answered one batch of ``--records``
           records from each (``partition_max_bytes`` is one batch: the logs are filled with
           batches before the counters are zeroed).
  parked   a fetch at the log end (the session's 2 partitions, the one that moved named), parked,
           woken by a one-record Produce (acks=all, no producer id) on another connection: the
           figure is per pair (the Produce's cost included: ``bench.produce_callgrind --shape
           small`` gives it alone).

    python -m bench.fetch_callgrind [N] [--shape session|parked] [--brokers 1] [--records 3]
                                    [--gap-ms 10] [--out cg.out] [--annotate 25]
    python -m bench.fetch_callgrind [N] --cprofile out.prof   # the same load under cProfile instead

Figures (2026-11-29, 400-500 requests or pairs each; callgrind counts are load-insensitive), before
(0b5b0a9) -> after the cuts of issue 29 item 4 (h/fetchc):
  session, 1 broker   281,458 -> 175,563 instructions per Fetch (-38%)
  session, 3 brokers  289,152 -> 183,415 (-37%)
  parked,  1 broker   498,436 -> 392,764 per pair (-21%); the pair's Produce alone is ~185k
                      (``bench.produce_callgrind --shape small``: 186,476 before the last step
                      below, 185,101 after; its handler is untouched here), so the parked Fetch's
                      own share went ~312k -> ~208k (-33%)
  parked,  3 brokers  518,230 -> 416,427 per pair (-20%)
What moved it, in order (each step's session figure at 1 broker):
  - the request read and the answer written in C (``broker/data_plane/_fetch.c`` through
    ``fetch_wire.py``: the dispatcher's ``body_parsers`` and new ``response_builders`` hooks; the
    generic codecs, ~2.8 us to read a 2-partition incremental Fetch and ~4.5 us to write its
    answer, take whatever the C code hands back): 281k -> 222k;
  - ``FetchHandler.read`` building each partition's answer once, a read at the log end returning
    before any snapshot, an incremental session request handing on the entries it named instead
    of new ones: -> 202k;
  - ``new_context``'s incremental branch inline: -> 197k;
  - ``PartitionLog.read`` where the last read ended in the active segment as one pread and its
    whole batches (``_read_tail``): -> 175k.
  The parked pair also lost its uvloop timer per parked fetch (made, cancelled and freed for every
  fetch, almost all woken by an append within ms): parked fetches now expire from one queue per
  max wait under a single loop timer (Kafka's purgatory: a timing wheel, not a timer each); and
  the server no longer calls ``_check_reading`` for a blocked connection with nothing held
  (twice a request answered later, Produce's too).
What is left is the interpreter (``_PyEval_EvalFrameDefault`` ~34% of the instructions, dict
lookups and allocation most of the rest), spread over ~134 calls of a session Fetch, builtins
included (``--cprofile``; 276 before): the server's read and write path, dispatch, the session
(update, request entries, ``finish``), ``FetchHandler.read`` and the log read.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from typing import Any

from groupd.storage import records as rec

from .produce_callgrind import _summary, common_options, measure, start_profiled, topic_leaders

_LAST = struct.Struct(">qi")  # baseOffset, length


def _next_offset(records: bytes, at: int) -> int:
    """The offset after the last batch of ``records`` (``at`` if there is none)."""
    pos, end = 0, at
    while pos + rec.HEADER_SIZE <= len(records):
        base, length = _LAST.unpack_from(records, pos)
        end = base + struct.unpack_from(">i", records, pos + 23)[0] + 1
        pos += rec.LOG_OVERHEAD + length
    return end


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.fetch_callgrind", description=__doc__.split("\n\n")[0])
    common_options(ap)
    ap.add_argument("--shape", choices=("session", "parked"), default="session")
    ap.add_argument("--records", type=int, default=3, help="records per batch of the session shape")
    ap.add_argument(
        "--gap-ms", type=float, default=10.0, help="parked: wait this long after the Fetch before the Produce"
    )
    args = ap.parse_args()
    t, out = start_profiled(args, "groupd-fetch-callgrind-")
    try:
        from tests.support.raw_client import RawClient

        port = int(t.bootstrap.rsplit(":", 1)[1])
        ports, leaders = topic_leaders(port, "f")
        lead = leaders[0][0]
        parts = [p for p in sorted(leaders) if leaders[p][0] == lead][:2]
        assert len(parts) == 2, leaders
        producer = RawClient(ports[lead], timeout=60)
        fetcher = RawClient(ports[lead], timeout=60)
        now = int(time.time() * 1000)
        warm = 200
        per_fetch = args.records if args.shape == "session" else 1
        batch = rec.build_batch([(b"k%d" % i, b"v" * 50, (), now) for i in range(per_fetch)])

        def produce_body(p: int) -> dict[str, Any]:
            return {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30000,
                "topic_data": [{"name": "f", "partition_data": [{"index": p, "records": batch}]}],
            }

        offsets = dict.fromkeys(parts, 0)

        def entry(p: int) -> dict[str, Any]:
            return {
                "partition": p,
                "current_leader_epoch": leaders[p][1],
                "fetch_offset": offsets[p],
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": len(batch) if args.shape == "session" else 1 << 20,
            }

        session = [0, 0]  # id, epoch

        def fetch_send(named: list[int]) -> int:
            body = {
                "replica_id": -1,
                "max_wait_ms": 5000,
                "min_bytes": 1,
                "max_bytes": 50 << 20,
                "isolation_level": 0,
                "session_id": session[0],
                "session_epoch": session[1],
                "topics": [{"topic": "f", "partitions": [entry(p) for p in named]}] if named else [],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            return fetcher.send("Fetch", 12, body)

        def fetch_receive(corr: int) -> list[int]:
            resp = fetcher.receive("Fetch", 12, corr)
            assert resp["error_code"] == 0, resp
            session[0] = resp["session_id"]
            session[1] += 1
            moved = []
            for tr in resp["responses"]:
                for pr in tr["partitions"]:
                    assert pr["error_code"] == 0, pr
                    if pr["records"]:
                        offsets[pr["partition_index"]] = _next_offset(pr["records"], offsets[pr["partition_index"]])
                        moved.append(pr["partition_index"])
            return moved

        if args.shape == "session":
            # the logs filled first: one batch per fetch and partition, for the warm-up and the measure
            total = warm + args.n + 1
            for _ in range(0, total, 100):
                corrs = [producer.send("Produce", 9, produce_body(p)) for _ in range(100) for p in parts]
                for corr in corrs:
                    pr = producer.receive("Produce", 9, corr)
                    assert pr["responses"][0]["partition_responses"][0]["error_code"] == 0, pr
            named = fetch_receive(fetch_send(parts))  # the full fetch that opens the session
            assert session[0] != 0 and sorted(named) == parts, (session, named)

            def one() -> None:
                nonlocal named
                named = fetch_receive(fetch_send(named))
                assert len(named) == 2, named
        else:
            # the session opened at the log end after one record each
            for p in parts:
                producer.request("Produce", 9, produce_body(p))
            named = fetch_receive(fetch_send(parts))
            assert session[0] != 0 and len(named) == 2, (session, named)
            turn = [0]

            def one() -> None:
                nonlocal named
                corr = fetch_send(named)
                time.sleep(args.gap_ms / 1000)  # parked before the append (the idle loop counts ~nothing)
                p = parts[turn[0] % 2]
                turn[0] += 1
                pr = producer.request("Produce", 9, produce_body(p))
                assert pr["responses"][0]["partition_responses"][0]["error_code"] == 0, pr
                named = fetch_receive(corr)
                assert named == [p], named

        for _ in range(warm):
            one()
        what = f"{'Fetch' if args.shape == 'session' else 'parked Fetch + Produce pair'}"
        dumped = measure(t, out, args.n, one, args.cprofile, args.annotate)
        if dumped is None:
            print(f"{args.n} x {what} ({args.brokers} broker(s)); cProfile stats in {args.cprofile}")
            return
        print(
            f"{_summary(dumped) / args.n:,.0f} instructions per {what} ({args.shape}, "
            f"{args.brokers} broker(s), {args.n} of them, {dumped})",
            flush=True,
        )
    finally:
        t.proc.terminate()
        t.proc.wait(120)


if __name__ == "__main__":
    sys.exit(main())
