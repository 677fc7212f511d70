"""The settings of one node, with Kafka's defaults where Kafka has the setting.

Every field is a setting under three names (``--group-max-size`` on the command line,
``GROUPD_GROUP_MAX_SIZE`` in the environment, ``group_max_size`` in the TOML file); reading them from
those places is ``groupd.config``'s job, this module only declares them, so the broker and the tools
that start brokers (the pytest plugin) share one list without depending on the command line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record


@mutable_record
class Config:
    host: str = dataclasses.field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = dataclasses.field(default=9092, metadata={"help": "port to listen on (0 = any free port)"})
    advertised_host: str = dataclasses.field(
        default="", metadata={"help": "host name clients are told to connect to (default: --host)"}
    )
    data_dir: str = dataclasses.field(default="./data", metadata={"help": "directory for logs and metadata"})
    node_id: int = dataclasses.field(default=1, metadata={"help": "this broker's node id"})
    brokers: int = dataclasses.field(
        default=1,
        metadata={
            "help": "brokers run in this process (cluster mode): node ids node-id..node-id+N-1 on "
            "consecutive ports from --port (0: each any free port), one data directory"
        },
    )
    kafka_version: str = dataclasses.field(
        default="",
        metadata={
            "help": "pose as this Apache Kafka release (3.9 | 4.0 | 4.1 | 4.2): its API version ranges, features "
            "and defaults (default: every version groupd implements, groupd's test-friendly timings)"
        },
    )
    log_format: str = dataclasses.field(default="console", metadata={"help": "json | console"})
    log_level: str = dataclasses.field(default="info", metadata={"help": "debug | info | warning | error"})
    max_request_bytes: int = dataclasses.field(
        default=100 * 1024 * 1024, metadata={"help": "largest request frame accepted (socket.request.max.bytes)"}
    )
    max_connections: int = dataclasses.field(
        default=0, metadata={"help": "refuse connections beyond this (0 = no limit)"}
    )
    connections_max_idle_ms: int = dataclasses.field(default=600_000, metadata={"help": "close idle connections"})
    max_inflight_requests: int = dataclasses.field(
        default=1024,
        metadata={"help": "requests received per connection and waiting for their turn before reading from it pauses"},
    )
    max_inflight_bytes: int = dataclasses.field(
        default=16 * 1024 * 1024,
        metadata={"help": "bytes of requests waiting for their turn per connection before reading from it pauses"},
    )
    max_write_buffer_bytes: int = dataclasses.field(
        default=4 * 1024 * 1024,
        metadata={
            "help": "response bytes per connection written in one go; while any of them is unsent (over TLS: "
            "more than this), the connection is neither read nor served (one larger answer goes alone)"
        },
    )
    max_partitions: int = dataclasses.field(
        default=4096, metadata={"help": "partitions on this broker, __consumer_offsets included (0 = no limit)"}
    )
    auto_create_topics: bool = dataclasses.field(
        default=True, metadata={"help": "create unknown topics on Metadata requests that allow it"}
    )
    num_partitions: int = dataclasses.field(default=1, metadata={"help": "partitions of auto-created topics"})
    # Kafka's built-in default is 3000. 300 is the shortest delay under which members started
    # together still form one generation: measured with bench.rebalance_delay (README, "Initial
    # rebalance delay"), two consecutive JoinGroups of 10 members started at once were at most
    # 0.27 s apart over 84 runs of four client libraries, and a lone member waits 0.3 s.
    group_initial_rebalance_delay_ms: int = dataclasses.field(
        default=300,
        metadata={
            "help": "how long a new (empty) group waits for more members before its first rebalance, "
            "and again while members keep arriving (Kafka's default: 3000)"
        },
    )
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    # KIP-848 consumer groups (group.protocol=consumer): Kafka's group.consumer.* settings and defaults
    group_consumer_session_timeout_ms: int = dataclasses.field(
        default=45000, metadata={"help": "session timeout of consumer-protocol members"}
    )
    # Kafka's default is 5000. A member learns of a new assignment only in a heartbeat's answer, and
    # one that must first give partitions up takes two heartbeats: ten members started together
    # covered a topic in 5.1 s (at worst 10 s) at 5000 and in 0.33 s (at worst 0.5 s + noise) at 250,
    # measured with bench.consumer_heartbeat (README, "Consumer-group heartbeat interval").
    group_consumer_heartbeat_interval_ms: int = dataclasses.field(
        default=250,
        metadata={"help": "heartbeat interval given to consumer-protocol members (Kafka's default: 5000)"},
    )
    # the bounds a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (group
    # configs, IncrementalAlterConfigs on resource type GROUP) and the two settings above must keep
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    # Kafka's minimum is 5000, its default interval: groupd's minimum is its default too
    group_consumer_min_heartbeat_interval_ms: int = 250
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_max_size: int = 2**31 - 1
    # KIP-932 share groups, delivery: Kafka's group.share.* settings and defaults (ShareGroupConfig);
    # a group's share.record.lock.duration.ms (group config) overrides the lock duration.
    group_share_record_lock_duration_ms: int = dataclasses.field(
        default=30000, metadata={"help": "how long a share consumer holds the records it acquired"}
    )
    group_share_delivery_count_limit: int = dataclasses.field(
        default=5, metadata={"help": "deliveries of a share-group record before it is archived"}
    )
    group_share_partition_max_record_locks: int = dataclasses.field(
        default=2000, metadata={"help": "in-flight records of one share-partition at most"}
    )
    group_share_max_share_sessions: int = dataclasses.field(
        default=2000, metadata={"help": "share sessions per broker at most"}
    )
    group_consumer_regex_refresh_interval_ms: int = dataclasses.field(
        default=10000,
        metadata={
            "help": "at most one resolution of a consumer group's regular expressions per interval "
            "(Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS)"
        },
    )
    group_consumer_migration_policy: str = dataclasses.field(
        default="bidirectional",
        metadata={
            "help": "disabled | upgrade | downgrade | bidirectional: classic groups with members may become "
            "consumer groups and back (Kafka's group.consumer.migration.policy)"
        },
    )
    # KIP-932 share groups: Kafka 4.2's group.share.* settings. The heartbeat interval is groupd's
    # test-friendly 250 ms as for consumer groups (Kafka's default and minimum: 5000): a share member
    # gets its partitions on the heartbeat after their share-partition state is initialized, so with
    # Kafka's default a new member waits 5 s for its first records.
    group_share_session_timeout_ms: int = dataclasses.field(
        default=45000, metadata={"help": "session timeout of share-group members"}
    )
    group_share_heartbeat_interval_ms: int = dataclasses.field(
        default=250, metadata={"help": "heartbeat interval given to share-group members (Kafka's default: 5000)"}
    )
    group_share_min_session_timeout_ms: int = 45000
    group_share_max_session_timeout_ms: int = 60000
    group_share_min_heartbeat_interval_ms: int = 250
    group_share_max_heartbeat_interval_ms: int = 15000
    group_share_max_size: int = dataclasses.field(default=200, metadata={"help": "members a share group may have"})
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    fsync: str = dataclasses.field(default="interval:1000", metadata={"help": "always | interval:<ms> | never"})
    segment_bytes: int = 100 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    delete_retention_ms: int = 24 * 3600 * 1000
    log_retention_check_interval_ms: int = dataclasses.field(
        default=300_000, metadata={"help": "how often retention/compaction runs over user topics (0 = never)"}
    )
    log_cleaner_backoff_ms: int = dataclasses.field(
        default=15_000,
        metadata={"help": "how often compacted topics are checked for cleaning (log.cleaner.backoff.ms; 0 = never)"},
    )
    producer_id_expiration_ms: int = dataclasses.field(
        default=86_400_000, metadata={"help": "idempotent-producer state of an idle producer is dropped after this"}
    )
    transaction_max_timeout_ms: int = dataclasses.field(
        default=900_000,
        metadata={
            "help": "largest transaction.timeout.ms a transactional producer may ask for "
            "(Kafka's transaction.max.timeout.ms); InitProducerId above it answers INVALID_TRANSACTION_TIMEOUT"
        },
    )
    # --- security (groupd.security: listeners, auth, acl) ---
    listeners: str = dataclasses.field(
        default="",
        metadata={
            "help": "comma-separated NAME://host:port listeners, NAME a protocol (PLAINTEXT, SSL, "
            "SASL_PLAINTEXT, SASL_SSL) or a name from --listener-security-protocol-map "
            "(default: PLAINTEXT://--host:--port)"
        },
    )
    listener_security_protocol_map: str = dataclasses.field(
        default="",
        metadata={
            "help": "NAME:PROTOCOL,... names of listeners of one's own, e.g. INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
        },
    )
    advertised_listeners: str = dataclasses.field(
        default="",
        metadata={
            "help": "NAME://host:port,... what clients of each listener are told to connect to "
            "(default: --advertised-host or the bind host, and the bound port)"
        },
    )
    ssl_certfile: str = dataclasses.field(default="", metadata={"help": "PEM certificate (chain) of SSL listeners"})
    ssl_keyfile: str = dataclasses.field(default="", metadata={"help": "PEM private key of SSL listeners"})
    ssl_cafile: str = dataclasses.field(
        default="", metadata={"help": "PEM CA bundle that client certificates must chain to"}
    )
    ssl_client_auth: str = dataclasses.field(
        default="none", metadata={"help": "client certificates on SSL listeners: required | requested | none"}
    )
    sasl_mechanisms: str = dataclasses.field(
        default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", metadata={"help": "SASL mechanisms enabled on SASL listeners"}
    )
    connection_failed_authentication_delay_ms: int = dataclasses.field(
        default=100, metadata={"help": "a failed SASL authentication's connection is closed this long after its answer"}
    )
    sasl_server_max_receive_size: int = dataclasses.field(
        default=524_288,
        metadata={
            "help": "largest frame a SASL listener reads before authentication completes; a larger one "
            "closes the connection unread (Kafka's sasl.server.max.receive.size)"
        },
    )
    max_incremental_fetch_session_cache_slots: int = dataclasses.field(
        default=1000,
        metadata={
            "help": "incremental fetch sessions (KIP-227) each broker keeps, in 8 shards of a share each "
            "(Kafka's max.incremental.fetch.session.cache.slots; under 8: none, every Fetch sessionless)"
        },
    )
    min_incremental_fetch_session_eviction_ms: int = dataclasses.field(
        default=120_000,
        metadata={
            "help": "a fetch session unused this long may be evicted by any new one, and one created "
            "this long ago by a larger one (Kafka 4.2's constant MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS)"
        },
    )
    # SASL/OAUTHBEARER with Kafka's unsecured-token validator (OAuthBearerUnsecuredValidatorCallbackHandler's
    # JAAS options): only where OAUTHBEARER is listed in --sasl-mechanisms, for development.
    oauthbearer_principal_claim_name: str = dataclasses.field(
        default="sub", metadata={"help": "claim naming the principal (Kafka's unsecuredValidatorPrincipalClaimName)"}
    )
    oauthbearer_scope_claim_name: str = dataclasses.field(
        default="scope", metadata={"help": "claim holding the scope (Kafka's unsecuredValidatorScopeClaimName)"}
    )
    oauthbearer_required_scope: str = dataclasses.field(
        default="",
        metadata={"help": "space-separated scope a token must have (Kafka's unsecuredValidatorRequiredScope)"},
    )
    oauthbearer_allowable_clock_skew_ms: int = dataclasses.field(
        default=0,
        metadata={"help": "clock skew allowed on iat and exp (Kafka's unsecuredValidatorAllowableClockSkewMs)"},
    )
    super_users: str = dataclasses.field(
        default="",
        metadata={
            "help": "principals every ACL check allows, e.g. 'User:admin;User:ops' (Kafka's super.users); "
            "setting it turns ACL checks on"
        },
    )
    allow_everyone_if_no_acl_found: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "allow an action on a resource no ACL names (Kafka's allow.everyone.if.no.acl.found); "
            "true turns ACL checks on"
        },
    )
    # Tables: only in the TOML file (no flag, no environment variable).
    users: dict[str, Any] = dataclasses.field(
        default_factory=dict, metadata={"table": True, "help": "SASL users and their salted credentials"}
    )
    acl: dict[str, Any] = dataclasses.field(
        default_factory=dict, metadata={"table": True, "help": "principal -> allowed group and topic prefixes"}
    )

    metrics_port: int = dataclasses.field(
        default=0, metadata={"help": "serve Prometheus metrics over HTTP on this port (0 = off)"}
    )
    metrics_host: str = dataclasses.field(
        default="", metadata={"help": "address the metrics endpoint listens on (default: --host)"}
    )
    metrics_max_groups: int = dataclasses.field(
        default=1000,
        metadata={"help": "groups with per-group series (lag, state, size); the rest are counted (0 = no cap)"},
    )
    dashboard_port: int = dataclasses.field(
        default=-1, metadata={"help": "serve the live dashboard over HTTP on this port (0 = any free port, -1 = off)"}
    )
    dashboard_host: str = dataclasses.field(
        default="", metadata={"help": "address the dashboard listens on (default: --host)"}
    )
    control_port: int = dataclasses.field(
        default=-1,
        metadata={
            "help": "serve the fault-injection control endpoint (HTTP JSON) on this port (0 = any free port, -1 = off)"
        },
    )
    control_host: str = dataclasses.field(
        default="", metadata={"help": "address the control endpoint listens on (default: --host)"}
    )

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9092,
        advertised_host: str = "",
        data_dir: str = "./data",
        node_id: int = 1,
        brokers: int = 1,
        kafka_version: str = "",
        log_format: str = "console",
        log_level: str = "info",
        max_request_bytes: int = 100 * 1024 * 1024,
        max_connections: int = 0,
        connections_max_idle_ms: int = 600_000,
        max_inflight_requests: int = 1024,
        max_inflight_bytes: int = 16 * 1024 * 1024,
        max_write_buffer_bytes: int = 4 * 1024 * 1024,
        max_partitions: int = 4096,
        auto_create_topics: bool = True,
        num_partitions: int = 1,
        group_initial_rebalance_delay_ms: int = 300,
        group_min_session_timeout_ms: int = 6000,
        group_max_session_timeout_ms: int = 1_800_000,
        group_max_size: int = 2**31 - 1,
        group_consumer_session_timeout_ms: int = 45000,
        group_consumer_heartbeat_interval_ms: int = 250,
        group_consumer_min_session_timeout_ms: int = 45000,
        group_consumer_max_session_timeout_ms: int = 60000,
        group_consumer_min_heartbeat_interval_ms: int = 250,
        group_consumer_max_heartbeat_interval_ms: int = 15000,
        group_consumer_max_size: int = 2**31 - 1,
        group_share_record_lock_duration_ms: int = 30000,
        group_share_delivery_count_limit: int = 5,
        group_share_partition_max_record_locks: int = 2000,
        group_share_max_share_sessions: int = 2000,
        group_consumer_regex_refresh_interval_ms: int = 10000,
        group_consumer_migration_policy: str = "bidirectional",
        group_share_session_timeout_ms: int = 45000,
        group_share_heartbeat_interval_ms: int = 250,
        group_share_min_session_timeout_ms: int = 45000,
        group_share_max_session_timeout_ms: int = 60000,
        group_share_min_heartbeat_interval_ms: int = 250,
        group_share_max_heartbeat_interval_ms: int = 15000,
        group_share_max_size: int = 200,
        offsets_retention_minutes: int = 10080,
        offsets_retention_check_interval_ms: int = 600_000,
        offset_metadata_max_bytes: int = 4096,
        fsync: str = "interval:1000",
        segment_bytes: int = 100 * 1024 * 1024,
        segment_ms: int = 7 * 24 * 3600 * 1000,
        delete_retention_ms: int = 24 * 3600 * 1000,
        log_retention_check_interval_ms: int = 300_000,
        log_cleaner_backoff_ms: int = 15_000,
        producer_id_expiration_ms: int = 86_400_000,
        transaction_max_timeout_ms: int = 900_000,
        listeners: str = "",
        listener_security_protocol_map: str = "",
        advertised_listeners: str = "",
        ssl_certfile: str = "",
        ssl_keyfile: str = "",
        ssl_cafile: str = "",
        ssl_client_auth: str = "none",
        sasl_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        connection_failed_authentication_delay_ms: int = 100,
        sasl_server_max_receive_size: int = 524_288,
        max_incremental_fetch_session_cache_slots: int = 1000,
        min_incremental_fetch_session_eviction_ms: int = 120_000,
        oauthbearer_principal_claim_name: str = "sub",
        oauthbearer_scope_claim_name: str = "scope",
        oauthbearer_required_scope: str = "",
        oauthbearer_allowable_clock_skew_ms: int = 0,
        super_users: str = "",
        allow_everyone_if_no_acl_found: bool = False,
        users: dict[str, Any] = DEFAULT_FACTORY,
        acl: dict[str, Any] = DEFAULT_FACTORY,
        metrics_port: int = 0,
        metrics_host: str = "",
        metrics_max_groups: int = 1000,
        dashboard_port: int = -1,
        dashboard_host: str = "",
        control_port: int = -1,
        control_host: str = "",
    ) -> None:
        self.host = host
        self.port = port
        self.advertised_host = advertised_host
        self.data_dir = data_dir
        self.node_id = node_id
        self.brokers = brokers
        self.kafka_version = kafka_version
        self.log_format = log_format
        self.log_level = log_level
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.connections_max_idle_ms = connections_max_idle_ms
        self.max_inflight_requests = max_inflight_requests
        self.max_inflight_bytes = max_inflight_bytes
        self.max_write_buffer_bytes = max_write_buffer_bytes
        self.max_partitions = max_partitions
        self.auto_create_topics = auto_create_topics
        self.num_partitions = num_partitions
        self.group_initial_rebalance_delay_ms = group_initial_rebalance_delay_ms
        self.group_min_session_timeout_ms = group_min_session_timeout_ms
        self.group_max_session_timeout_ms = group_max_session_timeout_ms
        self.group_max_size = group_max_size
        self.group_consumer_session_timeout_ms = group_consumer_session_timeout_ms
        self.group_consumer_heartbeat_interval_ms = group_consumer_heartbeat_interval_ms
        self.group_consumer_min_session_timeout_ms = group_consumer_min_session_timeout_ms
        self.group_consumer_max_session_timeout_ms = group_consumer_max_session_timeout_ms
        self.group_consumer_min_heartbeat_interval_ms = group_consumer_min_heartbeat_interval_ms
        self.group_consumer_max_heartbeat_interval_ms = group_consumer_max_heartbeat_interval_ms
        self.group_consumer_max_size = group_consumer_max_size
        self.group_share_record_lock_duration_ms = group_share_record_lock_duration_ms
        self.group_share_delivery_count_limit = group_share_delivery_count_limit
        self.group_share_partition_max_record_locks = group_share_partition_max_record_locks
        self.group_share_max_share_sessions = group_share_max_share_sessions
        self.group_consumer_regex_refresh_interval_ms = group_consumer_regex_refresh_interval_ms
        self.group_consumer_migration_policy = group_consumer_migration_policy
        self.group_share_session_timeout_ms = group_share_session_timeout_ms
        self.group_share_heartbeat_interval_ms = group_share_heartbeat_interval_ms
        self.group_share_min_session_timeout_ms = group_share_min_session_timeout_ms
        self.group_share_max_session_timeout_ms = group_share_max_session_timeout_ms
        self.group_share_min_heartbeat_interval_ms = group_share_min_heartbeat_interval_ms
        self.group_share_max_heartbeat_interval_ms = group_share_max_heartbeat_interval_ms
        self.group_share_max_size = group_share_max_size
        self.offsets_retention_minutes = offsets_retention_minutes
        self.offsets_retention_check_interval_ms = offsets_retention_check_interval_ms
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.delete_retention_ms = delete_retention_ms
        self.log_retention_check_interval_ms = log_retention_check_interval_ms
        self.log_cleaner_backoff_ms = log_cleaner_backoff_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.transaction_max_timeout_ms = transaction_max_timeout_ms
        self.listeners = listeners
        self.listener_security_protocol_map = listener_security_protocol_map
        self.advertised_listeners = advertised_listeners
        self.ssl_certfile = ssl_certfile
        self.ssl_keyfile = ssl_keyfile
        self.ssl_cafile = ssl_cafile
        self.ssl_client_auth = ssl_client_auth
        self.sasl_mechanisms = sasl_mechanisms
        self.connection_failed_authentication_delay_ms = connection_failed_authentication_delay_ms
        self.sasl_server_max_receive_size = sasl_server_max_receive_size
        self.max_incremental_fetch_session_cache_slots = max_incremental_fetch_session_cache_slots
        self.min_incremental_fetch_session_eviction_ms = min_incremental_fetch_session_eviction_ms
        self.oauthbearer_principal_claim_name = oauthbearer_principal_claim_name
        self.oauthbearer_scope_claim_name = oauthbearer_scope_claim_name
        self.oauthbearer_required_scope = oauthbearer_required_scope
        self.oauthbearer_allowable_clock_skew_ms = oauthbearer_allowable_clock_skew_ms
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.users = {} if users is DEFAULT_FACTORY else users
        self.acl = {} if acl is DEFAULT_FACTORY else acl
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.metrics_max_groups = metrics_max_groups
        self.dashboard_port = dashboard_port
        self.dashboard_host = dashboard_host
        self.control_port = control_port
        self.control_host = control_host

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

    @property
    def metrics_listen_host(self) -> str:
        return self.metrics_host or self.host

    @property
    def dashboard_listen_host(self) -> str:
        return self.dashboard_host or self.host

    @property
    def control_listen_host(self) -> str:
        return self.control_host or self.host


# What ``--kafka-version`` sets where a setting is not given explicitly: the release's own defaults
# where groupd's differ (GroupCoordinatorConfig's *_DEFAULT constants of each release; the session
# timeouts and group sizes are Kafka's already).
_KAFKA_4_DEFAULTS: dict[str, int] = {
    "group_initial_rebalance_delay_ms": 3000,
    "group_consumer_heartbeat_interval_ms": 5000,
    "group_consumer_min_heartbeat_interval_ms": 5000,
    "group_consumer_max_heartbeat_interval_ms": 15000,
    "group_share_heartbeat_interval_ms": 5000,
    "group_share_min_heartbeat_interval_ms": 5000,
}
KAFKA_RELEASE_DEFAULTS: dict[str, dict[str, int]] = {
    # 3.9 and 4.0: GroupMetadataManager.REGEX_BATCH_REFRESH_INTERVAL_MS is a constant 10 s (4.0; 3.9
    # has no regex subscriptions), groupd's default
    "3.9": _KAFKA_4_DEFAULTS,
    "4.0": _KAFKA_4_DEFAULTS,
    # 4.1 made it group.consumer.regex.refresh.interval.ms, default 10 minutes
    "4.1": {**_KAFKA_4_DEFAULTS, "group_consumer_regex_refresh_interval_ms": 600_000},
    "4.2": {**_KAFKA_4_DEFAULTS, "group_consumer_regex_refresh_interval_ms": 600_000},
}
