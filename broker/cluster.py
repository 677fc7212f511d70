"""Cluster mode: several brokers in one process (``groupd serve --brokers N``).

Theory of operation. A real Kafka cluster is N processes replicating each partition; what a client
*sees* of it is N endpoints, a Metadata answer naming a leader (and replicas, ISR, a leader epoch)
per partition, a coordinator per group, and the errors a broker answers when it is not the one
asked for (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, FENCED/UNKNOWN_LEADER_EPOCH). groupd
reproduces exactly that surface and nothing below it: the brokers of one process share the data
directory, the partition logs, the topic registry and ONE group coordinator core. So a cluster
costs one listener, one ``Dispatcher`` and a few wrapped handlers per extra broker, and "moving" a
partition is a change of who is allowed to answer for it, with its leader epoch bumped, never a
copy of data (which is also why no acknowledged record can be lost across a leader change). The
leader epochs reach the data too, as in Kafka: the shared logs stamp each batch with its partition's
current epoch and keep Kafka's leader epoch cache (``leader-epoch-checkpoint``, storage/epochs.py),
so OffsetForLeaderEpoch and ListOffsets answer what a Kafka leader would after a leader change.

- ``ClusterNode``: one broker: node id, listener, its own ``Server`` and ``Dispatcher`` (faults
  and metrics observers are shared), and a state: live, stopped (not listening, its connections
  closed, its partitions led by others) or isolated (accepting connections but reading nothing
  from them: a broker cut off from its clients but not from the cluster, so it keeps its
  leaderships; clients see requests time out, and what waited is answered when it ends).
- ``Leadership``: leader and leader epoch of every partition, replicas (replication factor) and the
  live set. Leaders are spread round-robin (``replicas``); a stopped broker's partitions go to the
  first live replica (else the next live broker: the logs are shared), epoch + 1;
  ``rebalance_leaders`` moves each back to its preferred (first) replica, as Kafka's preferred
  leader election does. ``__consumer_offsets`` partitions are ordinary partitions here; their
  leader is the group coordinator of their groups, handed to the group shell
  (``on_coordinator_moved``). The transaction log's partitions plug in the same way
  (``Cluster.coordinator_topics``: add ``__transaction_state`` with its own callback).
- Per-broker handlers: the data plane's partition APIs are wrapped (``leader_guard``): partitions
  this broker does not lead (or whose ``current_leader_epoch`` is stale or from the future) are
  answered here with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (and the
  ``current_leader`` hint where the version has it, Kafka's KIP-951), the rest go to the shared
  data plane. Metadata and DescribeCluster answers are rewritten with the cluster's view. Which
  API gets which wrapper is its row's ``Routing`` in the broker's API table (``broker.apis``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import structlog
from groupd.coordinator import Node as CoordinatorNode
from groupd.coordinator import PartitionOwnership
from groupd.protocol.dispatch import Dispatcher, Handler
from groupd.protocol.errors import ErrorCode
from groupd.protocol.partitioning import coordinator_partition
from groupd.protocol.server import Request, Server
from groupd.security.listeners import Listener, endpoint
from groupd.storage import LogManager, PartitionLog, StorageError
from groupd.storage.files import write_atomically

from .admin_handlers import AdminHandlers
from .apis import Api, Routing
from .group_shell import GroupShell
from .settings import Config
from .topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, Topic, TopicRegistry

log = structlog.get_logger("groupd.cluster")

LIVE, STOPPED, ISOLATED = "live", "stopped", "isolated"
LEADERSHIP_FILE = "cluster-leaders.json"
TRANSACTION_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions


class ClusterError(Exception):
    """A broker action that cannot be done: ``status`` 404 (unknown broker/group) or 409 (state)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ClusterNode:
    node_id: int
    dispatcher: Dispatcher
    server: Server
    listener: Listener
    state: str = LIVE

    @property
    def endpoint(self) -> tuple[str, int]:
        return endpoint(None, self.listener)

    def describe(self) -> dict[str, Any]:
        host, port = self.endpoint
        return {"node_id": self.node_id, "host": host, "port": port, "state": self.state}


@dataclass
class Move:
    """One leadership change: ``topic``/``partition`` from ``old`` to ``new`` at ``epoch``."""

    topic: str
    partition: int
    old: int
    new: int
    epoch: int


