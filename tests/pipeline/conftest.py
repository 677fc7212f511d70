"""One local SparkSession for the whole test session, and the fixture history analyzed once.

pyspark is imported unconditionally: `make test` installs the pipeline extra, so a missing
pyspark is a broken environment and must fail the run, not skip it.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark  # noqa: F401  (fail loudly, never skip)
import pytest
from groupd.pipeline import job
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from groupd import cli
from tests.pipeline.history import History, write_history

SPARK_CONF = [
    "spark.sql.shuffle.partitions=2",
    "spark.default.parallelism=2",
    "spark.sql.adaptive.enabled=false",  # tiny data: re-planning each stage costs more than it saves
    "spark.ui.enabled=false",
    "spark.ui.showConsoleProgress=false",
    # a short-lived test JVM: the quick JIT tier and a simple GC start faster
    "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = job.session("local[2]", SPARK_CONF)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return write_history(tmp_path_factory.mktemp("history") / "data")


@dataclass
class Analysis:
    out: Path
    stdout: str
    stderr: str

    @property
    def report(self) -> Path:
        return self.out / "report.html"


@pytest.fixture(scope="session")
def analyzed(spark: SparkSession, history: History, tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    """The fixture history through ``groupd analyze`` (in-process: it reuses the test session)."""
    out = tmp_path_factory.mktemp("analysis") / "out"
    printed, progress = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(progress):
        args = ["--data-dir", str(history.data_dir), "--out", str(out), "--master", "local[2]"]
        code = cli.main(["analyze", *args, "--progress-interval", "0.1"])
    assert code == 0, printed.getvalue() + progress.getvalue()
    return Analysis(out, printed.getvalue(), progress.getvalue())


def collect(df: DataFrame, *order: str) -> list[dict]:
    """Rows as dicts, timestamps as epoch milliseconds (exact, time-zone free)."""
    df = df.select(
        *[
            F.unix_millis(f.name).alias(f.name) if isinstance(f.dataType, TimestampType) else F.col(f"`{f.name}`")
            for f in df.schema.fields
        ]
    )
    if order:
        df = df.orderBy(*order)
    return [r.asDict(recursive=True) for r in df.collect()]


def table(spark: SparkSession, out: str | Path, name: str, *order: str) -> list[dict]:
    return collect(spark.read.parquet(f"{out}/{name}"), *order)
