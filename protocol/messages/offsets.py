"""Committed-offset APIs: OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit.

Transcribed from Kafka's ``OffsetCommit*.json``, ``OffsetFetch*.json``, ``OffsetDelete*.json`` and
``TxnOffsetCommit*.json``;
fields that exist only in versions above the ones groupd serves (topic ids, OffsetCommit/OffsetFetch
v10+) are left out.
"""

from __future__ import annotations

from ..schema import api, f

OFFSET_COMMIT = api(
    8,
    "OffsetCommit",
    valid="0-9",
    flexible="8+",
    request=[
        f("group_id", "string"),
        # "GenerationId" before KIP-848; the member epoch when the consumer protocol is used.
        f("generation_id_or_member_epoch", "int32", "1+", default=-1),
        f("member_id", "string", "1+"),
        f("group_instance_id", "string", "7+", nullable="7+", default=None),
        f("retention_time_ms", "int64", "2-4", default=-1),
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string", "0-9"),
            f(
                "partitions",
                "[]",
                "0+",
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "6+", default=-1),
                f("commit_timestamp", "int64", "1", default=-1),
                f("committed_metadata", "string", "0+", nullable="0+"),
            ),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32", "3+"),
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string", "0-9"),
            f("partitions", "[]", "0+", f("partition_index", "int32"), f("error_code", "int16")),
        ),
    ],
)

OFFSET_FETCH = api(
    9,
    "OffsetFetch",
    valid="0-9",
    flexible="6+",
    request=[
        f("group_id", "string", "0-7"),
        # v0-1: the array is never null; v2-7: null means "all committed offsets of the group".
        f(
            "topics",
            "[]",
            "0-7",
            f("name", "string", "0-7"),
            f("partition_indexes", "[]int32", "0-7"),
            nullable="2-7",
        ),
        f(
            "groups",
            "[]",
            "8+",
            f("group_id", "string", "8+"),
            f("member_id", "string", "9+", nullable="9+", default=None),
            f("member_epoch", "int32", "9+", default=-1),
            f(
                "topics",
                "[]",
                "8+",
                f("name", "string", "8-9"),
                f("partition_indexes", "[]int32", "8+"),
                nullable="8+",
            ),
        ),
        f("require_stable", "bool", "7+", default=False),
    ],
    response=[
        f("throttle_time_ms", "int32", "3+"),
        f(
            "topics",
            "[]",
            "0-7",
            f("name", "string", "0-7"),
            f(
                "partitions",
                "[]",
                "0-7",
                f("partition_index", "int32", "0-7"),
                f("committed_offset", "int64", "0-7"),
                f("committed_leader_epoch", "int32", "5-7", default=-1),
                f("metadata", "string", "0-7", nullable="0-7"),
                f("error_code", "int16", "0-7"),
            ),
        ),
        f("error_code", "int16", "2-7", default=0),
        f(
            "groups",
            "[]",
            "8+",
            f("group_id", "string", "8+"),
            f(
                "topics",
                "[]",
                "8+",
                f("name", "string", "8-9"),
                f(
                    "partitions",
                    "[]",
                    "8+",
                    f("partition_index", "int32", "8+"),
                    f("committed_offset", "int64", "8+"),
                    f("committed_leader_epoch", "int32", "8+", default=-1),
                    f("metadata", "string", "8+", nullable="8+"),
                    f("error_code", "int16", "8+"),
                ),
            ),
            f("error_code", "int16", "8+", default=0),
        ),
    ],
)

OFFSET_DELETE = api(
    47,
    "OffsetDelete",
    valid="0",
    flexible="none",
    request=[
        f("group_id", "string"),
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string"),
            f("partitions", "[]", "0+", f("partition_index", "int32")),
        ),
    ],
    response=[
        f("error_code", "int16"),
        f("throttle_time_ms", "int32"),
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string"),
            f("partitions", "[]", "0+", f("partition_index", "int32"), f("error_code", "int16")),
        ),
    ],
)

# v3 adds the member fields (KIP-447); v4 (KIP-890 part 1) and v5 (transaction version 2, the
# coordinator verifies the transaction itself) change no field, only which errors may be answered.
TXN_OFFSET_COMMIT = api(
    28,
    "TxnOffsetCommit",
    valid="0-5",
    flexible="3+",
    request=[
        f("transactional_id", "string"),
        f("group_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("generation_id", "int32", "3+", default=-1),
        f("member_id", "string", "3+", default=""),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
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
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "2+", default=-1),
                f("committed_metadata", "string", "0+", nullable="0+"),
            ),
        ),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "topics",
            "[]",
            "0+",
            f("name", "string"),
            f("partitions", "[]", "0+", f("partition_index", "int32"), f("error_code", "int16")),
        ),
    ],
)
