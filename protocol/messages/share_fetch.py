"""KIP-932 delivery APIs (Kafka 4.2's ``ShareFetchRequest/Response.json`` and
``ShareAcknowledgeRequest/Response.json``): ShareFetch (78) v1-2 and ShareAcknowledge (79) v1-2,
flexible from v0. Version 0 was Kafka 4.0's early access and is gone from 4.1; v2 adds the acquire
mode and RENEW acknowledgements (KIP-1206, KIP-1222). Fields that exist only in v0
(``PartitionMaxBytes``) are left out.

The ``records`` of a ShareFetch answer are non-nullable from v1: groupd always sends bytes (empty
when nothing was acquired), never null.
"""

from __future__ import annotations

from ..schema import Field, api, f


def _ack_batches() -> Field:
    return f(
        "acknowledgement_batches",
        "[]",
        "0+",
        f("first_offset", "int64"),
        f("last_offset", "int64"),
        f("acknowledge_types", "[]int8"),
    )


def _leader() -> Field:
    return f("current_leader", "LeaderIdAndEpoch", "0+", f("leader_id", "int32"), f("leader_epoch", "int32"))


def _node_endpoints() -> Field:
    return f(
        "node_endpoints",
        "[]",
        "0+",
        f("node_id", "int32"),
        f("host", "string"),
        f("port", "int32"),
        f("rack", "string", nullable="0+", default=None),
    )


SHARE_FETCH = api(
    78,
    "ShareFetch",
    valid="1-2",
    flexible="0+",
    request=[
        f("group_id", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+"),
        f("share_session_epoch", "int32"),
        f("max_wait_ms", "int32"),
        f("min_bytes", "int32"),
        f("max_bytes", "int32", default=0x7FFFFFFF),
        f("max_records", "int32", "1+"),
        f("batch_size", "int32", "1+"),
        f("share_acquire_mode", "int8", "2+", default=0),
        f("is_renew_ack", "bool", "2+", default=False),
        f(
            "topics",
            "[]",
            "0+",
            f("topic_id", "uuid"),
            f("partitions", "[]", "0+", f("partition_index", "int32"), _ack_batches()),
        ),
        f("forgotten_topics_data", "[]", "0+", f("topic_id", "uuid"), f("partitions", "[]int32")),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("acquisition_lock_timeout_ms", "int32", "1+"),
        f(
            "responses",
            "[]",
            "0+",
            f("topic_id", "uuid"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
                f("acknowledge_error_code", "int16"),
                f("acknowledge_error_message", "string", nullable="0+", default=None),
                _leader(),
                f("records", "records", "0+"),
                f(
                    "acquired_records",
                    "[]",
                    "0+",
                    f("first_offset", "int64"),
                    f("last_offset", "int64"),
                    f("delivery_count", "int16"),
                ),
            ),
        ),
        _node_endpoints(),
    ],
)

SHARE_ACKNOWLEDGE = api(
    79,
    "ShareAcknowledge",
    valid="1-2",
    flexible="0+",
    request=[
        f("group_id", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+"),
        f("share_session_epoch", "int32"),
        f("is_renew_ack", "bool", "2+", default=False),
        f(
            "topics",
            "[]",
            "0+",
            f("topic_id", "uuid"),
            f("partitions", "[]", "0+", f("partition_index", "int32"), _ack_batches()),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("acquisition_lock_timeout_ms", "int32", "2+", default=0),
        f(
            "responses",
            "[]",
            "0+",
            f("topic_id", "uuid"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
                _leader(),
            ),
        ),
        _node_endpoints(),
    ],
)
