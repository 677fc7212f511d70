"""The answer a broker gives when a whole request fails: "this request, at this version, failed with E".

Kafka builds it per request class (``AbstractRequest.getErrorResponse``); here it is derived from the
response schema, so every API and version described in ``messages/`` gets one, the APIs added later
included. The rule, as Kafka's request classes apply it:

- the response has a top-level ``error_code`` at this version: the error goes there, arrays stay
  empty (``JoinGroupRequest``, ``LeaveGroupRequest``, ``OffsetFetchRequest`` v2-7, ``ListGroups``...);
- otherwise the error goes into every entry that mirrors an entry of the request: each topic and
  partition of a Produce, ListOffsets, OffsetCommit, each group of a DescribeGroups or DeleteGroups,
  each key of a FindCoordinator v4+, each group of an OffsetFetch v8+;
- Fetch v7-12 does both, as ``FetchRequest.getErrorResponse`` does before v13.

Other fields get Kafka's "unknown" values: -1 for offsets, epochs, generations, ids and leaders,
empty strings (null where the field is nullable), empty bytes, and ``error_message`` the error's
text. Which request array an answer entry mirrors is found by name (same name, same identifying
fields) or in ``_MIRRORS`` where Kafka's names differ.
"""

from __future__ import annotations

from typing import Any

from .errors import default_message
from .schema import ApiSchema, Field

# APIs whose error answer carries the error both at the top and per entry (FetchRequest.getErrorResponse).
_BOTH = frozenset({"Fetch"})

