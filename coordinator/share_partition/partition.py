"""One share-partition's in-flight records: Kafka's ``SharePartition`` (core ``kafka.server.share``).

Theory of operation. A share group reads a partition through a window of offsets
``[start_offset, end_offset)``: below the window every record is done with (acknowledged or
archived), above it nothing was handed out yet. Inside it each offset has a state, a delivery count
and, while acquired, the member holding it and the lock it is held under:

    AVAILABLE --acquire (count + 1)--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
        ^                                 |  |----REJECT / GAP--> ARCHIVED
        |--RELEASE, lock expiry, member --|  '----RELEASE etc. at count >= limit --> ARCHIVED
           leaves (count < limit)

(``RecordState.validateTransition``: ACKNOWLEDGED and ARCHIVED are terminal.) RENEW (KIP-1222)
keeps a record ACQUIRED under a fresh lock. After every change the start offset moves past the
terminal records at the front of the window (``maybeUpdateCachedStateAndOffsets``), so the window
only holds what may still be delivered.

Acquiring (``SharePartition.acquire``): the shell reads the log from ``next_fetch_offset()`` (the
first AVAILABLE offset of the window, else its end) and hands the batches it read as
``BatchInfo``. Offsets inside the window that are AVAILABLE are acquired one by one; offsets past
the window are acquired a whole batch at a time (the soft ``max_records`` limit may be exceeded to
finish a batch, as Kafka's batch-optimized mode does) while the window holds fewer than
``max_in_flight`` offsets (``group.share.partition.max.record.locks``). Offsets of control batches
and of aborted transactions (read_committed) are archived as they are reached and never handed
out: Kafka archives aborted ones (``filterAbortedTransactionalAcquiredRecords``) and leaves control
records to the client's GAP acknowledgements; groupd archives both at once, which ends in the same
state without a round trip. A record delivered at least ``throttle`` times
(``throttleRecordsDeliveryLimit``: half the delivery limit, at least 2) is handed out alone, so a
poison record does not drag a batch of good ones towards the limit with it.

Locks (``AcquisitionLockTimerTask``): every acquire call takes one lock, a deadline in a heap with
lazy deletion; records acquired by it carry its sequence number. When it expires, records still
ACQUIRED under it go back to AVAILABLE (or ARCHIVED at the delivery limit). RENEW gives records a
new lock; an older lock's entry then finds no record of its own and is dropped.

Persistence. Changes to AVAILABLE / ACKNOWLEDGED / ARCHIVED are returned as ``StateBatch`` runs for
the shell to write (``state_store.py``); acquisitions are not written (as in Kafka: a restart hands
out again whatever was acquired but not acknowledged, with the delivery count last written).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from groupd.protocol.errors import ErrorCode
from groupd.protocol.frozen import frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

# RecordState ids (Kafka's RecordState)
AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4
TERMINAL = frozenset({ACKNOWLEDGED, ARCHIVED})

# AcknowledgeType ids (0 is a gap: no record at that offset)
GAP = 0
ACCEPT = 1
RELEASE = 2
REJECT = 3
RENEW = 4

# SharePartition.MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT
_MIN_THROTTLE_LIMIT = 2


@frozen_record
class SharePartitionConfig:
    """The limits of one share-partition (broker settings, or the group's ``share.*`` configs)."""

    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_in_flight: int = 2000  # group.share.partition.max.record.locks

    def __init__(self, delivery_count_limit: int = 5, max_in_flight: int = 2000) -> None:
        _set(self, "delivery_count_limit", delivery_count_limit)
        _set(self, "max_in_flight", max_in_flight)

    @property
    def throttle_limit(self) -> int:
        return max(_MIN_THROTTLE_LIMIT, math.ceil(self.delivery_count_limit / 2))


class BatchInfo(NamedTuple):
    """A record batch the shell read from the log: its offsets, and whether its records are never
    delivered (a control batch, or an aborted transaction's batch under read_committed)."""

    base_offset: int
    last_offset: int
    skip: bool = False


class AckBatch(NamedTuple):
    """An acknowledgement batch of a request: one type for the range, or one type per offset."""

    first_offset: int
    last_offset: int
    types: Sequence[int]


class StateBatch(NamedTuple):
    """A run of offsets in one persisted state (ShareUpdateValue's StateBatch)."""

    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


class AcquiredRange(NamedTuple):
    """ShareFetchResponse's AcquiredRecords."""

    first_offset: int
    last_offset: int
    delivery_count: int


class _InFlight:
    __slots__ = ("count", "lock", "member", "state")

    def __init__(self, state: int, count: int, member: str = "", lock: int = 0) -> None:
        self.state = state
        self.count = count
        self.member = member
        self.lock = lock


class AckError(Exception):
    """An acknowledgement refused as a whole (nothing of the partition's batches applied)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SharePartition:
    """The in-flight records of one (group, topic, partition); see the module docstring."""

    def __init__(
        self,
        config: SharePartitionConfig,
        start_offset: int,
        persisted: Iterable[StateBatch] = (),
    ) -> None:
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._recs: dict[int, _InFlight] = {}
        # lock seq -> (first, last) offsets it may cover; deadlines in a heap (lazy deletion)
        self._locks: dict[int, tuple[int, int]] = {}
        self._heap: list[tuple[int, int]] = []
        self._seq = 0
        self._available = 0  # AVAILABLE offsets inside the window (skips the scan when 0)
        # Counters for metrics: records handed out, of them redeliveries, locks expired (records),
        # archived records.
        self.deliveries = 0
        self.redeliveries = 0
        self.lock_expiries = 0
        self.archived = 0
        self._restore(persisted)

    # --- persisted state ----------------------------------------------------------------------------
    def _restore(self, persisted: Iterable[StateBatch]) -> None:
        """The window as written (``SharePartition.maybeInitialize``): offsets between the start
        and the last written batch that no batch names were acquired and not written: AVAILABLE."""
        end = self.start_offset
        for b in sorted(persisted):
            lo = max(b.first_offset, self.start_offset)
            for off in range(lo, b.last_offset + 1):
                state = b.state if b.state in (AVAILABLE, ACKNOWLEDGED, ARCHIVED) else AVAILABLE
                self._recs[off] = _InFlight(state, b.delivery_count)
            end = max(end, b.last_offset + 1)
        for off in range(self.start_offset, end):
            if off not in self._recs:
                self._recs[off] = _InFlight(AVAILABLE, 0)
        self.end_offset = end
        self._available = sum(1 for r in self._recs.values() if r.state == AVAILABLE)
        self._advance()

    # --- reading ------------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts (``SharePartition.nextFetchOffset``)."""
        if self._available:
            recs = self._recs
            for off in range(self.start_offset, self.end_offset):
                if recs[off].state == AVAILABLE:
                    return off
        return self.end_offset

    def can_acquire(self, log_end: int) -> bool:
        """Whether a read could hand anything out now: something AVAILABLE in the window, or new
        records below ``log_end`` and room in the window."""
        if self._available:
            return True
        return log_end > self.end_offset and self.end_offset - self.start_offset < self.config.max_in_flight

    def in_flight(self) -> int:
        return len(self._recs)

    def acquired_count(self) -> int:
        return sum(1 for r in self._recs.values() if r.state == ACQUIRED)

    def delivery_complete(self) -> int:
        """Offsets of the window done with (KIP-1226's DeliveryCompleteCount, for the lag)."""
        return sum(1 for r in self._recs.values() if r.state in TERMINAL)

    def record(self, offset: int) -> tuple[int, int, str] | None:
        """(state, delivery count, member) of an offset in the window, for tests and describe."""
        r = self._recs.get(offset)
        return None if r is None else (r.state, r.count, r.member)

    # --- acquire ------------------------------------------------------------------------------------
    def acquire(
        self,
        member: str,
        now_ms: int,
        lock_ms: int,
        batches: Sequence[BatchInfo],
        max_records: int,
        read_offset: int | None = None,
    ) -> list[AcquiredRange]:
        """Acquire for ``member`` what ``batches`` (read from ``read_offset``, by default
        ``next_fetch_offset()``) hold that may be delivered; the acquired ranges."""
        if max_records <= 0 or not batches:
            return []
        if read_offset is None:
            read_offset = self.next_fetch_offset()
        self._seq += 1
        seq = self._seq
        throttle = self.config.throttle_limit
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        n = 0
        recs = self._recs
        stop = False
        for b in batches:
            if stop:
                break
            if b.last_offset < read_offset or b.last_offset < self.start_offset:
                continue
            lo = max(b.base_offset, read_offset, self.start_offset)
            # already in the window: one offset at a time
            for off in range(lo, min(b.last_offset + 1, self.end_offset)):
                r = recs[off]
                if r.state != AVAILABLE:
                    continue
                if b.skip:
                    self._set(r, ARCHIVED)
                    continue
                alone = r.count >= throttle  # a record that keeps coming back goes alone
                if n >= max_records or (alone and n > 0):
                    stop = True
                    break
                self._set(r, ACQUIRED)
                r.count += 1
                r.member = member
                r.lock = seq
                if r.count > 1:
                    self.redeliveries += 1
                acquired.append((off, r.count))
                n += 1
                if alone:
                    stop = True
                    break
            if stop:
                break
            first_new = max(lo, self.end_offset)
            if first_new > b.last_offset:
                continue
            if n >= max_records or self.end_offset - self.start_offset >= self.config.max_in_flight:
                break
            # offsets skipped between the window and this batch hold no record (compaction,
            # ``maybeArchiveStaleBatches``): archived
            for off in range(self.end_offset, first_new):
                recs[off] = _InFlight(ARCHIVED, 0)
                self.archived += 1
            for off in range(first_new, b.last_offset + 1):
                if b.skip:
                    recs[off] = _InFlight(ARCHIVED, 0)
                    self.archived += 1
                else:
                    recs[off] = _InFlight(ACQUIRED, 1, member, seq)
                    acquired.append((off, 1))
                    n += 1
            self.end_offset = b.last_offset + 1
        self._advance()
        if not acquired:
            return []
        self.deliveries += len(acquired)
        self._locks[seq] = (acquired[0][0], acquired[-1][0])
        heapq.heappush(self._heap, (now_ms + lock_ms, seq))
        return _ranges(acquired)

    # --- acknowledge --------------------------------------------------------------------------------
    def acknowledge(
        self, member: str, batches: Sequence[AckBatch], now_ms: int = 0, lock_ms: int = 0
    ) -> list[StateBatch]:
        """Apply ``member``'s acknowledgements, all or none (``SharePartition.acknowledge`` rolls
        back on the first refusal); the changed offsets to persist. Raises ``AckError``."""
        plan: list[tuple[int, int]] = []  # (offset, ack type)
        recs = self._recs
        for b in batches:
            if b.last_offset < self.start_offset:
                continue  # already archived (the start moved past them)
            if not recs or b.first_offset >= self.end_offset:
                if not recs:
                    raise AckError(ErrorCode.INVALID_RECORD_STATE, "Batch record not found.")
                raise AckError(ErrorCode.INVALID_REQUEST, "The first offset in request is past acquired records.")
            if b.last_offset >= self.end_offset:
                raise AckError(ErrorCode.INVALID_REQUEST, "The last offset in request is past acquired records.")
            single = len(b.types) == 1
            for off in range(max(b.first_offset, self.start_offset), b.last_offset + 1):
                t = b.types[0] if single else b.types[off - b.first_offset]
                r = recs[off]
                if r.state != ACQUIRED:
                    if t == GAP and r.state == ARCHIVED:
                        continue  # a gap groupd archived itself (a control record)
                    raise AckError(ErrorCode.INVALID_RECORD_STATE, "The record is not in the acquired state.")
                if r.member != member:
                    raise AckError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of the record.")
                plan.append((off, t))
        changed: list[int] = []
        renewed: list[int] = []
        limit = self.config.delivery_count_limit
        available = archived = 0
        for off, t in plan:  # every offset of the plan is ACQUIRED: the hot path, inlined
            r = recs[off]
            if t == RENEW:
                renewed.append(off)
                continue
            if t == ACCEPT:
                new = ACKNOWLEDGED
            elif t == RELEASE and r.count < limit:
                new = AVAILABLE
                available += 1
            else:  # REJECT, GAP, RELEASE at the limit
                new = ARCHIVED
                archived += 1
            r.state = new
            r.member = ""
            r.lock = 0
            changed.append(off)
        self._available += available
        self.archived += archived
        if renewed:
            self._seq += 1
            for off in renewed:
                recs[off].lock = self._seq
            self._locks[self._seq] = (renewed[0], renewed[-1])
            heapq.heappush(self._heap, (now_ms + lock_ms, self._seq))
        out = self._state_batches(changed)
        self._advance()
        return out

    def release_member(self, member: str) -> list[StateBatch]:
        """Everything ``member`` holds goes back (``releaseAcquiredRecords``: its share session
        closed or it left the group); the delivery count is kept, the limit applies."""
        limit = self.config.delivery_count_limit
        changed = []
        for off, r in self._recs.items():
            if r.state == ACQUIRED and r.member == member:
                self._release_to(r, ARCHIVED if r.count >= limit else AVAILABLE)
                changed.append(off)
        out = self._state_batches(changed)
        self._advance()
        return out

    # --- locks --------------------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and heap[0][1] not in self._locks:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def expire_locks(self, now_ms: int) -> list[StateBatch]:
        """Release the records of every lock due at ``now_ms`` (``releaseAcquisitionLockOnTimeout``)."""
        limit = self.config.delivery_count_limit
        changed: list[int] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _deadline, seq = heapq.heappop(heap)
            span = self._locks.pop(seq, None)
            if span is None:
                continue
            for off in range(max(span[0], self.start_offset), span[1] + 1):
                r = self._recs.get(off)
                if r is not None and r.state == ACQUIRED and r.lock == seq:
                    self._release_to(r, ARCHIVED if r.count >= limit else AVAILABLE)
                    self.lock_expiries += 1
                    changed.append(off)
        out = self._state_batches(changed)
        self._advance()
        return out

    def move_start(self, offset: int) -> list[StateBatch]:
        """The log's start moved past the window's (retention, DeleteRecords): what lies below it
        is archived (``archiveAvailableRecordsOnLsoMovement``)."""
        if offset <= self.start_offset:
            return []
        for off in range(self.start_offset, min(offset, self.end_offset)):
            r = self._recs.pop(off)
            if r.state == AVAILABLE:
                self._available -= 1
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance()
        return []

    # --- internals ----------------------------------------------------------------------------------
    def _set(self, r: _InFlight, state: int) -> None:
        if r.state == AVAILABLE:
            self._available -= 1
        if state == AVAILABLE:
            self._available += 1
        elif state == ARCHIVED:
            self.archived += 1
        r.state = state

    def _release_to(self, r: _InFlight, state: int) -> None:
        self._set(r, state)
        r.member = ""
        r.lock = 0

    def _advance(self) -> None:
        """Move the start past the terminal records at the front (``maybeUpdateCachedStateAndOffsets``)."""
        recs = self._recs
        start = self.start_offset
        while start < self.end_offset and recs[start].state in TERMINAL:
            del recs[start]
            start += 1
        self.start_offset = start

    def _state_batches(self, offsets: list[int]) -> list[StateBatch]:
        """Runs of contiguous offsets with one state and count, as ShareUpdate writes them."""
        runs: list[list[int]] = []  # [first, last, state, count], a NamedTuple each at the end
        recs = self._recs
        run: list[int] | None = None
        for off in sorted(offsets):
            r = recs[off]
            if run is not None and run[1] == off - 1 and run[2] == r.state and run[3] == r.count:
                run[1] = off
            else:
                run = [off, off, r.state, r.count]
                runs.append(run)
        return [StateBatch(*x) for x in runs]

    def snapshot(self) -> list[StateBatch]:
        """The window as state batches, acquired offsets as AVAILABLE with their count (what a
        restart would make of them)."""
        return [
            b._replace(state=AVAILABLE) if b.state == ACQUIRED else b for b in self._state_batches(list(self._recs))
        ]


def _ranges(acquired: list[tuple[int, int]]) -> list[AcquiredRange]:
    runs: list[list[int]] = []  # [first, last, count]
    run: list[int] | None = None
    for off, count in acquired:
        if run is not None and run[1] == off - 1 and run[2] == count:
            run[1] = off
        else:
            run = [off, off, count]
            runs.append(run)
    return [AcquiredRange(*x) for x in runs]
