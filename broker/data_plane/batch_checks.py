"""Kafka's checks of a Produce batch before it is appended (``ProduceRequest.validateRecords``,
``LogValidator``), in Kafka's order.

Each partition's data must be exactly one record batch v2 (Kafka's rule for Produce v3+): size
(MESSAGE_TOO_LARGE), CRC (CORRUPT_MESSAGE), header sanity (INVALID_RECORD), then, when the records
must be decoded, keys on compacted topics and timestamps when the topic limits them. A Produce v0-2
message set (magic 0/1) first becomes one v2 batch (``up_convert``: LogValidator's up-conversion,
``storage/legacy.py``). The checks run on the event-loop thread and answer a partition response
(``partition_error``) or the checked batch's ``BatchView``; the producer checks follow in
``produce.py``.
"""

from __future__ import annotations

from typing import Any

from groupd.protocol.errors import ErrorCode
from groupd.storage import LogConfig, legacy
from groupd.storage import records as rec
from groupd.storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError

from ..topics import Topic
from .state import INT64_MAX
from .topic_config import int_config

__all__ = ["LIMITS", "check_batch", "check_records", "partition_error", "timestamp_limits", "up_convert"]


def partition_error(index: int, code: int, message: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": extra.get("record_errors", []),
        "error_message": message,
    }


def check_batch(
    t: Topic,
    cfg: LogConfig,
    index: int,
    raw: bytes | None,
    v: int,
    now: int,
    *,
    check_timestamps: bool = True,
) -> dict[str, Any] | rec.BatchView:
    """Kafka's validation of a client's batch (ProduceRequest.validateRecords, LogValidator)."""
    if not raw:
        return partition_error(
            index,
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {v} must have at least one record batch",
        )
    if len(raw) < rec.HEADER_SIZE or raw[16] != 2:
        return partition_error(
            index,
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {v} are only allowed to contain record batches with magic version 2",
        )
    try:
        view = rec.BatchView(raw, 0)
    except CorruptRecordError as exc:
        return partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    if view.size != len(raw):
        return partition_error(
            index,
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {v} are only allowed to contain exactly one record batch per partition",
        )
    # the header's flags read once (BatchView's properties are a call each on the hot path)
    attributes = view.attributes
    codec = attributes & rec.COMPRESSION_MASK
    if codec > rec.COMPRESSION_ZSTD:
        return partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"Unknown compression type id {codec}")
    if codec == rec.COMPRESSION_ZSTD and v < 7:
        return partition_error(
            index,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {v} are not allowed to use ZStandard compression",
        )
    if view.size > cfg.max_message_bytes:
        return partition_error(
            index,
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size in the append to {t.name}-{index} is {view.size} bytes which exceeds "
            f"the maximum configured value of {cfg.max_message_bytes}.",
        )
    if rec.compute_crc(raw, 0, view.size) != view.crc:
        return partition_error(
            index,
            ErrorCode.CORRUPT_MESSAGE,
            f"Record is corrupt (stored crc = {view.crc}) in topic partition {t.name}-{index}.",
        )
    if view.base_offset != 0:
        return partition_error(
            index,
            ErrorCode.INVALID_RECORD,
            f"The baseOffset of the record batch in the append to {t.name}-{index} should be 0, but it is {view.base_offset}",
        )
    if attributes & rec.CONTROL_FLAG:
        return partition_error(index, ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if view.record_count != view.last_offset_delta + 1 or view.record_count <= 0:
        return partition_error(
            index,
            ErrorCode.INVALID_RECORD,
            f"Record count {view.record_count} does not match lastOffsetDelta {view.last_offset_delta}",
        )
    if attributes & rec.TRANSACTIONAL_FLAG and view.producer_id < 0:
        return partition_error(index, ErrorCode.INVALID_RECORD, "Transactional record batches must have a producer id")
    if view.producer_id >= 0 and view.base_sequence < 0:
        return partition_error(
            index,
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {view.base_sequence} in record batch with producerId {view.producer_id}",
        )
    if cfg.compact or (check_timestamps and _limited(t.configs) and timestamp_limits(t.configs) != (None, None)):
        return check_records(t, cfg, index, view, now, check_timestamps=check_timestamps)
    return view


_DIFF = "message.timestamp.difference.max.ms"
_BEFORE = "message.timestamp.before.max.ms"
_AFTER = "message.timestamp.after.max.ms"
LIMITS = (_DIFF, _BEFORE, _AFTER)  # a topic that sets none has no record-level timestamp check


def _limited(configs: dict[str, str]) -> bool:
    """Whether the topic sets any timestamp limit (``timestamp_limits`` then says which): most set
    none, and three ``int_config`` calls per partition were ~3% of a small Produce."""
    return _DIFF in configs or _BEFORE in configs or _AFTER in configs


def check_records(
    t: Topic, cfg: LogConfig, index: int, view: rec.BatchView, now: int, *, check_timestamps: bool = True
) -> dict[str, Any] | rec.BatchView:
    """Record-level checks that need the records decoded: keys on compacted topics, timestamps
    when the topic limits them."""
    try:
        records = view.records_kv()
    except UnsupportedCompressionError as exc:
        return partition_error(
            index,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"{exc}: groupd must read the records of topic {t.name} ({cfg.cleanup_policy} policy or timestamp limits)",
        )
    except CorruptRecordError as exc:
        return partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    if cfg.compact:
        bad = [i for i, r in enumerate(records) if r[2] is None]
        if bad:
            return partition_error(
                index,
                ErrorCode.INVALID_RECORD,
                "One or more records have been rejected",
                record_errors=[
                    {
                        "batch_index": i,
                        "batch_index_error_message": "Compacted topic cannot accept message without key",
                    }
                    for i in bad
                ],
            )
    before, after = timestamp_limits(t.configs)
    if check_timestamps and cfg.message_timestamp_type == "CreateTime" and (before is not None or after is not None):
        errors = []
        for i, r in enumerate(records):
            ts = r[1]
            if (before is not None and ts < now - before) or (after is not None and ts > now + after):
                errors.append(
                    {
                        "batch_index": i,
                        "batch_index_error_message": f"Timestamp {ts} of message with offset {i} is out of range. "
                        f"The timestamp should be within [{now - (before or 0)}, {now + (after or 0)}]",
                    }
                )
        if errors:
            return partition_error(
                index,
                ErrorCode.INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp",
                record_errors=errors,
            )
    return view


def timestamp_limits(configs: dict[str, str]) -> tuple[int | None, int | None]:
    diff = int_config(configs, _DIFF)
    before = int_config(configs, _BEFORE)
    after = int_config(configs, _AFTER)
    before = before if before is not None else diff
    after = after if after is not None else diff
    if before is not None and (before < 0 or before >= INT64_MAX):
        before = None
    if after is not None and (after < 0 or after >= INT64_MAX):
        after = None
    return before, after


def up_convert(index: int, raw: bytes) -> bytes | dict[str, Any]:
    """A Produce v0-2 message set as the one v2 batch Kafka 3.x's LogValidator would append
    (``convertAndAssignOffsetsNonCompressed`` / ``buildRecordsAndAssignOffsets``): the producer's
    timestamps (none in magic 0: NO_TIMESTAMP), the source codec, no producer id."""
    try:
        return legacy.to_v2(legacy.parse_message_set(raw))
    except CorruptRecordError as exc:
        return partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    except InvalidRecordError as exc:
        return partition_error(index, ErrorCode.INVALID_RECORD, str(exc))
    except UnsupportedCompressionError as exc:
        return partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc))
