"""Ten confluent-kafka consumers with ``group.protocol=consumer`` cover a 12-partition topic at
groupd's default heartbeat interval. How fast is the bench's business (``bench.consumer_heartbeat``,
README "Consumer-group heartbeat interval"); this test only checks that the members cover the topic,
each partition once, within a generous bound (a shared machine's timings are no test)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e

PARTITIONS = 12
MEMBERS = 10


def test_ten_consumer_protocol_members_cover_the_topic(groupd: GroupdProcess, unique: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kip848-ten-{unique}", f"kip848-ten-g-{unique}"
    admin = AdminClient({"bootstrap.servers": groupd.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(15)
    lock = threading.Lock()
    owned: list[set[int]] = [set() for _ in range(MEMBERS)]
    stop = threading.Event()

    def run(i: int) -> None:
        def on_assign(_c: Any, parts: list[Any]) -> None:
            with lock:
                owned[i].update(p.partition for p in parts)

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            with lock:
                owned[i].difference_update(p.partition for p in parts)

        c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": group, "group.protocol": "consumer"})
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not stop.is_set():
                c.poll(0.1)
        finally:
            c.close()

    def covered() -> bool:
        with lock:
            flat = [p for s in owned for p in s]
            return sorted(flat) == list(range(PARTITIONS)) and all(owned)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(MEMBERS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        deadline = t0 + 30
        while time.monotonic() < deadline and not covered():
            time.sleep(0.05)
        with lock:
            snapshot = [sorted(s) for s in owned]
        assert covered(), f"not covered in 30 s: {snapshot}"
    finally:
        stop.set()
        for t in threads:
            t.join(15)