# (api, response array) -> request array it mirrors, where the names differ.
_MIRRORS: dict[tuple[str, str], str] = {
    ("Produce", "responses"): "topic_data",
    ("Produce", "partition_responses"): "partition_data",
    ("Fetch", "responses"): "topics",
    ("OffsetFetch", "partitions"): "partition_indexes",
    ("DescribeProducers", "partitions"): "partition_indexes",  # DescribeProducersRequest.getErrorResponse
    ("FindCoordinator", "coordinators"): "coordinator_keys",
    ("DeleteGroups", "results"): "groups_names",
    ("DeleteTopics", "responses"): "topic_names",  # v0-5; v6 mirrors "topics" (below)
    ("CreatePartitions", "results"): "topics",
    ("OffsetFetch", "groups"): "groups",
    ("AddPartitionsToTxn", "results_by_transaction"): "transactions",
    ("AddPartitionsToTxn", "topic_results"): "topics",
    ("AddPartitionsToTxn", "results_by_topic_v3_and_below"): "v3_and_below_topics",
    ("AddPartitionsToTxn", "results_by_partition"): "partitions",
    ("AlterConfigs", "responses"): "resources",
    ("IncrementalAlterConfigs", "responses"): "resources",
    ("DescribeConfigs", "results"): "resources",
    ("CreateAcls", "results"): "creations",
    ("DeleteAcls", "filter_results"): "filters",
    ("DescribeTransactions", "transaction_states"): "transactional_ids",
    ("ConsumerGroupDescribe", "groups"): "group_ids",
    ("ShareGroupDescribe", "groups"): "group_ids",
}
# Fallbacks tried after the table when the first request array is absent at this version.
_MIRROR_FALLBACKS: dict[tuple[str, str], str] = {("DeleteTopics", "responses"): "topics"}
# (response field) -> request field it is copied from, where the names differ.
_IDENTITY_RENAMES: dict[str, tuple[str, ...]] = {
    "partition_index": ("partition_index", "partition", "index"),
    "index": ("index", "partition_index"),
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "group_id": ("group_id",),
    "key": ("key",),
    "topic_id": ("topic_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "transactional_id": ("transactional_id",),
}
# When the mirrored request entry is a bare value (a string or int array), the field it becomes.
_SCALAR_KEYS = ("group_id", "key", "name", "partition_index", "transactional_id")

_UNKNOWN_MINUS_ONE = frozenset(
    {
        "base_offset",
        "log_append_time_ms",
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "preferred_read_replica",
        "offset",
        "committed_offset",
        "committed_leader_epoch",
        "timestamp",
        "leader_epoch",
        "leader_id",
        "generation_id",
        "producer_id",
        "producer_epoch",
        "node_id",
        "port",
        "num_partitions",
        "replication_factor",
        "controller_id",
        "epoch",
        "end_offset",
    }
)
_AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class NoErrorField(ValueError):
    """The API's answer has no place for an error at this version (nothing would tell the client)."""


def error_response(api: ApiSchema, version: int, request: dict[str, Any], error_code: int) -> dict[str, Any]:
    """The whole-request error answer to ``request`` (decoded, at ``version``) with ``error_code``."""
    fields = [f for f in api.response.fields if f.exists_in(version)]
    top = any(f.name == "error_code" for f in fields)
    mirror = not top or api.name in _BOTH
    message = default_message(error_code) or f"error {error_code} (injected)"
    return _fill(api.name, fields, version, request, error_code, message, mirror=mirror, top=True)


def carries_error(obj: Any, code: int) -> bool:
    """Whether a (decoded) answer carries ``code`` anywhere: top-level or in an entry."""
    return _has_code(obj, code)


def _has_code(obj: Any, code: int) -> bool:
    if isinstance(obj, dict):
        return any(_is_error_field(k) and v == code for k, v in obj.items()) or any(
            _has_code(v, code) for v in obj.values()
        )
    if isinstance(obj, list):
        return any(_has_code(v, code) for v in obj)
    return False


def _fill(
    api: str,
    fields: list[Field],
    version: int,
    source: Any,
    code: int,
    message: str,
    *,
    mirror: bool,
    top: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    src = source if isinstance(source, dict) else {}
    for fld in fields:
        name = fld.name
        if _is_error_field(name):
            out[name] = code
        elif name == "error_message" and fld.type == "string":
            out[name] = message
        elif fld.type.startswith("[]"):
            out[name] = _array(api, fld, version, src, code, message, mirror=mirror, top=top)
        elif fld.is_struct:
            sub = [s for s in fld.fields if s.exists_in(version)]
            out[name] = _fill(api, sub, version, None, code, message, mirror=False)
        else:
            out[name] = _identity(fld, version, source, src)
    return out


def _array(
    api: str, fld: Field, version: int, src: dict[str, Any], code: int, message: str, *, mirror: bool, top: bool
) -> list[Any]:
    if not mirror or not fld.fields:
        return []
    # Response-only arrays at the top of an answer (a JoinGroup's members, a Metadata's brokers) stay empty.
    entries = None
    for req_name in (_MIRRORS.get((api, fld.name)), _MIRROR_FALLBACKS.get((api, fld.name)), fld.name):
        if req_name is not None and isinstance(src.get(req_name), list):
            entries = src[req_name]
            break
    if entries is None:
        return []
    sub = [s for s in fld.fields if s.exists_in(version)]
    if not any(_carries_error(s, version) for s in sub):
        return []
    return [_fill(api, sub, version, entry, code, message, mirror=True) for entry in entries]


def _is_error_field(name: str) -> bool:
    # "error_code", and the per-entry names some APIs use (AddPartitionsToTxn's partition_error_code)
    return name == "error_code" or name.endswith("_error_code")


def _carries_error(fld: Field, version: int) -> bool:
    if _is_error_field(fld.name):
        return True
    return bool(fld.fields) and any(_carries_error(s, version) for s in fld.fields if s.exists_in(version))


def _identity(fld: Field, version: int, source: Any, src: dict[str, Any]) -> Any:
    """A field of an answer entry: copied from the request entry it mirrors, else Kafka's unknown value."""
    if source is not None and not isinstance(source, dict) and fld.name in _SCALAR_KEYS:
        return source  # the entry mirrors a bare string or int (a group name, a partition index)
    for candidate in _IDENTITY_RENAMES.get(fld.name, ()):
        if candidate in src and src[candidate] is not None:
            return src[candidate]
    if fld.name == "authorized_operations" or fld.name.endswith("_authorized_operations"):
        return _AUTHORIZED_OPERATIONS_OMITTED
    if fld.type in ("int32", "int64", "int16", "int8") and fld.name in _UNKNOWN_MINUS_ONE:
        return -1
    if fld.type == "string" and fld.nullable_in(version):
        return None
    return fld.default_value(version)
