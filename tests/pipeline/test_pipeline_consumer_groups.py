"""Issue 18: the pipeline's KIP-848 tables from a log a real daemon wrote while confluent-kafka
members (``group.protocol=consumer``) joined and left: ``consumer_group_epochs`` (one row per group
epoch bump) and ``consumer_group_members`` (assignment changes per member), and the report's section.

The story: a and b form the group on 4 partitions, c joins, b leaves, then a and c leave. What the
tables say is checked against what ConsumerGroupDescribe said at each stable point."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import pytest
from groupd.ops.kafka_client import KafkaClient
from pyspark.sql import SparkSession

from groupd import cli
from tests.pipeline.conftest import table
from tests.support.daemon import GroupdProcess
from tests.support.groups import Member

pytestmark = pytest.mark.e2e

TOPIC, GROUP = "events", "kip848-app"


def stable_epoch(bootstrap: str, members: int) -> tuple[int, dict[str, list[int]]]:
    """Wait until the group is Stable with ``members`` covering 4 partitions; its epoch and who owns what."""
    deadline = time.monotonic() + 30
    last = None
    while time.monotonic() < deadline:
        with KafkaClient(bootstrap) as client:
            last = client.describe_consumer_group(GROUP)
        if last is not None and last.state == "Stable" and len(last.members) == members:
            owned = {m.client_id: sorted(p for _t, p in m.assignment or []) for m in last.members}
            if sorted(p for ps in owned.values() for p in ps) == [0, 1, 2, 3]:
                assert last.group_epoch is not None
                return last.group_epoch, owned
        time.sleep(0.1)
    raise AssertionError(f"not stable with {members} members: {last}")


def test_consumer_group_epochs_and_members_from_a_daemons_log(spark: SparkSession, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path / "data"
    running: list[Member] = []
    with GroupdProcess(
        data, "--group-consumer-heartbeat-interval-ms", "500", "--group-consumer-min-heartbeat-interval-ms", "500"
    ) as d:
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=4, replication_factor=1)])[TOPIC].result(15)

        def member(name: str) -> Member:
            m = Member("confluent-kafka", d.bootstrap, GROUP, TOPIC, client_id=name, group_protocol="consumer")
            running.append(m.start())
            return m

        try:
            a, b = member("a"), member("b")
            e2, _ = stable_epoch(d.bootstrap, 2)
            c = member("c")
            e3, owned3 = stable_epoch(d.bootstrap, 3)
            b.stop()
            e4, owned4 = stable_epoch(d.bootstrap, 2)
            a.stop()
            c.stop()
        finally:
            for m in running:
                m.stop()
    assert (e3, e4) == (e2 + 1, e2 + 2)  # a join and a leave: one bump each

    out = tmp_path / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["analyze", "--data-dir", str(data), "--out", str(out), "--master", "local[2]"])
    assert code == 0, printed.getvalue()

    epochs = table(spark, out, "consumer_group_epochs", "log_offset")
    assert [e["group"] for e in epochs] == [GROUP] * len(epochs)
    assert [e["epoch"] for e in epochs] == list(range(1, e4 + 3))  # ..., e4, then a's and c's leaves
    by_epoch = {e["epoch"]: e for e in epochs}
    assert by_epoch[e3]["members_reconciled"] == 3 and by_epoch[e4]["members_reconciled"] == 2
    # b's leave caused the bump to e4, a's and c's the two after it
    assert [e["members_left"] for e in epochs] == [0] * (e4 - 1) + [1, 1, 1]
    for e in (by_epoch[e3], by_epoch[e4]):
        assert e["convergence_ms"] is not None and 0 <= e["convergence_ms"] <= e["duration_ms"]
        assert e["assignment_changes"] >= e["members_reconciled"]
    assert all(e["bumped_at"] <= e["ended_at"] for e in epochs[:-1])

    members = {m["client_id"]: m for m in table(spark, out, "consumer_group_members", "member_id")}
    assert set(members) == {"a", "b", "c"}
    assert all(m["left_at"] is not None for m in members.values())  # everyone left in the end
    assert members["b"]["last_epoch"] == e3 and members["a"]["last_epoch"] >= e4
    assert all(m["assignment_changes"] >= 2 for m in members.values())
    # b's last assignment (by topic name) is what ConsumerGroupDescribe showed before it left
    assert [(tp["topic"], tp["partition"]) for tp in members["b"]["last_assignment"]] == [
        (TOPIC, p) for p in owned3["b"]
    ]
    assert sorted(owned4) == ["a", "c"]

    html = (out / "report.html").read_text()
    assert 'id="consumer-groups"' in html and 'id="plot-consumers"' in html
    assert f"<td>{GROUP}</td>" in html
