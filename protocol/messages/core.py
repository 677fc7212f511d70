"""Broker-level APIs: ApiVersions, Metadata and topic administration."""

from __future__ import annotations

from ..schema import api, f

API_VERSIONS = api(
    18,
    "ApiVersions",
    valid="0-4",
    flexible="3+",
    request=[
        f("client_software_name", "string", "3+"),
        f("client_software_version", "string", "3+"),
    ],
    response=[
        f("error_code", "int16"),
        f(
            "api_keys",
            "[]",
            "0+",
            f("api_key", "int16"),
            f("min_version", "int16"),
            f("max_version", "int16"),
        ),
        f("throttle_time_ms", "int32", "1+"),
        f(
            "supported_features",
            "[]",
            "3+",
            f("name", "string"),
            f("min_version", "int16"),
            f("max_version", "int16"),
            tag=0,
            tagged="3+",
        ),
        f("finalized_features_epoch", "int64", "3+", default=-1, tag=1, tagged="3+"),
        f(
            "finalized_features",
            "[]",
            "3+",
            f("name", "string"),
            f("max_version_level", "int16"),
            f("min_version_level", "int16"),
            tag=2,
            tagged="3+",
        ),
        f("zk_migration_ready", "bool", "3+", default=False, tag=3, tagged="3+"),
    ],
)

METADATA = api(
    3,
    "Metadata",
    valid="0-12",
    flexible="9+",
    request=[
        # v0: an empty array means "all topics"; v1+: null means all topics, empty means none.
        f(
            "topics",
            "[]",
            "0+",
            f("topic_id", "uuid", "10+"),
            f("name", "string", "0+", nullable="10+"),
            nullable="1+",
        ),
        f("allow_auto_topic_creation", "bool", "4+", default=True),
        f("include_cluster_authorized_operations", "bool", "8-10"),
        f("include_topic_authorized_operations", "bool", "8+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "3+"),
        f(
            "brokers",
            "[]",
            "0+",
            f("node_id", "int32", "0+"),
            f("host", "string", "0+"),
            f("port", "int32", "0+"),
            f("rack", "string", "1+", nullable="1+", default=None),
        ),
        f("cluster_id", "string", "2+", nullable="2+", default=None),
        f("controller_id", "int32", "1+", default=-1),
        f(
            "topics",
            "[]",
            "0+",
            f("error_code", "int16", "0+"),
            f("name", "string", "0+", nullable="12+"),
            f("topic_id", "uuid", "10+"),
            f("is_internal", "bool", "1+", default=False),
            f(
                "partitions",
                "[]",
                "0+",
                f("error_code", "int16", "0+"),
                f("partition_index", "int32", "0+"),
                f("leader_id", "int32", "0+"),
                f("leader_epoch", "int32", "7+", default=-1),
                f("replica_nodes", "[]int32", "0+"),
                f("isr_nodes", "[]int32", "0+"),
                f("offline_replicas", "[]int32", "5+"),
            ),
            f("topic_authorized_operations", "int32", "8+", default=-2147483648),
        ),
        f("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    ],
)

CREATE_TOPICS = api(
    19,
    "CreateTopics",
    valid="0-7",
    flexible="5+",
    request=[
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string", "0+"),
            f("num_partitions", "int32", "0+"),
            f("replication_factor", "int16", "0+"),
            f(
                "assignments",
                "[]",
                "0+",
                f("partition_index", "int32", "0+"),
                f("broker_ids", "[]int32", "0+"),
            ),
            f(
                "configs",
                "[]",
                "0+",
                f("name", "string", "0+"),
                f("value", "string", "0+", nullable="0+"),
            ),
        ),
        f("timeout_ms", "int32", "0+", default=60000),
        f("validate_only", "bool", "1+", default=False),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string", "0+"),
            f("topic_id", "uuid", "7+"),
            f("error_code", "int16", "0+"),
            f("error_message", "string", "1+", nullable="0+"),
            f("topic_config_error_code", "int16", "5+", default=0, tag=0, tagged="5+"),
            f("num_partitions", "int32", "5+", default=-1),
            f("replication_factor", "int16", "5+", default=-1),
            f(
                "configs",
                "[]",
                "5+",
                f("name", "string", "5+"),
                f("value", "string", "5+", nullable="5+"),
                f("read_only", "bool", "5+"),
                f("config_source", "int8", "5+", default=-1),
                f("is_sensitive", "bool", "5+"),
                nullable="5+",
            ),
        ),
    ],
)

DELETE_TOPICS = api(
    20,
    "DeleteTopics",
    valid="0-6",
    flexible="4+",
    request=[
        f(
            "topics",
            "[]",
            "6+",
            f("name", "string", "6+", nullable="6+", default=None),
            f("topic_id", "uuid", "6+"),
        ),
        f("topic_names", "[]string", "0-5"),
        f("timeout_ms", "int32", "0+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f(
            "responses",
            "[]",
            "0+",
            f("name", "string", "0+", nullable="6+"),
            f("topic_id", "uuid", "6+"),
            f("error_code", "int16", "0+"),
            f("error_message", "string", "5+", nullable="5+", default=None),
        ),
    ],
)

CREATE_PARTITIONS = api(
    37,
    "CreatePartitions",
    valid="0-3",
    flexible="2+",
    request=[
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string", "0+"),
            f("count", "int32", "0+"),
            f("assignments", "[]", "0+", f("broker_ids", "[]int32", "0+"), nullable="0+"),
        ),
        f("timeout_ms", "int32", "0+"),
        f("validate_only", "bool", "0+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "0+"),
        f(
            "results",
            "[]",
            "0+",
            f("name", "string", "0+"),
            f("error_code", "int16", "0+"),
            f("error_message", "string", "0+", nullable="0+", default=None),
        ),
    ],
)
