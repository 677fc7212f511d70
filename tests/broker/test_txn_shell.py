"""The asyncio shell around the transaction core (``broker/txn_shell.py``) over real partition logs
and the group-commit appender: markers go to the right writer, are retried until they land, and a
transaction caught between Prepare* and Complete* by a restart is finished by the next start-up."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from groupd.broker import txn_shell
from groupd.broker.topics import TRANSACTION_STATE_TOPIC
from groupd.broker.txn_shell import TxnShell
from groupd.protocol.errors import ErrorCode
from groupd.storage import Appender, LogManager
from groupd.transactions.coordinator import TransactionConfig, TransactionCoordinator, partition_for
from groupd.transactions.producer_ids import CountingProducerIds
from groupd.transactions.records import TransactionState

from tests.broker.test_data_plane import Clock, FakeRequest, call

E = ErrorCode
S = TransactionState
OUT = ("out", 0), ("out", 1)
GROUP = "g"  # its __consumer_offsets partition: abs("g".hashCode) % 50
G_PARTITION = 3
TxnPartition = tuple[str, int]


class FakeMarkers:
    """Both marker writers: the data plane's (user partitions) and the group shell's
    (``__consumer_offsets``). ``fail`` maps a partition to the codes its next writes answer."""

    def __init__(self, fail: dict[TxnPartition, list[int]] | None = None) -> None:
        self.fail = {tp: list(codes) for tp, codes in (fail or {}).items()}
        self.data_calls: list[tuple[int, int, bool, list[TxnPartition]]] = []
        self.group_calls: list[tuple[int, int, int, bool]] = []

    def _code(self, tp: TxnPartition) -> int:
        codes = self.fail.get(tp)
        return codes.pop(0) if codes else E.NONE

    async def write_txn_markers(
        self, pid: int, epoch: int, committed: bool, coordinator_epoch: int, partitions: list[TxnPartition]
    ) -> dict[TxnPartition, int]:
        self.data_calls.append((pid, epoch, committed, list(partitions)))
        await asyncio.sleep(0)
        return {tp: self._code(tp) for tp in partitions}

    async def write_txn_marker(
        self, partition: int, pid: int, epoch: int, committed: bool, coordinator_epoch: int
    ) -> int:
        self.group_calls.append((partition, pid, epoch, committed))
        await asyncio.sleep(0)
        return self._code(("__consumer_offsets", partition))


class Node:
    """A shell over real logs in ``tmp``; ``restart`` drops everything but the files."""

    def __init__(self, tmp: Path, markers: FakeMarkers) -> None:
        self.tmp = tmp
        self.clock = Clock()
        self.open(markers)

    def open(self, markers: FakeMarkers) -> None:
        self.markers = markers
        self.logs = LogManager(self.tmp)
        self.logs.open_all()
        self.appender = Appender("always")
        self.core = TransactionCoordinator(
            TransactionConfig(),
            CountingProducerIds(1000),
            topic_partitions=lambda name: 2 if name == "out" else None,
        )
        self.shell = TxnShell(
            self.core,
            lambda p: self.logs.get_or_create(TRANSACTION_STATE_TOPIC, p),
            self.appender,
            markers,
            markers,
            clock=self.clock,
        )

    async def restart(self, markers: FakeMarkers) -> None:
        await self.shell.drain()
        await self.appender.close()
        self.logs.close()
        self.open(markers)

    async def ask(self, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        answer = await call(self.shell.handler(api), FakeRequest(api, version, body))
        assert answer is not None
        return answer

    async def init(self, txn_id: str = "t") -> tuple[int, int]:
        r = await self.ask("InitProducerId", 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60_000})
        assert r["error_code"] == E.NONE
        return r["producer_id"], r["producer_epoch"]

    async def open_transaction(self, txn_id: str = "t") -> tuple[int, int]:
        pid, epoch = await self.init(txn_id)
        ids = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch}
        add = {"v3_and_below_" + k: v for k, v in ids.items()}
        add["v3_and_below_topics"] = [{"name": "out", "partitions": [0, 1]}]
        r = await self.ask("AddPartitionsToTxn", 3, add)
        codes = [
            p["partition_error_code"] for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]
        ]
        assert codes == [E.NONE, E.NONE]
        assert (await self.ask("AddOffsetsToTxn", 3, {**ids, "group_id": GROUP}))["error_code"] == E.NONE
        return pid, epoch

    async def end(self, pid: int, epoch: int, committed: bool, txn_id: str = "t") -> int:
        body = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": committed}
        return int((await self.ask("EndTxn", 3, body))["error_code"])

    async def state_becomes(self, state: TransactionState, txn_id: str = "t") -> None:
        for _ in range(500):
            meta = self.core.transactions.get(txn_id)
            if meta is not None and meta.state == state and meta.pending_state is None:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{txn_id} is {self.core.transactions.get(txn_id)}, not {state.kafka_name}")


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(txn_shell, "MARKER_RETRY_BACKOFF_S", 0.001)


async def test_commit_markers_go_to_the_group_shell_and_the_data_plane(tmp_path: Path) -> None:
    assert partition_for(GROUP) == G_PARTITION
    markers = FakeMarkers()
    node = Node(tmp_path, markers)
    pid, epoch = await node.open_transaction()
    assert await node.end(pid, epoch, True) == E.NONE
    await node.state_becomes(S.COMPLETE_COMMIT)
    assert markers.data_calls == [(pid, epoch, True, list(OUT))]
    assert markers.group_calls == [(G_PARTITION, pid, epoch, True)]
    assert node.shell.stats() | {"markers_in_flight": 0} == {
        "transactional_ids": 1,
        "open": 0,
        "commits": 1,
        "aborts": 0,
        "timeouts": 0,
        "markers_in_flight": 0,
    }
    await node.restart(FakeMarkers())
    node.shell.begin_load()
    await node.shell.load()
    assert node.core.transactions["t"].state == S.COMPLETE_COMMIT


async def test_retriable_marker_failures_are_retried_and_vanished_partitions_count_as_done(
    tmp_path: Path, fast_retries: None
) -> None:
    # TransactionMarkerRequestCompletionHandler retries NOT_LEADER_OR_FOLLOWER and the like; a
    # partition that no longer exists is dropped from the transaction
    markers = FakeMarkers(
        {
            OUT[0]: [E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR],
            OUT[1]: [E.UNKNOWN_TOPIC_OR_PARTITION],
            ("__consumer_offsets", G_PARTITION): [E.COORDINATOR_LOAD_IN_PROGRESS],
        }
    )
    node = Node(tmp_path, markers)
    pid, epoch = await node.open_transaction()
    assert await node.end(pid, epoch, False) == E.NONE
    await node.state_becomes(S.COMPLETE_ABORT)
    # out-1 answered UNKNOWN_TOPIC_OR_PARTITION at once and was not asked again
    assert [c[3] for c in markers.data_calls] == [list(OUT), [OUT[0]], [OUT[0]]]
    assert len(markers.group_calls) == 2
    assert node.shell.stats()["aborts"] == 1
    await node.restart(FakeMarkers())


async def test_a_restart_between_prepare_and_complete_sends_the_markers_again(
    tmp_path: Path, fast_retries: None
) -> None:
    # TransactionStateManager.loadTransactionsForTxnTopicPartition: a PrepareCommit found at load
    # has its markers sent again
    stuck = FakeMarkers({OUT[0]: [E.NOT_LEADER_OR_FOLLOWER] * 10_000})
    node = Node(tmp_path, stuck)
    pid, epoch = await node.open_transaction()
    assert await node.end(pid, epoch, True) == E.NONE
    await node.state_becomes(S.PREPARE_COMMIT)
    await asyncio.sleep(0.05)
    assert node.core.transactions["t"].state == S.PREPARE_COMMIT  # still retrying
    fresh = FakeMarkers()
    await node.restart(fresh)
    node.shell.begin_load()
    # until the replay is done the coordinator is loading
    r = await node.ask("DescribeTransactions", 0, {"transactional_ids": ["t"]})
    assert r["transaction_states"][0]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    r = await node.ask("InitProducerId", 4, {"transactional_id": "t", "transaction_timeout_ms": 60_000})
    assert r["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    await node.shell.load()
    await node.state_becomes(S.COMPLETE_COMMIT)
    assert fresh.data_calls == [(pid, epoch, True, list(OUT))]
    assert fresh.group_calls == [(G_PARTITION, pid, epoch, True)]
    await node.restart(FakeMarkers())


async def test_a_marker_writer_that_raises_is_retried(tmp_path: Path, fast_retries: None) -> None:
    class Raising(FakeMarkers):
        raised = 0

        async def write_txn_markers(self, *args: Any) -> dict[TxnPartition, int]:
            if not self.raised:
                self.raised += 1
                raise OSError("disk gone")
            return await super().write_txn_markers(*args)

    markers = Raising()
    node = Node(tmp_path, markers)
    pid, epoch = await node.open_transaction()
    assert await node.end(pid, epoch, True) == E.NONE
    await node.state_becomes(S.COMPLETE_COMMIT)
    assert markers.raised == 1 and len(markers.data_calls) == 1
    await node.restart(FakeMarkers())


async def test_the_produce_check_answers_from_the_transaction(tmp_path: Path) -> None:
    node = Node(tmp_path, FakeMarkers())
    pid, epoch = await node.open_transaction()
    verify = node.shell.verify
    assert verify("t", pid, epoch, "out", 1) == E.NONE
    assert verify("t", pid, epoch + 1, "out", 1) == E.PRODUCER_FENCED
    assert verify("t", pid + 1, epoch, "out", 1) == E.INVALID_PRODUCER_ID_MAPPING
    assert verify("nobody", pid, epoch, "out", 1) == E.INVALID_PRODUCER_ID_MAPPING
    assert verify("t", pid, epoch, "elsewhere", 0) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert await node.end(pid, epoch, True) == E.NONE
    await node.state_becomes(S.COMPLETE_COMMIT)
    # the partition is no longer in an ongoing transaction (handleVerifyPartitionsInTransaction)
    assert verify("t", pid, epoch, "out", 1) == E.TRANSACTION_ABORTABLE
    await node.restart(FakeMarkers())


async def test_the_node_bounds_transaction_timeouts_by_its_setting(tmp_path: Path) -> None:
    # transaction.max.timeout.ms (TransactionCoordinator.validateTransactionTimeoutMs), wired from
    # --transaction-max-timeout-ms; the node answers InitProducerId through the shell
    from groupd.broker.node import Broker

    from groupd.config import Config

    broker = Broker(Config(data_dir=str(tmp_path), transaction_max_timeout_ms=5000))
    broker.txns.begin_load()
    await broker.txns.load()
    handler = broker.dispatcher.routes[22].handler

    async def init(timeout_ms: int) -> int:
        body = {"transactional_id": f"t{timeout_ms}", "transaction_timeout_ms": timeout_ms}
        answer = await call(handler, FakeRequest("InitProducerId", 4, body))
        assert answer is not None
        return int(answer["error_code"])

    try:
        assert await init(5001) == E.INVALID_TRANSACTION_TIMEOUT
        broker.logs.open_all()
        broker.data.start()
        assert await init(5000) == E.NONE
        assert broker.topics.get(TRANSACTION_STATE_TOPIC).internal  # created on first use
    finally:
        await broker.txns.drain()
        await broker.appender.close()
        broker.logs.close()
