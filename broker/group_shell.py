"""The asyncio shell around the sans-IO group coordinator.

The core (``groupd.coordinator``) is a synchronous state machine: requests, clock ticks and append
outcomes go in; responses, records to append and the next deadline come out. This shell feeds it:

- each group API request is handed to ``core.handle`` with the ``Request`` as its ``ctx``; the
  core answers now or later by returning ``(ctx, response)`` pairs, which go to ``ctx.respond``;
- every ``Append`` is serialized (``coordinator.serde``: plain records, a producer's transactional
  batch, or a transaction marker) and written to its ``__consumer_offsets`` partition through the
  group-commit ``Appender``; when it is durable (or failed) the outcome goes back through
  ``core.append_done`` and only then are the waiting responses released;
- one ``loop.call_at`` is armed for ``core.next_deadline()`` (design principle 4);
- ``elect``/``resign``/``move`` load and unload one ``__consumer_offsets`` partition at run time
  (Kafka's ``GroupCoordinatorService.onElection``/``onResignation``), for the brokers of a cluster
  in one process that share this shell and its core: each broker's handlers name its node id.

Applying results, writing appends, the timer and draining are ``coordinator_shell.py``'s
(shared with the transaction shell); this module adds the group APIs, the transactional writes
and the loads.

Why no per-group ``asyncio.Lock``: a core call runs to completion on the loop thread, so requests for
one group are already serialized, and the one suspension point (the append) is a continuation in
the core, not an ``await`` in the middle of a handler. Different groups never wait for each other,
and a parked JoinGroup holds nothing but its own connection slot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import structlog
from groupd.coordinator import GroupCoordinator, Node, native
from groupd.coordinator.classic.wire import heartbeat_answer
from groupd.coordinator.result import Append, Result
from groupd.coordinator.serde import RecordDecodeError, decode_record, encode_log_records
from groupd.protocol.dispatch import BINDS_REQUEST, bind_request
from groupd.protocol.frozen import mutable_record
from groupd.protocol.ratelimit import LogLimiter
from groupd.protocol.server import Request
from groupd.storage import Appender, PartitionLog
from groupd.storage.markers import end_txn_marker_batch, parse_end_txn_marker
from groupd.storage.records import OwnBatch, TxnBatch, build_batch, iter_records

from .coordinator_shell import CoordinatorShell, wall_ms

log = structlog.get_logger("groupd.groups")
limited_log = LogLimiter(log)

# The load runs on the event loop in slices (Kafka's CoordinatorLoaderImpl has a thread of its own):
# it yields once a slice has taken this long, so a large log never keeps a request (the first
# ApiVersions of a client, a group of a partition already loaded) waiting for more than about this.
_LOAD_SLICE_S = 0.005
# Bytes of log read (and CRC-checked, decoded) at a time: small enough for a slice.
_LOAD_READ_BYTES = 256 * 1024
# Key version of a group-metadata record (design principle 7): its replay only sets or drops the
# group's entry, so within a slice only the last one of a group needs decoding.
_GROUP_METADATA_KEY = b"\x00\x02"


@mutable_record
class LoadProgress:
    """How far the start-up replay of ``__consumer_offsets`` is (read by the metrics at scrape time)."""

    partitions_total: int = 0
    partitions_loaded: int = 0
    records: int = 0
    skipped: int = 0
    corrupt_batches: int = 0  # damaged batches the replay reported and skipped
    started: float | None = None  # time.perf_counter() at the start of the load
    finished: float | None = None

    def __init__(
        self,
        partitions_total: int = 0,
        partitions_loaded: int = 0,
        records: int = 0,
        skipped: int = 0,
        corrupt_batches: int = 0,
        started: float | None = None,
        finished: float | None = None,
    ) -> None:
        self.partitions_total = partitions_total
        self.partitions_loaded = partitions_loaded
        self.records = records
        self.skipped = skipped
        self.corrupt_batches = corrupt_batches
        self.started = started
        self.finished = finished

    def seconds(self) -> float:
        if self.started is None:
            return 0.0
        end = time.perf_counter() if self.finished is None else self.finished
        return end - self.started


class _Reply:
    """The ``ctx`` of a call made by another part of the node (not a client): its answer resolves a future."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[dict[str, Any]]) -> None:
        self.future = future

    def respond(self, response: dict[str, Any]) -> None:
        if not self.future.done():
            self.future.set_result(response)


