"""What a coordinator call hands back to the shell."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record

from .records import Record


@mutable_record
class Append:
    """Records the shell must append, in order, to ``__consumer_offsets`` partition ``partition``.

    When the write is durable (or has failed) the shell calls
    ``coordinator.append_done(now_ms, token, error)``. Appends to one partition must reach the log
    in the order they were handed out: a later record may overwrite or tombstone an earlier one.
    """

    token: int
    partition: int
    records: list[Record]
    # A transactional batch of this producer (TxnOffsetCommit) when producer_id >= 0.
    producer_id: int = -1
    producer_epoch: int = -1
    # An end-transaction marker instead of records: (committed, coordinator epoch) of
    # ``producer_id``'s transaction (``storage.markers.end_txn_marker_batch``).
    marker: tuple[bool, int] | None = None
    # An OffsetCommit built in C (``native``): its record batch, appended as it is (``records``
    # then holds the ((topic, partition), value) pairs its replay folds in).
    batch: bytes | None = None

    def __init__(
        self,
        token: int,
        partition: int,
        records: list[Record],
        producer_id: int = -1,
        producer_epoch: int = -1,
        marker: tuple[bool, int] | None = None,
        batch: bytes | None = None,
    ) -> None:
        self.token = token
        self.partition = partition
        self.records = records
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.marker = marker
        self.batch = batch


@mutable_record
class Result:
    """Responses to send now, as ``(ctx, response)`` pairs, and appends to perform."""

    responses: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)

    def __init__(
        self,
        responses: list[tuple[Any, dict[str, Any]]] = DEFAULT_FACTORY,
        appends: list[Append] = DEFAULT_FACTORY,
    ) -> None:
        self.responses = [] if responses is DEFAULT_FACTORY else responses
        self.appends = [] if appends is DEFAULT_FACTORY else appends

    def extend(self, other: Result) -> None:
        self.responses.extend(other.responses)
        self.appends.extend(other.appends)


def make_append(
    token: int,
    partition: int,
    records: list[Record],
    *,
    applied: bool = False,
    producer: tuple[int, int] | None = None,
    marker: tuple[bool, int] | None = None,
    share: bool = False,
    batch: bytes | None = None,
    native_group: str | None = None,
) -> Append:
    """The Append of a write (the runtime's ``append_factory``): a transactional batch or an end
    marker carries its producer. ``applied`` (a consumer group's records, applied when produced as
    Kafka's runtime does, the others being replayed when durable) is the coordinator's business."""
    if batch is not None:
        return Append(token, partition, records, batch=batch)
    if producer is None:
        return Append(token, partition, records)
    return Append(token, partition, records, producer[0], producer[1], marker)
