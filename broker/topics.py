"""The topic registry: names, ids, partition counts and configs, persisted in the data directory.

Kafka keeps this in its controller's metadata log; groupd keeps one small JSON file, rewritten
atomically (write, fsync, rename) on every change, plus ``meta.properties`` with the cluster id so
that the id is stable across restarts as clients expect.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from dataclasses import field
from pathlib import Path
from typing import Any

from groupd.coordinator.consumer import TopicsImage
from groupd.protocol.errors import ErrorCode
from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record
from groupd.storage.files import write_atomically

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

# Topic configs groupd understands; anything else is accepted only if it is a known Kafka name.
KNOWN_CONFIGS = {
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
    "local.retention.bytes",
    "local.retention.ms",
    "remote.storage.enable",
}


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@mutable_record
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    # Reported (replicas, ISR) in cluster mode; every broker of one process shares the logs.
    replication_factor: int = 1

    def __init__(
        self,
        name: str,
        topic_id: uuid.UUID,
        partitions: int,
        configs: dict[str, str] = DEFAULT_FACTORY,
        internal: bool = False,
        replication_factor: int = 1,
    ) -> None:
        self.name = name
        self.topic_id = topic_id
        self.partitions = partitions
        self.configs = {} if configs is DEFAULT_FACTORY else configs
        self.internal = internal
        self.replication_factor = replication_factor

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": self.configs,
            "internal": self.internal,
        }
        if self.replication_factor != 1:
            d["replication_factor"] = self.replication_factor
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Topic:
        return cls(
            d["name"],
            uuid.UUID(d["topic_id"]),
            int(d["partitions"]),
            dict(d.get("configs", {})),
            d["internal"],
            int(d.get("replication_factor", 1)),
        )


def validate_name(name: str | None) -> None:
    """Kafka's ``Topic.validate``."""
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}",
        )
    if not _LEGAL.match(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


def _new_topic_id() -> uuid.UUID:
    # Kafka never hands out the zero id or ids whose base64 starts with '-' (reserved); avoid both.
    while True:
        u = uuid.uuid4()
        if u.int and not base64.urlsafe_b64encode(u.bytes).startswith(b"-"):
            return u


class TopicRegistry:
    def __init__(self, data_dir: Path, *, offsets_partitions: int = 50) -> None:
        self.data_dir = data_dir
        self.path = data_dir / "topics.json"
        self.topics: dict[str, Topic] = {}
        self.offsets_partitions = offsets_partitions
        self.cluster_id = ""
        # Every partition is a log with open files (3 fds) created eagerly and synchronously: without
        # a cap one CreateTopics with num_partitions=2**31-1, or Metadata auto-creating topic after
        # topic, stalls the event loop and runs the process out of fds (0 = no cap).
        self.max_partitions = 0
        # Live brokers (cluster mode): the largest replication factor CreateTopics accepts.
        self.live_brokers = 1

    def load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_cluster_id()
        if self.path.exists():
            data = json.loads(self.path.read_text())
            self.topics = {t["name"]: Topic.from_json(t) for t in data["topics"]}
        if OFFSETS_TOPIC not in self.topics:
            self.topics[OFFSETS_TOPIC] = Topic(
                OFFSETS_TOPIC,
                _new_topic_id(),
                self.offsets_partitions,
                {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"},
                internal=True,
            )
            self._save()

    def ensure_internal(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        """An internal topic, created on first use (Kafka creates ``__transaction_state`` when the
        first transactional id looks for its coordinator: ``AutoTopicCreationManager``)."""
        t = self.topics.get(name)
        if t is None:
            t = self.topics[name] = Topic(name, _new_topic_id(), partitions, dict(configs), internal=True)
            try:
                self._save()
            except OSError:
                del self.topics[name]
                raise
        return t

    def _load_cluster_id(self) -> str:
        meta = self.data_dir / "meta.properties"
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        write_atomically(meta, f"version=1\ncluster.id={cid}\n")
        return cid

    def _save(self) -> None:
        body = json.dumps({"topics": [t.to_json() for t in self.topics.values()]}, indent=1, sort_keys=True)
        write_atomically(self.path, body)

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def _check_room(self, extra: int) -> None:
        if self.max_partitions <= 0 or extra <= 0:
            return
        total = sum(t.partitions for t in self.topics.values())
        if total + extra > self.max_partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"{extra} more partition(s) would exceed this broker's limit of {self.max_partitions} "
                f"partitions ({total} exist; see --max-partitions).",
            )

    def partition_count(self, name: str) -> int | None:
        t = self.topics.get(name)
        return t.partitions if t else None

    # It reads ``self.topics`` and nothing else: the C commit path reads that table directly
    # (``coordinator.native.partition_table``) instead of calling this once per topic.
    partition_count.reads_table = "topics"  # type: ignore[attr-defined]

    def check_create(self, name: str, partitions: int, replication: int, configs: dict[str, str | None]) -> int:
        """Validate a creation the way Kafka's controller does; returns the partition count to use."""
        validate_name(name)
        if name in self.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions == -1:
            partitions = self.default_partitions
        if partitions <= 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        if replication != -1 and not 1 <= replication <= self.live_brokers:
            if replication <= 0:
                raise TopicError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            # Kafka's ReplicationControlManager / ClusterDescriber.usableBrokers counts unfenced brokers.
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication} time(s): The target replication factor of "
                f"{replication} cannot be reached because only {self.live_brokers} broker(s) are registered.",
            )
        self._check_room(partitions)
        for k, v in configs.items():
            if k not in KNOWN_CONFIGS:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {k}")
            if v is None:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {k}")
        return partitions

    default_partitions = 1

    def create(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, replication_factor: int = 1
    ) -> Topic:
        self._check_room(partitions)
        t = Topic(name, _new_topic_id(), partitions, dict(configs or {}), replication_factor=replication_factor)
        self.topics[name] = t
        self._save()
        return t

    def delete(self, name: str) -> Topic:
        t = self.topics.get(name)
        if t is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if t.internal:
            raise TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic {name} is an internal topic and cannot be deleted"
            )
        del self.topics[name]
        self._save()
        return t

    def set_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replace a topic's config overrides (AlterConfigs), persisted before they are in force."""
        t = self.topics[name]
        before = t.configs
        t.configs = dict(configs)
        try:
            self._save()
        except OSError:
            t.configs = before
            raise
        return t

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> Topic:
        t = self.topics.get(name)
        if t is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if t.internal:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Cannot add partitions to internal topic {name}")
        if count < t.partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {t.partitions} partition(s); {count} would not be an increase.",
            )
        if count == t.partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {t.partitions} partition(s).")
        self._check_room(count - t.partitions)
        if not validate_only:
            t.partitions = count
            self._save()
        return t


class TopicsImageCache:
    """The topics as the consumer-group core sees them (``TopicsImage``: name -> (topic id, partitions)),
    rebuilt on first use after a topic was created, deleted or grew (Kafka hands its group coordinator a
    new metadata image the same way, ``GroupMetadataManager.onNewMetadataImage``); a heartbeat asks for
    it and gets the cached object."""

    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry
        self._image: TopicsImage | None = None
        self._version = 0

    def invalidate(self, *_: object) -> None:
        self._image = None

    def __call__(self) -> TopicsImage:
        if self._image is None:
            self._version += 1
            self._image = TopicsImage(
                self._version, {t.name: (t.topic_id, t.partitions) for t in self.registry.topics.values()}
            )
        return self._image
