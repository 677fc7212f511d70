"""Transactions end to end: real transactional producers (confluent-kafka, aiokafka, kafka-python)
against a real daemon process, read back with read_committed and read_uncommitted consumers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from groupd.ops.kafka_client import KafkaClient

from tests.support.daemon import GroupdProcess


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 1, timeout: float = 15.0) -> list[bytes]:
    """Every value of ``topic`` up to its end, as a consumer at ``isolation`` sees it."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic} not read to its end: {len(values)} values so far"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    continue
                raise KafkaException(m.error())
            at_end.discard(m.partition())
            values.append(m.value())
    finally:
        c.close()
    return values


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    p.init_transactions(15)
    return p


def transactions_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``groupd transactions ARGS --bootstrap-server BOOTSTRAP``, the operator's view."""
    cmd = [sys.executable, "-m", "groupd", "transactions", *args, "--bootstrap-server", bootstrap]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def describe(bootstrap: str, txn_id: str) -> dict[str, Any]:
    out = transactions_cli(bootstrap, "describe", txn_id, "--json")
    assert out.returncode == 0, out.stderr
    (d,) = json.loads(out.stdout)
    return d


def wait_state(bootstrap: str, txn_id: str, state: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    with KafkaClient(bootstrap) as client:
        while True:
            d = client.describe_transaction(txn_id)
            if d is not None and d.state == state:
                return describe(bootstrap, txn_id)
            assert time.monotonic() < deadline, f"{txn_id}: {d}"
            time.sleep(0.05)


def test_confluent_commit_and_abort_read_committed_and_uncommitted(groupd: GroupdProcess, unique: str) -> None:
    topic, txn_id = f"txn-out-{unique}", f"txn-{unique}"
    p = txn_producer(groupd.bootstrap, txn_id)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"a{i}".encode())
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(7):
        p.produce(topic, f"aborted{i}".encode())
    p.flush(15)  # in the log before the abort: read_uncommitted consumers will see them
    p.abort_transaction(15)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"b{i}".encode())
    p.commit_transaction(15)

    committed = read_all(groupd.bootstrap, topic, "read_committed")
    assert committed == [f"a{i}".encode() for i in range(10)] + [f"b{i}".encode() for i in range(5)]
    uncommitted = read_all(groupd.bootstrap, topic, "read_uncommitted")
    assert sorted(uncommitted) == sorted(committed + [f"aborted{i}".encode() for i in range(7)])

    d = describe(groupd.bootstrap, txn_id)
    assert (d["state"], d["producer_epoch"], d["partitions"]) == ("CompleteCommit", 0, [])
    out = transactions_cli(groupd.bootstrap, "list", "--json")
    listed = {t["transactional_id"]: t for t in json.loads(out.stdout)}
    assert listed[txn_id] == {"transactional_id": txn_id, "producer_id": d["producer_id"], "state": "CompleteCommit"}


def test_a_successor_fences_a_producer_that_died_mid_transaction(groupd: GroupdProcess, unique: str) -> None:
    # TransactionCoordinator.handleInitProducerId over an Ongoing transaction: the epoch is bumped,
    # the open transaction aborted, and the old producer can no longer commit
    topic, txn_id = f"txn-fence-{unique}", f"txn-{unique}"
    old = txn_producer(groupd.bootstrap, txn_id)
    old.begin_transaction()
    for i in range(20):
        old.produce(topic, f"zombie{i}".encode())
    old.flush(15)
    assert describe(groupd.bootstrap, txn_id)["state"] == "Ongoing"

    new = txn_producer(groupd.bootstrap, txn_id)  # answered once the fenced transaction is aborted
    d = describe(groupd.bootstrap, txn_id)
    assert (d["state"], d["producer_epoch"]) == ("Empty", 2)  # +1 for the fence, +1 for the successor
    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(15)
    assert raised.value.args[0].fatal()
    new.begin_transaction()
    new.produce(topic, b"successor")
    new.commit_transaction(15)
    assert read_all(groupd.bootstrap, topic, "read_committed") == [b"successor"]
    assert len(read_all(groupd.bootstrap, topic, "read_uncommitted")) == 21


