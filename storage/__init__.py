"""groupd.storage: Kafka-format segmented partition logs, recovery, group commit, compaction.

The engine stores and returns record batches; it knows nothing about what the records mean.
"""

from .appender import Appender, FsyncPolicy
from .compaction import Cleaner, CompactionResult, compact, run_cleanup
from .errors import (
    CorruptRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageEngineError,
    StorageError,
    UnsupportedCompressionError,
)
from .files import FileOps, recover_interrupted_swaps
from .log import LogConfig, PartitionLog, Segment
from .manager import LogManager, parse_partition_dir
from .records import BatchView, Record, build_batch, decode_window, iter_batches, iter_records

__all__ = [
    "Appender",
    "BatchView",
    "Cleaner",
    "CompactionResult",
    "CorruptRecordError",
    "FileOps",
    "FsyncPolicy",
    "LogClosedError",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "Record",
    "RecordTooLargeError",
    "Segment",
    "StorageEngineError",
    "StorageError",
    "UnsupportedCompressionError",
    "build_batch",
    "compact",
    "decode_window",
    "iter_batches",
    "iter_records",
    "parse_partition_dir",
    "recover_interrupted_swaps",
    "run_cleanup",
]
