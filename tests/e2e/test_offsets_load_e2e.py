"""Issue 26, replay: a daemon restarted on a large ``__consumer_offsets`` log answers at once and
loads the log in the background, as a Kafka broker loads a coordinator partition it became the
leader of (``CoordinatorRuntime.scheduleLoadOperation``, ``CoordinatorLoaderImpl`` on its own
thread). Meanwhile ApiVersions, Metadata and FindCoordinator are answered (FindCoordinator names
this broker), and the group APIs of a partition still loading answer COORDINATOR_LOAD_IN_PROGRESS
(``CoordinatorRuntime.withActiveContextOrThrow``; ListGroups as a whole, DescribeGroups per group,
OffsetCommit per partition; a classic Heartbeat NONE). Real clients retry that error and get their
committed offsets once the load is done.

The load is held with GROUPD_TEST_LOAD_HOLD (a file: the loader waits while it exists) so that
what is answered during the load is seen without racing it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from groupd.coordinator import partition_for

from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.e2e

TOPIC = "load-orders"
LOAD_IN_PROGRESS = 14


def _group_in(partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(100_000) if partition_for(f"{prefix}-{i}") == partition)


@pytest.fixture
def large_log(tmp_path: Path) -> Path:
    """A data dir with a 200k-record offsets log (bench.logdata: groups rebalancing and committing)."""
    from bench import logdata

    data = tmp_path / "data"
    gen = logdata.generate(data, 200_000)
    assert gen["records"] >= 190_000
    return data


def _commit_with_confluent(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def _committed_with_confluent(bootstrap: str, group: str, partitions: list[int]) -> dict[int, int]:
    """confluent-kafka at default settings: its OffsetFetch retries COORDINATOR_LOAD_IN_PROGRESS."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(TOPIC, p) for p in partitions], timeout=60)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(10)


def _during_load(port: int, group: str) -> dict[str, Any]:
    """What each API answers while the group's partition is held loading (raw requests)."""
    raw = RawClient(port)
    try:
        out: dict[str, Any] = {}
        out["ApiVersions"] = raw.request(
            "ApiVersions", 3, {"client_software_name": "raw", "client_software_version": "1"}
        )["error_code"]
        md = raw.request(
            "Metadata",
            12,
            {
                "topics": [{"topic_id": None, "name": TOPIC}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        out["Metadata"] = [t["error_code"] for t in md["topics"]]
        fc = raw.request("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        out["FindCoordinator"] = (fc["error_code"], fc["port"])
        of = raw.request(
            "OffsetFetch",
            8,
            {
                "groups": [{"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
                "require_stable": False,
            },
        )
        out["OffsetFetch"] = of["groups"][0]["error_code"]
        oc = raw.request(
            "OffsetCommit",
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 1,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
        )
        out["OffsetCommit"] = oc["topics"][0]["partitions"][0]["error_code"]
        jg = raw.request(
            "JoinGroup",
            9,
            {
                "group_id": group,
                "session_timeout_ms": 10_000,
                "rebalance_timeout_ms": 10_000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
                "reason": None,
            },
        )
        out["JoinGroup"] = jg["error_code"]
        hb = raw.request(
            "ConsumerGroupHeartbeat",
            0,
            {
                "group_id": _group_in(partition_for(group), "cg"),
                "member_id": "m-1",
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout_ms": 10_000,
                "subscribed_topic_names": [TOPIC],
                "server_assignor": None,
                "topic_partitions": [],
            },
        )
        out["ConsumerGroupHeartbeat"] = hb["error_code"]
        dg = raw.request("DescribeGroups", 5, {"groups": [group], "include_authorized_operations": False})
        out["DescribeGroups"] = dg["groups"][0]["error_code"]
        out["ListGroups"] = raw.request("ListGroups", 4, {"states_filter": []})["error_code"]
        return out
    finally:
        raw.close()


def test_a_restart_on_a_large_log_answers_load_in_progress_until_loaded_then_clients_get_their_offsets(
    large_log: Path, tmp_path: Path
) -> None:
    group = _group_in(7, "load-e2e")
    hold = tmp_path / "hold"
    d = GroupdProcess(large_log, env={"GROUPD_TEST_LOAD_HOLD": str(hold)})
    with d:
        _create_topic(d.bootstrap)
        _commit_with_confluent(d.bootstrap, group, {0: 4242, 1: 77})
    # Restarted with the load held: the daemon listens and serves, the groups wait.
    hold.touch()
    d.start()
    try:
        assert _during_load(d.port, group) == {
            "ApiVersions": 0,
            "Metadata": [0],
            "FindCoordinator": (0, d.port),
            "OffsetFetch": LOAD_IN_PROGRESS,
            "OffsetCommit": LOAD_IN_PROGRESS,
            "JoinGroup": LOAD_IN_PROGRESS,
            "ConsumerGroupHeartbeat": LOAD_IN_PROGRESS,
            "DescribeGroups": LOAD_IN_PROGRESS,
            "ListGroups": LOAD_IN_PROGRESS,
        }
        assert len(d.events("offsets_loaded")) == 1  # the first run's: this one is held
        hold.unlink()  # the load goes on; the client retries until it is done
        assert _committed_with_confluent(d.bootstrap, group, [0, 1]) == {0: 4242, 1: 77}
        # (the other partitions may still be loading: each partition is served once it is loaded)
    finally:
        d.stop()


def test_offsets_committed_before_a_crash_are_fetched_by_a_client_started_during_the_load(large_log: Path) -> None:
    """SIGKILL, then a client asks at once: it meets the load (or not, by timing) and gets the
    offsets either way; the replay's fold is the state before the crash."""
    group = _group_in(23, "crash-e2e")
    d = GroupdProcess(large_log)
    d.start()
    try:
        _create_topic(d.bootstrap)
        _commit_with_confluent(d.bootstrap, group, {0: 5, 1: 6})
        _commit_with_confluent(d.bootstrap, group, {0: 1005})
    finally:
        d.kill()
    d.start()
    try:
        assert _committed_with_confluent(d.bootstrap, group, [0, 1]) == {0: 1005, 1: 6}
    finally:
        d.stop()
    assert os.path.isdir(large_log / "__consumer_offsets-23")
