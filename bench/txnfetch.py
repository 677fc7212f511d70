"""read_committed Fetch against read_uncommitted Fetch of the same data, on a real daemon.

    python -m bench.txnfetch [--quick] [--batches 20000] [--records 10] [--size 100] [--restart-batches 200000]

Three partitions of one topic hold the same records: ``plain`` (no producer id), ``committed``
(transactions of 5 batches, each ended by a COMMIT marker, two producers interleaved) and
``aborted`` (the same with every third transaction aborted). The logs are written offline with the
storage layer while the daemon is stopped (the transaction coordinator that would send the markers
is not this layer's), then the daemon starts and one raw Fetch v12 client (1 MiB per request, no
record decoding: the next offset comes from the last batch header) reads each partition from 0 to
its end, read_uncommitted (the baseline) and read_committed. The first read_committed fetch after
the start pays the partition's producer-state rebuild (one scan of the batch headers), reported on
its own; the rates are the best of three warm passes. The daemon's CPU seconds per pass are printed
too (the steadier figure on a shared machine: the client decodes every response in Python).

Restart (``restart_run``): one partition of ``--restart-batches`` batches (1 record each, every
third transaction aborted) written offline, then the daemon is started twice and the first
read_committed fetch after each start is timed: first WITHOUT producer snapshots and .txnindex
files (the old path: the whole log's batch headers are replayed; that load then writes the files),
then WITH them (the state comes from the snapshot and the indexes, nothing is replayed). The
daemon's own ``producer_state_loaded`` figures (ms, batches replayed) are printed beside it, and the
same two loads measured in-process (whole-log ``from_batches`` against ``load_producers``).
"""

from __future__ import annotations

import argparse
import shutil
import struct
import time
from pathlib import Path
from typing import Any

from groupd.ops.kafka_client import BrokerConnection
from groupd.storage import LogConfig, PartitionLog
from groupd.storage import records as rec
from groupd.storage.markers import end_txn_marker_batch

from .targets import Target, start_groupd, workdir

TOPIC = "txnbench"
KINDS = ("plain", "committed", "aborted")
_HEADER = struct.Struct(">qi")
TXN_BATCHES = 5
PASSES = 3


def write_partition(path: Path, kind: str, batches: int, records: int, size: int) -> dict[str, int]:
    """Append the partition's data directly to its log (the daemon is stopped)."""
    plog = PartitionLog.open(path, LogConfig())
    value = b"x" * size
    ts = int(time.time() * 1000)
    recs = [(b"k%d" % i, value, (), ts) for i in range(records)]
    seqs = {1: 0, 2: 0}
    txns = aborted = 0
    if kind != "plain":
        plog.note_transactions()  # as the data plane does before a log's first transactional batch
    try:
        for i in range(batches):
            if kind == "plain":
                plog.append_batch(rec.build_batch(recs))
                continue
            pid = 1 + (i // TXN_BATCHES) % 2  # two producers, transactions interleaved by turns
            plog.append_batch(
                rec.build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=seqs[pid], transactional=True)
            )
            seqs[pid] += records
            if i % TXN_BATCHES == TXN_BATCHES - 1:
                commit = not (kind == "aborted" and txns % 3 == 2)
                aborted += not commit
                txns += 1
                plog.append_batch(end_txn_marker_batch(pid, 0, commit, 0, ts))
        plog.flush()
        return {"end": plog.log_end_offset, "bytes": plog.size_in_bytes, "txns": txns, "aborted": aborted}
    finally:
        plog.close()


def _fetch_body(partition: int, offset: int, isolation: int, topic: str = TOPIC) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _connect(target: Target) -> BrokerConnection:
    host, port = target.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=60, client_id="txnfetch")


