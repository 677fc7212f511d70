"""Segment bytes -> rows: the part of the pipeline that runs inside Spark's Python workers.

Theory of operation
-------------------
A ``__consumer_offsets`` log is a directory per log partition (``__consumer_offsets-<n>``) holding
segment files named by their 20-digit base offset (``00000000000000000000.log``). Records are
independent of each other, so every segment is decoded on its own: that is the unit of parallelism
(one Spark input partition per segment). Decoding uses groupd's own code end to end:
``groupd.storage.records`` walks the Kafka record batches, ``groupd.coordinator.serde`` turns a
record's key and value into coordinator records, and ``groupd.coordinator.consumer_protocol`` turns
a member's subscription and assignment bytes into topic-partitions.

Nothing in this module imports Spark: it yields column-oriented chunks (``dict`` of lists, one
list per column of ``COLUMNS``) that ``to_arrow`` turns into ``pyarrow.RecordBatch``es, the form
both readers hand to Spark (the ``groupd-log`` data source and the Hadoop ``binaryFile`` route).

What cannot be decoded does not fail the job: a record whose key or value is in no known format
becomes a row with ``record_type = 'invalid'`` and the reason in ``error``; a batch whose CRC does
not match (or whose framing is broken) becomes one ``'corrupt'`` row and ends that segment, since
nothing after broken framing can be trusted. A partial batch at the very end of a segment (a crash
in the middle of an append) is ignored, as groupd's own recovery does.
"""

from __future__ import annotations

import fnmatch
import re
import struct
from collections.abc import Callable, Iterator
from typing import Any

from groupd.coordinator.consumer import records as cr
from groupd.coordinator.consumer.records import CONSUMER_KEY_TYPES
from groupd.coordinator.consumer_protocol import ConsumerProtocolError, decode_assignment, decode_subscription
from groupd.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from groupd.coordinator.routing import partition_for
from groupd.coordinator.serde import RecordDecodeError, decode_key, decode_value
from groupd.coordinator.share.records import SHARE_KEY_TYPES
from groupd.storage.errors import CorruptRecordError, UnsupportedCompressionError
from groupd.storage.records import iter_batches

OFFSETS_TOPIC = "__consumer_offsets"
SEGMENT_RE = re.compile(r"(?:^|/)__consumer_offsets-(\d+)/(\d{20})\.log$")

OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
INVALID = "invalid"
# KIP-848 consumer-group records (key versions 3-8, 16): their fields are in the ``consumer`` column
CONSUMER_GROUP = "consumer_group"
# KIP-932 share-group records (types 10-15): kept as rows with their group, not decoded further
SHARE_GROUP = "share_group"
# the ``consumer`` column's ``kind``, per record type (Kafka's record names without the prefix)
CONSUMER_KINDS = {
    cr.ConsumerGroupMetadataKey: "metadata",
    cr.ConsumerGroupPartitionMetadataKey: "partition_metadata",
    cr.ConsumerGroupMemberMetadataKey: "member_metadata",
    cr.ConsumerGroupTargetAssignmentMetadataKey: "target_assignment_metadata",
    cr.ConsumerGroupTargetAssignmentMemberKey: "target_assignment_member",
    cr.ConsumerGroupCurrentMemberAssignmentKey: "current_member_assignment",
    cr.ConsumerGroupRegularExpressionKey: "regular_expression",
}
CORRUPT = "corrupt"

# The columns of the raw table, in order. Timestamps are epoch milliseconds here and become Spark
# timestamps (null for Kafka's -1) in to_arrow.
COLUMNS = (
    "log_partition",
    "segment",
    "offset",
    "timestamp",
    "record_type",
    "tombstone",
    "group",
    "key_version",
    "value_version",
    "topic",
    "partition",
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp",
    "expire_timestamp",
    "protocol_type",
    "generation",
    "protocol",
    "leader",
    "current_state_timestamp",
    "members",
    "error",
    "consumer",
)
TIMESTAMP_COLUMNS = frozenset({"timestamp", "commit_timestamp", "expire_timestamp", "current_state_timestamp"})

