"""A fake shell for the sans-IO transaction coordinator: fake clock, an in-memory
``__transaction_state`` log (every record goes through Kafka's bytes and back), markers written to
an in-memory list, producers that remember their id and epoch."""

from __future__ import annotations

import itertools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import structlog
from groupd.transactions import serde
from groupd.transactions.coordinator import (
    Append,
    TransactionConfig,
    TransactionCoordinator,
    TxnResult,
    WriteMarkers,
)
from groupd.transactions.producer_ids import CountingProducerIds
from groupd.transactions.records import Record, TransactionLogValue

TOPICS = {"t": 4, "u": 2}


@dataclass(eq=False)
class Ctx:
    n: int
    api: str
    version: int = 0


@dataclass(frozen=True)
class Marker:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass
class TxnShell:
    config: TransactionConfig = field(default_factory=TransactionConfig)
    auto_append: bool = True
    auto_markers: bool = True
    now: int = 1_000_000

    def __post_init__(self) -> None:
        self.producer_ids = CountingProducerIds(1000)
        self.coord = self._new_coordinator()
        self.log: list[tuple[bytes, bytes | None]] = []  # the durable __transaction_state log, as bytes
        self.responses: dict[Ctx, dict[str, Any]] = {}
        self.appends: deque[Append] = deque()
        self.pending_markers: deque[WriteMarkers] = deque()
        self.markers: list[Marker] = []
        self._ctx = itertools.count(1)

    def _new_coordinator(self) -> TransactionCoordinator:
        coord = TransactionCoordinator(self.config, self.producer_ids, topic_partitions=TOPICS.get)
        coord.log = structlog.wrap_logger(None, wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
        return coord

    # --- driving the core ---------------------------------------------------------------------
    def absorb(self, result: TxnResult) -> None:
        for ctx, response in result.responses:
            assert ctx not in self.responses, f"{ctx} answered twice"
            self.responses[ctx] = response
        self.appends.extend(result.appends)
        self.pending_markers.extend(result.markers)
        if self.auto_append:
            self.flush()
        if self.auto_markers:
            self.write_markers()

    def flush(self, error: int = 0, count: int | None = None) -> None:
        n = 0
        while self.appends and (count is None or n < count):
            append = self.appends.popleft()
            n += 1
            if error == 0:
                self.log.extend(serde.encode_record(r) for r in append.records)
            self.absorb(self.coord.append_done(self.now, append.token, error))

    def write_markers(self) -> None:
        while self.pending_markers:
            m = self.pending_markers.popleft()
            for topic, partition in sorted(m.partitions):
                self.markers.append(Marker(topic, partition, m.producer_id, m.producer_epoch, m.committed))
            self.absorb(self.coord.markers_written(self.now, m.transactional_id))

    def send(self, api: str, version: int, request: dict[str, Any]) -> Ctx:
        ctx = Ctx(next(self._ctx), api, version)
        self.absorb(self.coord.handle(self.now, api, version, request, ctx))
        return ctx

    def call(self, api: str, version: int, request: dict[str, Any]) -> dict[str, Any]:
        ctx = self.send(api, version, request)
        assert ctx in self.responses, f"{api} not answered"
        return self.responses[ctx]

    def advance(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.coord.tick(self.now))

    def records(self) -> list[Record]:
        return [serde.decode_record(k, v) for k, v in self.log]

    def restart(self) -> dict[str, TransactionLogValue]:
        """A fresh coordinator loaded from the log (as after a crash); returns its state as loaded."""
        self.coord = self._new_coordinator()
        result = self.coord.load(self.now, self.records())
        loaded = self.coord.snapshot()  # before the re-sent markers are written
        self.absorb(result)
        return loaded

    # --- requests -------------------------------------------------------------------------------
    def init(
        self, txn_id: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1, version: int = 4
    ) -> dict[str, Any]:
        req = {
            "transactional_id": txn_id,
            "transaction_timeout_ms": timeout_ms,
            "producer_id": pid,
            "producer_epoch": epoch,
        }
        return self.call("InitProducerId", version, req)

    def add_send(self, txn_id: str, pid: int, epoch: int, partitions: dict[str, list[int]], version: int = 3) -> Ctx:
        """AddPartitionsToTxn in the producer's form (v0-3)."""
        req = {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in partitions.items()],
        }
        return self.send("AddPartitionsToTxn", version, req)

    def add(
        self, txn_id: str, pid: int, epoch: int, partitions: dict[str, list[int]], version: int = 3
    ) -> dict[tuple[str, int], int]:
        resp = self.responses[self.add_send(txn_id, pid, epoch, partitions, version)]
        return {
            (t["name"], p["partition_index"]): p["partition_error_code"]
            for t in resp["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        }

    def add_offsets(self, txn_id: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        req = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "group_id": group}
        return self.call("AddOffsetsToTxn", version, req)["error_code"]

    def end_send(self, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> Ctx:
        req = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
        return self.send("EndTxn", version, req)

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
        ctx = self.end_send(txn_id, pid, epoch, commit, version)
        return self.responses[ctx]["error_code"]

    def describe(self, *txn_ids: str) -> list[dict[str, Any]]:
        return self.call("DescribeTransactions", 0, {"transactional_ids": list(txn_ids)})["transaction_states"]

    def list(self, version: int = 2, **filters: Any) -> dict[str, Any]:
        return self.call("ListTransactions", version, filters)

    def state(self, txn_id: str) -> str:
        return self.coord.transactions[txn_id].state.kafka_name


@dataclass
class Producer:
    """A transactional producer: its id and the producer id and epoch it was last given."""

    shell: TxnShell
    txn_id: str
    pid: int = -1
    epoch: int = -1
    timeout_ms: int = 60000

    def init(self, *, recover: bool = False) -> int:
        if recover:
            resp = self.shell.init(self.txn_id, self.timeout_ms, self.pid, self.epoch)
        else:
            resp = self.shell.init(self.txn_id, self.timeout_ms)
        if resp["error_code"] == 0:
            self.pid, self.epoch = resp["producer_id"], resp["producer_epoch"]
        return resp["error_code"]

    def add(self, partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        return self.shell.add(self.txn_id, self.pid, self.epoch, partitions)

    def end(self, commit: bool) -> int:
        return self.shell.end(self.txn_id, self.pid, self.epoch, commit)
