"""Share groups (KIP-932) in the pipeline: the ``__share_group_state`` log as state changes.

``__share_group_state`` holds, per share-partition (group, topic id, partition), the records the
delivery side wrote (``ShareCoordinatorShard.generateShareStateRecord``): a ``ShareSnapshot`` (the
whole state) or a ``ShareUpdate`` (the changed state batches and the start offset). A state batch is
an offset range with a delivery state (AVAILABLE 0, ACKNOWLEDGED 2, ARCHIVED 4) and a delivery count.
A key lives in exactly one log partition, so one Spark task per log partition folds its segments in
log order -- the same fold as the daemon's start-up load (``ShareStateStore.replay``) -- and emits
one ``share_state_changes`` row per offset range whose (state, delivery count) the record changed.

What the records allow (and what they do not):

* *deliveries*: a delivery count only grows by acquisitions, so the growth of an offset's count
  between two records is the number of times it was handed out in between; *redeliveries* are the
  deliveries beyond an offset's first.
* *returned*: a change to AVAILABLE is a record given back to the pool -- an explicit RELEASE, a lock
  expiry or its consumer leaving. The records do not say which (Kafka writes the same batch for all
  three), so the report shows them together; the daemon's own counter of lock expiries alone is the
  metric ``groupd_share_lock_expiries``.
* *accepted* (to ACKNOWLEDGED) and *archived* (to ARCHIVED: rejected, or the delivery-count limit).
* Acquisitions are not persisted (Kafka writes a state only when it leaves ACQUIRED), so a delivery
  is seen when it ends, at that record's time; a record still acquired is not in the log yet.
* The daemon prunes the log below each key's latest snapshot: what happened before it is gone,
  and the first record read of a key (a snapshot) counts as the changes from nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from groupd.coordinator.share_partition.partition import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from groupd.coordinator.share_partition.state_store import (
    SHARE_SNAPSHOT_TYPE,
    SharePartitionKey,
    ShareRecordError,
    decode_record,
)
from groupd.storage.errors import CorruptRecordError, UnsupportedCompressionError
from groupd.storage.records import iter_batches

SHARE_STATE_TOPIC = "__share_group_state"
CHANGES_TABLE = "share_state_changes"
_DIR_RE = re.compile(r"^__share_group_state-(\d+)$")
STATE_NAMES = {AVAILABLE: "available", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}

CHANGES_DDL = ", ".join(
    [
        "log_partition int",
        "log_offset bigint",
        "at timestamp",
        "`group` string",
        "topic_id string",
        "`partition` int",
        "record string",  # snapshot, update, tombstone
        "start_offset bigint",
        "first_offset bigint",
        "last_offset bigint",
        "from_state string",  # null: the offset was not in the state before
        "to_state string",
        "from_count int",
        "to_count int",
        "deliveries bigint",  # (to_count - from_count) per offset, times the range's length
        "redeliveries bigint",
    ]
)


def state_dirs(data_dir: str) -> list[tuple[int, str]]:
    """(log partition, directory) of every ``__share_group_state`` partition under a local data dir."""
    out = []
    if os.path.isdir(data_dir):
        for name in sorted(os.listdir(data_dir)):
            m = _DIR_RE.match(name)
            if m:
                out.append((int(m.group(1)), os.path.join(data_dir, name)))
    return out


def _records(directory: str) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as fh:
            data = fh.read()
        try:
            for batch in iter_batches(data):
                batch.validate()
                if batch.is_control:
                    continue
                yield from batch.records_kv()
        except (CorruptRecordError, UnsupportedCompressionError):
            continue  # the rest of a damaged segment cannot be trusted; the next one can


def _merge_runs(items: list[tuple[int, Any]]) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    for off, val in items:
        if out and out[-1][1] == off - 1 and out[-1][2] == val:
            out[-1] = (out[-1][0], off, val)
        else:
            out.append((off, off, val))
    return out


def fold_partition(log_partition: int, directory: str) -> Iterator[tuple]:
    """The change rows of one ``__share_group_state`` partition (tuples in CHANGES_DDL order;
    ``at`` in epoch ms)."""
    states: dict[SharePartitionKey, tuple[int, dict[int, tuple[int, int]]]] = {}
    for offset, ts, key, value in _records(directory):
        if key is None:
            continue
        try:
            rec = decode_record(key, value)
        except ShareRecordError:
            continue
        k = rec.key
        base = (log_partition, offset, ts, k.group_id, str(k.topic_id), k.partition)
        if rec.value is None:
            states.pop(k, None)
            yield (*base, "tombstone", None, None, None, None, None, None, None, 0, 0)
            continue
        v = rec.value
        snapshot = rec.type == SHARE_SNAPSHOT_TYPE
        start, cur = states.get(k, (-1, {}))
        new_start = v["start_offset"] if v["start_offset"] >= 0 else start
        changed: list[tuple[int, tuple[int | None, int, int, int]]] = []
        seen: dict[int, tuple[int, int]] = {}
        for b in v["state_batches"] or []:
            to = (b["delivery_state"], b["delivery_count"])
            for off in range(b["first_offset"], b["last_offset"] + 1):
                seen[off] = to
                before = cur.get(off)
                if before != to:
                    frm_state, frm_count = before if before is not None else (None, 0)
                    changed.append((off, (frm_state, frm_count, *to)))
        # ShareCoordinatorShard: a snapshot replaces the state; an update merges over it
        nxt = dict(seen) if snapshot else {**cur, **seen}
        states[k] = (new_start, {o: s for o, s in nxt.items() if o >= new_start})
        kind = "snapshot" if snapshot else "update"
        if not changed:
            yield (*base, kind, new_start, None, None, None, None, None, None, 0, 0)
        for first, last, (fs, fc, ts_, tc) in _merge_runs(changed):
            n = last - first + 1
            yield (
                *base,
                kind,
                new_start,
                first,
                last,
                STATE_NAMES.get(fs) if fs is not None else None,
                STATE_NAMES.get(ts_, str(ts_)),
                fc,
                tc,
                n * max(0, tc - fc),
                n * max(0, tc - max(fc, 1)),
            )


def share_state_changes(spark: Any, data_dir: str, group: str | None = None) -> Any:
    """The ``share_state_changes`` DataFrame of a local data directory (empty without share state;
    `group`: a shell-style pattern as ``--group``)."""
    from pyspark.sql import functions as F

    from .decode import group_matcher

    dirs = state_dirs(data_dir)
    keep = group_matcher(group)
    rows = (
        spark.sparkContext.parallelize(dirs, max(1, min(len(dirs), spark.sparkContext.defaultParallelism)))
        .flatMap(lambda d: fold_partition(d[0], d[1]))
        .filter(lambda r: keep is None or keep(r[3]))
        .map(lambda r: (*r[:2], None if r[2] is None or r[2] < 0 else r[2], *r[3:]))
        if dirs
        else spark.sparkContext.emptyRDD()
    )
    ddl = CHANGES_DDL.replace("at timestamp", "at_ms bigint")
    df = spark.createDataFrame(rows, ddl)
    return df.withColumn("at", F.timestamp_millis("at_ms")).select(
        *[c.split(" ")[0].strip("`") for c in CHANGES_DDL.split(", ")]
    )


def within(changes: Any, since: object | None, until: object | None) -> Any:
    """Only the changes written in [since, until)."""
    from pyspark.sql import functions as F

    if since is not None:
        changes = changes.where(F.col("at") >= F.lit(since))
    if until is not None:
        changes = changes.where(F.col("at") < F.lit(until))
    return changes


BUCKETS = 60


def summarize(changes: Any) -> dict[str, Any]:
    """What the report's share section needs: totals per group and a time series in buckets."""
    from pyspark.sql import functions as F

    c = changes.where(F.col("first_offset").isNotNull())
    per_group = [
        r.asDict()
        for r in c.groupBy("group")
        .agg(
            F.sum("deliveries").alias("deliveries"),
            F.sum("redeliveries").alias("redeliveries"),
            F.sum(_span("available")).alias("returned"),
            F.sum(_span("acknowledged")).alias("accepted"),
            F.sum(_span("archived")).alias("archived"),
            F.countDistinct("topic_id", "partition").alias("partitions"),
        )
        .orderBy(F.desc("deliveries"), "group")
        .limit(100)
        .collect()
    ]
    bounds = c.agg(F.min(F.unix_millis("at")).alias("lo"), F.max(F.unix_millis("at")).alias("hi")).first()
    series: list[dict[str, Any]] = []
    if bounds is not None and bounds.lo is not None:
        lo, hi = bounds.lo, bounds.hi
        width = max(1, -(-(hi - lo + 1) // BUCKETS))
        series = [
            r.asDict()
            for r in c.withColumn("bucket", F.floor((F.unix_millis("at") - F.lit(lo)) / F.lit(width)))
            .groupBy("bucket")
            .agg(
                F.sum("deliveries").alias("deliveries"),
                F.sum("redeliveries").alias("redeliveries"),
                F.sum(_span("available")).alias("returned"),
                F.sum(_span("archived")).alias("archived"),
            )
            .orderBy("bucket")
            .collect()
        ]
        for s in series:
            s["at"] = lo + s.pop("bucket") * width
    return {"groups": per_group, "series": series}


def _span(state: str) -> Any:
    from pyspark.sql import functions as F

    return F.when(F.col("to_state") == state, F.col("last_offset") - F.col("first_offset") + 1).otherwise(0)
