"""``spark-submit`` of the pipeline's documented entry (``groupd/pipeline/job.py``, run as a
script) against a real Spark standalone cluster -- a master and a worker started from pyspark's
own distribution on 127.0.0.1 -- on the fixture history; the tables match the local run's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from groupd.pipeline import TABLES, job

from tests.pipeline.cluster import Cluster, standalone_cluster
from tests.pipeline.conftest import table
from tests.pipeline.history import History


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c


def test_spark_submit_job_py_on_a_standalone_cluster(cluster: Cluster, spark, history: History, analyzed) -> None:
    out = cluster.tmp / "out"
    done = cluster.submit(
        job.__file__, "--data-dir", str(history.data_dir), "--out", str(out), "--progress-interval", "0"
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "relative import" not in done.stderr
    # spark-submit's PythonRunner merges the script's stderr into its stdout
    assert "read 21 records" in done.stdout and "master from spark-submit" in done.stdout
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
