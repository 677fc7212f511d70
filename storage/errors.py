"""Exceptions raised by the storage engine.

Callers map them to Kafka error codes: `StorageError` -> KAFKA_STORAGE_ERROR,
`CorruptRecordError` -> CORRUPT_MESSAGE, `InvalidRecordError` -> INVALID_RECORD, `OffsetOutOfRangeError` -> OFFSET_OUT_OF_RANGE,
`UnsupportedCompressionError` -> UNSUPPORTED_COMPRESSION_TYPE, `RecordTooLargeError` ->
MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE.
"""

from __future__ import annotations


class StorageEngineError(Exception):
    """Base class of everything this package raises on purpose."""


class StorageError(StorageEngineError):
    """The disk refused an operation (ENOSPC, EROFS, EIO...); the log was left consistent."""


class LogClosedError(StorageError):
    """The partition log was closed or deleted while an operation still wanted it."""


class CorruptRecordError(StorageEngineError):
    """Bytes that should be a record batch are not a valid one (bad length, magic, CRC, varints)."""


class InvalidRecordError(StorageEngineError):
    """Intact bytes that break a rule of the format (a compressed message inside a compressed one)."""


class UnsupportedCompressionError(StorageEngineError):
    """A batch uses a compression codec whose library is not installed (or an unknown codec id)."""


class OffsetOutOfRangeError(StorageEngineError):
    """A read asked for an offset below the log start offset or above the log end offset."""


class RecordTooLargeError(StorageEngineError):
    """A batch is larger than the log's max_message_bytes."""
