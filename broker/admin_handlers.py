"""Broker-level request handlers: Metadata and topic administration (Create/Delete Topics, CreatePartitions).

This broker is the only node, the controller, and the leader of every partition.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.security.acl_model import CLUSTER_OPERATIONS, TOPIC_OPERATIONS

from .settings import Config
from .topics import Topic, TopicError, TopicRegistry, validate_name

log = structlog.get_logger("groupd.admin")

_NO_AUTH_OPS = -(2**31)
_ZERO_UUID = uuid.UUID(int=0)


class AdminHandlers:
    def __init__(self, config: Config, topics: TopicRegistry, advertised: Callable[[Request], tuple[str, int]]) -> None:
        self.config = config
        self.topics = topics
        # (host, port) of the listener a request came in on: Kafka answers Metadata with the
        # brokers' endpoints for that listener.
        self.advertised = advertised
        self.on_topic_created: list[Callable[[Topic], None]] = []
        # A callback may return an awaitable: DeleteTopics answers once every one is done.
        self.on_topic_deleted: list[Callable[[Topic], Awaitable[Any] | None]] = []
        self.on_partitions_added: list[Callable[[Topic, int], None]] = []
        # Every node id of this process in cluster mode (``broker.cluster``); empty: one node.
        self.node_ids: list[int] = []

    # --- Metadata ---------------------------------------------------------------------------------
    def _topic_entry(self, t: Topic, include_ops: bool) -> dict[str, Any]:
        node = self.config.node_id
        return {
            "error_code": 0,
            "name": t.name,
            "topic_id": t.topic_id,
            "is_internal": t.internal,
            "partitions": [
                {
                    "error_code": 0,
                    "partition_index": i,
                    "leader_id": node,
                    "leader_epoch": 0,
                    "replica_nodes": [node],
                    "isr_nodes": [node],
                    "offline_replicas": [],
                }
                for i in range(t.partitions)
            ],
            "topic_authorized_operations": TOPIC_OPERATIONS if include_ops else _NO_AUTH_OPS,
        }

    def _create(self, name: str, partitions: int, configs: dict[str, str], replication: int = 1) -> Topic:
        t = self.topics.create(name, partitions, configs, replication)
        log.info(
            "topic_created", topic=name, partitions=partitions, replication_factor=replication, topic_id=str(t.topic_id)
        )
        for cb in self.on_topic_created:
            cb(t)
        return t

    def metadata(self, req: Request) -> dict[str, Any]:
        v = req.api_version
        body = req.body
        wanted = body.get("topics")
        include_ops = bool(body.get("include_topic_authorized_operations"))
        allow_auto = body.get("allow_auto_topic_creation", True) if v >= 4 else True
        out: list[dict[str, Any]] = []
        if wanted is None or (v == 0 and not wanted):
            out = [self._topic_entry(t, include_ops) for t in self.topics.topics.values()]
        else:
            for item in wanted:
                name = item.get("name")
                topic_id = item.get("topic_id") or _ZERO_UUID
                if name is None and topic_id != _ZERO_UUID:
                    t = self.topics.by_id(topic_id)
                    if t is None:
                        out.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id})
                    else:
                        out.append(self._topic_entry(t, include_ops))
                    continue
                t = self.topics.get(name or "")
                if t is not None:
                    out.append(self._topic_entry(t, include_ops))
                    continue
                try:
                    validate_name(name)
                except TopicError as e:
                    out.append({"error_code": e.code, "name": name, "is_internal": False, "partitions": []})
                    continue
                if allow_auto and self.config.auto_create_topics:
                    try:
                        t = self._create(name or "", self.config.num_partitions, {})
                    except TopicError as e:  # the broker's partition limit
                        out.append({"error_code": e.code, "name": name, "is_internal": False, "partitions": []})
                        continue
                # Kafka 4 (KRaft) only sends the creation to the controller and answers this
                # request UNKNOWN_TOPIC_OR_PARTITION without partitions
                # (AutoTopicCreationManager.sendCreateTopicRequest); the topic shows up in a
                # later Metadata. Clients retry, as they must against Kafka.
                out.append(
                    {
                        "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "name": name,
                        "is_internal": False,
                        "partitions": [],
                    }
                )
        host, port = self.advertised(req)
        return {
            "throttle_time_ms": 0,
            "brokers": [
                {
                    "node_id": self.config.node_id,
                    "host": host,
                    "port": port,
                    "rack": None,
                }
            ],
            "cluster_id": self.topics.cluster_id,
            "controller_id": self.config.node_id,
            "topics": out,
            "cluster_authorized_operations": CLUSTER_OPERATIONS
            if body.get("include_cluster_authorized_operations")
            else _NO_AUTH_OPS,
        }

    # --- CreateTopics -----------------------------------------------------------------------------
    def _known_brokers(self, broker_ids: list[int]) -> bool:
        """A replica assignment names distinct brokers of this process (one node, or the cluster's)."""
        known = self.node_ids or [self.config.node_id]
        return bool(broker_ids) and len(set(broker_ids)) == len(broker_ids) and set(broker_ids) <= set(known)

    def create_topics(self, req: Request) -> dict[str, Any]:
        body = req.body
        validate_only = bool(body.get("validate_only"))
        counts = Counter(t["name"] for t in body["topics"])
        results = []
        for item in body["topics"]:
            name = item["name"]
            res: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
            try:
                if counts[name] > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {name} in request")
                partitions = item["num_partitions"]
                replication = item["replication_factor"]
                assignments = item.get("assignments") or []
                if assignments:
                    if partitions != -1 or replication != -1:
                        raise TopicError(
                            ErrorCode.INVALID_REQUEST,
                            "Both numPartitions or replicationFactor and replicasAssignments were set. "
                            "Both cannot be used at the same time.",
                        )
                    for a in assignments:
                        if not self._known_brokers(a["broker_ids"]):
                            raise TopicError(
                                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Replica assignment {a['broker_ids']} names brokers that do not exist",
                            )
                    replication = len(assignments[0]["broker_ids"])
                    if sorted(a["partition_index"] for a in assignments) != list(range(len(assignments))):
                        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered 0..n-1")
                    partitions = len(assignments)
                configs = {c["name"]: c["value"] for c in item.get("configs") or []}
                self.topics.default_partitions = self.config.num_partitions
                partitions = self.topics.check_create(name, partitions, replication, configs)
                replication = max(replication, 1)  # -1: default.replication.factor, 1
                if not validate_only:
                    t = self._create(name, partitions, {k: v for k, v in configs.items() if v is not None}, replication)
                    res["topic_id"] = t.topic_id
                res["num_partitions"] = partitions
                res["replication_factor"] = replication
                res["configs"] = [
                    {"name": k, "value": v, "read_only": False, "config_source": 1, "is_sensitive": False}
                    for k, v in configs.items()
                ]
            except TopicError as e:
                res.update(error_code=e.code, error_message=e.message, num_partitions=-1, replication_factor=-1)
            results.append(res)
        return {"throttle_time_ms": 0, "topics": results}

    # --- DeleteTopics -----------------------------------------------------------------------------
    def delete_topics(self, req: Request) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        body = req.body
        if req.api_version >= 6:
            items = [(t.get("name"), t.get("topic_id") or _ZERO_UUID) for t in body.get("topics") or []]
        else:
            items = [(n, _ZERO_UUID) for n in body.get("topic_names") or []]
        responses = []
        waits: list[Awaitable[Any]] = []
        for name, topic_id in items:
            res: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
            try:
                if name is None:
                    t = self.topics.by_id(topic_id)
                    if t is None:
                        raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                    name = t.name
                    res["name"] = name
                t = self.topics.delete(name)
                res["topic_id"] = t.topic_id
                log.info("topic_deleted", topic=name)
                for cb in self.on_topic_deleted:
                    wait = cb(t)
                    if wait is not None:
                        waits.append(wait)
            except TopicError as e:
                res.update(error_code=e.code, error_message=e.message)
            responses.append(res)
        response = {"throttle_time_ms": 0, "responses": responses}
        if not waits:
            return response

        async def after_cleanup() -> dict[str, Any]:
            await asyncio.gather(*waits)
            return response

        return after_cleanup()

    # --- CreatePartitions -------------------------------------------------------------------------
    def create_partitions(self, req: Request) -> dict[str, Any]:
        body = req.body
        validate_only = bool(body.get("validate_only"))
        counts = Counter(t["name"] for t in body["topics"])
        results = []
        for item in body["topics"]:
            name = item["name"]
            res: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
            try:
                if counts[name] > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {name} in request")
                assignments = item.get("assignments")
                if assignments is not None:
                    t = self.topics.get(name)
                    added = item["count"] - (t.partitions if t else 0)
                    if len(assignments) != added:
                        raise TopicError(
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"Increasing the number of partitions by {added} but {len(assignments)} assignments provided.",
                        )
                    for a in assignments:
                        if not self._known_brokers(a["broker_ids"]):
                            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker in assignment")
                before = self.topics.partition_count(name) or 0
                t = self.topics.add_partitions(name, item["count"], validate_only=validate_only)
                if not validate_only:
                    log.info("partitions_added", topic=name, partitions=t.partitions, before=before)
                    for cb in self.on_partitions_added:
                        cb(t, before)
            except TopicError as e:
                res.update(error_code=e.code, error_message=e.message)
            results.append(res)
        return {"throttle_time_ms": 0, "results": results}
