"""Byte vectors written out by hand for the admin API versions Kafka 4 removed (so kio lacks them):
DescribeConfigs v0, Create/Describe/DeleteAcls v0, OffsetForLeaderEpoch v0-1, DescribeLogDirs v0.
Written from the Kafka protocol guide's BNF for each version, one field per line, as in
``test_codec_vectors.py`` (whose checks they go through)."""

from __future__ import annotations

from typing import Any

import pytest
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.schema import MessageSchema

from tests.protocol.test_codec_vectors import test_vector as check_vector

FOO = "0003 666f6f"  # STRING "foo"
BOB = "0008 557365723a626f62"  # STRING "User:bob"
STAR = "0001 2a"  # STRING "*"
ACL_ENTRY = {"principal": "User:bob", "host": "*", "operation": 3, "permission_type": 3}
FILTER = {
    "resource_type_filter": 2,
    "resource_name_filter": "foo",
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}
FILTER_HEX = (
    "02"  # resource_type_filter TOPIC
    + FOO  # resource_name_filter
    + "ffff"  # principal_filter null
    + "ffff"  # host_filter null
    + "01"  # operation ANY
    + "01"  # permission_type ANY
)


def req(name: str) -> MessageSchema:
    return API_BY_NAME[name].request


def resp(name: str) -> MessageSchema:
    return API_BY_NAME[name].response


