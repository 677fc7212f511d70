"""The sans-IO group coordinator: requests and the clock in, responses and records out.

The shell feeds it three things -- requests (``handle``), the passage of time (``tick``) and the
outcome of log writes (``append_done``) -- and after each call re-arms one wake-up at
``next_deadline()`` (which may be at or before now: then it ticks again straight away). It never
reads a clock, sleeps or touches a socket; ``ctx`` is whatever the shell needs to route an answer.

Persisted state (each group's last durable group-metadata record, every committed offset, the
pending offsets of open transactions and the producer epochs each partition has seen) is a fold
over records and end-transaction markers: :meth:`GroupCoordinator.replay` (with its transactional
twins ``replay_transactional`` and ``replay_end_txn_marker``) is its only mutator, applied after a
write is durable and, in the same way, when a partition is loaded at start-up. Everything else (who is
parked in JoinGroup, session deadlines, the state of a rebalance in flight) is soft state that a
restart loses, exactly as in Kafka, where a loaded group with members comes back Stable.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import structlog

from ..protocol.errors import default_message
from . import errors as err
from . import listener as events
from .config import CoordinatorConfig
from .consumer import ConsumerGroup, ConsumerGroupConfig, ConsumerGroupManager, IllegalRecord, TopicsImage
from .consumer.manager import ClassicMemberSpec, Downgrade, UpgradeRefused
from .consumer.records import CONSUMER_KEY_TYPES
from .consumer_protocol import ConsumerProtocolError, decode_subscription
from .group import CR, PR, ClassicGroup, D, E, Member, S, Waiter
from .listener import CoordinatorListener
from .offsets import OffsetManager, Offsets
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordKey,
    RecordValue,
)
from .result import Append, Result
from .routing import Node, PartitionOwnership, partition_for
from .runtime import CoordinatorRuntime
from .timers import Deadlines

# Kafka's group authorized operations (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) as
# the bit field DescribeGroups reports when asked; groupd has no ACLs, so everything is allowed.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# What Java's String.trim() strips from both ends.
_JAVA_TRIMMED = "".join(map(chr, range(0x21)))

HANDLED_APIS = (
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
    "OffsetCommit",
    "OffsetFetch",
    "OffsetDelete",
    "TxnOffsetCommit",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
)

_log = structlog.get_logger("groupd.coordinator")


def _make_append(
    token: int,
    partition: int,
    records: list[Record],
    *,
    applied: bool = False,
    producer: tuple[int, int] | None = None,
    marker: tuple[bool, int] | None = None,
) -> Append:
    """The Append of a write: a transactional batch or an end marker carries its producer.
    ``applied``: a consumer group's (KIP-848) records, applied when produced as Kafka's runtime
    does (see _consumer_heartbeat); the others are replayed when durable."""
    if producer is None:
        return Append(token, partition, records)
    return Append(token, partition, records, producer[0], producer[1], marker)


def _hb_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("hb", group_id, member_id)


class GroupCoordinator:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        ownership: PartitionOwnership | None = None,
        uuid_factory: Callable[[], str] | None = None,
        topic_partitions: Callable[[str], int | None] | None = None,
        logger: Any = None,
        listener: CoordinatorListener | None = None,
        consumer_config: ConsumerGroupConfig | None = None,
        topics_image: Callable[[], TopicsImage] | None = None,
    ) -> None:
        self.config = config or CoordinatorConfig()
        # Partition states and epochs, ownership, the call's Result and the writes in flight.
        self.runtime: CoordinatorRuntime[Result] = CoordinatorRuntime(
            ownership or PartitionOwnership(Node(0, "localhost", 9092), self.config.num_offsets_partitions),
            result_factory=Result,
            append_factory=_make_append,
            not_coordinator=err.NOT_COORDINATOR,
            load_in_progress=err.COORDINATOR_LOAD_IN_PROGRESS,
            on_unload=self._unload,
        )
        self._uuid = uuid_factory or (lambda: str(uuid.uuid4()))
        # None means "every topic exists": tests of group logic need no topic catalogue.
        self._topic_partitions = topic_partitions
        self.log = logger or _log
        # Told about rebalances and expiries (metrics); the shell may replace it after construction.
        self.listener = listener or CoordinatorListener()
        # KIP-890 verification of TxnOffsetCommit by the transaction coordinator (see
        # OffsetManager._txn_verify_error); wired by the node, None in tests of group logic.
        self.txn_verifier: Callable[[str, int, int, str, int], int] | None = None
        # Who coordinates a transactional id (FindCoordinator key type 1): the leader of its
        # __transaction_state partition. None: this node (a single broker leads them all).
        self.txn_coordinator: Callable[[str], Node | None] | None = None

        self.groups: dict[str, ClassicGroup] = {}
        # Persisted state, changed only by replay().
        self.group_records: dict[str, GroupMetadataValue] = {}
        # Committed offsets (persisted too) belong to their manager, which asks groups questions
        # back through this object (OffsetManager's GroupHost).
        self.offset_manager = OffsetManager(self)
        self._replay_offset = self.offset_manager.replay

        # KIP-848 consumer groups live beside the classic ones; a group id is one or the other.
        # a downgrade must fit in a classic group (group.max.size)
        consumer_config = replace(consumer_config or ConsumerGroupConfig(), classic_max_size=self.config.group_max_size)
        self.consumer = ConsumerGroupManager(consumer_config, uuid_factory=uuid_factory)
        self.consumer.before_write = self._snapshot_consumer_group
        self._topics_image = topics_image
        # One write per consumer group in flight (see _consumer_write): what waits behind it, and
        # the group as it was before the write that is about to be made.
        self._consumer_busy: dict[str, deque[Callable[[], None]]] = {}
        self._consumer_snapshot: dict[str, ConsumerGroup | None] = {}
        # how to bring back a classic group an upgrade replaced if the upgrade's write fails
        self._classic_undo: dict[str, Callable[[], None]] = {}

        self._deadlines = Deadlines()
        self._join_timer: dict[str, tuple[Any, ...]] = {}
        self._sync_timer_generation: dict[str, int] = {}
        self._retention_armed = False
        # Whether per-heartbeat/per-commit debug lines are wanted, decided on first use (logging is
        # configured before requests arrive): every ``self.log.debug`` goes through structlog's
        # lazy proxy (~1.5 us) even when the level filters it out.
        self._debug_per_request: bool | None = None

    @property
    def ownership(self) -> PartitionOwnership:
        return self.runtime.ownership

    @ownership.setter
    def ownership(self, ownership: PartitionOwnership) -> None:
        self.runtime.ownership = ownership

    @property
    def _now(self) -> int:
        return self.runtime.now

    # ==========================================================================================
    # The shell's interface
    # ==========================================================================================

    def handle(
        self,
        now_ms: int,
        api_name: str,
        version: int,
        request: dict[str, Any],
        ctx: Any,
        *,
        client_id: str = "",
        client_host: str = "",
        node_id: int | None = None,
    ) -> Result:
        """Process one request. Its answer is in the returned Result, or in a later one if parked.

        ``node_id`` is the broker that received it, in a cluster sharing this core (None: the local
        node): only the leader of the group's partition serves it, the others answer NOT_COORDINATOR."""
        handler = self._handlers.get(api_name)
        if handler is None:
            raise ValueError(f"the coordinator does not handle {api_name!r}; it handles {', '.join(HANDLED_APIS)}")
        self.runtime.receive(node_id)
        self._begin(now_ms)
        handler(self, version, request, ctx, client_id or "", client_host or "")
        return self._finish()

    def tick(self, now_ms: int) -> Result:
        """Fire every deadline that is due: sessions, join/sync phases, initial delay steps, retention."""
        self._begin(now_ms)
        horizon = self._deadlines.seq
        while (key := self._deadlines.pop_due(now_ms, horizon)) is not None:
            self._fire(key)
        for key in self.consumer.due(now_ms):
            self._fire_consumer(key)
        return self._finish()

    def next_deadline(self) -> int | None:
        mine, theirs = self._deadlines.next_deadline(), self.consumer.next_deadline()
        if mine is None or theirs is None:
            return theirs if mine is None else mine
        return min(mine, theirs)

    def deadline_version(self) -> int:
        """Changes whenever a deadline may have moved earlier. While it stays the same, the next
        deadline can only have moved later (a heartbeat, a cancellation), so a wake-up armed for
        the old one is at worst early -- harmless: ``tick`` fires nothing and the shell re-arms."""
        return self._deadlines.seq + self.consumer.deadlines.seq

    def append_done(self, now_ms: int, token: int, error: BaseException | int | None = None) -> Result:
        """The shell reports that the append with ``token`` is durable (error None) or failed."""
        self._begin(now_ms)
        pending = self.runtime.complete(token)
        if pending is None:  # its partition was unloaded meanwhile: the answers went out
            return self._finish()
        if error is None:
            extra = pending.extra
            if (marker := extra.get("marker")) is not None:
                pid, epoch = extra["producer"]
                self.replay_end_txn_marker(pending.partition, pid, epoch, *marker)
            elif (producer := extra.get("producer")) is not None:
                pid, epoch = producer
                for key, value in pending.records:
                    self.replay_transactional(key, value, pid, epoch)
            elif not extra.get("applied"):
                for key, value in pending.records:
                    self.replay(key, value)
            else:  # a consumer group's records, applied when produced, are durable now
                key = pending.records[0][0]
                self.listener.consumer_group_written(
                    getattr(key, "group_id", None) or getattr(key, "group", ""), pending.records
                )
            pending.on_done(None)
        else:
            code = error if isinstance(error, int) else err.error_code_of(error)
            self.log.warning("append_failed", partition=pending.partition, records=len(pending.records), error=code)
            pending.on_done(code)
        return self._finish()

    def on_partitions_deleted(self, now_ms: int, topic_partitions: Iterable[tuple[str, int]]) -> Result:
        """Partitions of user topics were deleted: tombstone every group's committed offsets of
        them (Kafka's GroupCoordinatorShard.onPartitionsDeleted). The Result holds only appends;
        once they are durable the offsets are gone, and they stay gone after a restart."""
        self._begin(now_ms)
        topic_partitions = list(topic_partitions)
        self.offset_manager.on_partitions_deleted(topic_partitions)
        # A partition resigned and not yet elected again is this process's to load again (a cluster
        # shares the core): its offsets of the deleted partitions go when it is loaded, as for a
        # partition that is loading.
        for p in self.runtime.unloaded:
            pending = self.offset_manager.deleted_while_loading.setdefault(p, {})
            for topic, index in topic_partitions:
                pending.setdefault(topic, set()).add(index)
        return self._finish()

    def expire_member(self, now_ms: int, group_id: str, member_id: str) -> tuple[int, Result]:
        """Expire a classic member's session now (fault injection): what its session deadline would
        do when it fires (Kafka's ``onExpireHeartbeat``), whether or not the member is parked.
        Answers NONE, GROUP_ID_NOT_FOUND or UNKNOWN_MEMBER_ID with the Result to apply."""
        self._begin(now_ms)
        group = self.groups.get(group_id)
        if group is None or group.is_in(D):
            return err.GROUP_ID_NOT_FOUND, self._finish()
        member = group.members.get(member_id)
        if member is None:
            return err.UNKNOWN_MEMBER_ID, self._finish()
        self._glog(group, member=member_id).info("member_expired", state=str(group.state), reason="injected")
        self.listener.member_expired(group_id, member_id, group.generation, events.SESSION_TIMEOUT)
        self._remove_member_and_update_group(group, member, f"member {member_id} session expired (injected)")
        return err.NONE, self._finish()

    def trigger_rebalance(self, now_ms: int, group_id: str, reason: str = "triggered") -> tuple[int, Result]:
        """Start a rebalance of a classic group with members (fault injection), as a member joining
        with new metadata would (Kafka's ``prepareRebalance``): members learn it from their next
        heartbeat (REBALANCE_IN_PROGRESS) and rejoin. Answers NONE, GROUP_ID_NOT_FOUND, or
        REBALANCE_IN_PROGRESS for a group already rebalancing or with no member to rebalance."""
        self._begin(now_ms)
        group = self.groups.get(group_id)
        if group is None or group.is_in(D):
            return err.GROUP_ID_NOT_FOUND, self._finish()
        if not group.is_in(S, CR) or not group.members:
            return err.REBALANCE_IN_PROGRESS, self._finish()
        self._prepare_rebalance(group, reason)
        return err.NONE, self._finish()

    def replay(self, key: RecordKey, value: RecordValue | None) -> None:
        """Apply one durable record to the persisted state: the live path and start-up alike."""
        if type(key) is OffsetCommitKey:
            # The common record (start-up replays millions), tested first.
            assert value is None or isinstance(value, OffsetCommitValue)
            self._replay_offset(key, value)
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                self.group_records.pop(key.group, None)
            else:
                assert isinstance(value, GroupMetadataValue)
                self.group_records[key.group] = value
        elif isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self._replay_offset(key, value)
        elif isinstance(key, CONSUMER_KEY_TYPES):
            try:
                self.consumer.replay((key, value))  # type: ignore[arg-type]
            except IllegalRecord as e:
                # Kafka fails the partition's load (IllegalStateException); groupd skips the one record,
                # as it skips a damaged batch, so the rest of the partition's groups still load.
                self.log.warning("consumer_group_record_skipped", key=repr(key), error=str(e))
        else:
            raise TypeError(f"not a __consumer_offsets record key: {key!r}")

    def replay_transactional(
        self, key: RecordKey, value: RecordValue | None, producer_id: int, producer_epoch: int
    ) -> None:
        """Apply one durable record of a transactional batch (``GroupCoordinatorShard.replay`` with a
        producer id): offset commits become pending for the producer; other records (Kafka writes
        none transactionally) replay as usual."""
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offset_manager.replay_transactional(
                self.partition_for(key.group), key, value, producer_id, producer_epoch
            )
        else:
            self.replay(key, value)

    def replay_end_txn_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int = -1
    ) -> None:
        """Apply a durable end-transaction marker of ``__consumer_offsets`` partition ``partition``
        (``replayEndTransactionMarker``): the producer's pending offsets there commit or vanish."""
        self.offset_manager.replay_end_txn_marker(
            partition, self._groups_with_pending_of, producer_id, producer_epoch, committed, coordinator_epoch
        )

    def _groups_with_pending_of(self, partition: int) -> list[str]:
        n = self.config.num_offsets_partitions
        return [g for g in self.offset_manager.open_txns if partition_for(g, n) == partition]

    def write_txn_marker(
        self,
        now_ms: int,
        ctx: Any,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> Result:
        """The transaction coordinator ends ``producer_id``'s transaction in ``__consumer_offsets``
        partition ``partition`` (Kafka's WriteTxnMarkers to a group coordinator partition,
        ``GroupCoordinatorService.completeTransaction``). ``ctx`` is answered ``{"error_code": ...}``
        once the marker is durable and replayed (0), or at once with the reason it is not written."""
        self._begin(now_ms)
        code = err.NONE
        if not self.ownership.is_local(partition):
            code = err.NOT_COORDINATOR
        elif partition in self.runtime.loading:
            code = err.COORDINATOR_LOAD_IN_PROGRESS
        else:
            seen = self.offset_manager.producers.get((partition, producer_id))
            if seen is not None and producer_epoch < seen[0]:
                code = err.INVALID_PRODUCER_EPOCH  # ProducerAppendInfo.checkProducerEpoch
            elif seen is not None and coordinator_epoch < seen[1]:
                code = err.TRANSACTION_COORDINATOR_FENCED  # ProducerAppendInfo.appendEndTxnMarker
        if code:
            self._respond(ctx, {"error_code": code})
            return self._finish()

        def done(error: int | None) -> None:
            self._respond(ctx, {"error_code": error or err.NONE})

        self.log.info(
            "txn_marker_writing",
            partition=partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            result="commit" if committed else "abort",
        )
        self._append_to_partition(
            partition, [], done, producer=(producer_id, producer_epoch), marker=(committed, coordinator_epoch)
        )
        return self._finish()

    @property
    def offsets(self) -> Offsets:
        """Committed offsets: group -> (topic, partition) -> value (the offset manager's)."""
        return self.offset_manager.offsets

    # ------------------------------------------------------------------------------------------
    # Elections and resignations: loading and unloading one partition at run time
    # ------------------------------------------------------------------------------------------

    def partition_state(self, partition: int) -> str:
        """``"loading"``, ``"unloaded"`` or ``"active"`` (CoordinatorRuntime's CoordinatorState)."""
        return self.runtime.state(partition)

    def partition_epoch(self, partition: int) -> int:
        """The leader epoch the partition was last loaded or unloaded at (-1: never)."""
        return self.runtime.epoch(partition)

    def is_loading(self, partition: int, epoch: int | None = None) -> bool:
        """Whether a replay of ``partition`` (begun at ``epoch``) is still wanted: an unload or a
        newer election makes a load in progress stale, and the shell stops replaying."""
        return self.runtime.is_loading(partition, epoch)

    def begin_load(self, partition: int, epoch: int | None = None, node: Node | None = None) -> Result:
        """Start loading ``partition`` (GroupCoordinatorService.onElection ->
        CoordinatorRuntime.scheduleLoadOperation): its groups answer COORDINATOR_LOAD_IN_PROGRESS
        until ``end_load``, then the shell replays the partition's records through ``replay``.

        ``node`` becomes the partition's leader (default: the current one, or the local node when
        nobody leads it); a change of leader bumps the leader epoch unless ``epoch`` is given. An
        election at an epoch not above the partition's last one is stale and ignored (Kafka:
        "Ignored loading metadata"): then ``is_loading(partition, epoch)`` is False. Whatever the
        core still holds of the partition is unloaded first, its parked requests answered
        NOT_COORDINATOR in the Result (at start-up there is nothing)."""
        self._begin(self._now)
        if self.runtime.begin_load(partition, epoch, node) is None:
            current = self.runtime.epoch(partition)
            self.log.info("partition_load_ignored", partition=partition, epoch=epoch, current=current)
        return self._finish()

    def unload_partition(self, now_ms: int, partition: int, epoch: int | None = None) -> Result:
        """Resign ``partition`` (GroupCoordinatorService.onResignation ->
        CoordinatorRuntime.scheduleUnloadOperation -> GroupMetadataManager.onUnloaded): every
        group of the partition leaves memory, and its requests are answered NOT_COORDINATOR from
        now on, by every broker, until the partition is elected again.

        What waited is answered in the Result: parked JoinGroup/SyncGroup requests and requests
        waiting for a write of the partition get NOT_COORDINATOR (Kafka fails its deferred events
        and current batch with NOT_COORDINATOR). A write already handed to the shell may still
        reach the log; its outcome is ignored and the next load replays it. Deadlines of the
        partition's groups are cancelled. Ignored when ``epoch`` is not above the partition's
        last epoch (a stale resignation)."""
        self._begin(now_ms)
        if self.runtime.unload(partition, epoch) is None:
            current = self.runtime.epoch(partition)
            self.log.info("partition_unload_ignored", partition=partition, epoch=epoch, current=current)
        return self._finish()

    def _unload(self, partition: int, was_loading: bool, writes_abandoned: int) -> None:
        """The runtime dropped ``partition`` (its writes failed NOT_COORDINATOR): drop every group
        of it, answering what waits NOT_COORDINATOR (CoordinatorShard.onUnloaded)."""
        n = self.config.num_offsets_partitions

        # GroupMetadataManager.onUnloaded: a classic group goes Dead, its members' pending JoinGroup
        # (PreparingRebalance) and SyncGroup (CompletingRebalance/Stable) answered NOT_COORDINATOR.
        classic = [g for g in self.groups if partition_for(g, n) == partition]
        for gid in classic:
            group = self.groups[gid]
            for member in list(group.members.values()):
                waiter = member.join_waiter
                if waiter is not None:
                    response = self._join_response(waiter.version, err.NOT_COORDINATOR, member_id=member.member_id)
                    self._complete_join_waiter(group, member, response)
                self._complete_sync_waiter(member, self._sync_response(err.NOT_COORDINATOR))
            group.transition_to(D, self._now)
        consumer = [g for g in self.consumer.groups.groups if partition_for(g, n) == partition]
        # Timers of consumer groups, (group, member, kind[, epoch]): of every group of the partition,
        # including one a failed write just rolled back out of existence.
        self.consumer.deadlines.cancel_where(lambda key: partition_for(key[0], n) == partition)
        for gid in consumer:
            self._consumer_busy.pop(gid, None)
            self._consumer_snapshot.pop(gid, None)
        for gid in [g for g in self.offset_manager.inflight if partition_for(g, n) == partition]:
            del self.offset_manager.inflight[gid]
        self._forget_partition(partition)
        if classic or consumer or writes_abandoned:
            self.log.info(
                "partition_unloaded",
                partition=partition,
                classic_groups=len(classic),
                consumer_groups=len(consumer),
                writes_abandoned=writes_abandoned,
                was_loading=was_loading,
            )

    def _forget_partition(self, partition: int) -> None:
        """Drop the partition's groups, their deadlines and persisted state from memory."""
        n = self.config.num_offsets_partitions
        for gid in [g for g in self.groups if partition_for(g, n) == partition]:
            self._forget_group(self.groups.pop(gid))
        for store in (self.group_records, self.offsets, self.consumer.groups.groups):
            for gid in [g for g in store if partition_for(g, n) == partition]:
                del store[gid]
        self.offset_manager.forget_groups(self._groups_with_pending_of(partition))
        self.offset_manager.forget_partition_producers(partition)

    def end_load(self, partition: int, now_ms: int | None = None, epoch: int | None = None) -> Result:
        """Bring the groups of a loaded partition to life, as Kafka's loader does
        (``GroupMetadataManager.onLoaded``: classic groups come back Empty or Stable with a session
        deadline per member, an over-capacity group rebalances; every consumer-group member gets a
        session deadline, and a revocation deadline when it still has partitions to revoke). A load
        that an unload or a newer election made stale is ignored (``CompleteLoad`` of a context no
        longer LOADING)."""
        self._begin(self._now if now_ms is None else now_ms)
        if not self.runtime.end_load(partition, epoch):
            self.log.info("partition_load_completion_ignored", partition=partition, epoch=epoch)
            return self._finish()
        n = self.config.num_offsets_partitions
        gids = {g for g in self.group_records if partition_for(g, n) == partition}
        gids |= {g for g in self.offsets if partition_for(g, n) == partition}
        # OffsetMetadataManager.replay creates the simple group of a pending transactional offset too.
        gids |= set(self._groups_with_pending_of(partition))
        gids -= set(self.consumer.groups.groups)  # a consumer group's offsets make no classic group
        for gid in sorted(gids):
            if gid not in self.groups:
                self._materialize(gid)
        self.offset_manager.on_partition_loaded(partition)
        self.consumer.end_load(self._now, [g for g in self.consumer.groups.groups if partition_for(g, n) == partition])
        return self._finish()

    def load(self, now_ms: int, records: Iterable[Record]) -> Result:
        """Load a whole log in one go (start-up of a single node, and tests)."""
        parts = list(self.ownership.local_partitions())
        for p in parts:
            self.begin_load(p)
        for key, value in records:
            self.replay(key, value)
        out = Result()
        for p in parts:
            out.extend(self.end_load(p, now_ms))
        return out

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_offsets_partitions)

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    @property
    def pending_appends(self) -> int:
        return self.runtime.pending_appends

    # ==========================================================================================
    # Plumbing
    # ==========================================================================================

    def _begin(self, now_ms: int) -> None:
        self.runtime.begin(now_ms)
        if not self._retention_armed:
            self._retention_armed = True
            self._deadlines.set(("retention",), now_ms + self.config.offsets_retention_check_interval_ms)

    def _finish(self) -> Result:
        return self.runtime.finish()

    def _respond(self, ctx: Any, response: dict[str, Any]) -> None:
        self.runtime.out.responses.append((ctx, response))

    def _append(
        self,
        group_id: str,
        records: list[Record],
        on_done: Callable[[int | None], None],
        *,
        applied: bool = False,
        producer: tuple[int, int] | None = None,
    ) -> None:
        self.runtime.append(self.partition_for(group_id), records, on_done, applied=applied, producer=producer)

    def _append_to_partition(
        self,
        partition: int,
        records: list[Record],
        on_done: Callable[[int | None], None],
        *,
        applied: bool = False,
        producer: tuple[int, int] | None = None,
        marker: tuple[bool, int] | None = None,
    ) -> None:
        self.runtime.append(partition, records, on_done, applied=applied, producer=producer, marker=marker)

    def _route_error(self, group_id: str) -> int:
        return self.runtime.route_error(partition_for(group_id, self.config.num_offsets_partitions))

    def _debug_enabled(self) -> bool:
        enabled = self._debug_per_request
        if enabled is None:
            try:
                enabled = bool(self.log.bind().is_enabled_for(logging.DEBUG))
            except AttributeError:  # a logger without level filtering: always call it
                enabled = True
            self._debug_per_request = enabled
        return enabled

    def _glog(self, group: ClassicGroup, **kw: Any) -> Any:
        return self.log.bind(group=group.group_id, generation=group.generation, **kw)

    def _fire(self, key: tuple[Any, ...]) -> None:
        kind = key[0]
        if kind == "hb":
            self._expire_member_heartbeat(key[1], key[2])
        elif kind == "join":
            self._fire_join_timer(key[1])
        elif kind == "sync":
            self._expire_pending_sync(key[1], self._sync_timer_generation.pop(key[1], -1))
        elif kind == "retention":
            self._deadlines.set(("retention",), self._now + self.config.offsets_retention_check_interval_ms)
            self.offset_manager.cleanup_group_metadata()

    def _forget_group(self, group: ClassicGroup) -> None:
        for mid in list(group.members) + list(group.pending_join_members):
            self._deadlines.cancel(_hb_key(group.group_id, mid))
        self._deadlines.cancel(("join", group.group_id))
        self._deadlines.cancel(("sync", group.group_id))
        self._join_timer.pop(group.group_id, None)
        self._sync_timer_generation.pop(group.group_id, None)

    def _materialize(self, group_id: str) -> ClassicGroup:
        """A live group rebuilt from persisted state (Kafka's GroupMetadataManager.replay + onLoaded)."""
        now = self._now
        value = self.group_records.get(group_id)
        if value is None:
            # Offsets without group metadata: a standalone consumer's group.
            group = ClassicGroup(group_id, E, now)
            self.groups[group_id] = group
            return group
        group = ClassicGroup(
            group_id,
            S if value.members else E,
            value.current_state_timestamp if value.current_state_timestamp != -1 else now,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
        )
        for m in value.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[group_id] = group
        for member in group.members.values():
            self._reschedule_heartbeat(group, member)
        if len(group.members) > self.config.group_max_size:
            self._prepare_rebalance(group, f"loaded group is over capacity {self.config.group_max_size}")
        return group

    def _restore_group(self, group_id: str) -> None:
        """Undo an in-memory removal whose tombstone could not be written."""
        if group_id not in self.groups and (
            group_id in self.group_records or group_id in self.offsets or self.offset_manager.has_pending(group_id)
        ):
            self._materialize(group_id)

    # ==========================================================================================
    # Responses
    # ==========================================================================================

    @staticmethod
    def _join_response(
        version: int,
        error: int,
        *,
        member_id: str = "",
        generation: int = -1,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader: str = "",
        members: list[dict[str, Any]] | None = None,
        skip_assignment: bool = False,
    ) -> dict[str, Any]:
        # The JoinGroupResponse constructor: "" below v7 where the name is null, and from v7
        # (nullable) null where it is "".
        if version < 7:
            protocol_name = protocol_name or ""
        elif protocol_name == "":
            protocol_name = None
        return {
            "throttle_time_ms": 0,
            "error_code": error,
            "generation_id": generation,
            "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "leader": leader or "",
            "skip_assignment": skip_assignment,
            "member_id": member_id,
            "members": members or [],
        }

    def _group_join_response(
        self, group: ClassicGroup, waiter: Waiter, member_id: str, *, with_members: bool, skip: bool = False
    ) -> dict[str, Any]:
        return self._join_response(
            waiter.version,
            err.NONE,
            member_id=member_id,
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.current_member_list() if with_members else [],
            skip_assignment=skip,
        )

    @staticmethod
    def _sync_response(error: int, assignment: bytes = b"", ptype: str | None = None, pname: str | None = None):
        return {
            "throttle_time_ms": 0,
            "error_code": error,
            "protocol_type": ptype,
            "protocol_name": pname,
            "assignment": assignment,
        }

    def _complete_join_waiter(self, group: ClassicGroup, member: Member, response: dict[str, Any]) -> bool:
        waiter = group.set_join_waiter(member, None)
        if waiter is None:
            return False
        self._respond(waiter.ctx, response)
        return True

    def _complete_sync_waiter(self, member: Member, response: dict[str, Any]) -> bool:
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is None:
            return False
        self._respond(waiter.ctx, response)
        return True

    def _unpark_removed_member(self, group: ClassicGroup, member: Member) -> None:
        # Kafka answers a parked JoinGroup of a removed member with UNKNOWN_MEMBER_ID so that a
        # still-alive client retries. It leaves a parked SyncGroup unanswered; groupd answers it the
        # same way so that the connection is not stuck until the client's request timeout.
        if member.join_waiter is not None:
            w = member.join_waiter
            self._complete_join_waiter(group, member, self._join_response(w.version, err.UNKNOWN_MEMBER_ID))
        self._complete_sync_waiter(member, self._sync_response(err.UNKNOWN_MEMBER_ID))

    # ==========================================================================================
    # JoinGroup
    # ==========================================================================================

    def _join_group(self, v: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str) -> None:
        gid = req.get("group_id") or ""
        member_id = req.get("member_id") or ""
        instance_id = req.get("group_instance_id") if v >= 5 else None
        session_timeout = int(req.get("session_timeout_ms", 0))
        cfg = self.config

        def fail(code: int, mid: str = member_id) -> None:
            self._respond(ctx, self._join_response(v, code, member_id=mid))

        if not gid:
            return fail(err.INVALID_GROUP_ID)
        if not cfg.group_min_session_timeout_ms <= session_timeout <= cfg.group_max_session_timeout_ms:
            return fail(err.INVALID_SESSION_TIMEOUT)
        code = self._route_error(gid)
        if code:
            return fail(code)
        consumer_group = self.consumer.group(gid)
        busy = self._consumer_busy.get(gid) if consumer_group is not None else None
        if busy is not None:
            # a write of the consumer group is in flight and may yet be rolled back: the join waits
            busy.append(lambda: self._join_group(v, req, ctx, client_id, client_host))
            return None
        if consumer_group is not None:
            if consumer_group.members:
                # classicGroupJoin: a non-empty consumer group answers classic members itself
                return self._classic_join_to_consumer_group(v, req, ctx, client_id, client_host)
            # maybeDeleteEmptyConsumerGroup: the empty consumer group makes way for a classic one
            self._delete_consumer_group(gid, "replaced by a classic group")

        group = self.groups.get(gid)
        new_group = group is None
        if group is None:
            if member_id:
                # A member id for a group that does not exist: it was deleted or expired under it.
                return fail(err.UNKNOWN_MEMBER_ID)
            group = ClassicGroup(gid, E, self._now)
            self.groups[gid] = group
        appends_before = len(self.runtime.out.appends)
        self._join_to_group(v, req, ctx, group, member_id, instance_id, client_id, client_host)
        if new_group and len(self.runtime.out.appends) == appends_before:
            self._store_new_empty_group(group)

    def _store_new_empty_group(self, group: ClassicGroup) -> None:
        """Persist a group that a join created without writing anything (MEMBER_ID_REQUIRED, ...).

        GroupMetadataManager.classicGroupJoinToClassicGroup: "if a group was newly created, we need
        to append records to the log to commit the group", an empty group-metadata record
        (GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord), so that the group outlives a
        restart. If the write fails Kafka reverts the group's creation (the snapshot before it):
        here too, unless a generation has completed since, and a join still parked gets the error.
        """
        gid = group.group_id
        record = GroupMetadataValue(
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=group.state_timestamp,
        )

        def done(error: int | None) -> None:
            if error is None or self.groups.get(gid) is not group or group.generation != 0:
                return
            self._glog(group).warning("new_group_metadata_not_stored", error=error)
            code = err.append_error_to_response_error(error)
            for member in list(group.members.values()):
                waiter = group.set_join_waiter(member, None)
                if waiter is not None:
                    self._respond(waiter.ctx, self._join_response(waiter.version, code, member_id=member.member_id))
            group.transition_to(D, self._now)
            self._forget_group(group)
            del self.groups[gid]

        self._append(gid, [(GroupMetadataKey(gid), record)], done)

    def _join_to_group(
        self,
        v: int,
        req: dict[str, Any],
        ctx: Any,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
    ) -> None:
        gid = group.group_id
        session_timeout = int(req.get("session_timeout_ms", 0))
        rebalance_timeout = int(req.get("rebalance_timeout_ms", -1)) if v >= 1 else -1
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout  # JoinGroup v0 has one timeout for both
        protocol_type = req.get("protocol_type") or ""
        protocols = [(p.get("name") or "", bytes(p.get("metadata") or b"")) for p in req.get("protocols") or []]
        waiter = Waiter(ctx, v)

        if not self._accept_joining_member(group, member_id):
            removed = group.remove(member_id)
            if removed is not None:
                self._deadlines.cancel(_hb_key(gid, member_id))
                self._unpark_removed_member(group, removed)
            return self._respond(ctx, self._join_response(v, err.GROUP_MAX_SIZE_REACHED, member_id=""))

        ident = (
            instance_id,
            client_id,
            client_host,
            session_timeout,
            rebalance_timeout,
            protocol_type,
            protocols,
        )
        reason = req.get("reason")
        if not member_id:
            self._join_new_member(group, v, waiter, ident, reason)
        else:
            self._join_existing_member(group, v, waiter, member_id, ident, reason)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.is_in(E, D):
            return True
        if group.is_in(PR):
            # Counting members already parked (not all members) lets a shrunk max size kick out
            # the last members to rejoin, as in Kafka.
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, v: int, waiter: Waiter, ident: tuple, reason: str | None) -> None:
        instance_id, client_id, _host, session_timeout, _rt, protocol_type, protocols = ident
        if group.is_in(D):
            return self._respond(waiter.ctx, self._join_response(v, err.COORDINATOR_NOT_AVAILABLE))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return self._respond(waiter.ctx, self._join_response(v, err.INCONSISTENT_GROUP_PROTOCOL))
        new_id = f"{instance_id if instance_id is not None else client_id}-{self._uuid()}"
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is not None:
                return self._replace_static_member(group, waiter, existing, new_id, ident, reason)
            return self._add_member_and_rebalance(group, waiter, new_id, ident, reason)
        if v >= 4:
            # KIP-394: hand out the id first, so a client that times out and retries does not leave
            # a ghost member behind; the id is forgotten if it does not come back in time.
            group.pending_join_members.add(new_id)
            self._deadlines.set(_hb_key(group.group_id, new_id), self._now + session_timeout)
            # debug, not info: a protocol handshake step every new member goes through (the
            # member_joined that follows is the event); at info it was a third of the log volume,
            # and of the server CPU, of a 1,000-member rebalance.
            self.log.debug(
                "member_id_required",
                group=group.group_id,
                member=new_id,
                generation=group.generation,
                state=group.state.value,
            )
            return self._respond(waiter.ctx, self._join_response(v, err.MEMBER_ID_REQUIRED, member_id=new_id))
        return self._add_member_and_rebalance(group, waiter, new_id, ident, reason)

    def _join_existing_member(
        self, group: ClassicGroup, v: int, waiter: Waiter, member_id: str, ident: tuple, reason: str | None
    ) -> None:
        instance_id, _cid, _host, _st, _rt, protocol_type, protocols = ident
        ctx = waiter.ctx
        if group.is_in(D):
            return self._respond(ctx, self._join_response(v, err.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return self._respond(ctx, self._join_response(v, err.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        if group.is_pending_member(member_id):
            if instance_id is not None:
                return self._respond(ctx, self._join_response(v, err.INVALID_REQUEST, member_id=member_id))
            return self._add_member_and_rebalance(group, waiter, member_id, ident, reason)
        code = self._validate_member(group, member_id, instance_id)
        if code:
            return self._respond(ctx, self._join_response(v, code, member_id=member_id))
        member = group.members[member_id]
        if group.is_in(PR):
            return self._update_member_and_rebalance(group, member, waiter, ident, "rejoin during PreparingRebalance")
        if group.is_in(CR):
            if member.matches(protocols):
                # It missed its JoinGroup answer (the seeds' lost-response cases): answer again.
                return self._respond(
                    ctx,
                    self._group_join_response(group, waiter, member_id, with_members=group.is_leader(member_id)),
                )
            return self._update_member_and_rebalance(group, member, waiter, ident, "metadata changed")
        if group.is_in(S):
            if group.is_leader(member_id):
                # The leader rejoining is how a client asks for a new assignment (e.g. metadata changed).
                return self._update_member_and_rebalance(group, member, waiter, ident, "leader rejoined")
            if not member.matches(protocols):
                return self._update_member_and_rebalance(group, member, waiter, ident, "metadata changed")
            return self._respond(ctx, self._group_join_response(group, waiter, member_id, with_members=False))
        # Empty with a known member id cannot happen with members present; tell it to start over.
        return self._respond(ctx, self._join_response(v, err.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is None:
                return err.UNKNOWN_MEMBER_ID
            if existing != member_id:
                self._glog(group, member=member_id).info("fenced_instance_id", instance=instance_id)
                return err.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return err.UNKNOWN_MEMBER_ID
        return err.NONE

    def _add_member_and_rebalance(
        self, group: ClassicGroup, waiter: Waiter, member_id: str, ident: tuple, reason: str | None
    ) -> None:
        instance_id, client_id, client_host, session_timeout, rebalance_timeout, protocol_type, protocols = ident
        member = Member(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=session_timeout,
            protocol_type=protocol_type,
            protocols=protocols,
            is_new=True,
        )
        if group.is_in(PR) and group.previous_state is E:
            group.new_member_added = True
        group.add(member, waiter)
        # A parked new member cannot heartbeat and a parked socket reveals no disconnect, so its
        # join is bounded separately; a client still alive simply retries.
        self._deadlines.set(
            _hb_key(group.group_id, member_id), self._now + self.config.group_new_member_join_timeout_ms
        )
        # The fields _glog would bind, passed directly: binding a logger per member cost ~2 us.
        self.log.info(
            "member_joined",
            group=group.group_id,
            generation=group.generation,
            member=member_id,
            instance=instance_id,
            client_id=client_id,
            state=group.state.value,
            members=len(group.members),
            reason=reason,
        )
        self._maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, waiter: Waiter, ident: tuple, reason: str
    ) -> None:
        _iid, _cid, _host, session_timeout, rebalance_timeout, _ptype, protocols = ident
        old = group.update_member(member, protocols, rebalance_timeout, session_timeout, waiter)
        if old is not None and old is not waiter:
            # A second JoinGroup for a parked member (a retry on another connection): Kafka drops the
            # first silently; answering it keeps that connection from waiting for nothing.
            self._respond(
                old.ctx,
                self._join_response(old.version, err.REBALANCE_IN_PROGRESS, member_id=member.member_id),
            )
        self._glog(group, member=member.member_id).info("member_rejoined", state=str(group.state), reason=reason)
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id}: {reason}")

    def _replace_static_member(
        self, group: ClassicGroup, waiter: Waiter, old_id: str, new_id: str, ident: tuple, reason: str | None
    ) -> None:
        instance_id, _cid, _host, session_timeout, rebalance_timeout, _ptype, protocols = ident
        old_leader = group.leader_id
        old_member, new_member = group.replace_static_member(instance_id, old_id, new_id)
        # Whoever still holds the old id is a zombie of the same instance: fence it now.
        if old_member.join_waiter is not None:
            w, old_member.join_waiter = old_member.join_waiter, None
            self._respond(w.ctx, self._join_response(w.version, err.FENCED_INSTANCE_ID, member_id=old_id))
        self._complete_sync_waiter(old_member, self._sync_response(err.FENCED_INSTANCE_ID))
        self._deadlines.cancel(_hb_key(group.group_id, old_id))
        self._reschedule_heartbeat(group, new_member)
        old_protocols = new_member.protocols
        old_timeouts = (new_member.rebalance_timeout_ms, new_member.session_timeout_ms)
        group.update_member(new_member, protocols, rebalance_timeout, session_timeout, waiter)
        self._glog(group, member=new_id).info(
            "static_member_replaced", instance=instance_id, old_member=old_id, state=str(group.state)
        )

        if group.is_in(S):
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: no rebalance, just persist the new id.
                self._store_static_replacement(group, new_member, old_id, old_leader, old_protocols, old_timeouts)
                return
            return self._maybe_prepare_rebalance_or_complete_join(
                group, f"static member {instance_id} changed protocol"
            )
        if group.is_in(CR):
            # The leader may already be assigning with the old member id; only a new round is safe.
            return self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        self._maybe_complete_join_phase(group)

    def _store_static_replacement(
        self,
        group: ClassicGroup,
        member: Member,
        old_id: str,
        old_leader: str | None,
        old_protocols: list[tuple[str, bytes]],
        old_timeouts: tuple[int, int],
    ) -> None:
        assignment = {m.member_id: m.assignment for m in group.members.values()}
        record = self._group_metadata_record(group, assignment)
        generation = group.generation
        new_id = member.member_id

        def done(error: int | None) -> None:
            waiter = member.join_waiter
            if group is not self.groups.get(group.group_id) or group.members.get(new_id) is not member:
                return
            if error is not None and group.is_in(S) and group.generation == generation:
                # Not durable: put the old member id back, as Kafka does, and tell the newcomer.
                group.update_member(member, old_protocols, old_timeouts[0], old_timeouts[1], None)
                _, restored = group.replace_static_member(member.group_instance_id or "", new_id, old_id)
                self._deadlines.cancel(_hb_key(group.group_id, new_id))
                self._reschedule_heartbeat(group, restored)
                if waiter is not None:
                    resp = self._join_response(
                        waiter.version,
                        err.append_error_to_response_error(error),
                        generation=generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=old_leader or "",
                    )
                    self._respond(waiter.ctx, resp)
                return
            if waiter is None or error is not None:
                return
            group.set_join_waiter(member, None)
            if waiter.version >= 9:
                is_leader = group.is_leader(new_id)
                resp = self._group_join_response(group, waiter, new_id, with_members=is_leader, skip=is_leader)
            else:
                # Before v9 a static leader must not learn it is the leader, or it would reassign
                # and trigger the rebalance this path exists to avoid; it is told the old leader id.
                resp = self._group_join_response(group, waiter, new_id, with_members=False)
                resp["leader"] = old_leader or ""
            self._respond(waiter.ctx, resp)

        self._append(group.group_id, [(GroupMetadataKey(group.group_id), record)], done)

    # ==========================================================================================
    # The join phase
    # ==========================================================================================

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(CR):
            self._reset_and_propagate_assignment_with_error(group, err.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(E)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_join(group, delay, ("initial", delay, remaining))
        old_state = group.state
        group.transition_to(PR, self._now)
        group.rebalance_started_ms = self._now
        self._glog(group).info(
            "rebalance_started", from_state=str(old_state), members=len(group.members), reason=reason
        )
        self.listener.rebalance_started(group.group_id, group.generation, len(group.members), reason)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _schedule_join(self, group: ClassicGroup, delay_ms: int, kind: tuple[Any, ...]) -> None:
        self._join_timer[group.group_id] = kind
        self._deadlines.set(("join", group.group_id), self._now + max(delay_ms, 0))

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            self._schedule_join(group, group.rebalance_timeout_ms(), ("complete",))

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        # During the initial delay the timer alone completes the join, however many have joined.
        if group.is_in(PR) and group.previous_state is not E and group.has_all_members_joined():
            self._complete_join(group)

    def _fire_join_timer(self, group_id: str) -> None:
        kind = self._join_timer.pop(group_id, None)
        group = self.groups.get(group_id)
        if group is None or kind is None:
            return
        if kind[0] == "initial":
            _, delay, remaining = kind
            if group.new_member_added and remaining != 0:
                # Members are still arriving: wait another step, never past the rebalance timeout.
                group.new_member_added = False
                new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                self._schedule_join(group, new_delay, ("initial", new_delay, max(remaining - delay, 0)))
                return
        self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self._deadlines.cancel(("join", gid))
        self._join_timer.pop(gid, None)
        dropped = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in dropped:
            group.remove(member.member_id)
            self._deadlines.cancel(_hb_key(gid, member.member_id))
            self._unpark_removed_member(group, member)
        if dropped:
            self._glog(group).info("members_removed_not_rejoined", removed=[m.member_id for m in dropped])
            for member in dropped:
                self.listener.member_expired(gid, member.member_id, group.generation, events.REBALANCE_TIMEOUT)
        if group.is_in(D):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for them or their expiry.
            self._glog(group).warning("rebalance_postponed_no_member_rejoined", members=len(group.members))
            self._schedule_join(group, group.rebalance_timeout_ms(), ("complete",))
            return
        group.init_next_generation(self._now)
        started = group.rebalance_started_ms
        duration = None if started is None else self._now - started
        if group.is_in(E):
            self._glog(group).info("group_empty", duration_ms=duration)
            group.rebalance_started_ms = None
            self.listener.rebalance_completed(gid, group.generation, 0, duration, events.EMPTY)
            record = self._group_metadata_record(group, {})

            def done(error: int | None) -> None:
                if error is not None:
                    # Harmless: the previous generation in the log has no live members either way.
                    self._glog(group).warning("empty_group_metadata_not_stored", error=error)

            self._append(gid, [(GroupMetadataKey(gid), record)], done)
            return
        self._glog(group).info(
            "join_phase_completed",
            members=len(group.members),
            protocol=group.protocol_name,
            leader=group.leader_id,
            duration_ms=duration,
        )
        for member in group.members.values():
            waiter = member.join_waiter
            if waiter is not None:
                resp = self._group_join_response(
                    group, waiter, member.member_id, with_members=group.is_leader(member.member_id)
                )
                self._complete_join_waiter(group, member, resp)
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._sync_timer_generation[gid] = group.generation
        self._deadlines.set(("sync", gid), self._now + group.rebalance_timeout_ms())

    def _group_metadata_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(group.protocol_name),
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in group.members.values()
            ),
        )

    # ==========================================================================================
    # Sessions and the sync phase
    # ==========================================================================================

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._deadlines.set(_hb_key(group.group_id, member.member_id), self._now + timeout)

    def _expire_member_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(D):
            return
        if group.is_pending_member(member_id):
            group.remove(member_id)
            self._glog(group, member=member_id).info("pending_member_expired")
            self.listener.member_expired(group_id, member_id, group.generation, events.PENDING)
            if group.is_in(PR) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        # A new member parked in its first JoinGroup is bounded by the new-member join timeout,
        # not its session (see _add_member_and_rebalance).
        reason = events.NEW_MEMBER_JOIN_TIMEOUT if member.is_new else events.SESSION_TIMEOUT
        self._glog(group, member=member_id).info(
            "member_expired",
            state=str(group.state),
            session_timeout_ms=member.session_timeout_ms,
            reason=reason,
        )
        self.listener.member_expired(group_id, member_id, group.generation, reason)
        self._remove_member_and_update_group(group, member, f"member {member_id} session expired")

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self._unpark_removed_member(group, member)
        group.remove(member.member_id)
        self._deadlines.cancel(_hb_key(group.group_id, member.member_id))
        if group.is_in(S, CR):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(PR) and group.has_all_members_joined():
            self._complete_join(group)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self._deadlines.cancel(("sync", group.group_id))
        self._sync_timer_generation.pop(group.group_id, None)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(CR, S) or not group.pending_sync_members:
            self._deadlines.cancel(("sync", group.group_id))
            self._sync_timer_generation.pop(group.group_id, None)

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation or not group.is_in(CR, S):
            return
        if not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        for mid in missing:
            member = group.remove(mid)
            self._deadlines.cancel(_hb_key(group_id, mid))
            if member is not None:
                self._unpark_removed_member(group, member)
        self._glog(group).info("members_removed_no_sync", removed=missing, state=str(group.state))
        for mid in missing:
            self.listener.member_expired(group_id, mid, generation, events.REBALANCE_TIMEOUT)
        self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ok = error == err.NONE
        for member in group.members.values():
            resp = self._sync_response(
                error,
                member.assignment,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
            )
            if self._complete_sync_waiter(member, resp):
                # Sessions that ran out while the member was parked were forgiven; start afresh.
                self._reschedule_heartbeat(group, member)

    # ==========================================================================================
    # SyncGroup
    # ==========================================================================================

    def _sync_group(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        gid = req.get("group_id") or ""
        member_id = req.get("member_id") or ""
        generation = int(req.get("generation_id", -1))
        instance_id = req.get("group_instance_id") if v >= 3 else None
        ptype = req.get("protocol_type") if v >= 5 else None
        pname = req.get("protocol_name") if v >= 5 else None

        def fail(code: int) -> None:
            self._respond(ctx, self._sync_response(code))

        if v >= 5 and (ptype is None or pname is None):
            # Mandatory from v5 (KIP-559): KafkaApis.handleSyncGroupRequest answers this before
            # anything else, the group id and the ACL check included
            # (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent).
            return fail(err.INCONSISTENT_GROUP_PROTOCOL)
        if not gid:
            return fail(err.INVALID_GROUP_ID)
        code = self._route_error(gid)
        if code:
            return fail(code)
        if gid not in self.groups and self.consumer.group(gid) is not None:
            return self._consumer_group_request(
                gid, lambda: self._sync_group(v, req, ctx, _cid, _host), lambda: self._classic_sync(v, req, ctx)
            )
        group = self.groups.get(gid)
        if group is None or group.is_in(E):
            return fail(err.UNKNOWN_MEMBER_ID)
        if group.is_in(D):
            return fail(err.COORDINATOR_NOT_AVAILABLE)
        code = self._validate_member(group, member_id, instance_id)
        if code:
            return fail(code)
        if generation != group.generation:
            return fail(err.ILLEGAL_GENERATION)
        if (ptype is not None and group.protocol_type is not None and ptype != group.protocol_type) or (
            pname is not None and group.protocol_name is not None and pname != group.protocol_name
        ):
            return fail(err.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(PR):
            return fail(err.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.is_in(S):
            self._remove_pending_sync_member(group, member_id)
            return self._respond(
                ctx,
                self._sync_response(err.NONE, member.assignment, group.protocol_type, group.protocol_name),
            )
        # CompletingRebalance: park until the leader's assignment is durable.
        old = member.sync_waiter
        member.sync_waiter = Waiter(ctx, v)
        if old is not None:
            self._respond(old.ctx, self._sync_response(err.REBALANCE_IN_PROGRESS))
        self._remove_pending_sync_member(group, member_id)
        if not group.is_leader(member_id):
            return
        assignment: dict[str, bytes] = {}
        for a in req.get("assignments") or []:
            assignment[a.get("member_id") or ""] = bytes(a.get("assignment") or b"")
        missing = [mid for mid in group.members if mid not in assignment]
        for mid in missing:
            assignment[mid] = b""
        assignment = {mid: assignment[mid] for mid in group.members}  # members of this generation only
        self._glog(group, member=member_id).info(
            "assignment_received", members=len(group.members), missing=missing or None
        )
        record = self._group_metadata_record(group, assignment)

        def done(error: int | None) -> None:
            # Another member may have joined while the record was being written; then this
            # generation is over and its assignment is moot.
            if group is not self.groups.get(gid) or not group.is_in(CR) or group.generation != generation:
                return
            if error is not None:
                code = err.append_error_to_response_error(error)
                self._reset_and_propagate_assignment_with_error(group, code)
                self._maybe_prepare_rebalance_or_complete_join(group, f"error {code} storing the assignment")
                return
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, b"")
            self._propagate_assignment(group, err.NONE)
            group.transition_to(S, self._now)
            started = group.rebalance_started_ms
            duration = None if started is None else self._now - started
            self._glog(group).info(
                "rebalance_completed",
                members=len(group.members),
                protocol=group.protocol_name,
                leader=group.leader_id,
                duration_ms=duration,
            )
            group.rebalance_started_ms = None
            self.listener.rebalance_completed(gid, generation, len(group.members), duration, events.STABLE)

        self._append(gid, [(GroupMetadataKey(gid), record)], done)

    # ==========================================================================================
    # Heartbeat and LeaveGroup
    # ==========================================================================================

    def heartbeat(self, now_ms: int, version: int, request: dict[str, Any], node_id: int | None = None) -> int:
        """``handle(now_ms, "Heartbeat", ...)`` without a Result: the error code to answer.

        A Heartbeat only checks its member and moves its session deadline later: it never answers
        another request, appends a record or changes a group's state, so the shell's hot path can
        skip the Result plumbing (a third of a steady heartbeat's cost in the core)."""
        self.runtime.receive(node_id)
        if self._retention_armed:
            self.runtime.now = now_ms
        else:
            self._begin(now_ms)
        return self._heartbeat_error(
            request.get("group_id") or "",
            request.get("member_id") or "",
            int(request.get("generation_id", -1)),
            request.get("group_instance_id") if version >= 3 else None,
        )

    def _heartbeat(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        self._respond(
            ctx, {"throttle_time_ms": 0, "error_code": self.heartbeat(self._now, v, req, self.runtime.receiver)}
        )

    def _heartbeat_error(self, gid: str, member_id: str, generation: int, instance_id: str | None) -> int:
        if not gid:
            return err.INVALID_GROUP_ID
        code = self._route_error(gid)
        if code:
            # Kafka's GroupCoordinatorService.heartbeat maps COORDINATOR_LOAD_IN_PROGRESS to NONE
            # ("the group is still loading, so blindly respond"): the member keeps its session.
            return err.NONE if code == err.COORDINATOR_LOAD_IN_PROGRESS else code
        group = self.groups.get(gid)
        if group is None:
            if self.consumer.group(gid) is not None:
                # classicGroupHeartbeatToConsumerGroup (on the group as it is, as Kafka's heartbeats)
                return self.consumer.classic_heartbeat(self._now, gid, member_id, generation, instance_id)
            return err.UNKNOWN_MEMBER_ID
        # The hot path of a steady group: identity checks on the state and dict lookups only, and
        # no log line (even a filtered debug call paid for building its arguments every time).
        state = group.state
        if state is D:
            return err.COORDINATOR_NOT_AVAILABLE
        code = self._validate_member(group, member_id, instance_id)
        if code:
            return code
        if generation != group.generation:
            return err.ILLEGAL_GENERATION
        if state is E:
            return err.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self._deadlines.set(_hb_key(gid, member_id), self._now + member.session_timeout_ms)
        if self._debug_enabled():  # README: --log-level debug shows every heartbeat
            self.log.debug("heartbeat", group=gid, member=member_id, generation=generation, state=state.value)
        return err.REBALANCE_IN_PROGRESS if state is PR else err.NONE

    def _leave_group(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        gid = req.get("group_id") or ""
        if v >= 3:
            identities = [
                (m.get("member_id") or "", m.get("group_instance_id"), m.get("reason"))
                for m in req.get("members") or []
            ]
        else:
            identities = [(req.get("member_id") or "", None, None)]

        def top(code: int) -> None:
            self._respond(ctx, {"throttle_time_ms": 0, "error_code": code, "members": []})

        if not gid:
            return top(err.INVALID_GROUP_ID)
        code = self._route_error(gid)
        if code:
            return top(code)
        if gid not in self.groups and self.consumer.group(gid) is not None:
            return self._consumer_group_request(
                gid,
                lambda: self._leave_group(v, req, ctx, _cid, _host),
                lambda: self._classic_leave(v, gid, identities, ctx),
            )
        group = self.groups.get(gid)
        if group is None:
            if v >= 3:
                # GroupCoordinatorService.leaveGroup: "Group was not found" is no top-level error
                # from v3, each member named is answered UNKNOWN_MEMBER_ID.
                members = [
                    {"member_id": mid, "group_instance_id": iid, "error_code": err.UNKNOWN_MEMBER_ID}
                    for mid, iid, _reason in identities
                ]
                return self._respond(ctx, {"throttle_time_ms": 0, "error_code": err.NONE, "members": members})
            return top(err.UNKNOWN_MEMBER_ID)
        if group.is_in(D):
            return top(err.COORDINATOR_NOT_AVAILABLE)

        results: list[dict[str, Any]] = []
        left = 0
        for member_id, instance_id, reason in identities:
            code = err.NONE
            if not member_id:
                # Admin removal by instance id alone.
                target = group.static_members.get(instance_id) if instance_id is not None else None
                if target is None:
                    code = err.UNKNOWN_MEMBER_ID
                else:
                    self._remove_current_member(group, target, reason)
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self._deadlines.cancel(_hb_key(gid, member_id))
                self._glog(group, member=member_id).info("pending_member_left", reason=reason)
            else:
                code = self._validate_member(group, member_id, instance_id)
                if not code:
                    self._remove_current_member(group, member_id, reason)
            if not code:
                left += 1
            results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})

        if left:
            if group.is_in(S, CR):
                self._maybe_prepare_rebalance_or_complete_join(group, f"{left} member(s) left")
            elif group.is_in(PR):
                self._maybe_complete_join_phase(group)

        self._respond_leave(ctx, v, results)

    def _respond_leave(self, ctx: Any, v: int, results: list[dict[str, Any]]) -> None:
        """LeaveGroup's answer: per member from v3, else the first member's error."""
        if v >= 3:
            self._respond(ctx, {"throttle_time_ms": 0, "error_code": err.NONE, "members": results})
        else:
            first_error = next((r["error_code"] for r in results if r["error_code"]), err.NONE)
            self._respond(ctx, {"throttle_time_ms": 0, "error_code": first_error})

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.members[member_id]
        self._deadlines.cancel(_hb_key(group.group_id, member_id))
        self.log.info(
            "member_left",
            group=group.group_id,
            generation=group.generation,
            member=member_id,
            instance=member.group_instance_id,
            state=group.state.value,
            reason=reason,
        )
        self._unpark_removed_member(group, member)
        group.remove(member_id)

    # ==========================================================================================
    # FindCoordinator, DescribeGroups, ListGroups, DeleteGroups
    # ==========================================================================================

    def _find_coordinator(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        key_type = int(req.get("key_type", 0)) if v >= 1 else 0
        keys = list(req.get("coordinator_keys") or []) if v >= 4 else [req.get("key") or ""]
        answers = []
        for key in keys:
            node: Node | None = None
            message: str | None = None
            if key_type in (0, 1):
                # KafkaApis.getCoordinator: the leader of the key's partition of __consumer_offsets
                # (a group) or of __transaction_state (a transactional id, abs(hashCode) % 50).
                if key_type == 0:
                    node = self.ownership.owner(self.partition_for(key))
                else:
                    node = self.ownership.local if self.txn_coordinator is None else self.txn_coordinator(key)
                code = err.NONE if node is not None else err.COORDINATOR_NOT_AVAILABLE
                # v1-3 carry Errors.message() (KafkaApis.handleFindCoordinatorRequestLessThanV4 and
                # FindCoordinatorResponse.prepareOldResponse); v4's per-key message is left at its
                # schema default, "".
                message = default_message(code) if v < 4 else ""
            elif key_type == 2:
                code, message = err.INVALID_REQUEST, "groupd coordinates no share groups"
            else:
                code, message = err.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
            answers.append(
                {
                    "key": key,
                    "node_id": node.node_id if node else -1,
                    "host": node.host if node else "",
                    "port": node.port if node else -1,
                    "error_code": code,
                    "error_message": message,
                }
            )
        if v >= 4:
            self._respond(ctx, {"throttle_time_ms": 0, "coordinators": answers})
        else:
            a = answers[0]
            a.pop("key")
            self._respond(ctx, {"throttle_time_ms": 0, **a})

    def _describe_groups(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        ops = GROUP_AUTHORIZED_OPERATIONS if req.get("include_authorized_operations") else AUTHORIZED_OPERATIONS_OMITTED
        described = []
        for gid in req.get("groups") or []:
            base = {
                "error_code": err.NONE,
                "error_message": None,
                "group_id": gid,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": ops,
            }
            # "" is a group id like any other here (GroupCoordinatorService.describeGroups: only a
            # null id, which the wire cannot carry, is INVALID_GROUP_ID).
            code = self._route_error(gid)
            group = self.groups.get(gid) if not code else None
            if code:
                base["error_code"] = code
            elif group is None or group.is_in(D):
                base["group_state"] = str(D)
                if v >= 6:
                    # KIP-1043: from v6 a missing group is an error rather than a Dead placeholder.
                    base["error_code"] = err.GROUP_ID_NOT_FOUND
                    base["error_message"] = (
                        f"Group {gid} is not a classic group."  # GroupMetadataManager.classicGroup
                        if self.consumer.group(gid) is not None
                        else f"Group {gid} not found."
                    )
            else:
                stable = group.is_in(S)
                base["group_state"] = str(group.state)
                base["protocol_type"] = group.protocol_type or ""
                base["protocol_data"] = (group.protocol_name or "") if stable else ""
                # Outside Stable, Kafka's ClassicGroupMember.describeNoMetadata() leaves out the
                # metadata but still reports the member's last assignment.
                base["members"] = [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                        "member_assignment": m.assignment,
                    }
                    for m in group.members.values()
                ]
            if base["error_code"] != err.NONE:
                # KafkaApis.handleDescribeGroupsRequest sets authorized operations only on the
                # groups described without an error.
                base["authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED
            described.append(base)
        self._respond(ctx, {"throttle_time_ms": 0, "groups": described})

    def _list_groups(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        # GroupMetadataManager.listGroups lower-cases and trims the state filters (String.trim:
        # every char <= U+0020 at either end); the type filters are only lower-cased.
        states = {s.lower().strip(_JAVA_TRIMMED) for s in (req.get("states_filter") or [])} if v >= 4 else set()
        types = {t.lower() for t in (req.get("types_filter") or [])} if v >= 5 else set()
        # Each broker lists the groups it coordinates (KafkaApis asks its own coordinator).
        owner_ids, receiver, n = self.ownership.owner_ids, self.runtime.receiver, self.config.num_offsets_partitions
        if any(owner_ids[p] == receiver for p in self.runtime.loading):
            return self._respond(
                ctx, {"throttle_time_ms": 0, "error_code": err.COORDINATOR_LOAD_IN_PROGRESS, "groups": []}
            )
        listed = []
        if not types or "classic" in types:
            for gid, group in self.groups.items():
                if group.is_in(D) or (states and str(group.state).lower() not in states):
                    continue
                if owner_ids[partition_for(gid, n)] != receiver:
                    continue
                listed.append(
                    {
                        "group_id": gid,
                        "protocol_type": group.protocol_type or "",
                        "group_state": str(group.state),
                        "group_type": "classic",
                    }
                )
        if not types or "consumer" in types:
            # ConsumerGroup: protocol type "consumer", states Empty/Assigning/Reconciling/Stable
            for gid, cgroup in self.consumer.groups.groups.items():
                state = cgroup.state.value
                if (states and state.lower() not in states) or owner_ids[partition_for(gid, n)] != receiver:
                    continue
                listed.append(
                    {"group_id": gid, "protocol_type": "consumer", "group_state": state, "group_type": "consumer"}
                )
        self._respond(ctx, {"throttle_time_ms": 0, "error_code": err.NONE, "groups": listed})

    def _delete_groups(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        results: list[dict[str, Any]] = []
        by_partition: dict[int, list[tuple[dict[str, Any], ClassicGroup]]] = {}
        # KafkaApis.handleDeleteGroupsRequest answers each group once (groupsNames.distinct), and
        # "" is a group id like any other (GroupCoordinatorService.deleteGroups).
        consumer_deletes: list[tuple[dict[str, Any], str]] = []
        for gid in dict.fromkeys(req.get("groups_names") or []):
            entry = {"group_id": gid, "error_code": err.NONE}
            results.append(entry)
            code = self._route_error(gid)
            group = self.groups.get(gid) if not code else None
            cgroup = self.consumer.group(gid) if not code else None
            if code:
                entry["error_code"] = code
            elif cgroup is not None:
                # ConsumerGroup.validateDeleteGroup: only an Empty consumer group can go
                if gid in self._consumer_busy:  # a write in flight may be rolled back: retry later
                    entry["error_code"] = err.COORDINATOR_LOAD_IN_PROGRESS
                elif cgroup.members:
                    entry["error_code"] = err.NON_EMPTY_GROUP
                else:
                    consumer_deletes.append((entry, gid))
            elif group is None or group.is_in(D):
                entry["error_code"] = err.GROUP_ID_NOT_FOUND
            elif not group.is_in(E):
                entry["error_code"] = err.NON_EMPTY_GROUP
            else:
                by_partition.setdefault(self.partition_for(gid), []).append((entry, group))

        waiting = (
            len(by_partition)
            + len(consumer_deletes)
            + sum(1 for _e, gid in consumer_deletes if self.offset_manager.keys_of(gid))
        )
        if not waiting:
            return self._respond(ctx, {"throttle_time_ms": 0, "results": results})

        for entry, gid in consumer_deletes:
            # the group's own tombstones apply at once (a heartbeat arriving meanwhile starts a new
            # group, which the tombstones' later replay must not touch); its offsets go when durable
            offsets: list[Record] = [
                (OffsetCommitKey(gid, t, p), None) for t, p in sorted(self.offset_manager.keys_of(gid))
            ]

            def consumer_done(error: int | None, entry: dict[str, Any] = entry) -> None:
                nonlocal waiting
                if error is not None:
                    entry["error_code"] = err.append_error_to_response_error(error)
                waiting -= 1
                if waiting == 0:
                    self._respond(ctx, {"throttle_time_ms": 0, "results": results})

            self._delete_consumer_group(gid, "deleted by DeleteGroups", consumer_done)
            if offsets:
                self._append(gid, offsets, consumer_done)

        for batch in by_partition.values():
            records: list[Record] = []
            for _entry, group in batch:
                records.extend(self._delete_group_now(group, "deleted by DeleteGroups"))

            def done(error: int | None, batch: list[tuple[dict[str, Any], ClassicGroup]] = batch) -> None:
                nonlocal waiting
                if error is not None:
                    for entry, group in batch:
                        entry["error_code"] = err.append_error_to_response_error(error)
                        self._restore_group(group.group_id)
                waiting -= 1
                if waiting == 0:
                    self._respond(ctx, {"throttle_time_ms": 0, "results": results})

            self._append(batch[0][1].group_id, records, done)

    def _delete_group_now(self, group: ClassicGroup, reason: str) -> list[Record]:
        """Kill an Empty group in memory and return the tombstones that make it so on disk."""
        gid = group.group_id
        keys = self.offset_manager.keys_of(gid)
        records: list[Record] = [(OffsetCommitKey(gid, t, p), None) for t, p in sorted(keys)]
        records.append((GroupMetadataKey(gid), None))
        group.transition_to(D, self._now)
        self._forget_group(group)
        del self.groups[gid]
        self._glog(group).info("group_deleted", reason=reason, offsets=len(keys))
        return records

    # ==========================================================================================
    # KIP-848 consumer groups (the sans-IO core is groupd.coordinator.consumer)
    # ==========================================================================================

    def _consumer_error(self, code: int, message: str | None = None) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": message if message is not None else default_message(code),
            "member_id": None,
            "member_epoch": 0,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

    def _refresh_topics(self) -> None:
        if self._topics_image is not None:
            image = self._topics_image()
            if image is not self.consumer.topics:
                self.consumer.set_topics(image)

    def _consumer_heartbeat(
        self, version: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str
    ) -> None:
        """ConsumerGroupHeartbeat (``GroupCoordinatorService.consumerGroupHeartbeat``). The records are
        applied at once and the answer waits until they are durable, as Kafka's runtime does; the
        group's next request waits for that too (``_consumer_write``)."""
        gid = req["group_id"]
        code = self._route_error(gid) if gid else err.NONE
        if code != err.NONE:
            self._respond(ctx, self._consumer_error(code))
            return
        busy = self._consumer_busy.get(gid)
        if busy is not None:
            receiver = self.runtime.receiver  # it is answered later, as the broker it came to

            def later() -> None:
                self.runtime.receiver = receiver
                self._consumer_heartbeat(version, req, ctx, client_id, client_host)

            busy.append(later)
            return
        pre: list[Record] = []
        classic = self.groups.get(gid)
        self._refresh_topics()
        if classic is not None or gid in self.group_records:
            if classic is not None and classic.members:  # members only pending: Empty (ClassicGroup.isEmpty)
                # getOrMaybeCreateConsumerGroup: a joining member upgrades the classic group when
                # validateOnlineUpgrade allows it; otherwise the group is not a consumer group
                message = self._online_upgrade_refusal(classic, req)
                if message is None:
                    invalid = self.consumer.check_request(req, version)
                    if invalid is not None:  # answered before the group is touched
                        self._respond(ctx, invalid)
                        return
                    message = self._convert_to_consumer_group(classic, pre)
                if message is not None:
                    self._respond(ctx, self._consumer_error(err.GROUP_ID_NOT_FOUND, message))
                    return
            if req.get("member_epoch") == 0:
                # an empty classic group makes way for the consumer group (maybeDeleteEmptyClassicGroup)
                old = self.groups.pop(gid, None)
                if old is not None:
                    self._forget_group(old)
                if gid in self.group_records:
                    pre.append((GroupMetadataKey(gid), None))
                    self.group_records.pop(gid)
        result = self.consumer.heartbeat(self._now, req, version, client_id=client_id, client_host=client_host)
        records: list[Record] = [*pre, *result.records]
        if not records:
            self._respond(ctx, result.response)
            return
        response = result.response

        def on_done(code: int | None) -> None:
            if code is None:
                self._respond(ctx, response)
            else:
                self._respond(ctx, self._consumer_error(err.append_error_to_response_error(code)))

        self._consumer_write(gid, records, on_done)

    def _snapshot_consumer_group(self, gid: str) -> None:
        # the first snapshot before a write wins: an upgrade applies the conversion, then the heartbeat
        if gid in self._consumer_snapshot:
            return
        g = self.consumer.group(gid)
        self._consumer_snapshot[gid] = None if g is None else g.copy()

    def _consumer_write(self, gid: str, records: list[Record], on_done: Callable[[int | None], None]) -> None:
        """Append records the consumer-group core has just applied. Until they are durable the group's
        next requests and deadlines wait (a per-group actor): if the write fails, the group goes back
        to its copy from before it (Kafka's runtime reverts to its last committed offset), and nothing
        was built on the records that are not in the log."""
        snapshot = self._consumer_snapshot.pop(gid, None)
        self._consumer_busy[gid] = deque()
        downgrade = self.consumer.take_downgrade(gid)
        if downgrade is not None:
            records = [*records, self._convert_to_classic_group(downgrade)]
        undo = self._classic_undo.pop(gid, None)

        def done(code: int | None) -> None:
            if code is not None:
                self.log.warning("consumer_group_write_failed", group=gid, error=code, records=len(records))
                if downgrade is not None:
                    classic = self.groups.pop(gid, None)
                    if classic is not None:
                        self._forget_group(classic)
                    self.group_records.pop(gid, None)
                if snapshot is None:
                    self.consumer.groups.groups.pop(gid, None)
                else:
                    self.consumer.groups.groups[gid] = snapshot
                    self.consumer.end_load(self._now, [gid])  # its members' sessions start again
                if undo is not None:
                    undo()
            on_done(code)
            waiting = self._consumer_busy.pop(gid)
            while waiting and gid not in self._consumer_busy:
                waiting.popleft()()
            if waiting:  # one of them wrote again: the rest stay behind that write
                self._consumer_busy[gid].extend(waiting)

        self._append(gid, records, done, applied=True)

    def _delete_consumer_group(
        self, gid: str, reason: str, on_done: Callable[[int | None], None] | None = None
    ) -> None:
        """Delete an empty consumer group now: its tombstones, applied and written like its other records."""
        records: list[Record] = list(self.consumer.groups.tombstones(gid))
        self._snapshot_consumer_group(gid)
        for r in records:
            self.consumer.replay(r)  # type: ignore[arg-type]
        self.log.info("consumer_group_deleted", group=gid, reason=reason)
        self._consumer_write(gid, records, on_done or (lambda code: None))

    def _fire_consumer(self, key: tuple[Any, ...]) -> None:
        gid = key[0]
        busy = self._consumer_busy.get(gid)
        if busy is not None:
            busy.append(lambda: self._fire_consumer(key))
            return
        records = self.consumer.fire(key, self._now)
        if records:
            self._consumer_write(gid, list(records), lambda code: None)

    def _consumer_describe(self, version: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str) -> None:
        """ConsumerGroupDescribe (``GroupMetadataManager.consumerGroupDescribe``)."""
        self._refresh_topics()
        names = {tid: name for name, (tid, _n) in self.consumer.topics.topics.items()}

        def assignment(parts: Any) -> dict[str, Any]:
            return {
                "topic_partitions": [
                    {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                    for t, ps in sorted(parts.items())
                ]
            }

        out = []
        for gid in req["group_ids"]:
            entry: dict[str, Any] = {
                "group_id": gid,
                "error_code": 0,
                "error_message": None,
                "group_state": "",
                "group_epoch": 0,
                "assignment_epoch": 0,
                "assignor_name": "",
                "members": [],
            }
            code = self._route_error(gid)
            g = self.consumer.group(gid) if code == err.NONE else None
            if code != err.NONE:
                entry["error_code"] = code
            elif g is None:
                entry["error_code"] = err.GROUP_ID_NOT_FOUND  # and no message, as Kafka's consumerGroupDescribe
            else:
                entry.update(
                    group_state=g.state.value,
                    group_epoch=g.group_epoch,
                    assignment_epoch=g.target_epoch,
                    assignor_name=self.consumer.preferred_assignor(g.members),
                    members=[
                        {
                            "member_id": m.member_id,
                            "instance_id": m.instance_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.member_epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": list(m.subscribed_topic_names),
                            "subscribed_topic_regex": m.subscribed_topic_regex,
                            "assignment": assignment(m.assigned),
                            "target_assignment": assignment(g.target.get(m.member_id, {})),
                            # v1+: 0 CLASSIC for a member speaking the classic protocol, 1 CONSUMER
                            "member_type": 0 if m.uses_classic_protocol else 1,
                        }
                        for m in sorted(g.members.values(), key=lambda m: m.member_id)
                    ],
                )
                if req.get("include_authorized_operations"):
                    entry["authorized_operations"] = GROUP_AUTHORIZED_OPERATIONS
            out.append(entry)
        self._respond(ctx, {"throttle_time_ms": 0, "groups": out})

    # ==========================================================================================
    # Migration between the classic and the consumer protocol (KIP-848's upgrade path)
    # ==========================================================================================

    def _online_upgrade_refusal(self, classic: ClassicGroup, req: dict[str, Any]) -> str | None:
        """``validateOnlineUpgrade`` (why a ConsumerGroupHeartbeat may not turn this live classic group
        into a consumer group), or None when it may."""
        gid = classic.group_id
        refused = f"Group {gid} is not a consumer group."
        if req.get("member_epoch") != 0:
            return refused
        if not self.consumer.config.upgrade_enabled:
            self.log.info("online_upgrade_refused", group=gid, reason="the online upgrade is disabled")
            return refused
        if not classic.uses_consumer_protocol() or not classic.members:
            self.log.info("online_upgrade_refused", group=gid, reason="not the consumer embedded protocol")
            return refused
        if len(classic.members) > self.consumer.config.max_size:
            self.log.info("online_upgrade_refused", group=gid, reason="larger than group.consumer.max.size")
            return refused
        return None

    def _convert_to_consumer_group(self, classic: ClassicGroup, pre: list[Record]) -> str | None:
        """``convertToConsumerGroup``: parked JoinGroup/SyncGroup requests get REBALANCE_IN_PROGRESS (the
        members rejoin the consumer group), the classic group's tombstone goes into ``pre`` and the
        consumer group's records are applied (``ConsumerGroup.fromClassicGroup``). A refusal's message
        when the embedded protocol cannot be read."""
        gid = classic.group_id
        specs = [
            ClassicMemberSpec(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                tuple(m.protocols),
                m.assignment,
            )
            for m in classic.members.values()
        ]
        self._snapshot_consumer_group(gid)
        try:
            converted = self.consumer.convert_from_classic(
                self._now, gid, classic.generation, classic.protocol_name, specs
            )
        except UpgradeRefused as e:  # malformed embedded protocol, user data, a partition twice
            self._consumer_snapshot.pop(gid, None)
            return e.message
        for member in list(classic.members.values()):
            if member.join_waiter is not None:
                w = member.join_waiter
                self._complete_join_waiter(
                    classic,
                    member,
                    self._join_response(w.version, err.REBALANCE_IN_PROGRESS, member_id=member.member_id),
                )
            self._complete_sync_waiter(member, self._sync_response(err.REBALANCE_IN_PROGRESS))
        self._forget_group(self.groups.pop(gid))
        old_record = self.group_records.pop(gid, None)
        pre.append((GroupMetadataKey(gid), None))
        pre.extend(converted)  # type: ignore[arg-type]

        def undo() -> None:
            if old_record is not None:
                self.group_records[gid] = old_record
            self._restore_group(gid)

        self._classic_undo[gid] = undo
        self.log.info("group_upgraded", group=gid, members=len(specs), generation=classic.generation)
        return None

    def _convert_to_classic_group(self, d: Downgrade) -> Record:
        """``convertToClassicGroup`` / ``ClassicGroup.fromConsumerGroup``: the classic members that stay
        form a Stable classic group at the group epoch, each with its target assignment, and a rebalance
        starts at once. Applied now (Kafka updates the state directly too); its record returned."""
        cg = d.group
        gid = cg.group_id
        group = ClassicGroup(gid, S, self._now, generation=cg.group_epoch, protocol_type="consumer")
        versions: dict[str, int] = {}
        for mid, m in cg.members.items():
            if mid in d.leaving or m.classic is None:
                continue
            protocols = [(p.name, p.metadata) for p in m.classic.supported_protocols]
            group.add(
                Member(
                    member_id=mid,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.classic.session_timeout_ms,
                    protocol_type="consumer",
                    protocols=protocols,
                ),
                None,
            )
            try:
                versions[mid] = decode_subscription(protocols[0][1]).version if protocols else 0
            except ConsumerProtocolError:
                versions[mid] = 0
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        for mid, member in group.members.items():
            member.assignment = self.consumer.assignment_bytes(cg.target.get(mid, {}), versions[mid])
        value = self._group_metadata_record(group, {mid: m.assignment for mid, m in group.members.items()})
        self.groups[gid] = group
        self.group_records[gid] = value
        for member in group.members.values():
            self._reschedule_heartbeat(group, member)
        self.log.info("group_downgraded", group=gid, members=len(group.members), generation=group.generation)
        if d.rebalance:
            self._prepare_rebalance(group, f"Downgrade group {gid} from consumer to classic.")
        return (GroupMetadataKey(gid), value)

    def _consumer_group_request(self, gid: str, retry: Callable[[], None], run: Callable[[], None]) -> None:
        """A classic request to a consumer group: behind the group's write in flight, if any."""
        busy = self._consumer_busy.get(gid)
        if busy is not None:
            busy.append(retry)
            return
        run()

    def _write_then(self, gid: str, records: list[Record], answer: Callable[[int], None]) -> None:
        """Write a consumer group's applied records, then ``answer`` with NONE or the write's error."""
        if not records and self.consumer.downgrades.get(gid) is None:
            answer(err.NONE)
            return
        self._consumer_write(
            gid, records, lambda code: answer(err.NONE if code is None else err.append_error_to_response_error(code))
        )

    def _classic_join_to_consumer_group(
        self, v: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str
    ) -> None:
        """``classicGroupJoinToConsumerGroup``: answered when its records are durable."""
        gid = req["group_id"]
        result = self.consumer.classic_join(self._now, req, v, client_id=client_id, client_host=client_host)
        r = result.response
        if r["error_code"] != err.NONE:
            self._respond(ctx, self._join_response(v, r["error_code"], member_id=r.get("member_id") or ""))
            return

        def answer(code: int) -> None:
            if code != err.NONE:
                self._respond(ctx, self._join_response(v, code, member_id=r["member_id"]))
                return
            self._respond(
                ctx,
                self._join_response(
                    v,
                    err.NONE,
                    member_id=r["member_id"],
                    generation=r["generation_id"],
                    protocol_type="consumer",
                    protocol_name=r["protocol_name"],
                ),
            )

        self._write_then(gid, list(result.records), answer)

    def _classic_sync(self, v: int, req: dict[str, Any], ctx: Any) -> None:
        """``classicGroupSyncToConsumerGroup``."""
        r = self.consumer.classic_sync(self._now, req, v)
        if r["error_code"] != err.NONE:
            self._respond(ctx, self._sync_response(r["error_code"]))
            return
        self._respond(ctx, self._sync_response(err.NONE, r["assignment"], r["protocol_type"], r["protocol_name"]))

    def _classic_leave(self, v: int, gid: str, identities: list[tuple[str, str | None, str | None]], ctx: Any) -> None:
        """``classicGroupLeaveToConsumerGroup``: answered when the removal is durable."""
        codes, records = self.consumer.classic_leave(self._now, gid, [(mid, iid) for mid, iid, _r in identities])
        results = [
            {"member_id": mid, "group_instance_id": iid, "error_code": code}
            for (mid, iid, _r), code in zip(identities, codes, strict=True)
        ]
        for (mid, _iid, reason), code in zip(identities, codes, strict=True):
            if code == err.NONE:
                self.log.info("member_left", group=gid, member=mid, reason=reason, protocol="classic")

        def answer(code: int) -> None:
            if code != err.NONE:
                self._respond(ctx, {"throttle_time_ms": 0, "error_code": code, "members": []})
            else:
                self._respond_leave(ctx, v, results)

        self._write_then(gid, records, answer)

    _handlers: dict[str, Callable[..., None]] = {
        "ConsumerGroupHeartbeat": _consumer_heartbeat,
        "ConsumerGroupDescribe": _consumer_describe,
        "FindCoordinator": _find_coordinator,
        "JoinGroup": _join_group,
        "SyncGroup": _sync_group,
        "Heartbeat": _heartbeat,
        "LeaveGroup": _leave_group,
        "DescribeGroups": _describe_groups,
        "ListGroups": _list_groups,
        "DeleteGroups": _delete_groups,
        "OffsetCommit": lambda self, v, req, ctx, _cid, _host: self.offset_manager.commit(v, req, ctx),
        "OffsetFetch": lambda self, v, req, ctx, _cid, _host: self.offset_manager.fetch(v, req, ctx),
        "OffsetDelete": lambda self, v, req, ctx, _cid, _host: self.offset_manager.delete(v, req, ctx),
        "TxnOffsetCommit": lambda self, v, req, ctx, _cid, _host: self.offset_manager.commit_transactional(v, req, ctx),
    }
