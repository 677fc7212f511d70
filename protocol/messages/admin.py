"""Admin APIs: configs, ACLs, cluster description, record deletion, leader epochs and log dirs.

Transcribed from Kafka's ``DescribeConfigs*.json``, ``AlterConfigs*.json``,
``IncrementalAlterConfigs*.json``, ``DescribeCluster*.json``, ``DeleteRecords*.json``,
``CreateAcls*.json``, ``DescribeAcls*.json``, ``DeleteAcls*.json``, ``OffsetForLeaderEpoch*.json``,
``DescribeLogDirs*.json``, ``DescribeUserScramCredentials*.json`` and ``AlterUserScramCredentials*.json``, at the union of the ranges Kafka 2.0-4.x served: Kafka 4.0 (KIP-896) removed DescribeConfigs v0,
the ACL APIs' v0 (no pattern type: LITERAL), OffsetForLeaderEpoch v0-1 and DescribeLogDirs v0, which
older clients (sarama with an old ``Version``) still send.
"""

from __future__ import annotations

from ..schema import api, f

DESCRIBE_CONFIGS = api(
    32,
    "DescribeConfigs",
    valid="0-4",
    flexible="4+",
    request=[
        f(
            "resources",
            "[]",
            "0+",
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configuration_keys", "[]string", "0+", nullable="0+"),
        ),
        f("include_synonyms", "bool", "1+"),
        f("include_documentation", "bool", "3+"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "results",
            "[]",
            "0+",
            f("error_code", "int16"),
            f("error_message", "string", "0+", nullable="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f(
                "configs",
                "[]",
                "0+",
                f("name", "string"),
                f("value", "string", "0+", nullable="0+"),
                f("read_only", "bool"),
                f("is_default", "bool", "0"),
                f("config_source", "int8", "1+", default=-1),
                f("is_sensitive", "bool"),
                f(
                    "synonyms",
                    "[]",
                    "1+",
                    f("name", "string", "1+"),
                    f("value", "string", "1+", nullable="0+"),
                    f("source", "int8", "1+"),
                ),
                f("config_type", "int8", "3+", default=0),
                f("documentation", "string", "3+", nullable="0+"),
            ),
        ),
    ],
)

_ALTER_RESPONSE = [
    f("throttle_time_ms", "int32"),
    f(
        "responses",
        "[]",
        "0+",
        f("error_code", "int16"),
        f("error_message", "string", "0+", nullable="0+"),
        f("resource_type", "int8"),
        f("resource_name", "string"),
    ),
]

ALTER_CONFIGS = api(
    33,
    "AlterConfigs",
    valid="0-2",
    flexible="2+",
    request=[
        f(
            "resources",
            "[]",
            "0+",
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configs", "[]", "0+", f("name", "string"), f("value", "string", "0+", nullable="0+")),
        ),
        f("validate_only", "bool"),
    ],
    response=_ALTER_RESPONSE,
)

INCREMENTAL_ALTER_CONFIGS = api(
    44,
    "IncrementalAlterConfigs",
    valid="0-1",
    flexible="1+",
    request=[
        f(
            "resources",
            "[]",
            "0+",
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f(
                "configs",
                "[]",
                "0+",
                f("name", "string"),
                f("config_operation", "int8"),
                f("value", "string", "0+", nullable="0+"),
            ),
        ),
        f("validate_only", "bool"),
    ],
    response=_ALTER_RESPONSE,
)

DESCRIBE_CLUSTER = api(
    60,
    "DescribeCluster",
    valid="0-2",
    flexible="0+",
    request=[
        f("include_cluster_authorized_operations", "bool"),
        f("endpoint_type", "int8", "1+", default=1),
        f("include_fenced_brokers", "bool", "2+"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", "0+", nullable="0+", default=None),
        f("endpoint_type", "int8", "1+", default=1),
        f("cluster_id", "string"),
        f("controller_id", "int32", default=-1),
        f(
            "brokers",
            "[]",
            "0+",
            f("broker_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("rack", "string", "0+", nullable="0+", default=None),
            f("is_fenced", "bool", "2+"),
        ),
        f("cluster_authorized_operations", "int32", default=-(2**31)),
    ],
)

DELETE_RECORDS = api(
    21,
    "DeleteRecords",
    valid="0-2",
    flexible="2+",
    request=[
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string"),
            f("partitions", "[]", "0+", f("partition_index", "int32"), f("offset", "int64")),
        ),
        f("timeout_ms", "int32"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition_index", "int32"),
                f("low_watermark", "int64"),
                f("error_code", "int16"),
            ),
        ),
    ],
)

