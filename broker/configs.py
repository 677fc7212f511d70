"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, the broker and groups.

What Kafka 4 does, and where it is in Kafka:

- **Topics** (resource type 2): every config of Kafka's ``LogConfig`` is described, with the value in
  force and its source (``ConfigHelper.createTopicConfigEntry``): DYNAMIC_TOPIC_CONFIG (1) for a
  topic's own override, STATIC_BROKER_CONFIG (4) where the broker's setting differs from Kafka's
  default (groupd's ``segment.bytes`` is 100 MiB, ``log.segment.bytes`` in Kafka's terms), else
  DEFAULT_CONFIG (5); synonyms on request (the override, then the broker names of that config,
  ``log.retention.ms``/``minutes``/``hours``...); config types and documentation at v3+. Alterations
  are validated as ``LogConfig.validate`` does (unknown name, a value that does not parse or is out
  of range: INVALID_CONFIG), stored in the topic registry (``topics.json``) and applied at once to
  the open partition logs: ``retention.ms``, ``retention.bytes``, ``segment.bytes``, ``segment.ms``,
  ``cleanup.policy``, ``delete.retention.ms``, ``max.message.bytes``, ``message.timestamp.type`` and
  the timestamp bounds take effect (retention at the next check); the others are stored and
  described only.
- **Broker** (4): described (``node.id`` or ``""``; another id is INVALID_REQUEST as in
  ``ConfigHelper.describeConfigs``). groupd's broker settings are static (flags and TOML), so an
  alteration answers INVALID_REQUEST, as Kafka does for configs that cannot be updated dynamically.
- **Groups** (32, Kafka 4's ``GroupConfig``): ``consumer.session.timeout.ms``,
  ``consumer.heartbeat.interval.ms`` and the share-group ones, described for any group id (source
  GROUP_CONFIG (8) once set, else DEFAULT_CONFIG), validated against Kafka's broker bounds
  (INVALID_CONFIG), stored in ``group-configs.json`` in the data directory.

AlterConfigs (legacy) replaces a resource's whole set of overrides; IncrementalAlterConfigs SETs,
DELETEs, APPENDs to or SUBTRACTs from lists, per config.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog
from groupd.coordinator.share.state import parse_auto_offset_reset
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.security.acl import Authorizer, subject_of
from groupd.security.acl_model import CLUSTER_NAME, AclOperation, ResourceType
from groupd.storage.files import write_atomically

from .settings import Config
from .topics import TopicError, TopicRegistry, validate_name

log = structlog.get_logger("groupd.configs")

# ConfigResource.Type
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8
# ConfigDef.Type as DescribeConfigs v3+ numbers it
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
_TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", LONG: "LONG", DOUBLE: "DOUBLE", LIST: "LIST"}
# IncrementalAlterConfigs' AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

_LONG_MAX = str(2**63 - 1)
_INT_MAX = 2**31 - 1


class ConfigError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ConfigDef:
    """One config as Kafka's ``ConfigDef`` declares it."""

    name: str
    type: int
    default: str | None
    doc: str
    synonyms: tuple[str, ...] = ()  # the broker's names for it, most specific first (LogConfig.TopicConfigSynonyms)
    low: float | None = None  # ConfigDef.Range.atLeast / between
    high: float | None = None
    choices: tuple[str, ...] = ()  # ValidString / ValidList
    # a validator of its own (Kafka's custom ConfigDef.Validator): the error text, None when valid
    validator: Callable[[str], str | None] | None = None

    def check(self, value: str) -> str:
        """The value normalised, or ConfigError(INVALID_CONFIG) with Kafka's ``ConfigException`` text."""
        raw = value.strip()
        try:
            if self.type in (INT, LONG, SHORT):
                n: float = int(raw)
                if self.type == INT and not -(2**31) <= n <= _INT_MAX:
                    raise ValueError
            elif self.type == DOUBLE:
                n = float(raw)
            elif self.type == BOOLEAN:
                if raw.lower() not in ("true", "false"):
                    raise ValueError
                return raw.lower()
            else:
                n = 0
        except ValueError:
            raise ConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {self.name}: Not a number of type {_TYPE_NAMES[self.type]}"
                if self.type != BOOLEAN
                else f"Invalid value {value} for configuration {self.name}: Expected value to be either true or false",
            ) from None
        if self.low is not None and n < self.low:
            raise ConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {self.name}: Value must be at least {_num(self.low)}",
            )
        if self.high is not None and n > self.high:
            raise ConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {self.name}: Value must be no more than {_num(self.high)}",
            )
        if self.validator is not None and (problem := self.validator(raw)) is not None:
            raise ConfigError(ErrorCode.INVALID_CONFIG, problem)
        if self.choices:
            items = [x.strip() for x in raw.split(",")] if self.type == LIST else [raw]
            bad = [x for x in items if x not in self.choices]
            if bad or (self.type == LIST and not raw):
                allowed = ", ".join(self.choices)
                raise ConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {value} for configuration {self.name}: String must be one of: {allowed}",
                )
            return ",".join(items) if self.type == LIST else raw
        return raw


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _d(name: str, type_: int, default: str | None, doc: str, *synonyms: str, **kw: Any) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, tuple(synonyms), **kw)


