"""One consumer-group member for ``bench.rebalance_delay``, in a process of its own.

    python -m bench.rebalance_member LIBRARY BOOTSTRAP GROUP TOPIC

LIBRARY is ``kafka-python``, ``aiokafka`` or ``confluent-kafka``. The member imports its library,
prints ``ready`` and waits for a line on standard input: the bench sends ``go`` to every member at
once, so import time does not spread the start. It then subscribes at the library's default settings
and polls (100 ms polls, no work per record) until standard input closes or says ``stop``, when it
closes its consumer (LeaveGroup) and exits. Every assignment it receives (rebalance listener /
``on_assign``) is one line ``assigned <unix time> <partitions, comma-separated>``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

POLL_S = 0.1


def _report(partitions: Iterable[Any]) -> None:
    parts = ",".join(str(p) for p in sorted(tp.partition for tp in partitions))
    print(f"assigned {time.time():.6f} {parts}", flush=True)


def _wait_for_stop() -> threading.Event:
    stop = threading.Event()

    def watch() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    return stop


def run_kafka_python(bootstrap: str, group: str, topic: str) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            _report(assigned)

    _go()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    consumer.subscribe([topic], listener=Listener())
    _poll_until_stopped(lambda: consumer.poll(timeout_ms=int(POLL_S * 1000)), consumer.close)


def run_confluent(bootstrap: str, group: str, topic: str) -> None:
    from confluent_kafka import Consumer

    _go()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic], on_assign=lambda _c, parts: _report(parts))
    _poll_until_stopped(lambda: consumer.poll(POLL_S), consumer.close)


def run_aiokafka(bootstrap: str, group: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            _report(assigned)

    async def main() -> None:
        _go()
        stop = _wait_for_stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
        consumer.subscribe([topic], listener=Listener())
        await consumer.start()
        try:
            while not stop.is_set():
                await consumer.getmany(timeout_ms=int(POLL_S * 1000))
        finally:
            await consumer.stop()

    asyncio.run(main())


def _go() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


def _poll_until_stopped(poll: Callable[[], Any], close: Callable[[], Any]) -> None:
    stop = _wait_for_stop()
    try:
        while not stop.is_set():
            poll()
    finally:
        close()


RUNNERS = {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent-kafka": run_confluent}


def main() -> None:
    library, bootstrap, group, topic = sys.argv[1:5]
    RUNNERS[library](bootstrap, group, topic)


if __name__ == "__main__":
    main()
