"""Authorization: Kafka's ACL model (``acl_model.py``) over groups, topics, the cluster and transactional ids.

ACLs come from two places. The configuration file's table, principal -> allowed name prefixes::

    [acl."User:alice"]
    groups = ["app-"]          # groups whose id starts with "app-"
    topics = ["orders", "*"]   # "*" allows every name
    transactional_ids = ["tx-"]  # transactional ids it may look up (Kafka's Describe)
    cluster = ["ALTER", "DESCRIBE"]   # operations on the cluster (the ACL APIs need these); ["ALL"]

    [acl."User:*"]             # applies to every principal, in addition to its own entry
    topics = ["public-"]

maps onto Kafka bindings: each prefix is ``ALLOW ALL`` on a PREFIXED pattern of that type (``"*"``
is the LITERAL wildcard), principal as written (``User:*`` is Kafka's wildcard principal), host
``*``. And CreateAcls/DeleteAcls add and remove bindings of Kafka's full model (LITERAL and PREFIXED
patterns, any operation, ALLOW and DENY: DENY wins), persisted in ``acls.json`` in the data
directory. Without an ``acl`` table and without that file nothing is checked (and the ACL APIs answer
SECURITY_DISABLED). With them, a principal no ACL allows may do nothing.

Where the checks happen: ``install`` wraps the handlers registered with the dispatcher, one wrapper
per API, all in this file; which API gets which wrapper is a column of the broker's API table
(``groupd.broker.apis``), beside the APIs whose handlers ask the ``Authorizer`` themselves. A wrapper splits the request into what the principal may touch and what it
may not, hands the allowed part to the real handler (the coordinator and the data plane never see a
principal), and merges the refused items into the response with Kafka's error codes when the
response is encoded: GROUP_AUTHORIZATION_FAILED (30) per group, TOPIC_AUTHORIZATION_FAILED (29) per
topic/partition, TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) per transactional id. Merging at encode time works the same whether the handler answers at once, from a
task, or later from a timer (a parked JoinGroup or long-poll Fetch). Listings (ListGroups, Metadata
for all topics, OffsetFetch for all topics) are filtered instead, as Kafka filters them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from groupd.protocol.dispatch import Dispatcher, Handler
from groupd.protocol.errors import ErrorCode, default_message
from groupd.protocol.server import Request
from groupd.storage import records as rec

from .acl_model import CLUSTER_NAME, AclOperation, ResourceType
from .auth import principal_of
from .authorizer import Authorizer, Subject, toml_bindings

__all__ = ["Authorizer", "Subject", "install", "subject_of", "toml_bindings"]

log = structlog.get_logger("groupd.security.acl")

_GROUP = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_TXN = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
_ZERO_UUID = uuid.UUID(int=0)
_NO_AUTH_OPS = -(2**31)
Body = dict[str, Any]


def subject_of(req: Request) -> Subject:
    return Subject(principal_of(req), req.conn.peer_host, req.api_key)


# --- helpers -------------------------------------------------------------------------------------
def _after(req: Request, fix: Callable[[Body], Body]) -> None:
    """Run ``fix`` over the response body just before it is encoded."""
    encode = req.encode_response
    req.encode_response = lambda r, body: encode(r, fix(body))


def _append(req: Request, field: str, refused: list[Body]) -> None:
    """Add the refused entries (already in the response's shape) to the answer's ``field``: the kept
    ones went to the handler, the refused ones never reach it, and the client gets one answer for all."""
    if refused:
        _after(req, lambda b: {**b, field: [*b.get(field, []), *refused]})


def _kept_and_refused(
    handler: Handler,
    req: Request,
    request_field: str,
    kept: list[Any],
    response_field: str,
    refused: list[Body],
    **alone: Any,
) -> Any:
    """The kept entries go to the handler and the refused ones' answers join its answer; with none kept
    the refused ones are answered alone (``alone``: that answer's other fields)."""
    if not kept:
        return {"throttle_time_ms": 0, **alone, response_field: refused}
    _with(req, **{request_field: kept})
    _append(req, response_field, refused)
    return handler(req)


def _with(req: Request, **changes: Any) -> None:
    req.body = {**req.body, **changes}


def _split(items: list[Any], ok: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    kept, refused = [], []
    for it in items:
        (kept if ok(it) else refused).append(it)
    return kept, refused


def _denied(req: Request, what: str, **fields: Any) -> None:
    log.info("authorization_denied", principal=principal_of(req), api_key=req.api_key, resource=what, **fields)


Wrapper = Callable[[Handler, Authorizer, Request], Any]


# --- group APIs ----------------------------------------------------------------------------------
def _single_group(error_body: Callable[[Request], Body]) -> Wrapper:
    def wrap(handler: Handler, authz: Authorizer, req: Request) -> Any:
        group_id = req.body.get("group_id") or ""
        if authz.group(subject_of(req), group_id):
            return handler(req)
        _denied(req, "group", group=group_id)
        return {"throttle_time_ms": 0, "error_code": _GROUP, **error_body(req)}

    return wrap


join_group = _single_group(
    lambda req: {
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if req.api_version >= 7 else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": req.body.get("member_id") or "",
        "members": [],
    }
)
_sync_checked = _single_group(lambda req: {"protocol_type": None, "protocol_name": None, "assignment": b""})


def sync_group(handler: Handler, authz: Authorizer, req: Request) -> Any:
    body = req.body
    if req.api_version >= 5 and (body.get("protocol_type") is None or body.get("protocol_name") is None):
        # KafkaApis.handleSyncGroupRequest answers INCONSISTENT_GROUP_PROTOCOL before the ACL
        # check; the coordinator answers it first thing, without looking at the group.
        return handler(req)
    return _sync_checked(handler, authz, req)


heartbeat = _single_group(lambda req: {})
leave_group = _single_group(lambda req: {"members": []})


def find_coordinator(handler: Handler, authz: Authorizer, req: Request) -> Any:
    # KafkaApis.getCoordinator: Describe on the group (key type 0) or on the transactional id
    # (key type 1); refused keys get GROUP_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED and no node.
    v, body = req.api_version, req.body
    key_type = body.get("key_type", 0) if v >= 1 else 0
    if key_type == 0:
        allowed, code, what = authz.group, _GROUP, "group"
    elif key_type == 1:
        allowed, code, what = authz.transactional_id, _TXN, "transactional_id"
    else:
        return handler(req)  # share groups: the handler refuses them itself
    p = subject_of(req)
    if v < 4:
        key = body.get("key") or ""
        if allowed(p, key):
            return handler(req)
        _denied(req, what, key=key)
        # An error below v4 goes through FindCoordinatorRequest.getErrorResponse: Errors.message().
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": default_message(code),
            "node_id": -1,
            "host": "",
            "port": -1,
        }
    keys = list(body.get("coordinator_keys") or [])
    kept, refused = _split(keys, lambda k: allowed(p, k))
    if not refused:
        return handler(req)
    _denied(req, what, keys=refused[:20])
    denied = [
        {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": ""} for k in refused
    ]
    return _kept_and_refused(handler, req, "coordinator_keys", kept, "coordinators", denied)


def describe_groups(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p = subject_of(req)
    groups = list(req.body.get("groups") or [])
    kept, refused = _split(groups, lambda g: authz.group(p, g))
    if not refused:
        return handler(req)
    _denied(req, "group", groups=refused[:20])
    denied = {
        g: {
            "error_code": _GROUP,
            "error_message": None,
            "group_id": g,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": _NO_AUTH_OPS,
        }
        for g in refused
    }
    if not kept:
        return {"throttle_time_ms": 0, "groups": [denied[g] for g in groups]}

    def fix(b: Body) -> Body:
        answered = {g["group_id"]: g for g in b.get("groups", [])}
        return {**b, "groups": [answered.get(g) or denied[g] for g in groups if g in answered or g in denied]}

    _with(req, groups=kept)
    _after(req, fix)
    return handler(req)


def delete_groups(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p = subject_of(req)
    names = list(dict.fromkeys(req.body.get("groups_names") or []))  # KafkaApis: groupsNames.distinct
    kept, refused = _split(names, lambda g: authz.group(p, g))
    if not refused:
        return handler(req)
    _denied(req, "group", groups=refused[:20])
    denied = [{"group_id": g, "error_code": _GROUP} for g in refused]
    return _kept_and_refused(handler, req, "groups_names", kept, "results", denied)


def list_groups(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p = subject_of(req)
    _after(req, lambda b: {**b, "groups": [g for g in b.get("groups", []) if authz.group(p, g["group_id"])]})
    return handler(req)


# --- KIP-848 consumer groups (KafkaApis.handleConsumerGroupHeartbeat / handleConsumerGroupDescribe) --
def _consumer_heartbeat_error(code: int) -> Body:
    # ConsumerGroupHeartbeatRequest.getErrorResponse: the error code and nothing else
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def consumer_group_heartbeat(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """READ on the group (else GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic
    name (one refused: TOPIC_AUTHORIZATION_FAILED for the whole heartbeat, before the coordinator
    sees it). A regex subscription is not checked here, as in Kafka."""
    p, body = subject_of(req), req.body
    group_id = body.get("group_id") or ""
    if not authz.authorize(p, AclOperation.READ, ResourceType.GROUP, group_id):
        _denied(req, "group", group=group_id)
        return _consumer_heartbeat_error(_GROUP)
    names = body.get("subscribed_topic_names")
    if names:
        refused = sorted({t for t in names if not authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TOPIC, t)})
        if refused:
            _denied(req, "topic", group=group_id, topics=refused[:20])
            return _consumer_heartbeat_error(_TOPIC)
    return handler(req)


_UNDESCRIBABLE_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _described_group(group_id: str, code: int, message: str | None = None) -> Body:
    return {
        "error_code": code,
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": 0,
        "assignment_epoch": 0,
        "assignor_name": "",
        "members": [],
        "authorized_operations": _NO_AUTH_OPS,
    }


def consumer_group_describe(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """DESCRIBE on each group (refused ones GROUP_AUTHORIZATION_FAILED, answered first as Kafka
    does); with include_authorized_operations, each described group's operations for this
    principal; and a group whose members' assignment or target assignment names a topic the
    principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without its members."""
    p = subject_of(req)
    kept, refused = _split(
        list(req.body.get("group_ids") or []),
        lambda g: authz.authorize(p, AclOperation.DESCRIBE, ResourceType.GROUP, g),
    )
    if refused:
        _denied(req, "group", groups=refused[:20])
    denied = [_described_group(g, _GROUP) for g in refused]
    if not kept:
        return {"throttle_time_ms": 0, "groups": denied}
    include_ops = bool(req.body.get("include_authorized_operations"))

    def visible(group: Body) -> Body:
        if group.get("error_code"):
            return group
        for m in group.get("members") or ():
            for assignment in (m.get("assignment"), m.get("target_assignment")):
                for tp in (assignment or {}).get("topic_partitions") or ():
                    if not authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TOPIC, tp["topic_name"]):
                        return _described_group(group["group_id"], _TOPIC, _UNDESCRIBABLE_TOPICS)
        if include_ops:
            ops = authz.authorized_operations(p, ResourceType.GROUP, group["group_id"])
            group = {**group, "authorized_operations": ops}
        return group

    _with(req, group_ids=kept)
    _after(req, lambda b: {**b, "groups": [*denied, *(visible(g) for g in b.get("groups") or [])]})
    return handler(req)


# --- offsets -------------------------------------------------------------------------------------
def offset_commit(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p, body = subject_of(req), req.body
    topics = list(body.get("topics") or [])

    def errors(items: list[Body], code: int) -> list[Body]:
        return [
            {
                "name": t["name"],
                "partitions": [{"partition_index": x["partition_index"], "error_code": code} for x in t["partitions"]],
            }
            for t in items
        ]

    if not authz.group(p, body.get("group_id") or ""):
        _denied(req, "group", group=body.get("group_id"))
        return {"throttle_time_ms": 0, "topics": errors(topics, _GROUP)}
    kept, refused = _split(topics, lambda t: authz.topic(p, t["name"]))
    if not refused:
        return handler(req)
    _denied(req, "topic", topics=[t["name"] for t in refused][:20])
    return _kept_and_refused(handler, req, "topics", kept, "topics", errors(refused, _TOPIC))


def _fetch_errors(items: list[Body], code: int) -> list[Body]:
    return [
        {
            "name": t["name"],
            "partitions": [
                {
                    "partition_index": i,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": code,
                }
                for i in t.get("partition_indexes") or []
            ],
        }
        for t in items
    ]


def offset_fetch(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p, body, v = subject_of(req), req.body, req.api_version
    if v >= 8:
        return _offset_fetch_groups(handler, authz, req, p)
    topics = body.get("topics")
    if not authz.group(p, body.get("group_id") or ""):
        _denied(req, "group", group=body.get("group_id"))
        if v >= 2:
            return {"throttle_time_ms": 0, "topics": [], "error_code": _GROUP}
        return {"throttle_time_ms": 0, "topics": _fetch_errors(list(topics or []), _GROUP)}
    if topics is None:  # "all committed offsets of the group": only the topics the principal may see
        _after(req, lambda b: {**b, "topics": [t for t in b.get("topics", []) if authz.topic(p, t["name"])]})
        return handler(req)
    kept, refused = _split(list(topics), lambda t: authz.topic(p, t["name"]))
    if not refused:
        return handler(req)
    _denied(req, "topic", topics=[t["name"] for t in refused][:20])
    return _kept_and_refused(handler, req, "topics", kept, "topics", _fetch_errors(refused, _TOPIC), error_code=0)


def _offset_fetch_groups(handler: Handler, authz: Authorizer, req: Request, p: Subject) -> Any:
    groups = list(req.body.get("groups") or [])
    order = [g["group_id"] for g in groups]
    answers: dict[str, Body] = {}  # refused groups, and refused topics of allowed groups
    extra: dict[str, list[Body]] = {}
    kept: list[Body] = []
    filter_all: set[str] = set()
    for g in groups:
        gid = g["group_id"]
        if not authz.group(p, gid):
            _denied(req, "group", group=gid)
            answers[gid] = {"group_id": gid, "topics": [], "error_code": _GROUP}
            continue
        topics = g.get("topics")
        if topics is None:
            filter_all.add(gid)
            kept.append(g)
            continue
        ok, refused = _split(list(topics), lambda t: authz.topic(p, t["name"]))
        if refused:
            _denied(req, "topic", group=gid, topics=[t["name"] for t in refused][:20])
            extra[gid] = _fetch_errors(refused, _TOPIC)
        kept.append({**g, "topics": ok} if refused else g)
    if not answers and not extra and not filter_all:
        return handler(req)
    if not kept:
        return {"throttle_time_ms": 0, "groups": [answers[g] for g in order]}

    def fix(b: Body) -> Body:
        out = []
        got = {g["group_id"]: g for g in b.get("groups", [])}
        for gid in order:
            g = got.get(gid) or answers.get(gid)
            if g is None:
                continue
            if gid in filter_all:
                g = {**g, "topics": [t for t in g.get("topics", []) if authz.topic(p, t["name"])]}
            if gid in extra:
                g = {**g, "topics": [*g.get("topics", []), *extra[gid]]}
            out.append(g)
        return {**b, "groups": out}

    _with(req, groups=kept)
    _after(req, fix)
    return handler(req)


def offset_delete(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p, body = subject_of(req), req.body
    if not authz.group(p, body.get("group_id") or ""):
        _denied(req, "group", group=body.get("group_id"))
        return {"error_code": _GROUP, "throttle_time_ms": 0, "topics": []}
    kept, refused = _split(list(body.get("topics") or []), lambda t: authz.topic(p, t["name"]))
    if not refused:
        return handler(req)
    _denied(req, "topic", topics=[t["name"] for t in refused][:20])
    denied = [
        {
            "name": t["name"],
            "partitions": [{"partition_index": x["partition_index"], "error_code": _TOPIC} for x in t["partitions"]],
        }
        for t in refused
    ]
    return _kept_and_refused(handler, req, "topics", kept, "topics", denied, error_code=0)


# --- data plane ----------------------------------------------------------------------------------
def _topic_list_api(
    field: str,
    name_key: str,
    response_field: str,
    refused_entry: Callable[[Body], Body],
    empty_response: Callable[[list[Body]], Body],
) -> Wrapper:
    """An API whose request is a list of topics, each answered per partition (Produce, Fetch, ListOffsets)."""

    def wrap(handler: Handler, authz: Authorizer, req: Request) -> Any:
        p = subject_of(req)
        kept, refused = _split(list(req.body.get(field) or []), lambda t: authz.topic(p, t[name_key] or ""))
        if not refused:
            return handler(req)
        _denied(req, "topic", topics=[t[name_key] for t in refused][:20])
        if req.api_key == 0 and req.body.get("acks") == 0:
            # acks=0 has no response to carry an error: Kafka closes the connection instead.
            req.conn.close("produce to a topic the principal may not write (acks=0)", principal=p)
            return None
        denied = [refused_entry(t) for t in refused]
        if not kept:
            return empty_response(denied)
        _with(req, **{field: kept})
        _append(req, response_field, denied)
        return handler(req)

    return wrap


def _produce_refused(t: Body, code: int = _TOPIC) -> Body:
    return {
        "name": t["name"],
        "partition_responses": [
            {
                "index": x["index"],
                "error_code": code,
                "base_offset": -1,
                "log_append_time_ms": -1,
                "log_start_offset": -1,
                "record_errors": [],
                "error_message": None,
            }
            for x in t["partition_data"] or []
        ],
    }


_produce_topics = _topic_list_api(
    "topic_data", "name", "responses", _produce_refused, lambda denied: {"responses": denied, "throttle_time_ms": 0}
)


def _has_transactional_records(body: Body) -> bool:
    return any(
        rec.is_transactional_batch(x.get("records"))
        for t in body.get("topic_data") or []
        for x in t["partition_data"] or []
    )


def produce(handler: Handler, authz: Authorizer, req: Request) -> Any:
    # KafkaApis.handleProduceRequest: transactional records need WRITE on the request's
    # transactional id, checked before the topics; the whole request is refused otherwise.
    txn_id = req.body.get("transactional_id")
    p = subject_of(req)
    if (
        txn_id is not None
        and _has_transactional_records(req.body)
        and not authz.authorize(p, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
    ):
        _denied(req, "transactional_id", transactional_id=txn_id)
        if req.body.get("acks") == 0:
            req.conn.close("transactional produce the principal may not write (acks=0)", principal=p)
            return None
        return {
            "responses": [_produce_refused(t, _TXN) for t in req.body.get("topic_data") or []],
            "throttle_time_ms": 0,
        }
    return _produce_topics(handler, authz, req)


fetch = _topic_list_api(
    "topics",
    "topic",
    "responses",
    lambda t: {
        "topic": t["topic"],
        "partitions": [
            {
                "partition_index": x["partition"],
                "error_code": _TOPIC,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                # FetchResponse.partitionResponse: MemoryRecords.EMPTY, never null. librdkafka
                # cannot parse null records: it never saw the error and fetched again at once.
                "records": b"",
            }
            for x in t["partitions"]
        ],
    },
    lambda denied: {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": denied},
)
list_offsets = _topic_list_api(
    "topics",
    "name",
    "topics",
    lambda t: {
        "name": t["name"],
        "partitions": [
            {
                "partition_index": x["partition_index"],
                "error_code": _TOPIC,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            for x in t["partitions"]
        ],
    },
    lambda denied: {"throttle_time_ms": 0, "topics": denied},
)


# --- topic administration and metadata -----------------------------------------------------------
def metadata(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p, v = subject_of(req), req.api_version
    wanted = req.body.get("topics")
    all_topics = wanted is None or (v == 0 and not wanted)
    denied: list[Body] = []
    requested: set[str] | None = None
    if not all_topics:
        # Refused names are taken out before the handler runs, so that they are never auto-created.
        kept, refused = _split(list(wanted), lambda t: t.get("name") is None or authz.topic(p, t["name"]))
        if refused:
            _denied(req, "topic", topics=[t["name"] for t in refused][:20])
            denied = [
                {
                    "error_code": _TOPIC,
                    "name": t["name"],
                    "topic_id": _ZERO_UUID,
                    "is_internal": False,
                    "partitions": [],
                }
                for t in refused
            ]
            requested = {t["name"] for t in kept if t.get("name") is not None}
            has_ids = any(t.get("name") is None for t in kept)
            if not kept and v == 0:
                requested = set()  # v0's empty list would mean "all topics"; answer none of them
            _with(req, topics=kept)
            if has_ids:
                requested = None

    include_ops = bool(req.body.get("include_topic_authorized_operations"))
    include_cluster_ops = bool(req.body.get("include_cluster_authorized_operations"))

    def fix(b: Body) -> Body:
        out = []
        for t in b.get("topics", []):
            name = t.get("name")
            if requested is not None and name not in requested:
                continue
            if name is not None and t.get("error_code") == 0 and not authz.topic(p, name):
                if all_topics:
                    continue  # listings leave out what the principal may not see
                t = {**t, "error_code": _TOPIC, "name": None, "partitions": []}  # looked up by topic id
            elif include_ops and name is not None and t.get("error_code") != _TOPIC:
                # KafkaApis.handleTopicMetadataRequest: the operations this principal may do, for every
                # topic it may describe (LEADER_NOT_AVAILABLE and UNKNOWN_TOPIC_OR_PARTITION answers too)
                t = {**t, "topic_authorized_operations": authz.authorized_operations(p, ResourceType.TOPIC, name)}
            out.append(t)
        fixed = {**b, "topics": [*out, *denied]}
        if include_cluster_ops:
            fixed["cluster_authorized_operations"] = authz.authorized_operations(p, ResourceType.CLUSTER, CLUSTER_NAME)
        return fixed

    _after(req, fix)
    return handler(req)


def create_topics(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p = subject_of(req)
    kept, refused = _split(list(req.body.get("topics") or []), lambda t: authz.topic(p, t["name"]))
    if not refused:
        return handler(req)
    _denied(req, "topic", topics=[t["name"] for t in refused][:20])
    denied = [
        {
            "name": t["name"],
            "topic_id": _ZERO_UUID,
            "error_code": _TOPIC,
            "error_message": "Authorization failed.",
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": [],
        }
        for t in refused
    ]
    return _kept_and_refused(handler, req, "topics", kept, "topics", denied)


def create_partitions(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p = subject_of(req)
    kept, refused = _split(list(req.body.get("topics") or []), lambda t: authz.topic(p, t["name"]))
    if not refused:
        return handler(req)
    _denied(req, "topic", topics=[t["name"] for t in refused][:20])
    denied = [{"name": t["name"], "error_code": _TOPIC, "error_message": "Authorization failed."} for t in refused]
    return _kept_and_refused(handler, req, "topics", kept, "results", denied)


def delete_topics(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p, v = subject_of(req), req.api_version
    if v >= 6:
        items = list(req.body.get("topics") or [])

        def name_of(t: Body) -> str | None:
            return t.get("name") or authz.topic_name_for_id(t.get("topic_id") or _ZERO_UUID)

        field = "topics"
    else:
        items = list(req.body.get("topic_names") or [])
        name_of = lambda t: t  # noqa: E731
        field = "topic_names"
    # An unknown topic id has no name to check: the handler answers UNKNOWN_TOPIC_ID for it.
    kept, refused = _split(items, lambda t: (n := name_of(t)) is None or authz.topic(p, n))
    if not refused:
        return handler(req)
    _denied(req, "topic", topics=[name_of(t) for t in refused][:20])
    denied = [
        {
            "name": name_of(t),
            "topic_id": (t.get("topic_id") if isinstance(t, dict) else None) or _ZERO_UUID,
            "error_code": _TOPIC,
            "error_message": None,
        }
        for t in refused
    ]
    return _kept_and_refused(handler, req, field, kept, "responses", denied)


describe_producers = _topic_list_api(
    "topics",
    "name",
    "topics",
    lambda t: {
        "name": t["name"],
        "partitions": [
            {"partition_index": i, "error_code": _TOPIC, "error_message": None, "active_producers": []}
            for i in t["partition_indexes"] or []
        ],
    },
    lambda denied: {"throttle_time_ms": 0, "topics": denied},
)


# --- transactions (KafkaApis.handle*Txn*, handleInitProducerIdRequest, handle*Transactions*) -------
def _txn_write(authz: Authorizer, p: Subject, transactional_id: str) -> bool:
    return authz.authorize(p, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def init_producer_id(handler: Handler, authz: Authorizer, req: Request) -> Any:
    # WRITE on a transactional id; a null id (an idempotent producer) is not checked here.
    txn_id = req.body.get("transactional_id")
    if txn_id is None or _txn_write(authz, subject_of(req), txn_id):
        return handler(req)
    _denied(req, "transactional_id", transactional_id=txn_id)
    return {"throttle_time_ms": 0, "error_code": _TXN, "producer_id": -1, "producer_epoch": -1}


def _partition_results(topics: list[Body], code: Callable[[str], int]) -> list[Body]:
    return [
        {
            "name": t["name"],
            "results_by_partition": [
                {"partition_index": i, "partition_error_code": code(t["name"])} for i in t.get("partitions") or []
            ],
        }
        for t in topics
    ]


def add_partitions_to_txn(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """v0-3 (producers): WRITE on the transactional id, then WRITE on each topic (refused topics
    TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED). v4+ (brokers verifying a
    produce): CLUSTER_ACTION on the cluster, then WRITE on each transactional id."""
    p, body = subject_of(req), req.body
    if req.api_version <= 3:
        txn_id = body.get("v3_and_below_transactional_id") or ""
        topics = body.get("v3_and_below_topics") or []
        if not _txn_write(authz, p, txn_id):
            _denied(req, "transactional_id", transactional_id=txn_id)
            results = _partition_results(topics, lambda _t: _TXN)
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
        refused = {
            t["name"] for t in topics if not authz.authorize(p, AclOperation.WRITE, ResourceType.TOPIC, t["name"])
        }
        if not refused:
            return handler(req)
        _denied(req, "topic", topics=sorted(refused)[:20])
        results = _partition_results(topics, lambda t: _TOPIC if t in refused else ErrorCode.OPERATION_NOT_ATTEMPTED)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    if not authz.authorize(p, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        _denied(req, "cluster", operation="CLUSTER_ACTION")
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "results_by_transaction": [],
        }
    transactions = body.get("transactions") or []
    kept, refused_txns = _split(transactions, lambda t: _txn_write(authz, p, t.get("transactional_id") or ""))
    if not refused_txns:
        return handler(req)
    _denied(req, "transactional_id", transactional_ids=[t.get("transactional_id") for t in refused_txns][:20])
    denied = [
        {
            "transactional_id": t.get("transactional_id"),
            "topic_results": _partition_results(t.get("topics") or [], lambda _t: _TXN),
        }
        for t in refused_txns
    ]
    return _kept_and_refused(handler, req, "transactions", kept, "results_by_transaction", denied, error_code=0)


def add_offsets_to_txn(handler: Handler, authz: Authorizer, req: Request) -> Any:
    p, body = subject_of(req), req.body
    txn_id, group_id = body.get("transactional_id") or "", body.get("group_id") or ""
    if not _txn_write(authz, p, txn_id):
        _denied(req, "transactional_id", transactional_id=txn_id)
        return {"throttle_time_ms": 0, "error_code": _TXN}
    if not authz.authorize(p, AclOperation.READ, ResourceType.GROUP, group_id):
        _denied(req, "group", group=group_id)
        return {"throttle_time_ms": 0, "error_code": _GROUP}
    return handler(req)


def end_txn(handler: Handler, authz: Authorizer, req: Request) -> Any:
    txn_id = req.body.get("transactional_id") or ""
    if _txn_write(authz, subject_of(req), txn_id):
        return handler(req)
    _denied(req, "transactional_id", transactional_id=txn_id)
    return {"throttle_time_ms": 0, "error_code": _TXN, "producer_id": -1, "producer_epoch": -1}


def txn_offset_commit(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """WRITE on the transactional id, READ on the group (each refusing every partition), then
    READ on each topic (its partitions TOPIC_AUTHORIZATION_FAILED)."""
    p, body = subject_of(req), req.body
    topics = body.get("topics") or []

    def answer(code: Callable[[str], int], names: list[Body]) -> list[Body]:
        return [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": x["partition_index"], "error_code": code(t["name"])}
                    for x in t.get("partitions") or []
                ],
            }
            for t in names
        ]

    for allowed, code, what in (
        (_txn_write(authz, p, body.get("transactional_id") or ""), _TXN, "transactional_id"),
        (authz.authorize(p, AclOperation.READ, ResourceType.GROUP, body.get("group_id") or ""), _GROUP, "group"),
    ):
        if not allowed:
            _denied(req, what)
            return {"throttle_time_ms": 0, "topics": answer(lambda _t, code=code: code, topics)}
    kept, refused = _split(topics, lambda t: authz.authorize(p, AclOperation.READ, ResourceType.TOPIC, t["name"]))
    if not refused:
        return handler(req)
    _denied(req, "topic", topics=[t["name"] for t in refused][:20])
    denied = answer(lambda _t: _TOPIC, refused)
    return _kept_and_refused(handler, req, "topics", kept, "topics", denied)


def describe_transactions(handler: Handler, authz: Authorizer, req: Request) -> Any:
    # DESCRIBE on each transactional id; a described transaction's topics the principal may not
    # DESCRIBE are left out (KafkaApis.handleDescribeTransactionsRequest).
    p = subject_of(req)
    ids = list(req.body.get("transactional_ids") or [])
    kept, refused = _split(ids, lambda t: authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t))
    if refused:
        _denied(req, "transactional_id", transactional_ids=refused[:20])
    denied = [
        {
            "error_code": _TXN,
            "transactional_id": t,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        for t in refused
    ]

    def fix(b: Body) -> Body:
        states = [
            {
                **st,
                "topics": [
                    t
                    for t in st.get("topics") or []
                    if authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic"])
                ],
            }
            for st in b.get("transaction_states") or []
        ]
        return {**b, "transaction_states": [*states, *denied]}

    _with(req, transactional_ids=kept)
    _after(req, fix)
    return handler(req)


def list_transactions(handler: Handler, authz: Authorizer, req: Request) -> Any:
    # Only the transactional ids the principal may DESCRIBE are listed (listTransactionStates'
    # filter with KafkaApis' authorizer check).
    p = subject_of(req)

    def fix(b: Body) -> Body:
        listed = [
            t
            for t in b.get("transaction_states") or []
            if authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"])
        ]
        return {**b, "transaction_states": listed}

    _after(req, fix)
    return handler(req)


# --- installation --------------------------------------------------------------------------------
def install(dispatcher: Dispatcher, authz: Authorizer, wrappers: Mapping[str, Wrapper]) -> list[str]:
    """Wrap the registered handler of each API named in ``wrappers`` (the broker's API table,
    ``groupd.broker.apis``, says which wrapper each API gets); returns the names wrapped."""
    wrapped = []
    for route in dispatcher.routes.values():
        wrapper = wrappers.get(route.api.name)
        if wrapper is None:
            continue
        inner = route.handler
        route.handler = lambda req, inner=inner, wrapper=wrapper: wrapper(inner, authz, req)
        wrapped.append(route.api.name)
    return wrapped


# --- KIP-932 share groups (KafkaApis.handleShareGroup* / handle*ShareGroupOffsetsRequest) ---------
def _share_heartbeat_error(code: int) -> Body:
    # ShareGroupHeartbeatRequest.getErrorResponse: the error code and nothing else
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def share_group_heartbeat(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """READ on the group, then DESCRIBE on every subscribed topic name (one refused:
    TOPIC_AUTHORIZATION_FAILED for the whole heartbeat), as ``handleShareGroupHeartbeat``."""
    p, body = subject_of(req), req.body
    group_id = body.get("group_id") or ""
    if not authz.authorize(p, AclOperation.READ, ResourceType.GROUP, group_id):
        _denied(req, "group", group=group_id)
        return _share_heartbeat_error(_GROUP)
    member_id = body.get("member_id") or ""
    if not member_id or len(member_id) > 36:
        return handler(req)  # isMemberIdValid comes before the topics: INVALID_REQUEST from the handler
    names = body.get("subscribed_topic_names")
    if names:
        refused = sorted({t for t in names if not authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TOPIC, t)})
        if refused:
            _denied(req, "topic", group=group_id, topics=refused[:20])
            return _share_heartbeat_error(_TOPIC)
    return handler(req)


# ``handleShareGroupDescribe`` checks what ``handleConsumerGroupDescribe`` does; a share member has
# no target assignment, so the consumer groups' wrapper serves both.
share_group_describe = consumer_group_describe


def describe_share_group_offsets(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """DESCRIBE on each group (else the group's GROUP_AUTHORIZATION_FAILED); topics the principal may
    not DESCRIBE: asked for by name, each partition TOPIC_AUTHORIZATION_FAILED; all of a group's
    (null topics), left out (``handleDescribeShareGroupOffsetsRequest``)."""
    p = subject_of(req)
    groups = list(req.body.get("groups") or [])
    denied_groups: dict[int, Body] = {}
    refused_topics: dict[str, list[Body]] = {}
    passed: list[Body] = []
    for i, g in enumerate(groups):
        gid = g["group_id"]
        if not authz.authorize(p, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            _denied(req, "group", group=gid)
            denied_groups[i] = {
                "group_id": gid,
                "topics": [],
                "error_code": _GROUP,
                "error_message": default_message(_GROUP),
            }
            continue
        if g.get("topics") is not None:
            kept, refused = _split(
                list(g["topics"]),
                lambda t: authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic_name"]),
            )
            if refused:
                _denied(req, "topic", group=gid, topics=[t["topic_name"] for t in refused][:20])
                refused_topics[gid] = [
                    {
                        "topic_name": t["topic_name"],
                        "topic_id": _ZERO_UUID,
                        "partitions": [
                            {
                                "partition_index": x,
                                "start_offset": -1,
                                "leader_epoch": 0,
                                "lag": -1,
                                "error_code": _TOPIC,
                                "error_message": default_message(_TOPIC),
                            }
                            for x in t["partitions"]
                        ],
                    }
                    for t in refused
                ]
            g = {**g, "topics": kept}
        passed.append(g)
    if not passed:
        return {"throttle_time_ms": 0, "groups": list(denied_groups.values())}

    def fix(b: Body) -> Body:
        answered = iter(b.get("groups") or [])
        out = []
        for i, g in enumerate(groups):
            if i in denied_groups:
                out.append(denied_groups[i])
                continue
            entry = next(answered)
            if entry.get("error_code"):
                out.append(entry)
                continue
            topics = entry.get("topics") or []
            if g.get("topics") is None:
                topics = [
                    t for t in topics if authz.authorize(p, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic_name"])
                ]
            out.append({**entry, "topics": [*topics, *refused_topics.get(g["group_id"], [])]})
        return {**b, "groups": out}

    _with(req, groups=passed)
    _after(req, fix)
    return handler(req)


def _share_offsets_error(code: int) -> Body:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": default_message(code), "responses": []}


def alter_share_group_offsets(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each topic (each refused one's
    partitions TOPIC_AUTHORIZATION_FAILED) (``handleAlterShareGroupOffsetsRequest``)."""
    p, body = subject_of(req), req.body
    gid = body.get("group_id") or ""
    if not authz.authorize(p, AclOperation.READ, ResourceType.GROUP, gid):
        _denied(req, "group", group=gid)
        return _share_offsets_error(_GROUP)
    kept, refused = _split(
        list(body.get("topics") or []),
        lambda t: authz.authorize(p, AclOperation.READ, ResourceType.TOPIC, t["topic_name"]),
    )
    if not refused:
        return handler(req)
    _denied(req, "topic", group=gid, topics=[t["topic_name"] for t in refused][:20])
    denied = [
        {
            "topic_name": t["topic_name"],
            "topic_id": _ZERO_UUID,
            "partitions": [
                {
                    "partition_index": x["partition_index"],
                    "error_code": _TOPIC,
                    "error_message": default_message(_TOPIC),
                }
                for x in t["partitions"]
            ],
        }
        for t in refused
    ]
    _with(req, topics=kept)
    _after(req, lambda b: b if b.get("error_code") else {**b, "responses": [*denied, *(b.get("responses") or [])]})
    return handler(req)


def delete_share_group_offsets(handler: Handler, authz: Authorizer, req: Request) -> Any:
    """DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ on each topic (each refused one
    TOPIC_AUTHORIZATION_FAILED) (``handleDeleteShareGroupOffsetsRequest``)."""
    p, body = subject_of(req), req.body
    gid = body.get("group_id") or ""
    if not authz.authorize(p, AclOperation.DELETE, ResourceType.GROUP, gid):
        _denied(req, "group", group=gid)
        return _share_offsets_error(_GROUP)
    kept, refused = _split(
        list(body.get("topics") or []),
        lambda t: authz.authorize(p, AclOperation.READ, ResourceType.TOPIC, t["topic_name"]),
    )
    if not refused:
        return handler(req)
    _denied(req, "topic", group=gid, topics=[t["topic_name"] for t in refused][:20])
    denied = [
        {
            "topic_name": t["topic_name"],
            "topic_id": _ZERO_UUID,
            "error_code": _TOPIC,
            "error_message": default_message(_TOPIC),
        }
        for t in refused
    ]
    _with(req, topics=kept)
    _after(req, lambda b: b if b.get("error_code") else {**b, "responses": [*denied, *(b.get("responses") or [])]})
    return handler(req)