VECTORS: list[tuple[str, MessageSchema, int, dict[str, Any], str]] = [
    # DescribeConfigs Request (Version: 0) => [resources]
    #   resources => resource_type resource_name [configuration_keys](nullable)
    (
        "DescribeConfigsRequest-v0",
        req("DescribeConfigs"),
        0,
        {"resources": [{"resource_type": 2, "resource_name": "foo", "configuration_keys": None}]},
        "0000000102" + FOO + "ffffffff",
    ),
    # DescribeConfigs Response (Version: 0) => throttle_time_ms [results]
    #   results => error_code error_message resource_type resource_name [configs]
    #     configs => name value read_only is_default is_sensitive
    (
        "DescribeConfigsResponse-v0",
        resp("DescribeConfigs"),
        0,
        {
            "throttle_time_ms": 0,
            "results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": 2,
                    "resource_name": "foo",
                    "configs": [
                        {
                            "name": "retention.ms",
                            "value": "1000",
                            "read_only": False,
                            "is_default": False,
                            "is_sensitive": False,
                        }
                    ],
                }
            ],
        },
        "00000000"  # throttle_time_ms
        "00000001"  # [results] 1
        "0000"  # error_code
        "ffff"  # error_message null
        "02" + FOO + "00000001"  # [configs] 1
        "000c 726574656e74696f6e2e6d73"  # name "retention.ms"
        "0004 31303030"  # value "1000"
        "00"  # read_only
        "00"  # is_default
        "00",  # is_sensitive
    ),
    # CreateAcls Request (Version: 0) => [creations]
    #   creations => resource_type resource_name principal host operation permission_type
    (
        "CreateAclsRequest-v0",
        req("CreateAcls"),
        0,
        {"creations": [{"resource_type": 2, "resource_name": "foo", **ACL_ENTRY}]},
        "0000000102" + FOO + BOB + STAR + "0303",
    ),
    # CreateAcls Response (Version: 0) => throttle_time_ms [results]
    #   results => error_code error_message
    (
        "CreateAclsResponse-v0",
        resp("CreateAcls"),
        0,
        {"throttle_time_ms": 0, "results": [{"error_code": 0, "error_message": None}]},
        "00000000000000010000ffff",
    ),
    # DescribeAcls Request (Version: 0) => resource_type_filter resource_name_filter principal_filter
    #   host_filter operation permission_type
    ("DescribeAclsRequest-v0", req("DescribeAcls"), 0, FILTER, FILTER_HEX),
    # DescribeAcls Response (Version: 0) => throttle_time_ms error_code error_message [resources]
    #   resources => resource_type resource_name [acls]
    #     acls => principal host operation permission_type
    (
        "DescribeAclsResponse-v0",
        resp("DescribeAcls"),
        0,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "resources": [{"resource_type": 2, "resource_name": "foo", "acls": [ACL_ENTRY]}],
        },
        "000000000000ffff0000000102" + FOO + "00000001" + BOB + STAR + "0303",
    ),
    # DeleteAcls Request (Version: 0) => [filters] (as DescribeAcls v0's body)
    ("DeleteAclsRequest-v0", req("DeleteAcls"), 0, {"filters": [FILTER]}, "00000001" + FILTER_HEX),
    # DeleteAcls Response (Version: 0) => throttle_time_ms [filter_results]
    #   filter_results => error_code error_message [matching_acls]
    #     matching_acls => error_code error_message resource_type resource_name principal host operation permission_type
    (
        "DeleteAclsResponse-v0",
        resp("DeleteAcls"),
        0,
        {
            "throttle_time_ms": 0,
            "filter_results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": 2,
                            "resource_name": "foo",
                            **ACL_ENTRY,
                        }
                    ],
                }
            ],
        },
        "00000000000000010000ffff000000010000ffff02" + FOO + BOB + STAR + "0303",
    ),
    # OffsetForLeaderEpoch Request (Version: 0 and 1) => [topics]
    #   topics => topic [partitions]
    #     partitions => partition leader_epoch
    *(
        (
            f"OffsetForLeaderEpochRequest-v{v}",
            req("OffsetForLeaderEpoch"),
            v,
            {"topics": [{"topic": "foo", "partitions": [{"partition": 1, "leader_epoch": 0}]}]},
            "00000001" + FOO + "000000010000000100000000",
        )
        for v in (0, 1)
    ),
    # OffsetForLeaderEpoch Response (Version: 0) => [topics]
    #   topics => topic [partitions]
    #     partitions => error_code partition end_offset
    (
        "OffsetForLeaderEpochResponse-v0",
        resp("OffsetForLeaderEpoch"),
        0,
        {"topics": [{"topic": "foo", "partitions": [{"error_code": 0, "partition": 1, "end_offset": 42}]}]},
        "00000001" + FOO + "00000001000000000001000000000000002a",
    ),
    # OffsetForLeaderEpoch Response (Version: 1) => [topics]
    #   topics => topic [partitions]
    #     partitions => error_code partition leader_epoch end_offset
    (
        "OffsetForLeaderEpochResponse-v1",
        resp("OffsetForLeaderEpoch"),
        1,
        {
            "topics": [
                {"topic": "foo", "partitions": [{"error_code": 0, "partition": 1, "leader_epoch": 0, "end_offset": 42}]}
            ]
        },
        "00000001" + FOO + "0000000100000000000100000000000000000000002a",
    ),
    # DescribeLogDirs Request (Version: 0) => [topics](nullable)
    #   topics => topic [partitions]
    ("DescribeLogDirsRequest-v0-all", req("DescribeLogDirs"), 0, {"topics": None}, "ffffffff"),
    (
        "DescribeLogDirsRequest-v0",
        req("DescribeLogDirs"),
        0,
        {"topics": [{"topic": "foo", "partitions": [0, 2]}]},
        "00000001" + FOO + "000000020000000000000002",
    ),
    # DescribeLogDirs Response (Version: 0) => throttle_time_ms [results]
    #   results => error_code log_dir [topics]
    #     topics => name [partitions]
    #       partitions => partition_index partition_size offset_lag is_future_key
    (
        "DescribeLogDirsResponse-v0",
        resp("DescribeLogDirs"),
        0,
        {
            "throttle_time_ms": 0,
            "results": [
                {
                    "error_code": 0,
                    "log_dir": "/d",
                    "topics": [
                        {
                            "name": "foo",
                            "partitions": [
                                {"partition_index": 0, "partition_size": 100, "offset_lag": 0, "is_future_key": False}
                            ],
                        }
                    ],
                }
            ],
        },
        "00000000"  # throttle_time_ms
        "00000001"  # [results] 1
        "0000"  # error_code
        "0002 2f64"  # log_dir "/d"
        "00000001" + FOO + "00000001"  # [partitions] 1
        "00000000"  # partition_index
        "0000000000000064"  # partition_size 100
        "0000000000000000"  # offset_lag
        "00",  # is_future_key
    ),
]


@pytest.mark.parametrize(
    ("schema", "version", "value", "hexdata"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_admin_vector(schema: MessageSchema, version: int, value: dict[str, Any], hexdata: str) -> None:
    check_vector(schema, version, value, hexdata.replace(" ", ""))


def test_every_version_kio_lacks_has_a_vector() -> None:
    names = {v[0].removesuffix("-all") for v in VECTORS}
    for api in ("DescribeConfigs", "CreateAcls", "DescribeAcls", "DeleteAcls", "DescribeLogDirs"):
        assert {f"{api}Request-v0", f"{api}Response-v0"} <= names
    for v in (0, 1):
        assert {f"OffsetForLeaderEpochRequest-v{v}", f"OffsetForLeaderEpochResponse-v{v}"} <= names
