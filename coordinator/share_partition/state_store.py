"""The persisted state of share-partitions: a fold over ``__share_group_state`` records.

Kafka's share coordinator (``ShareCoordinatorShard``) keeps, per (group, topic id, partition), the
state a ``SharePartition`` wrote: its start offset, state epoch and the state batches of offsets
that were released, acknowledged or archived. Each write becomes one record
(``generateShareStateRecord``): a ``ShareSnapshot`` (the whole state) for the first write of a
key and after every ``snapshot_every`` updates (``share.coordinator.snapshot.update.records.per.snapshot``,
500), else a ``ShareUpdate`` (the changed batches and the new start offset). ``replay`` is the
only mutator, for the live path and for the start-up load alike: a snapshot replaces the key's
state, an update merges its batches over it (``PersisterStateBatchCombiner``: the newer batch
wins where they overlap) and drops what lies below the new start offset. A null value is a
tombstone (the key's state deleted).

Where a key lives: partition ``Utils.abs("group:topicId:partition".hashCode()) % 50`` of
``__share_group_state`` (``SharePartitionKey.asCoordinatorKey``; the topic id in Kafka's base64
form). groupd's node leads every partition of it; the records are Kafka's bytes, so the log reads
the same with Kafka's ``ShareGroupStateMessageFormatter``.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterable
from dataclasses import field
from typing import Any, NamedTuple

from groupd.protocol._rt import DecodeError
from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record
from groupd.protocol.messages.share_records import (
    SHARE_SNAPSHOT_KEY,
    SHARE_SNAPSHOT_TYPE,
    SHARE_SNAPSHOT_VALUE,
    SHARE_UPDATE_KEY,
    SHARE_UPDATE_TYPE,
    SHARE_UPDATE_VALUE,
)
from groupd.protocol.partitioning import coordinator_partition

from .partition import ACKNOWLEDGED, ARCHIVED, AVAILABLE, StateBatch

SHARE_STATE_PARTITIONS = 50  # share.coordinator.state.topic.num.partitions
SNAPSHOT_EVERY = 500  # share.coordinator.snapshot.update.records.per.snapshot
_I16 = struct.Struct(">h")


class SharePartitionKey(NamedTuple):
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """``SharePartitionKey.asCoordinatorKey``: "group:topicId:partition", topic id as Kafka prints it."""
        tid = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group_id}:{tid}:{self.partition}"


def share_state_partition(key: SharePartitionKey, partitions: int = SHARE_STATE_PARTITIONS) -> int:
    return coordinator_partition(key.coordinator_key(), partitions)


@mutable_record
class ShareRecord:
    """One ``__share_group_state`` record, decoded. ``value`` None: a tombstone."""

    type: int  # SHARE_SNAPSHOT_TYPE or SHARE_UPDATE_TYPE
    key: SharePartitionKey
    value: dict[str, Any] | None

    def __init__(self, type: int, key: SharePartitionKey, value: dict[str, Any] | None) -> None:
        self.type = type
        self.key = key
        self.value = value


class ShareRecordError(ValueError):
    """A ``__share_group_state`` record in no known format."""


def encode_record(rec: ShareRecord) -> tuple[bytes, bytes | None]:
    schema = SHARE_SNAPSHOT_KEY if rec.type == SHARE_SNAPSHOT_TYPE else SHARE_UPDATE_KEY
    key = _I16.pack(rec.type) + schema.codec(0).encode(
        {"group_id": rec.key.group_id, "topic_id": rec.key.topic_id, "partition": rec.key.partition}
    )
    if rec.value is None:
        return key, None
    vschema = SHARE_SNAPSHOT_VALUE if rec.type == SHARE_SNAPSHOT_TYPE else SHARE_UPDATE_VALUE
    return key, _I16.pack(0) + vschema.codec(0).encode(rec.value)


def decode_record(key: bytes, value: bytes | None) -> ShareRecord:
    try:
        (kind,) = _I16.unpack_from(key, 0)
        if kind not in (SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE):
            raise ShareRecordError(f"unknown share record type {kind}")
        schema = SHARE_SNAPSHOT_KEY if kind == SHARE_SNAPSHOT_TYPE else SHARE_UPDATE_KEY
        k = schema.codec(0).decode(key, 2)
        skey = SharePartitionKey(k["group_id"], k["topic_id"], k["partition"])
        if value is None:
            return ShareRecord(kind, skey, None)
        (version,) = _I16.unpack_from(value, 0)
        if version != 0:
            raise ShareRecordError(f"unknown share record value version {version}")
        vschema = SHARE_SNAPSHOT_VALUE if kind == SHARE_SNAPSHOT_TYPE else SHARE_UPDATE_VALUE
        return ShareRecord(kind, skey, vschema.codec(0).decode(value, 2))
    except (struct.error, DecodeError) as e:
        raise ShareRecordError(str(e)) from None


@mutable_record
class PersistedShareState:
    """``ShareGroupOffset``: one key's state as written."""

    start_offset: int
    state_epoch: int = 0
    snapshot_epoch: int = 0
    create_timestamp: int = 0
    updates_since_snapshot: int = 0
    # offset -> (state, delivery count), offsets >= start_offset only
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)

    def __init__(
        self,
        start_offset: int,
        state_epoch: int = 0,
        snapshot_epoch: int = 0,
        create_timestamp: int = 0,
        updates_since_snapshot: int = 0,
        offsets: dict[int, tuple[int, int]] = DEFAULT_FACTORY,
    ) -> None:
        self.start_offset = start_offset
        self.state_epoch = state_epoch
        self.snapshot_epoch = snapshot_epoch
        self.create_timestamp = create_timestamp
        self.updates_since_snapshot = updates_since_snapshot
        self.offsets = {} if offsets is DEFAULT_FACTORY else offsets

    def batches(self) -> list[StateBatch]:
        out: list[StateBatch] = []
        for off in sorted(self.offsets):
            state, count = self.offsets[off]
            if out and out[-1].last_offset == off - 1 and out[-1].state == state and out[-1].delivery_count == count:
                out[-1] = out[-1]._replace(last_offset=off)
            else:
                out.append(StateBatch(off, off, state, count))
        return out

    def merge(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        if start_offset >= 0 and start_offset != self.start_offset:
            self.start_offset = start_offset
            self.offsets = {o: v for o, v in self.offsets.items() if o >= start_offset}
        for b in batches:
            for off in range(max(b.first_offset, self.start_offset), b.last_offset + 1):
                self.offsets[off] = (b.state, b.delivery_count)


def _wire_batches(batches: Iterable[StateBatch]) -> list[dict[str, int]]:
    return [
        {
            "first_offset": b.first_offset,
            "last_offset": b.last_offset,
            "delivery_state": b.state,
            "delivery_count": b.delivery_count,
        }
        for b in batches
    ]


def _batches(value: dict[str, Any]) -> list[StateBatch]:
    out = []
    for b in value["state_batches"] or []:
        state = b["delivery_state"]
        if state not in (AVAILABLE, ACKNOWLEDGED, ARCHIVED):
            state = AVAILABLE
        out.append(StateBatch(b["first_offset"], b["last_offset"], state, b["delivery_count"]))
    return out


class ShareStateStore:
    """Every share-partition's persisted state (the fold), and the records that change it."""

    def __init__(self, snapshot_every: int = SNAPSHOT_EVERY) -> None:
        self.snapshot_every = snapshot_every
        self.states: dict[SharePartitionKey, PersistedShareState] = {}

    def get(self, key: SharePartitionKey) -> PersistedShareState | None:
        return self.states.get(key)

    def start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        """The share-partition start offset of a group's partition, None when never initialized
        (what DescribeShareGroupOffsets answers: ``ReadShareGroupStateSummary``)."""
        s = self.states.get(SharePartitionKey(group_id, topic_id, partition))
        return None if s is None else s.start_offset

    def keys_of_group(self, group_id: str) -> list[SharePartitionKey]:
        return [k for k in self.states if k.group_id == group_id]

    # --- records ------------------------------------------------------------------------------------
    def write(
        self,
        key: SharePartitionKey,
        start_offset: int,
        batches: Iterable[StateBatch],
        now_ms: int,
        leader_epoch: int = 0,
        *,
        snapshot: bool = False,
    ) -> ShareRecord:
        """The record that writes ``batches`` and ``start_offset`` for ``key``
        (``ShareCoordinatorShard.writeState`` / ``generateShareStateRecord``); ``snapshot``: a
        snapshot whatever the cadence (the cold-partition snapshots before pruning). Not applied:
        the caller replays it."""
        batches = list(batches)
        cur = self.states.get(key)
        if cur is None or snapshot or cur.updates_since_snapshot + 1 >= self.snapshot_every:
            merged = PersistedShareState(start_offset, cur.state_epoch if cur else 0)
            if cur is not None:
                merged.start_offset = cur.start_offset
                merged.offsets = dict(cur.offsets)
                merged.merge(start_offset, batches)
            else:
                merged.merge(start_offset, batches)
            return ShareRecord(
                SHARE_SNAPSHOT_TYPE,
                key,
                {
                    "snapshot_epoch": (cur.snapshot_epoch + 1) if cur else 0,
                    "state_epoch": merged.state_epoch,
                    "leader_epoch": leader_epoch,
                    "start_offset": merged.start_offset,
                    "delivery_complete_count": -1,
                    "create_timestamp": cur.create_timestamp if cur else now_ms,
                    "write_timestamp": now_ms,
                    "state_batches": _wire_batches(merged.batches()),
                },
            )
        return ShareRecord(
            SHARE_UPDATE_TYPE,
            key,
            {
                "snapshot_epoch": cur.snapshot_epoch,
                "leader_epoch": leader_epoch,
                "start_offset": start_offset,
                "delivery_complete_count": -1,
                "state_batches": _wire_batches(batches),
            },
        )

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int, now_ms: int) -> ShareRecord:
        """``ShareCoordinatorShard.initializeState``: a fresh snapshot (no batches) at ``state_epoch``;
        ``start_offset`` -1: not known yet (``share.auto.offset.reset`` decides at first use)."""
        cur = self.states.get(key)
        return ShareRecord(
            SHARE_SNAPSHOT_TYPE,
            key,
            {
                "snapshot_epoch": (cur.snapshot_epoch + 1) if cur else 0,
                "state_epoch": state_epoch,
                "leader_epoch": 0,
                "start_offset": start_offset,
                "delivery_complete_count": -1,
                "create_timestamp": now_ms,
                "write_timestamp": now_ms,
                "state_batches": [],
            },
        )

    def delete(self, key: SharePartitionKey) -> ShareRecord:
        """The tombstone of ``key`` (DeleteShareGroupState)."""
        return ShareRecord(SHARE_SNAPSHOT_TYPE, key, None)

    def replay(self, rec: ShareRecord) -> None:
        """Apply one record (the live path after its append, and the start-up load)."""
        if rec.value is None:
            self.states.pop(rec.key, None)
            return
        v = rec.value
        if rec.type == SHARE_SNAPSHOT_TYPE:
            s = PersistedShareState(
                v["start_offset"],
                v["state_epoch"],
                v["snapshot_epoch"],
                v["create_timestamp"],
                0,
            )
            s.merge(-1, _batches(v))
            self.states[rec.key] = s
            return
        cur = self.states.get(rec.key)
        if cur is None:
            # an update without its snapshot (a compacted-away or corrupt snapshot): start from it
            cur = self.states[rec.key] = PersistedShareState(max(v["start_offset"], 0))
        cur.merge(v["start_offset"], _batches(v))
        cur.updates_since_snapshot += 1