# Spark's view of the same columns (a DDL string, so this module needs no pyspark import).
TOPIC_PARTITION_DDL = "struct<topic: string, partition: int>"
MEMBER_DDL = (
    "struct<member_id: string, group_instance_id: string, client_id: string, client_host: string, "
    "rebalance_timeout_ms: int, session_timeout_ms: int, subscribed_topics: array<string>, "
    f"owned_partitions: array<{TOPIC_PARTITION_DDL}>, assigned_partitions: array<{TOPIC_PARTITION_DDL}>, "
    "subscription: binary, assignment: binary, decode_error: string>"
)
TOPIC_ID_PARTITION_DDL = "struct<topic_id: string, partition: int>"
# A KIP-848 record's fields: ``epoch`` is the group epoch (metadata), the assignment epoch (target
# assignment metadata) or the member epoch (current member assignment); partitions are by topic id
# (string form), the partition-metadata record's ``topics`` name them.
CONSUMER_DDL = (
    "struct<kind: string, member_id: string, epoch: int, previous_epoch: int, member_state: int, "
    "instance_id: string, client_id: string, client_host: string, subscribed_topics: array<string>, "
    f"subscribed_regex: string, partitions: array<{TOPIC_ID_PARTITION_DDL}>, "
    f"pending_revocation: array<{TOPIC_ID_PARTITION_DDL}>, "
    "topics: array<struct<topic_id: string, topic: string, partitions: int>>>"
)
SCHEMA_DDL = ", ".join(
    [
        "log_partition int",
        "segment bigint",
        "offset bigint",
        "timestamp timestamp",
        "record_type string",
        "tombstone boolean",
        "`group` string",
        "key_version smallint",
        "value_version smallint",
        "topic string",
        "`partition` int",
        "committed_offset bigint",
        "leader_epoch int",
        "metadata string",
        "commit_timestamp timestamp",
        "expire_timestamp timestamp",
        "protocol_type string",
        "generation int",
        "protocol string",
        "leader string",
        "current_state_timestamp timestamp",
        f"members array<{MEMBER_DDL}>",
        "error string",
        f"consumer {CONSUMER_DDL}",
    ]
)

_VERSION = struct.Struct(">h")
DEFAULT_CHUNK_ROWS = 16384


def parse_segment_path(path: str) -> tuple[int, int] | None:
    """``.../__consumer_offsets-7/00000000000000001234.log`` -> (7, 1234); None for any other file."""
    m = SEGMENT_RE.search(path.replace("\\", "/"))
    return (int(m.group(1)), int(m.group(2))) if m else None


GroupFilter = Callable[[str], bool]


def group_matcher(pattern: str | None) -> GroupFilter | None:
    """A shell-style pattern (``billing-*``, ``team-?``, ``[ab]*``) as a predicate; None matches all."""
    if pattern is None or pattern in ("", "*"):
        return None
    rx = re.compile(fnmatch.translate(pattern), re.DOTALL)
    return lambda group: rx.match(group) is not None


def pattern_is_literal(pattern: str | None) -> bool:
    return bool(pattern) and not any(c in pattern for c in "*?[")


def partitions_for_pattern(pattern: str | None, offsets_partitions: int | None) -> set[int] | None:
    """The only log partitions a literal group name can live in (None: all of them)."""
    if not pattern_is_literal(pattern) or not offsets_partitions:
        return None
    return {partition_for(pattern, offsets_partitions)}


def _ms(ts: int | None) -> int | None:
    return None if ts is None or ts < 0 else ts


def _tps(tps: Any) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": p} for tp in tps for p in tp.partitions]


def decode_member(m: Any, consumer: bool) -> dict[str, Any]:
    """A member of a group-metadata record, with the consumer protocol's bytes decoded."""
    topics: list[str] | None = None
    owned: list[dict[str, Any]] | None = None
    assigned: list[dict[str, Any]] | None = None
    errors = []
    if consumer:
        try:
            if m.subscription:
                sub = decode_subscription(m.subscription)
                topics, owned = list(sub.topics), _tps(sub.owned_partitions)
            else:
                topics, owned = [], []
        except ConsumerProtocolError as e:
            errors.append(f"subscription: {e}")
        try:
            # An empty assignment is what the coordinator stores for a member the leader left out.
            assigned = _tps(decode_assignment(m.assignment).assigned_partitions) if m.assignment else []
        except ConsumerProtocolError as e:
            errors.append(f"assignment: {e}")
    return {
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rebalance_timeout_ms": m.rebalance_timeout,
        "session_timeout_ms": m.session_timeout,
        "subscribed_topics": topics,
        "owned_partitions": owned,
        "assigned_partitions": assigned,
        "subscription": bytes(m.subscription),
        "assignment": bytes(m.assignment),
        "decode_error": "; ".join(errors) or None,
    }


def _id_partitions(tps: Any) -> list[dict[str, Any]]:
    return [{"topic_id": str(t), "partition": p} for t, ps in tps for p in ps]


