"""Byte vectors written out by hand for what kio cannot check.

kio follows Kafka 4.x, which removed CreateTopics v0-1, DeleteTopics v0, OffsetCommit v0-1,
OffsetFetch v0, Produce v0-2, Fetch v0-3 and ListOffsets v0
(``test_codec_oracle.test_kio_missing_versions_are_the_known_ones``); kio has no
``__consumer_offsets`` record schemas either. Each vector below follows the BNF of the Kafka protocol
guide (https://kafka.apache.org/protocol) for that version, one field per line:

- STRING: int16 length + UTF-8; NULLABLE_STRING: length -1 (``ffff``) for null.
- ARRAY: int32 count (``ffffffff`` for null); INT16/INT32/INT64: big-endian two's complement.
- Flexible versions: COMPACT_STRING is an unsigned-varint length + 1, COMPACT_ARRAY an unsigned-varint
  count + 1, and every struct ends with a tagged-field section (``00`` when empty).
"""

from __future__ import annotations

from typing import Any

import pytest
from groupd.protocol._rt import DecodeError
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.records import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
)
from groupd.protocol.schema import MessageSchema

T0 = 1700000000000  # 0x0000018bcfe56800, 2023-11-14T22:13:20Z
T1 = T0 + 86400000  # 0x0000018bd50bc400, one day later

CREATE_TOPICS = API_BY_NAME["CreateTopics"]
DELETE_TOPICS = API_BY_NAME["DeleteTopics"]
OFFSET_COMMIT = API_BY_NAME["OffsetCommit"]
OFFSET_FETCH = API_BY_NAME["OffsetFetch"]
PRODUCE = API_BY_NAME["Produce"]
FETCH = API_BY_NAME["Fetch"]
LIST_OFFSETS = API_BY_NAME["ListOffsets"]

