"""A transactional id's metadata, its states, and the only legal ways between them.

Theory of operation
===================

A *transactional id* names one logical producer across restarts. The coordinator gives it a
producer id and an *epoch*; every InitProducerId for the id bumps the epoch, and anything sent
with an older epoch is refused (PRODUCER_FENCED): that is how a producer that died, or that a
network partition left behind, is kept from finishing a transaction its successor now owns.

The story of one transaction (Kafka's transaction version 1, what clients speaking EndTxn v0-4 use):

1. ``InitProducerId(transactional_id)`` finds the id unknown or at rest (**Empty**, **CompleteCommit**,
   **CompleteAbort**), bumps the epoch (a new id gets a producer id from the allocator and epoch 0)
   and writes one record: the id is **Empty**. The answer is the producer id and the new epoch.
2. ``AddPartitionsToTxn`` / ``AddOffsetsToTxn`` (the group's ``__consumer_offsets`` partition) add
   partitions; the first one starts the transaction: **Ongoing**, its start time recorded. From here
   the transaction timeout runs.
3. ``EndTxn(commit)`` writes **PrepareCommit** (``EndTxn(abort)``: **PrepareAbort**) with the full
   partition set; once that record is durable the outcome is decided: the client is answered, and
   COMMIT (ABORT) markers are written to every partition of the transaction by the shell.
4. When every marker is written, **CompleteCommit** (**CompleteAbort**) is written and the partition
   set is emptied. The next AddPartitionsToTxn starts the next transaction.

Fencing: an InitProducerId that finds the id **Ongoing** (its previous owner died mid-transaction)
cannot hand out an epoch yet. Kafka marks the id **PrepareEpochFence** -- a pending state only, never
written -- bumps the epoch, writes **PrepareAbort** with the bumped epoch (the old producer is fenced
from then on), answers CONCURRENT_TRANSACTIONS and has the markers written; the client retries and
gets the epoch after that. A transaction older than its timeout is aborted the same way
(``abortTimedOutTransactions``). Epochs never go down; when an id's epoch would reach
``Short.MAX_VALUE - 1`` the next InitProducerId rotates to a fresh producer id at epoch 0.

A transactional id idle past ``transactional.id.expiration.ms`` in Empty/Complete* goes **Dead**: a
pending state only, the record written is a tombstone, and the id is forgotten.

Valid predecessors (Kafka's ``TransactionState.validPreviousStates``), enforced by
:meth:`TransactionMetadata.transition_to` on every record replayed:

    =================  ====================================================
    state              may be entered from
    =================  ====================================================
    Empty              Empty, CompleteCommit, CompleteAbort
    Ongoing            Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit      Ongoing
    PrepareAbort       Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort
    CompleteCommit     PrepareCommit
    CompleteAbort      PrepareAbort
    Dead               Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence  Ongoing
    =================  ====================================================

(PrepareAbort from Empty/Complete* is transaction version 2's "abort when unsure".)

Transaction version 2 (KIP-890 part 2, EndTxn v5+) changes steps 2-4: partitions are added by the
partition leaders on the client's behalf (Produce v12+, TxnOffsetCommit v5+); **PrepareCommit** /
**PrepareAbort** bump the epoch (the old one is fenced from then on, the markers carry the new
one); when that bump reaches ``Short.MAX_VALUE`` the record also names a next producer id, and
**Complete*** moves to it at epoch 0. EndTxn answers the producer id and epoch to go on with. An
EndTxn abort from Empty/Complete* writes an empty PrepareAbort ("abort when unsure"). Each record
keeps the client's transaction version (``client_transaction_version``), which decides how the
next record is checked.

Only ``replay`` changes the persisted fields, through ``transition_to``; ``pending_state`` (a
transition whose record is being written) is in-memory only, as in Kafka.
"""

from __future__ import annotations

from dataclasses import field

from groupd.protocol.frozen import mutable_record

from .records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionLogValue,
    TransactionState,
)

S = TransactionState

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

SHORT_MAX = 2**15 - 1