def fetch_all(target: Target, partition: int, end: int, isolation: int) -> dict[str, Any]:
    offset = 0
    requests = 0
    payload = 0
    aborted_entries = 0
    t0 = time.perf_counter()
    first_ms = None
    conn = _connect(target)
    try:
        while offset < end:
            t1 = time.perf_counter()
            _, resp = conn.send("Fetch", _fetch_body(partition, offset, isolation), 12)
            if first_ms is None:
                first_ms = (time.perf_counter() - t1) * 1000
            requests += 1
            p = resp["responses"][0]["partitions"][0]
            assert p["error_code"] == 0, p
            data = p["records"] or b""
            aborted_entries += len(p["aborted_transactions"] or [])
            payload += len(data)
            pos = last = 0
            while pos + rec.HEADER_SIZE <= len(data):
                base, length = _HEADER.unpack_from(data, pos)
                last = base + struct.unpack_from(">i", data, pos + 23)[0] + 1
                pos += rec.LOG_OVERHEAD + length
            if not data:
                break
            offset = last
    finally:
        conn.close()
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "requests": requests,
        "MB": payload / 1e6,
        "MB_per_s": payload / 1e6 / seconds,
        "fetches_per_s": requests / seconds,
        "first_fetch_ms": first_ms,
        "aborted_entries": aborted_entries,
        "reached": offset,
    }


def run(
    quick: bool, batches: int | None = None, records: int = 10, size: int = 100, restart_batches: int | None = None
) -> dict[str, Any]:
    n = batches or (4_000 if quick else 20_000)
    root = workdir("groupd-txnfetch-")
    data = root / "data"
    out: dict[str, Any] = {"batches": n, "records_per_batch": records, "value_bytes": size}
    target: Target | None = None
    try:
        target, _ = start_groupd(data)
        _create_topic(target, TOPIC, len(KINDS))
        target.stop()
        target = None
        for p, kind in enumerate(KINDS):
            out[kind] = {"log": write_partition(data / f"{TOPIC}-{p}", kind, n, records, size)}
        target, _ = start_groupd(data)
        for p, kind in enumerate(KINDS):
            end = out[kind]["log"]["end"]
            cold = fetch_all(target, p, end, 1)  # pays the producer-state rebuild
            for label, isolation in (("read_uncommitted", 0), ("read_committed", 1)):
                passes = []
                for _ in range(PASSES):  # the best of a few: the machine is shared
                    cpu0 = target.cpu_s() or 0.0
                    r = fetch_all(target, p, end, isolation)
                    r["daemon_cpu_s"] = (target.cpu_s() or 0.0) - cpu0
                    passes.append(r)
                out[kind][label] = min(passes, key=lambda r: r["seconds"])
            out[kind]["cold_first_fetch_ms"] = cold["first_fetch_ms"]
    finally:
        if target is not None:
            target.stop()
        shutil.rmtree(root, ignore_errors=True)
    if restart_batches != 0:
        out["restart"] = restart_run(restart_batches or (50_000 if quick else 200_000))
    return out


RESTART_TOPIC = "txnrestart"


