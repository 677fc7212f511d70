"""Transaction-coordinator APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions (InitProducerId is in ``data.py``, where idempotent producers use it).

Transcribed from Kafka's ``AddPartitionsToTxn*.json``, ``AddOffsetsToTxn*.json``, ``EndTxn*.json``,
``DescribeTransactions*.json`` and ``ListTransactions*.json``. AddPartitionsToTxn v4+ is the
batched, broker-to-coordinator form (``Transactions``); v0-3 keep the producer's fields under
Kafka's ``V3AndBelow`` names. EndTxn v5 (transaction version 2) answers the producer id and epoch.
No handler is registered for these yet: the daemon does not advertise them (see /transactions).
"""

from __future__ import annotations

from ..schema import api, f

_TOPICS = (f("name", "string"), f("partitions", "[]int32"))
_PARTITION_RESULTS = (
    f("name", "string"),
    f("results_by_partition", "[]", "0+", f("partition_index", "int32"), f("partition_error_code", "int16")),
)

ADD_PARTITIONS_TO_TXN = api(
    24,
    "AddPartitionsToTxn",
    valid="0-5",
    flexible="3+",
    request=[
        f(
            "transactions",
            "[]",
            "4+",
            f("transactional_id", "string", "4+"),
            f("producer_id", "int64", "4+"),
            f("producer_epoch", "int16", "4+"),
            f("verify_only", "bool", "4+", default=False),
            f("topics", "[]", "4+", *_TOPICS),
        ),
        f("v3_and_below_transactional_id", "string", "0-3"),
        f("v3_and_below_producer_id", "int64", "0-3"),
        f("v3_and_below_producer_epoch", "int16", "0-3"),
        f("v3_and_below_topics", "[]", "0-3", *_TOPICS),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16", "4+"),
        f(
            "results_by_transaction",
            "[]",
            "4+",
            f("transactional_id", "string", "4+"),
            f("topic_results", "[]", "4+", *_PARTITION_RESULTS),
        ),
        f("results_by_topic_v3_and_below", "[]", "0-3", *_PARTITION_RESULTS),
    ],
)

ADD_OFFSETS_TO_TXN = api(
    25,
    "AddOffsetsToTxn",
    valid="0-4",
    flexible="3+",
    request=[
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("group_id", "string"),
    ],
    response=[f("throttle_time_ms", "int32"), f("error_code", "int16")],
)

END_TXN = api(
    26,
    "EndTxn",
    valid="0-5",
    flexible="3+",
    request=[
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("committed", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", "5+", default=-1),
        f("producer_epoch", "int16", "5+", default=-1),
    ],
)

DESCRIBE_TRANSACTIONS = api(
    65,
    "DescribeTransactions",
    valid="0",
    flexible="0+",
    request=[f("transactional_ids", "[]string")],
    response=[
        f("throttle_time_ms", "int32"),
        f(
            "transaction_states",
            "[]",
            "0+",
            f("error_code", "int16"),
            f("transactional_id", "string"),
            f("transaction_state", "string"),
            f("transaction_timeout_ms", "int32"),
            f("transaction_start_time_ms", "int64"),
            f("producer_id", "int64"),
            f("producer_epoch", "int16"),
            f("topics", "[]", "0+", f("topic", "string"), f("partitions", "[]int32")),
        ),
    ],
)

LIST_TRANSACTIONS = api(
    66,
    "ListTransactions",
    valid="0-2",
    flexible="0+",
    request=[
        f("state_filters", "[]string"),
        f("producer_id_filters", "[]int64"),
        f("duration_filter", "int64", "1+", default=-1),
        f("transactional_id_pattern", "string", "2+", nullable="2+", default=None),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("unknown_state_filters", "[]string"),
        f(
            "transaction_states",
            "[]",
            "0+",
            f("transactional_id", "string"),
            f("producer_id", "int64"),
            f("transaction_state", "string"),
        ),
    ],
)
