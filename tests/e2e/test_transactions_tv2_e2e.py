"""Transaction version 2 (KIP-890 part 2) at the wire, against a real daemon: no client on this
machine speaks it (confluent-kafka's librdkafka stops at version 1; Java 4.x and franz-go do), so a
raw client sends what a TV2 producer sends, field by field as the JSON specs say: InitProducerId,
Produce v12 without AddPartitionsToTxn, TxnOffsetCommit v5 without AddOffsetsToTxn, EndTxn v5
(which answers the new epoch); read back by a read_committed confluent-kafka consumer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from groupd.storage.records import build_batch

from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient

NONE = 0
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    d = GroupdProcess(Path(tmp_path_factory.mktemp("tv2")) / "data")
    d.start()
    try:
        yield d
    finally:
        d.stop()


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(15)


def read_committed(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while True:
            assert time.monotonic() < deadline, f"{topic} not read to its end"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise KafkaException(m.error())
            values.append(m.value())
    finally:
        c.close()


class Tv2Producer:
    """What a transaction version 2 producer sends (Kafka 4.x's TransactionManager with TV2)."""

    def __init__(self, client: RawClient, txn_id: str) -> None:
        self.client = client
        self.txn_id = txn_id
        self.pid = -1
        self.epoch = -1
        self.seq = 0

    def init(self) -> int:
        r = self.client.request(
            "InitProducerId",
            4,
            {"transactional_id": self.txn_id, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
        )
        if r["error_code"] == NONE:
            self.pid, self.epoch, self.seq = r["producer_id"], r["producer_epoch"], 0
        return int(r["error_code"])

    def produce(self, topic: str, *values: bytes, epoch: int | None = None, version: int = 12) -> int:
        now = int(time.time() * 1000)
        batch = build_batch(
            [(None, v, (), now) for v in values],
            producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=self.seq,
            transactional=True,
        )
        r = self.client.request(
            "Produce",
            version,
            {
                "transactional_id": self.txn_id,
                "acks": -1,
                "timeout_ms": 10000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        code = int(r["responses"][0]["partition_responses"][0]["error_code"])
        if code == NONE:
            self.seq += len(values)
        return code

    def commit_offsets(self, group: str, topic: str, offset: int, epoch: int | None = None, version: int = 5) -> int:
        r = self.client.request(
            "TxnOffsetCommit",
            version,
            {
                "transactional_id": self.txn_id,
                "group_id": group,
                "producer_id": self.pid,
                "producer_epoch": self.epoch if epoch is None else epoch,
                "generation_id": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": offset,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
        )
        return int(r["topics"][0]["partitions"][0]["error_code"])

    def end(self, commit: bool, epoch: int | None = None, version: int = 5) -> dict[str, Any]:
        r = self.client.request(
            "EndTxn",
            version,
            {
                "transactional_id": self.txn_id,
                "producer_id": self.pid,
                "producer_epoch": self.epoch if epoch is None else epoch,
                "committed": commit,
            },
        )
        if r["error_code"] == NONE and version >= 5:
            # the client goes on with what the coordinator answers, sequences from 0
            self.pid, self.epoch, self.seq = r["producer_id"], r["producer_epoch"], 0
        return r

    def end_retrying(self, commit: bool) -> dict[str, Any]:
        """EndTxn as a client sends it: again while the previous transaction's markers are written."""
        deadline = time.monotonic() + 10
        while True:
            r = self.end(commit)
            if r["error_code"] != 51 or time.monotonic() > deadline:  # CONCURRENT_TRANSACTIONS
                return r
            time.sleep(0.05)

    def produce_retrying(self, topic: str, *values: bytes) -> int:
        deadline = time.monotonic() + 10
        while True:
            code = self.produce(topic, *values)
            if code != 51 or time.monotonic() > deadline:
                return code
            time.sleep(0.05)


def committed_offset(client: RawClient, group: str, topic: str) -> int:
    r = client.request("OffsetFetch", 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]})
    return int(r["topics"][0]["partitions"][0]["committed_offset"])


def test_api_versions_finalize_transaction_version_2(daemon: GroupdProcess) -> None:
    client = RawClient(daemon.port)
    try:
        r = client.request("ApiVersions", 3, {"client_software_name": "raw", "client_software_version": "1"})
    finally:
        client.close()
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
    assert keys[26] == (0, 5)  # EndTxn
    assert keys[0][1] >= 12  # Produce
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in r["supported_features"]}
    finalized = {f["name"]: (f["min_version_level"], f["max_version_level"]) for f in r["finalized_features"]}
    assert supported["transaction.version"] == (0, 2)
    assert finalized["transaction.version"] == (2, 2)


def test_tv2_commit_abort_and_fencing(daemon: GroupdProcess) -> None:
    topic, group, txn_id = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("tv2", "g", "txn"))
    create_topic(daemon.bootstrap, topic)
    client = RawClient(daemon.port)
    try:
        p = Tv2Producer(client, txn_id)
        assert p.init() == NONE
        pid, e0 = p.pid, p.epoch
        # partitions and offsets join the transaction implicitly
        assert p.produce(topic, b"a", b"b") == NONE
        assert p.commit_offsets(group, topic, 2) == NONE
        r = p.end(True)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (NONE, pid, e0 + 1)
        assert read_committed(daemon.bootstrap, topic) == [b"a", b"b"]
        assert committed_offset(client, group, topic) == 2

        # the next transaction with the new epoch; aborted
        assert p.produce_retrying(topic, b"c") == NONE
        assert p.commit_offsets(group, topic, 3) == NONE
        r = p.end_retrying(False)
        assert (r["error_code"], r["producer_epoch"]) == (NONE, e0 + 2)
        assert read_committed(daemon.bootstrap, topic) == [b"a", b"b"]
        assert committed_offset(client, group, topic) == 2

        # the old epochs are fenced, with the code each version knows
        assert p.produce(topic, b"zombie", epoch=e0) == INVALID_PRODUCER_EPOCH
        assert p.commit_offsets(group, topic, 9, epoch=e0) == INVALID_PRODUCER_EPOCH
        assert p.end(True, epoch=e0)["error_code"] == PRODUCER_FENCED
        assert p.end(True, epoch=e0, version=1)["error_code"] == INVALID_PRODUCER_EPOCH
        # "abort when unsure": nothing added, the abort is accepted and bumps the epoch
        r = p.end_retrying(False)
        assert (r["error_code"], r["producer_epoch"]) == (NONE, e0 + 3)
        assert read_committed(daemon.bootstrap, topic, "read_uncommitted") == [b"a", b"b", b"c"]
    finally:
        client.close()


def test_tv2_transaction_survives_a_sigkill(tmp_path: Path) -> None:
    d = GroupdProcess(tmp_path / "data")
    d.start()
    try:
        topic, group, txn_id = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("tv2k", "g", "txn"))
        create_topic(d.bootstrap, topic)
        client = RawClient(d.port)
        p = Tv2Producer(client, txn_id)
        assert p.init() == NONE
        assert p.produce(topic, b"one") == NONE
        r = p.end(True)
        assert r["error_code"] == NONE
        assert p.produce_retrying(topic, b"two") == NONE
        assert p.commit_offsets(group, topic, 2) == NONE
        pid, epoch = p.pid, p.epoch
        client.close()
        d.kill()
        d.start(port=d.port)
        client = RawClient(d.port)
        p.client = client
        deadline = time.monotonic() + 15
        while (r := p.end(True))["error_code"] in (14, 51) and time.monotonic() < deadline:  # loading
            time.sleep(0.1)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (NONE, pid, epoch + 1)
        assert read_committed(d.bootstrap, topic) == [b"one", b"two"]
        assert committed_offset(client, group, topic) == 2
        client.close()
    finally:
        d.stop()


