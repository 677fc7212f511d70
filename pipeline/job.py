"""``groupd analyze``: read a data directory, write the four tables as Parquet and the HTML report.

Runs in-process on Spark's local mode by default (``--master local[*]``), and unchanged under
``spark-submit`` against a cluster: ``spark-submit [...] path/to/groupd/pipeline/job.py --data-dir
hdfs://... --out hdfs://...`` (no ``--master`` there: spark-submit's own applies).

spark-submit runs this file as a script (``__main__``, no parent package), so every import here is
absolute: ``groupd`` must be installed in the driver's and the executors' Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from groupd.pipeline import TABLES, progress, report, share, source, tables
from pyspark import StorageLevel
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

APP_NAME = "groupd-analyze"


def parse_time(text: str) -> datetime:
    """ISO-8601 (``2024-05-01``, ``2024-05-01T12:00:00``, with or without an offset; UTC when
    none is given) or epoch milliseconds."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return datetime.fromtimestamp(int(t) / 1000, tz=UTC)
    try:
        d = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO-8601 or epoch milliseconds)") from None
    return d if d.tzinfo else d.replace(tzinfo=UTC)


def build_parser(prog: str | None = None, default_master: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Rebalance and offset analytics over a groupd data directory (PySpark).",
    )
    p.add_argument("--data-dir", required=True, help="groupd data directory: a local path or a Hadoop URI")
    p.add_argument("--out", required=True, help="output directory for the Parquet tables and report.html")
    p.add_argument(
        "--master",
        default=default_master,
        help="Spark master (default: %(default)s; under spark-submit, spark-submit's own)",
    )
    p.add_argument("--group", help="only groups matching this shell-style pattern (billing-*)")
    p.add_argument("--since", type=parse_time, help="only what happened at or after this time")
    p.add_argument("--until", type=parse_time, help="only what happened before this time")
    p.add_argument(
        "--reader",
        choices=("auto", "datasource", "binaryfile"),
        default="auto",
        help="groupd-log data source (local paths), Spark's binaryFile source (any Hadoop URI), "
        "or auto: the first for local paths, the second otherwise",
    )
    p.add_argument("--no-verify-crc", action="store_true", help="skip the CRC-32C check of each batch")
    p.add_argument("--no-report", action="store_true", help="write the tables only")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    p.add_argument(
        "--progress-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="print the running Spark stages to stderr this often (0: phases only; default %(default)s)",
    )
    return p


def session(master: str | None, conf: Sequence[str] = ()) -> SparkSession:
    builder = SparkSession.builder.appName(APP_NAME).config("spark.sql.session.timeZone", "UTC")
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # The Python workers must be this interpreter (the one groupd is installed in); the JVM
        # started below inherits the environment (the spark.pyspark.python setting is read only
        # by spark-submit).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Fixed cost: no adaptive re-planning at every stage boundary (the shuffle partitions are
        # sized to the input by ``run``: nothing left to coalesce); no web UI.
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.adaptive.enabled", "false")
        )
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf wants KEY=VALUE, got {item!r}")
        builder = builder.config(key, value)
    return builder.getOrCreate()