VECTORS: list[tuple[str, MessageSchema, int, dict[str, Any], str]] = [
    # CreateTopics Request (Version: 0) => [topics] timeout_ms
    #   topics => name num_partitions replication_factor [assignments] [configs]
    #     assignments => partition_index [broker_ids]
    #     configs => name value(NULLABLE_STRING)
    (
        "CreateTopicsRequest-v0",
        CREATE_TOPICS.request,
        0,
        {
            "topics": [
                {
                    "name": "foo",
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                }
            ],
            "timeout_ms": 30000,
        },
        "00000001"  # [topics] 1
        "0003 666f6f"  # name "foo"
        "00000003"  # num_partitions 3
        "0001"  # replication_factor 1
        "00000000"  # [assignments] empty
        "00000001"  # [configs] 1
        "000e 636c65616e75702e706f6c696379"  # name "cleanup.policy"
        "0007 636f6d70616374"  # value "compact"
        "00007530",  # timeout_ms 30000
    ),
    (
        "CreateTopicsRequest-v0-manual-assignment",
        CREATE_TOPICS.request,
        0,
        {
            "topics": [
                {
                    "name": "bar",
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                    "configs": [{"name": "retention.ms", "value": None}],
                }
            ],
            "timeout_ms": 0,
        },
        "00000001"  # [topics] 1
        "0003 626172"  # name "bar"
        "ffffffff"  # num_partitions -1
        "ffff"  # replication_factor -1
        "00000001"  # [assignments] 1
        "00000000"  # partition_index 0
        "00000002 00000001 00000002"  # [broker_ids] 1, 2
        "00000001"  # [configs] 1
        "000c 726574656e74696f6e2e6d73"  # name "retention.ms"
        "ffff"  # value null
        "00000000",  # timeout_ms 0
    ),
    # CreateTopics Request (Version: 1) => [topics] timeout_ms validate_only
    (
        "CreateTopicsRequest-v1",
        CREATE_TOPICS.request,
        1,
        {
            "topics": [{"name": "foo", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 60000,
            "validate_only": True,
        },
        "00000001"  # [topics] 1
        "0003 666f6f"  # name "foo"
        "00000001"  # num_partitions 1
        "0001"  # replication_factor 1
        "00000000"  # [assignments] empty
        "00000000"  # [configs] empty
        "0000ea60"  # timeout_ms 60000
        "01",  # validate_only true
    ),
    # CreateTopics Response (Version: 0) => [topics]
    #   topics => name error_code
    (
        "CreateTopicsResponse-v0",
        CREATE_TOPICS.response,
        0,
        {"topics": [{"name": "foo", "error_code": 36}]},
        "00000001"  # [topics] 1
        "0003 666f6f"  # name "foo"
        "0024",  # error_code 36 TOPIC_ALREADY_EXISTS
    ),
    # CreateTopics Response (Version: 1) => [topics]
    #   topics => name error_code error_message(NULLABLE_STRING)
    (
        "CreateTopicsResponse-v1",
        CREATE_TOPICS.response,
        1,
        {
            "topics": [
                {"name": "foo", "error_code": 0, "error_message": None},
                {"name": "bad", "error_code": 17, "error_message": "bad name"},
            ]
        },
        "00000002"  # [topics] 2
        "0003 666f6f"  # name "foo"
        "0000"  # error_code 0
        "ffff"  # error_message null
        "0003 626164"  # name "bad"
        "0011"  # error_code 17 INVALID_TOPIC_EXCEPTION
        "0008 626164206e616d65",  # error_message "bad name"
    ),
    # DeleteTopics Request (Version: 0) => [topic_names] timeout_ms
    (
        "DeleteTopicsRequest-v0",
        DELETE_TOPICS.request,
        0,
        {"topic_names": ["foo", "bar"], "timeout_ms": 5000},
        "00000002"  # [topic_names] 2
        "0003 666f6f"  # "foo"
        "0003 626172"  # "bar"
        "00001388",  # timeout_ms 5000
    ),
    # DeleteTopics Response (Version: 0) => [responses]
    #   responses => name error_code
    (
        "DeleteTopicsResponse-v0",
        DELETE_TOPICS.response,
        0,
        {"responses": [{"name": "foo", "error_code": 0}, {"name": "bar", "error_code": 3}]},
        "00000002"  # [responses] 2
        "0003 666f6f 0000"  # "foo", error_code 0
        "0003 626172 0003",  # "bar", error_code 3 UNKNOWN_TOPIC_OR_PARTITION
    ),
    # OffsetCommit Request (Version: 0) => group_id [topics]
    #   topics => name [partitions]
    #     partitions => partition_index committed_offset committed_metadata(NULLABLE_STRING)
    (
        "OffsetCommitRequest-v0",
        OFFSET_COMMIT.request,
        0,
        {
            "group_id": "g1",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 42, "committed_metadata": ""},
                        {"partition_index": 1, "committed_offset": 256, "committed_metadata": None},
                    ],
                }
            ],
        },
        "0002 6731"  # group_id "g1"
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000002"  # [partitions] 2
        "00000000 000000000000002a 0000"  # 0, offset 42, metadata ""
        "00000001 0000000000000100 ffff",  # 1, offset 256, metadata null
    ),
    # OffsetCommit Request (Version: 1) => group_id generation_id member_id [topics]
    #   topics => name [partitions]
    #     partitions => partition_index committed_offset commit_timestamp committed_metadata
    (
        "OffsetCommitRequest-v1",
        OFFSET_COMMIT.request,
        1,
        {
            "group_id": "g1",
            "generation_id_or_member_epoch": 7,
            "member_id": "m-1",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 2,
                            "committed_offset": 100,
                            "commit_timestamp": T0,
                            "committed_metadata": "meta",
                        }
                    ],
                }
            ],
        },
        "0002 6731"  # group_id "g1"
        "00000007"  # generation_id 7
        "0003 6d2d31"  # member_id "m-1"
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000001"  # [partitions] 1
        "00000002"  # partition_index 2
        "0000000000000064"  # committed_offset 100
        "0000018bcfe56800"  # commit_timestamp T0
        "0004 6d657461",  # committed_metadata "meta"
    ),
    # OffsetCommit Response (Version: 0 and 1) => [topics]
    #   topics => name [partitions]
    #     partitions => partition_index error_code
    (
        "OffsetCommitResponse-v0",
        OFFSET_COMMIT.response,
        0,
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [{"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 25}],
                }
            ]
        },
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000002"  # [partitions] 2
        "00000000 0000"  # 0, error_code 0
        "00000001 0019",  # 1, error_code 25 UNKNOWN_MEMBER_ID
    ),
    (
        "OffsetCommitResponse-v1",
        OFFSET_COMMIT.response,
        1,
        {"topics": [{"name": "t", "partitions": [{"partition_index": 2, "error_code": 22}]}]},
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000001"  # [partitions] 1
        "00000002 0016",  # 2, error_code 22 ILLEGAL_GENERATION
    ),
    # OffsetFetch Request (Version: 0) => group_id [topics]
    #   topics => name [partition_indexes]
    (
        "OffsetFetchRequest-v0",
        OFFSET_FETCH.request,
        0,
        {"group_id": "g1", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        "0002 6731"  # group_id "g1"
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000002 00000000 00000001",  # [partition_indexes] 0, 1
    ),
    # OffsetFetch Response (Version: 0) => [topics]
    #   topics => name [partitions]
    #     partitions => partition_index committed_offset metadata(NULLABLE_STRING) error_code
    (
        "OffsetFetchResponse-v0",
        OFFSET_FETCH.response,
        0,
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 42, "metadata": "", "error_code": 0},
                        {"partition_index": 1, "committed_offset": -1, "metadata": None, "error_code": 0},
                    ],
                }
            ]
        },
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000002"  # [partitions] 2
        "00000000 000000000000002a 0000 0000"  # 0, offset 42, metadata "", no error
        "00000001 ffffffffffffffff ffff 0000",  # 1, offset -1 (none), metadata null, no error
    ),
    # --- __consumer_offsets records (group-coordinator/src/main/resources/common/message) ----------
    # OffsetCommitKey v0 and v1 => group topic partition
    (
        "OffsetCommitKey-v0",
        OFFSET_COMMIT_KEY,
        0,
        {"group": "g1", "topic": "t", "partition": 3},
        "0002 6731 0001 74 00000003",
    ),
    (
        "OffsetCommitKey-v1",
        OFFSET_COMMIT_KEY,
        1,
        {"group": "g1", "topic": "t", "partition": 3},
        "0002 6731 0001 74 00000003",
    ),
    # OffsetCommitValue v0 => offset metadata commit_timestamp
    (
        "OffsetCommitValue-v0",
        OFFSET_COMMIT_VALUE,
        0,
        {"offset": 42, "metadata": "", "commit_timestamp": T0},
        "000000000000002a"  # offset 42
        "0000"  # metadata ""
        "0000018bcfe56800",  # commit_timestamp T0
    ),
    # OffsetCommitValue v1 => offset metadata commit_timestamp expire_timestamp
    (
        "OffsetCommitValue-v1",
        OFFSET_COMMIT_VALUE,
        1,
        {"offset": 42, "metadata": "m", "commit_timestamp": T0, "expire_timestamp": T1},
        "000000000000002a"  # offset 42
        "0001 6d"  # metadata "m"
        "0000018bcfe56800"  # commit_timestamp T0
        "0000018bd50bc400",  # expire_timestamp T1
    ),
    # OffsetCommitValue v2 => offset metadata commit_timestamp
    (
        "OffsetCommitValue-v2",
        OFFSET_COMMIT_VALUE,
        2,
        {"offset": 42, "metadata": "m", "commit_timestamp": T0},
        "000000000000002a 0001 6d 0000018bcfe56800",
    ),
    # OffsetCommitValue v3 => offset leader_epoch metadata commit_timestamp
    (
        "OffsetCommitValue-v3",
        OFFSET_COMMIT_VALUE,
        3,
        {"offset": 42, "leader_epoch": 5, "metadata": "m", "commit_timestamp": T0},
        "000000000000002a"  # offset 42
        "00000005"  # leader_epoch 5
        "0001 6d"  # metadata "m"
        "0000018bcfe56800",  # commit_timestamp T0
    ),
    # OffsetCommitValue v4 (flexible) => offset leader_epoch metadata(COMPACT_STRING) commit_timestamp TAG_BUFFER
    (
        "OffsetCommitValue-v4",
        OFFSET_COMMIT_VALUE,
        4,
        {"offset": 42, "leader_epoch": -1, "metadata": "m", "commit_timestamp": T0},
        "000000000000002a"  # offset 42
        "ffffffff"  # leader_epoch -1
        "02 6d"  # metadata "m" (compact: length + 1)
        "0000018bcfe56800"  # commit_timestamp T0
        "00",  # no tagged fields
    ),
    # GroupMetadataKey v2 => group
    ("GroupMetadataKey-v2", GROUP_METADATA_KEY, 2, {"group": "g1"}, "0002 6731"),
    # GroupMetadataValue v0 => protocol_type generation protocol(NULLABLE) leader(NULLABLE) [members]
    #   members => member_id client_id client_host session_timeout subscription(BYTES) assignment(BYTES)
    (
        "GroupMetadataValue-v0",
        GROUP_METADATA_VALUE,
        0,
        {
            "protocol_type": "consumer",
            "generation": 1,
            "protocol": "range",
            "leader": "m-1",
            "members": [
                {
                    "member_id": "m-1",
                    "client_id": "c",
                    "client_host": "/127.0.0.1",
                    "session_timeout": 10000,
                    "subscription": b"\x00\x01",
                    "assignment": b"",
                }
            ],
        },
        "0008 636f6e73756d6572"  # protocol_type "consumer"
        "00000001"  # generation 1
        "0005 72616e6765"  # protocol "range"
        "0003 6d2d31"  # leader "m-1"
        "00000001"  # [members] 1
        "0003 6d2d31"  # member_id "m-1"
        "0001 63"  # client_id "c"
        "000a 2f3132372e302e302e31"  # client_host "/127.0.0.1"
        "00002710"  # session_timeout 10000
        "00000002 0001"  # subscription
        "00000000",  # assignment (empty)
    ),
    # An Empty group: no protocol, no leader, no members.
    (
        "GroupMetadataValue-v0-empty",
        GROUP_METADATA_VALUE,
        0,
        {"protocol_type": "consumer", "generation": 0, "protocol": None, "leader": None, "members": []},
        "0008 636f6e73756d6572"  # protocol_type "consumer"
        "00000000"  # generation 0
        "ffff ffff"  # protocol null, leader null
        "00000000",  # [members] empty
    ),
    # GroupMetadataValue v1: members gain rebalance_timeout after client_host.
    (
        "GroupMetadataValue-v1",
        GROUP_METADATA_VALUE,
        1,
        {
            "protocol_type": "consumer",
            "generation": 2,
            "protocol": "range",
            "leader": "m-1",
            "members": [
                {
                    "member_id": "m-1",
                    "client_id": "c",
                    "client_host": "/127.0.0.1",
                    "rebalance_timeout": 300000,
                    "session_timeout": 10000,
                    "subscription": b"",
                    "assignment": b"\xab",
                }
            ],
        },
        "0008 636f6e73756d6572"  # protocol_type "consumer"
        "00000002"  # generation 2
        "0005 72616e6765"  # protocol "range"
        "0003 6d2d31"  # leader "m-1"
        "00000001"  # [members] 1
        "0003 6d2d31"  # member_id "m-1"
        "0001 63"  # client_id "c"
        "000a 2f3132372e302e302e31"  # client_host "/127.0.0.1"
        "000493e0"  # rebalance_timeout 300000
        "00002710"  # session_timeout 10000
        "00000000"  # subscription (empty)
        "00000001 ab",  # assignment
    ),
    # GroupMetadataValue v2: current_state_timestamp after leader.
    (
        "GroupMetadataValue-v2",
        GROUP_METADATA_VALUE,
        2,
        {
            "protocol_type": "consumer",
            "generation": 3,
            "protocol": None,
            "leader": None,
            "current_state_timestamp": T0,
            "members": [],
        },
        "0008 636f6e73756d6572"  # protocol_type "consumer"
        "00000003"  # generation 3
        "ffff ffff"  # protocol null, leader null
        "0000018bcfe56800"  # current_state_timestamp T0
        "00000000",  # [members] empty
    ),
    # GroupMetadataValue v3: members gain group_instance_id (NULLABLE_STRING) after member_id.
    (
        "GroupMetadataValue-v3",
        GROUP_METADATA_VALUE,
        3,
        {
            "protocol_type": "consumer",
            "generation": 4,
            "protocol": "range",
            "leader": "m-1",
            "current_state_timestamp": -1,
            "members": [
                {
                    "member_id": "m-1",
                    "group_instance_id": "i1",
                    "client_id": "c",
                    "client_host": "/127.0.0.1",
                    "rebalance_timeout": 300000,
                    "session_timeout": 10000,
                    "subscription": b"",
                    "assignment": b"",
                },
                {
                    "member_id": "m-2",
                    "group_instance_id": None,
                    "client_id": "c",
                    "client_host": "/127.0.0.1",
                    "rebalance_timeout": 300000,
                    "session_timeout": 10000,
                    "subscription": b"",
                    "assignment": b"",
                },
            ],
        },
        "0008 636f6e73756d6572"  # protocol_type "consumer"
        "00000004"  # generation 4
        "0005 72616e6765"  # protocol "range"
        "0003 6d2d31"  # leader "m-1"
        "ffffffffffffffff"  # current_state_timestamp -1
        "00000002"  # [members] 2
        "0003 6d2d31 0002 6931"  # member_id "m-1", group_instance_id "i1"
        "0001 63 000a 2f3132372e302e302e31"  # client_id "c", client_host "/127.0.0.1"
        "000493e0 00002710 00000000 00000000"  # rebalance 300000, session 10000, no subscription/assignment
        "0003 6d2d32 ffff"  # member_id "m-2", group_instance_id null
        "0001 63 000a 2f3132372e302e302e31"
        "000493e0 00002710 00000000 00000000",
    ),
    # GroupMetadataValue v4 (flexible): compact strings, bytes and arrays, a tagged-field section per struct.
    (
        "GroupMetadataValue-v4",
        GROUP_METADATA_VALUE,
        4,
        {
            "protocol_type": "consumer",
            "generation": 5,
            "protocol": "range",
            "leader": "m-1",
            "current_state_timestamp": T0,
            "members": [
                {
                    "member_id": "m-1",
                    "group_instance_id": None,
                    "client_id": "c",
                    "client_host": "/127.0.0.1",
                    "rebalance_timeout": 300000,
                    "session_timeout": 10000,
                    "subscription": b"\x00\x01",
                    "assignment": b"",
                }
            ],
        },
        "09 636f6e73756d6572"  # protocol_type "consumer" (8 + 1)
        "00000005"  # generation 5
        "06 72616e6765"  # protocol "range"
        "04 6d2d31"  # leader "m-1"
        "0000018bcfe56800"  # current_state_timestamp T0
        "02"  # [members] 1 (count + 1)
        "04 6d2d31"  # member_id "m-1"
        "00"  # group_instance_id null
        "02 63"  # client_id "c"
        "0b 2f3132372e302e302e31"  # client_host "/127.0.0.1"
        "000493e0"  # rebalance_timeout 300000
        "00002710"  # session_timeout 10000
        "03 0001"  # subscription (2 + 1)
        "01"  # assignment (empty: 0 + 1)
        "00"  # member: no tagged fields
        "00",  # value: no tagged fields
    ),
    # --- data-plane versions Kafka 4.0 removed (KIP-896), as Kafka 3.9 served them --------------------
    # Produce Request (Version: 0) => acks timeout_ms [topic_data]
    #   topic_data => name [partition_data];  partition_data => index records(RECORDS = BYTES)
    (
        "ProduceRequest-v0",
        PRODUCE.request,
        0,
        {
            "acks": 1,
            "timeout_ms": 1500,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"ms"}]}],
        },
        "0001"  # acks 1
        "000005dc"  # timeout_ms 1500
        "00000001"  # [topic_data] 1
        "0001 74"  # name "t"
        "00000001"  # [partition_data] 1
        "00000000"  # index 0
        "00000002 6d73",  # records (2 bytes)
    ),
    # Produce Response (Version: 0) => [responses];  partition_responses => index error_code base_offset
    (
        "ProduceResponse-v0",
        PRODUCE.response,
        0,
        {"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 2, "base_offset": -1}]}]},
        "00000001"  # [responses] 1
        "0001 74"  # name "t"
        "00000001"  # [partition_responses] 1
        "00000000"  # index 0
        "0002"  # error_code 2 CORRUPT_MESSAGE
        "ffffffffffffffff",  # base_offset -1
    ),
    # Produce Response (Version: 2) => [responses] throttle_time_ms
    #   partition_responses => index error_code base_offset log_append_time_ms
    (
        "ProduceResponse-v2",
        PRODUCE.response,
        2,
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [{"index": 1, "error_code": 0, "base_offset": 7, "log_append_time_ms": T0}],
                }
            ],
            "throttle_time_ms": 0,
        },
        "00000001"  # [responses] 1
        "0001 74"  # name "t"
        "00000001"  # [partition_responses] 1
        "00000001"  # index 1
        "0000"  # error_code 0
        "0000000000000007"  # base_offset 7
        "0000018bcfe56800"  # log_append_time_ms T0
        "00000000",  # throttle_time_ms 0
    ),
    # Fetch Request (Version: 0) => replica_id max_wait_ms min_bytes [topics]
    #   topics => topic [partitions];  partitions => partition fetch_offset partition_max_bytes
    (
        "FetchRequest-v0",
        FETCH.request,
        0,
        {
            "replica_id": -1,
            "max_wait_ms": 500,
            "min_bytes": 1,
            "topics": [
                {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1048576}]}
            ],
        },
        "ffffffff"  # replica_id -1
        "000001f4"  # max_wait_ms 500
        "00000001"  # min_bytes 1
        "00000001"  # [topics] 1
        "0001 74"  # topic "t"
        "00000001"  # [partitions] 1
        "00000000"  # partition 0
        "0000000000000005"  # fetch_offset 5
        "00100000",  # partition_max_bytes 1 MiB
    ),
    # Fetch Request (Version: 3) => replica_id max_wait_ms min_bytes max_bytes [topics]
    (
        "FetchRequest-v3",
        FETCH.request,
        3,
        {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 52428800, "topics": []},
        "ffffffff"  # replica_id -1
        "00000000"  # max_wait_ms 0
        "00000000"  # min_bytes 0
        "03200000"  # max_bytes 50 MiB
        "00000000",  # [topics] empty
    ),
    # Fetch Response (Version: 0) => [responses]
    #   responses => topic [partitions];  partitions => partition_index error_code high_watermark records
    (
        "FetchResponse-v0",
        FETCH.response,
        0,
        {
            "responses": [
                {
                    "topic": "t",
                    "partitions": [{"partition_index": 0, "error_code": 1, "high_watermark": 9, "records": None}],
                }
            ]
        },
        "00000001"  # [responses] 1
        "0001 74"  # topic "t"
        "00000001"  # [partitions] 1
        "00000000"  # partition_index 0
        "0001"  # error_code 1 OFFSET_OUT_OF_RANGE
        "0000000000000009"  # high_watermark 9
        "ffffffff",  # records null
    ),
    # Fetch Response (Version: 1-3) => throttle_time_ms [responses]
    (
        "FetchResponse-v2",
        FETCH.response,
        2,
        {
            "throttle_time_ms": 0,
            "responses": [
                {
                    "topic": "t",
                    "partitions": [{"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": b"x"}],
                }
            ],
        },
        "00000000"  # throttle_time_ms 0
        "00000001"  # [responses] 1
        "0001 74"  # topic "t"
        "00000001"  # [partitions] 1
        "00000000"  # partition_index 0
        "0000"  # error_code 0
        "0000000000000001"  # high_watermark 1
        "00000001 78",  # records (1 byte)
    ),
    # ListOffsets Request (Version: 0) => replica_id [topics]
    #   topics => name [partitions];  partitions => partition_index timestamp max_num_offsets
    (
        "ListOffsetsRequest-v0",
        LIST_OFFSETS.request,
        0,
        {
            "replica_id": -1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 2, "timestamp": -1, "max_num_offsets": 1}]}],
        },
        "ffffffff"  # replica_id -1
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000001"  # [partitions] 1
        "00000002"  # partition_index 2
        "ffffffffffffffff"  # timestamp -1 LATEST
        "00000001",  # max_num_offsets 1
    ),
    # ListOffsets Response (Version: 0) => [topics]
    #   topics => name [partitions];  partitions => partition_index error_code [old_style_offsets]
    (
        "ListOffsetsResponse-v0",
        LIST_OFFSETS.response,
        0,
        {
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 2, "error_code": 0, "old_style_offsets": [12, 0]}]}
            ]
        },
        "00000001"  # [topics] 1
        "0001 74"  # name "t"
        "00000001"  # [partitions] 1
        "00000002"  # partition_index 2
        "0000"  # error_code 0
        "00000002 000000000000000c 0000000000000000",  # [old_style_offsets] 12, 0
    ),
]


