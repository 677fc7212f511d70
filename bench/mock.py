"""Keep a librdkafka mock cluster alive in its own process and say where it listens.

A confluent-kafka ``Producer`` configured with ``test.mock.num.brokers`` starts librdkafka's built-in
mock cluster (C threads inside this process) and ignores ``bootstrap.servers``; the mock's listener
is in the client's metadata. The process lives until stdin closes or it is signalled, so the bench
owns it by pid like any other target.

    python -m bench.mock     # prints {"bootstrap": "127.0.0.1:N", "pid": P}
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading


def main() -> int:
    from confluent_kafka import Producer

    producer = Producer({"test.mock.num.brokers": 1, "log_level": 3, "client.id": "bench-mock-holder"})
    md = producer.list_topics(timeout=10)
    broker = next(iter(md.brokers.values()))
    print(json.dumps({"bootstrap": f"{broker.host}:{broker.port}", "pid": os.getpid()}), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def watch_stdin() -> None:
        sys.stdin.read()  # EOF when the parent goes away
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.wait(0.5):
        producer.poll(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