# One ACL filter (DescribeAcls' request body, each of DeleteAcls' filters).
_ACL_FILTER = (
    f("resource_type_filter", "int8"),
    f("resource_name_filter", "string", "0+", nullable="0+"),
    f("pattern_type_filter", "int8", "1+", default=3),
    f("principal_filter", "string", "0+", nullable="0+"),
    f("host_filter", "string", "0+", nullable="0+"),
    f("operation", "int8"),
    f("permission_type", "int8"),
)

CREATE_ACLS = api(
    30,
    "CreateAcls",
    valid="0-3",
    flexible="2+",
    request=[
        f(
            "creations",
            "[]",
            "0+",
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("resource_pattern_type", "int8", "1+", default=3),
            f("principal", "string"),
            f("host", "string"),
            f("operation", "int8"),
            f("permission_type", "int8"),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "results",
            "[]",
            "0+",
            f("error_code", "int16"),
            f("error_message", "string", "0+", nullable="0+"),
        ),
    ],
)

DESCRIBE_ACLS = api(
    29,
    "DescribeAcls",
    valid="0-3",
    flexible="2+",
    request=list(_ACL_FILTER),
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", "0+", nullable="0+"),
        f(
            "resources",
            "[]",
            "0+",
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("pattern_type", "int8", "1+", default=3),
            f(
                "acls",
                "[]",
                "0+",
                f("principal", "string"),
                f("host", "string"),
                f("operation", "int8"),
                f("permission_type", "int8"),
            ),
        ),
    ],
)

DELETE_ACLS = api(
    31,
    "DeleteAcls",
    valid="0-3",
    flexible="2+",
    request=[f("filters", "[]", "0+", *_ACL_FILTER)],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "filter_results",
            "[]",
            "0+",
            f("error_code", "int16"),
            f("error_message", "string", "0+", nullable="0+"),
            f(
                "matching_acls",
                "[]",
                "0+",
                f("error_code", "int16"),
                f("error_message", "string", "0+", nullable="0+"),
                f("resource_type", "int8"),
                f("resource_name", "string"),
                f("pattern_type", "int8", "1+", default=3),
                f("principal", "string"),
                f("host", "string"),
                f("operation", "int8"),
                f("permission_type", "int8"),
            ),
        ),
    ],
)

OFFSET_FOR_LEADER_EPOCH = api(
    23,
    "OffsetForLeaderEpoch",
    valid="0-4",
    flexible="4+",
    request=[
        f("replica_id", "int32", "3+", default=-2),
        f(
            "topics",
            "[]",
            "0+",
            f("topic", "string"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition", "int32"),
                f("current_leader_epoch", "int32", "2+", default=-1),
                f("leader_epoch", "int32"),
            ),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
        f(
            "topics",
            "[]",
            "0+",
            f("topic", "string"),
            f(
                "partitions",
                "[]",
                "0+",
                f("error_code", "int16"),
                f("partition", "int32"),
                f("leader_epoch", "int32", "1+", default=-1),
                f("end_offset", "int64", "0+", default=-1),
            ),
        ),
    ],
)

DESCRIBE_LOG_DIRS = api(
    35,
    "DescribeLogDirs",
    valid="0-4",
    flexible="2+",
    request=[
        f("topics", "[]", "0+", f("topic", "string"), f("partitions", "[]int32"), nullable="0+"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16", "3+"),
        f(
            "results",
            "[]",
            "0+",
            f("error_code", "int16"),
            f("log_dir", "string"),
            f(
                "topics",
                "[]",
                "0+",
                f("name", "string"),
                f(
                    "partitions",
                    "[]",
                    "0+",
                    f("partition_index", "int32"),
                    f("partition_size", "int64"),
                    f("offset_lag", "int64"),
                    f("is_future_key", "bool"),
                ),
            ),
            f("total_bytes", "int64", "4+", default=-1),
            f("usable_bytes", "int64", "4+", default=-1),
        ),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS = api(
    50,
    "DescribeUserScramCredentials",
    valid="0",
    flexible="0+",
    request=[f("users", "[]", "0+", f("name", "string"), nullable="0+")],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", "0+", nullable="0+"),
        f(
            "results",
            "[]",
            "0+",
            f("user", "string"),
            f("error_code", "int16"),
            f("error_message", "string", "0+", nullable="0+"),
            f("credential_infos", "[]", "0+", f("mechanism", "int8"), f("iterations", "int32")),
        ),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = api(
    51,
    "AlterUserScramCredentials",
    valid="0",
    flexible="0+",
    request=[
        f("deletions", "[]", "0+", f("name", "string"), f("mechanism", "int8")),
        f(
            "upsertions",
            "[]",
            "0+",
            f("name", "string"),
            f("mechanism", "int8"),
            f("iterations", "int32"),
            f("salt", "bytes"),
            f("salted_password", "bytes"),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "results",
            "[]",
            "0+",
            f("user", "string"),
            f("error_code", "int16"),
            f("error_message", "string", "0+", nullable="0+"),
        ),
    ],
)
