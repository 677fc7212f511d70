"""What the group coordinator asks of the share-partition state (Kafka's ``Persister`` as the group
coordinator uses it: ``initializeState``, ``readSummary``, ``deleteState``), and an in-memory one.

The share-partition state (``__share_group_state``: each share partition's start offset, state epoch,
in-flight batches) belongs to the share coordinator and ``SharePartition``. The group coordinator
only needs a few things from it, all keyed by ``(group id, topic id, partition)``:

- ``initialize``: after a member's heartbeat recorded new share partitions as *initializing* (and that
  record is durable), the coordinator initializes them: start offset -1 means "not known yet: the
  share partition takes it from ``share.auto.offset.reset`` at its first fetch"
  (``GroupCoordinatorService.persisterInitialize``). ``AlterShareGroupOffsets`` initializes with the
  start offsets it was given (a new state epoch: any in-flight state is forgotten, as Kafka's
  ``InitializeShareGroupState`` resets the partition). Only after ``initialize`` succeeds does the
  coordinator record the partitions as *initialized* and assign them to members.
- ``read_summary``: ``DescribeShareGroupOffsets`` (``ReadShareGroupStateSummary``): each partition's
  start offset and leader epoch, or an error per partition; a partition without state is absent.
- ``delete``: ``DeleteShareGroupOffsets`` and ``DeleteGroups`` (``DeleteShareGroupState``).

The calls are synchronous (sans-IO): an implementation applies the change to its in-memory state
before returning and makes it durable on its own (Kafka's share coordinator also applies a write's
records at once). A share partition whose state is missing when fetched (a crash between the two
writes) starts from ``share.auto.offset.reset``, which is what an initialize with -1 asks for anyway.

Each method answers ``{(topic id, partition): error code}`` for the partitions it was given
(``errors.NONE``, or e.g. ``COORDINATOR_NOT_AVAILABLE`` / ``KAFKA_STORAGE_ERROR``), except
``read_summary`` which answers ``{(topic id, partition): PartitionSummary}``.

Wiring: the coordinator starts with an ``InMemoryShareState``; the node hands it the real store with
``broker.core.share_requests.state = store`` (``Broker.core`` is the ``GroupCoordinator``). The group's
``share.*`` configs in force (``share.auto.offset.reset``, ``share.isolation.level``,
``share.record.lock.duration.ms``, ``share.session.timeout.ms``, ``share.heartbeat.interval.ms``) are
read with ``broker.configs.share_config(group_id, name)`` (``ShareGroupConfigLookup``: the group's own
value, else the broker's default); ``parse_auto_offset_reset`` below reads the first.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Protocol

from groupd.protocol.frozen import frozen_record

from .. import errors

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

TopicPartition = tuple[uuid.UUID, int]
# InitializeShareGroupState's "uninitialized" start offset: take it from share.auto.offset.reset
UNINITIALIZED_START_OFFSET = -1


@frozen_record
class PartitionSummary:
    """``ReadShareGroupStateSummaryResponse``'s partition: its start offset and leader epoch."""

    start_offset: int
    leader_epoch: int = -1
    state_epoch: int = 0
    # records at or after the start offset already acknowledged (accepted/rejected/archived): Kafka
    # 4.2's DeliveryCompleteCount for the lag (KIP-1226); -1 when unknown (no lag computed)
    delivery_complete_count: int = -1
    error_code: int = errors.NONE
    error_message: str | None = None

    def __init__(
        self,
        start_offset: int,
        leader_epoch: int = -1,
        state_epoch: int = 0,
        delivery_complete_count: int = -1,
        error_code: int = errors.NONE,
        error_message: str | None = None,
    ) -> None:
        _set(self, "start_offset", start_offset)
        _set(self, "leader_epoch", leader_epoch)
        _set(self, "state_epoch", state_epoch)
        _set(self, "delivery_complete_count", delivery_complete_count)
        _set(self, "error_code", error_code)
        _set(self, "error_message", error_message)


class ShareStateStore(Protocol):
    """The share-partition state as the group coordinator uses it (see the module docstring)."""

    def initialize(
        self, group_id: str, state_epoch: int, start_offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]: ...

    def read_summary(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionSummary]: ...

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...


class ShareGroupConfigLookup(Protocol):
    """A group's ``share.*`` configs in force: its own (IncrementalAlterConfigs on the GROUP resource),
    else the broker's defaults. ``broker.share_configs.ShareGroupConfigs`` implements it."""

    def share_config(self, group_id: str, name: str) -> str: ...


class InMemoryShareState:
    """A ``ShareStateStore`` in a dict: for tests and until a share coordinator is wired in."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, uuid.UUID, int], PartitionSummary] = {}
        self.fail_with: int | None = None  # tests: every call answers this error

    def initialize(
        self, group_id: str, state_epoch: int, start_offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        if self.fail_with is not None:
            return {tp: self.fail_with for tp in start_offsets}
        for (tid, p), offset in start_offsets.items():
            self.partitions[(group_id, tid, p)] = PartitionSummary(offset, -1, state_epoch)
        return {tp: errors.NONE for tp in start_offsets}

    def read_summary(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionSummary]:
        out = {}
        for tid, p in partitions:
            if self.fail_with is not None:
                out[(tid, p)] = PartitionSummary(-1, -1, 0, self.fail_with)
            elif (s := self.partitions.get((group_id, tid, p))) is not None:
                out[(tid, p)] = s
        return out

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        out = {}
        for tid, p in partitions:
            if self.fail_with is not None:
                out[(tid, p)] = self.fail_with
                continue
            self.partitions.pop((group_id, tid, p), None)
            out[(tid, p)] = errors.NONE
        return out


# --- share.auto.offset.reset (Kafka 4.2's ShareGroupAutoOffsetResetStrategy) --------------------------
_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_auto_offset_reset(value: str) -> tuple[str, int | None]:
    """``ShareGroupAutoOffsetResetStrategy.fromString``: ("earliest", None), ("latest", None) or
    ("by_duration", milliseconds back from now) for ``by_duration:<ISO-8601 duration>`` (Java's
    ``Duration.parse``, not negative). ValueError with Kafka's reason otherwise ("none" included:
    share groups have no such strategy)."""
    if value in ("earliest", "latest"):
        return value, None
    if value == "by_duration":
        raise ValueError("<:duration> part is missing in by_duration auto offset reset strategy.")
    if value.startswith("by_duration:"):
        m = _ISO_DURATION.fullmatch(value[len("by_duration:") :])
        if m is None or (m.group(2) is None and m.group(3) is None) or m.group(3) in ("T", "t"):
            raise ValueError("Unable to parse duration string in by_duration offset reset strategy.")
        sign = -1 if m.group(1) == "-" else 1
        days, hours, minutes, seconds = (int(g) if g else 0 for g in (m.group(2), m.group(4), m.group(5), m.group(6)))
        fraction = m.group(7) or ""
        nanos = int((fraction + "000000000")[:9]) if fraction else 0
        if m.group(6) and m.group(6).startswith("-"):
            nanos = -nanos
        total_ns = sign * ((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1_000_000_000 + nanos)
        if total_ns < 0:
            raise ValueError("Negative duration is not supported in by_duration offset reset strategy.")
        return "by_duration", total_ns // 1_000_000
    raise ValueError(f"Unsupported strategy for ShareGroup: {value}")