# Kafka 4.0's LogConfig (TopicConfig docs shortened to their first sentence), with the broker
# synonyms of LogConfig.TopicConfigSynonyms / ServerTopicConfigSynonyms.
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in (
        _d(
            "cleanup.policy",
            LIST,
            "delete",
            "The retention policy to use on log segments.",
            "log.cleanup.policy",
            choices=("compact", "delete"),
        ),
        _d(
            "compression.gzip.level",
            INT,
            "-1",
            "The compression level to use if compression.type is set to gzip.",
            "compression.gzip.level",
            low=-1,
            high=9,
        ),
        _d(
            "compression.lz4.level",
            INT,
            "9",
            "The compression level to use if compression.type is set to lz4.",
            "compression.lz4.level",
            low=1,
            high=17,
        ),
        _d(
            "compression.type",
            STRING,
            "producer",
            "Specify the final compression type for a given topic.",
            "compression.type",
            choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        _d(
            "compression.zstd.level",
            INT,
            "3",
            "The compression level to use if compression.type is set to zstd.",
            "compression.zstd.level",
            low=-131072,
            high=22,
        ),
        _d(
            "delete.retention.ms",
            LONG,
            "86400000",
            "The amount of time to retain delete tombstone markers for log compacted topics.",
            "log.cleaner.delete.retention.ms",
            low=0,
        ),
        _d(
            "file.delete.delay.ms",
            LONG,
            "60000",
            "The time to wait before deleting a file from the filesystem.",
            "log.segment.delete.delay.ms",
            low=0,
        ),
        _d(
            "flush.messages",
            LONG,
            _LONG_MAX,
            "The number of messages accumulated before messages are flushed to disk.",
            "log.flush.interval.messages",
            low=1,
        ),
        _d(
            "flush.ms",
            LONG,
            _LONG_MAX,
            "The time a message may sit in the log before it is flushed to disk.",
            "log.flush.interval.ms",
            low=0,
        ),
        _d(
            "follower.replication.throttled.replicas",
            LIST,
            "",
            "A list of replicas for which log replication should be throttled on the follower side.",
        ),
        _d(
            "index.interval.bytes",
            INT,
            "4096",
            "How frequently Kafka adds an index entry to its offset index.",
            "log.index.interval.bytes",
            low=0,
        ),
        _d(
            "leader.replication.throttled.replicas",
            LIST,
            "",
            "A list of replicas for which log replication should be throttled on the leader side.",
        ),
        _d(
            "local.retention.bytes",
            LONG,
            "-2",
            "The maximum size local log segments can grow for a partition before it deletes the old segments.",
            "log.local.retention.bytes",
            low=-2,
        ),
        _d(
            "local.retention.ms",
            LONG,
            "-2",
            "The number of milliseconds to keep the local log segment before it gets deleted.",
            "log.local.retention.ms",
            low=-2,
        ),
        _d(
            "max.compaction.lag.ms",
            LONG,
            _LONG_MAX,
            "The maximum time a message will remain ineligible for compaction in the log.",
            "log.cleaner.max.compaction.lag.ms",
            low=1,
        ),
        _d(
            "max.message.bytes",
            INT,
            "1048588",
            "The largest record batch size allowed by Kafka (after compression if compression is enabled).",
            "message.max.bytes",
            low=0,
        ),
        _d(
            "message.timestamp.after.max.ms",
            LONG,
            "3600000",
            "The maximum allowed timestamp difference between the message timestamp and the broker's timestamp, for timestamps in the future.",
            "log.message.timestamp.after.max.ms",
            low=0,
        ),
        _d(
            "message.timestamp.before.max.ms",
            LONG,
            _LONG_MAX,
            "The maximum allowed timestamp difference between the broker's timestamp and the message timestamp, for timestamps in the past.",
            "log.message.timestamp.before.max.ms",
            low=0,
        ),
        _d(
            "message.timestamp.type",
            STRING,
            "CreateTime",
            "Define whether the timestamp in the message is message create time or log append time.",
            "log.message.timestamp.type",
            choices=("CreateTime", "LogAppendTime"),
        ),
        _d(
            "min.cleanable.dirty.ratio",
            DOUBLE,
            "0.5",
            "How frequently the log compactor will attempt to clean the log.",
            "log.cleaner.min.cleanable.ratio",
            low=0,
            high=1,
        ),
        _d(
            "min.compaction.lag.ms",
            LONG,
            "0",
            "The minimum time a message will remain uncompacted in the log.",
            "log.cleaner.min.compaction.lag.ms",
            low=0,
        ),
        _d(
            "min.insync.replicas",
            INT,
            "1",
            "The minimum number of replicas that must acknowledge a write when a producer sets acks to all.",
            "min.insync.replicas",
            low=1,
        ),
        _d(
            "preallocate",
            BOOLEAN,
            "false",
            "True if we should preallocate the file on disk when creating a new log segment.",
            "log.preallocate",
        ),
        _d(
            "remote.log.copy.disable",
            BOOLEAN,
            "false",
            "Determines whether tiered data for a topic should become read only.",
        ),
        _d(
            "remote.log.delete.on.disable",
            BOOLEAN,
            "false",
            "Determines whether tiered data for a topic should be deleted after tiered storage is disabled on a topic.",
        ),
        _d(
            "remote.storage.enable",
            BOOLEAN,
            "false",
            "To enable tiered storage for a topic, set this configuration to true.",
        ),
        _d(
            "retention.bytes",
            LONG,
            "-1",
            "The maximum size a partition can grow to before old log segments are discarded to free up space.",
            "log.retention.bytes",
        ),
        _d(
            "retention.ms",
            LONG,
            "604800000",
            "The maximum time a log is retained before old log segments are discarded to free up space.",
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
            low=-1,
        ),
        _d("segment.bytes", INT, "1073741824", "The segment file size for the log.", "log.segment.bytes", low=14),
        _d(
            "segment.index.bytes",
            INT,
            "10485760",
            "The size of the index that maps offsets to file positions.",
            "log.index.size.max.bytes",
            low=4,
        ),
        _d(
            "segment.jitter.ms",
            LONG,
            "0",
            "The maximum random jitter subtracted from the scheduled segment roll time.",
            "log.roll.jitter.ms",
            "log.roll.jitter.hours",
            low=0,
        ),
        _d(
            "segment.ms",
            LONG,
            "604800000",
            "The period of time after which Kafka will force the log to roll even if the segment file isn't full.",
            "log.roll.ms",
            "log.roll.hours",
            low=1,
        ),
        _d(
            "unclean.leader.election.enable",
            BOOLEAN,
            "false",
            "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort.",
            "unclean.leader.election.enable",
        ),
    )
}
# Broker names whose Kafka default is given in another unit (DescribeConfigs shows that synonym as DEFAULT_CONFIG).
_DEFAULT_SYNONYM = {"retention.ms": ("log.retention.hours", "168"), "segment.ms": ("log.roll.hours", "168")}


