"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and retention (Kafka's
OffsetMetadataManager).

Offsets are persisted state only: a commit becomes visible to OffsetFetch when its record is
durable and replayed, and is acknowledged to the committer at that moment too.

Transactional commits (TxnOffsetCommit, exactly-once consume-transform-produce) are written in a
transactional batch carrying the producer id and epoch. Replayed, they are *pending*: kept per
producer id, invisible to OffsetFetch (which answers the last committed offset, or
UNSTABLE_OFFSET_COMMIT when the fetch requires stable offsets). The transaction coordinator ends
the transaction with a marker in the same ``__consumer_offsets`` partition: COMMIT moves that
producer's pending offsets of the partition's groups into the committed ones, ABORT drops them
(``replayEndTransactionMarker``). A pending offset older than a later plain commit of the same
partition is not materialized: Kafka keeps "the most recent committed offset" by record offset;
here the replay order (the log order within a partition) stands for the record offset.

The shard holds an ``OffsetManager`` and hands it its collaborators: the coordinator runtime
(answer this request, route this append, is this partition loading), the classic groups
(``ClassicGroups``: keep a member's session alive, forget or restore a group) and the consumer
groups (their core, and ``ConsumerWrites``), as Kafka's OffsetMetadataManager works with its
GroupMetadataManager. Each kind of group validates its own commits (``validate_offset_commit``).
This module imports neither the shard nor the group managers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from groupd.storage.native import native as _native

from . import errors as err
from .classic.group import CR, PR, ClassicGroup, D, E, Member, S
from .config import CoordinatorConfig
from .native import CommitBody, native_available, native_commit
from .records import OffsetCommitKey, OffsetCommitValue, Record
from .result import Result
from .retention import OffsetRetention
from .routing import partition_for
from .runtime import CoordinatorRuntime
from .serde import _CACHE_MAX as SERDE_CACHE_MAX
from .serde import _DECODED_KEYS as serde_keys  # bytes -> key, filled by decode_key
from .serde import _V3_NO_METADATA as V3_NO_METADATA
from .serde import decode_key

if TYPE_CHECKING:  # the consumer core is imported by its first use (coordinator/lazy.py)
    from .consumer import ConsumerGroupManager

# The C twin of replay_plain_commits (None without the extension or with GROUPD_NO_NATIVE=1).
_fold_commits: Callable[..., int] | None = None if _native is None else _native.fold_commits

Offsets = dict[str, dict[tuple[str, int], OffsetCommitValue]]
OFFSETS_TOPIC = "__consumer_offsets"
_dict_get = dict.get
TopicPartition = tuple[str, int]


class PendingOffset:
    """One pending transactional offset: its value, its place in the replay order, and whether a
    later commit of the same partition makes it stale (then a COMMIT marker skips it)."""

    __slots__ = ("seq", "stale", "value")

    def __init__(self, value: OffsetCommitValue, seq: int) -> None:
        self.value = value
        self.seq = seq
        self.stale = False

    def __eq__(self, other: object) -> bool:
        # The replay position is relative (a reload numbers records afresh); what it decides is
        # the staleness, which is compared.
        return isinstance(other, PendingOffset) and (self.value, self.stale) == (other.value, other.stale)

    def __repr__(self) -> str:
        return f"PendingOffset({self.value!r}, stale={self.stale})"


class ClassicGroups(Protocol):
    """The classic groups as offsets see them (``ClassicGroupManager``, Kafka's GroupMetadataManager)."""

    groups: dict[str, ClassicGroup]

    def glog(self, group: ClassicGroup, **kw: Any) -> Any: ...
    def debug_enabled(self) -> bool: ...
    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None: ...
    def forget_group(self, group: ClassicGroup) -> None: ...
    def restore_group(self, group_id: str) -> None: ...


class ConsumerWrites(Protocol):
    """The consumer groups' writes as offsets see them (``ConsumerGroupRequests``)."""

    # a consumer group with a write in flight -> what waits behind it
    busy: dict[str, Any]

    def delete_consumer_group(self, gid: str, reason: str) -> None: ...


class OffsetManager:
    def __init__(
        self,
        config: CoordinatorConfig,
        runtime: CoordinatorRuntime[Result],
        classic: ClassicGroups,
        consumer: ConsumerGroupManager,
        consumer_side: ConsumerWrites,
        *,
        log: Any,
        topic_partitions: Callable[[str], int | None] | None = None,
    ) -> None:
        self.config = config
        self.rt = runtime
        self.classic = classic
        self.consumer = consumer
        self.consumer_side = consumer_side
        self.share_side: Any = None  # ShareGroupRequests, wired by the shard: a share group has no offsets here
        self.log = log
        # None means "every topic exists": tests of group logic need no topic catalogue.
        self.topic_partitions = topic_partitions
        # (transactional id, producer id, epoch, topic, partition) -> the transaction coordinator's
        # verify_only answer for that partition (KIP-890); None: transactional writes are not verified.
        self.txn_verifier: Callable[[str, int, int, str, int], int] | None = None
        # Persisted state, changed only by replay().
        self.offsets: Offsets = {}
        # Commits written but not yet durable, per group: a group with some is not deleted under them.
        # Group -> write number -> that write's records: one entry per commit, not per partition
        # (the partitions are only needed by the rare keys_of and topic deletion).
        self.inflight: dict[str, dict[int, list[Record]]] = {}
        self._write_seq = 0
        # Partitions of deleted topics whose offsets wait for a __consumer_offsets partition to
        # finish loading: __consumer_offsets partition -> topic -> partition indexes.
        self.deleted_while_loading: dict[int, dict[str, set[int]]] = {}
        # Persisted too (replay only): Kafka's pendingTransactionalOffsets, producer id -> group ->
        # partition -> pending offset, and its openTransactions index, group -> partition ->
        # producer ids with a pending offset there.
        self.pending: dict[int, dict[str, dict[TopicPartition, PendingOffset]]] = {}
        self.open_txns: dict[str, dict[TopicPartition, set[int]]] = {}
        # The producer state of each __consumer_offsets partition (what Kafka's log keeps in its
        # ProducerStateManager): (partition, producer id) -> [epoch, coordinator epoch] last seen.
        self.producers: dict[tuple[int, int], list[int]] = {}
        self._seq = 0
        self.retention = OffsetRetention(self)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_offsets_partitions)

    def groups_with_pending_of(self, partition: int) -> list[str]:
        """The groups of ``partition`` with pending transactional offsets."""
        n = self.config.num_offsets_partitions
        return [g for g in self.open_txns if partition_for(g, n) == partition]

    def on_unloaded(self, partition: int) -> None:
        """The partition's offsets, commits in flight, pending offsets and producer epochs leave
        memory (a load replays them)."""
        n = self.config.num_offsets_partitions
        for store in (self.inflight, self.offsets):
            for gid in [g for g in store if partition_for(g, n) == partition]:
                del store[gid]
        self.forget_groups(self.groups_with_pending_of(partition))
        self.forget_partition_producers(partition)

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """Apply one durable offset record (a commit, or a tombstone when ``value`` is None)."""
        group_offsets = self.offsets.get(key.group)
        if value is not None:
            if group_offsets is None:
                group_offsets = self.offsets[key.group] = {}
            group_offsets[(key.topic, key.partition)] = value
            if self.open_txns:
                self._supersede(key.group, (key.topic, key.partition), None)
        else:
            if group_offsets is not None:
                group_offsets.pop((key.topic, key.partition), None)
                if not group_offsets:
                    del self.offsets[key.group]
            if self.open_txns:
                self._drop_pending(key.group, (key.topic, key.partition))

    def replay_batch(self, records: list[Record], other: Callable[[Any, Any], None]) -> None:
        """``replay`` of each record of one durable append (``other`` replays what is not an offset
        commit): a commit's 100 records in one loop, without two calls per record."""
        if self.open_txns:  # pending transactional offsets to supersede or drop: record by record
            for key, value in records:
                if type(key) is OffsetCommitKey:
                    self.replay(key, value)
                else:
                    other(key, value)
            return
        offsets = self.offsets
        gid = group_offsets = None
        for key, value in records:
            if type(key) is not OffsetCommitKey or value is None:
                if type(key) is OffsetCommitKey:
                    self.replay(key, None)
                else:
                    other(key, value)
                gid = None  # a tombstone may have dropped the group's dict
                continue
            if key.group != gid:
                gid = key.group
                group_offsets = offsets.get(gid)
                if group_offsets is None:
                    group_offsets = offsets[gid] = {}
            group_offsets[(key.topic, key.partition)] = value  # type: ignore[index]

    def replay_encoded(self, records: list, start: int) -> int:
        """The load's fast path for plain commits still in bytes: ``replay_plain_commits``, or its
        C twin (``storage/_native.c`` ``fold_commits``) where it is built."""
        if self.open_txns:
            return start
        if _fold_commits is not None:
            return _fold_commits(
                self.offsets, records, start, serde_keys, SERDE_CACHE_MAX, OffsetCommitKey, OffsetCommitValue
            )
        return replay_plain_commits(self.offsets, records, start)

    def replay_transactional(
        self, partition: int, key: OffsetCommitKey, value: OffsetCommitValue | None, producer_id: int, epoch: int
    ) -> None:
        """Apply one offset record of a transactional batch (``OffsetMetadataManager.replay`` with a
        producer id): a value becomes pending for that producer; a tombstone acts as any other."""
        self._seen_producer(partition, producer_id, epoch, None)
        if value is None:
            return self.replay(key, None)
        gid, tp = key.group, (key.topic, key.partition)
        self._seq += 1
        self.pending.setdefault(producer_id, {}).setdefault(gid, {})[tp] = PendingOffset(value, self._seq)
        self.open_txns.setdefault(gid, {}).setdefault(tp, set()).add(producer_id)

    def replay_end_txn_marker(
        self, partition: int, producer_id: int, epoch: int, committed: bool, coordinator_epoch: int = -1
    ) -> None:
        """``replayEndTransactionMarker`` for one ``__consumer_offsets`` partition: the producer's
        pending offsets of that partition's groups are committed or dropped."""
        self._seen_producer(partition, producer_id, epoch, coordinator_epoch)
        by_group = self.pending.get(producer_id)
        if not by_group:
            return
        for gid in [g for g in self.groups_with_pending_of(partition) if g in by_group]:
            for tp, entry in by_group.pop(gid).items():
                self._close_txn(gid, tp, producer_id)
                if committed and not entry.stale:
                    self.offsets.setdefault(gid, {})[tp] = entry.value
                    self._supersede(gid, tp, entry.seq)
        if not by_group:
            del self.pending[producer_id]

    def _seen_producer(self, partition: int, producer_id: int, epoch: int, coordinator_epoch: int | None) -> None:
        state = self.producers.get((partition, producer_id))
        if state is None:
            self.producers[(partition, producer_id)] = [epoch, -1 if coordinator_epoch is None else coordinator_epoch]
            return
        state[0] = max(state[0], epoch)
        if coordinator_epoch is not None:
            state[1] = max(state[1], coordinator_epoch)

    def _supersede(self, gid: str, tp: TopicPartition, seq: int | None) -> None:
        """A commit of ``tp`` became visible: pending offsets written before it (all of them for a
        plain commit, ``seq`` None) must not overwrite it when their transaction commits."""
        pids = self.open_txns.get(gid, {}).get(tp)
        for pid in pids or ():
            entry = self.pending[pid][gid][tp]
            if seq is None or entry.seq < seq:
                entry.stale = True

    def _drop_pending(self, gid: str, tp: TopicPartition) -> None:
        """A tombstone removes the partition's pending offsets too (of every open transaction)."""
        by_tp = self.open_txns.get(gid)
        pids = by_tp.pop(tp, None) if by_tp is not None else None
        if not pids:
            return
        if not by_tp:
            del self.open_txns[gid]
        for pid in pids:
            by_group = self.pending[pid]
            entries = by_group[gid]
            del entries[tp]
            if not entries:
                del by_group[gid]
                if not by_group:
                    del self.pending[pid]

    def _close_txn(self, gid: str, tp: TopicPartition, producer_id: int) -> None:
        by_tp = self.open_txns[gid]
        pids = by_tp[tp]
        pids.discard(producer_id)
        if not pids:
            del by_tp[tp]
            if not by_tp:
                del self.open_txns[gid]

    def forget_groups(self, gids: Iterable[str]) -> None:
        """Drop the pending offsets of these groups (their partition is about to be reloaded)."""
        for gid in gids:
            self.open_txns.pop(gid, None)
            for pid in list(self.pending):
                by_group = self.pending[pid]
                by_group.pop(gid, None)
                if not by_group:
                    del self.pending[pid]

    def forget_partition_producers(self, partition: int) -> None:
        for k in [k for k in self.producers if k[0] == partition]:
            del self.producers[k]

    def has_pending(self, group_id: str, tp: TopicPartition | None = None) -> bool:
        """``hasPendingTransactionalOffsets`` (of one partition, or of any when ``tp`` is None)."""
        by_tp = self.open_txns.get(group_id)
        return bool(by_tp) if tp is None else bool(by_tp and tp in by_tp)

    def keys_of(self, group_id: str) -> set[tuple[str, int]]:
        """Every partition the group has an offset for, durable, pending or being written."""
        return set(self.offsets.get(group_id, ())) | self._writing(group_id) | set(self.open_txns.get(group_id, ()))

    def _writing(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of the group's commits being written."""
        out: set[tuple[str, int]] = set()
        for records in self.inflight.get(group_id, {}).values():
            if type(records) is dict:  # a commit built in C: {(topic, partition): value}
                out.update(records)
            else:
                out.update((k.topic, k.partition) for k, _ in records)
        return out

    # ------------------------------------------------------------------------------------------
    # OffsetCommit
    # ------------------------------------------------------------------------------------------

    def commit(self, v: int, req: dict[str, Any], ctx: Any, _client_id: str = "", _client_host: str = "") -> None:
        # dict.get: a CommitBody (the C walk's) holds these top-level fields as plain entries,
        # read without its lazy ``get`` (a Python call each; only ``topics`` needs it).
        get = _dict_get if isinstance(req, dict) else type(req).get
        gid = get(req, "group_id") or ""
        generation = int(get(req, "generation_id_or_member_epoch", -1)) if v >= 1 else -1
        member_id = (get(req, "member_id") or "") if v >= 1 else ""
        instance_id = get(req, "group_instance_id") if v >= 7 else None
        retention = int(get(req, "retention_time_ms", -1)) if 2 <= v <= 4 else -1
        now = self.rt.now
        topic_partitions = self.topic_partitions
        # The partitions still bytes (the dispatcher's C walk): done in C (``native.commit``) unless it declines.
        in_c = retention == -1 and type(req) is CommitBody and req.native and native_available()
        if in_c and native_commit(self, v, req, ctx, gid, generation, member_id, instance_id):
            return None
        topics = req.get("topics") or []
        if topic_partitions is None or any(
            0 <= int(p.get("partition_index", 0)) < (topic_partitions(t.get("name") or "") or 0)
            for t in topics
            for p in t.get("partitions") or []
        ):
            code = self._commit_group_error(v, gid, generation, member_id, instance_id)
        else:
            # KafkaApis.handleOffsetCommitRequest answers a commit with no existing partition
            # without asking the coordinator: no group is created (each partition gets
            # UNKNOWN_TOPIC_OR_PARTITION below).
            code = err.NONE

        resp_topics: list[dict[str, Any]] = []
        records: list[Record] = []
        ok_partitions: list[dict[str, Any]] = []
        # The per-partition loop runs 100 times for a typical consumer's commit: loop invariants
        # are hoisted and records are built positionally.
        max_metadata = self.config.offset_metadata_max_bytes
        expire = -1 if retention == -1 else now + retention
        none = err.NONE
        with_epoch, with_ts = v >= 6, v == 1
        add_record, add_ok = records.append, ok_partitions.append
        for t in topics:
            name = t.get("name") or ""
            parts_out: list[dict[str, Any]] = []
            resp_topics.append({"name": name, "partitions": parts_out})
            # None: every index is valid (no topic catalogue), -1: the topic is unknown
            count = None if topic_partitions is None else (topic_partitions(name) or -1)
            add_entry = parts_out.append
            for p in t.get("partitions") or ():
                # The parsed request holds ints already: no int() per field (4 calls x 100 partitions).
                index = p.get("partition_index", 0)
                entry = {"partition_index": index, "error_code": none}
                add_entry(entry)
                metadata = p.get("committed_metadata")
                if count is not None and not 0 <= index < count:
                    entry["error_code"] = err.UNKNOWN_TOPIC_OR_PARTITION
                elif code:
                    entry["error_code"] = code
                elif metadata is not None and len(metadata) > max_metadata:
                    entry["error_code"] = err.OFFSET_METADATA_TOO_LARGE
                else:
                    commit_ts = p.get("commit_timestamp", -1) if with_ts else -1
                    leader_epoch = p.get("committed_leader_epoch", -1) if with_epoch else -1
                    value = OffsetCommitValue(
                        p.get("committed_offset", -1),
                        leader_epoch if leader_epoch >= 0 else -1,
                        metadata or "",
                        now if commit_ts == -1 else commit_ts,
                        expire,
                    )
                    add_record((OffsetCommitKey(gid, name, index), value))
                    add_ok(entry)

        response = {"throttle_time_ms": 0, "topics": resp_topics}
        if not records:
            return self.rt.respond(ctx, response)
        if self.classic.debug_enabled():  # README: --log-level debug shows every commit
            self.log.debug("offset_commit", group=gid, member=member_id, generation=generation, partitions=len(records))
        self._write_commits(gid, records, ok_partitions, response, ctx, None)

    def _write_commits(
        self,
        gid: str,
        records: list[Record],
        ok_partitions: list[dict[str, Any]],
        response: dict[str, Any],
        ctx: Any,
        producer: tuple[int, int] | None,
    ) -> None:
        """Append the commit records (transactionally when ``producer`` is given) and answer once
        they are durable; until then the group counts them as in flight (it is not deleted under them)."""
        self._write_seq = n = self._write_seq + 1
        writing = self.inflight.get(gid)
        if writing is None:
            writing = self.inflight[gid] = {}
        writing[n] = records

        def done(error: int | None) -> None:
            w = self.inflight.get(gid)
            if w is not None:
                w.pop(n, None)
                if not w:
                    del self.inflight[gid]
            if error is not None:
                code = err.append_error_to_response_error(error)
                for entry in ok_partitions:
                    entry["error_code"] = code
            self.rt.respond(ctx, response)

        self.rt.append(self.partition_for(gid), records, done, producer=producer)

    def replay_commit(self, gid: str, entries: dict[TopicPartition, OffsetCommitValue]) -> None:
        """``replay`` of each record of a durable commit built in C (``native.commit``):
        the group's offsets take its entries in one ``dict.update`` (the keys are the same tuples
        commit after commit: ``_native.c`` ``cached_key``)."""
        if self.open_txns:  # pending transactional offsets to supersede: record by record
            for (topic, partition), value in entries.items():
                self.replay(OffsetCommitKey(gid, topic, partition), value)
            return
        group_offsets = self.offsets.get(gid)
        if group_offsets is None:
            group_offsets = self.offsets[gid] = {}
        group_offsets.update(entries)

    # ------------------------------------------------------------------------------------------
    # TxnOffsetCommit
    # ------------------------------------------------------------------------------------------

    def commit_transactional(
        self, v: int, req: dict[str, Any], ctx: Any, _client_id: str = "", _client_host: str = ""
    ) -> None:
        """``KafkaApis.handleTxnOffsetCommitRequest`` + ``GroupCoordinatorService.commitTransactionalOffsets``
        + ``OffsetMetadataManager.commitTransactionalOffset``: the offsets are written in a
        transactional batch of the producer and stay pending until the transaction's marker."""
        gid = req.get("group_id") or ""
        producer_id = int(req.get("producer_id", -1))
        producer_epoch = int(req.get("producer_epoch", -1))
        generation = int(req.get("generation_id", -1)) if v >= 3 else -1
        member_id = (req.get("member_id") or "") if v >= 3 else ""
        instance_id = req.get("group_instance_id") if v >= 3 else None
        topics = req.get("topics") or []
        topic_partitions = self.topic_partitions

        def known(name: str, index: int) -> bool:
            # KafkaApis answers partitions missing from the metadata itself, before the coordinator.
            if topic_partitions is None:
                return True
            count = topic_partitions(name)
            return count is not None and 0 <= index < count

        wanted = [(t.get("name") or "", p) for t in topics for p in t.get("partitions") or []]
        code = err.NONE
        if any(known(name, int(p.get("partition_index", 0))) for name, p in wanted):
            # a broker that does not lead the group's partition fails the verification itself
            # (ReplicaManager: NOT_LEADER_OR_FOLLOWER, which handleOperationException answers
            # NOT_COORDINATOR) before any coordinator is asked
            code = err.INVALID_GROUP_ID if not gid else self.rt.route_error(self.partition_for(gid))
            if code != err.NOT_COORDINATOR:
                code = self._txn_verify_error(v, gid, req.get("transactional_id") or "", producer_id, producer_epoch)
            if not code:
                code = self._txn_commit_error(gid, producer_id, producer_epoch, generation, member_id, instance_id)

        resp_topics: dict[str, list[dict[str, Any]]] = {}
        records: list[Record] = []
        ok_partitions: list[dict[str, Any]] = []
        max_metadata = self.config.offset_metadata_max_bytes
        now = self.rt.now
        for name, p in wanted:
            index = int(p.get("partition_index", 0))
            entry = {"partition_index": index, "error_code": err.NONE}
            resp_topics.setdefault(name, []).append(entry)
            metadata = p.get("committed_metadata")
            if not known(name, index):
                entry["error_code"] = err.UNKNOWN_TOPIC_OR_PARTITION
            elif code:
                entry["error_code"] = code
            elif metadata is not None and len(metadata) > max_metadata:
                entry["error_code"] = err.OFFSET_METADATA_TOO_LARGE
            else:
                leader_epoch = int(p.get("committed_leader_epoch", -1)) if v >= 2 else -1
                value = OffsetCommitValue(
                    int(p.get("committed_offset", -1)), leader_epoch if leader_epoch >= 0 else -1, metadata or "", now
                )
                records.append((OffsetCommitKey(gid, name, index), value))
                ok_partitions.append(entry)
        response = {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps} for n, ps in resp_topics.items()]}
        if not records:
            return self.rt.respond(ctx, response)
        self.log.debug(
            "txn_offset_commit",
            group=gid,
            transactional_id=req.get("transactional_id"),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=len(records),
        )
        self._write_commits(gid, records, ok_partitions, response, ctx, (producer_id, producer_epoch))

    def _txn_verify_error(self, v: int, gid: str, txn_id: str, producer_id: int, producer_epoch: int) -> int:
        """KIP-890 part 1: before the write, the transaction coordinator confirms that the group's
        ``__consumer_offsets`` partition is in the producer's ongoing transaction
        (``CoordinatorRuntime.scheduleTransactionalWriteOperation`` ->
        ``maybeStartTransactionVerification``), with AddPartitionsToTxnManager's mapping of its
        answer and the service's (``handleOperationException``) of what is left."""
        if not gid:
            # GroupCoordinatorService.commitTransactionalOffsets (isGroupIdNotEmpty), unlike OffsetCommit.
            return err.INVALID_GROUP_ID
        verifier = self.txn_verifier
        if verifier is None:
            return err.NONE
        code = verifier(txn_id, producer_id, producer_epoch, OFFSETS_TOPIC, self.partition_for(gid))
        if code == err.PRODUCER_FENCED:
            return err.INVALID_PRODUCER_EPOCH
        if code == err.TRANSACTION_ABORTABLE and v < 4:
            return err.INVALID_TXN_STATE  # TxnOffsetCommit v4 is the first to know TRANSACTION_ABORTABLE
        if code == err.NETWORK_EXCEPTION:
            return err.COORDINATOR_LOAD_IN_PROGRESS
        return err.append_error_to_response_error(code)

    def _txn_commit_error(
        self,
        gid: str,
        producer_id: int,
        producer_epoch: int,
        generation: int,
        member_id: str,
        instance_id: str | None,
    ) -> int:
        code = self.rt.route_error(self.partition_for(gid))
        if code:
            return code
        if producer_id < 0 or producer_epoch < 0:
            # A transactional batch needs a producer; clients always send theirs (groupd's choice
            # of answer: Kafka's path for a request without one is not modelled).
            return err.INVALID_REQUEST
        code = self._txn_group_error(gid, generation, member_id, instance_id)
        if code:
            return code
        seen = self.producers.get((self.partition_for(gid), producer_id))
        if seen is not None and producer_epoch < seen[0]:
            # ProducerAppendInfo.checkProducerEpoch when the batch reaches the __consumer_offsets
            # log: a zombie fenced by a newer epoch (the abort marker of the fence carries it).
            return err.INVALID_PRODUCER_EPOCH
        if gid not in self.classic.groups and self.consumer.group(gid) is None:
            # validateTransactionalOffsetCommit: a commit without generation creates a simple group.
            self.classic.groups[gid] = ClassicGroup(gid, E, self.rt.now)
            self.log.info("simple_group_created", group=gid, generation=0)
        return err.NONE

    def _txn_group_error(self, gid: str, generation: int, member_id: str, instance_id: str | None) -> int:
        if self.share_side is not None and self.share_side.is_share_group(gid):
            return err.GROUP_ID_NOT_FOUND  # ShareGroup.validateOffsetCommit
        consumer_group = self.consumer.group(gid)
        if consumer_group is not None:
            return consumer_group.validate_offset_commit(
                member_id, generation, 5, transactional=True, instance_id=instance_id
            )
        group = self.classic.groups.get(gid)
        if group is None:
            # validateTransactionalOffsetCommit: ILLEGAL_GENERATION whatever the version.
            return err.NONE if generation < 0 else err.ILLEGAL_GENERATION
        # no heartbeat rescheduling here: only OffsetCommit keeps a session alive
        return self._classic_commit_error(group, member_id, instance_id, generation, transactional=True)

    def _classic_commit_error(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation: int, *, transactional: bool
    ) -> int:
        code = group.validate_offset_commit(member_id, instance_id, generation, transactional=transactional)
        if code == err.FENCED_INSTANCE_ID:
            self.classic.glog(group, member=member_id).info("fenced_instance_id", instance=instance_id)
        return code

    def _commit_group_error(self, v: int, gid: str, generation: int, member_id: str, instance_id: str | None) -> int:
        # "" is a valid group id for commits and fetches (GroupCoordinatorService.commitOffsets /
        # fetchOffsets: "For backwards compatibility, we support offset commits for the empty
        # groupId"); only a null id, which the wire cannot carry, is INVALID_GROUP_ID.
        code = self.rt.route_error(self.partition_for(gid))
        if code:
            return code
        if self.share_side is not None and self.share_side.is_share_group(gid):
            return err.GROUP_ID_NOT_FOUND  # ShareGroup.validateOffsetCommit: not a consumer group
        consumer_group = self.consumer.group(gid)
        if consumer_group is not None:
            return consumer_group.validate_offset_commit(member_id, generation, v)
        group = self.classic.groups.get(gid)
        if group is None:
            if generation < 0:
                # A consumer managing its own partitions (or an admin): a "simple" group is born.
                self.classic.groups[gid] = ClassicGroup(gid, E, self.rt.now)
                self.log.info("simple_group_created", group=gid, generation=0)
                return err.NONE
            # v9 says what happened; older clients only understand ILLEGAL_GENERATION here.
            return err.GROUP_ID_NOT_FOUND if v >= 9 else err.ILLEGAL_GENERATION
        code = self._classic_commit_error(group, member_id, instance_id, generation, transactional=False)
        if not code and group.is_in(S, PR):
            # In the classic protocol a commit also keeps the session alive (OffsetMetadataManager
            # .commitOffset -> rescheduleClassicGroupMemberHeartbeat).
            self.classic.reschedule_heartbeat(group, group.members[member_id])
        return code

    # ------------------------------------------------------------------------------------------
    # OffsetFetch
    # ------------------------------------------------------------------------------------------

    def fetch(self, v: int, req: dict[str, Any], ctx: Any, _client_id: str = "", _client_host: str = "") -> None:
        stable = bool(req.get("require_stable")) if v >= 7 else False
        if v >= 8:
            groups = []
            for g in req.get("groups") or []:
                gid = g.get("group_id") or ""
                topics = g.get("topics")
                code, topics_out = self._fetch_group(gid, topics, stable)
                if not code and v >= 9:
                    code = self._consumer_fetch_error(gid, g.get("member_id"), g.get("member_epoch", -1))
                    if code:
                        topics_out = []
                groups.append({"group_id": gid, "topics": topics_out, "error_code": code})
            return self.rt.respond(ctx, {"throttle_time_ms": 0, "groups": groups})

        gid = req.get("group_id") or ""
        topics = req.get("topics")
        code, topics_out = self._fetch_group(gid, topics, stable)
        if code and v < 2:
            # No top-level error before v2: the error goes on every requested partition.
            topics_out = [
                {
                    "name": t.get("name") or "",
                    "partitions": [self._fetched(p, None, code) for p in t.get("partition_indexes") or []],
                }
                for t in topics or []
            ]
            code = err.NONE
        self.rt.respond(ctx, {"throttle_time_ms": 0, "topics": topics_out, "error_code": code})

    def _consumer_fetch_error(self, gid: str, member_id: str | None, member_epoch: int) -> int:
        """``ConsumerGroup.validateOffsetFetch``: a member fetching with its id and epoch must be the
        member at that epoch; a fetch without them (admin tools, classic clients) is not checked."""
        group = self.consumer.group(gid)
        if group is None or (member_epoch < 0 and member_id is None):
            return err.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return err.UNKNOWN_MEMBER_ID
        return err.STALE_MEMBER_EPOCH if member_epoch != member.member_epoch else err.NONE

    @staticmethod
    def _fetched(index: int, value: OffsetCommitValue | None, code: int = err.NONE) -> dict[str, Any]:
        if value is None:
            return {
                "partition_index": index,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": code,
            }
        return {
            "partition_index": index,
            "committed_offset": value.offset,
            "committed_leader_epoch": value.leader_epoch,
            "metadata": value.metadata,
            "error_code": code,
        }

    def _fetch_group(
        self, gid: str, topics: list[dict[str, Any]] | None, require_stable: bool = False
    ) -> tuple[int, list[dict[str, Any]]]:
        code = self.rt.route_error(self.partition_for(gid))  # "" included (see _commit_group_error)
        if code:
            return code, []
        if self.share_side is not None and self.share_side.is_share_group(gid):
            return err.GROUP_ID_NOT_FOUND, []  # ShareGroup.validateOffsetFetch: not a consumer group
        committed = self.offsets.get(gid, {})
        # fetchOffsets / fetchAllOffsets with requireStable: a partition with a pending transactional
        # offset of the group answers UNSTABLE_OFFSET_COMMIT (the client retries until the marker).
        unstable = self.open_txns.get(gid) if require_stable else None
        fetched = self._fetched
        if topics is None:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (topic, index), value in sorted(committed.items()):
                if unstable and (topic, index) in unstable:
                    by_topic.setdefault(topic, []).append(fetched(index, None, err.UNSTABLE_OFFSET_COMMIT))
                else:
                    by_topic.setdefault(topic, []).append(fetched(index, value))
            return err.NONE, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        out = []
        for t in topics:
            name = t.get("name") or ""
            indexes = t.get("partition_indexes") or []
            if unstable:
                parts = [
                    fetched(i, None, err.UNSTABLE_OFFSET_COMMIT)
                    if (name, i) in unstable
                    else fetched(i, committed.get((name, i)))
                    for i in indexes
                ]
            else:
                parts = [fetched(i, committed.get((name, i))) for i in indexes]
            out.append({"name": name, "partitions": parts})
        return err.NONE, out

    # ------------------------------------------------------------------------------------------
    # OffsetDelete
    # ------------------------------------------------------------------------------------------

    def delete(self, v: int, req: dict[str, Any], ctx: Any, _client_id: str = "", _client_host: str = "") -> None:
        gid = req.get("group_id") or ""
        topics = req.get("topics") or []

        def top(code: int) -> None:
            self.rt.respond(ctx, {"throttle_time_ms": 0, "error_code": code, "topics": []})

        code = err.INVALID_GROUP_ID if not gid else self.rt.route_error(self.partition_for(gid))
        if code:
            return top(code)
        group = self.classic.groups.get(gid)
        if group is None or group.is_in(D):
            return top(err.GROUP_ID_NOT_FOUND)
        if group.is_in(S, PR, CR) and not group.uses_consumer_protocol():
            # Without the consumer protocol there is no way to know which topics are in use.
            return top(err.NON_EMPTY_GROUP)

        committed = self.offsets.get(gid, {})
        records: list[Record] = []
        # KafkaApis.handleOffsetDeleteRequest answers unknown topics and partitions itself
        # (UNKNOWN_TOPIC_OR_PARTITION), hands the rest to the coordinator and merges its answer
        # after them: a topic's unknown partitions come first, topics first seen there too.
        by_topic: dict[str, list[dict[str, Any]]] = {}
        known: list[tuple[str, list[int]]] = []
        topic_partitions = self.topic_partitions
        for t in topics:
            name = t.get("name") or ""
            count = topic_partitions(name) if topic_partitions is not None else None
            indexes = [int(p.get("partition_index", 0)) for p in t.get("partitions") or []]
            if topic_partitions is not None:
                for index in indexes:
                    if count is None or not 0 <= index < count:
                        parts = by_topic.setdefault(name, [])
                        parts.append({"partition_index": index, "error_code": err.UNKNOWN_TOPIC_OR_PARTITION})
                if count is None:
                    continue
                indexes = [i for i in indexes if 0 <= i < count]
            known.append((name, indexes))
        for name, indexes in known:
            parts = by_topic.setdefault(name, [])
            if group.is_subscribed_to_topic(name):
                parts.extend({"partition_index": i, "error_code": err.GROUP_SUBSCRIBED_TO_TOPIC} for i in indexes)
                continue
            for index in indexes:
                parts.append({"partition_index": index, "error_code": err.NONE})
                if (name, index) in committed or self.has_pending(gid, (name, index)):
                    records.append((OffsetCommitKey(gid, name, index), None))
        resp_topics = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]

        response = {"throttle_time_ms": 0, "error_code": err.NONE, "topics": resp_topics}
        if not records:
            return self.rt.respond(ctx, response)
        self.classic.glog(group).info("offsets_deleted", partitions=len(records))

        def done(error: int | None) -> None:
            if error is not None:
                response["error_code"] = err.append_error_to_response_error(error)
                response["topics"] = []
            self.rt.respond(ctx, response)

        self.rt.append(self.partition_for(gid), records, done)

    # ------------------------------------------------------------------------------------------
    # Deleted topics
    # ------------------------------------------------------------------------------------------

    def write_txn_marker(
        self, ctx: Any, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> None:
        """Write the end marker of ``producer_id``'s transaction in ``partition`` (Kafka's
        ``GroupCoordinatorService.completeTransaction``); ``ctx`` is answered ``{"error_code": ...}``
        once it is durable and replayed, or at once with the reason it is not written."""
        code = err.NONE
        if not self.rt.is_local(partition):
            code = err.NOT_COORDINATOR
        elif partition in self.rt.loading:
            code = err.COORDINATOR_LOAD_IN_PROGRESS
        else:
            seen = self.producers.get((partition, producer_id))
            if seen is not None and producer_epoch < seen[0]:
                code = err.INVALID_PRODUCER_EPOCH  # ProducerAppendInfo.checkProducerEpoch
            elif seen is not None and coordinator_epoch < seen[1]:
                code = err.TRANSACTION_COORDINATOR_FENCED  # ProducerAppendInfo.appendEndTxnMarker
        if code:
            self.rt.respond(ctx, {"error_code": code})
            return

        def done(error: int | None) -> None:
            self.rt.respond(ctx, {"error_code": error or err.NONE})

        self.log.info(
            "txn_marker_writing",
            partition=partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            result="commit" if committed else "abort",
        )
        self.rt.append(
            partition, [], done, producer=(producer_id, producer_epoch), marker=(committed, coordinator_epoch)
        )

    def on_partitions_deleted(self, topic_partitions: Iterable[tuple[str, int]]) -> None:
        """Tombstone every group's offsets of deleted partitions (Kafka's
        OffsetMetadataManager.onPartitionsDeleted, run on every coordinator shard): a topic
        re-created under the same name starts with no committed offsets."""
        deleted: dict[str, set[int]] = {}
        for topic, index in topic_partitions:
            deleted.setdefault(topic, set()).add(index)
        if not deleted:
            return
        local = set(self.rt.ownership.local_partitions())
        loading = local & self.rt.loading
        # Kafka's write fails on a loading shard (COORDINATOR_LOAD_IN_PROGRESS): it logs the error
        # and the offsets stay. Here they are tombstoned once the partition is loaded, and so are
        # those of a partition resigned and not elected again (a cluster in one process shares
        # the core: it is this process's to load again).
        for p in loading | self.rt.unloaded:
            pending = self.deleted_while_loading.setdefault(p, {})
            for topic, indexes in deleted.items():
                pending.setdefault(topic, set()).update(indexes)
        self._tombstone_deleted(deleted, local - loading)

    def on_partition_loaded(self, partition: int) -> None:
        deleted = self.deleted_while_loading.pop(partition, None)
        if deleted:
            self._tombstone_deleted(deleted, {partition})

    def _tombstone_deleted(self, deleted: dict[str, set[int]], partitions: set[int]) -> None:
        # Durable offsets and commits still being written alike: a tombstone appended after an
        # in-flight commit reaches the log after it.
        wanted = sorted((t, i) for t, indexes in deleted.items() for i in indexes)
        hits: dict[str, list[tuple[str, int]]] = {}
        none: dict[tuple[str, int], Any] = {}
        for gid, committed in self.offsets.items():
            if found := _deleted_keys(wanted, deleted, committed, self._writing(gid) if gid in self.inflight else none):
                hits[gid] = found
        for gid in self.inflight:
            if gid not in self.offsets and (found := _deleted_keys(wanted, deleted, none, self._writing(gid))):
                hits[gid] = found
        for gid, open_tps in self.open_txns.items():
            # onTopicsDeleted: the pending transactional offsets of the partitions go too.
            if found := _deleted_keys(wanted, deleted, open_tps, none):
                hits[gid] = sorted(set(hits.get(gid, ())) | set(found))
        by_partition: dict[int, list[Record]] = {}
        for gid in sorted(hits):
            p = self.partition_for(gid)
            if p in partitions:
                by_partition.setdefault(p, []).extend((OffsetCommitKey(gid, t, i), None) for t, i in hits[gid])
        self.log.info(
            "deleted_partitions_offsets_removed",
            topics=sorted(deleted),
            tombstones=sum(len(r) for r in by_partition.values()),
        )
        for p, records in by_partition.items():

            def done(error: int | None, p: int = p, n: int = len(records)) -> None:
                if error is not None:
                    self.log.error("deleted_partitions_offsets_not_removed", partition=p, tombstones=n, error=error)

            self.rt.append(p, records, done)

    def cleanup_group_metadata(self) -> None:
        """The periodic retention check (KIP-211): see :class:`.retention.OffsetRetention`."""
        self.retention.cleanup_group_metadata()


def _deleted_keys(
    wanted: list[tuple[str, int]], deleted: dict[str, set[int]], committed: Any, writing: Any
) -> list[tuple[str, int]]:
    """The (topic, partition) keys of one group among the deleted ones, in order, looked up from
    whichever side is smaller: the group's own keys or the deleted partitions."""
    if len(committed) + len(writing) < len(wanted):
        return sorted({k for k in (*committed, *writing) if k[1] in deleted.get(k[0], ())})
    return [k for k in wanted if k in committed or k in writing]


def replay_plain_commits(offsets: dict[str, dict[TopicPartition, OffsetCommitValue]], records: list, start: int) -> int:
    """Replay the plain offset commits of a load's record chunk (``(offset, timestamp, key
    bytes, value bytes)``) from ``start`` on, up to the first record this does not cover;
    returns its index (``len(records)`` when it covered them all). Covered: an offset-commit
    key and a v3 value without metadata, what nearly every consumer commits; each becomes what
    ``decode_record`` + ``replay`` would make of it, without the two calls, the generic decode
    and the named tuple's ``__new__`` per record. Whatever else (a tombstone, metadata,
    another record type, a transactional delimiter, pending transactional offsets to
    supersede: the caller does not call this then) is left to the caller's generic path."""
    keys = serde_keys
    unpack = V3_NO_METADATA.unpack
    new = tuple.__new__
    value_type = OffsetCommitValue
    gid = None
    group_offsets: dict[TopicPartition, OffsetCommitValue] = {}
    i, end = start, len(records)
    while i < end:
        _offset, _ts, kb, vb = records[i]
        if vb is None or len(vb) != 24:
            return i
        key = keys.get(kb)  # type: ignore[arg-type]
        if key is None:
            # First sight (or the cache was full and cleared): the generic key decoder fills
            # the cache; a key that is no offset commit's is the caller's.
            try:
                key = decode_key(kb)
            except Exception:  # malformed: the generic path reports it
                return i
            if type(key) is not OffsetCommitKey:
                return i
        version, offset, leader_epoch, metadata_len, commit_ts = unpack(vb)
        if version != 3 or metadata_len != 0:
            return i
        group, topic, partition = key
        if group != gid:
            gid = group
            group_offsets = offsets.get(gid)  # type: ignore[assignment]
            if group_offsets is None:
                group_offsets = offsets[gid] = {}
        group_offsets[(topic, partition)] = new(value_type, (offset, leader_epoch, "", commit_ts, -1))
        i += 1
    return i