def test_txn_offset_commit_naming_only_the_group_into_a_consumer_group(daemon: GroupdProcess) -> None:
    """TxnOffsetCommit v2 (and any version with generation -1, no member, no instance id, as
    ``consumer_group_metadata_new(group_id)`` sends) into a KIP-848 group with a live member is
    accepted, as ConsumerGroup.validateOffsetCommit accepts it (groupd refused it with
    UNKNOWN_MEMBER_ID before)."""
    topic, group, txn_id = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("cg", "g", "txn"))
    create_topic(daemon.bootstrap, topic)
    member = Consumer({"bootstrap.servers": daemon.bootstrap, "group.id": group, "group.protocol": "consumer"})
    client = RawClient(daemon.port)
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 15
        while not member.assignment():
            assert time.monotonic() < deadline, "the KIP-848 member got no assignment"
            member.poll(0.1)
        p = Tv2Producer(client, txn_id)
        assert p.init() == NONE
        add = {"transactional_id": txn_id, "producer_id": p.pid, "producer_epoch": p.epoch, "group_id": group}
        assert client.request("AddOffsetsToTxn", 3, add)["error_code"] == NONE
        assert p.commit_offsets(group, topic, 5, version=2) == NONE
        assert p.end(True, version=3)["error_code"] == NONE
        deadline = time.monotonic() + 10
        while committed_offset(client, group, topic) != 5:  # the marker lands after EndTxn's answer
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        client.close()
        member.close()