def _share_auto_offset_reset(value: str) -> str | None:
    """``ShareGroupAutoOffsetResetStrategy.Validator``: earliest, latest or by_duration:<duration>."""
    try:
        parse_auto_offset_reset(value)
    except ValueError:
        return (
            f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        )
    return None


# Kafka 4.0's GroupConfig and the broker bounds it is validated against (GroupCoordinatorConfig,
# ShareGroupConfig defaults).
GROUP_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in (
        _d(
            "consumer.heartbeat.interval.ms",
            INT,
            "5000",
            "The heartbeat interval given to the members of a consumer group.",
            low=5000,
            high=15000,
        ),
        _d(
            "consumer.session.timeout.ms",
            INT,
            "45000",
            "The timeout to detect client failures when using the consumer group protocol.",
            low=45000,
            high=60000,
        ),
        _d(
            "share.auto.offset.reset",
            STRING,
            "latest",
            "The strategy to initialize the share-partition start offset.",
            validator=_share_auto_offset_reset,
        ),
        _d(
            "share.heartbeat.interval.ms",
            INT,
            "5000",
            "The heartbeat interval given to the members of a share group.",
            low=5000,
            high=15000,
        ),
        _d(
            "share.isolation.level",
            STRING,
            "read_uncommitted",
            "Controls how to read records written transactionally.",
            choices=("read_committed", "read_uncommitted"),
        ),
        _d(
            "share.record.lock.duration.ms",
            INT,
            "30000",
            "The record acquisition lock duration in milliseconds for share groups.",
            low=15000,
            high=60000,
        ),
        _d(
            "share.session.timeout.ms",
            INT,
            "45000",
            "The timeout to detect client failures when using the share group protocol.",
            low=45000,
            high=60000,
        ),
    )
}