class GroupShell(CoordinatorShell[GroupCoordinator, Result, Append]):
    append_failed = "offsets_append_failed"
    _log = log
    _limited_log = limited_log

    def __init__(
        self,
        core: GroupCoordinator,
        partition_logs: Callable[[int], PartitionLog],
        appender: Appender,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        # Elections and resignations run under _track: drain cancels them once the appends settled
        # (a load still replaying would read logs about to close).
        super().__init__(core, partition_logs, appender, clock=clock)
        # The log of a partition if it exists, else None (then it has nothing to replay). A load
        # does not create logs: a partition's log is made by its first append (partition_logs),
        # as Kafka makes a log when it first needs it, so a first start does not create 50 of them
        # (3 files and 2 directory fsyncs each) before it answers (issue 26). None: partition_logs.
        self.existing_log: Callable[[int], PartitionLog | None] | None = None
        self._startup_epochs: dict[int, int] = {}  # the epoch each partition's start-up load began at
        self.load_progress = LoadProgress()
        # Awaited before each partition's replay: tests hold the load there to look at it
        # (GROUPD_TEST_LOAD_HOLD, see broker/node.py); None in service.
        self.load_hold: Callable[[], Awaitable[None]] | None = None

    # --- requests ---------------------------------------------------------------------------------
    def handler(self, api_name: str, node_id: int | None = None) -> Callable[[Request], None]:
        """The handler of ``api_name`` for the broker ``node_id`` (None: the only broker). In a
        cluster sharing this shell, each broker registers its own: the core serves a group's
        request only on the broker leading the group's partition, NOT_COORDINATOR elsewhere."""
        core = self.core
        if api_name == "Heartbeat" and hasattr(core, "heartbeat"):
            heartbeat = core.heartbeat
            clock = self.clock
            arm = self._arm
            if node_id is not None:

                def handle_broker_heartbeat(req: Request) -> None:
                    version = req.api_version
                    req.respond(heartbeat_answer(version, heartbeat(clock(), version, req.body, node_id)))
                    arm()

                return handle_broker_heartbeat

            # a core without the short path (a test's stand-in) answers every heartbeat the long way
            classic = getattr(core, "classic", None)
            steady = getattr(classic, "steady_heartbeat_code", None) or (lambda _version, _body: None)
            enter = getattr(core, "enter", None) or (lambda _now: None)

            # the answer with its bytes made once per version and code (issue 26: no generic encoder)
            def handle_heartbeat(req: Request) -> None:
                version = req.api_version
                now = clock()
                enter(now)
                code = steady(version, req.body)
                if code is None:  # anything but a steady member's: it may log (BINDS_REQUEST)
                    with bind_request(req):
                        req.respond(heartbeat_answer(version, heartbeat(now, version, req.body)))
                        arm()
                    return
                req.respond(heartbeat_answer(version, code))
                arm()

            setattr(handle_heartbeat, BINDS_REQUEST, True)
            return handle_heartbeat
        # Kafka's "/host" form of each peer, made once per host rather than once per request.
        hosts: dict[str, str] = {}

        def host_of(req: Request) -> str:
            peer = req.conn.peer_host
            host = hosts.get(peer)
            if host is None:
                if len(hosts) > 4096:
                    hosts.clear()
                host = hosts[peer] = "/" + peer
            return host

        def handle(req: Request) -> None:
            result = core.handle(
                self.clock(),
                api_name,
                req.api_version,
                req.body,
                req,
                client_id=req.client_id or "",
                client_host=host_of(req),
                node_id=node_id,
            )
            self.apply(result)

        if api_name == "ConsumerGroupHeartbeat" and hasattr(core, "enter"):
            # A steady member's heartbeat without a Result (issue 26: the Result, its apply and
            # the generic path cost ~1.5 us of a ~11 us KIP-848 heartbeat); the rest the long way.
            enter = core.enter
            steady = core.consumer_requests.steady_heartbeat
            clock = self.clock
            arm = self._arm

            def handle_consumer_heartbeat(req: Request) -> None:
                host = hosts.get(req.conn.peer_host)  # host_of's lookup, without its call
                if host is None:
                    host = host_of(req)
                enter(clock(), node_id)
                response = steady(req.api_version, req.body, req.client_id or "", host)
                if response is None:  # the long way may log and start appends (BINDS_REQUEST)
                    with bind_request(req):
                        handle(req)
                    return
                req.respond(response)
                arm()

            setattr(handle_consumer_heartbeat, BINDS_REQUEST, True)
            return handle_consumer_heartbeat
        if api_name == "OffsetCommit" and hasattr(core, "enter") and native.available():
            # A commit whose partitions are still bytes (the dispatcher's C walk) without a Result
            # on either side (issue 26): native.steady_commit answers or registers the append,
            # _commit_append queues its batch and answers once durable; the rest the long way.
            enter = core.enter
            steady = partial(native.steady_commit, core.offset_manager)
            clock = self.clock
            arm = self._arm
            answered = native.ANSWERED
            commit_body = native.CommitBody

            def handle_offset_commit(req: Request) -> None:
                body = req.body
                if type(body) is commit_body and body.native:
                    enter(clock(), node_id)
                    out = steady(req.api_version, body, req)
                    if out is not None:
                        if out is not answered:
                            self._commit_append(*out)  # type: ignore[misc]
                        arm()  # the commit may have renewed a classic member's session
                        return
                handle(req)

            return handle_offset_commit
        return handle

    def _commit_append(self, token: int, partition: int, batch: bytes, finish: Callable[[], None]) -> None:
        """Queue the batch of a commit from the short path (``native.steady_commit``) as
        ``_direct`` queues an append, and on success run ``finish`` (replay, answer) in place of
        ``GroupCoordinator.append_done`` and its Result; any other outcome is reported to the
        core (``_report``). An append that cannot be queued at once (a task of the partition
        still to run, a batch over max.message.bytes, no log) takes the task path (``_start_append``)."""
        plog = None
        if not self._queued.get(partition):
            try:
                plog = self.partition_logs(partition)
            except Exception:
                plog = None  # the task path reports it
        if plog is None or len(batch) > plog.config.max_message_bytes:
            self._start_append(Append(token, partition, [], batch=batch))
            return
        payload = OwnBatch(batch)
        writes = self._writes.get(partition)
        if writes is None:
            writes = self._writes[partition] = set()
        tasks = self._tasks
        pending = self.core.runtime.pending

        def settled(fut: asyncio.Future[Any]) -> None:
            tasks.discard(done)
            writes.discard(done)
            try:
                # durable, and the runtime still waits for it (no unload failed it meanwhile)
                if not fut.cancelled() and fut.exception() is None and pending.pop(token, None) is not None:
                    finish()
                else:
                    self._report(partition, token, fut)
            finally:
                if not done.done():  # cancelled by a waiter (a cancelled gather cancels its futures)
                    done.set_result(None)

        written = self.appender.append_future(plog, payload, on_settled=settled)
        done: asyncio.Future[None] = written.get_loop().create_future()
        tasks.add(done)
        writes.add(done)

    # --- deleted topics ---------------------------------------------------------------------------
    def partitions_deleted(self, topic_partitions: list[tuple[str, int]]) -> Awaitable[Any] | None:
        """Tombstone the committed offsets of deleted partitions. The awaitable (None when there
        is nothing to write) is done once the tombstones are durable or failed (logged): DeleteTopics
        answers after it, so a topic re-created at once never meets the old offsets."""
        tasks = self.apply(self.core.on_partitions_deleted(self.clock(), topic_partitions))
        return asyncio.gather(*tasks) if tasks else None

    # --- appends ----------------------------------------------------------------------------------
    def _direct_item(self, append: Append) -> tuple[PartitionLog, Any] | None:
        # An OffsetCommit built in C (``_write``'s third case): queued without a task.
        batch = append.batch
        if batch is None or append.marker is not None or append.producer_id >= 0:
            return None
        try:
            plog = self.partition_logs(append.partition)
        except Exception:
            return None  # the task path reports it
        if len(batch) > plog.config.max_message_bytes:
            return None
        return plog, OwnBatch(batch)

    async def _write(self, plog: PartitionLog, append: Append, now_ms: int) -> None:
        if append.marker is not None:
            committed, coordinator_epoch = append.marker
            await self.appender.append(
                plog,
                end_txn_marker_batch(append.producer_id, append.producer_epoch, committed, coordinator_epoch, now_ms),
            )
        elif append.producer_id >= 0:
            # TxnOffsetCommit: the producer's own transactional batch, never merged with others.
            records = encode_log_records(append.records, now_ms)
            batch = build_batch(
                records, producer_id=append.producer_id, producer_epoch=append.producer_epoch, transactional=True
            )
            await self.appender.append_future(plog, OwnBatch(batch))
        elif append.batch is not None:
            # An OffsetCommit built in C: one batch, its CRC computed there. A batch the partition's
            # max.message.bytes refuses goes as records instead (the log builds an unchecked batch
            # of its own records: a giant commit is written, as before).
            if len(append.batch) <= plog.config.max_message_bytes:
                # our encoder's batch: the log neither re-computes its CRC nor walks its records
                # (a client's batch, bytes from the wire, still gets both)
                await self.appender.append_future(plog, OwnBatch(append.batch))
            else:
                await self.appender.append(plog, [(k, v, (), t) for _o, t, k, v in iter_records(append.batch)])
        else:
            records = encode_log_records(append.records, now_ms)
            await self.appender.append(plog, records)

    # --- transactions -----------------------------------------------------------------------------
    @property
    def txn_verifier(self) -> Callable[[str, int, int, str, int], int] | None:
        """KIP-890 verification of TxnOffsetCommit: the node wires the transaction coordinator's
        ``verify`` here (``(transactional id, producer id, epoch, topic, partition) -> error code``)."""
        return self.core.txn_verifier

    @txn_verifier.setter
    def txn_verifier(self, fn: Callable[[str, int, int, str, int], int] | None) -> None:
        self.core.txn_verifier = fn

    async def write_txn_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> int:
        """End ``producer_id``'s transaction in ``__consumer_offsets`` partition ``partition`` (the
        transaction coordinator's WriteTxnMarkers, Kafka's ``GroupCoordinator.completeTransaction``).

        Returns the Kafka error code: 0 once the marker is durable and the producer's pending
        offsets of that partition are committed (visible to OffsetFetch) or dropped;
        NOT_COORDINATOR when this node does not own the partition, COORDINATOR_LOAD_IN_PROGRESS
        while it loads, INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED for a marker older
        than what the partition has seen, or the append's error (KAFKA_STORAGE_ERROR). Kafka's
        KafkaApis.handleWriteTxnMarkersRequest tells the transaction coordinator
        NOT_LEADER_OR_FOLLOWER for the three coordinator errors (it retries them); that mapping is
        the caller's."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.apply(
            self.core.write_txn_marker(
                self.clock(), _Reply(fut), partition, producer_id, producer_epoch, committed, coordinator_epoch
            )
        )
        return int((await fut)["error_code"])

    # --- start-up load ----------------------------------------------------------------------------
    def begin_load(self, partitions: list[int]) -> None:
        self.load_progress = LoadProgress(partitions_total=len(partitions), started=time.perf_counter())
        for p in partitions:
            self.apply(self.core.begin_load(p))
            self._startup_epochs[p] = self.core.partition_epoch(p)

    async def load(self, partitions: list[int], epochs: dict[int, int] | None = None) -> None:
        """Replay each partition of ``__consumer_offsets`` through ``core.replay``; until a
        partition is done its groups answer COORDINATOR_LOAD_IN_PROGRESS. ``epochs``: a run-time
        load (an election) of partitions begun at these epochs, not the start-up load."""
        t0 = time.perf_counter()
        total = 0
        bad = 0
        progress = self.load_progress if epochs is None else LoadProgress(started=t0)
        if progress.started is None:  # load() without begin_load() (tests)
            progress.partitions_total, progress.started = len(partitions), t0
        replay_encoded = self.core.replay_encoded
        clock = time.perf_counter
        for p in partitions:
            if self.load_hold is not None:
                await self.load_hold()
            # A partition elected or resigned since its load began is no longer this load's.
            epoch = self._load_epoch(p, epochs)
            if epoch is None:
                progress.partitions_loaded += 1
                continue
            n = 0
            # Group-metadata records of this slice not decoded yet: key bytes -> their values in
            # log order (see _replay_group_metadata).
            deferred: dict[bytes, list[bytes | None]] = {}
            # The producer of the transactional batch being replayed (-1: a plain batch).
            producer_id = producer_epoch = -1
            slice_end = clock() + _LOAD_SLICE_S
            try:
                plog = self._log_to_replay(p)
                corrupt_before = plog.corrupt_batches
                # verify: a damaged batch anywhere is reported and skipped, never replayed (a
                # flipped bit must not turn a committed 4242 into 4243) and never the end of the load.
                # txn: transactional batches come delimited and markers come too (TxnBatch).
                # Chunks of records, and the core's fast path over each chunk for the plain
                # commits that make up most of the log: per record only what it leaves over
                # goes through decode_record and replay.
                stop = False
                for chunk in plog.iter_record_chunks(verify=True, txn=True, max_bytes=_LOAD_READ_BYTES):
                    i, end = 0, len(chunk)
                    while i < end:
                        if producer_id < 0:
                            j = replay_encoded(chunk, i)
                            n += j - i
                            if j == end:
                                break
                            i = j
                        _offset, _ts, key, value = chunk[i]
                        i += 1
                        if key is None:
                            if type(value) is TxnBatch:
                                producer_id, producer_epoch = self._replay_txn_entry(p, value)
                            else:
                                bad += 1
                            continue
                        if key.startswith(_GROUP_METADATA_KEY):
                            if producer_id < 0:
                                deferred.setdefault(key, []).append(value)
                                n += 1
                                continue
                            if key in deferred:  # keep the log order of the group's records
                                b = self._replay_group_metadata(p, key, deferred.pop(key))
                                bad, n = bad + b, n - b
                        b = self._replay_one(p, _offset, key, value, producer_id, producer_epoch)
                        bad, n = bad + b, n + 1 - b
                    if clock() >= slice_end:
                        b = self._replay_deferred(p, deferred)
                        bad, n = bad + b, n - b
                        progress.records, progress.skipped = total + n, bad
                        await asyncio.sleep(0)
                        slice_end = clock() + _LOAD_SLICE_S
                        if not self.core.is_loading(p, epoch):
                            stop = True
                            break
                progress.corrupt_batches += plog.corrupt_batches - corrupt_before
            except Exception:
                # Whatever stopped this partition's replay (an unreadable file), its groups are
                # served with what was read, and the partitions after it still load: a partition
                # left loading would answer COORDINATOR_LOAD_IN_PROGRESS for as long as we run.
                log.exception("offsets_partition_load_failed", partition=p, records=n)
            if not stop:
                b = self._replay_deferred(p, deferred)
                bad, n = bad + b, n - b
            total += n
            self.apply(self.core.end_load(p, self.clock(), epoch))
            progress.records, progress.skipped = total, bad
            progress.partitions_loaded += 1
        elapsed = time.perf_counter() - t0
        progress.finished = time.perf_counter()
        if epochs is not None:
            return
        self.load_stats = {"records": total, "seconds": elapsed, "skipped": bad}
        log.info(
            "offsets_loaded",
            partitions=len(partitions),
            records=total,
            skipped=bad,
            corrupt_batches=progress.corrupt_batches,
            groups=len(self.core.groups),
            seconds=round(elapsed, 3),
            records_per_s=round(total / elapsed) if elapsed > 0 else None,
        )
        self.loaded.set()

    def _replay_one(
        self, partition: int, offset: int, key: bytes, value: bytes | None, producer_id: int, producer_epoch: int
    ) -> int:
        """Decode and replay one record the fast path left over; 1 when it could not be decoded."""
        try:
            k, v = decode_record(key, value)
        except RecordDecodeError as e:
            log.warning("offsets_record_skipped", partition=partition, offset=offset, error=str(e))
            return 1
        if producer_id < 0:
            self.core.replay(k, v)
        else:
            self.core.replay_transactional(k, v, producer_id, producer_epoch)
        return 0

    def _replay_deferred(self, partition: int, deferred: dict[bytes, list[bytes | None]]) -> int:
        bad = 0
        for key, values in deferred.items():
            bad += self._replay_group_metadata(partition, key, values)
        deferred.clear()
        return bad

    def _replay_group_metadata(self, partition: int, key: bytes, values: list[bytes | None]) -> int:
        """Replay a group's group-metadata records of one slice (in log order): the replay of one
        sets or drops the group's entry and nothing else reads it meanwhile (``replay``), so the
        last one that decodes is the fold of them all, and the ones before it are never decoded
        (decode less: a group rebalancing often has many). Returns how many were undecodable."""
        for bad, value in enumerate(reversed(values)):
            try:
                k, v = decode_record(key, value)
            except RecordDecodeError as e:
                log.warning("offsets_record_skipped", partition=partition, error=str(e))
                continue
            self.core.replay(k, v)
            return bad
        return len(values)

    def _replay_txn_entry(self, partition: int, entry: TxnBatch) -> tuple[int, int]:
        """Fold one delimiter of the load's record stream: a transactional batch starts (its
        producer until its end), ends, or a transaction marker is replayed
        (``CoordinatorLoaderImpl``: control records go to ``replayEndTransactionMarker``)."""
        if not entry.control:
            return entry.producer_id, entry.producer_epoch  # TXN_BATCH_END is (-1, -1)
        marker = parse_end_txn_marker(entry.key, entry.value)
        if marker is not None:
            self.core.replay_end_txn_marker(
                partition, entry.producer_id, entry.producer_epoch, marker.committed, marker.coordinator_epoch
            )
        return -1, -1

    def stats(self) -> dict[str, Any]:
        return {"groups": len(self.core.groups), "pending_appends": self.core.pending_appends}

    def _load_epoch(self, p: int, epochs: dict[int, int] | None) -> int | None:
        """The epoch partition ``p``'s load began at, None when an unload or a newer election
        has made that load stale."""
        epoch = (epochs or self._startup_epochs).pop(p, None)
        if epoch is None:  # load() without begin_load() (tests)
            if self.core.partition_state(p) == "active" and self.core.partition_epoch(p) == -1:
                self.apply(self.core.begin_load(p))
            epoch = self.core.partition_epoch(p)
        return epoch if self.core.is_loading(p, epoch) else None

    # --- elections and resignations (a cluster in one process) -----------------------------------
    def _node(self, node: Node | int) -> Node:
        if isinstance(node, Node):
            return node
        known = self.core.ownership.nodes.get(node)
        if known is None:
            raise ValueError(f"unknown broker {node} (known: {sorted(self.core.ownership.nodes)})")
        return known

    def unload_partition(self, partition: int, epoch: int | None = None) -> None:
        """Resign ``partition`` now (``GroupCoordinatorService.onResignation``): its groups leave
        memory, what waited is answered NOT_COORDINATOR, every broker answers its groups
        NOT_COORDINATOR and FindCoordinator COORDINATOR_NOT_AVAILABLE until it is elected again.
        Appends already started still finish (``resign`` waits for them)."""
        self.apply(self.core.unload_partition(self.clock(), partition, epoch))

    async def load_partition(self, partition: int, epoch: int | None = None, node: Node | int | None = None) -> bool:
        """Elect ``node`` (default: the current leader, else the local node) for ``partition`` and
        load it from the log (``GroupCoordinatorService.onElection``): COORDINATOR_LOAD_IN_PROGRESS
        on ``node`` and NOT_COORDINATOR elsewhere until it is loaded, then served. True once
        loaded; False when the election was stale (``epoch`` not above the partition's) or a later
        unload or election overtook the load. Whatever the partition held is unloaded first."""
        return await self._start_load(partition, epoch, None if node is None else self._node(node))

    def _start_load(self, partition: int, epoch: int | None, node: Node | None) -> Awaitable[bool]:
        """Begin the load now; the awaitable replays the log and ends it."""
        self.apply(self.core.begin_load(partition, epoch, node))
        current = self.core.partition_epoch(partition)
        if epoch is not None and current != epoch:
            return _resolved(False)
        return self._finish_load(partition, current)

    def elect(self, partition: int, node: Node | int, epoch: int | None = None) -> asyncio.Task[bool]:
        """Make ``node`` the coordinator of ``partition``. The change is made now (the partition
        loads: COORDINATOR_LOAD_IN_PROGRESS on ``node``); the task resolves when it is loaded (True)
        or superseded/stale (False). Electing the leader of an active partition again without a
        newer epoch changes nothing (Kafka: "already active")."""
        target = self._node(node)
        owner = self.core.ownership.owner(partition)
        if (
            epoch is None
            and owner is not None
            and owner.node_id == target.node_id
            and self.core.partition_state(partition) == "active"
        ):
            return self._track(_resolved(True))
        return self._track(self._start_load(partition, epoch, target))

    def _log_to_replay(self, partition: int) -> PartitionLog | _NoLog:
        if self.existing_log is None:
            return self.partition_logs(partition)
        plog = self.existing_log(partition)
        return _NO_LOG if plog is None else plog

    async def _finish_load(self, partition: int, epoch: int) -> bool:
        t0 = time.perf_counter()
        await self._settle_writes(partition)
        if not self.core.is_loading(partition, epoch):
            return False
        await self.load([partition], {partition: epoch})
        if self.core.partition_state(partition) != "active" or self.core.partition_epoch(partition) != epoch:
            return False
        owner = self.core.ownership.owner(partition)
        log.info(
            "offsets_partition_loaded",
            partition=partition,
            epoch=epoch,
            node=owner.node_id if owner else None,
            seconds=round(time.perf_counter() - t0, 4),
        )
        return True

    def resign(self, partition: int, epoch: int | None = None) -> asyncio.Task[None]:
        """Unload ``partition`` now (see ``unload_partition``); the task resolves once the
        partition's appends started before it are durable or failed."""
        self.unload_partition(partition, epoch)
        return self._track(self._settle_writes(partition))

    def move(self, partition: int, to_node: Node | int, epoch: int | None = None) -> asyncio.Task[bool]:
        """Move ``partition``'s coordinator to ``to_node`` (one leader change: the old leader's
        groups are unloaded, their parked requests answered NOT_COORDINATOR, and ``to_node``
        loads them); resolves as ``elect``."""
        return self.elect(partition, to_node, epoch)


class _NoLog:
    """What a partition without a log replays: nothing."""

    corrupt_batches = 0

    def iter_record_chunks(self, **_: Any) -> tuple[()]:
        return ()


_NO_LOG = _NoLog()


async def _resolved(value: bool) -> bool:
    return value
