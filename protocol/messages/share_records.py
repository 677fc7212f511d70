"""The ``__share_group_state`` record formats (Kafka 4.2's ``share-coordinator/.../common/message/``).

Data schemas, not APIs: on disk the key and the value are each preceded by an int16; the key's is
the record type (``ShareSnapshotKey`` 0, ``ShareUpdateKey`` 1, Kafka's ``CoordinatorRecordType``),
the value's its version (0). Both keys are (group id, topic id, partition).

- ``SHARE_SNAPSHOT_VALUE`` v0 (flexible): the whole state of one share-partition: snapshot epoch,
  state epoch, leader epoch, start offset, create and write timestamps, the state batches (first
  and last offset, delivery state 0 available / 2 acknowledged / 4 archived, delivery count);
  tagged field 0 ``delivery_complete_count`` (KIP-1226, Kafka 4.2, default -1).
- ``SHARE_UPDATE_VALUE`` v0 (flexible): the batches that changed since, and the start offset (-1:
  unchanged); the same tagged field.
"""

from __future__ import annotations

from ..schema import Field, MessageSchema, f

SHARE_SNAPSHOT_TYPE = 0
SHARE_UPDATE_TYPE = 1


def _key(name: str) -> MessageSchema:
    return MessageSchema(
        name,
        valid="0",
        flexible="none",
        fields=(f("group_id", "string", "0"), f("topic_id", "uuid", "0"), f("partition", "int32", "0")),
    )


def _state_batches() -> Field:
    return f(
        "state_batches",
        "[]",
        "0+",
        f("first_offset", "int64"),
        f("last_offset", "int64"),
        f("delivery_state", "int8"),
        f("delivery_count", "int16"),
    )


SHARE_SNAPSHOT_KEY = _key("ShareSnapshotKey")
SHARE_UPDATE_KEY = _key("ShareUpdateKey")

SHARE_SNAPSHOT_VALUE = MessageSchema(
    "ShareSnapshotValue",
    valid="0",
    flexible="0+",
    fields=(
        f("snapshot_epoch", "int32"),
        f("state_epoch", "int32"),
        f("leader_epoch", "int32"),
        f("start_offset", "int64"),
        f("delivery_complete_count", "int32", "0+", default=-1, tag=0, tagged="0+"),
        f("create_timestamp", "int64"),
        f("write_timestamp", "int64"),
        _state_batches(),
    ),
)

SHARE_UPDATE_VALUE = MessageSchema(
    "ShareUpdateValue",
    valid="0",
    flexible="0+",
    fields=(
        f("snapshot_epoch", "int32"),
        f("leader_epoch", "int32"),
        f("start_offset", "int64"),
        f("delivery_complete_count", "int32", "0+", default=-1, tag=0, tagged="0+"),
        _state_batches(),
    ),
)

SHARE_RECORD_SCHEMAS: tuple[MessageSchema, ...] = (
    SHARE_SNAPSHOT_KEY,
    SHARE_SNAPSHOT_VALUE,
    SHARE_UPDATE_KEY,
    SHARE_UPDATE_VALUE,
)