@pytest.mark.parametrize(
    ("schema", "version", "value", "hexdata"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_vector(schema: MessageSchema, version: int, value: dict[str, Any], hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    codec = schema.codec(version)
    assert codec.decode(data) == value
    assert codec.encode(value) == data
    # The stock construct paths agree with the fast one.
    assert codec.construct.parse(data) == value
    assert codec.struct.parse(data) == value
    assert codec.construct.build(value) == data
    assert codec.struct.build(value) == data


def test_offset_fetch_v0_and_v1_topics_are_not_nullable() -> None:
    # nullableVersions "2-7": before v2 a null topic array is not valid on the wire. Reading one is an
    # error; writing None where null is not allowed writes the field's default (the empty array).
    for version in (0, 1):
        codec = OFFSET_FETCH.request.codec(version)
        assert codec.encode({"group_id": "g1", "topics": None}) == bytes.fromhex("0002 6731 00000000")
        with pytest.raises(DecodeError):
            codec.decode(bytes.fromhex("0002 6731 ffffffff"))
    assert OFFSET_FETCH.request.codec(2).decode(bytes.fromhex("0002 6731 ffffffff")) == {
        "group_id": "g1",
        "topics": None,
    }


def test_offset_commit_v1_is_the_only_version_with_commit_timestamp() -> None:
    partition = {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}
    sizes = {}
    for version in (0, 1, 2):
        codec = OFFSET_COMMIT.request.codec(version)
        value = codec.decode(codec.encode({"group_id": "g", "topics": [{"name": "t", "partitions": [partition]}]}))
        sizes[version] = "commit_timestamp" in value["topics"][0]["partitions"][0]
    assert sizes == {0: False, 1: True, 2: False}