def test_a_hung_transaction_is_aborted_after_its_timeout(groupd: GroupdProcess, unique: str) -> None:
    # TransactionCoordinator.abortTimedOutTransactions
    topic, txn_id = f"txn-hung-{unique}", f"txn-{unique}"
    p = txn_producer(groupd.bootstrap, txn_id, **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, b"never")
    p.flush(15)
    t0 = time.monotonic()
    d = wait_state(groupd.bootstrap, txn_id, "CompleteAbort", timeout=10)
    assert time.monotonic() - t0 < 3
    assert d["producer_epoch"] == 1  # bumped by the abort: the producer is fenced
    with pytest.raises(KafkaException):
        p.commit_transaction(15)
    assert read_all(groupd.bootstrap, topic, "read_committed") == []


def test_a_timeout_above_the_maximum_is_refused(groupd: GroupdProcess, unique: str) -> None:
    # validateTransactionTimeoutMs: transaction.max.timeout.ms (900000 by default)
    p = Producer(
        {"bootstrap.servers": groupd.bootstrap, "transactional.id": f"txn-{unique}", "transaction.timeout.ms": 900_001}
    )
    with pytest.raises(KafkaException) as raised:
        p.init_transactions(15)
    assert raised.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_confluent_offsets_sent_to_a_transaction_are_committed_with_it(groupd: GroupdProcess, unique: str) -> None:
    # TxnOffsetCommit offsets stay pending until the marker lands in __consumer_offsets: visible on
    # commit, gone on abort (GroupMetadataManager/OffsetMetadataManager.replayEndTransactionMarker)
    topic, group, txn_id, source = f"txn-offs-{unique}", f"g-{unique}", f"txn-{unique}", f"txn-in-{unique}"
    with KafkaClient(groupd.bootstrap) as client:
        client.create_topic(source, 1, -1, {})
    p = txn_producer(groupd.bootstrap, txn_id)
    c = Consumer({"bootstrap.servers": groupd.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        metadata = c.consumer_group_metadata()
        for offset, commit in ((5, True), (9, False), (12, True), (20, False)):
            p.begin_transaction()
            p.produce(topic, f"up-to-{offset}".encode())
            p.send_offsets_to_transaction([TopicPartition(source, 0, offset)], metadata, 15)
            (p.commit_transaction if commit else p.abort_transaction)(15)
            # EndTxn is answered once PrepareCommit/PrepareAbort is durable; the offsets move when
            # the marker is in __consumer_offsets, before Complete* is written
            wait_state(groupd.bootstrap, txn_id, "CompleteCommit" if commit else "CompleteAbort")
            with KafkaClient(groupd.bootstrap) as client:
                committed = client.committed_offsets(group)
            assert committed == {(source, 0): 12 if offset >= 12 else 5}, offset
    finally:
        c.close()
    assert read_all(groupd.bootstrap, topic, "read_committed") == [b"up-to-5", b"up-to-12"]


def _kafka_python_batches(bootstrap: str, txn_id: str, topic: str, batches: list[tuple[list[bytes], bool]]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    try:
        p.init_transactions()
        for values, commit in batches:
            p.begin_transaction()
            for v in values:
                p.send(topic, v)
            p.flush()  # in the log before the transaction ends
            (p.commit_transaction if commit else p.abort_transaction)()
    finally:
        p.close()


def _aiokafka_batches(bootstrap: str, txn_id: str, topic: str, batches: list[tuple[list[bytes], bool]]) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await p.start()
        try:
            for values, commit in batches:
                await p.begin_transaction()
                for v in values:
                    await p.send(topic, v)
                await p.flush()
                await (p.commit_transaction() if commit else p.abort_transaction())
        finally:
            await p.stop()

    asyncio.run(run())


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_aborted_on_purpose_read_committed_and_uncommitted(groupd: GroupdProcess, unique: str, client: str) -> None:
    topic, txn_id = f"txn-{client}-{unique}", f"txn-{client}-{unique}"
    kept = [f"kept{i}".encode() for i in range(10)]
    dropped = [f"dropped{i}".encode() for i in range(10)]
    batches = [(kept[:5], True), (dropped, False), (kept[5:], True)]
    {"kafka-python": _kafka_python_batches, "aiokafka": _aiokafka_batches}[client](
        groupd.bootstrap, txn_id, topic, batches
    )
    assert read_all(groupd.bootstrap, topic, "read_committed") == kept
    assert read_all(groupd.bootstrap, topic, "read_uncommitted") == kept[:5] + dropped + kept[5:]
    with KafkaClient(groupd.bootstrap) as client_:
        d = client_.describe_transaction(txn_id)
    assert d is not None and d.state == "CompleteCommit"


def test_cli_tables_and_an_unknown_id(groupd: GroupdProcess, unique: str) -> None:
    txn_id = f"txn-cli-{unique}"
    p = txn_producer(groupd.bootstrap, txn_id)
    p.begin_transaction()
    p.produce(f"txn-cli-{unique}", b"x")
    p.flush(15)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return transactions_cli(groupd.bootstrap, *args)

    out = cli("describe", txn_id)
    header, row = out.stdout.splitlines()
    assert header.split() == [
        "TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "DURATION-MS", "PARTITIONS"
    ]  # fmt: skip
    assert row.split()[2:] == ["Ongoing", row.split()[3], "0", "60000", row.split()[6], f"txn-cli-{unique}:0"]
    out = cli("list", "--state", "Ongoing")
    assert any(line.split()[0] == txn_id for line in out.stdout.splitlines()[1:])
    out = cli("describe", f"nope-{unique}", "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"] == "TRANSACTIONAL_ID_NOT_FOUND"
    p.abort_transaction(15)


def _kafkajs_path() -> str | None:
    """A ``node_modules`` directory node loads kafkajs from (``GROUPD_KAFKAJS_PATH`` or NODE_PATH)."""
    local = Path(__file__).resolve().parents[2] / ".venv" / "node" / "node_modules"  # make test installs it
    for path in (os.environ.get("GROUPD_KAFKAJS_PATH"), os.environ.get("NODE_PATH"), str(local)):
        if path and shutil.which("node"):
            probe = subprocess.run(
                ["node", "-e", "require('kafkajs')"], env={**os.environ, "NODE_PATH": path}, capture_output=True
            )
            if probe.returncode == 0:
                return path
    return None


def test_kafkajs_transactions_commit_abort_and_send_offsets(groupd: GroupdProcess, unique: str) -> None:
    node_path = _kafkajs_path()
    if node_path is None:
        pytest.skip("kafkajs not found: npm install --prefix DIR kafkajs@2, then GROUPD_KAFKAJS_PATH=DIR/node_modules")
    topic, source, group, txn_id = f"txn-js-{unique}", f"txn-js-in-{unique}", f"g-js-{unique}", f"txn-js-{unique}"
    with KafkaClient(groupd.bootstrap) as client:
        client.create_topic(topic, 1, -1, {})
        client.create_topic(source, 1, -1, {})
    script = Path(__file__).resolve().parents[1] / "support" / "kafkajs_txn.js"
    out = subprocess.run(
        ["node", str(script), groupd.bootstrap, txn_id, topic, source, group],
        env={**os.environ, "NODE_PATH": node_path},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip().splitlines()[-1:] == ["done"], out.stdout + out.stderr
    kept = [f"kept{i}".encode() for i in range(10)]
    assert read_all(groupd.bootstrap, topic, "read_committed") == kept
    dropped = [f"dropped{i}".encode() for i in range(5)]
    assert read_all(groupd.bootstrap, topic, "read_uncommitted") == kept[:5] + dropped + kept[5:]
    wait_state(groupd.bootstrap, txn_id, "CompleteCommit")
    with KafkaClient(groupd.bootstrap) as client:
        assert client.committed_offsets(group) == {(source, 0): 7}
