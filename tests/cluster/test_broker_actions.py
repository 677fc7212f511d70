"""Stopping, starting and isolating brokers of a cluster, and preferred leader election, through the
control endpoint (the pytest plugin's methods) and ``groupd fault``: what clients see of it."""

from __future__ import annotations

import json
import socket
import urllib.request
from typing import Any

import pytest
from groupd.ops.control_client import ControlError
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupd.cli import main
from tests.cluster.conftest import create_topic, leaders, metadata, port_of, raw
from tests.ops.test_control import JSON, http
from tests.support.raw_client import RawClient


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_stopped_broker_closes_its_connections_and_its_partitions_get_new_leaders(
    healthy_cluster: GroupdBroker, unique: str
) -> None:
    cluster = healthy_cluster
    topic = f"stop-{unique}"
    create_topic(cluster, topic, partitions=3, replication=2)
    before = leaders(cluster, topic)
    led_by_2 = [p for p, (leader, _) in before.items() if leader == 2]
    assert led_by_2
    connected = raw(cluster, 2)
    try:
        out = cluster.stop_broker(2)
        assert out["state"] == "stopped" and out["leaders_moved"] >= len(led_by_2)
        assert connected.closed_by_peer()
    finally:
        connected.close()
    assert _refused(port_of(cluster, 2))
    answer = metadata(cluster, 1, [topic])
    assert [b["node_id"] for b in answer["brokers"]] == [1, 3]
    after = {p["partition_index"]: p for p in answer["topics"][0]["partitions"]}
    for p, (leader, epoch) in before.items():
        if p in led_by_2:
            assert after[p]["leader_id"] in (1, 3) and after[p]["leader_epoch"] == epoch + 1
            assert 2 not in after[p]["isr_nodes"] and after[p]["offline_replicas"] == [2]
        else:
            assert (after[p]["leader_id"], after[p]["leader_epoch"]) == (leader, epoch)
    # Stopped brokers do not count for replication factors (only 2 registered now).
    client = raw(cluster, 3)
    try:
        created = client.request(
            "CreateTopics",
            5,
            {
                "topics": [
                    {
                        "name": f"rf3-{unique}",
                        "num_partitions": 1,
                        "replication_factor": 3,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 1000,
                "validate_only": True,
            },
        )
    finally:
        client.close()
    assert created["topics"][0]["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    # Started again: listed, leading nothing until the preferred leaders are elected.
    assert cluster.start_broker(2)["state"] == "live"
    assert [b["node_id"] for b in metadata(cluster, 2, [topic])["brokers"]] == [1, 2, 3]
    assert {p: leader for p, (leader, _) in leaders(cluster, topic).items() if p in led_by_2} != dict.fromkeys(
        led_by_2, 2
    )
    assert cluster.rebalance_leaders()["leaders_moved"] >= len(led_by_2)
    back = leaders(cluster, topic)
    for p in led_by_2:
        assert back[p] == (2, before[p][1] + 2)


def test_a_stale_leader_epoch_is_fenced_after_a_leader_change(healthy_cluster: GroupdBroker, unique: str) -> None:
    from tests.cluster.test_cluster_metadata import _fetch

    cluster = healthy_cluster
    topic = f"fence-{unique}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ((leader, epoch),) = leaders(cluster, topic).values()
    cluster.stop_broker(leader)
    ((new_leader, new_epoch),) = leaders(cluster, topic).values()
    assert new_leader != leader and new_epoch == epoch + 1
    client = raw(cluster, new_leader)
    try:
        for current, code in (
            (epoch, ErrorCode.FENCED_LEADER_EPOCH),
            (new_epoch, 0),
            (new_epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
        ):
            part = client.request("Fetch", 12, _fetch(topic, [(0, current)]))["responses"][0]["partitions"][0]
            assert part["error_code"] == code, current
    finally:
        client.close()


def test_an_isolated_broker_answers_nothing_until_it_is_reconnected(healthy_cluster: GroupdBroker) -> None:
    cluster = healthy_cluster
    body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    before = raw(cluster, 3)
    late: RawClient | None = None
    try:
        assert before.request("Metadata", 12, body)["brokers"]
        assert cluster.isolate_broker(3)["state"] == "isolated"
        before.sock.settimeout(1.0)
        before.send("Metadata", 12, body)
        with pytest.raises(TimeoutError):
            before.recv_frame()
        late = RawClient(port_of(cluster, 3), timeout=1.0)  # new connections are accepted, not read
        late.send("Metadata", 12, body)
        with pytest.raises(TimeoutError):
            late.recv_frame()
        # The others still list it: the cluster sees it, its clients do not.
        assert [b["node_id"] for b in metadata(cluster, 1, [])["brokers"]] == [1, 2, 3]
        assert cluster.isolate_broker(3, False)["state"] == "live"
        # What waited in the sockets is read and answered now, as after a healed partition.
        for client in (before, late):
            client.sock.settimeout(5.0)
            assert [b["node_id"] for b in client.receive("Metadata", 12)["brokers"]] == [1, 2, 3]
    finally:
        before.close()
        if late is not None:
            late.close()


def test_broker_actions_refuse_what_cannot_be_done(healthy_cluster: GroupdBroker) -> None:
    cluster = healthy_cluster
    with pytest.raises(ControlError, match="no broker 7") as e:
        cluster.stop_broker(7)
    assert e.value.status == 404
    cluster.stop_broker(1)
    with pytest.raises(ControlError, match="stopped already") as e:
        cluster.stop_broker(1)
    assert e.value.status == 409
    with pytest.raises(ControlError, match="is stopped"):
        cluster.isolate_broker(1)
    with pytest.raises(ControlError, match="is stopped"):
        cluster.move_coordinator("g", 1)
    cluster.stop_broker(2)
    with pytest.raises(ControlError, match="the last one running") as e:
        cluster.stop_broker(3)
    assert e.value.status == 409
    with pytest.raises(ControlError, match="live, not stopped"):
        cluster.start_broker(3)
    assert [b["state"] for b in cluster.brokers()] == ["stopped", "stopped", "live"]
    # With broker 1 (the first) stopped, the others still answer and name a controller.
    assert metadata(cluster, 3, [])["controller_id"] == 3


def test_groupd_fault_broker_commands(
    healthy_cluster: GroupdBroker, capsys: pytest.CaptureFixture[str], unique: str
) -> None:
    url = healthy_cluster.control_url or ""
    assert main(["fault", "brokers", "--control", url]) == 0
    assert capsys.readouterr().out.split("\n")[0].split()[2] == "live"
    assert main(["fault", "stop-broker", "3", "--control", url]) == 0
    assert "broker 3 stopped" in capsys.readouterr().out
    assert main(["fault", "isolate-broker", "3", "--control", url]) == 1
    assert "broker 3 is stopped" in capsys.readouterr().err
    assert main(["fault", "start-broker", "3", "--rebalance", "--control", url, "--json"]) == 0
    assert '"state": "live"' in capsys.readouterr().out
    assert main(["fault", "move-coordinator", "--group", unique, "--broker", "2", "--control", url]) == 0
    assert f"group {unique}" in capsys.readouterr().out
    assert main(["fault", "rebalance-leaders", "--control", url]) == 0
    assert "moved to their preferred broker" in capsys.readouterr().out


def test_broker_actions_and_every_brokers_connections_are_in_the_metrics(
    cluster_with_metrics: tuple[GroupdBroker, int],
) -> None:
    cluster, metrics_port = cluster_with_metrics

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            return resp.read().decode()

    body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    clients = [raw(cluster, 2), raw(cluster, 3)]
    try:
        for c in clients:
            c.request("Metadata", 12, body)
        assert "groupd_connections 2.0" in scrape()
        cluster.stop_broker(2)
        assert clients[0].closed_by_peer()
        assert "groupd_connections 1.0" in scrape()
    finally:
        for c in clients:
            c.close()
    cluster.start_broker(2, rebalance=True)
    text = scrape()
    assert 'groupd_faults_injected_total{api="-",kind="stop_broker"} 1.0' in text
    assert 'groupd_faults_injected_total{api="-",kind="start_broker"} 1.0' in text


BROKER_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "broker": st.integers(-1, 5) | JSON,
        "group": st.sampled_from(["g", "billing"]) | JSON,
        "rebalance": st.booleans() | JSON,
        "isolated": st.booleans() | JSON,
        "extra": JSON,
    },
)
BROKER_ROUTES = [
    "/actions/stop-broker",
    "/actions/start-broker",
    "/actions/isolate-broker",
    "/actions/rebalance-leaders",
    "/actions/move-coordinator",
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=BROKER_FIELDS | JSON, path=st.sampled_from(BROKER_ROUTES))
def test_any_json_to_the_broker_actions_is_answered_without_a_5xx(
    healthy_cluster: GroupdBroker, doc: Any, path: str
) -> None:
    status, answer = http(healthy_cluster.control_url or "", "POST", path, json.dumps(doc).encode())
    assert status in (200, 400, 404, 409), (status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and answer["message"]


def test_the_cluster_survived_the_fuzzing(healthy_cluster: GroupdBroker) -> None:
    assert healthy_cluster.proc is not None and healthy_cluster.proc.poll() is None
    live = [b["node_id"] for b in healthy_cluster.brokers() if b["state"] == "live"]
    assert live
    assert len(metadata(healthy_cluster, live[0], [])["brokers"]) >= len(live)


def test_leader_epochs_survive_a_restart_of_the_daemon(tmp_path: Any, unique: str) -> None:
    """A client that cached a leader epoch fetches with it after the daemon restarts: the epoch must
    not have gone back to 0 (it would be UNKNOWN_LEADER_EPOCH, and librdkafka ignores metadata whose
    leader epoch went back), so leaders and epochs are kept in the data directory."""
    from tests.cluster.test_cluster_metadata import _fetch

    cluster = GroupdBroker(tmp_path / "data", brokers=3, num_partitions=1)
    cluster.start()
    try:
        topic = f"kept-{unique}"
        create_topic(cluster, topic, partitions=1, replication=3)
        ((leader, epoch),) = leaders(cluster, topic).values()
        cluster.stop_broker(leader)
        ((moved_to, moved_epoch),) = leaders(cluster, topic).values()
        assert moved_epoch == epoch + 1
        cluster.stop()
        cluster.start()
        assert leaders(cluster, topic) == {0: (moved_to, moved_epoch)}
        client = raw(cluster, moved_to)
        try:
            part = client.request("Fetch", 12, _fetch(topic, [(0, moved_epoch)]))["responses"][0]["partitions"][0]
            assert part["error_code"] == 0
        finally:
            client.close()
    finally:
        cluster.stop()


def test_a_fetch_parked_on_a_broker_that_loses_the_partition_is_answered_at_once(tmp_path: Any, unique: str) -> None:
    # Kafka's DelayedFetch.tryComplete, case B: a broker that is no longer the leader of a partition
    # a parked fetch reads answers it at once, with NOT_LEADER_OR_FOLLOWER and the new leader; left
    # parked it waited out its max wait (franz-go asks for 5 s) before the client learnt of the move.
    from tests.broker.test_fetch_parking import free_port, parked_gauge, wait_gauge
    from tests.cluster.test_cluster_metadata import _fetch

    metrics = free_port()
    with GroupdBroker(tmp_path / "data", brokers=3, metrics_port=metrics) as cluster:
        topic = f"moved-{unique}"
        create_topic(cluster, topic, partitions=1, replication=3)
        ((home, _),) = leaders(cluster, topic).values()
        cluster.stop_broker(home)
        cluster.start_broker(home)  # the partition stays with the broker it moved to
        ((away, epoch),) = leaders(cluster, topic).values()
        assert away != home
        client = RawClient(port_of(cluster, away), timeout=30)
        try:
            body = _fetch(topic, [(0, epoch)])
            body["max_wait_ms"] = 120_000
            corr = client.send("Fetch", 12, body)
            wait_gauge(metrics, 1)
            assert cluster.rebalance_leaders()["leaders_moved"] >= 1  # ours back to its preferred leader
            (part,) = client.receive("Fetch", 12, corr)["responses"][0]["partitions"]
            assert (part["partition_index"], part["error_code"]) == (0, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            assert part["current_leader"] == {"leader_id": home, "leader_epoch": epoch + 1}
            assert part["records"] == b""
            assert parked_gauge(metrics) == 0
        finally:
            client.close()
