"""The segment decoder that runs inside Spark's Python workers (no Spark needed here)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from groupd.coordinator.records import MemberMetadata
from groupd.coordinator.routing import partition_for
from groupd.pipeline import decode

from tests.pipeline.history import OFFSETS, History, T


def _rows(data: bytes, lp: int = 9, seg: int = 0, **kw) -> list[dict]:
    out = []
    for cols in decode.decode_segment(data, lp, seg, **kw):
        n = len(cols["offset"])
        out.extend({c: cols[c][i] for c in decode.COLUMNS} for i in range(n))
    return out


def _segments(history: History, lp: int) -> list[Path]:
    return sorted((history.data_dir / f"{OFFSETS}-{lp}").glob("*.log"))


def test_segment_paths() -> None:
    assert decode.parse_segment_path("/d/__consumer_offsets-7/00000000000000001234.log") == (7, 1234)
    assert decode.parse_segment_path("hdfs://nn:8020/d/__consumer_offsets-49/00000000000000000000.log") == (49, 0)
    assert decode.parse_segment_path("file:/d/__consumer_offsets-3/00000000000000000000.log") == (3, 0)
    for other in (
        "/d/orders-0/00000000000000000000.log",
        "/d/__consumer_offsets-3/00000000000000000000.index",
        "/d/__consumer_offsets-3/0.log",
        "/d/__consumer_offsets-3.x-delete/00000000000000000000.log",
    ):
        assert decode.parse_segment_path(other) is None, other


def test_group_patterns() -> None:
    assert decode.group_matcher(None) is None and decode.group_matcher("*") is None
    m = decode.group_matcher("bill*")
    assert m("billing") and m("bill") and not m("xbilling")
    exact = decode.group_matcher("a.b")
    assert exact("a.b") and not exact("axb")
    assert decode.partitions_for_pattern("billing", 50) == {partition_for("billing", 50)}
    assert decode.partitions_for_pattern("bill*", 50) is None
    assert decode.partitions_for_pattern("billing", None) is None


def test_every_record_of_the_history_decodes(history: History) -> None:
    rows = []
    for lp in (0, 5, 9, 13):
        for seg in _segments(history, lp):
            rows.extend(_rows(seg.read_bytes(), lp, int(seg.stem)))
    assert len(rows) == 21
    by_pos = {(r["log_partition"], r["offset"]): r for r in rows}
    assert {pos for pos in by_pos} == set(history.at.values())

    commit = by_pos[history.at["billing.c3.0"]]
    assert {
        k: commit[k]
        for k in (
            "record_type",
            "group",
            "topic",
            "partition",
            "committed_offset",
            "leader_epoch",
            "metadata",
            "commit_timestamp",
            "expire_timestamp",
            "timestamp",
            "tombstone",
            "key_version",
            "value_version",
        )
    } == {
        "record_type": "offset_commit",
        "group": "billing",
        "topic": "orders",
        "partition": 0,
        "committed_offset": 15,
        "leader_epoch": 3,
        "metadata": "m15",
        "commit_timestamp": T + 11000,
        "expire_timestamp": None,
        "timestamp": T + 11000,
        "tombstone": False,
        "key_version": 1,
        "value_version": 3,
    }
    tomb = by_pos[history.at["billing.t.3"]]
    assert (tomb["record_type"], tomb["tombstone"], tomb["committed_offset"]) == ("offset_commit", True, None)

    g3 = by_pos[history.at["billing.g3"]]
    assert (g3["record_type"], g3["generation"], g3["protocol"], g3["leader"], g3["key_version"]) == (
        "group_metadata",
        3,
        "range",
        "m1",
        2,
    )
    assert [(m["member_id"], m["group_instance_id"], m["assigned_partitions"]) for m in g3["members"]] == [
        ("m1", None, [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 2}]),
        ("m3b", "i-3", [{"topic": "orders", "partition": 3}]),
        ("m4", None, [{"topic": "orders", "partition": 1}, {"topic": "orders", "partition": 2}]),
    ]
    assert g3["members"][0]["subscribed_topics"] == ["orders"]
    assert g3["members"][0]["owned_partitions"] == []

    connect = by_pos[history.at["connect.g1"]]["members"][0]
    assert connect["subscribed_topics"] is None and connect["assigned_partitions"] is None
    assert connect["assignment"] == b"\xff\xfe"  # raw bytes kept for non-consumer protocols

    invalid = by_pos[history.at["invalid"]]
    assert invalid["record_type"] == "invalid" and "version 9" in invalid["error"]


def test_group_filter_drops_other_groups_and_undecodable_records(history: History) -> None:
    (seg,) = _segments(history, 0)
    assert [r["record_type"] for r in _rows(seg.read_bytes(), 0)] == ["invalid"]
    assert _rows(seg.read_bytes(), 0, group_filter=decode.group_matcher("billing")) == []


def test_corrupt_batch_ends_the_segment_with_one_corrupt_row(history: History) -> None:
    seg = _segments(history, 9)[0]
    data = bytearray(seg.read_bytes())
    good = _rows(bytes(data))
    assert len(good) >= 2
    # Flip a byte in the last record of the last batch: its CRC no longer matches.
    data[-3] ^= 0xFF
    rows = _rows(bytes(data))
    assert [r["record_type"] for r in rows[:-1]] == [r["record_type"] for r in good[:-1]]
    assert rows[-1]["record_type"] == "corrupt" and "CRC" in rows[-1]["error"]
    # Without the CRC check the damaged byte decodes into whatever it now says, but nothing crashes.
    assert len(_rows(bytes(data), verify_crc=False)) >= 1


def test_partial_batch_at_the_end_is_ignored(history: History) -> None:
    seg = _segments(history, 9)[0]
    data = seg.read_bytes()
    full = _rows(data)
    assert _rows(data[:-5]) == full[:-1]


def test_bad_consumer_protocol_bytes_become_a_decode_error() -> None:
    m = MemberMetadata("m", None, "c", "/h", 1, 2, subscription=b"\x00", assignment=b"\x00\x00\x00\x00\x00\x09")
    got = decode.decode_member(m, consumer=True)
    assert got["subscribed_topics"] is None and got["assigned_partitions"] is None
    assert got["decode_error"].startswith("subscription: ") and "assignment: " in got["decode_error"]


def test_arrow_batches_match_the_spark_schema(history: History) -> None:
    seg = _segments(history, 9)[0]
    (batch,) = list(decode.decode_segment_arrow(seg.read_bytes(), 9, 0))
    assert isinstance(batch, pa.RecordBatch)
    assert batch.schema.names == list(decode.COLUMNS)
    assert batch.column("timestamp")[0].as_py().timestamp() * 1000 == T + 1000


def test_kip848_consumer_group_records_are_rows_of_their_group() -> None:
    # a log written by a consumer-protocol group (key versions 3-8, 16) decodes instead of crashing
    from groupd.coordinator.consumer import records as cr
    from groupd.coordinator.serde import encode_record

    key, value = encode_record((cr.ConsumerGroupMetadataKey("billing"), cr.ConsumerGroupMetadataValue(3)))
    row = decode.decode_record_row(0, 0, 7, T, key, value)
    assert (row["record_type"], row["group"], row["key_version"]) == ("consumer_group", "billing", 3)
    assert decode.decode_record_row(0, 0, 7, T, key, None, group_filter=decode.group_matcher("other")) is None


def test_kip932_share_group_records_are_rows_of_their_group() -> None:
    """A share-group record (types 10-15) is a row of its group, not an undecodable one (before
    share groups the pipeline hit a share key's missing ``group`` attribute)."""
    from groupd.coordinator.serde import encode_record
    from groupd.coordinator.share import records as sr

    key, value = encode_record((sr.ShareGroupMetadataKey("orders"), sr.ShareGroupMetadataValue(3, 0)))
    row = decode.decode_record_row(0, 0, 7, T, key, value)
    assert (row["record_type"], row["group"], row["key_version"]) == ("share_group", "orders", 11)
    assert decode.decode_record_row(0, 0, 7, T, key, None, group_filter=decode.group_matcher("other")) is None
