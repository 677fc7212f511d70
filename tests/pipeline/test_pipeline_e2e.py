"""Acceptance: a real groupd, real clients, a scripted history, then ``groupd analyze`` on its data.

The story (confluent-kafka consumers, range assignor, one topic of 6 partitions):
  1. three members form the group (static ``static-a``, dynamic ``b``, and a killable process);
  2. member ``d`` joins;
  3. the killable process is SIGKILLed and expires;
  4. ``static-a`` restarts under a new member id (same generation, no rebalance);
  5. every member commits offsets at each stable point (10, then 20, then 30);
  6. everyone leaves; the admin API rewinds partition 0 to 5.
What the pipeline reports is checked against what the clients saw (librdkafka's DescribeGroups
view, decoded independently of groupd's own decoders).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from groupd import cli
from tests.pipeline.conftest import table
from tests.support.daemon import GroupdProcess
from tests.support.groups import GroupView, admin_for, describe, wait_balanced

pytestmark = pytest.mark.e2e

TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 6


class CommittingMember:
    """A confluent-kafka consumer in a thread that commits on request for what it owns."""

    def __init__(self, bootstrap: str, name: str, instance_id: str | None = None) -> None:
        self.conf = {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": name,
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
        }
        if instance_id:
            self.conf["group.instance.id"] = instance_id
        self.request: int | None = None
        self.committed = threading.Event()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self) -> CommittingMember:
        self._thread.start()
        return self

    def commit(self, offset: int, timeout: float = 20) -> None:
        self.committed.clear()
        self.request = offset
        assert self.committed.wait(timeout), f"{self.conf['client.id']} did not commit"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error:
            raise self.error

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(self.conf)
        c.subscribe([TOPIC])
        try:
            while not self._stop.is_set():
                c.poll(0.1)
                if self.request is not None:
                    owned = [TopicPartition(tp.topic, tp.partition, self.request) for tp in c.assignment()]
                    if owned:
                        c.commit(offsets=owned, asynchronous=False)
                    self.request = None
                    self.committed.set()
        except BaseException as e:  # surfaced by stop()
            self.error = e
        finally:
            c.close()


def _owners(view: GroupView) -> dict[tuple[str, int], str]:
    return {tp: m["instance_id"] or m["member_id"] for m in view.members for tp in m["assignment"]}


def _moved(before: GroupView, after: GroupView) -> list[dict]:
    a, b = _owners(before), _owners(after)
    return [
        {"topic": t, "partition": p, "from_members": [a[(t, p)]], "to_members": [b[(t, p)]]}
        for (t, p) in sorted(set(a) & set(b))
        if a[(t, p)] != b[(t, p)]
    ]


def _wait_state(bootstrap: str, state: str, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if describe(bootstrap, GROUP).state == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"{GROUP} not {state} in {timeout}s: {describe(bootstrap, GROUP)}")


def test_scripted_history_through_the_pipeline(spark: SparkSession, tmp_path: Path) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import NewTopic

    data = tmp_path / "data"
    # A 3 s initial delay lets the first three members form one generation together.
    daemon = GroupdProcess(data, "--group-initial-rebalance-delay-ms", "3000").start()
    views: list[GroupView] = []
    members: list[CommittingMember] = []
    killable = None
    try:
        boot = daemon.bootstrap
        admin_for(boot).create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(
            15
        )

        # 1. three members (the process first: it takes longest to join)
        killable = subprocess.Popen(
            [sys.executable, "-m", "tests.support.member_proc", boot, GROUP, TOPIC],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        a = CommittingMember(boot, "a", instance_id="static-a").start()
        b = CommittingMember(boot, "b").start()
        members += [a, b]
        views.append(wait_balanced(boot, GROUP, TOPIC, 3, PARTITIONS))
        for m in members:
            m.commit(10)
        # 2. one member added
        d = CommittingMember(boot, "d").start()
        members.append(d)
        views.append(wait_balanced(boot, GROUP, TOPIC, 4, PARTITIONS))
        for m in members:
            m.commit(20)
        # 3. one member killed
        killable.send_signal(signal.SIGKILL)
        killable.wait(10)
        views.append(wait_balanced(boot, GROUP, TOPIC, 3, PARTITIONS))
        # 4. the static member restarts: a new member id, the same generation
        a.stop()
        members.remove(a)
        a2 = CommittingMember(boot, "a", instance_id="static-a").start()
        members.append(a2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            restarted = wait_balanced(boot, GROUP, TOPIC, 3, PARTITIONS)
            if {m["member_id"] for m in restarted.members} != {m["member_id"] for m in views[-1].members}:
                break
            time.sleep(0.2)
        assert _owners(restarted) == _owners(views[-1])
        for m in members:
            m.commit(30)
        # 6. everyone leaves (the static member's close sends no LeaveGroup: it expires), then a rewind
        for m in members:
            m.stop()
        members.clear()
        _wait_state(boot, "EMPTY")
        admin = admin_for(boot)
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, 0, 5)])])[
            GROUP
        ].result(15)
    finally:
        for m in members:
            m.stop()
        if killable is not None and killable.poll() is None:
            killable.kill()
        daemon.stop()

    out = tmp_path / "report"
    # In-process (the test session's local[2] Spark); `groupd analyze` in a fresh process is the
    # same code behind the console script, whose wiring test_pipeline_cli checks.
    code = cli.main(["analyze", "--data-dir", str(data), "--out", str(out), "--master", "local[2]", "--group", GROUP])
    assert code == 0
    assert (out / "report.html").exists()

    gens = table(spark, out, "generations", "seq")
    # formed with 3, +1, -1 (killed), then Empty; the static restart is a second record of gen 3.
    # Leaving is a race (a member may rejoin once more before it closes): between the third
    # generation and Empty there may be generations of the members still leaving.
    counts = [g["member_count"] for g in gens]
    assert counts[:3] == [3, 4, 3] and counts[-1] == 0, counts
    assert all(0 < c < 3 for c in counts[3:-1]), counts
    assert [g["records"] for g in gens] == [1, 1, 2] + [1] * (len(gens) - 3)
    assert [g["generation"] for g in gens] == sorted(g["generation"] for g in gens)
    for g, view in zip(gens, views):
        got = {
            (m["group_instance_id"] or m["member_id"]): sorted(
                (tp["topic"], tp["partition"]) for tp in m["assigned_partitions"]
            )
            for m in g["members"]
        }
        want = {(m["instance_id"] or m["member_id"]): m["assignment"] for m in view.members}
        if g["records"] == 2:  # the last record of gen 3 holds the restarted static member
            want = {(m["instance_id"] or m["member_id"]): m["assignment"] for m in restarted.members}
        assert got == want
        assert {m["client_id"] for m in g["members"]} <= {"a", "b", "d", "killable"}
    assert "static-a" in {m["group_instance_id"] for m in gens[2]["members"]}

    rebalances = table(spark, out, "rebalances", "seq")
    assert [(r["members_before"], r["members_after"]) for r in rebalances[:2]] == [(3, 4), (4, 3)]
    assert len(rebalances) == len(gens) - 1 and rebalances[-1]["members_after"] == 0
    assert [r["moved_partitions"] for r in rebalances[:2]] == [_moved(views[0], views[1]), _moved(views[1], views[2])]
    assert [r["partitions_moved"] for r in rebalances[:2]] == [
        len(_moved(views[0], views[1])),
        len(_moved(views[1], views[2])),
    ]
    assert len(rebalances[0]["members_joined"]) == 1 and rebalances[0]["members_left"] == []
    assert rebalances[1]["members_joined"] == [] and len(rebalances[1]["members_left"]) == 1
    assert rebalances[-1]["partitions_unassigned"] == sum(len(m["assigned_partitions"]) for m in gens[-2]["members"])

    commits = table(spark, out, "offset_commits", "log_offset")
    assert sorted({c["offset"] for c in commits}) == [5, 10, 20, 30]
    anomalies = table(spark, out, "anomalies", "kind")
    assert [(x["kind"], x["topic"], x["partition"], x["previous_offset"], x["offset"]) for x in anomalies] == [
        ("backwards_commit", TOPIC, 0, 30, 5)
    ]
