"""The ``groupd-log`` Spark data source and the Hadoop ``binaryFile`` route."""

from __future__ import annotations

from groupd.coordinator.routing import partition_for
from groupd.pipeline import source
from pyspark.sql import functions as F

from tests.pipeline.conftest import collect
from tests.pipeline.history import OFFSETS, History


def _segment_count(history: History, lp: int | None = None) -> int:
    pattern = f"{OFFSETS}-{'*' if lp is None else lp}/*.log"
    return len(list(history.data_dir.glob(pattern)))


def test_format_reads_every_record_one_partition_per_segment(spark, history: History) -> None:
    source.register(spark)
    df = spark.read.format("groupd-log").load(str(history.data_dir))
    assert df.schema == source.schema()
    assert df.rdd.getNumPartitions() == _segment_count(history) > 4
    rows = collect(df.select("log_partition", "offset", "record_type", "group", "timestamp"), "log_partition", "offset")
    assert {(r["log_partition"], r["offset"]) for r in rows} == set(history.at.values())
    assert [r["record_type"] for r in rows if r["log_partition"] == 0] == ["invalid"]
    counts = {r["record_type"]: r["count"] for r in collect(df.groupBy("record_type").count())}
    assert counts == {"offset_commit": 11, "group_metadata": 9, "invalid": 1}


def test_group_option_filters_and_prunes_log_partitions(spark, history: History) -> None:
    glob = spark.read.format("groupd-log").option("group", "bill*").load(str(history.data_dir))
    assert glob.rdd.getNumPartitions() == _segment_count(history)
    assert {r["group"] for r in collect(glob.select("group").distinct())} == {"billing"}

    exact = source.read_log(spark, str(history.data_dir), group="billing", offsets_partitions=50)
    assert exact.rdd.getNumPartitions() == _segment_count(history, partition_for("billing")) > 1
    assert exact.count() == glob.count() == 17


def test_binaryfile_route_reads_the_same_rows(spark, history: History) -> None:
    uri = history.data_dir.as_uri()  # file:///...: read through Spark's Hadoop FileSystem
    via_hadoop = source.read_log(spark, uri, via="binaryfile")
    via_source = source.read_log(spark, str(history.data_dir), via="datasource")
    cols = [F.col(c) for c in via_source.columns if c != "members"] + [F.to_json("members").alias("members")]
    assert collect(via_hadoop.select(cols), "log_partition", "offset") == collect(
        via_source.select(cols), "log_partition", "offset"
    )


def test_missing_directory_is_an_error(tmp_path) -> None:
    import pytest

    with pytest.raises(FileNotFoundError):
        source.list_segments(str(tmp_path / "nope"))
    assert source.list_segments(str(tmp_path)) == []


def test_min_partitions_packs_consecutive_segments_and_reads_the_same_rows(spark, history: History) -> None:
    segs = [source.SegmentPartition(f"s{i}", i // 2, i, size) for i, size in enumerate([10, 10, 10, 50, 5, 5])]
    # 90 bytes over about 3 partitions: 30 each, in log order, a large segment alone
    assert [[s.path for s in p.segments] for p in source.pack(segs, 3)] == [
        ["s0", "s1", "s2"],
        ["s3"],
        ["s4", "s5"],
    ]
    assert [len(p.segments) for p in source.pack(segs, 1, max_bytes=20)] == [2, 1, 1, 2]
    assert source.pack([], 4) == []

    packed = source.read_log(spark, str(history.data_dir), min_partitions=2)
    assert packed.rdd.getNumPartitions() < _segment_count(history)
    plain = source.read_log(spark, str(history.data_dir))
    cols = [F.col(c) for c in plain.columns if c != "members"] + [F.to_json("members").alias("members")]
    assert collect(packed.select(cols), "log_partition", "offset") == collect(
        plain.select(cols), "log_partition", "offset"
    )