# Log bytes per shuffle partition: a decoded record takes a few times its bytes on disk, so this
# keeps a shuffle task at some tens of MiB, where its scheduling round is small against its work.
SHUFFLE_PARTITION_LOG_BYTES = 16 << 20
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def shuffle_partitions(input_bytes: int | None, parallelism: int) -> int:
    """The job's shuffle partitions, sized to its input: one per ``SHUFFLE_PARTITION_LOG_BYTES`` of
    log, and at least two per core of the application so that every core has work. Spark's default
    (200, whatever the input) made a small log's every shuffle 200 tasks, each a round trip to a
    Python worker and an executor: on a cluster that was most of the run (3.5x the local run,
    where 2 per core was already set)."""
    floor = 2 * max(1, parallelism)
    if not input_bytes:
        return floor
    return max(floor, -(-input_bytes // SHUFFLE_PARTITION_LOG_BYTES))


def size_shuffles(spark: SparkSession, data_dir: str) -> tuple[int, str]:
    """Set ``spark.sql.shuffle.partitions`` from the input unless it was set explicitly (``--conf``,
    spark-submit's ``--conf``, an embedding caller's session): (the count, why)."""
    if spark.sparkContext.getConf().contains(SHUFFLE_PARTITIONS):
        return int(spark.conf.get(SHUFFLE_PARTITIONS) or 0), "set explicitly"
    size = source.input_bytes(spark, data_dir)
    parallelism = spark.sparkContext.defaultParallelism
    n = shuffle_partitions(size, parallelism)
    spark.conf.set(SHUFFLE_PARTITIONS, str(n))
    shown = "unknown" if size is None else f"{size / (1 << 20):.1f} MiB"
    return n, f"log {shown}, {parallelism} cores"


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def read_registry(spark: SparkSession, data_dir: str) -> tuple[dict[str, int], int | None]:
    """({topic: partitions}, ``__consumer_offsets`` partitions) from the data directory's
    ``topics.json`` (groupd's topic registry); empty and None when there is none."""
    path = _join(data_dir, "topics.json")
    try:
        if source.is_local(path):
            with open(source._local_path(path), encoding="utf-8") as fh:
                text = fh.read()
        else:
            rows = spark.read.text(path, wholetext=True).collect()
            text = rows[0][0] if rows else ""
        doc = json.loads(text)
        counts = {str(t["name"]): int(t["partitions"]) for t in doc["topics"]}
    except (OSError, AnalysisException, ValueError, KeyError, TypeError):
        return {}, None
    offsets = counts.pop(source.decode.OFFSETS_TOPIC, None)
    return counts, offsets


@dataclass
class Result:
    out: str
    records: int
    counts: dict[str, int]
    report: str | None
    seconds: float
    # seconds per phase, in order: "read and decode", "tables", "report" (what the summary names)
    phases: dict[str, float] = field(default_factory=dict)
    shuffle_partitions: int = 0

    def summary(self, data_dir: str) -> str:
        """The first line ``analyze`` prints: the whole run, then where its time went."""
        spent = ", ".join(f"{name} {secs:.1f}s" for name, secs in self.phases.items())
        return f"analyzed {self.records} records from {data_dir} in {self.seconds:.1f}s ({spent})"


# Small tables are written as one file in this order.
_ORDER = {
    "offset_commits": ("group", "topic", "partition", "log_partition", "log_offset"),
    "generations": ("group", "seq"),
    "rebalances": ("group", "seq"),
    "anomalies": ("kind", "group", "log_partition", "log_offset", "topic", "partition"),
    "consumer_group_epochs": ("group", "log_partition", "log_offset"),
    "consumer_group_members": ("group", "member_id"),
}


def _write(name: str, df: DataFrame, path: str) -> None:
    if name != "offset_commits":
        df = df.coalesce(1).sortWithinPartitions(*_ORDER[name])
    # offset_commits stays in log order: one file per segment, rows by log offset.
    df.write.mode("overwrite").parquet(path)


def run(
    spark: SparkSession,
    data_dir: str,
    out: str,
    *,
    group: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    reader: str = "auto",
    verify_crc: bool = True,
    write_report: bool = True,
    reporter: progress.Progress | None = None,
) -> Result:
    started = time.monotonic()
    say = reporter.phase if reporter is not None else (lambda _text: None)
    if source.is_local(data_dir) and not os.path.exists(source._local_path(data_dir)):
        raise FileNotFoundError(f"no such data directory: {data_dir}")
    partitions, why = size_shuffles(spark, data_dir)
    say(f"{partitions} shuffle partitions ({why})")
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def done(phase: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[phase] = now - mark
        mark = now

    counts_by_topic, offsets_partitions = read_registry(spark, data_dir)
    registry = (
        spark.createDataFrame(sorted(counts_by_topic.items()), "topic string, partitions int")
        if counts_by_topic
        else None
    )
    raw = source.read_log(
        spark,
        data_dir,
        group=group,
        offsets_partitions=offsets_partitions,
        verify_crc=verify_crc,
        via=reader,
        # one task per few small segments: each task costs a Python worker round trip
        min_partitions=2 * spark.sparkContext.defaultParallelism,
    )
    # Decoding is the expensive part and every table reads the records: decode once. The
    # generations feed both rebalances and anomalies: compute them once too.
    raw = raw.persist(StorageLevel.MEMORY_AND_DISK)
    gens = None
    try:
        say(f"reading and decoding {data_dir}")
        records = raw.count()
        done("read and decode")
        say(f"decoded {records} records; deriving the tables")
        gens = tables.generations(raw).persist(StorageLevel.MEMORY_AND_DISK)
        built = tables.within(tables.build(raw, registry, gens=gens), since, until)
        counts = {}
        for name, df in built.items():
            path = _join(out, name)
            say(f"writing {name}")
            _write(name, df, path)
            counts[name] = spark.read.parquet(path).count()
        done("tables")
    finally:
        if gens is not None:
            gens.unpersist()
        raw.unpersist()
    # KIP-932: the share-partition state log, folded per log partition (local data directories)
    share_summary: dict = {}
    # (written only when there is share state: a log without share groups pays no Spark job for it)
    if source.is_local(data_dir) and share.state_dirs(source._local_path(data_dir)):
        say("folding __share_group_state")
        changes = share.within(share.share_state_changes(spark, source._local_path(data_dir), group), since, until)
        path = _join(out, share.CHANGES_TABLE)
        changes.coalesce(1).sortWithinPartitions("log_partition", "log_offset").write.mode("overwrite").parquet(path)
        written_changes = spark.read.parquet(path)
        counts[share.CHANGES_TABLE] = written_changes.count()
        share_summary = share.summarize(written_changes)
    report_path = None
    if write_report:
        say("rendering the report")
        # The report runs a dozen small queries over the tables: read each from Parquet once.
        written = tables.Tables(*[spark.read.parquet(_join(out, name)).cache() for name in TABLES])
        data = report.collect(written, counts)
        data.share = share_summary
        html = report.render(
            data,
            title=f"groupd analysis of {data_dir}",
            subtitle=_describe_filters(group, since, until),
        )
        report_path = _join(out, "report.html")
        write_text(spark, report_path, html)
        for _, df in written.items():
            df.unpersist()
        done("report")
    return Result(out, records, counts, report_path, time.monotonic() - started, phases, partitions)


def _describe_filters(group: str | None, since: datetime | None, until: datetime | None) -> str:
    parts = []
    if group:
        parts.append(f"groups matching {group}")
    if since:
        parts.append(f"from {since.isoformat()}")
    if until:
        parts.append(f"until {until.isoformat()}")
    return ", ".join(parts) or "all groups, all time"


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a small file to a local path or, through Spark's Hadoop FileSystem, to any URI."""
    if source.is_local(path):
        local = source._local_path(path)
        os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        with open(local, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    stream = fs.create(hpath, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def main(argv: Sequence[str] | None = None, *, prog: str | None = None, default_master: str | None = None) -> int:
    args = build_parser(prog, default_master).parse_args(argv)
    if args.since and args.until and args.since >= args.until:
        print("--since must be before --until", file=sys.stderr)
        return 2
    if source.is_local(args.data_dir) and not os.path.isdir(source._local_path(args.data_dir)):
        print(f"{prog or 'analyze'}: no such data directory: {args.data_dir}", file=sys.stderr)
        return 1
    ours = SparkSession.getActiveSession() is None  # an embedding caller's session is left running
    # Under spark-submit the JVM is already up (it started this script): only a JVM we launch
    # ourselves needs a Java found first.
    if ours and "PYSPARK_GATEWAY_PORT" not in os.environ:
        problem = progress.java_problem()
        if problem:
            print(f"{prog or 'analyze'}: cannot start Spark: {problem}", file=sys.stderr)
            return 3
    reporter = progress.Progress(interval=args.progress_interval)
    reporter.phase(f"starting Spark ({args.master or 'master from spark-submit'})")
    spark = reporter.spark = session(args.master, args.conf)
    try:
        spark.sparkContext.setLogLevel("WARN")
        with reporter:
            result = run(
                spark,
                args.data_dir,
                args.out,
                group=args.group,
                since=args.since,
                until=args.until,
                reader=args.reader,
                verify_crc=not args.no_verify_crc,
                write_report=not args.no_report,
                reporter=reporter,
            )
    except FileNotFoundError as e:
        print(f"groupd analyze: {e}", file=sys.stderr)
        return 1
    finally:
        if ours:
            spark.stop()
    print(result.summary(args.data_dir))
    for name in TABLES:
        print(f"  {name:<15} {result.counts[name]:>10} rows  {_join(args.out, name)}")
    if result.report:
        print(f"  report          {result.report}")
    return 0


if __name__ == "__main__":  # spark-submit .../groupd/pipeline/job.py --data-dir ... --out ...
    sys.exit(main())
