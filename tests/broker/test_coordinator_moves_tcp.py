"""A real client keeps consuming while its group's ``__consumer_offsets`` partition moves away and back.

One broker in this process over real TCP; its group shell resigns the partition (the group's requests
answer NOT_COORDINATOR, FindCoordinator COORDINATOR_NOT_AVAILABLE), elects it again (the partition
loads: COORDINATOR_LOAD_IN_PROGRESS), and a kafka-python consumer committing synchronously after
every batch rediscovers the coordinator and carries on: every record is consumed, the commit
acknowledged before the move is there after it, and the final commit is the end of the log.
With a single broker, "away" is nobody; the cluster mode moves it to another broker the same way.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from groupd.broker.node import Broker
from groupd.broker.settings import Config
from groupd.coordinator import partition_for
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.server import Request

from tests.support.kafka_python import subscribe

kafka = pytest.importorskip("kafka")

GROUP_APIS = {API_BY_NAME[n].key: n for n in ("Heartbeat", "OffsetCommit", "OffsetFetch", "JoinGroup", "SyncGroup")}
FIND_COORDINATOR = API_BY_NAME["FindCoordinator"].key
TOPIC = "moving"
RECORDS = 300


class BrokerThread:
    """A ``Broker`` serving on 127.0.0.1 from its own event loop in a thread."""

    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.config = Config(data_dir=str(data_dir), host="127.0.0.1", port=0, fsync="never")
        self.errors: Counter[tuple[str, int]] = Counter()  # (api, error code) of every group answer
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="broker")

    def _observe(self, req: Request, body: dict[str, Any], _elapsed: float) -> None:
        if req.api_key == FIND_COORDINATOR:
            for answer in body.get("coordinators") or [body]:  # v4 answers per key
                self.errors[("FindCoordinator", int(answer.get("error_code", 0)))] += 1
        elif req.api_key in GROUP_APIS:
            api = GROUP_APIS[req.api_key]
            codes = [body.get("error_code", 0)] if "error_code" in body else []
            codes += [p["error_code"] for t in body.get("topics") or [] for p in t.get("partitions") or []]
            for code in codes or [0]:
                self.errors[(api, int(code))] += 1

    def run(self, coro: Any, timeout: float = 20.0) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    async def _make(self) -> Broker:
        broker = Broker(self.config)  # in its loop's thread: its server takes the running loop
        broker.dispatcher.observers.append(self._observe)
        return broker

    def start(self) -> BrokerThread:
        self._thread.start()
        self.broker = self.run(self._make())
        self.run(self.broker.start())
        self.run(self.broker.groups.loaded.wait())
        return self

    def stop(self) -> None:
        self.run(self.broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.port}"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "data").start()
    try:
        yield b
    finally:
        b.stop()


def consume_through_a_move(
    broker: BrokerThread, group: str, poll: Callable[[], list[bytes]], commit: Callable[[], None]
) -> tuple[set[bytes], dict[str, Any]]:
    """Consume TOPIC with ``poll``, ``commit`` after every batch; once a quarter of the records are
    in, the group's partition is resigned for a second, loading for another, then loaded again,
    while the second half of the records is produced. Returns what was seen and the group's
    offsets and members before and after the move."""
    p = partition_for(group)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
    core, groups = broker.broker.core, broker.broker.groups
    snapshot: dict[str, Any] = {}

    async def away_and_back() -> None:
        g = core.group(group)
        snapshot["before"] = (dict(core.offsets.get(group, {})), g.generation, set(g.members))
        groups.unload_partition(p)  # resigned: nobody coordinates the group
        await asyncio.sleep(1.0)
        groups.apply(core.begin_load(p))  # elected again: loading
        await asyncio.sleep(1.0)
        assert await groups.load_partition(p)
        g = core.group(group)
        snapshot["after"] = (dict(core.offsets.get(group, {})), g.generation, set(g.members))

    seen: set[bytes] = set()
    moved: Future[Any] | None = None
    deadline = time.monotonic() + 25
    while len(seen) < RECORDS and time.monotonic() < deadline:
        if moved is None and len(seen) >= RECORDS // 4:
            moved = asyncio.run_coroutine_threadsafe(away_and_back(), broker.loop)
            produce(producer, RECORDS // 2, RECORDS)
        batch = poll()
        seen.update(batch)
        if batch:
            commit()
    assert moved is not None
    moved.result(10)
    commit()
    producer.close()
    return seen, snapshot


def produce(producer: Any, start: int, end: int) -> None:
    for i in range(start, end):
        producer.send(TOPIC, str(i).encode())
    producer.flush()


def first_half(broker: BrokerThread) -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
    produce(producer, 0, RECORDS // 2)
    producer.close()


def check_carried_on(broker: BrokerThread, group: str, seen: set[bytes], snapshot: dict[str, Any]) -> None:
    assert seen == {str(i).encode() for i in range(RECORDS)}
    # the acknowledged commit made before the move is there after the reload (or a later one)
    (before, gen_before, members_before), (after, gen_after, members_after) = snapshot["before"], snapshot["after"]
    assert before and all(after[k].offset >= v.offset for k, v in before.items())
    assert broker.broker.core.offsets[group][(TOPIC, 0)].offset == RECORDS
    # the client met the coordinator going away and loading, and found it again
    assert broker.errors[("FindCoordinator", 15)] >= 1
    assert sum(n for (api, code), n in broker.errors.items() if code == 16 and api != "FindCoordinator") >= 1
    assert broker.errors[("OffsetCommit", 14)] + broker.errors[("OffsetFetch", 14)] >= 1
    # the group came back from the log with its member and generation: the member carried on in it
    assert (gen_after, members_after) == (gen_before, members_before) and len(members_before) == 1


def test_kafka_python_consumer_carries_on_while_its_coordinator_partition_moves_away_and_back(
    broker: BrokerThread,
) -> None:
    group = "movers"
    first_half(broker)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        heartbeat_interval_ms=200,
    )
    subscribe(consumer, TOPIC)

    def poll() -> list[bytes]:
        return [m.value for msgs in consumer.poll(timeout_ms=100).values() for m in msgs]

    try:
        seen, snapshot = consume_through_a_move(broker, group, poll, consumer.commit)
    finally:
        consumer.close()
    check_carried_on(broker, group, seen, snapshot)
