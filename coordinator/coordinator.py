"""The group coordinator's shard (Kafka's ``GroupCoordinatorShard``) over a ``CoordinatorRuntime``.

The shell feeds it requests (``handle``), time (``tick``) and the outcome of writes (``append_done``)
and re-arms one wake-up at ``next_deadline()`` after each call. ``HANDLERS`` names the manager of
each API (``managers.py``). Persisted state is a fold over records: ``replay`` (and its
transactional twins) routes each by type and is its only mutator, live and at load alike; the rest
(parked requests, sessions, a rebalance in flight) is soft state a restart loses, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import structlog

from . import errors as err
from . import records as rec
from .classic.group import ClassicGroup
from .config import CoordinatorConfig
from .consumer import CONSUMER_KEY_TYPES, ConsumerGroupConfig, IllegalRecord, TopicsImage  # none of the core
from .listener import CoordinatorListener
from .managers import build_managers
from .records import OffsetCommitKey
from .result import Result, make_append
from .routing import Node, PartitionOwnership
from .runtime import CoordinatorRuntime
from .share import SHARE_KEY_TYPES, ShareGroupConfig
from .share_requests import SHARE_HANDLERS

# API -> (collaborator, its method(version, request, ctx, client_id, client_host)).
HANDLERS: dict[str, tuple[str, str]] = {
    "FindCoordinator": ("finder", "find_coordinator"),
    "JoinGroup": ("join", "join_group"),
    "SyncGroup": ("classic", "sync_group"),
    "Heartbeat": ("classic", "heartbeat"),
    "LeaveGroup": ("classic", "leave_group"),
    "DescribeGroups": ("admin", "describe_groups"),
    "ListGroups": ("admin", "list_groups"),
    "DeleteGroups": ("admin", "delete_groups"),
    "OffsetCommit": ("offset_manager", "commit"),
    "OffsetFetch": ("offset_manager", "fetch"),
    "OffsetDelete": ("offset_manager", "delete"),
    "TxnOffsetCommit": ("offset_manager", "commit_transactional"),
    "ConsumerGroupHeartbeat": ("consumer_requests", "heartbeat"),
    "ConsumerGroupDescribe": ("consumer_requests", "describe"),
    **SHARE_HANDLERS,
}
HANDLED_APIS = tuple(HANDLERS)

_log = structlog.get_logger("groupd.coordinator")


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
        share_config: ShareGroupConfig | None = None,
    ) -> None:
        config = config or CoordinatorConfig()
        self.log = log = logger or _log
        self.runtime = rt = CoordinatorRuntime(
            ownership or PartitionOwnership(Node(0, "localhost", 9092), config.num_offsets_partitions),
            result_factory=Result,
            append_factory=make_append,
            on_unload=self._on_unload,
            log=log,
        )
        m = build_managers(
            config, rt, log, listener, uuid_factory, topics_image, topic_partitions, consumer_config, share_config
        )
        # persisted, changed only by replay(): each classic group's last durable group-metadata record
        self.group_records, self.consumer, self._deadlines = m.group_records, m.consumer, m.deadlines
        self.classic, self.join, self.admin, self.finder = m.classic, m.join, m.admin, m.finder
        self.consumer_requests, self.migration, self.offset_manager = m.consumer_requests, m.migration, m.offset_manager
        self.share, self.share_requests = m.share, m.share_requests
        m.hold_cores(self)  # self.consumer and self.share: stand-ins until first used (coordinator/lazy.py)
        # The load's fast path for plain commits still in bytes (the rest: decode_record + replay).
        self.replay_encoded = self.offset_manager.replay_encoded
        self._handlers = {api: getattr(getattr(self, owner), name) for api, (owner, name) in HANDLERS.items()}
        self.groups: dict[str, ClassicGroup] = self.classic.groups
        self._retention_armed, self._managers = False, m

    # Set by the shell after construction: metrics, KIP-890 verification of TxnOffsetCommit by the
    # transaction coordinator, who coordinates a transactional id (FindCoordinator key type 1).
    listener = property(lambda s: s.classic.listener, lambda s, v: setattr(s.classic, "listener", v))
    txn_verifier = property(
        lambda s: s.offset_manager.txn_verifier, lambda s, v: setattr(s.offset_manager, "txn_verifier", v)
    )
    txn_coordinator = property(lambda s: s.finder.txn_coordinator, lambda s, v: setattr(s.finder, "txn_coordinator", v))
    ownership = property(lambda s: s.runtime.ownership, lambda s, v: setattr(s.runtime, "ownership", v))
    config = property(lambda s: s.classic.config, lambda s, v: s._managers.set_config(v))

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
        """One request, answered in the Result or a later one; ``node_id``: the broker it came to
        (None: the local node), NOT_COORDINATOR unless it leads the group's partition."""
        handler = self._handlers.get(api_name)
        if handler is None:
            raise ValueError(f"the coordinator does not handle {api_name!r}; it handles {', '.join(HANDLED_APIS)}")
        self.runtime.receive(node_id)
        self._begin(now_ms)
        handler(version, request, ctx, client_id or "", client_host or "")
        return self.runtime.finish()

    def heartbeat(self, now_ms: int, version: int, request: dict[str, Any], node_id: int | None = None) -> int:
        """``handle(now_ms, "Heartbeat", ...)`` without a Result (the shell's hot path)."""
        self.enter(now_ms, node_id)
        return self.classic.heartbeat_code(version, request)

    def enter(self, now_ms: int, node_id: int | None = None) -> None:
        """Start a hot-path call, one that answers nothing through a Result (Heartbeat, a steady one)."""
        rt = self.runtime  # rt.receive, without its call (issue 26)
        rt.receiver, rt.now = (rt.local_id if node_id is None else node_id), now_ms
        if not self._retention_armed:
            self._begin(now_ms)

    def tick(self, now_ms: int) -> Result:
        """Fire every deadline that is due: sessions, join/sync phases, initial delay steps, retention."""
        self._begin(now_ms)
        horizon = self._deadlines.seq
        while (key := self._deadlines.pop_due(now_ms, horizon)) is not None:
            if key[0] == "retention":
                self._deadlines.set(("retention",), now_ms + self.config.offsets_retention_check_interval_ms)
                self.offset_manager.cleanup_group_metadata()
            else:
                self.classic.fire(key)
        for key in self.consumer.due(now_ms):
            self.consumer_requests.fire(key)
        self.share_requests.tick(now_ms)
        return self.runtime.finish()

    def next_deadline(self) -> int | None:
        due = (self._deadlines.next_deadline(), self.consumer.next_deadline(), self.share.next_deadline())
        return min((d for d in due if d is not None), default=None)

    def deadline_version(self) -> int:
        """Changes whenever a deadline may have moved earlier (else a wake-up is at worst early)."""
        return self._deadlines.seq + self.consumer.deadlines.seq + self.share.deadlines.seq

    def append_done(self, now_ms: int, token: int, error: BaseException | int | None = None) -> Result:
        """The shell reports that the append with ``token`` is durable (error None) or failed."""
        self._begin(now_ms)
        pending = self.runtime.complete(token)
        if pending is None:  # its partition was unloaded meanwhile: its requests were answered
            return self.runtime.finish()
        if error is None:
            extra = pending.extra
            if (marker := extra.get("marker")) is not None:
                self.replay_end_txn_marker(pending.partition, *extra["producer"], *marker)
            elif (producer := extra.get("producer")) is not None:
                for key, value in pending.records:
                    self.replay_transactional(key, value, *producer)
            elif (group := extra.get("native_group")) is not None:  # an OffsetCommit built in C
                self.offset_manager.replay_commit(group, pending.records)
            elif not extra.get("applied"):
                self.offset_manager.replay_batch(pending.records, self.replay)
            elif not extra.get("share"):  # a consumer group's records, applied when produced, are durable now
                key = pending.records[0][0]
                group_id = getattr(key, "group_id", None) or getattr(key, "group", "")
                self.listener.consumer_group_written(group_id, pending.records)
            pending.on_done(None)
        else:
            code = error if isinstance(error, int) else err.error_code_of(error)
            self.log.warning("append_failed", partition=pending.partition, records=len(pending.records), error=code)
            pending.on_done(code)
        return self.runtime.finish()

    def replay(self, key: rec.RecordKey, value: rec.RecordValue | None) -> None:
        """Apply one durable record to the persisted state: the live path and load alike."""
        if type(key) is OffsetCommitKey or isinstance(key, OffsetCommitKey):  # a load replays millions: first
            self.offset_manager.replay(key, value)  # type: ignore[arg-type]
        elif isinstance(key, rec.GroupMetadataKey):
            assert value is None or isinstance(value, rec.GroupMetadataValue)
            if value is None:
                self.group_records.pop(key.group, None)
            else:
                self.group_records[key.group] = value
        elif isinstance(key, CONSUMER_KEY_TYPES):
            try:
                self.consumer.replay((key, value))  # type: ignore[arg-type]
            except IllegalRecord as e:
                # Kafka fails the partition's load (IllegalStateException); groupd skips the one
                # record, as it skips a damaged batch, so the partition's other groups still load.
                self.log.warning("consumer_group_record_skipped", key=repr(key), error=str(e))
        elif isinstance(key, SHARE_KEY_TYPES):
            self.share_requests.replay(key, value)
        else:
            raise TypeError(f"not a __consumer_offsets record key: {key!r}")

    def replay_transactional(
        self, key: rec.RecordKey, value: rec.RecordValue | None, producer_id: int, producer_epoch: int
    ) -> None:
        """A durable record of a transactional batch: offset commits become pending for the producer."""
        if isinstance(key, rec.OffsetCommitKey):
            assert value is None or isinstance(value, rec.OffsetCommitValue)
            self.offset_manager.replay_transactional(
                self.partition_for(key.group), key, value, producer_id, producer_epoch
            )
        else:
            self.replay(key, value)

    def replay_end_txn_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int = -1
    ) -> None:
        """A durable end-transaction marker of ``partition``: the producer's pending offsets there
        commit or vanish (``replayEndTransactionMarker``)."""
        self.offset_manager.replay_end_txn_marker(partition, producer_id, producer_epoch, committed, coordinator_epoch)

    def write_txn_marker(
        self, now_ms: int, ctx: Any, partition: int, producer_id: int, epoch: int, committed: bool, coord_epoch: int
    ) -> Result:
        """WriteTxnMarkers to a ``__consumer_offsets`` partition (``completeTransaction``)."""
        self._begin(now_ms)
        self.offset_manager.write_txn_marker(ctx, partition, producer_id, epoch, committed, coord_epoch)
        return self.runtime.finish()

    def on_partitions_deleted(self, now_ms: int, topic_partitions: Iterable[tuple[str, int]]) -> Result:
        """Tombstone every group's offsets of deleted partitions (``onPartitionsDeleted``)."""
        self._begin(now_ms)
        self.offset_manager.on_partitions_deleted(topic_partitions)
        return self.runtime.finish()

    def expire_member(self, now_ms: int, group_id: str, member_id: str) -> tuple[int, Result]:
        """Expire a classic member's session now (fault injection, ``onExpireHeartbeat``)."""
        self._begin(now_ms)
        return self.classic.expire_member(group_id, member_id), self.runtime.finish()

    def trigger_rebalance(self, now_ms: int, group_id: str, reason: str = "triggered") -> tuple[int, Result]:
        """Start a rebalance of a classic group with members (fault injection, ``prepareRebalance``)."""
        self._begin(now_ms)
        return self.classic.trigger_rebalance(group_id, reason), self.runtime.finish()

    def begin_load(self, partition: int, epoch: int | None = None, node: Node | None = None) -> Result:
        """Start loading ``partition`` (``scheduleLoadOperation``); a stale election is ignored."""
        self._begin(self.runtime.now)
        self.runtime.begin_load(partition, epoch, node)
        return self.runtime.finish()

    def end_load(self, partition: int, now_ms: int | None = None, epoch: int | None = None) -> Result:
        """Bring the loaded partition's groups to life (``GroupMetadataManager.onLoaded``)."""
        self._begin(self.runtime.now if now_ms is None else now_ms)
        if self.runtime.end_load(partition, epoch):
            self._managers.on_loaded(partition)
        return self.runtime.finish()

    def unload_partition(self, now_ms: int, partition: int, epoch: int | None = None) -> Result:
        """Resign ``partition`` (``scheduleUnloadOperation``): NOT_COORDINATOR until elected again."""
        self._begin(now_ms)
        self.runtime.unload(partition, epoch)
        return self.runtime.finish()

    def _on_unload(self, partition: int, was_loading: bool, writes_abandoned: int) -> None:
        """``onUnloaded``: the partition's groups, offsets and timers leave memory, waiters answered."""
        self._managers.on_unloaded(partition, was_loading, writes_abandoned)

    def load(self, now_ms: int, records: Iterable[rec.Record]) -> Result:
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

    # Queries of the shell, ops and tests, answered by the runtime and the managers.
    partition_state = property(lambda s: s.runtime.state)  # "loading", "active" or "unloaded"
    partition_epoch = property(lambda s: s.runtime.epoch)  # of the last load or unload (-1: never)
    is_loading = property(lambda s: s.runtime.is_loading)  # (partition, epoch=None): is its replay still wanted
    pending_appends = property(lambda s: s.runtime.pending_appends)
    offsets = property(lambda s: s.offset_manager.offsets)  # group -> (topic, partition) -> value
    partition_for = property(lambda s: s.offset_manager.partition_for)
    group = property(lambda s: s.classic.groups.get)

    def _begin(self, now_ms: int) -> None:
        self.runtime.begin(now_ms)
        if not self._retention_armed:
            self._retention_armed = True
            self._deadlines.set(("retention",), now_ms + self.config.offsets_retention_check_interval_ms)