def _create_topic(target: Target, name: str, partitions: int) -> None:
    conn = _connect(target)
    try:
        topic = {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        _, created = conn.send("CreateTopics", {"topics": [topic], "timeout_ms": 10_000, "validate_only": False}, 4)
    finally:
        conn.close()
    assert created["topics"][0]["error_code"] == 0, created


def _first_committed_fetch_ms(target: Target) -> float:
    conn = _connect(target)
    try:
        t0 = time.perf_counter()
        _, resp = conn.send("Fetch", _fetch_body(0, 0, 1, RESTART_TOPIC), 12)
        ms = (time.perf_counter() - t0) * 1000
    finally:
        conn.close()
    assert resp["responses"][0]["partitions"][0]["error_code"] == 0, resp
    return ms


def restart_run(batches: int) -> dict[str, Any]:
    """The first read_committed fetch after a restart without and with the producer snapshot and
    transaction indexes (module docstring)."""
    from groupd.broker.producer_state import PartitionProducers, load_producers

    root = workdir("groupd-txnrestart-")
    data = root / "data"
    part = data / f"{RESTART_TOPIC}-0"
    out: dict[str, Any] = {"batches": batches}
    target: Target | None = None
    try:
        target, _ = start_groupd(data)
        _create_topic(target, RESTART_TOPIC, 1)
        target.stop()
        target = None
        out["log"] = write_partition(part, "aborted", batches, 1, 100)
        for label in ("without", "with"):
            if label == "without":
                for f in [*part.glob("*.snapshot"), *part.glob("*.txnindex")]:
                    f.unlink()
            target, _ = start_groupd(data)
            ms = _first_committed_fetch_ms(target)
            ev = [e for e in target.events("producer_state_loaded") if e.get("topic") == RESTART_TOPIC][-1]
            target.stop()
            target = None
            out[label] = {"first_fetch_ms": ms, "load_ms": ev["ms"], "batches_replayed": ev["batches_replayed"]}
        plog = PartitionLog.open(part, LogConfig())
        try:
            t0 = time.perf_counter()
            PartitionProducers.from_batches(plog.iter_batches(0))
            out["without"]["in_process_ms"] = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            loaded = load_producers(plog, -1)
            out["with"]["in_process_ms"] = (time.perf_counter() - t0) * 1000
            assert loaded.loaded_from >= 0 and loaded.replayed == 0
        finally:
            plog.close()
    finally:
        if target is not None:
            target.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def print_restart(out: dict[str, Any], print_figures: Any) -> None:
    w, o = out["with"], out["without"]
    rows = [
        (
            "first read_committed fetch after start, ms",
            {"groupd": w["first_fetch_ms"], "no files": o["first_fetch_ms"]},
        ),
        ("daemon's producer_state_loaded ms", {"groupd": w["load_ms"], "no files": o["load_ms"]}),
        ("batches replayed by the load", {"groupd": w["batches_replayed"], "no files": o["batches_replayed"]}),
        ("in-process load, ms", {"groupd": w["in_process_ms"], "no files": o["in_process_ms"]}),
    ]
    log = out["log"]
    print_figures(
        f"6b. first read_committed fetch after a restart ({out['batches']:,} batches, {log['txns']:,} transactions, "
        f"{log['aborted']:,} aborted)",
        rows,
        ("no files",),
        "groupd = with the producer snapshot and .txnindex files; baseline = without (the whole log replayed), same run",
    )


def print_results(out: dict[str, Any], print_figures: Any) -> None:
    for kind in KINDS:
        r = out[kind]
        rows = [
            (
                "fetch MB/s",
                {"groupd": r["read_committed"]["MB_per_s"], "uncommitted": r["read_uncommitted"]["MB_per_s"]},
            ),
            (
                "fetches/s",
                {"groupd": r["read_committed"]["fetches_per_s"], "uncommitted": r["read_uncommitted"]["fetches_per_s"]},
            ),
            (
                "daemon CPU s per pass",
                {"groupd": r["read_committed"]["daemon_cpu_s"], "uncommitted": r["read_uncommitted"]["daemon_cpu_s"]},
            ),
            (
                "aborted_transactions entries returned",
                {"groupd": r["read_committed"]["aborted_entries"], "uncommitted": None},
            ),
            ("first read_committed fetch after start, ms", {"groupd": r["cold_first_fetch_ms"], "uncommitted": None}),
            (
                "warm first fetch, ms",
                {
                    "groupd": r["read_committed"]["first_fetch_ms"],
                    "uncommitted": r["read_uncommitted"]["first_fetch_ms"],
                },
            ),
        ]
        log = r["log"]
        print_figures(
            f"6. read_committed Fetch, partition '{kind}' ({out['batches']:,} batches x {out['records_per_batch']} "
            f"records, {log['bytes'] / 2**20:.0f} MiB, {log['txns']:,} transactions, {log['aborted']:,} aborted)",
            rows,
            ("uncommitted",),
            "groupd = read_committed; baseline = read_uncommitted of the same partition, same run",
        )
    if "restart" in out:
        print_restart(out["restart"], print_figures)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4,000 batches per partition")
    ap.add_argument("--batches", type=int, default=None)
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument(
        "--restart-batches", type=int, default=None, help="restart section's batches (default 200,000; 0: skip it)"
    )
    ap.add_argument("--only-restart", action="store_true", help="only the restart section")
    args = ap.parse_args()
    from .run import print_figures

    if args.only_restart:
        print_restart(restart_run(args.restart_batches or 200_000), print_figures)
        return
    print_results(run(args.quick, args.batches, args.records, args.size, args.restart_batches), print_figures)


if __name__ == "__main__":
    main()
