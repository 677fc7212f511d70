"""DescribeTransactions and ListTransactions: the transaction coordinator's read-only answers
(``TransactionCoordinator.handleDescribeTransactions`` / ``handleListTransactions``), kept apart
from the state machine in ``coordinator.py``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Protocol

from .errors import TxnError as E
from .records import NO_PRODUCER_EPOCH, TopicPartition, TransactionState
from .records import TransactionState as S
from .state import TransactionMetadata


class TransactionCoordinator(Protocol):
    """What these answers read of ``coordinator.TransactionCoordinator``."""

    runtime: Any
    transactions: dict[str, TransactionMetadata]

    @property
    def loading(self) -> set[int]: ...

    def leads(self, transactional_id: str) -> bool: ...

    def _route_error(self, transactional_id: str) -> int: ...


def describe_transactions(self: TransactionCoordinator, version: int, req: dict[str, Any], ctx: Any) -> None:
    """``handleDescribeTransactions``: per id its state, NOT_COORDINATOR where this broker does not lead it."""
    states = []
    for txn_id in req.get("transactional_ids") or []:
        entry: dict[str, Any] = {
            "error_code": E.NONE,
            "transactional_id": txn_id,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        meta = self.transactions.get(txn_id)
        if not txn_id:
            entry["error_code"] = E.INVALID_REQUEST
        elif code := self._route_error(txn_id):
            entry["error_code"] = code
        elif meta is None or meta.producer_epoch == NO_PRODUCER_EPOCH or meta.state == S.DEAD:
            entry["error_code"] = E.TRANSACTIONAL_ID_NOT_FOUND
        else:
            entry.update(
                transaction_state=meta.state.kafka_name,
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.start_timestamp_ms,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[
                    {"topic": topic, "partitions": parts} for topic, parts in _group_by_topic(meta.partitions).items()
                ],
            )
        states.append(entry)
    self.runtime.respond(ctx, {"throttle_time_ms": 0, "transaction_states": states})


def list_transactions(self: TransactionCoordinator, version: int, req: dict[str, Any], ctx: Any) -> None:
    """``listTransactionStates``: filters by state name, producer id, (v1) running longer than a
    duration, (v2) a transactional id pattern; unknown state names are echoed back."""
    unknown = []
    wanted_states: set[TransactionState] = set()
    for name in req.get("state_filters") or []:
        state = TransactionState.from_kafka_name(name)
        if state is None:
            unknown.append(name)
        else:
            wanted_states.add(state)
    wanted_pids = set(req.get("producer_id_filters") or [])
    duration = req.get("duration_filter", -1) if version >= 1 else -1
    pattern = req.get("transactional_id_pattern") if version >= 2 else None
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        self.runtime.respond(
            ctx,
            {
                "throttle_time_ms": 0,
                "error_code": E.INVALID_REQUEST,
                "unknown_state_filters": [],
                "transaction_states": [],
            },
        )
        return
    if self.loading:
        code, listed = int(E.COORDINATOR_LOAD_IN_PROGRESS), []
    else:
        code, listed = int(E.NONE), []
        for txn_id, meta in sorted(self.transactions.items()):
            if (
                meta.producer_epoch == NO_PRODUCER_EPOCH
                or meta.state == S.DEAD
                # each broker of a cluster lists the ids it coordinates (listTransactionStates)
                or not self.leads(txn_id)
                or (wanted_pids and meta.producer_id not in wanted_pids)
                or (wanted_states and meta.state not in wanted_states)
                or (duration >= 0 and self.runtime.now - meta.start_timestamp_ms <= duration)
                or (matcher is not None and matcher.fullmatch(txn_id) is None)
            ):
                continue
            listed.append(
                {
                    "transactional_id": txn_id,
                    "producer_id": meta.producer_id,
                    "transaction_state": meta.state.kafka_name,
                }
            )
    self.runtime.respond(
        ctx,
        {"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": unknown, "transaction_states": listed},
    )


def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        out.setdefault(topic, []).append(partition)
    return out
