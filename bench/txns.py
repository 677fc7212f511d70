"""Transactions per second with 100-record transactions, against the same records produced
idempotently without transactions, on one daemon in the same run.

    python -m bench.txns [--quick] [--transactions 1000] [--records 100] [--size 100]

One confluent-kafka producer (librdkafka at its default settings) writes ``transactions`` rounds of ``records`` records to a 3-partition topic:

- ``txn``: ``begin_transaction``, the records, ``commit_transaction`` (AddPartitionsToTxn, Produce,
  EndTxn, the coordinator's PrepareCommit/CompleteCommit records and a COMMIT marker per partition);
- ``txn+offsets``: the same plus ``send_offsets_to_transaction`` of one partition for a group
  (AddOffsetsToTxn, TxnOffsetCommit, and a marker in ``__consumer_offsets``), the exactly-once loop;
- ``idempotent`` (the baseline): an idempotent producer, the records, ``flush()``: the same data
  and the same one-round-trip-per-round shape, without the coordinator.

Rounds are sequential (one transaction at a time, as a transactional producer can only have one).
The daemon runs with its default ``--fsync interval:1000``; its CPU seconds per round are printed.
"""

from __future__ import annotations

import argparse
import shutil
import time
from typing import Any

from .targets import Target, start_groupd, workdir

TOPIC = "txnbench"
PARTITIONS = 3
MODES = ("txn", "txn+offsets", "idempotent")


def _round_trips(target: Target, mode: str, rounds: int, records: int, size: int) -> dict[str, Any]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    value = b"x" * size
    conf: dict[str, Any] = {"bootstrap.servers": target.bootstrap}
    if mode == "idempotent":
        conf["enable.idempotence"] = True
    else:
        conf["transactional.id"] = f"bench-{mode}"
    p = Producer(conf)
    consumer = None
    metadata = None
    if mode != "idempotent":
        p.init_transactions(30)
    if mode == "txn+offsets":
        consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "bench-eos"})
        metadata = consumer.consumer_group_metadata()

    def one(i: int) -> None:
        if mode != "idempotent":
            p.begin_transaction()
        for j in range(records):
            p.produce(TOPIC, key=b"%d" % j, value=value)
        if mode == "idempotent":
            p.flush(30)
            return
        if metadata is not None:
            p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, i + 1)], metadata, 30)
        p.commit_transaction(30)

    try:
        for i in range(min(20, rounds)):  # warm-up: connections, topic metadata, producer state
            one(i)
        cpu0 = target.cpu_s() or 0.0
        lat = []
        t0 = time.perf_counter()
        for i in range(rounds):
            s = time.perf_counter()
            one(i)
            lat.append(time.perf_counter() - s)
        elapsed = time.perf_counter() - t0
        cpu = (target.cpu_s() or 0.0) - cpu0
    finally:
        if consumer is not None:
            consumer.close()
    lat.sort()
    return {
        "rounds": rounds,
        "rounds_per_s": rounds / elapsed,
        "records_per_s": rounds * records / elapsed,
        "p50_ms": lat[len(lat) // 2] * 1000,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
        "daemon_cpu_ms_per_round": cpu / rounds * 1000,
    }


def run(quick: bool, transactions: int | None = None, records: int = 100, size: int = 100) -> dict[str, Any]:
    n = transactions or (200 if quick else 1000)
    root = workdir("groupd-txns-")
    out: dict[str, Any] = {"transactions": n, "records": records, "value_bytes": size}
    target: Target | None = None
    try:
        target, _ = start_groupd(root / "data")
        from groupd.ops.kafka_client import KafkaClient

        with KafkaClient(target.bootstrap) as admin:
            admin.create_topic(TOPIC, PARTITIONS, -1, {})
        for mode in MODES:
            out[mode] = _round_trips(target, mode, n, records, size)
    finally:
        if target is not None:
            target.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def print_results(out: dict[str, Any], print_figures: Any) -> None:
    base = out["idempotent"]
    for mode in ("txn", "txn+offsets"):
        r = out[mode]
        rows = [
            (
                "transactions/s (rounds/s)",
                {"groupd": r["rounds_per_s"], "idempotent": base["rounds_per_s"]},
            ),
            ("records/s", {"groupd": r["records_per_s"], "idempotent": base["records_per_s"]}),
            ("round p50, ms", {"groupd": r["p50_ms"], "idempotent": base["p50_ms"]}),
            ("round p99, ms", {"groupd": r["p99_ms"], "idempotent": base["p99_ms"]}),
            (
                "daemon CPU ms per round",
                {"groupd": r["daemon_cpu_ms_per_round"], "idempotent": base["daemon_cpu_ms_per_round"]},
            ),
        ]
        print_figures(
            f"7. transactions: '{mode}', {out['transactions']:,} transactions x {out['records']} records "
            f"of {out['value_bytes']} B (confluent-kafka, one producer)",
            rows,
            ("idempotent",),
            "groupd = transactional producer; baseline = the same rounds from an idempotent producer "
            "(produce + flush), same daemon, same run",
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="200 transactions per mode")
    ap.add_argument("--transactions", type=int, default=None)
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    from .run import print_figures

    print_results(run(args.quick, args.transactions, args.records, args.size), print_figures)


if __name__ == "__main__":
    main()
