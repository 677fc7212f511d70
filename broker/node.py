"""One node: the server, the dispatcher, the topic registry, the group coordinator's shell, the data
plane and storage, wired together. The process around it (signals, the GC, metrics) is ``groupd.daemon``."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from groupd.coordinator import CoordinatorConfig, GroupCoordinator, Node, PartitionOwnership
from groupd.coordinator.consumer import ConsumerGroupConfig
from groupd.coordinator.consumer_wire import parse_body_for as consumer_heartbeat_parse_body_for
from groupd.coordinator.native import parse_body_for as commit_parse_body_for
from groupd.coordinator.share import ShareGroupConfig
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.faults import FaultInjector
from groupd.protocol.kafka_releases import KafkaRelease, release
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.server import Server
from groupd.security import acl
from groupd.security.auth import Authenticator
from groupd.security.listeners import Listener, advertise_per_listener, endpoint, parse_listeners, server_ssl_context
from groupd.storage import Appender, LogConfig, LogManager, PartitionLog
from groupd.transactions.coordinator import TransactionConfig, TransactionCoordinator

from .acl_apis import AclApis
from .admin_handlers import AdminHandlers
from .apis import ACL_WRAPPERS, APIS, IMPLEMENTED_FEATURES, SHARE_APIS, share_disabled
from .configs import ConfigHandlers, consumer_group_overrides, share_group_overrides
from .data_plane import DataPlane, fetch_wire, topic_log_config
from .data_plane.produce_wire import parse_body_for as produce_parse_body_for
from .group_shell import GroupShell
from .log_admin import LogAdmin
from .scram_apis import ScramApis
from .settings import Config
from .share import SHARE_STATE_TOPIC, ShareHandlers, SharePartitions, ShareSettings
from .topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicRegistry, TopicsImageCache
from .txn_shell import TxnShell

if TYPE_CHECKING:
    from groupd.security.oauthbearer import UnsecuredValidator

    from .cluster import Cluster

log = structlog.get_logger("groupd")


class Broker:
    """One groupd node: everything that lives as long as the process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self.topics = TopicRegistry(self.data_dir)
        self.dispatcher = Dispatcher()
        # Fault injection: idle (and free on the request path) until a rule is added through the
        # control endpoint (--control-port); one injector per process, shared by its brokers.
        self.faults = FaultInjector()
        self.server = self.new_server(self.dispatcher)
        self.topics.max_partitions = config.max_partitions
        # Security: listeners, TLS, SASL and ACLs are all checked here, before anything starts.
        self.listeners: list[Listener] = parse_listeners(config)
        self.ssl_context = server_ssl_context(config) if any(li.tls for li in self.listeners) else None
        self.authenticator = Authenticator.from_config(
            config.users,
            config.sasl_mechanisms,
            config.connection_failed_authentication_delay_ms,
            data_dir=self.data_dir,
            oauthbearer=self._oauthbearer(config),
        )
        self.authorizer = acl.Authorizer(
            config.acl,
            self.data_dir,
            super_users=config.super_users,
            allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
        )
        self.authorizer.topic_name_for_id = self._topic_name_for_id
        self.port = self.listeners[0].port
        self.admin = AdminHandlers(config, self.topics, lambda req: endpoint(req.conn.listener, self.listeners[0]))
        self.logs = LogManager(self.data_dir, self._log_config(), topic_config=self._topic_log_config)
        self.appender = Appender(config.fsync)
        self.topics_image = TopicsImageCache(self.topics)
        self.admin.on_topic_created.append(self.topics_image.invalidate)
        self.admin.on_topic_deleted.append(self.topics_image.invalidate)
        self.admin.on_partitions_added.append(self.topics_image.invalidate)
        self.core = GroupCoordinator(
            CoordinatorConfig(
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
                group_max_size=config.group_max_size,
                offsets_retention_minutes=config.offsets_retention_minutes,
                offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
                offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            ),
            ownership=self._ownership(),
            topic_partitions=self.topics.partition_count,
            consumer_config=ConsumerGroupConfig(
                session_timeout_ms=config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                max_size=config.group_consumer_max_size,
                migration_policy=config.group_consumer_migration_policy.strip().lower(),
                regex_refresh_interval_ms=config.group_consumer_regex_refresh_interval_ms,
            ),
            # its bound __call__: asked for by every KIP-848 heartbeat, and an instance's call slot
            # costs ~0.1 us more than a bound method's (issue 26)
            topics_image=self.topics_image.__call__,
            share_config=ShareGroupConfig(
                session_timeout_ms=config.group_share_session_timeout_ms,
                min_session_timeout_ms=config.group_share_min_session_timeout_ms,
                max_session_timeout_ms=config.group_share_max_session_timeout_ms,
                heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
                min_heartbeat_interval_ms=config.group_share_min_heartbeat_interval_ms,
                max_heartbeat_interval_ms=config.group_share_max_heartbeat_interval_ms,
                max_size=config.group_share_max_size,
            ),
        )
        self.groups = GroupShell(self.core, self._offsets_log, self.appender)
        self.groups.existing_log = lambda p: self.logs.get(OFFSETS_TOPIC, p)
        self.data = DataPlane(config, self.topics, self.logs, self.appender)
        self.data.register_topic_callbacks(self.admin)
        # Transactions (one producer-id sequence with idempotent producers: the data plane's)
        self.txn_core = TransactionCoordinator(
            TransactionConfig(
                transaction_max_timeout_ms=config.transaction_max_timeout_ms,
                # the finalized transaction.version: 2, or that of the --kafka-version release (3.9: 0)
                transaction_version=release(config.kafka_version).features.get("transaction.version", (0, 0, 0))[2]
                if config.kafka_version
                else 2,
            ),
            self.data.producer_ids,
            topic_partitions=self.topics.partition_count,
        )
        self.txns = TxnShell(
            self.txn_core,
            self._txn_log,
            self.appender,
            self.data,
            self.groups,
            ensure_log_topic=self._ensure_txn_log_topic,
            log_exists=lambda: self.topics.get(TRANSACTION_STATE_TOPIC) is not None,
        )
        # KIP-890 part 1: transactional Produce and TxnOffsetCommit are checked against the transaction
        self.data.txn_verifier = self.txns.verify
        self.groups.txn_verifier = self.txns.verify
        # transaction version 2: Produce v12+ adds its partitions (TxnOffsetCommit v5+: broker.apis)
        self.data.txn_adder = self.txns.add_partitions_with_retry
        # Kafka's BrokerMetadataPublisher hands deleted partitions to the group coordinator
        # (GroupCoordinator.onPartitionsDeleted): their committed offsets go too.
        self.admin.on_topic_deleted.append(
            lambda t: self.groups.partitions_deleted([(t.name, p) for p in range(t.partitions)])
        )
        self.configs = ConfigHandlers(config, self.topics, self.authorizer, self.data_dir)
        self.configs.on_topic_configs_changed.append(self._apply_topic_configs)
        # Kafka's GroupConfigManager: the coordinator reads a group's own session timeout and heartbeat interval
        self.configs.on_group_configs_changed.append(
            lambda group, configs: self.core.consumer.set_group_config(group, *consumer_group_overrides(configs))
        )
        self.configs.on_group_configs_changed.append(
            lambda group, configs: self.core.share.set_group_config(group, *share_group_overrides(configs))
        )
        # KIP-932 delivery: share-partitions over the data plane's logs, __share_group_state
        self.share_partitions = SharePartitions(
            self.data,
            self.topics,
            self.logs,
            self.appender,
            ShareSettings(
                record_lock_duration_ms=config.group_share_record_lock_duration_ms,
                delivery_count_limit=config.group_share_delivery_count_limit,
                partition_max_record_locks=config.group_share_partition_max_record_locks,
                max_share_sessions=config.group_share_max_share_sessions,
            ),
            ensure_state_topic=self._ensure_share_state_topic,
            # Kafka's GroupConfigManager: a group's share.* configs, read at each use
            group_configs=lambda group: self.configs.group_configs.get(group, {}),
        )
        self.admin.on_topic_deleted.append(self.share_partitions.drop_topic)
        # the group coordinator initializes, reads and deletes share-partition state through it
        self.core.share_requests.state = self.share_partitions
        self._share_handlers: dict[int | None, ShareHandlers] = {}
        # DescribeShareGroupOffsets v1's lag needs each partition's end offset (the high watermark)
        self.core.share_requests.end_offset = self._log_end_offset
        self.log_admin = LogAdmin(
            config, self.topics, self.logs, self.authorizer, lambda req: endpoint(req.conn.listener, self.listeners[0])
        )
        self.acl_apis = AclApis(self.authorizer)
        self.scram_apis = ScramApis(self.authenticator.store, self.authorizer)
        # Cluster mode (--brokers N): the other brokers of this process, sharing everything above.
        self.cluster: Cluster | None = None
        if config.brokers > 1:
            # Imported only in cluster mode: a single broker does not load the module (issue 26).
            from .cluster import Cluster

            self.cluster = Cluster(self)
        self._register(self.dispatcher, config.node_id, self.listeners[0])
        if self.cluster is not None:
            self.cluster.register_nodes()
        # Awaited after the logs are opened and before the listeners (so an observer such as the
        # metrics endpoint sees the whole replay), and first thing on stop: what the process
        # around the node hangs on it (groupd.daemon), without the node knowing what it is.
        self.before_listen: list[Callable[[], Awaitable[None]]] = []
        self.before_stop: list[Callable[[], Awaitable[None]]] = []
        # Added to the start-up line by those hooks (the dashboard's address, for one).
        self.listening_fields: dict[str, object] = {}

    def share_handlers(self, node_id: int | None) -> ShareHandlers:
        """ShareFetch / ShareAcknowledge of broker ``node_id`` (each broker keeps its own share
        sessions; in a cluster only a partition's leader hands its records out)."""
        h = self._share_handlers.get(node_id)
        if h is None:
            cluster = self.cluster
            leader = None
            endpoint = None
            if cluster is not None and node_id is not None:
                leader = cluster.share_leader_check(node_id)
                endpoint = cluster.node_endpoint
            h = self._share_handlers[node_id] = ShareHandlers(
                self.share_partitions, self.authorizer, leader=leader, endpoint=endpoint
            )
        return h

    def _ensure_share_state_topic(self) -> None:
        if self.topics.get(SHARE_STATE_TOPIC) is None:
            # ShareCoordinatorConfig: 50 partitions, delete policy (the coordinator prunes below
            # its snapshots), 100 MiB segments, uncompressed
            t = self.topics.ensure_internal(
                SHARE_STATE_TOPIC,
                50,
                {
                    "cleanup.policy": "delete",
                    "retention.ms": "-1",
                    "compression.type": "uncompressed",
                    "segment.bytes": "104857600",
                },
            )
            for cb in self.admin.on_topic_created:
                cb(t)

    @staticmethod
    def _oauthbearer(config: Config) -> UnsecuredValidator | None:
        """Kafka's unsecured validator with this broker's settings, where a listener may use
        OAUTHBEARER; its module is not imported otherwise (issue 26, start-up)."""
        if "OAUTHBEARER" not in config.sasl_mechanisms.upper():
            return None
        from groupd.security.oauthbearer import UnsecuredValidator

        return UnsecuredValidator.from_settings(config)

    def _ownership(self) -> PartitionOwnership:
        # The core's node is the first listener's endpoint; FindCoordinator answers are rewritten
        # per listener (advertise_per_listener).
        host, port = endpoint(None, self.listeners[0])
        return PartitionOwnership(Node(self.config.node_id, host, port), 50)

    def _log_config(self) -> LogConfig:
        return LogConfig(segment_bytes=self.config.segment_bytes, segment_ms=self.config.segment_ms)

    def _topic_log_config(self, topic: str) -> LogConfig | None:
        if topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
            return LogConfig(
                segment_bytes=self.config.segment_bytes,
                segment_ms=self.config.segment_ms,
                cleanup_policy="compact",
                retention_ms=None,
                delete_retention_ms=self.config.delete_retention_ms,
            )
        t = self.topics.get(topic)
        return topic_log_config(self._log_config(), t.configs) if t is not None else None

    def _apply_topic_configs(self, topic: str) -> None:
        """Altered configs of a topic are in force at once in its open logs (retention at its next check)."""
        cfg = self.logs.config_for(topic)
        for (t, _p), plog in self.logs.logs.items():
            if t == topic:
                plog.config = cfg

    def _offsets_log(self, partition: int) -> PartitionLog:
        return self.logs.get_or_create(OFFSETS_TOPIC, partition)

    def _txn_log(self, partition: int) -> PartitionLog:
        return self.logs.get_or_create(TRANSACTION_STATE_TOPIC, partition)

    def _ensure_txn_log_topic(self) -> None:
        if self.topics.get(TRANSACTION_STATE_TOPIC) is None:
            # TransactionLogConfig's defaults: compacted, 100 MiB segments, uncompressed
            t = self.topics.ensure_internal(
                TRANSACTION_STATE_TOPIC,
                self.txn_core.config.transaction_state_partitions,
                {"cleanup.policy": "compact", "compression.type": "uncompressed", "segment.bytes": "104857600"},
            )
            for cb in self.admin.on_topic_created:
                cb(t)

    def new_server(self, dispatcher: Dispatcher) -> Server:
        config = self.config
        return Server(
            dispatcher,
            max_request_bytes=config.max_request_bytes,
            max_connections=config.max_connections,
            idle_timeout_ms=config.connections_max_idle_ms,
            max_inflight=config.max_inflight_requests,
            max_inflight_bytes=config.max_inflight_bytes,
            max_write_buffer_bytes=config.max_write_buffer_bytes,
        )

    def _register(self, d: Dispatcher, node_id: int, listener: Listener) -> None:
        """Every API of the table (``broker.apis``) on the dispatcher of broker ``node_id`` (each
        broker of a cluster has one)."""
        cluster = self.cluster
        self.faults.attach(d, node_id)
        if any(li.tls or li.sasl for li in self.listeners) or self.authorizer.enabled:
            d.open_session = self.authenticator.open_session
        kafka = release(self.config.kafka_version) if self.config.kafka_version else None
        # OffsetCommit bodies are walked in C and their partitions left as bytes for the commit path
        # (``groupd.coordinator.native``); without the C module the generic decoder does it all.
        d.body_parsers[API_BY_NAME["OffsetCommit"].key] = commit_parse_body_for
        # A steady ConsumerGroupHeartbeat (ids and epoch only) is read in place, the rest generically.
        d.body_parsers[API_BY_NAME["ConsumerGroupHeartbeat"].key] = consumer_heartbeat_parse_body_for
        # Produce bodies (v3+) read in C when the module is built (data_plane/produce_wire.py).
        d.body_parsers[API_BY_NAME["Produce"].key] = produce_parse_body_for
        # Fetch read and answered in C where it can be (``data_plane.fetch_wire``), else generically.
        d.body_parsers[fetch_wire.FETCH_KEY] = fetch_wire.parse_body_for
        d.response_builders[fetch_wire.FETCH_KEY] = fetch_wire.build_for
        for api in APIS:
            if api.handler is None:
                continue  # the dispatcher answers it (ApiVersions)
            schema = API_BY_NAME[api.name]
            lo, hi = api.versions or (schema.min_version, schema.max_version)
            if kafka is not None:
                capped = _release_versions(kafka, schema.key, lo, hi)
                if capped is None:
                    continue  # not on that release's broker listener: a request closes the connection
                (lo, hi), advertised = capped
                if advertised != (lo, hi):
                    d.advertised[schema.key] = advertised
            # In a cluster each broker's handlers name it (Routing.COORDINATOR: the shared core
            # serves a group only on the broker leading its __consumer_offsets partition).
            handler = api.handler(self, node_id if cluster is not None else None)
            if kafka is not None and api.name in SHARE_APIS and kafka.features.get("share.version", (0, 0, 0))[2] < 1:
                handler = share_disabled(api.name)
            if cluster is not None:
                handler = cluster.wrap(api, handler, node_id)
            d.register(schema, handler, min_version=lo, max_version=hi)
        if kafka is None:
            # KIP-848: Kafka advertises ConsumerGroupHeartbeat when group.version >= 1 is finalized
            d.features["group.version"] = (0, 1, 1)
            d.features["transaction.version"] = (0, 2, self.txn_core.config.transaction_version)  # KIP-890 part 2
            # KIP-932: share groups, finalized at 1 as Kafka 4.2's default (ShareVersion.SV_1)
            d.features["share.version"] = (0, 1, 1)
        else:
            d.kafka_feature_rules = True
            for name, (f_lo, f_hi, level) in kafka.features.items():
                top = IMPLEMENTED_FEATURES.get(name)
                if top is not None:
                    d.features[name] = (f_lo, min(f_hi, top), min(level, top))
        advertise_per_listener(d, node_id, listener)
        if self.authorizer.enabled:
            acl.install(d, self.authorizer, ACL_WRAPPERS)
        # Fetch sessions go in front of the ACL and leader checks, as FetchManager.newContext runs
        # first in KafkaApis.handleFetchRequest: those checks then see every session partition.
        fetch = d.routes.get(API_BY_NAME["Fetch"].key)
        if fetch is not None:
            fetch.handler = self.data.fetch_sessions(fetch.handler, node_id)

    def pre_auth_frame_limit(self, li: Listener) -> tuple[int, str] | None:
        """A SASL listener reads at most ``sasl.server.max.receive.size`` per frame until the client
        has authenticated (Kafka's ``SaslServerAuthenticator``); then ``max_request_bytes``."""
        if not li.sasl:
            return None
        return min(
            self.config.sasl_server_max_receive_size, self.config.max_request_bytes
        ), "sasl_server_max_receive_size"

    def _log_end_offset(self, topic: str, partition: int) -> int | None:
        plog = self.logs.get(topic, partition)
        return None if plog is None else plog.log_end_offset

    def _topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        t = self.topics.by_id(topic_id)
        return t.name if t is not None else None

    async def start(self) -> None:
        t0 = time.perf_counter()
        self.topics.load()
        self.configs.load()
        self.logs.open_all()
        # The __consumer_offsets partitions' logs are created by their first append, not here.
        partitions = list(range(50))
        self.data.start()
        await self.share_partitions.load()
        self.share_partitions.start()
        # Groups answer COORDINATOR_LOAD_IN_PROGRESS until their partition is replayed; the server
        # listens straight away, as a Kafka broker does while it loads __consumer_offsets.
        self.groups.begin_load(partitions)
        self.txns.begin_load()
        for hook in self.before_listen:
            await hook()
        for li in self.listeners:
            _host, li.port = await self.server.start(
                li.host,
                li.port,
                ssl=self.ssl_context if li.tls else None,
                listener=li,
                max_frame_bytes=self.pre_auth_frame_limit(li),
            )
        first = self.listeners[0]
        self.port = first.port
        self.core.ownership = self._ownership()
        if self.cluster is not None:
            await self.cluster.listen()
            self.core.ownership = self.cluster.offsets_ownership(self.core.ownership.local)
            self.core.txn_coordinator = self.cluster.transaction_coordinator
        hold = os.environ.get("GROUPD_TEST_LOAD_HOLD")
        if hold:
            self.groups.load_hold = _hold_while_exists(Path(hold))
        self._load_task = asyncio.create_task(self.groups.load(partitions))
        self._txn_load_task = asyncio.create_task(self.txns.load())
        if any(li.sasl for li in self.listeners):
            mechanisms = self.authenticator.mechanisms
            if not len(self.authenticator.store) and any(m != "OAUTHBEARER" for m in mechanisms):
                log.warning("sasl_without_users", hint="add [users.<name>] entries (groupd scram-credential)")
            if "OAUTHBEARER" in mechanisms:
                # Kafka's default OAUTHBEARER validator checks no signature: a development setting.
                log.warning(
                    "sasl_oauthbearer_unsecured", hint="any client may claim any principal with an unsigned JWT"
                )
        log.info(
            "groupd_listening",
            listen=f"{first.host}:{first.port}",
            listeners=[str(li) for li in self.listeners],
            # what clients are told (--advertised-listeners' host and port), not the bound port
            advertised="{}:{}".format(*endpoint(None, first)),
            **(
                {"advertised_listeners": ["{}://{}:{}".format(li.name, *endpoint(None, li)) for li in self.listeners]}
                if len(self.listeners) > 1
                else {}
            ),
            data_dir=str(self.data_dir.resolve()),
            cluster_id=self.topics.cluster_id,
            node_id=self.config.node_id,
            **({"brokers": self.cluster.addresses()} if self.cluster is not None else {}),
            startup_ms=round((time.perf_counter() - t0) * 1000, 1),
            **self.listening_fields,
        )

    async def stop(self) -> None:
        for hook in self.before_stop:
            await hook()
        await self.server.close()
        if self.cluster is not None:
            await self.cluster.close()
        self.share_partitions.close()
        await self.data.close()
        await self.share_partitions.drain()
        await self.txns.drain()
        await self.groups.drain()
        await self.appender.close()
        self.logs.close()
        log.info("groupd_stopped")


def _hold_while_exists(path: Path) -> Callable[[], Awaitable[None]]:
    """For tests only (GROUPD_TEST_LOAD_HOLD=<path>): the ``__consumer_offsets`` load waits before
    each partition while ``path`` exists, so a test sees COORDINATOR_LOAD_IN_PROGRESS for as long
    as it wants without racing the load, and lets it go by removing the file."""

    async def hold() -> None:
        while path.exists():
            await asyncio.sleep(0.01)

    return hold


def _release_versions(
    kafka: KafkaRelease, api_key: int, lo: int, hi: int
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The versions of an API groupd serves in ``lo..hi`` that ``kafka`` accepts, and what its
    ApiVersions advertises of them (None: the release's broker listener does not have the API, or
    none of its versions is one groupd serves)."""
    r = kafka.apis.get(api_key)
    if r is None:
        return None
    a_lo, a_hi = max(lo, r.accepted[0]), min(hi, r.accepted[1])
    if a_lo > a_hi:
        return None
    # Produce: Kafka 4.x advertises from v0 (KAFKA-18659), which groupd's schema covers
    return (a_lo, a_hi), (max(lo, r.advertised[0]), a_hi)
