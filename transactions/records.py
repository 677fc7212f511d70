"""The ``__transaction_state`` record types, as dataclasses, and the transaction states.

They mirror Kafka's ``TransactionLogKey``/``TransactionLogValue`` message specs
(transaction-coordinator/src/main/resources/common/message/) and ``TransactionState.java``. Bytes
live in ``serde.py``; the coordinator produces and replays these objects. A record is
``(key, value)``; a ``None`` value is a tombstone (the transactional id expired).
"""

from __future__ import annotations

import enum
from dataclasses import field

from groupd.protocol.frozen import frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

NO_PRODUCER_ID = -1  # RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH

TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """Kafka's ``TransactionState``: the id is what the log stores, the name what DescribeTransactions
    and ListTransactions answer."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        """``TransactionState.isExpirationAllowed``: a transactional id idle in one of these may expire."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}


@frozen_record
class TransactionLogKey:
    transactional_id: str

    def __init__(self, transactional_id: str) -> None:
        _set(self, "transactional_id", transactional_id)

    @property
    def version(self) -> int:
        return 0


@frozen_record
class TransactionLogValue:
    """One transactional id's metadata after a transition (Kafka's ``TxnTransitMetadata``).

    ``last_producer_epoch`` is not part of the record format: Kafka keeps it in memory only and a
    value read back from the log has ``NO_PRODUCER_EPOCH`` there (``TransactionLog.read``), so a
    KIP-360 retry that spans a coordinator restart is fenced. It rides along on the live path so
    that ``replay`` is the only mutator; it takes no part in equality (two values equal as written).
    """

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition] = frozenset()
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    last_producer_epoch: int = field(default=NO_PRODUCER_EPOCH, compare=False)

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        transaction_timeout_ms: int,
        state: TransactionState,
        partitions: frozenset[TopicPartition] = frozenset(),
        last_update_timestamp_ms: int = -1,
        start_timestamp_ms: int = -1,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        client_transaction_version: int = 0,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        _set(self, "producer_id", producer_id)
        _set(self, "producer_epoch", producer_epoch)
        _set(self, "transaction_timeout_ms", transaction_timeout_ms)
        _set(self, "state", state)
        _set(self, "partitions", partitions)
        _set(self, "last_update_timestamp_ms", last_update_timestamp_ms)
        _set(self, "start_timestamp_ms", start_timestamp_ms)
        _set(self, "previous_producer_id", previous_producer_id)
        _set(self, "next_producer_id", next_producer_id)
        _set(self, "client_transaction_version", client_transaction_version)
        _set(self, "last_producer_epoch", last_producer_epoch)

    @property
    def version(self) -> int:
        # Kafka 4 writes v1 (tagged previous/next producer ids) once transaction.version 2 is
        # finalized, the default of a new 4.x cluster; v0 below that. groupd always writes v1: it
        # keeps previous_producer_id across a restart (isValidProducerId's rotation retry needs it).
        return 1


RecordKey = TransactionLogKey
RecordValue = TransactionLogValue
Record = tuple[TransactionLogKey, TransactionLogValue | None]
