"""Data-plane APIs: Produce, Fetch, ListOffsets, InitProducerId, DescribeProducers.

Transcribed from Kafka's ``Produce*.json``, ``Fetch*.json``, ``ListOffsets*.json``,
``InitProducerId*.json`` and ``DescribeProducers*.json``. groupd serves only the version ranges below (Produce 0-12, Fetch 0-12,
ListOffsets 0-8), so fields that exist only above them (topic ids in Produce v13 / Fetch v13, Fetch's
ReplicaState and replica directory ids, ListOffsets' TimeoutMs, ...) are left out. The versions Kafka 4.0
removed (KIP-896: Produce v0-2, Fetch v0-3, ListOffsets v0) are served as Kafka 3.9 served them, for
the clients that still send them. ``records`` fields
are the raw bytes of a record batch set (nullable); record batches are parsed elsewhere.
"""

from __future__ import annotations

from ..schema import api, f

PRODUCE = api(
    0,
    "Produce",
    valid="0-12",
    flexible="9+",
    request=[
        f("transactional_id", "string", "3+", nullable="3+", default=None),
        f("acks", "int16"),
        f("timeout_ms", "int32"),
        f(
            "topic_data",
            "[]",
            "0+",
            f("name", "string", "0-12"),
            f("partition_data", "[]", "0+", f("index", "int32"), f("records", "records", "0+", nullable="0+")),
        ),
    ],
    response=[
        f(
            "responses",
            "[]",
            "0+",
            f("name", "string", "0-12"),
            f(
                "partition_responses",
                "[]",
                "0+",
                f("index", "int32"),
                f("error_code", "int16"),
                f("base_offset", "int64"),
                f("log_append_time_ms", "int64", "2+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f(
                    "record_errors",
                    "[]",
                    "8+",
                    f("batch_index", "int32", "8+"),
                    f("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                ),
                f("error_message", "string", "8+", nullable="8+", default=None),
                f(
                    "current_leader",
                    "LeaderIdAndEpoch",
                    "10+",
                    f("leader_id", "int32", "10+", default=-1),
                    f("leader_epoch", "int32", "10+", default=-1),
                    tag=0,
                    tagged="10+",
                ),
            ),
        ),
        f("throttle_time_ms", "int32", "1+", default=0),
        f(
            "node_endpoints",
            "[]",
            "10+",
            f("node_id", "int32", "10+"),
            f("host", "string", "10+"),
            f("port", "int32", "10+"),
            f("rack", "string", "10+", nullable="10+", default=None),
            tag=0,
            tagged="10+",
        ),
    ],
)

FETCH = api(
    1,
    "Fetch",
    valid="0-12",
    flexible="12+",
    request=[
        f("cluster_id", "string", "12+", nullable="12+", default=None, tag=0, tagged="12+"),
        f("replica_id", "int32", "0-14", default=-1),
        f("max_wait_ms", "int32"),
        f("min_bytes", "int32"),
        f("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        f("isolation_level", "int8", "4+", default=0),
        f("session_id", "int32", "7+", default=0),
        f("session_epoch", "int32", "7+", default=-1),
        f(
            "topics",
            "[]",
            "0+",
            f("topic", "string", "0-12"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition", "int32"),
                f("current_leader_epoch", "int32", "9+", default=-1),
                f("fetch_offset", "int64"),
                f("last_fetched_epoch", "int32", "12+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f("partition_max_bytes", "int32"),
            ),
        ),
        f(
            "forgotten_topics_data",
            "[]",
            "7+",
            f("topic", "string", "7-12"),
            f("partitions", "[]int32", "7+"),
        ),
        f("rack_id", "string", "11+", default=""),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16", "7+"),
        f("session_id", "int32", "7+", default=0),
        f(
            "responses",
            "[]",
            "0+",
            f("topic", "string", "0-12"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("high_watermark", "int64"),
                f("last_stable_offset", "int64", "4+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f(
                    "diverging_epoch",
                    "EpochEndOffset",
                    "12+",
                    f("epoch", "int32", "12+", default=-1),
                    f("end_offset", "int64", "12+", default=-1),
                    tag=0,
                    tagged="12+",
                ),
                f(
                    "current_leader",
                    "LeaderIdAndEpoch",
                    "12+",
                    f("leader_id", "int32", "12+", default=-1),
                    f("leader_epoch", "int32", "12+", default=-1),
                    tag=1,
                    tagged="12+",
                ),
                f(
                    "snapshot_id",
                    "SnapshotId",
                    "12+",
                    f("end_offset", "int64", "12+", default=-1),
                    f("epoch", "int32", "12+", default=-1),
                    tag=2,
                    tagged="12+",
                ),
                f(
                    "aborted_transactions",
                    "[]",
                    "4+",
                    f("producer_id", "int64", "4+"),
                    f("first_offset", "int64", "4+"),
                    nullable="4+",
                ),
                f("preferred_read_replica", "int32", "11+", default=-1),
                f("records", "records", "0+", nullable="0+"),
            ),
        ),
    ],
)

LIST_OFFSETS = api(
    2,
    "ListOffsets",
    valid="0-8",
    flexible="6+",
    request=[
        f("replica_id", "int32"),
        f("isolation_level", "int8", "2+"),
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
                f("current_leader_epoch", "int32", "4+", default=-1),
                f("timestamp", "int64"),
                f("max_num_offsets", "int32", "0", default=1),
            ),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
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
                f("error_code", "int16"),
                f("old_style_offsets", "[]int64", "0"),
                f("timestamp", "int64", "1+", default=-1),
                f("offset", "int64", "1+", default=-1),
                f("leader_epoch", "int32", "4+", default=-1),
            ),
        ),
    ],
)

INIT_PRODUCER_ID = api(
    22,
    "InitProducerId",
    valid="0-4",
    flexible="2+",
    request=[
        f("transactional_id", "string", "0+", nullable="0+"),
        f("transaction_timeout_ms", "int32"),
        f("producer_id", "int64", "3+", default=-1),
        f("producer_epoch", "int16", "3+", default=-1),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", "0+", default=-1),
        f("producer_epoch", "int16"),
    ],
)

# KIP-664: the producers a partition's leader knows of (Kafka's DescribeProducers*.json).
DESCRIBE_PRODUCERS = api(
    61,
    "DescribeProducers",
    valid="0",
    flexible="0+",
    request=[f("topics", "[]", "0+", f("name", "string"), f("partition_indexes", "[]int32"))],
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
                f("error_code", "int16"),
                f("error_message", "string", "0+", nullable="0+", default=None),
                f(
                    "active_producers",
                    "[]",
                    "0+",
                    f("producer_id", "int64"),
                    f("producer_epoch", "int32"),
                    f("last_sequence", "int32", "0+", default=-1),
                    f("last_timestamp", "int64", "0+", default=-1),
                    f("coordinator_epoch", "int32"),
                    f("current_txn_start_offset", "int64", "0+", default=-1),
                ),
            ),
        ),
    ],
)