# GroupCoordinatorConfig's group.consumer.* timings: (name after "group.consumer.", Kafka's default, doc)
_CONSUMER_GROUP_BROKER_CONFIGS = (
    ("heartbeat.interval.ms", "5000", "The heartbeat interval given to the members of a consumer group."),
    ("max.heartbeat.interval.ms", "15000", "The maximum heartbeat interval for registered consumers."),
    ("max.session.timeout.ms", "60000", "The maximum allowed session timeout for registered consumers."),
    ("min.heartbeat.interval.ms", "5000", "The minimum heartbeat interval for registered consumers."),
    ("min.session.timeout.ms", "45000", "The minimum allowed session timeout for registered consumers."),
    ("session.timeout.ms", "45000", "The timeout to detect client failures when using the consumer group protocol."),
)


def group_config_defs(config: Config) -> dict[str, ConfigDef]:
    """GROUP_CONFIGS as this broker has them: a group's consumer.* defaults are the broker's
    group.consumer.* settings and its bounds their min/max (``GroupConfig.extractGroupConfigMap``,
    ``GroupConfig.validateValues`` against GroupCoordinatorConfig)."""
    return {
        **GROUP_CONFIGS,
        "consumer.heartbeat.interval.ms": replace(
            GROUP_CONFIGS["consumer.heartbeat.interval.ms"],
            default=str(config.group_consumer_heartbeat_interval_ms),
            low=config.group_consumer_min_heartbeat_interval_ms,
            high=config.group_consumer_max_heartbeat_interval_ms,
        ),
        "consumer.session.timeout.ms": replace(
            GROUP_CONFIGS["consumer.session.timeout.ms"],
            default=str(config.group_consumer_session_timeout_ms),
            low=config.group_consumer_min_session_timeout_ms,
            high=config.group_consumer_max_session_timeout_ms,
        ),
        # the share.* timings against group.share.* the same way (GroupConfig.validateValues)
        "share.heartbeat.interval.ms": replace(
            GROUP_CONFIGS["share.heartbeat.interval.ms"],
            default=str(config.group_share_heartbeat_interval_ms),
            low=config.group_share_min_heartbeat_interval_ms,
            high=config.group_share_max_heartbeat_interval_ms,
        ),
        "share.session.timeout.ms": replace(
            GROUP_CONFIGS["share.session.timeout.ms"],
            default=str(config.group_share_session_timeout_ms),
            low=config.group_share_min_session_timeout_ms,
            high=config.group_share_max_session_timeout_ms,
        ),
    }


def consumer_group_overrides(configs: dict[str, str]) -> tuple[int | None, int | None]:
    """(session timeout, heartbeat interval) a group's own configs set, for the coordinator."""
    session, interval = configs.get("consumer.session.timeout.ms"), configs.get("consumer.heartbeat.interval.ms")
    return (None if session is None else int(session)), (None if interval is None else int(interval))