@dataclass
class Leadership:
    """Leader and leader epoch of every partition, over the brokers ``node_ids`` (module docstring)."""

    node_ids: list[int]
    topics: TopicRegistry
    live: set[int] = field(default_factory=set)
    # Where leaders and epochs survive a restart (Kafka keeps leader epochs in the metadata log):
    # a client caches a partition's leader epoch, and after a restart that went back to 0 it would
    # get UNKNOWN_LEADER_EPOCH for every fetch and ignore the "older" metadata (librdkafka does).
    path: Path | None = None
    # (topic, partition) -> [leader, epoch]; made on first use, dropped with the topic.
    _state: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    # Bumped by every change of a leader or epoch and every forgotten topic: ``leader_guard``'s
    # per-broker caches of the partitions it may answer for are valid while it stays the same.
    version: int = 0
    # The topics the leadership file names (what ``_persist`` last wrote, or the file at start):
    # forgetting any other topic leaves the file as it is.
    _written: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.live:
            self.live = set(self.node_ids)
        if self.path is not None and self.path.exists():
            for topic, parts in json.loads(self.path.read_text()).items():
                self._written.add(topic)
                for p, (leader, epoch) in parts.items():
                    # a leader this process no longer runs (fewer --brokers): elected anew, epoch + 1
                    self._state[(topic, int(p))] = [leader if leader in self.node_ids else -2, int(epoch)]

    def _persist(self) -> None:
        if self.path is None:
            return
        doc: dict[str, dict[str, list[int]]] = {}
        for (topic, p), (leader, epoch) in sorted(self._state.items()):
            t = self.topics.get(topic)
            # epoch 0 at the preferred leader is what a fresh start makes anyway
            if t is not None and (epoch > 0 or leader != self.replicas(t, p)[0]):
                doc.setdefault(topic, {})[str(p)] = [leader, epoch]
        write_atomically(self.path, json.dumps(doc, sort_keys=True))
        self._written = set(doc)

    def replicas(self, t: Topic, partition: int) -> list[int]:
        """Kafka's round-robin placement (``StripedReplicaPlacer`` without racks), preferred first.
        ``__consumer_offsets`` starts at the first broker, so partition p is led by broker p % N;
        other topics start at a broker picked by their name, so one-partition topics spread too."""
        n = len(self.node_ids)
        rf = min(max(t.replication_factor, 1), n)
        if t.name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
            rf = min(3, n)  # offsets.topic.replication.factor, transaction.state.log.replication.factor
        start = 0 if t.internal else zlib.crc32(t.name.encode()) % n
        return [self.node_ids[(start + partition + j) % n] for j in range(rf)]

    def _elect(self, t: Topic, partition: int, exclude: int | None = None) -> int:
        live = [n for n in self.node_ids if n in self.live and n != exclude]
        if not live:
            return -1
        for r in self.replicas(t, partition):
            if r in live:
                return r
        # No replica is live: another broker takes it (the logs are shared; it shows in the replicas).
        return live[(self.node_ids.index(self.replicas(t, partition)[0]) + partition) % len(live)]

    def get(self, t: Topic, partition: int) -> list[int]:
        """[leader, epoch] of a partition of ``t``."""
        key = (t.name, partition)
        st = self._state.get(key)
        if st is None:
            st = self._state[key] = [self._elect(t, partition), 0]
        elif st[0] == -2:
            st[0], st[1] = self._elect(t, partition), st[1] + 1
            self.version += 1
        return st

    def epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch, without electing anything: what the partition logs stamp
        on their batches (``PartitionLog.leader_epoch_source``, read from the appender's threads).
        A leader to be elected anew (-2) counts at the epoch ``get`` will give it."""
        st = self._state.get((topic, partition))
        if st is None:
            return 0
        return st[1] + 1 if st[0] == -2 else st[1]

    def describe(self, t: Topic, partition: int) -> tuple[int, int, list[int], list[int], list[int]]:
        """(leader, epoch, replicas, isr, offline replicas) as Metadata reports them."""
        leader, epoch = self.get(t, partition)
        replicas = self.replicas(t, partition)
        if leader not in replicas and leader >= 0:
            replicas = [*replicas, leader]
        isr = [r for r in replicas if r in self.live]
        offline = [r for r in replicas if r not in self.live]
        return leader, epoch, replicas, isr, offline

    def _all(self) -> list[tuple[Topic, int]]:
        return [(t, p) for t in list(self.topics.topics.values()) for p in range(t.partitions)]

    def _set(self, t: Topic, partition: int, new: int) -> Move | None:
        st = self.get(t, partition)
        if st[0] == new:
            return None
        old = st[0]
        st[0], st[1] = new, st[1] + 1
        self.version += 1
        return Move(t.name, partition, old, new, st[1])

    def broker_stopped(self, node_id: int) -> list[Move]:
        self.live.discard(node_id)
        moves = []
        for t, p in self._all():
            if self.get(t, p)[0] == node_id:
                move = self._set(t, p, self._elect(t, p))
                if move is not None:
                    moves.append(move)
        return self._persisted(moves)

    def _persisted(self, moves: list[Move]) -> list[Move]:
        if moves:  # one durable write per action, before anyone is told of the moves
            self._persist()
        return moves

    def broker_started(self, node_id: int) -> None:
        self.live.add(node_id)

    def rebalance(self) -> list[Move]:
        """Kafka's preferred leader election: each partition back to its first replica if it is live."""
        moves = []
        for t, p in self._all():
            preferred = self.replicas(t, p)[0]
            if preferred in self.live:
                move = self._set(t, p, preferred)
                if move is not None:
                    moves.append(move)
        return self._persisted(moves)

    def live_leader(self, t: Topic, partition: int) -> int:
        """The leader, elected anew (epoch + 1) if it is not live: for partitions of a topic the
        stop of a broker did not see because it did not exist yet (``__transaction_state``)."""
        leader = self.get(t, partition)[0]
        if leader not in self.live:
            move = self._set(t, partition, self._elect(t, partition))
            self._persisted([move] if move is not None else [])
            leader = self.get(t, partition)[0]
        return leader

    def move(self, t: Topic, partition: int, to: int) -> Move | None:
        move = self._set(t, partition, to)
        self._persisted([move] if move is not None else [])
        return move

    def forget(self, topic: str) -> None:
        keys = [k for k in self._state if k[0] == topic]
        for key in keys:
            del self._state[key]
        self.version += 1  # a topic made again under the name starts from scratch
        if topic in self._written:
            # Only a topic the file names changes it: the others (never moved, at epoch 0) cost
            # no write and fsync on the loop per deleted topic (~10-20 ms each on a busy disk).
            self._persist()

    def check(self, node_id: int, topic: str, partition: int, current_epoch: int) -> tuple[int, int, int]:
        """(error, leader, epoch) for a partition request to ``node_id``; error 0 lets it through.
        Kafka's ``Partition.localLogWithEpochOrThrow``: the epoch first, then leadership. Unknown
        partitions pass (the data plane answers UNKNOWN_TOPIC_OR_PARTITION)."""
        t = self.topics.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            return 0, -1, -1
        leader, epoch = self.get(t, partition)
        if current_epoch is not None and current_epoch != -1:
            if current_epoch < epoch:
                return ErrorCode.FENCED_LEADER_EPOCH, leader, epoch
            if current_epoch > epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH, leader, epoch
        if leader != node_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, leader, epoch
        return 0, leader, epoch


# --- the data plane's partition APIs, guarded per broker -------------------------------------------
@dataclass(frozen=True)
class _Shape:
    """Where an API keeps its topics and partitions, in the request and in the answer."""

    topics: str
    name: str
    parts: str
    index: str
    r_topics: str
    r_name: str
    r_parts: str
    r_index: str
    epoch: str | None  # the request's current_leader_epoch field
    blank: Callable[[int], dict[str, Any]]  # an answer entry without data, by API version
    hint_from: int | None = None  # first version with the current_leader hint (KIP-951)
    endpoints_from: int | None = None  # first version with the answer's node_endpoints (KIP-951)


_SHAPES: dict[str, _Shape] = {
    "Produce": _Shape(
        "topic_data",
        "name",
        "partition_data",
        "index",
        "responses",
        "name",
        "partition_responses",
        "index",
        None,
        lambda v: {
            "base_offset": -1,
            "log_append_time_ms": -1,
            "log_start_offset": -1,
            "record_errors": [],
            "error_message": None,
        },
        hint_from=10,
        endpoints_from=10,
    ),
    "Fetch": _Shape(
        "topics",
        "topic",
        "partitions",
        "partition",
        "responses",
        "topic",
        "partitions",
        "partition_index",
        "current_leader_epoch",
        lambda v: {
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            # Kafka's FetchResponse.partitionResponse(tp, error): MemoryRecords.EMPTY, never null
            # (librdkafka cannot parse a null one: "invalid MessageSetSize -1", and fetches the
            # old leader again and again after a leader moves away from a live broker).
            "records": b"",
        },
        hint_from=12,
    ),
    "ListOffsets": _Shape(
        "topics",
        "name",
        "partitions",
        "partition_index",
        "topics",
        "name",
        "partitions",
        "partition_index",
        "current_leader_epoch",
        lambda v: {"old_style_offsets": []} if v == 0 else {"timestamp": -1, "offset": -1, "leader_epoch": -1},
    ),
    "DeleteRecords": _Shape(
        "topics",
        "name",
        "partitions",
        "partition_index",
        "topics",
        "name",
        "partitions",
        "partition_index",
        None,
        lambda v: {"low_watermark": -1},
    ),
    "OffsetForLeaderEpoch": _Shape(
        "topics",
        "topic",
        "partitions",
        "partition",
        "topics",
        "topic",
        "partitions",
        "partition",
        "current_leader_epoch",
        lambda v: {"leader_epoch": -1, "end_offset": -1},
    ),
}
# The APIs ``leader_guard`` knows the shape of: the table's Routing.LEADER rows.
GUARDED_APIS = frozenset(_SHAPES)


def leader_guard(api: str, handler: Handler, node_id: int, leaders: Leadership, nodes: Callable[[], Any]) -> Handler:
    """``handler`` (the shared data plane's) as broker ``node_id`` serves it: partitions it may not
    answer for are answered here, the others are handed on with their epoch checked (and cleared:
    the data plane's own check is the one broker's, at epoch 0). ``nodes()`` maps node ids to ``ClusterNode``."""
    shape = _SHAPES[api]
    check = leaders.check

    epoch_field = shape.epoch
    index_field = shape.index
    topics_field, name_field, parts_field = shape.topics, shape.name, shape.parts
    # topic -> {partition: epoch} of the partitions this broker led when last checked, valid while
    # ``leaders.version`` is ``led_at[0]``: a partition found here passes without ``check`` (its
    # topic lookup, election and epoch compare: ~1.3 of this wrapper's ~2-3.3 us per Produce or
    # Fetch at three brokers, bench.cluster_group's docstring).
    led: dict[str, dict[int, int]] = {}
    led_at = [leaders.version]

    def guarded(req: Request) -> Any:
        # The request's body is its own (decoded for it): epochs are cleared and refused partitions
        # dropped in place, with no copy of the body when everything passes (the hot path: every
        # franz-go Fetch carries its partitions' epochs).
        body = req.body
        v = req.api_version
        rejected: dict[str, list[dict[str, Any]]] = {}
        if led_at[0] != leaders.version:
            led.clear()
            led_at[0] = leaders.version
        for td in body.get(topics_field) or ():
            name = td[name_field]
            parts = td[parts_field] or ()
            keep: list[dict[str, Any]] | None = None
            mine = led.get(name)
            for i, pd in enumerate(parts):
                current = pd.get(epoch_field, -1) if epoch_field else -1
                index = pd[index_field]
                known = mine.get(index) if mine is not None else None
                if known is not None and (current == known or current == -1 or current is None):
                    code = 0
                else:
                    code, leader, epoch = check(node_id, name, index, current)
                    if not code and epoch >= 0:  # led here (unknown partitions pass with -1)
                        if mine is None:
                            mine = led[name] = {}
                        mine[index] = epoch
                if code:
                    if keep is None:
                        keep = list(parts[:i])
                    entry = {shape.r_index: pd[index_field], "error_code": code, **shape.blank(v)}
                    if shape.hint_from is not None and v >= shape.hint_from:
                        entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
                    rejected.setdefault(name, []).append(entry)
                    continue
                if current != -1 and current is not None:
                    pd[epoch_field] = -1
                if keep is not None:
                    keep.append(pd)
            if keep is not None:
                td[parts_field] = keep
        if not rejected:
            return handler(req)
        if api == "Fetch":
            body["max_wait_ms"] = 0  # an error answers at once (Kafka's errorReadingData)
        if rejected and api == "Produce" and body.get("acks") == 0:
            # No answer to carry the error: Kafka closes the connection (KafkaApis.handleProduceRequest),
            # once the partitions this broker leads are appended (their appends are started by now).
            result = handler(req)
            req.conn.close("produce with acks=0 to a partition this broker does not lead", topics=sorted(rejected))
            return result
        if rejected:
            encode = req.encode_response

            def merged(r: Request, resp: dict[str, Any]) -> bytes:
                return encode(r, _merge(shape, resp, rejected, v, nodes()))

            req.encode_response = merged
        return handler(req)

    return guarded


def _merge(
    shape: _Shape, resp: dict[str, Any], rejected: dict[str, list[dict[str, Any]]], v: int, nodes: dict[int, Any]
) -> dict[str, Any]:
    out = []
    left = dict(rejected)
    for tr in resp.get(shape.r_topics) or ():
        errs = left.pop(tr[shape.r_name], None)
        out.append({**tr, shape.r_parts: [*(tr[shape.r_parts] or ()), *errs]} if errs else tr)
    out.extend({shape.r_name: name, shape.r_parts: errs} for name, errs in left.items())
    resp = {**resp, shape.r_topics: out}
    if shape.endpoints_from is not None and v >= shape.endpoints_from:
        # The endpoints of the leaders the answer names (KIP-951's node_endpoints).
        named = {e["current_leader"]["leader_id"] for errs in rejected.values() for e in errs}
        resp["node_endpoints"] = [
            {"node_id": n, "host": nodes[n].endpoint[0], "port": nodes[n].endpoint[1], "rack": None}
            for n in sorted(named)
            if n in nodes
        ]
    return resp


def _reject_parked(req: Request, m: Move, nodes: dict[int, Any]) -> None:
    """Take partition ``m`` out of the parked Fetch ``req`` and have its answer carry the error
    ``leader_guard`` answers for a partition this broker does not lead."""
    shape = _SHAPES["Fetch"]
    v = req.api_version
    for td in req.body.get(shape.topics) or ():
        if td[shape.name] == m.topic:
            td[shape.parts] = [pd for pd in td[shape.parts] or () if pd[shape.index] != m.partition]
    entry = {shape.r_index: m.partition, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, **shape.blank(v)}
    if shape.hint_from is not None and v >= shape.hint_from:
        entry["current_leader"] = {"leader_id": m.new, "leader_epoch": m.epoch}
    rejected = {m.topic: [entry]}
    encode = req.encode_response

    def merged(r: Request, resp: dict[str, Any]) -> bytes:
        return encode(r, _merge(shape, resp, rejected, v, nodes))

    req.encode_response = merged


# --- broker configs, asked of any broker ------------------------------------------------------------
_CONFIG_ANSWERS = {"DescribeConfigs": "results", "AlterConfigs": "responses", "IncrementalAlterConfigs": "responses"}
# The APIs ``broker_configs_as`` knows the answer of: the table's Routing.BROKER_CONFIGS rows.
BROKER_CONFIG_APIS = frozenset(_CONFIG_ANSWERS)
_BROKER_RESOURCES = (4, 8)  # BROKER, BROKER_LOGGER (broker.configs)
_NODE_ID_CONFIGS = ("node.id", "broker.id")


def broker_configs_as(api: str, handler: Handler, node_id: int, first: int) -> Handler:
    """The configs handler knows one broker id (the first node's): a broker resource named by
    ``node_id`` on broker ``node_id`` (what admin clients send, Kafka's ``ConfigHelper`` accepts only
    the receiving broker's id) is handed on as the first id's, and its answer named back, with this
    broker's node.id. The brokers of one process share every other setting."""
    if node_id == first:
        return handler
    mine, theirs = str(node_id), str(first)
    answers = _CONFIG_ANSWERS[api]

    def as_this_broker(req: Request) -> Any:
        resources = req.body.get("resources") or ()
        if not any(r.get("resource_type") in _BROKER_RESOURCES and r.get("resource_name") == mine for r in resources):
            return handler(req)
        req.body = {
            **req.body,
            "resources": [
                {**r, "resource_name": theirs}
                if r.get("resource_type") in _BROKER_RESOURCES and r.get("resource_name") == mine
                else r
                for r in resources
            ],
        }
        encode = req.encode_response

        def named_back(r: Request, resp: dict[str, Any]) -> bytes:
            for entry in resp.get(answers) or ():
                if entry.get("resource_type") in _BROKER_RESOURCES and entry.get("resource_name") == theirs:
                    entry["resource_name"] = mine
                    for c in entry.get("configs") or ():
                        if c.get("name") in _NODE_ID_CONFIGS:
                            c["value"] = mine
            return encode(r, resp)

        req.encode_response = named_back
        return handler(req)

    return as_this_broker


# --- the cluster -------------------------------------------------------------------------------------
class Node(Protocol):
    """What the cluster needs of the node it extends (``broker.node.Broker``, which imports this)."""

    config: Config
    listeners: list[Listener]
    dispatcher: Dispatcher
    server: Server
    topics: TopicRegistry
    logs: LogManager
    admin: AdminHandlers
    groups: GroupShell
    ssl_context: Any

    def new_server(self, dispatcher: Dispatcher) -> Server: ...

    def _register(self, d: Dispatcher, node_id: int, listener: Listener) -> None: ...


class Cluster:
    """The brokers of this process and the actions on them (stop, start, isolate, move leaders)."""

    def __init__(self, broker: Node) -> None:
        self.broker = broker
        config = broker.config
        self.size = config.brokers
        base = broker.listeners[0]
        self.nodes: dict[int, ClusterNode] = {
            config.node_id: ClusterNode(config.node_id, broker.dispatcher, broker.server, base)
        }
        for i in range(1, self.size):
            li = dataclasses.replace(
                base,
                port=base.port + i if base.port else 0,
                advertised_port=base.advertised_port + i if base.advertised_port else 0,
            )
            d = Dispatcher()
            d.observers = broker.dispatcher.observers  # the same list: metrics and dashboard see every broker
            server = broker.new_server(d)
            self.nodes[config.node_id + i] = ClusterNode(config.node_id + i, d, server, li)
        self.leaders = Leadership(list(self.nodes), broker.topics, path=broker.data_dir / LEADERSHIP_FILE)
        broker.topics.live_brokers = self.size
        broker.admin.node_ids = list(self.nodes)
        broker.admin.on_topic_deleted.append(lambda t: self.leaders.forget(t.name))
        # The shared logs stamp their batches with the partition's leader epoch and keep Kafka's
        # leader epoch cache (storage/epochs.py); one broker alone stays at epoch 0 without one.
        broker.logs.track_leader_epochs(self.leaders.epoch)
        # A new partition's leader records its first epoch as it takes the partition
        # (``Partition.makeLeader`` on creation), off the event loop: left to the first append,
        # the checkpoint's write and fsyncs ran on the loop, inside the append (issue 29 item 4:
        # ~4% of a 3-broker group pipeline's loop, one blocking fsync per new partition).
        broker.admin.on_topic_created.append(lambda t: self._record_new(t, 0))
        broker.admin.on_partitions_added.append(self._record_new)
        # Coordinator topics: whose partitions' leaders are coordinators, and who is told when one
        # moves: ``moved(partition, new leader, leader epoch)`` unloads it where it was and loads it
        # on the new leader (answering COORDINATOR_LOAD_IN_PROGRESS meanwhile). The transaction
        # coordinator hooks ``__transaction_state`` in the same way when it exists.
        self.coordinator_topics: dict[str, Callable[[int, int, int], object]] = {
            OFFSETS_TOPIC: lambda p, node, epoch: broker.groups.move(p, node, epoch)
        }
        # The transaction core, shared like the group core, serves an id only on the broker leading
        # its __transaction_state partition (the API table routes transaction APIs per broker).
        broker.txn_core.route_by(self.transaction_leader)

    # --- wiring ---------------------------------------------------------------------------------
    def register_nodes(self) -> None:
        """Give every broker but the first (``Broker._register`` did it) its handlers."""
        for node in list(self.nodes.values())[1:]:
            self.broker._register(node.dispatcher, node.node_id, node.listener)

    def wrap(self, api: Api, handler: Handler, node_id: int) -> Handler:
        """The handler of ``api`` as broker ``node_id`` serves it, by the API table's routing."""
        routing = api.routing
        if routing is Routing.LEADER:
            return leader_guard(api.name, handler, node_id, self.leaders, lambda: self.nodes)
        if routing is Routing.METADATA:
            return self._metadata(handler)
        if routing is Routing.DESCRIBE_CLUSTER:
            return self._describe_cluster(handler)
        if routing is Routing.BROKER_CONFIGS:
            return broker_configs_as(api.name, handler, node_id, self.broker.config.node_id)
        # SHARED, COORDINATOR and SHARE_LEADER (the handler was made for this broker:
        # ``GroupShell.handler``, ``Broker.share_handlers``)
        return handler

    def _broker_entries(self) -> list[ClusterNode]:
        # A stopped broker is not registered (Kafka lists alive brokers only); an isolated one is.
        return [n for n in self.nodes.values() if n.state != STOPPED]

    def controller_id(self) -> int:
        entries = self._broker_entries()
        return entries[0].node_id if entries else -1

    def _metadata(self, inner: Handler) -> Handler:
        topics = self.broker.topics
        leaders = self.leaders

        def metadata(req: Request) -> dict[str, Any]:
            resp = inner(req)
            resp["brokers"] = [
                {"node_id": n.node_id, "host": n.endpoint[0], "port": n.endpoint[1], "rack": None}
                for n in self._broker_entries()
            ]
            resp["controller_id"] = self.controller_id()
            for tr in resp.get("topics") or ():
                t = topics.get(tr.get("name") or "")
                if t is None or tr.get("error_code"):
                    continue
                for pr in tr.get("partitions") or ():
                    leader, epoch, replicas, isr, offline = leaders.describe(t, pr["partition_index"])
                    pr.update(
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=replicas,
                        isr_nodes=isr,
                        offline_replicas=offline,
                    )
            return resp

        return metadata

    def _describe_cluster(self, inner: Handler) -> Handler:
        def describe_cluster(req: Request) -> dict[str, Any]:
            resp = inner(req)
            if resp.get("error_code"):
                return resp
            fenced = bool(req.body.get("include_fenced_brokers"))
            resp["controller_id"] = self.controller_id()
            resp["brokers"] = [
                {
                    "broker_id": n.node_id,
                    "host": n.endpoint[0],
                    "port": n.endpoint[1],
                    "rack": None,
                    "is_fenced": n.state == STOPPED,
                }
                for n in self.nodes.values()
                if n.state != STOPPED or fenced
            ]
            return resp

        return describe_cluster

    # --- share groups (broker.share) ---------------------------------------------------------------
    def share_leader_check(self, node_id: int) -> Callable[[str, int], tuple[int, int, int]]:
        """ShareFetch / ShareAcknowledge on ``node_id``: (error, leader, epoch) per partition."""
        leaders = self.leaders
        return lambda topic, partition: leaders.check(node_id, topic, partition, -1)

    def node_endpoint(self, node_id: int) -> tuple[str, int] | None:
        n = self.nodes.get(node_id)
        return n.endpoint if n is not None else None

    # --- start-up ---------------------------------------------------------------------------------
    def addresses(self) -> dict[str, str]:
        """node id -> "host:port" each broker listens on (the start-up line)."""
        return {str(n.node_id): f"{n.listener.host}:{n.listener.port}" for n in self.nodes.values()}

    async def listen(self) -> None:
        """Start every broker's listener but the first's (the node started it)."""
        for node in list(self.nodes.values())[1:]:
            await self._listen(node)

    async def _listen(self, node: ClusterNode) -> None:
        li = node.listener
        ssl = self.broker.ssl_context if li.tls else None
        _host, li.port = await node.server.start(
            li.host, li.port, ssl=ssl, listener=li, max_frame_bytes=self.broker.pre_auth_frame_limit(li)
        )
        log.info(
            "broker_listening",
            node_id=node.node_id,
            listen=f"{li.host}:{li.port}",
            advertised="{}:{}".format(*node.endpoint),
        )

    def transaction_coordinator(self, transactional_id: str) -> CoordinatorNode | None:
        """The leader of the id's ``__transaction_state`` partition (FindCoordinator key type 1).
        The transaction core is shared by the brokers, but only this one serves the id's requests
        (NOT_COORDINATOR elsewhere, ``transaction_leader``), as in Kafka: naming the leader spreads
        clients over the brokers, and a stopped broker's ids move with its partitions' leadership.
        Before the log's first use it does not exist yet: the placement is the one it will get."""
        leader = self.transaction_leader(coordinator_partition(transactional_id, self._transaction_topic().partitions))
        if leader is None:
            return None
        node = self.nodes[leader]
        return CoordinatorNode(leader, *node.endpoint)

    def transaction_leader(self, partition: int) -> int | None:
        """The live broker leading ``__transaction_state`` partition ``partition`` (None: nobody)."""
        leader = self.leaders.live_leader(self._transaction_topic(), partition)
        node = self.nodes.get(leader)
        return None if node is None or node.state == STOPPED else leader

    def _transaction_topic(self) -> Topic:
        return self.broker.topics.get(TRANSACTION_STATE_TOPIC) or Topic(
            TRANSACTION_STATE_TOPIC, uuid.UUID(int=0), TRANSACTION_STATE_PARTITIONS, internal=True
        )

    def offsets_ownership(self, local: CoordinatorNode) -> PartitionOwnership:
        """The group coordinator's view of ``__consumer_offsets`` at start-up: every broker, and the
        leader of each partition (all at leader epoch 0, as the core's loads are)."""
        nodes = {n.node_id: CoordinatorNode(n.node_id, *n.endpoint) for n in self.nodes.values()}
        t = self.broker.topics.get(OFFSETS_TOPIC)
        assert t is not None
        owners = {p: nodes[self.leaders.get(t, p)[0]] for p in range(t.partitions)}
        return PartitionOwnership(nodes.get(local.node_id, local), t.partitions, owners, nodes=nodes.values())

    # --- actions ------------------------------------------------------------------------------------
    def node(self, node_id: int) -> ClusterNode:
        node = self.nodes.get(node_id)
        if node is None:
            raise ClusterError(404, f"no broker {node_id} (brokers: {sorted(self.nodes)})")
        return node

    def describe(self) -> dict[str, Any]:
        return {
            "controller_id": self.controller_id(),
            "brokers": [n.describe() for n in self.nodes.values()],
        }

    def _apply(self, moves: list[Move], reason: str) -> None:
        self._record_epochs(moves)
        self._answer_moved_fetches(moves)
        for m in moves:
            moved = self.coordinator_topics.get(m.topic)
            if moved is not None:
                moved(m.partition, m.new, m.epoch)
        if moves:
            log.info(
                "leaders_moved",
                reason=reason,
                count=len(moves),
                moves=[f"{m.topic}-{m.partition}:{m.old}->{m.new}@{m.epoch}" for m in moves[:20]],
            )

    def _answer_moved_fetches(self, moves: list[Move]) -> None:
        """Fetches parked on a broker that no longer leads one of their partitions are answered now,
        that partition with NOT_LEADER_OR_FOLLOWER and its new leader (Kafka's
        ``DelayedFetch.tryComplete``, case B: "this broker is no longer the leader for some
        partitions it is fetching"), the others with what they have. Left parked they waited out
        their max wait (franz-go's 5 s) before the client learnt of the move."""
        fetches = self.broker.data.fetch_handler
        if not fetches.waiters:
            return
        node_of = {id(n.server): n.node_id for n in self.nodes.values()}
        for m in moves:
            for w in list(fetches.waiters.get((m.topic, m.partition), ())):
                req = w.req
                if req is None:  # answered meanwhile
                    continue
                node_id = node_of.get(id(getattr(req.conn, "server", None)))
                if node_id is None or node_id == m.new:
                    continue
                _reject_parked(req, m, self.nodes)
                fetches.complete(w)

    def _record_new(self, t: Topic, before: int) -> None:
        """Record the epochs of ``t``'s partitions from ``before`` on, once this loop iteration's
        callbacks have created their logs (the data plane's ``topic_created``)."""

        def later() -> None:
            if self.broker.topics.get(t.name) is not t:
                return  # deleted meanwhile
            logs = [p for i in range(before, t.partitions) if (p := self.broker.logs.get(t.name, i)) is not None]
            self._sync_epochs(logs)

        try:
            asyncio.get_running_loop().call_soon(later)
        except RuntimeError:
            later()

    def _record_epochs(self, moves: list[Move]) -> None:
        """``Partition.makeLeader``: each new leader records its epoch at the log end in the
        partition's leader epoch cache. The logs already stamp the new epoch (they read it from
        ``Leadership``) and record it before their next append; this writes the checkpoints now,
        off the event loop (one fsync each)."""
        self._sync_epochs([p for m in moves if (p := self.broker.logs.get(m.topic, m.partition)) is not None])

    def _sync_epochs(self, logs: list[PartitionLog]) -> None:
        if not logs:
            return

        def record() -> None:
            for plog in logs:
                try:
                    plog.sync_leader_epoch()
                except StorageError as exc:  # the next append records it
                    log.warning("leader_epoch_record_failed", path=str(plog.path), error=str(exc))

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            record()
        else:
            loop.run_in_executor(None, record)

    def _done(self, action: str, node_id: int | None, **fields: Any) -> None:
        # Counted by the control endpoint (groupd_faults_injected_total{api="-",kind=<action>}).
        log.warning("broker_action", action=action, broker=node_id, **fields)

    async def stop_broker(self, node_id: int) -> dict[str, Any]:
        """Close the broker's listener and connections and move its leaderships to live brokers."""
        node = self.node(node_id)
        if node.state == STOPPED:
            raise ClusterError(409, f"broker {node_id} is stopped already")
        if sum(n.state != STOPPED for n in self.nodes.values()) == 1:
            raise ClusterError(409, f"broker {node_id} is the last one running")
        node.state = STOPPED
        # An isolated broker stops being isolated; what waited in its sockets goes with its connections.
        node.server.reading_held = False
        closed = len(node.server.connections)
        await node.server.close()
        self.broker.data.fetch_handler.forget_sessions(node_id)  # as a Kafka broker's restart
        moves = self.leaders.broker_stopped(node_id)
        self.broker.topics.live_brokers = len(self.leaders.live)
        self._apply(moves, f"broker {node_id} stopped")
        self._done("stop", node_id, connections_closed=closed, leaders_moved=len(moves))
        return {**node.describe(), "leaders_moved": len(moves)}

    async def start_broker(self, node_id: int, *, rebalance: bool = False) -> dict[str, Any]:
        node = self.node(node_id)
        if node.state != STOPPED:
            raise ClusterError(409, f"broker {node_id} is {node.state}, not stopped")
        await self._listen(node)
        node.state = LIVE
        self.leaders.broker_started(node_id)
        self.broker.topics.live_brokers = len(self.leaders.live)
        moved = self.rebalance_leaders()["leaders_moved"] if rebalance else 0
        self._done("start", node_id, leaders_moved=moved)
        return {**node.describe(), "leaders_moved": moved}

    def isolate_broker(self, node_id: int, isolated: bool = True) -> dict[str, Any]:
        """Isolated: connections are accepted, nothing is read from them (requests wait in the
        sockets and time out at the client); when it ends, what waited is read and answered."""
        node = self.node(node_id)
        if node.state == STOPPED:
            raise ClusterError(409, f"broker {node_id} is stopped")
        node.server.hold_reading(isolated)
        node.state = ISOLATED if isolated else LIVE
        self._done("isolate" if isolated else "unisolate", node_id)
        return node.describe()

    def rebalance_leaders(self) -> dict[str, Any]:
        moves = self.leaders.rebalance()
        self._apply(moves, "preferred leader election")
        self._done("rebalance_leaders", None, leaders_moved=len(moves))
        return {"leaders_moved": len(moves)}

    def move_partition(self, topic: str, partition: int, to: int) -> dict[str, Any]:
        node = self.node(to)
        if node.state == STOPPED:
            raise ClusterError(409, f"broker {to} is stopped")
        t = self.broker.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            raise ClusterError(404, f"no partition {topic}-{partition}")
        move = self.leaders.move(t, partition, to)
        self._apply([move] if move else [], "moved")
        leader, epoch = self.leaders.get(t, partition)
        return {"topic": topic, "partition": partition, "leader": leader, "leader_epoch": epoch}

    def move_coordinator(self, group: str, to: int) -> dict[str, Any]:
        """Move the ``__consumer_offsets`` partition of ``group`` (and the other groups on it) to ``to``."""
        from groupd.coordinator.routing import partition_for

        partition = partition_for(group, self.broker.topics.offsets_partitions)
        out = self.move_partition(OFFSETS_TOPIC, partition, to)
        self._done("move_coordinator", to, group=group, partition=partition, leader_epoch=out["leader_epoch"])
        return {"group": group, "partition": partition, "coordinator": to, "leader_epoch": out["leader_epoch"]}

    async def close(self) -> None:
        for node in list(self.nodes.values())[1:]:
            await node.server.close()
