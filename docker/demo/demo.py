"""The compose demo: ``produce`` writes an order a second; ``consume`` is one member of a consumer
group that prints what it gets and commits after each batch. Plain kafka-python, nothing groupd-
specific: that is the point of the demo."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

running = True


def _stop(*_: Any) -> None:
    global running
    running = False


def _retry(make: Any) -> Any:
    """The broker may still be starting (compose waits for its healthcheck, but be forgiving)."""
    for _ in range(30):
        try:
            return make()
        except KafkaError:  # kafka-python's names for "no broker yet" vary between versions
            time.sleep(1)
    sys.exit("no broker reachable")


def produce(args: argparse.Namespace) -> None:
    producer = _retry(lambda: KafkaProducer(bootstrap_servers=args.bootstrap_server))
    n = 0
    while running:
        order = {"order": n, "amount": round(10 + n % 7 * 3.5, 2), "at": time.time()}
        producer.send(args.topic, json.dumps(order).encode(), key=str(n % 10).encode())
        producer.flush()
        n += 1
        time.sleep(args.interval)
    producer.close()


def consume(args: argparse.Namespace) -> None:
    consumer = _retry(
        lambda: KafkaConsumer(
            args.topic,
            bootstrap_servers=args.bootstrap_server,
            group_id=args.group,
            client_id=f"billing-{socket.gethostname()}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
    )
    while running:
        batches = consumer.poll(timeout_ms=1000)
        for tp, records in batches.items():
            for r in records:
                print(f"{tp.topic}[{tp.partition}]@{r.offset}: {r.value.decode()}")
        if batches:
            consumer.commit()
    consumer.close()  # leaves the group: the others get its partitions at once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["produce", "consume"])
    parser.add_argument("--bootstrap-server", default="groupd:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--group", default="billing")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    produce(args) if args.mode == "produce" else consume(args)


if __name__ == "__main__":
    main()