def share_group_overrides(configs: dict[str, str]) -> tuple[int | None, int | None]:
    """(session timeout, heartbeat interval) a share group's own configs set, for the coordinator."""
    session, interval = configs.get("share.session.timeout.ms"), configs.get("share.heartbeat.interval.ms")
    return (None if session is None else int(session)), (None if interval is None else int(interval))


def _broker_configs(config: Config) -> list[tuple[ConfigDef, str]]:
    """The broker settings groupd has, in Kafka's names, with their value here."""
    listeners = config.listeners or f"PLAINTEXT://{config.host}:{config.port}"
    rows = [
        (
            _d("auto.create.topics.enable", BOOLEAN, "true", "Enable auto creation of topic on the server."),
            str(config.auto_create_topics).lower(),
        ),
        (
            _d("connections.max.idle.ms", LONG, "600000", "Idle connections timeout."),
            str(config.connections_max_idle_ms),
        ),
        *(
            (
                _d(f"group.consumer.{name}", INT, default, doc),
                str(getattr(config, f"group_consumer_{name[:-3].replace('.', '_')}_ms")),
            )
            for name, default, doc in _CONSUMER_GROUP_BROKER_CONFIGS
        ),
        (
            _d(
                "group.initial.rebalance.delay.ms",
                INT,
                "3000",
                "The amount of time the group coordinator will wait for more consumers to join a new group before performing the first rebalance.",
            ),
            str(config.group_initial_rebalance_delay_ms),
        ),
        (
            _d(
                "group.max.session.timeout.ms",
                INT,
                "1800000",
                "The maximum allowed session timeout for registered consumers.",
            ),
            str(config.group_max_session_timeout_ms),
        ),
        (
            _d(
                "group.max.size",
                INT,
                str(_INT_MAX),
                "The maximum number of consumers that a single consumer group can accommodate.",
            ),
            str(config.group_max_size),
        ),
        (
            _d(
                "group.min.session.timeout.ms",
                INT,
                "6000",
                "The minimum allowed session timeout for registered consumers.",
            ),
            str(config.group_min_session_timeout_ms),
        ),
        (_d("listeners", STRING, "PLAINTEXT://:9092", "Listener List."), listeners),
        (
            _d("log.dirs", STRING, None, "The directories in which the log data is kept."),
            str(Path(config.data_dir).resolve()),
        ),
        (
            _d(
                "log.retention.check.interval.ms",
                LONG,
                "300000",
                "The frequency in milliseconds that the log cleaner checks whether any log is eligible for deletion.",
            ),
            str(config.log_retention_check_interval_ms),
        ),
        (
            _d("log.segment.bytes", INT, "1073741824", "The maximum size of a single log file."),
            str(config.segment_bytes),
        ),
        (
            _d("log.roll.ms", LONG, None, "The maximum time before a new log segment is rolled out (in milliseconds)."),
            str(config.segment_ms),
        ),
        (
            _d("node.id", INT, None, "The node ID associated with the roles this process is playing."),
            str(config.node_id),
        ),
        (_d("num.partitions", INT, "1", "The default number of log partitions per topic."), str(config.num_partitions)),
        (
            _d(
                "offsets.retention.minutes",
                INT,
                "10080",
                "For subscribed consumers, committed offset of a specific partition will be expired and discarded after this period.",
            ),
            str(config.offsets_retention_minutes),
        ),
        (_d("offsets.topic.num.partitions", INT, "50", "The number of partitions for the offset commit topic."), "50"),
        (
            _d("socket.request.max.bytes", INT, "104857600", "The maximum number of bytes in a socket request."),
            str(config.max_request_bytes),
        ),
    ]
    return sorted(rows, key=lambda r: r[0].name)


def _broker_value(config: Config, topic_config: str) -> str | None:
    """groupd's broker-level value of a topic config, where it has one."""
    return {
        "segment.bytes": str(config.segment_bytes),
        "segment.ms": str(config.segment_ms),
        "delete.retention.ms": str(config.delete_retention_ms),
    }.get(topic_config)