def is_epoch_exhausted(epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``: the last epoch is kept so a fence can always bump."""
    return epoch >= SHORT_MAX - 1


class IllegalTransactionTransition(RuntimeError):
    """A record that would move a transactional id along a transition Kafka does not allow."""


@mutable_record
class TransactionMetadata:
    """One transactional id (Kafka's ``TransactionMetadata``), mutated only by :meth:`transition_to`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 0
    state: TransactionState = S.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    client_transaction_version: int = 0
    # in-memory only: the state whose record is being written (Kafka's pendingState)
    pending_state: TransactionState | None = field(default=None, compare=False)

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        timeout_ms: int = 0,
        state: TransactionState = S.EMPTY,
        partitions: frozenset[TopicPartition] = frozenset(),
        start_timestamp_ms: int = -1,
        last_update_timestamp_ms: int = -1,
        client_transaction_version: int = 0,
        pending_state: TransactionState | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions = partitions
        self.start_timestamp_ms = start_timestamp_ms
        self.last_update_timestamp_ms = last_update_timestamp_ms
        self.client_transaction_version = client_transaction_version
        self.pending_state = pending_state

    @classmethod
    def from_record(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """An id first seen in the log (a start-up load, or the first record of a new id)."""
        meta = cls(transactional_id, value.producer_id)
        meta._apply(value)
        return meta

    def to_record(self) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            state=self.state,
            partitions=self.partitions,
            last_update_timestamp_ms=self.last_update_timestamp_ms,
            start_timestamp_ms=self.start_timestamp_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
            last_producer_epoch=self.last_producer_epoch,
        )

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def transition_to(self, value: TransactionLogValue) -> None:
        """Apply a durable record: Kafka's ``completeTransitionTo`` checks, then the new fields.

        Checked: the state table; a new epoch only as a bump (or 0 with a new producer id) into
        Empty; partitions only added while Ongoing; Prepare* with the same partitions and timeout
        (and the epoch either kept or, for an epoch fence, bumped by one); Complete* with the same
        producer id and epoch. Anything else is a bug (or a corrupt log) and raises.
        """
        new = value.state
        if self.state not in VALID_PREVIOUS_STATES[new]:
            raise IllegalTransactionTransition(
                f"{self.transactional_id}: {self.state.kafka_name} -> {new.kafka_name} is not a valid transition"
            )
        same_producer = value.producer_id == self.producer_id
        if new == S.EMPTY:
            bumped = value.producer_epoch == self.producer_epoch + 1 or (
                value.producer_epoch == 0 and not same_producer
            )
            ok = (value.producer_epoch == self.producer_epoch and same_producer) or bumped
            ok = ok and not value.partitions and value.start_timestamp_ms == -1
        elif new == S.ONGOING:
            ok = (
                same_producer
                and value.producer_epoch == self.producer_epoch
                and value.partitions >= self.partitions
                and value.transaction_timeout_ms == self.timeout_ms
            )
        elif new in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            bumped = value.producer_epoch == min(self.producer_epoch + 1, SHORT_MAX)
            if value.client_transaction_version >= 2:
                # TV2 bumps the epoch with every Prepare* (validProducerEpoch: its last epoch is the
                # current one); an abort from Empty/Complete* starts its transaction now
                epoch_ok = bumped
                start_ok = value.start_timestamp_ms == self.start_timestamp_ms or (
                    new == S.PREPARE_ABORT and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                )
            else:
                # TV1 keeps the epoch, but an epoch fence's PrepareAbort carries the bumped one
                epoch_ok = value.producer_epoch == self.producer_epoch or (new == S.PREPARE_ABORT and bumped)
                start_ok = value.start_timestamp_ms == self.start_timestamp_ms
            ok = (
                same_producer
                and epoch_ok
                and value.partitions == self.partitions
                and value.transaction_timeout_ms == self.timeout_ms
                and start_ok
            )
        elif new in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            if value.client_transaction_version >= 2 and value.producer_epoch == 0:
                # TV2's epoch overflow: Complete* moves to the next producer id at epoch 0
                producer_ok = value.previous_producer_id == self.producer_id
            else:
                producer_ok = same_producer and value.producer_epoch == self.producer_epoch
            ok = producer_ok and value.transaction_timeout_ms == self.timeout_ms and value.start_timestamp_ms != -1
        else:  # Dead and PrepareEpochFence are never written (a tombstone removes a Dead id)
            ok = False
        if not ok:
            raise IllegalTransactionTransition(f"{self.transactional_id}: unexpected metadata {value!r} after {self!r}")
        self._apply(value)

    def _apply(self, value: TransactionLogValue) -> None:
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.last_producer_epoch = value.last_producer_epoch
        self.previous_producer_id = value.previous_producer_id
        self.next_producer_id = value.next_producer_id
        self.timeout_ms = value.transaction_timeout_ms
        self.state = value.state
        self.partitions = value.partitions
        self.start_timestamp_ms = value.start_timestamp_ms
        self.last_update_timestamp_ms = value.last_update_timestamp_ms
        self.client_transaction_version = value.client_transaction_version
        self.pending_state = None
