"""The ``__transaction_state`` record formats (Kafka's ``transaction-coordinator/.../common/message/``).

Data schemas, not APIs: on disk the key and the value are each preceded by an int16 version (the
transaction coordinator's record layer, ``transactions/serde.py``, reads and writes it). A null
value is a tombstone (a transactional id expired and removed).

- ``TRANSACTION_LOG_KEY`` v0: (transactional_id). Kafka's ``TransactionLogKey.json``; the key version
  doubles as the record type (``CoordinatorRecordType.TRANSACTION_LOG`` = 0).
- ``TRANSACTION_LOG_VALUE`` v0-1 (flexible from v1): producer id, producer epoch, transaction timeout,
  status (``TransactionState`` id), the partitions of the transaction (null while Empty), last update
  and start timestamps; v1 adds tagged fields 0 ``previous_producer_id``, 1 ``next_producer_id``
  (both default -1) and 2 ``client_transaction_version`` (default 0). Kafka 4.0/4.1 write v0 under
  transaction version 0/1 and v1 under transaction version 2 (``TransactionVersion.transactionLogValueVersion``).
  Kafka trunk (KIP-939, two-phase commit) adds a tag 3 ``NextProducerEpoch``; it is not declared
  here: an unknown tagged field is skipped on read, as Kafka's generated readers do.
"""

from __future__ import annotations

from ..schema import MessageSchema, f

TRANSACTION_LOG_KEY = MessageSchema(
    "TransactionLogKey",
    valid="0",
    flexible="none",
    fields=(f("transactional_id", "string", "0"),),
)

TRANSACTION_LOG_VALUE = MessageSchema(
    "TransactionLogValue",
    valid="0-1",
    flexible="1+",
    fields=(
        f("producer_id", "int64", "0+"),
        f("previous_producer_id", "int64", "1+", default=-1, tag=0, tagged="1+"),
        f("next_producer_id", "int64", "1+", default=-1, tag=1, tagged="1+"),
        f("producer_epoch", "int16", "0+"),
        f("transaction_timeout_ms", "int32", "0+"),
        f("transaction_status", "int8", "0+"),
        f(
            "transaction_partitions",
            "[]",
            "0+",
            f("topic", "string", "0+"),
            f("partition_ids", "[]int32", "0+"),
            nullable="0+",
        ),
        f("transaction_last_update_timestamp_ms", "int64", "0+"),
        f("transaction_start_timestamp_ms", "int64", "0+"),
        f("client_transaction_version", "int16", "1+", default=0, tag=2, tagged="1+"),
    ),
)

TRANSACTION_RECORD_SCHEMAS: tuple[MessageSchema, ...] = (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)
