"""Reading a groupd data directory into a Spark DataFrame (one row per ``__consumer_offsets`` record).

Two routes, one decoder (``decode.py``) and one schema (``decode.SCHEMA_DDL``):

* ``groupd-log``, a Spark Python Data Source: ``spark.read.format("groupd-log").load(path)``.
  Planning lists the segment files and makes one input partition per segment; each Spark task
  reads its segment and yields Arrow record batches. Paths are local paths or ``file:`` URIs, and
  any URI ``pyarrow.fs`` opens (``hdfs://`` through libhdfs, ``s3://``/``s3a://``, ``gs://``,
  ``abfs://``) -- read by the Python workers themselves, so every worker needs that access.
* ``binaryFile``: Spark's own Hadoop file source loads each segment as one binary row and a
  Python function decodes it (RDD ``mapPartitions``). This reaches every URI the cluster's Hadoop configuration reaches
  (``hdfs://``, ``s3a://`` with its credentials providers, ...), which is why ``read_log`` uses it
  for anything that is not a local path.

Options of ``groupd-log`` (all optional):

``group``              shell-style pattern (``billing-*``); records of other groups are dropped
                       in the reader, before they reach Spark
``offsetsPartitions``  the number of ``__consumer_offsets`` partitions; with a literal ``group``
                       only the one log partition that group hashes to is read
``verifyCrc``          ``true`` (default) checks every batch's CRC-32C
``minPartitions``      pack consecutive small segments into shared input partitions: about this
                       many (at most ``maxPartitionBytes``, default 128 MiB, each; a segment is
                       never split). Unset: one input partition per segment. Each Spark task
                       costs a Python worker round trip, which dominates for many small segments
                       (a data directory of 50 log partitions with a few KiB each).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from . import decode

FORMAT = "groupd-log"


class SegmentPartition(InputPartition):
    """One segment file: the unit of work of one Spark task."""

    def __init__(self, path: str, log_partition: int, segment: int, size: int = 0) -> None:
        super().__init__((path, log_partition, segment))
        self.path = path
        self.log_partition = log_partition
        self.segment = segment
        self.size = size


class PackedPartition(InputPartition):
    """Consecutive segments read by one Spark task, in log order."""

    def __init__(self, segments: list[SegmentPartition]) -> None:
        super().__init__(tuple(s.path for s in segments))
        self.segments = segments


MAX_PARTITION_BYTES = 128 << 20


def pack(segments: list[SegmentPartition], min_partitions: int, max_bytes: int = MAX_PARTITION_BYTES) -> list:
    """Consecutive segments grouped so that each group holds about total/`min_partitions` bytes
    (never more than `max_bytes` unless one segment alone is larger)."""
    if not segments:
        return []
    total = sum(s.size for s in segments)
    target = max(1, min(max_bytes, -(-total // max(1, min_partitions))))
    packs: list[list[SegmentPartition]] = [[]]
    held = 0
    for s in segments:
        if packs[-1] and held + s.size > target:
            packs.append([])
            held = 0
        packs[-1].append(s)
        held += s.size
    return [PackedPartition(p) for p in packs]


def is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def _local_path(path: str) -> str:
    return urlparse(path).path if path.startswith("file:") else path


def _arrow_fs(path: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for a non-local URI."""
    from pyarrow import fs

    if path.startswith(("s3a://", "s3n://")):
        path = "s3://" + path.split("://", 1)[1]
    return fs.FileSystem.from_uri(path)


def list_segments(path: str, partitions: set[int] | None = None) -> list[SegmentPartition]:
    """Every ``__consumer_offsets-<n>/<base>.log`` under `path` (a data directory, one partition
    directory or one segment file), ordered by (log partition, base offset)."""
    found: list[SegmentPartition] = []

    def consider(file_path: str, shown: str, size: int) -> None:
        parsed = decode.parse_segment_path(file_path)
        if parsed is not None and (partitions is None or parsed[0] in partitions):
            found.append(SegmentPartition(shown, *parsed, size))

    if is_local(path):
        root = _local_path(path)
        if os.path.isfile(root):
            consider(os.path.abspath(root), os.path.abspath(root), os.path.getsize(root))
        elif not os.path.isdir(root):
            raise FileNotFoundError(f"no such data directory: {path}")
        else:
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                for name in sorted(filenames):
                    if name.endswith(".log"):
                        full = os.path.abspath(os.path.join(dirpath, name))
                        consider(full, full, os.path.getsize(full))
    else:
        from pyarrow import fs

        afs, inner = _arrow_fs(path)
        info = afs.get_file_info(inner)
        if info.type == fs.FileType.File:
            infos = [info]
        elif info.type == fs.FileType.Directory:
            infos = afs.get_file_info(fs.FileSelector(inner, recursive=True))
        else:
            raise FileNotFoundError(f"no such data directory: {path}")
        for i in infos:
            if i.type == fs.FileType.File and i.path.endswith(".log"):
                consider(i.path, _uri_for(path, i.path), i.size or 0)
    found.sort(key=lambda s: (s.log_partition, s.segment))
    return found


def _uri_for(root: str, inner: str) -> str:
    """The URI of a file that pyarrow listed as `inner` under the URI `root`."""
    if "://" in inner:
        return inner
    p = urlparse(root)
    if p.scheme in ("hdfs", "viewfs"):  # pyarrow paths are absolute inside the name node
        return f"{p.scheme}://{p.netloc}/{inner.lstrip('/')}"
    return f"{p.scheme}://{inner.lstrip('/')}"  # object stores: the bucket is the first component


def read_bytes(path: str) -> bytes:
    if is_local(path):
        with open(_local_path(path), "rb") as fh:
            return fh.read()
    afs, inner = _arrow_fs(path)
    with afs.open_input_file(inner) as fh:
        return fh.read()


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


class GroupdLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}  # Spark's options are case-insensitive
        self.path = options.get("path")
        if not self.path:
            raise ValueError('groupd-log needs a path: spark.read.format("groupd-log").load(PATH)')
        self.pattern = options.get("group")
        n = options.get("offsetspartitions")
        self.offsets_partitions = int(n) if n else None
        self.verify_crc = _bool(options.get("verifycrc"), True)
        n = options.get("minpartitions")
        self.min_partitions = int(n) if n else None
        n = options.get("maxpartitionbytes")
        self.max_partition_bytes = int(n) if n else MAX_PARTITION_BYTES

    def partitions(self) -> Sequence[InputPartition]:
        wanted = decode.partitions_for_pattern(self.pattern, self.offsets_partitions)
        segments = list_segments(self.path, wanted)
        if self.min_partitions is None:
            return segments
        return pack(segments, self.min_partitions, self.max_partition_bytes)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, SegmentPartition):
            segments = [partition]
        elif isinstance(partition, PackedPartition):
            segments = partition.segments
        else:
            return  # no segments at all: Spark still runs one task, with no partition of ours
        matcher = decode.group_matcher(self.pattern)
        for segment in segments:
            yield from decode.decode_segment_arrow(
                read_bytes(segment.path),
                segment.log_partition,
                segment.segment,
                group_filter=matcher,
                verify_crc=self.verify_crc,
            )


class GroupdLogDataSource(DataSource):
    """``spark.read.format("groupd-log").load(path)``: one row per record of a groupd log."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return decode.SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return GroupdLogReader(dict(self.options))


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("groupd-log")`` available in this session (once)."""
    if getattr(spark, "_groupd_log_registered", False):
        return
    spark.dataSource.register(GroupdLogDataSource)
    spark._groupd_log_registered = True  # type: ignore[attr-defined]


def schema() -> StructType:
    return StructType.fromDDL(decode.SCHEMA_DDL)


def _decode_files(pattern: str | None, verify_crc: bool):  # -> an RDD mapPartitions function
    def fn(rows: Iterator[Any]) -> Iterator[tuple]:
        matcher = decode.group_matcher(pattern)
        for path, content in rows:
            parsed = decode.parse_segment_path(path)
            if parsed is not None:
                yield from decode.decode_segment_tuples(
                    bytes(content), parsed[0], parsed[1], group_filter=matcher, verify_crc=verify_crc
                )

    return fn


def input_bytes(spark: SparkSession, path: str) -> int | None:
    """The bytes of the segment files under `path` (what a run reads), or None when they cannot be
    listed from the driver: local paths directly, URIs through the cluster's Hadoop FileSystem (what
    the binaryFile route reads with)."""
    try:
        if is_local(path):
            return sum(s.size for s in list_segments(path))
        jvm: Any = spark._jvm  # type: ignore[attr-defined]
        glob = jvm.org.apache.hadoop.fs.Path(_hadoop_glob(path))
        fs = glob.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
        return sum(int(st.getLen()) for st in fs.globStatus(glob) or [])
    except Exception:  # unreadable here (credentials only on the executors, ...): size by cores alone
        return None


def _hadoop_glob(path: str) -> str:
    """The segment files under `path` as a Hadoop glob. Spark's file listing skips names that
    start with ``_`` (as in ``_SUCCESS``), so ``__consumer_offsets-<n>`` directories are never
    found by a recursive listing and must be named by the glob itself."""
    base = path.rstrip("/")
    last = base.rsplit("/", 1)[-1]
    if last.endswith(".log"):
        return base
    if last.startswith(decode.OFFSETS_TOPIC + "-"):
        return base + "/*.log"
    return base + f"/{decode.OFFSETS_TOPIC}-*/*.log"


def read_log(
    spark: SparkSession,
    path: str,
    *,
    group: str | None = None,
    offsets_partitions: int | None = None,
    verify_crc: bool = True,
    via: str = "auto",
    min_partitions: int | None = None,
) -> DataFrame:
    """The records of the groupd data directory at `path` as a DataFrame of ``decode.SCHEMA_DDL``.

    `via` is ``"datasource"`` (the ``groupd-log`` source), ``"binaryfile"`` (Spark's Hadoop file
    source + mapInArrow) or ``"auto"``: the data source for local paths, binaryFile for URIs.
    `min_partitions` packs small segments (the data source's ``minPartitions``; binaryFile packs
    small files itself, by ``spark.sql.files.maxPartitionBytes``).
    """
    if via == "auto":
        via = "datasource" if is_local(path) else "binaryfile"
    if via == "datasource":
        register(spark)
        reader = spark.read.format(FORMAT).option("verifyCrc", str(verify_crc).lower())
        if group:
            reader = reader.option("group", group)
        if offsets_partitions:
            reader = reader.option("offsetsPartitions", str(offsets_partitions))
        if min_partitions:
            reader = reader.option("minPartitions", str(min_partitions))
        return reader.load(path)
    if via != "binaryfile":
        raise ValueError(f"unknown reader {via!r}")
    files = (
        spark.read.format("binaryFile")
        .load(_hadoop_glob(path))
        .select("path", "content")
        .where(F.col("path").rlike(decode.SEGMENT_RE.pattern))
    )
    wanted = decode.partitions_for_pattern(group, offsets_partitions)
    if wanted is not None:
        files = files.where(F.regexp_extract("path", decode.SEGMENT_RE.pattern, 1).cast("int").isin(sorted(wanted)))
    # RDD rather than mapInArrow: mapInArrow needs pandas, which the pipeline extra does not install.
    rows = files.rdd.mapPartitions(_decode_files(group, verify_crc))
    return spark.createDataFrame(rows, schema(), verifySchema=False)
