"""The sans-IO coordinator runtime under a coordinator's shard (Kafka's ``CoordinatorRuntime``).

What every coordinator backed by a compacted log needs, whatever it coordinates (groups in
``__consumer_offsets``, transactions in ``__transaction_state``):

- per-partition state (Kafka's ``CoordinatorState``): ``loading`` while the log is replayed,
  ``active`` once loaded, ``unloaded`` after a resignation until the next election, and the leader
  epoch of the last load or unload (``CoordinatorContext.epoch``), which fences stale ones;
- leader ownership (a :class:`~.routing.PartitionOwnership`) and the broker that received the
  request being handled, hence the routing error of a request: NOT_COORDINATOR unless that broker
  leads the key's partition, COORDINATOR_LOAD_IN_PROGRESS while it loads;
- the result of the call in progress (responses to send, appends to write, and whatever else the
  result type carries), between :meth:`CoordinatorRuntime.begin` and :meth:`CoordinatorRuntime.finish`;
- deferred writes (``CoordinatorRuntime.scheduleWriteOperation``): :meth:`CoordinatorRuntime.append`
  hands records to the shell under a token and keeps the continuation until the shell reports the
  outcome (:meth:`CoordinatorRuntime.complete`); an unload fails the partition's writes with
  NOT_COORDINATOR and ignores the outcome of those already handed out (``abandoned`` tokens).

It knows nothing of groups or transactions: error codes, the result type and the append type are
the caller's (a group coordinator answers ``coordinator.errors`` codes, a transaction coordinator
``TxnError`` members, numerically the same Kafka codes). What unloading a partition means for the
coordinator's own state is the ``on_unload`` hook (Kafka: ``CoordinatorShard.onUnloaded``).

Typical use (one thread, or under one lock, like the coordinator that owns it)::

    rt = CoordinatorRuntime(ownership, result_factory=Result, append_factory=make_append)
    rt.on_unload = shard_forgets_partition      # (partition, was_loading, writes_abandoned)
    rt.receive(node_id)                         # a request: the broker that received it
    rt.begin(now_ms)                            # every entry point of the coordinator
    if code := rt.route_error(partition): rt.respond(ctx, {"error_code": code})
    else: rt.append(partition, records, on_done, producer=(pid, epoch))
    return rt.finish()
    ...
    rt.begin(now_ms); pending = rt.complete(token)   # the shell's append_done
    if pending is not None: replay(pending.records); pending.on_done(None)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from .routing import Node, PartitionOwnership

__all__ = [
    "ACTIVE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "LOADING",
    "NOT_COORDINATOR",
    "UNLOADED",
    "CoordinatorRuntime",
    "PendingAppend",
    "PlainAppend",
    "RuntimeResult",
]

# CoordinatorRuntime.CoordinatorState, as groupd names them (INITIAL and FAILED have no twin:
# a partition never loaded is served as active by a single broker, a failed load is retried).
LOADING = "loading"
ACTIVE = "active"
UNLOADED = "unloaded"

# Kafka's error codes (Errors.java); the caller may pass its own enum members of the same values.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16

# How many times an unload fails the partition's writes again: a failed write's continuation may
# write again (a failed assignment write restarts a join phase), and that write is failed too.
_UNLOAD_ROUNDS = 100


class RuntimeResult(Protocol):
    """What a coordinator call hands back: at least responses and appends (a result may carry more,
    e.g. the transaction coordinator's markers)."""

    responses: list[tuple[Any, dict[str, Any]]]
    appends: list[Any]


R = TypeVar("R", bound=RuntimeResult)


@dataclass(slots=True)
class PendingAppend:
    """A write handed to the shell and not yet reported back (a deferred event of Kafka's runtime)."""

    token: int
    partition: int
    records: list[Any]
    # called with None (or the caller's NONE) when durable, with the error code when it failed
    on_done: Callable[[Any], None]
    # the caller's own facts about the write (a producer id, a marker, the key it is for, ...)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PlainAppend:
    """The default entry of ``result.appends``: records for one partition under a token. An
    ``append_factory`` may make any object with ``token`` and ``partition`` attributes."""

    token: int
    partition: int
    records: list[Any]


def _plain_append(token: int, partition: int, records: list[Any], **_extra: Any) -> PlainAppend:
    return PlainAppend(token, partition, records)


class CoordinatorRuntime(Generic[R]):
    """Partition states, epochs, ownership, the call's result and deferred writes of one coordinator.

    ``result_factory()`` makes the empty result of a call; ``append_factory(token, partition,
    records, **extra)`` makes the entry of ``result.appends`` the shell writes (``extra`` as given
    to :meth:`append`). ``owns(partition)``, when given, replaces the ownership check of
    :meth:`route_error` (a coordinator told by its node which partitions it leads). Without
    ``ownership`` the local node leads all ``num_partitions`` partitions.
    """

    def __init__(
        self,
        ownership: PartitionOwnership | None = None,
        *,
        result_factory: Callable[[], R],
        num_partitions: int = 50,
        append_factory: Callable[..., Any] = _plain_append,
        owns: Callable[[int], bool] | None = None,
        none: int = NONE,
        not_coordinator: int = NOT_COORDINATOR,
        load_in_progress: int = COORDINATOR_LOAD_IN_PROGRESS,
        on_unload: Callable[[int, bool, int], None] | None = None,
        log: Any = None,
    ) -> None:
        self.result_factory = result_factory
        self.append_factory = append_factory
        self.owns = owns
        self.none = none
        self.not_coordinator = not_coordinator
        self.load_in_progress = load_in_progress
        # The coordinator's own unloading: (partition, was_loading, writes abandoned), called once
        # the partition is nobody's and its writes have failed (CoordinatorShard.onUnloaded).
        self.on_unload = on_unload or (lambda _partition, _was_loading, _abandoned: None)
        # told about stale loads and unloads (a structlog-style logger); None: nobody
        self.log = log
        # The broker that received the request being handled (its node id): a request is served
        # only by the leader of its key's partition. A single broker never names itself and stays
        # the receiver (see the ``ownership`` setter).
        self.receiver = -1
        # a single broker leading every partition unless told otherwise
        self.ownership = ownership or PartitionOwnership(Node(0, "localhost", 9092), num_partitions)
        self.loading: set[int] = set()
        # Partitions resigned and not elected again (Kafka: no CoordinatorContext): NOT_COORDINATOR.
        self.unloaded: set[int] = set()
        # The leader epoch each partition was last loaded or unloaded at (CoordinatorContext.epoch):
        # an election or resignation at an epoch not above it is stale and ignored.
        self.epochs: dict[int, int] = {}
        self.pending: dict[int, PendingAppend] = {}
        # Tokens of appends handed to the shell whose partition was unloaded before they completed:
        # their outcome is ignored (their requests were answered NOT_COORDINATOR), the records
        # reach the log or not, and a later load replays what did.
        self.abandoned: set[int] = set()
        self.next_token = 1
        self.now = 0
        self.out: R = result_factory()

    @property
    def ownership(self) -> PartitionOwnership:
        return self._ownership

    @ownership.setter
    def ownership(self, ownership: PartitionOwnership) -> None:
        self._ownership = ownership
        self.local_id = ownership.local.node_id
        self.receiver = self.local_id

    # --- the call in progress -----------------------------------------------------------------

    def begin(self, now_ms: int) -> None:
        """Start a call at ``now_ms`` with an empty result."""
        self.now = now_ms
        self.out = self.result_factory()

    def receive(self, node_id: int | None) -> None:
        """A request arrived at broker ``node_id`` (None: the local node). The receiver stays until
        the next request: continuations run by ``tick`` and ``complete`` route with it."""
        self.receiver = self.local_id if node_id is None else node_id

    def finish(self) -> R:
        """The result of the call (no fresh one here: every entry point starts with ``begin``)."""
        return self.out

    def respond(self, ctx: Any, response: dict[str, Any]) -> None:
        self.out.responses.append((ctx, response))

    def append(self, partition: int, records: list[Any], on_done: Callable[[Any], None], **extra: Any) -> int:
        """Hand ``records`` for ``partition`` to the shell (``CoordinatorRuntime.scheduleWriteOperation``'s
        write); ``on_done`` runs with the outcome when the shell reports it. Returns the token."""
        token = self.next_token
        self.next_token += 1
        self.pending[token] = PendingAppend(token, partition, records, on_done, extra)
        self.out.appends.append(self.append_factory(token, partition, records, **extra))
        return token

    def complete(self, token: int) -> PendingAppend | None:
        """The shell reports the append ``token`` done: its pending write to settle, or None when its
        partition was unloaded meanwhile (CoordinatorRuntime fails the deferred events on unload: the
        answers went out, and a load replays what reached the log). KeyError for an unknown token."""
        pending = self.pending.pop(token, None)
        if pending is None:
            if token in self.abandoned:
                self.abandoned.discard(token)
                return None
            raise KeyError(f"unknown append token {token}")
        return pending

    @property
    def pending_appends(self) -> int:
        return len(self.pending)

    # --- routing --------------------------------------------------------------------------------

    def route_error(self, partition: int) -> int:
        """NOT_COORDINATOR unless the receiving broker leads ``partition`` (KafkaApis answers it from
        any other broker, and while nobody leads it), COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        if self.owns is not None:
            if not self.owns(partition):
                return self.not_coordinator
        elif self._ownership.owner_ids[partition] != self.receiver:
            return self.not_coordinator
        if partition in self.loading:
            return self.load_in_progress
        return self.none

    def is_local(self, partition: int) -> bool:
        """Whether any broker of this process leads ``partition`` (not only the receiving one)."""
        return self.owns(partition) if self.owns is not None else self._ownership.is_local(partition)

    # --- partition states -----------------------------------------------------------------------

    def state(self, partition: int) -> str:
        """``LOADING``, ``UNLOADED`` or ``ACTIVE`` (CoordinatorRuntime's CoordinatorState)."""
        if partition in self.loading:
            return LOADING
        return UNLOADED if partition in self.unloaded else ACTIVE

    def epoch(self, partition: int) -> int:
        """The leader epoch the partition was last loaded or unloaded at (-1: never)."""
        return self.epochs.get(partition, -1)

    def is_loading(self, partition: int, epoch: int | None = None) -> bool:
        """Whether a replay of ``partition`` (begun at ``epoch``) is still wanted: an unload or a
        newer election makes a load in progress stale."""
        return partition in self.loading and (epoch is None or self.epochs.get(partition) == epoch)

    def is_stale(self, partition: int, epoch: int | None) -> bool:
        """An election or resignation at ``epoch`` not above the partition's last one is stale."""
        return epoch is not None and epoch <= self.epochs.get(partition, -1)

    def begin_load(self, partition: int, epoch: int | None = None, node: Node | None = None) -> int | None:
        """Start loading ``partition`` (``CoordinatorRuntime.scheduleLoadOperation``): unload what is
        held of it first (an active or half-loaded partition starts from nothing), make ``node`` its
        leader (default: the current one, or the local node when nobody leads it) and mark it
        loading. A change of leader bumps the leader epoch unless ``epoch`` is given. Returns the
        epoch, or None when the election is stale (then nothing changes)."""
        if self.is_stale(partition, epoch):
            self._log_ignored("partition_load_ignored", partition, epoch)  # Kafka: "Ignored loading metadata"
            return None
        previous = self._ownership.owner(partition)
        if partition not in self.unloaded:
            self.drop(partition)
        target = node or previous or self._ownership.local
        if (
            epoch is None
            and partition not in self.epochs
            and previous is not None
            and previous.node_id == target.node_id
        ):
            epoch = self._ownership.epoch(partition)  # the first load, by the leader it starts with
        epoch = self._ownership.assign(partition, target, epoch)
        self.epochs[partition] = epoch
        self.unloaded.discard(partition)
        self.loading.add(partition)
        return epoch

    def end_load(self, partition: int, epoch: int | None = None) -> bool:
        """The partition's replay is over: it becomes active. False (nothing changes) when an unload
        or a newer election made the load stale (``CompleteLoad`` of a context no longer LOADING)."""
        if partition in self.unloaded or (epoch is not None and not self.is_loading(partition, epoch)):
            if self.log is not None:
                self.log.info("partition_load_completion_ignored", partition=partition, epoch=epoch)
            return False
        self.loading.discard(partition)
        return True

    def unload(self, partition: int, epoch: int | None = None) -> int | None:
        """Resign ``partition`` (``CoordinatorRuntime.scheduleUnloadOperation``): it is nobody's
        and answers NOT_COORDINATOR until elected again. Returns the new epoch, or None when the
        resignation is stale."""
        if self.is_stale(partition, epoch):
            self._log_ignored("partition_unload_ignored", partition, epoch)
            return None
        if partition not in self.unloaded:
            self.drop(partition)
        self.unloaded.add(partition)
        epoch = self._ownership.assign(partition, None, epoch)
        self.epochs[partition] = epoch
        return epoch

    def _log_ignored(self, event: str, partition: int, epoch: int | None) -> None:
        if self.log is not None:
            self.log.info(event, partition=partition, epoch=epoch, current=self.epochs[partition])

    def drop(self, partition: int) -> list[int]:
        """Forget ``partition``: nobody leads it from here (so what the failed writes' continuations
        run next is answered NOT_COORDINATOR by :meth:`route_error`), its writes fail with
        NOT_COORDINATOR, and ``on_unload`` drops the coordinator's state of it. Returns the tokens
        abandoned."""
        was_loading = partition in self.loading
        self.loading.discard(partition)
        self._ownership.assign(partition, None, self._ownership.epoch(partition))
        abandoned = self.fail_appends(partition)
        self.on_unload(partition, was_loading, len(abandoned))
        return abandoned

    def fail_appends(self, partition: int) -> list[int]:
        """Fail every write of ``partition`` with NOT_COORDINATOR (Kafka's unload fails the deferred
        events and the current batch): a continuation may write again, and that write is failed the
        same way and never handed out. Tokens already handed to the shell become abandoned."""
        failed: list[int] = []
        for _round in range(_UNLOAD_ROUNDS):
            tokens = [t for t, pending in self.pending.items() if pending.partition == partition]
            if not tokens:
                break
            for token in tokens:
                pending = self.pending.pop(token)
                failed.append(token)
                pending.on_done(self.not_coordinator)
        never_handed_out = {a.token for a in self.out.appends if a.partition == partition}
        self.out.appends = [a for a in self.out.appends if a.partition != partition]
        self.abandoned.update(t for t in failed if t not in never_handed_out)
        return failed
