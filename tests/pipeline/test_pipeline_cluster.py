"""``spark-submit`` of the pipeline's documented entry (``groupd/pipeline/job.py``, run as a
script) against a real Spark standalone cluster -- a master and a worker started from pyspark's
own distribution on 127.0.0.1 -- on the fixture history; the tables match the local run's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from groupd.pipeline import TABLES, job

from tests.pipeline.cluster import Cluster, standalone_cluster
from tests.pipeline.conftest import table
from tests.pipeline.history import History


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c


def _stage_tasks(events: Path) -> list[tuple[str, int]]:
    """(stage name, tasks) of every completed stage in the application's Spark event log."""
    out = []
    # Spark 4 rolls its event log: a directory per application, files events_<n>_<app id> in it
    for log in sorted(f for f in events.rglob("events_*") if f.is_file()):
        for line in log.read_text().splitlines():
            ev = json.loads(line)
            if ev.get("Event") == "SparkListenerStageCompleted":
                info = ev["Stage Info"]
                out.append((info["Stage Name"], info["Number of Tasks"]))
    return out


def test_spark_submit_job_py_on_a_standalone_cluster(cluster: Cluster, spark, history: History, analyzed) -> None:
    out, events = cluster.tmp / "out", cluster.tmp / "events"
    events.mkdir()
    # No shuffle setting of ours (the harness once passed spark.sql.shuffle.partitions=2 and hid that
    # analyze left a cluster at Spark's 200, issue 29); the event log tells how many tasks ran.
    done = cluster.submit(
        job.__file__,
        *("--data-dir", str(history.data_dir), "--out", str(out), "--progress-interval", "0"),
        conf=("spark.eventLog.enabled=true", "spark.eventLog.compress=false", f"spark.eventLog.dir=file://{events}"),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "relative import" not in done.stderr
    # spark-submit's PythonRunner merges the script's stderr into its stdout
    assert "analyzed 21 records" in done.stdout and "master from spark-submit" in done.stdout
    # The worker's 2 cores and a log of a few KiB: 4 shuffle partitions. Spark's default made every
    # shuffle stage 200 tasks (bench.analyze --cluster: 1,953 tasks for a 10k-record log, 189 now);
    # here the largest stages are a read of the packed segments (6) or two of them at once (12).
    (line,) = [ln for ln in done.stdout.splitlines() if "shuffle partitions" in ln]
    assert re.search(r"\] 4 shuffle partitions \(log 0\.\d MiB, 2 cores\)$", line), line
    tasks = [n for _, n in _stage_tasks(events)]
    assert 4 in tasks and max(tasks) <= 12 and sum(tasks) < 400, sorted(tasks)
    # the work ran on the cluster's worker: it launched an executor for the application
    assert list((cluster.tmp / "work").glob("app-*/*/stderr")), "no executor ran on the worker"
    order = {
        "offset_commits": ("log_partition", "log_offset"),
        "generations": ("group", "seq"),
        "rebalances": ("group", "seq"),
        "anomalies": ("kind", "group", "log_partition", "log_offset", "topic", "partition"),
        "consumer_group_epochs": ("group", "log_partition", "log_offset"),
        "consumer_group_members": ("group", "member_id"),
    }
    for name in TABLES:
        assert table(spark, out, name, *order[name]) == table(spark, analyzed.out, name, *order[name]), name
    assert (out / "report.html").read_text(encoding="utf-8").count('<img class="plot"') >= 3