def decode_consumer(k: Any, v: Any) -> dict[str, Any]:
    """A KIP-848 record's fields as the ``consumer`` column holds them (a tombstone: kind and member)."""
    out: dict[str, Any] = {"kind": CONSUMER_KINDS[type(k)], "member_id": getattr(k, "member_id", None)}
    if isinstance(v, cr.ConsumerGroupMetadataValue):
        out["epoch"] = v.epoch
    elif isinstance(v, cr.ConsumerGroupTargetAssignmentMetadataValue):
        out["epoch"] = v.assignment_epoch
    elif isinstance(v, cr.ConsumerGroupPartitionMetadataValue):
        out["topics"] = [
            {"topic_id": str(t.topic_id), "topic": t.topic_name, "partitions": t.num_partitions} for t in v.topics
        ]
    elif isinstance(v, cr.ConsumerGroupMemberMetadataValue):
        out.update(
            instance_id=v.instance_id,
            client_id=v.client_id,
            client_host=v.client_host,
            subscribed_topics=list(v.subscribed_topic_names),
            subscribed_regex=v.subscribed_topic_regex,
        )
    elif isinstance(v, cr.ConsumerGroupTargetAssignmentMemberValue):
        out["partitions"] = _id_partitions(v.topic_partitions)
    elif isinstance(v, cr.ConsumerGroupCurrentMemberAssignmentValue):
        out.update(
            epoch=v.member_epoch,
            previous_epoch=v.previous_member_epoch,
            member_state=v.state,
            partitions=_id_partitions(v.assigned_partitions),
            pending_revocation=_id_partitions(v.partitions_pending_revocation),
        )
    elif isinstance(v, cr.ConsumerGroupRegularExpressionValue):
        out["subscribed_regex"] = k.regular_expression
        out["subscribed_topics"] = list(v.topics)
    return out


class _Chunk:
    __slots__ = ("cols", "n")

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        self.n = 0

    def add(self, row: dict[str, Any]) -> None:
        for c, col in self.cols.items():
            col.append(row.get(c))
        self.n += 1


def decode_record_row(
    log_partition: int,
    segment: int,
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    group_filter: GroupFilter | None = None,
) -> dict[str, Any] | None:
    """One log record as a row (a dict over COLUMNS); None when `group_filter` rejects its group."""
    row: dict[str, Any] = {
        "log_partition": log_partition,
        "segment": segment,
        "offset": offset,
        "timestamp": _ms(timestamp),
        "tombstone": value is None,
    }
    if key is None or len(key) < 2:
        row.update(record_type=INVALID, error="record has no key")
        return row if group_filter is None else None
    row["key_version"] = _VERSION.unpack_from(key, 0)[0]
    if value is not None and len(value) >= 2:
        row["value_version"] = _VERSION.unpack_from(value, 0)[0]
    try:
        k = decode_key(key)
    except RecordDecodeError as e:
        row.update(record_type=INVALID, error=str(e))
        return row if group_filter is None else None
    if isinstance(k, CONSUMER_KEY_TYPES):
        row["group"] = k.group_id
        if group_filter is not None and not group_filter(k.group_id):
            return None
        row["record_type"] = CONSUMER_GROUP
        try:
            row["consumer"] = decode_consumer(k, None if value is None else decode_value(k, value))
        except RecordDecodeError as e:
            row.update(record_type=INVALID, error=str(e))
        return row
    if isinstance(k, SHARE_KEY_TYPES):
        row.update(group=k.group_id, record_type=SHARE_GROUP)
        return row if group_filter is None or group_filter(k.group_id) else None
    row["group"] = k.group
    if group_filter is not None and not group_filter(k.group):
        return None
    if isinstance(k, OffsetCommitKey):
        row.update(record_type=OFFSET_COMMIT, topic=k.topic, partition=k.partition)
    else:
        assert isinstance(k, GroupMetadataKey)
        row["record_type"] = GROUP_METADATA
    try:
        v = decode_value(k, value)
    except RecordDecodeError as e:
        row.update(record_type=INVALID, error=str(e))
        return row
    if isinstance(v, OffsetCommitValue):
        row.update(
            committed_offset=v.offset,
            leader_epoch=v.leader_epoch,
            metadata=v.metadata,
            commit_timestamp=_ms(v.commit_timestamp),
            expire_timestamp=_ms(v.expire_timestamp),
        )
    elif isinstance(v, GroupMetadataValue):
        consumer = v.protocol_type == "consumer"
        row.update(
            protocol_type=v.protocol_type,
            generation=v.generation,
            protocol=v.protocol,
            leader=v.leader,
            current_state_timestamp=_ms(v.current_state_timestamp),
            members=[decode_member(m, consumer) for m in v.members],
        )
    return row


