"""groupd.coordinator.share_partition: the sans-IO cores of KIP-932 delivery (share groups' records).

- ``partition.py``: ``SharePartition``, one share-partition's in-flight records (Kafka's
  ``SharePartition``): acquisition with locks and their deadlines, ACCEPT / RELEASE / REJECT / RENEW,
  delivery counts and their limit, the start and end offsets, the in-flight limit.
- ``sessions.py``: ``ShareSessionCache``, the share sessions of ShareFetch / ShareAcknowledge
  (Kafka's ``ShareSessionCache`` and ``SharePartitionManager.newContext``).
- ``state_store.py``: ``ShareStateStore``, the persisted state of every share-partition as a fold
  over ``__share_group_state`` records (Kafka's ``ShareCoordinatorShard``: ShareSnapshot /
  ShareUpdate and the snapshot cadence), and the records' bytes.

Nothing here reads a clock, a socket or a file: the shell (``groupd.broker.share``) hands in the
time, the batches it read from the log, and writes the records it is handed back.
"""

from .partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    BatchInfo,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)
from .sessions import ShareSession, ShareSessionCache
from .state_store import SharePartitionKey, ShareStateStore, decode_record, encode_record, share_state_partition

__all__ = [
    "ACCEPT",
    "ACKNOWLEDGED",
    "ACQUIRED",
    "ARCHIVED",
    "AVAILABLE",
    "GAP",
    "REJECT",
    "RELEASE",
    "RENEW",
    "AckBatch",
    "BatchInfo",
    "SharePartition",
    "SharePartitionConfig",
    "SharePartitionKey",
    "ShareSession",
    "ShareSessionCache",
    "ShareStateStore",
    "StateBatch",
    "decode_record",
    "encode_record",
    "share_state_partition",
]