class ConfigHandlers:
    def __init__(
        self,
        config: Config,
        topics: TopicRegistry,
        authorizer: Authorizer,
        data_dir: Path,
    ) -> None:
        self.config = config
        self.topics = topics
        self.authz = authorizer
        self.group_path = data_dir / "group-configs.json"
        self.group_configs: dict[str, dict[str, str]] = {}
        self.group_defs = group_config_defs(config)
        self.on_topic_configs_changed: list[Callable[[str], None]] = []
        # told (group id, its configs) when a group's configs change, and for every group at load()
        self.on_group_configs_changed: list[Callable[[str, dict[str, str]], None]] = []

    def load(self) -> None:
        if self.group_path.exists():
            self.group_configs = {g: dict(c) for g, c in json.loads(self.group_path.read_text()).items()}
        for name, configs in self.group_configs.items():
            for cb in self.on_group_configs_changed:
                cb(name, configs)

    def share_config(self, group_id: str, name: str) -> str:
        """A group's ``share.*`` config in force (``coordinator.share.ShareGroupConfigLookup``): its own
        value (IncrementalAlterConfigs on its GROUP resource), else the broker's default
        (``GroupConfigManager.groupConfig`` / ``ShareGroupConfigProvider``). KeyError for a name that
        is not a group config."""
        own = self.group_configs.get(group_id, {}).get(name)
        if own is not None:
            return own
        default = self.group_defs[name].default
        return "" if default is None else default

    # --- authorization (KafkaApis: DESCRIBE_CONFIGS / ALTER_CONFIGS on the resource) ----------------
    def _refused(self, req: Request, rtype: int, name: str, op: AclOperation) -> int | None:
        subject = subject_of(req)
        if rtype == TOPIC:
            return (
                None
                if self.authz.authorize(subject, op, ResourceType.TOPIC, name)
                else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            )
        if rtype == GROUP:
            return (
                None
                if self.authz.authorize(subject, op, ResourceType.GROUP, name)
                else ErrorCode.GROUP_AUTHORIZATION_FAILED
            )
        if rtype in (BROKER, BROKER_LOGGER):
            ok = self.authz.authorize(subject, op, ResourceType.CLUSTER, CLUSTER_NAME)
            return None if ok else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return None

    # --- DescribeConfigs --------------------------------------------------------------------------
    def describe_configs(self, req: Request) -> dict[str, Any]:
        body, v = req.body, req.api_version
        synonyms = bool(body.get("include_synonyms"))
        docs = bool(body.get("include_documentation"))
        results = []
        for res in body.get("resources") or []:
            rtype, name = res["resource_type"], res["resource_name"]
            out: dict[str, Any] = {
                "error_code": 0,
                "error_message": None,
                "resource_type": rtype,
                "resource_name": name,
                "configs": [],
            }
            results.append(out)
            refused = self._refused(req, rtype, name, AclOperation.DESCRIBE_CONFIGS)
            if refused is not None:
                out.update(error_code=refused, error_message=None)
                continue
            try:
                entries = self._describe(rtype, name, synonyms, docs and v >= 3)
            except (ConfigError, TopicError) as e:
                out.update(error_code=e.code, error_message=e.message)
                continue
            keys = res.get("configuration_keys")
            if keys:  # ConfigHelper.createResponseConfig: null or empty = every config
                wanted = set(keys)
                entries = [e for e in entries if e["name"] in wanted]
            out["configs"] = entries
        return {"throttle_time_ms": 0, "results": results}

    def _describe(self, rtype: int, name: str, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
        if rtype == TOPIC:
            validate_name(name)  # ConfigHelper.describeConfigs: Topic.validate (INVALID_TOPIC_EXCEPTION)
            t = self.topics.get(name)
            if t is None:
                raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            return self._topic_entries(t.configs, synonyms, docs)
        if rtype == BROKER:
            if name == "":
                return []  # Kafka: the cluster-wide dynamic defaults, of which groupd has none
            if name != str(self.config.node_id):
                raise ConfigError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.config.node_id} or empty string, but received {name}",
                )
            return [
                _entry(
                    d.name,
                    value,
                    STATIC_BROKER_CONFIG if value != d.default else DEFAULT_CONFIG,
                    d,
                    docs,
                    [
                        {
                            "name": d.name,
                            "value": value,
                            "source": STATIC_BROKER_CONFIG if value != d.default else DEFAULT_CONFIG,
                        }
                    ]
                    if synonyms
                    else [],
                    read_only=True,
                )
                for d, value in _broker_configs(self.config)
            ]
        if rtype == GROUP:
            if not name:
                raise ConfigError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
            own = self.group_configs.get(name, {})
            out = []
            for d in self.group_defs.values():
                syn = []
                if d.name in own:
                    value, source = own[d.name], GROUP_CONFIG
                    syn.append({"name": d.name, "value": value, "source": GROUP_CONFIG})
                else:
                    value, source = d.default, DEFAULT_CONFIG
                syn.append({"name": d.name, "value": d.default, "source": DEFAULT_CONFIG})
                out.append(_entry(d.name, value, source, d, docs, syn if synonyms else []))
            return out
        raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {rtype}")

    def _topic_entries(self, overrides: dict[str, str], synonyms: bool, docs: bool) -> list[dict[str, Any]]:
        out = []
        for d in TOPIC_CONFIGS.values():
            syn: list[dict[str, Any]] = []
            broker = _broker_value(self.config, d.name)
            if d.name in overrides:
                value, source = overrides[d.name], DYNAMIC_TOPIC_CONFIG
                syn.append({"name": d.name, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
            elif broker is not None and broker != d.default:
                value, source = broker, STATIC_BROKER_CONFIG
            else:
                value, source = d.default, DEFAULT_CONFIG
            if broker is not None and broker != d.default and d.synonyms:
                syn.append({"name": d.synonyms[0], "value": broker, "source": STATIC_BROKER_CONFIG})
            if d.name in _DEFAULT_SYNONYM:
                syn_name, syn_value = _DEFAULT_SYNONYM[d.name]
                syn.append({"name": syn_name, "value": syn_value, "source": DEFAULT_CONFIG})
            elif d.synonyms:
                syn.append({"name": d.synonyms[0], "value": d.default, "source": DEFAULT_CONFIG})
            out.append(_entry(d.name, value, source, d, docs, syn if synonyms else []))
        for k in sorted(set(overrides) - set(TOPIC_CONFIGS)):  # names older Kafkas knew, set at creation
            out.append(
                _entry(
                    k,
                    overrides[k],
                    DYNAMIC_TOPIC_CONFIG,
                    _d(k, STRING, None, ""),
                    docs,
                    [{"name": k, "value": overrides[k], "source": DYNAMIC_TOPIC_CONFIG}] if synonyms else [],
                )
            )
        return out

    # --- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------------
    def alter_configs(self, req: Request) -> dict[str, Any]:
        return self._alter(req, incremental=False)

    def incremental_alter_configs(self, req: Request) -> dict[str, Any]:
        return self._alter(req, incremental=True)

    def _alter(self, req: Request, *, incremental: bool) -> dict[str, Any]:
        body = req.body
        validate_only = bool(body.get("validate_only"))
        resources = body.get("resources") or []
        seen = Counter((r["resource_type"], r["resource_name"]) for r in resources)
        responses = []
        for res in resources:
            rtype, name = res["resource_type"], res["resource_name"]
            out = {"error_code": 0, "error_message": None, "resource_type": rtype, "resource_name": name}
            responses.append(out)
            try:
                if seen[(rtype, name)] > 1:
                    raise ConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config resources")
                refused = self._refused(req, rtype, name, AclOperation.ALTER_CONFIGS)
                if refused is not None:
                    raise ConfigError(refused, None)  # type: ignore[arg-type]
                self._alter_one(rtype, name, res.get("configs") or [], incremental, validate_only)
            except ConfigError as e:
                out.update(error_code=e.code, error_message=e.message)
        return {"throttle_time_ms": 0, "responses": responses}

    def _alter_one(
        self, rtype: int, name: str, ops: list[dict[str, Any]], incremental: bool, validate_only: bool
    ) -> None:
        counts = Counter(o["name"] for o in ops)
        dups = sorted(k for k, n in counts.items() if n > 1)
        if dups:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys : {', '.join(dups)}")
        if rtype == TOPIC:
            try:
                validate_name(name)
            except TopicError as e:
                raise ConfigError(e.code, e.message) from None
            t = self.topics.get(name)
            if t is None:
                raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            current, table = dict(t.configs), TOPIC_CONFIGS
        elif rtype == GROUP:
            if not name:
                raise ConfigError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
            current, table = dict(self.group_configs.get(name, {})), self.group_defs
        elif rtype in (BROKER, BROKER_LOGGER):
            if name not in ("", str(self.config.node_id)):
                raise ConfigError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.config.node_id} or empty string, but received {name}",
                )
            names = ", ".join(o["name"] for o in ops)
            raise ConfigError(
                ErrorCode.INVALID_REQUEST,
                f"Cannot update these configs dynamically: Set({names}) (groupd's broker settings are its flags and TOML file)",
            )
        else:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unexpected resource type {rtype}")
        kind = "topic" if rtype == TOPIC else "group"
        new = self._apply(current, table, ops, incremental, kind)
        if rtype == GROUP:
            _check_group_bounds(new, table)
        if validate_only or new == current:
            return
        if rtype == TOPIC:
            try:
                self.topics.set_configs(name, new)
            except OSError as exc:
                raise ConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot save topic configs: {exc}") from exc
            log.info("topic_configs_altered", topic=name, configs=new)
            for cb in self.on_topic_configs_changed:
                cb(name)
        else:
            groups = {**self.group_configs, name: new}
            if not new:
                del groups[name]
            try:
                write_atomically(self.group_path, json.dumps(groups, indent=1, sort_keys=True))
            except OSError as exc:
                raise ConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot save group configs: {exc}") from exc
            self.group_configs = groups
            log.info("group_configs_altered", group=name, configs=new)
            for cb in self.on_group_configs_changed:
                cb(name, new)

    @staticmethod
    def _apply(
        current: dict[str, str], table: dict[str, ConfigDef], ops: list[dict[str, Any]], incremental: bool, kind: str
    ) -> dict[str, str]:
        if not incremental:
            nulls = [o["name"] for o in ops if o.get("value") is None]
            if nulls:
                # ConfigAdminManager.validateLegacyAlterConfigsResources
                raise ConfigError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
            new: dict[str, str] = {}
        else:
            new = dict(current)
        for o in ops:
            key, value = o["name"], o.get("value")
            d = table.get(key)
            if d is None:
                raise ConfigError(ErrorCode.INVALID_CONFIG, f"Unknown {kind} config name: {key}")
            op = o.get("config_operation", SET) if incremental else SET
            if op == DELETE:
                new.pop(key, None)
                continue
            if op not in (SET, APPEND, SUBTRACT):
                raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {key}")
            if value is None:
                raise ConfigError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
            if op in (APPEND, SUBTRACT):
                # ConfigAdminManager.prepareIncrementalConfigs: only LIST configs take APPEND/SUBTRACT
                if d.type != LIST:
                    verb = "append" if op == APPEND else "subtract"
                    raise ConfigError(
                        ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {key}"
                    )
                have = [x for x in (new.get(key, d.default or "")).split(",") if x]
                items = [x.strip() for x in value.split(",") if x.strip()]
                if op == APPEND:
                    value = ",".join([*have, *(x for x in items if x not in have)])
                else:
                    value = ",".join(x for x in have if x not in items)
            new[key] = d.check(value)
        return new


def _check_group_bounds(configs: dict[str, str], defs: dict[str, ConfigDef] = GROUP_CONFIGS) -> None:
    """GroupConfig.validate: a heartbeat interval below the session timeout."""
    for proto in ("consumer", "share"):
        hb = int(configs.get(f"{proto}.heartbeat.interval.ms", defs[f"{proto}.heartbeat.interval.ms"].default or 0))
        st = int(configs.get(f"{proto}.session.timeout.ms", defs[f"{proto}.session.timeout.ms"].default or 0))
        if hb >= st:
            raise ConfigError(
                ErrorCode.INVALID_CONFIG,
                f"{proto}.heartbeat.interval.ms must be less than {proto}.session.timeout.ms",
            )


def _entry(
    name: str,
    value: str | None,
    source: int,
    d: ConfigDef,
    docs: bool,
    synonyms: list[dict[str, Any]],
    *,
    read_only: bool = False,
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == DEFAULT_CONFIG,  # v0 only, which has no config_source
        "config_source": source,
        "is_sensitive": d.type == PASSWORD,
        "synonyms": synonyms,
        "config_type": d.type,
        "documentation": d.doc if docs else None,
    }
