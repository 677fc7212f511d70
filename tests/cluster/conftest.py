"""Cluster mode (``groupd serve --brokers 3``): three brokers in one process, from groupd's own pytest
plugin (what its users get). One cluster is shared by the tests of a module; a test that stops,
isolates or moves brokers leaves them as it found them (``healthy_cluster`` restores it)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from groupd.ops.pytest_plugin import GroupdBroker

from tests.support.raw_client import RawClient


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdBroker]:
    broker = GroupdBroker(
        tmp_path_factory.mktemp("cluster") / "data",
        brokers=3,
        group_initial_rebalance_delay_ms=0,
        num_partitions=3,
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def healthy_cluster(cluster: GroupdBroker) -> Iterator[GroupdBroker]:
    """The shared cluster, every broker started again and every leader back home after the test."""
    yield cluster
    for b in cluster.brokers():
        if b["state"] == "stopped":
            cluster.start_broker(b["node_id"])
        elif b["state"] == "isolated":
            cluster.isolate_broker(b["node_id"], False)
    cluster.rebalance_leaders()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


def port_of(cluster: GroupdBroker, node_id: int) -> int:
    return int(cluster.nodes[node_id].rsplit(":", 1)[1])


def raw(cluster: GroupdBroker, node_id: int) -> RawClient:
    return RawClient(port_of(cluster, node_id))


def metadata(cluster: GroupdBroker, node_id: int, topics: list[str] | None, version: int = 12) -> dict[str, Any]:
    """A Metadata answer of broker ``node_id`` (``topics=None``: every topic)."""
    body: dict[str, Any] = {
        "topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    if version == 0 and topics is None:
        body["topics"] = []
    client = raw(cluster, node_id)
    try:
        return client.request("Metadata", version, body)
    finally:
        client.close()


def leaders(cluster: GroupdBroker, topic: str, node_id: int | None = None) -> dict[int, tuple[int, int]]:
    """partition -> (leader, leader epoch) as broker ``node_id`` (default: any live one) reports it."""
    if node_id is None:
        node_id = next(b["node_id"] for b in cluster.brokers() if b["state"] == "live")
    (t,) = metadata(cluster, node_id, [topic])["topics"]
    return {p["partition_index"]: (p["leader_id"], p["leader_epoch"]) for p in t["partitions"]}


def create_topic(cluster: GroupdBroker, topic: str, partitions: int = 3, replication: int = 3) -> None:
    client = raw(cluster, min(cluster.nodes))
    try:
        answer = client.request(
            "CreateTopics",
            5,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": partitions,
                        "replication_factor": replication,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
    finally:
        client.close()
    assert answer["topics"][0]["error_code"] == 0, answer


@pytest.fixture
def cluster_with_metrics(groupd_cluster_factory: Any) -> tuple[GroupdBroker, int]:
    """A cluster of its own with a metrics endpoint (the plugin's ``groupd_cluster`` with a setting)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return groupd_cluster_factory(metrics_port=port), port


@pytest.fixture
def groupd_cluster_factory(groupd_broker_factory: Any) -> Any:
    return lambda **settings: groupd_broker_factory(brokers=3, **settings)
