"""Data-plane throughput: confluent-kafka producing to and a group consumer reading from a fresh groupd.

    python -m bench.dataplane [--quick] [--messages 200000] [--size 1024] [--partitions 6]
                              [--linger-ms 5] [--acks all] [--fsync interval:1000]

Produce: one librdkafka producer, ``acks`` and ``linger.ms`` as given, no compression, values of
``--size`` random bytes (incompressible), timed from the first ``produce()`` to the end of
``flush()`` (every delivery report in). Consume: one group consumer (subscribe, from the earliest
offset, auto-commit off) reading every message back, timed from ``subscribe()`` (the group join
included; librdkafka prefetches, so a rate "from the first message" would flatter it). MB/s are
payload bytes (values only) in 10^6 bytes. The daemon's CPU seconds over each phase are printed
too (it is one Python process: on this 2-core machine client and daemon share the CPUs). The daemon runs on 127.0.0.1 with its own temporary
data directory and is stopped by pid at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .targets import start_groupd, workdir


class BenchProducer:
    """The producer both produce benches drive (this module and ``bench.produce``): no compression,
    room in its queue for a whole run, 64 random payloads cycled, failed deliveries counted."""

    def __init__(self, bootstrap: str, size: int, linger_ms: int, acks: str) -> None:
        self.payloads = [os.urandom(size) for _ in range(64)]
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": acks,
                "linger.ms": linger_ms,
                "compression.type": "none",
                "queue.buffering.max.messages": 500_000,
                "queue.buffering.max.kbytes": 1_048_576,
            }
        )
        self.failed = 0

    def report(self, err: object, _msg: object) -> None:
        if err is not None:
            self.failed += 1

    def produce_n(self, topic: str, n: int) -> None:
        p, payloads, report = self.producer, self.payloads, self.report
        for i in range(n):
            while True:
                try:
                    p.produce(topic, value=payloads[i % 64], key=b"%d" % (i % 1000), on_delivery=report)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 5000 == 0:
                p.poll(0)


def _produce(bootstrap: str, topic: str, n: int, size: int, linger_ms: int, acks: str) -> tuple[float, int]:
    bp = BenchProducer(bootstrap, size, linger_ms, acks)
    t0 = time.perf_counter()
    bp.produce_n(topic, n)
    left = bp.producer.flush(120)
    elapsed = time.perf_counter() - t0
    if left or bp.failed:
        raise SystemExit(f"produce: {left} undelivered, {bp.failed} failed")
    return elapsed, n


def _consume(bootstrap: str, topic: str, n: int) -> tuple[float, float, int]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 4_194_304,
        }
    )
    t0 = time.perf_counter()
    c.subscribe([topic])
    first = None
    got = 0
    deadline = time.monotonic() + 300
    try:
        while got < n and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise SystemExit(f"consume: {m.error()}")
                    continue
                if first is None:
                    first = time.perf_counter()
                got += 1
        end = time.perf_counter()
    finally:
        c.close()
    if got < n:
        raise SystemExit(f"consume: only {got} of {n} messages in 300 s")
    return end - t0, end - (first or t0), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20,000 messages")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--fsync", default=None, help="groupd --fsync policy (default: groupd's own)")
    args = ap.parse_args()
    n = 20_000 if args.quick else args.messages

    base = workdir("groupd-dataplane-")
    extra = ["--fsync", args.fsync] if args.fsync else []
    target, _ = start_groupd(base / "data", *extra)
    try:
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        topic = "bench"
        admin.create_topics([NewTopic(topic, num_partitions=args.partitions, replication_factor=1)])[topic].result(15)
        mb = n * args.size / 1e6
        print(
            f"groupd data plane: {n} messages of {args.size} B ({mb:.1f} MB), {args.partitions} partitions, "
            f"acks={args.acks}, linger.ms={args.linger_ms}, fsync={args.fsync or 'default'}"
        )
        cpu0 = target.cpu_s() or 0.0
        p_s, _ = _produce(target.bootstrap, topic, n, args.size, args.linger_ms, args.acks)
        cpu1 = target.cpu_s() or 0.0
        print(f"produce  {n / p_s:10,.0f} msg/s  {mb / p_s:7.1f} MB/s  ({p_s:.2f} s; daemon CPU {cpu1 - cpu0:.2f} s)")
        c_s, c_first_s, _ = _consume(target.bootstrap, topic, n)
        cpu2 = target.cpu_s() or 0.0
        print(
            f"consume  {n / c_s:10,.0f} msg/s  {mb / c_s:7.1f} MB/s  ({c_s:.2f} s from subscribe, the join "
            f"included; first message after {c_s - c_first_s:.2f} s; daemon CPU {cpu2 - cpu1:.2f} s)"
        )
        rss = target.peak_rss_mb()
        if rss is not None:
            print(f"daemon peak RSS {rss:.0f} MB")
    finally:
        target.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
