"""The broker's API table (``broker/apis.py``) is the one place an API is registered: what a broker
advertises, what its dispatcher routes, who authorizes it and how a cluster routes it all come from it.

Kafka checks every API against the authorizer except ApiVersions and the SASL handshake and
authentication (``KafkaApis``; ``SaslServerAuthenticator`` handles those before there is a
principal); a new API advertised without an authorization entry fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from groupd.broker.apis import ACL_WRAPPERS, API_TABLE, APIS, InHandler, Routing, Unchecked, Wrapped
from groupd.broker.cluster import BROKER_CONFIG_APIS, GUARDED_APIS
from groupd.broker.node import Broker
from groupd.coordinator import HANDLED_APIS
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.errors import ErrorCode
from groupd.protocol.messages import API_BY_KEY, API_BY_NAME
from groupd.security import acl
from groupd.transactions.coordinator import HANDLED_APIS as TXN_HANDLED_APIS

from groupd.config import Config

# Kafka: no ACL applies to these (a client negotiates and authenticates before it has a principal).
UNCHECKED = {"ApiVersions", "SaslHandshake", "SaslAuthenticate"}
ACL = {"User:alice": {"groups": ["app-"], "topics": ["*"]}}


def _advertised(d: Dispatcher) -> dict[str, tuple[int, int]]:
    answer = d.routes[API_BY_NAME["ApiVersions"].key].handler(None)  # type: ignore[arg-type]  # its answer
    return {API_BY_KEY[v["api_key"]].name: (v["min_version"], v["max_version"]) for v in answer["api_keys"]}


def _dispatchers(b: Broker) -> list[Dispatcher]:
    if b.cluster is None:
        return [b.dispatcher]
    return [n.dispatcher for n in b.cluster.nodes.values()]


@pytest.fixture(params=["default", "acl", "cluster-acl"])
async def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    # async: Server() asks for the current event loop, which earlier async tests leave unset.
    kw: dict[str, Any] = {"default": {}, "acl": {"acl": ACL}, "cluster-acl": {"acl": ACL, "brokers": 3}}[request.param]
    return Broker(Config(data_dir=str(tmp_path), **kw))


async def test_every_advertised_api_has_an_authorization_entry(broker: Broker) -> None:
    for d in _dispatchers(broker):
        for name in _advertised(d):
            assert name in API_TABLE, f"{name} is advertised without a row in broker/apis.py"
            auth = API_TABLE[name].auth
            assert isinstance(auth, Wrapped | InHandler | Unchecked), name
            if isinstance(auth, Unchecked):
                assert name in UNCHECKED, f"{name} is advertised without authorization"


async def test_table_dispatcher_and_api_versions_agree(broker: Broker) -> None:
    expected = {
        api.name: api.versions or (API_BY_NAME[api.name].min_version, API_BY_NAME[api.name].max_version) for api in APIS
    }
    for d in _dispatchers(broker):
        assert _advertised(d) == expected
        assert {r.api.name: (r.min_version, r.max_version) for r in d.routes.values()} == expected


async def test_acls_wrap_exactly_the_wrapped_rows(tmp_path: Path) -> None:
    # On a dispatcher with every API of the table, install wraps each Wrapped row and nothing else.
    b = Broker(Config(data_dir=str(tmp_path)))
    before = {k: r.handler for k, r in b.dispatcher.routes.items()}
    authz = acl.Authorizer(ACL)
    wrapped = acl.install(b.dispatcher, authz, ACL_WRAPPERS)
    assert sorted(wrapped) == sorted(a.name for a in APIS if isinstance(a.auth, Wrapped))
    changed = {API_BY_KEY[k].name for k, r in b.dispatcher.routes.items() if r.handler is not before[k]}
    assert changed == set(wrapped)


def test_kafka_checks_the_new_group_apis() -> None:
    # The two APIs added without an authorization wrapper before the table (issue 25).
    for name in ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe"):
        assert isinstance(API_TABLE[name].auth, Wrapped), name
    assert {a.name for a in APIS if isinstance(a.auth, Unchecked)} == UNCHECKED


def test_routing_agrees_with_the_coordinator_and_the_cluster() -> None:
    by = {r: {a.name for a in APIS if a.routing is r} for r in Routing}
    # what the group and transaction coordinators handle is made per broker, and nothing else is
    assert by[Routing.COORDINATOR] == set(HANDLED_APIS) | set(TXN_HANDLED_APIS)
    # the cluster knows the request shape of every API it guards or renames configs of
    assert by[Routing.LEADER] == GUARDED_APIS
    assert by[Routing.BROKER_CONFIGS] == BROKER_CONFIG_APIS
    assert by[Routing.METADATA] == {"Metadata"} and by[Routing.DESCRIBE_CLUSTER] == {"DescribeCluster"}
    assert by[Routing.SHARE_LEADER] == {"ShareFetch", "ShareAcknowledge"}


def test_every_row_names_a_known_api_once() -> None:
    assert len(API_TABLE) == len(APIS)
    for api in APIS:
        schema = API_BY_NAME[api.name]
        if api.versions is not None:
            lo, hi = api.versions
            assert schema.supports(lo) and schema.supports(hi) and lo <= hi, api.name
        assert (api.handler is None) == (api.name == "ApiVersions"), api.name


# --- the rows authorized inside their handlers really are ------------------------------------------
@dataclass
class _Req:
    api_key: int
    api_version: int
    body: dict[str, Any]
    conn: Any = field(default_factory=lambda: SimpleNamespace(session=_Session(), peer_host="127.0.0.1", listener=None))


@dataclass
class _Session:
    principal: str = "User:nobody"  # no ACL names it: may do nothing
    authenticated: bool = True


_T = {"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}
_CASES: dict[str, tuple[int, dict[str, Any], Callable[[dict[str, Any]], int]]] = {
    "DescribeConfigs": (
        4,
        {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
        lambda r: r["results"][0]["error_code"],
    ),
    "AlterConfigs": (
        2,
        {"resources": [{"resource_type": 2, "resource_name": "t", "configs": []}], "validate_only": True},
        lambda r: r["responses"][0]["error_code"],
    ),
    "IncrementalAlterConfigs": (
        1,
        {"resources": [{"resource_type": 2, "resource_name": "t", "configs": []}], "validate_only": True},
        lambda r: r["responses"][0]["error_code"],
    ),
    "DeleteRecords": (2, {"topics": [_T], "timeout_ms": 1000}, lambda r: r["topics"][0]["partitions"][0]["error_code"]),
    "OffsetForLeaderEpoch": (
        4,
        {"replica_id": -1, "topics": [{"topic": "t", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        lambda r: r["topics"][0]["partitions"][0]["error_code"],
    ),
    "DescribeLogDirs": (4, {"topics": None}, lambda r: r["error_code"]),
    # no refusal (KafkaApis.handleDescribeCluster): the cluster operations are reported as none
    "DescribeCluster": (
        0,
        {"include_cluster_authorized_operations": True},
        lambda r: ErrorCode.CLUSTER_AUTHORIZATION_FAILED if r["cluster_authorized_operations"] == 0 else 0,
    ),
    "CreateAcls": (3, {"creations": [{}]}, lambda r: r["results"][0]["error_code"]),
    "DescribeAcls": (3, {}, lambda r: r["error_code"]),
    "DeleteAcls": (3, {"filters": [{}]}, lambda r: r["filter_results"][0]["error_code"]),
    "DescribeUserScramCredentials": (0, {"users": None}, lambda r: r["error_code"]),
    "AlterUserScramCredentials": (
        0,
        {"deletions": [{"name": "alice", "mechanism": 1}], "upsertions": []},
        lambda r: r["results"][0]["error_code"],
    ),
    # KafkaApis.handleShareFetchRequest / handleShareAcknowledgeRequest: READ on the group first
    "ShareFetch": (
        1,
        {
            "group_id": "g",
            "member_id": "m",
            "share_session_epoch": 0,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1024,
            "max_records": 10,
            "batch_size": 10,
            "topics": [],
            "forgotten_topics_data": [],
        },
        lambda r: r["error_code"],
    ),
    "ShareAcknowledge": (
        1,
        {"group_id": "g", "member_id": "m", "share_session_epoch": 1, "topics": []},
        lambda r: r["error_code"],
    ),
}
_REFUSED = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
}


async def test_the_apis_authorized_in_their_handlers_refuse_a_principal_without_acls(tmp_path: Path) -> None:
    assert set(_CASES) == {a.name for a in APIS if isinstance(a.auth, InHandler)}, "a new InHandler row needs a case"
    b = Broker(Config(data_dir=str(tmp_path), acl=ACL))
    for name, (version, body, code_of) in _CASES.items():
        key = API_BY_NAME[name].key
        answer = b.dispatcher.routes[key].handler(_Req(key, version, body))
        if inspect.isawaitable(answer):
            answer = await answer
        assert code_of(answer) in _REFUSED, (name, answer)
