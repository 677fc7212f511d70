"""The whole-request error answer (protocol.error_response) for every API and version the schemas
describe: it encodes with the response codec, decodes back, and carries the error where Kafka's
``AbstractRequest.getErrorResponse`` puts it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from groupd.protocol.error_response import carries_error, error_response
from groupd.protocol.errors import ErrorCode
from groupd.protocol.messages import API_BY_KEY, API_BY_NAME
from groupd.protocol.schema import ApiSchema, Field

CASES = [(api.name, v) for api in API_BY_KEY.values() for v in range(api.min_version, api.max_version + 1)]
CODE = ErrorCode.NOT_COORDINATOR
# Answers with no place for an error at these versions: Kafka's getErrorResponse sets a top-level
# error_code that the version does not carry, so the client sees an empty answer
# (DescribeLogDirsRequest.getErrorResponse before v3: its results are the broker's log dirs, which
# mirror nothing in the request).
NO_PLACE = {("DescribeLogDirs", 0), ("DescribeLogDirs", 1), ("DescribeLogDirs", 2)}

_SAMPLE_SCALARS: dict[str, Any] = {
    "int8": 0,
    "int16": 1,
    "int32": 3,
    "int64": 7,
    "uint16": 1,
    "uint32": 1,
    "float64": 0.5,
    "bool": False,
    "uuid": uuid.UUID(int=5),
    "string": "billing",
    "bytes": b"x",
    "records": None,
}


def sample(fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """A request with one entry in every array, so that every mirrored answer entry shows up."""
    out: dict[str, Any] = {}
    for fld in fields:
        if not fld.exists_in(version):
            continue
        if fld.type.startswith("[]"):
            if fld.fields:
                out[fld.name] = [sample(fld.fields, version)]
            else:
                out[fld.name] = [_SAMPLE_SCALARS[fld.type[2:]]]
        elif fld.is_struct:
            out[fld.name] = sample(fld.fields, version)
        else:
            out[fld.name] = _SAMPLE_SCALARS[fld.type]
    return out


def roundtrip(api: ApiSchema, version: int, request: dict[str, Any]) -> dict[str, Any]:
    decoded = api.request.codec(version).decode(api.request.codec(version).encode(request))
    answer = error_response(api, version, decoded, CODE)
    codec = api.response.codec(version)
    return codec.decode(codec.encode(answer))


@pytest.mark.parametrize(("name", "version"), CASES)
def test_error_answer_encodes_and_carries_the_error(name: str, version: int) -> None:
    api = API_BY_NAME[name]
    request = sample(api.request.fields, version)
    if name == "FindCoordinator":
        request["key_type"] = 0
    got = roundtrip(api, version, request)
    assert carries_error(got, CODE) == ((name, version) not in NO_PLACE), got
    top = any(f.name == "error_code" and f.exists_in(version) for f in api.response.fields)
    if top:
        assert got["error_code"] == CODE


def test_top_level_error_leaves_arrays_empty_joingroup() -> None:
    # JoinGroupRequest.getErrorResponse: generation -1, no members, member id "".
    api = API_BY_NAME["JoinGroup"]
    got = roundtrip(api, 9, sample(api.request.fields, 9))
    assert got["error_code"] == CODE and got["generation_id"] == -1 and got["members"] == []
    assert got["member_id"] == "" and got["protocol_name"] is None


def test_per_partition_error_mirrors_the_request_offsetcommit() -> None:
    api = API_BY_NAME["OffsetCommit"]
    req = sample(api.request.fields, 8)
    req["topics"] = [
        {
            **req["topics"][0],
            "name": "orders",
            "partitions": [dict(req["topics"][0]["partitions"][0], partition_index=i) for i in (0, 2)],
        }
    ]
    got = roundtrip(api, 8, req)
    assert got["topics"] == [
        {
            "name": "orders",
            "partitions": [{"partition_index": 0, "error_code": CODE}, {"partition_index": 2, "error_code": CODE}],
        }
    ]


def test_per_group_error_describegroups_and_findcoordinator_v4() -> None:
    api = API_BY_NAME["DescribeGroups"]
    got = roundtrip(api, 5, {"groups": ["a", "b"], "include_authorized_operations": False})
    assert [(g["group_id"], g["error_code"]) for g in got["groups"]] == [("a", CODE), ("b", CODE)]
    api = API_BY_NAME["FindCoordinator"]
    got = roundtrip(api, 4, {"key_type": 0, "coordinator_keys": ["billing"]})
    (c,) = got["coordinators"]
    assert (c["key"], c["error_code"], c["node_id"]) == ("billing", CODE, -1)


def test_fetch_before_v13_has_the_error_at_the_top_and_per_partition() -> None:
    # FetchRequest.getErrorResponse: "the same error code in all partitions, and the top-level error code".
    api = API_BY_NAME["Fetch"]
    got = roundtrip(api, 12, sample(api.request.fields, 12))
    assert got["error_code"] == CODE
    (t,) = got["responses"]
    (p,) = t["partitions"]
    # FetchResponse.partitionResponse: MemoryRecords.EMPTY, not null (librdkafka cannot parse null records)
    assert p["error_code"] == CODE and p["high_watermark"] == -1 and p["records"] == b""
