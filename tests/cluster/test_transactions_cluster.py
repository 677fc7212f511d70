"""Transactions in a 3-broker cluster: FindCoordinator for a transactional id names the leader of
its ``__transaction_state`` partition (the same answer from every broker), and when that broker
stops a confluent-kafka transactional producer finds the new coordinator and commits its next
transaction; a read_committed consumer then sees every committed record once and no aborted one."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, Producer
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.partitioning import coordinator_partition

from tests.cluster.conftest import create_topic, raw


def _txn_coordinator(cluster: GroupdBroker, node_id: int, txn_id: str) -> tuple[int, int]:
    client = raw(cluster, node_id)
    try:
        answer = client.request("FindCoordinator", 4, {"key_type": 1, "coordinator_keys": [txn_id]})
    finally:
        client.close()
    (c,) = answer["coordinators"]
    return c["error_code"], c["node_id"]


def _read_committed(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rc-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    seen: list[bytes] = []
    try:
        for _ in range(200):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                seen.append(m.value())
            if len(seen) >= expect:
                # one more short drain: anything beyond ``expect`` would be a duplicate or an abort
                for _ in range(5):
                    m = c.poll(0.2)
                    if m is not None and m.error() is None:
                        seen.append(m.value())
                break
    finally:
        c.close()
    return seen


def test_a_transactional_producer_follows_its_coordinator_when_its_broker_stops(
    healthy_cluster: GroupdBroker, unique: str
) -> None:
    cluster = healthy_cluster
    topic, txn_id = f"txc-{unique}", f"txn-{unique}"
    create_topic(cluster, topic, partitions=3, replication=3)
    answers = {n: _txn_coordinator(cluster, n, txn_id) for n in cluster.nodes}
    assert len(set(answers.values())) == 1, answers  # every broker names the same one
    ((code, coordinator),) = set(answers.values())
    assert code == 0 and coordinator == sorted(cluster.nodes)[coordinator_partition(txn_id, 50) % 3]

    p: Any = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"a{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.abort_transaction(30)

    cluster.stop_broker(coordinator)
    live = [n for n in cluster.nodes if n != coordinator]
    moved = {n: _txn_coordinator(cluster, n, txn_id) for n in live}
    assert len(set(moved.values())) == 1 and next(iter(moved.values()))[1] in live, moved

    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"b{i}".encode())
    p.commit_transaction(60)
    p.flush(10)

    seen = _read_committed(",".join(cluster.nodes[n] for n in live), topic, 20)
    assert sorted(seen) == sorted([f"a{i}".encode() for i in range(10)] + [f"b{i}".encode() for i in range(10)])


def _init(cluster: GroupdBroker, node_id: int, txn_id: str, pid: int = -1, epoch: int = -1) -> dict[str, Any]:
    client = raw(cluster, node_id)
    try:
        body = {
            "transactional_id": txn_id,
            "transaction_timeout_ms": 60000,
            "producer_id": pid,
            "producer_epoch": epoch,
        }
        return client.request("InitProducerId", 4, body)
    finally:
        client.close()


def test_transaction_apis_on_a_broker_that_is_not_the_coordinator_answer_not_coordinator(
    cluster: GroupdBroker,
) -> None:
    """TransactionStateManager.getTransactionState: only the leader of the id's __transaction_state
    partition serves it; the others answer NOT_COORDINATOR and change nothing (no epoch bump)."""
    txn_id = f"nc-{uuid.uuid4().hex[:8]}"
    code, coordinator = _txn_coordinator(cluster, sorted(cluster.nodes)[0], txn_id)
    assert code == 0
    other = next(n for n in sorted(cluster.nodes) if n != coordinator)
    first = _init(cluster, coordinator, txn_id)
    assert first["error_code"] == 0
    pid, epoch = first["producer_id"], first["producer_epoch"]
    wrong = _init(cluster, other, txn_id)
    assert (wrong["error_code"], wrong["producer_id"], wrong["producer_epoch"]) == (16, -1, -1)  # NOT_COORDINATOR
    end = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": False}
    add = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
    client = raw(cluster, other)
    try:
        assert client.request("EndTxn", 5, end)["error_code"] == 16
        assert client.request("AddOffsetsToTxn", 3, add)["error_code"] == 16
        (d,) = client.request("DescribeTransactions", 0, {"transactional_ids": [txn_id]})["transaction_states"]
        assert d["error_code"] == 16
        listed = client.request("ListTransactions", 0, {"state_filters": [], "producer_id_filters": []})
        assert txn_id not in {t["transactional_id"] for t in listed["transaction_states"]}
    finally:
        client.close()
    client = raw(cluster, coordinator)
    try:
        (d,) = client.request("DescribeTransactions", 0, {"transactional_ids": [txn_id]})["transaction_states"]
        assert (d["error_code"], d["producer_id"], d["producer_epoch"]) == (0, pid, epoch)  # nothing bumped
        listed = client.request("ListTransactions", 0, {"state_filters": [], "producer_id_filters": []})
        assert txn_id in {t["transactional_id"] for t in listed["transaction_states"]}
    finally:
        client.close()
    again = _init(cluster, coordinator, txn_id)
    assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (0, pid, epoch + 1)


def test_txn_offset_commit_v5_adds_the_groups_partition_only_on_its_coordinator(cluster: GroupdBroker) -> None:
    """Transaction version 2: the group coordinator adds the group's __consumer_offsets partition
    to the transaction; a broker that does not lead it answers NOT_COORDINATOR and adds nothing."""
    txn_id, group, topic = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("tv2c", "g", "t"))
    create_topic(cluster, topic, 1)
    _code, txn_node = _txn_coordinator(cluster, sorted(cluster.nodes)[0], txn_id)
    client = raw(cluster, txn_node)
    try:
        (g,) = client.request("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"]
    finally:
        client.close()
    group_node = g["node_id"]
    other = next(n for n in sorted(cluster.nodes) if n != group_node)
    init = _init(cluster, txn_node, txn_id)
    pid, epoch = init["producer_id"], init["producer_epoch"]
    commit = {
        "transactional_id": txn_id,
        "group_id": group,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 3,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }

    def codes(node_id: int) -> int:
        c = raw(cluster, node_id)
        try:
            return int(c.request("TxnOffsetCommit", 5, commit)["topics"][0]["partitions"][0]["error_code"])
        finally:
            c.close()

    def described() -> dict[str, Any]:
        c = raw(cluster, txn_node)
        try:
            (d,) = c.request("DescribeTransactions", 0, {"transactional_ids": [txn_id]})["transaction_states"]
            return d
        finally:
            c.close()

    assert codes(other) == 16  # NOT_COORDINATOR
    assert described()["transaction_state"] == "Empty"  # nothing added
    assert codes(group_node) == 0
    d = described()
    assert d["transaction_state"] == "Ongoing"
    assert [t["topic"] for t in d["topics"]] == ["__consumer_offsets"]
    c = raw(cluster, txn_node)
    try:
        end = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True}
        r = c.request("EndTxn", 5, end)
        assert (r["error_code"], r["producer_epoch"]) == (0, epoch + 1)
    finally:
        c.close()
