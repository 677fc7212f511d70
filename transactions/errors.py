"""The error codes the transaction coordinator answers (Kafka's ``Errors``).

``protocol/errors.py`` does not list PRODUCER_FENCED (90) or TRANSACTION_ABORTABLE (120) yet; they
are named here so this folder does not depend on that table growing. ``tests/transactions`` checks
every code that the table does list has the same number here.
"""

from __future__ import annotations

import enum


class TxnError(enum.IntEnum):
    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    NOT_LEADER_OR_FOLLOWER = 6
    PRODUCER_FENCED = 90
    TRANSACTIONAL_ID_NOT_FOUND = 105
    TRANSACTION_ABORTABLE = 120


def append_error(code: int) -> int:
    """What a client is told when the ``__transaction_state`` append failed with ``code``
    (``TransactionStateManager.appendTransactionToLog``'s mapping)."""
    if code in (
        TxnError.UNKNOWN_TOPIC_OR_PARTITION,
        TxnError.NOT_ENOUGH_REPLICAS,
        TxnError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        TxnError.REQUEST_TIMED_OUT,
    ):
        return TxnError.COORDINATOR_NOT_AVAILABLE
    if code in (TxnError.NOT_LEADER_OR_FOLLOWER, TxnError.KAFKA_STORAGE_ERROR):
        return TxnError.NOT_COORDINATOR
    if code in (TxnError.MESSAGE_TOO_LARGE, TxnError.RECORD_LIST_TOO_LARGE):
        return TxnError.UNKNOWN_SERVER_ERROR
    return code