def decode_segment(
    data: bytes,
    log_partition: int,
    segment: int,
    *,
    group_filter: GroupFilter | None = None,
    verify_crc: bool = True,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[dict[str, list[Any]]]:
    """Decode one segment file's bytes into column chunks of at most `chunk_rows` rows."""
    chunk = _Chunk()
    position = 0
    try:
        for batch in iter_batches(data):
            position = batch.position
            if verify_crc:
                batch.validate()
            if batch.is_control:
                continue
            for offset, ts, key, value in batch.records_kv():
                row = decode_record_row(log_partition, segment, offset, ts, key, value, group_filter)
                if row is not None:
                    chunk.add(row)
                    if chunk.n >= chunk_rows:
                        yield chunk.cols
                        chunk = _Chunk()
    except (CorruptRecordError, UnsupportedCompressionError) as e:
        chunk.add(
            {
                "log_partition": log_partition,
                "segment": segment,
                "offset": None,
                "record_type": CORRUPT,
                "error": f"byte {position} of segment {segment:020d}: {e}",
            }
        )
    if chunk.n:
        yield chunk.cols


# --------------------------------------------------------------------------------------------
# Arrow


def arrow_schema() -> Any:
    import pyarrow as pa

    tp = pa.struct([("topic", pa.string()), ("partition", pa.int32())])
    member = pa.struct(
        [
            ("member_id", pa.string()),
            ("group_instance_id", pa.string()),
            ("client_id", pa.string()),
            ("client_host", pa.string()),
            ("rebalance_timeout_ms", pa.int32()),
            ("session_timeout_ms", pa.int32()),
            ("subscribed_topics", pa.list_(pa.string())),
            ("owned_partitions", pa.list_(tp)),
            ("assigned_partitions", pa.list_(tp)),
            ("subscription", pa.binary()),
            ("assignment", pa.binary()),
            ("decode_error", pa.string()),
        ]
    )
    ts = pa.timestamp("us", tz="UTC")
    id_tp = pa.list_(pa.struct([("topic_id", pa.string()), ("partition", pa.int32())]))
    consumer = pa.struct(
        [
            ("kind", pa.string()),
            ("member_id", pa.string()),
            ("epoch", pa.int32()),
            ("previous_epoch", pa.int32()),
            ("member_state", pa.int32()),
            ("instance_id", pa.string()),
            ("client_id", pa.string()),
            ("client_host", pa.string()),
            ("subscribed_topics", pa.list_(pa.string())),
            ("subscribed_regex", pa.string()),
            ("partitions", id_tp),
            ("pending_revocation", id_tp),
            (
                "topics",
                pa.list_(pa.struct([("topic_id", pa.string()), ("topic", pa.string()), ("partitions", pa.int32())])),
            ),
        ]
    )
    types = {
        "log_partition": pa.int32(),
        "segment": pa.int64(),
        "offset": pa.int64(),
        "timestamp": ts,
        "record_type": pa.string(),
        "tombstone": pa.bool_(),
        "group": pa.string(),
        "key_version": pa.int16(),
        "value_version": pa.int16(),
        "topic": pa.string(),
        "partition": pa.int32(),
        "committed_offset": pa.int64(),
        "leader_epoch": pa.int32(),
        "metadata": pa.string(),
        "commit_timestamp": ts,
        "expire_timestamp": ts,
        "protocol_type": pa.string(),
        "generation": pa.int32(),
        "protocol": pa.string(),
        "leader": pa.string(),
        "current_state_timestamp": ts,
        "members": pa.list_(member),
        "error": pa.string(),
        "consumer": consumer,
    }
    return pa.schema([(c, types[c]) for c in COLUMNS])


_ARROW_SCHEMA = None


def to_arrow(cols: dict[str, list[Any]]) -> Any:
    """A column chunk from decode_segment as a pyarrow.RecordBatch (timestamps ms -> µs)."""
    import pyarrow as pa

    global _ARROW_SCHEMA
    if _ARROW_SCHEMA is None:
        _ARROW_SCHEMA = arrow_schema()
    arrays = []
    for field in _ARROW_SCHEMA:
        values = cols[field.name]
        if field.name in TIMESTAMP_COLUMNS:
            values = [None if v is None else v * 1000 for v in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=_ARROW_SCHEMA)


def decode_segment_tuples(data: bytes, log_partition: int, segment: int, **kw: Any) -> Iterator[tuple]:
    """Rows as tuples in COLUMNS order (timestamps as UTC datetimes), for Spark's RDD API."""
    from datetime import UTC, datetime

    ts_index = [i for i, c in enumerate(COLUMNS) if c in TIMESTAMP_COLUMNS]
    for cols in decode_segment(data, log_partition, segment, **kw):
        for row in zip(*(cols[c] for c in COLUMNS)):
            row = list(row)
            for i in ts_index:
                if row[i] is not None:
                    row[i] = datetime.fromtimestamp(row[i] / 1000, tz=UTC)
            yield tuple(row)


def decode_segment_arrow(data: bytes, log_partition: int, segment: int, **kw: Any) -> Iterator[Any]:
    for cols in decode_segment(data, log_partition, segment, **kw):
        yield to_arrow(cols)
