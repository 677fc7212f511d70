"""The broker's API table: one row per API a broker serves, and the only place an API is registered.

A row says how the API's handler is had from the node (``Broker``), the versions served where they
are narrower than the schema's, who authorizes it and how a cluster of brokers routes it. From the
table ``Broker._register`` registers every handler with a dispatcher, ``Cluster.wrap`` wraps each
one as its routing says, and ``groupd.security.acl.install`` wraps the ones checked by a wrapper.
Adding an API means: its schema (``groupd.protocol.messages``), its handler, one row here; a test
(tests/broker/test_api_table.py) fails when an advertised API has no row or no authorization.

Authorization, one of three kinds (Kafka's ``KafkaApis`` checks each API in its handler):

- ``Wrapped``: a wrapper of ``groupd.security.acl`` checks the request before the handler sees it
  (the operations on which resources: its ``checks``) and answers what is refused with Kafka's
  error code for the resource: GROUP_, TOPIC_, TRANSACTIONAL_ID_ or CLUSTER_AUTHORIZATION_FAILED,
  per entry where the answer has one entry per group, topic or id (the coordinator and the data
  plane never see a principal).
- ``InHandler``: the handler asks the ``Authorizer`` itself (``where`` names the place), because
  the refusal is one field of an answer it builds entry by entry (configs, DeleteRecords, ...).
- ``Unchecked``: no ACL applies, as in Kafka: ApiVersions and the SASL handshake and authentication
  (a client must negotiate and authenticate before it has a principal to check).

Routing in a cluster (``--brokers N``, ``broker.cluster``), one of ``Routing``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Protocol

from groupd.protocol.dispatch import Handler
from groupd.protocol.error_response import error_response
from groupd.protocol.errors import ErrorCode
from groupd.protocol.frozen import frozen_record
from groupd.protocol.messages import API_BY_NAME
from groupd.security import acl
from groupd.security.auth import Authenticator

from .acl_apis import AclApis
from .admin_handlers import AdminHandlers
from .configs import ConfigHandlers
from .data_plane import (
    DESCRIBE_PRODUCERS_VERSIONS,
    FETCH_VERSIONS,
    LIST_OFFSETS_VERSIONS,
    PRODUCE_VERSIONS,
    DataPlane,
)
from .group_shell import GroupShell
from .log_admin import LogAdmin
from .scram_apis import ScramApis
from .share import SHARE_ACKNOWLEDGE_VERSIONS, SHARE_FETCH_VERSIONS, ShareHandlers
from .txn_shell import TxnShell


class Routing(Enum):
    """How the brokers of one process share an API (they share one state: ``broker.cluster``)."""

    # Any broker answers from the shared state, as it is (topic administration, ACLs, SASL).
    SHARED = "shared"
    # The handler is made per broker (it is given the node id): the group coordinator serves a group
    # only on the leader of its __consumer_offsets partition, the transaction coordinator a
    # transactional id only on the leader of its __transaction_state partition, NOT_COORDINATOR
    # elsewhere.
    COORDINATOR = "coordinator"
    # ``cluster.leader_guard``: partitions this broker does not lead are answered
    # NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, the rest handed on.
    LEADER = "leader"
    # The handler is made per broker and answers NOT_LEADER_OR_FOLLOWER itself for each partition
    # the broker does not lead: the share APIs, whose partitions are named by topic id and, after a
    # session opens, by the session rather than the request (``broker.share``).
    SHARE_LEADER = "share_leader"
    # The answer is rewritten with the cluster's brokers, controller and partition leaders.
    METADATA = "metadata"
    DESCRIBE_CLUSTER = "describe_cluster"
    # ``cluster.broker_configs_as``: a broker resource named by this broker's id.
    BROKER_CONFIGS = "broker_configs"


_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field (protocol/frozen.py)


@frozen_record
class Wrapped:
    """Checked by ``wrapper`` (``groupd.security.acl``) before the handler runs; ``checks`` says
    what it checks (KafkaApis' authorize calls for the API), for the reader of the table."""

    wrapper: acl.Wrapper
    checks: str

    def __init__(self, wrapper: acl.Wrapper, checks: str) -> None:
        _set(self, "wrapper", wrapper)
        _set(self, "checks", checks)


@frozen_record
class InHandler:
    """The handler asks the ``Authorizer`` itself, at ``where``."""

    where: str

    def __init__(self, where: str) -> None:
        _set(self, "where", where)


@frozen_record
class Unchecked:
    """No ACL applies (``why``)."""

    why: str

    def __init__(self, why: str) -> None:
        _set(self, "why", why)


Authorization = Wrapped | InHandler | Unchecked


class BrokerParts(Protocol):
    """What the handlers are had from (``broker.node.Broker``, which imports this module)."""

    admin: AdminHandlers
    configs: ConfigHandlers
    log_admin: LogAdmin
    acl_apis: AclApis
    scram_apis: ScramApis
    groups: GroupShell
    data: DataPlane
    txns: TxnShell
    authenticator: Authenticator

    def share_handlers(self, node_id: int | None) -> ShareHandlers: ...


# The handler of an API on the broker ``node_id`` of a cluster (None: the only broker).
HandlerOf = Callable[[BrokerParts, "int | None"], Handler]


@frozen_record
class Api:
    name: str
    # None: the dispatcher answers it itself (ApiVersions: protocol rules, ``protocol.dispatch``).
    handler: HandlerOf | None
    auth: Authorization
    routing: Routing = Routing.SHARED
    # (min, max) served where narrower than the schema's (None: the schema's range)
    versions: tuple[int, int] | None = None

    def __init__(
        self,
        name: str,
        handler: HandlerOf | None,
        auth: Authorization,
        routing: Routing = Routing.SHARED,
        versions: tuple[int, int] | None = None,
    ) -> None:
        _set(self, "name", name)
        _set(self, "handler", handler)
        _set(self, "auth", auth)
        _set(self, "routing", routing)
        _set(self, "versions", versions)


def _group(name: str) -> HandlerOf:
    return lambda b, node_id: b.groups.handler(name, node_id)


def _txn(name: str) -> HandlerOf:
    return lambda b, node_id: b.txns.handler(name, node_id)


def _txn_offset_commit(b: BrokerParts, node_id: int | None) -> Handler:
    inner = b.groups.handler("TxnOffsetCommit", node_id)
    if node_id is None:
        return b.txns.txn_offset_commit_handler(inner)
    # read at each request: the node sets the ownership once listening, and leaders move
    core = b.groups.core
    return b.txns.txn_offset_commit_handler(inner, lambda partition: core.ownership.is_owned_by(partition, node_id))


_CONFIGS = InHandler("ConfigHandlers._refused: DESCRIBE_CONFIGS / ALTER_CONFIGS on each resource")

APIS: tuple[Api, ...] = (
    # --- protocol and authentication --------------------------------------------------------------
    Api("ApiVersions", None, Unchecked("negotiated before anything else, as in Kafka")),
    # Advertised on every listener, as Kafka does; a listener without SASL answers ILLEGAL_SASL_STATE.
    Api("SaslHandshake", lambda b, _: b.authenticator.handshake, Unchecked("before authentication")),
    Api("SaslAuthenticate", lambda b, _: b.authenticator.authenticate, Unchecked("before authentication")),
    # --- topics and metadata ----------------------------------------------------------------------
    Api(
        "Metadata",
        lambda b, _: b.admin.metadata,
        Wrapped(acl.metadata, "DESCRIBE on each topic; listings leave out the others"),
        Routing.METADATA,
    ),
    Api(
        "CreateTopics",
        lambda b, _: b.admin.create_topics,
        Wrapped(acl.create_topics, "CREATE on the cluster, else on each topic"),
    ),
    Api(
        "DeleteTopics",
        lambda b, _: b.admin.delete_topics,
        Wrapped(acl.delete_topics, "DELETE on each topic (named or by id)"),
    ),
    Api(
        "CreatePartitions",
        lambda b, _: b.admin.create_partitions,
        Wrapped(acl.create_partitions, "ALTER on each topic"),
    ),
    Api("DescribeConfigs", lambda b, _: b.configs.describe_configs, _CONFIGS, Routing.BROKER_CONFIGS),
    Api("AlterConfigs", lambda b, _: b.configs.alter_configs, _CONFIGS, Routing.BROKER_CONFIGS),
    Api("IncrementalAlterConfigs", lambda b, _: b.configs.incremental_alter_configs, _CONFIGS, Routing.BROKER_CONFIGS),
    Api(
        "DeleteRecords",
        lambda b, _: b.log_admin.delete_records,
        InHandler("LogAdmin.delete_records: DELETE on each topic"),
        Routing.LEADER,
    ),
    Api(
        "OffsetForLeaderEpoch",
        lambda b, _: b.log_admin.offset_for_leader_epoch,
        InHandler("LogAdmin.offset_for_leader_epoch: DESCRIBE on each topic"),
        Routing.LEADER,
    ),
    Api(
        "DescribeLogDirs",
        lambda b, _: b.log_admin.describe_log_dirs,
        InHandler("LogAdmin.describe_log_dirs: DESCRIBE on the cluster"),
    ),
    # KafkaApis.handleDescribeCluster refuses no one: DESCRIBE on the cluster only decides whether
    # the asked-for cluster_authorized_operations are reported (else 0).
    Api(
        "DescribeCluster",
        lambda b, _: b.log_admin.describe_cluster,
        InHandler("LogAdmin.describe_cluster: cluster_authorized_operations only, as Kafka"),
        Routing.DESCRIBE_CLUSTER,
    ),
    Api("CreateAcls", lambda b, _: b.acl_apis.create_acls, InHandler("AclApis._cluster_refusal: ALTER on the cluster")),
    Api(
        "DescribeAcls",
        lambda b, _: b.acl_apis.describe_acls,
        InHandler("AclApis._cluster_refusal: DESCRIBE on the cluster"),
    ),
    Api("DeleteAcls", lambda b, _: b.acl_apis.delete_acls, InHandler("AclApis._cluster_refusal: ALTER on the cluster")),
    Api(
        "DescribeUserScramCredentials",
        lambda b, _: b.scram_apis.describe,
        InHandler("ScramApis.describe: DESCRIBE on the cluster"),
    ),
    Api(
        "AlterUserScramCredentials",
        lambda b, _: b.scram_apis.alter,
        InHandler("ScramApis.alter: ALTER on the cluster"),
    ),
    # --- the group coordinator (groupd.coordinator.HANDLED_APIS) ----------------------------------
    # FindCoordinator's answer also names the node by the listener asked, on every broker
    # (``security.listeners.advertise_per_listener``, applied after the cluster's wrapper).
    Api(
        "FindCoordinator",
        _group("FindCoordinator"),
        Wrapped(acl.find_coordinator, "DESCRIBE on each group or transactional id"),
        Routing.COORDINATOR,
    ),
    Api("JoinGroup", _group("JoinGroup"), Wrapped(acl.join_group, "READ on the group"), Routing.COORDINATOR),
    Api(
        "SyncGroup",
        _group("SyncGroup"),
        Wrapped(acl.sync_group, "READ on the group (after the v5+ protocol check, as Kafka)"),
        Routing.COORDINATOR,
    ),
    Api("Heartbeat", _group("Heartbeat"), Wrapped(acl.heartbeat, "READ on the group"), Routing.COORDINATOR),
    Api("LeaveGroup", _group("LeaveGroup"), Wrapped(acl.leave_group, "READ on the group"), Routing.COORDINATOR),
    Api(
        "DescribeGroups",
        _group("DescribeGroups"),
        Wrapped(acl.describe_groups, "DESCRIBE on each group"),
        Routing.COORDINATOR,
    ),
    Api(
        "ListGroups",
        _group("ListGroups"),
        Wrapped(acl.list_groups, "DESCRIBE on each group; the listing leaves out the others"),
        Routing.COORDINATOR,
    ),
    Api(
        "DeleteGroups", _group("DeleteGroups"), Wrapped(acl.delete_groups, "DELETE on each group"), Routing.COORDINATOR
    ),
    Api(
        "OffsetCommit",
        _group("OffsetCommit"),
        Wrapped(acl.offset_commit, "READ on the group, then READ on each topic"),
        Routing.COORDINATOR,
    ),
    Api(
        "OffsetFetch",
        _group("OffsetFetch"),
        Wrapped(acl.offset_fetch, "DESCRIBE on each group, then DESCRIBE on each topic (all topics: filtered)"),
        Routing.COORDINATOR,
    ),
    Api(
        "OffsetDelete",
        _group("OffsetDelete"),
        Wrapped(acl.offset_delete, "DELETE on the group, then READ on each topic"),
        Routing.COORDINATOR,
    ),
    # v5+ (transaction version 2): the group's partition is added to the transaction first
    # (``TxnShell.txn_offset_commit_handler``), as the client sends no AddOffsetsToTxn.
    Api(
        "TxnOffsetCommit",
        _txn_offset_commit,
        Wrapped(acl.txn_offset_commit, "WRITE on the transactional id, READ on the group, READ on each topic"),
        Routing.COORDINATOR,
    ),
    Api(
        "ConsumerGroupHeartbeat",
        _group("ConsumerGroupHeartbeat"),
        Wrapped(acl.consumer_group_heartbeat, "READ on the group, then DESCRIBE on each subscribed topic name"),
        Routing.COORDINATOR,
    ),
    Api(
        "ConsumerGroupDescribe",
        _group("ConsumerGroupDescribe"),
        Wrapped(acl.consumer_group_describe, "DESCRIBE on each group and on every topic its members are assigned"),
        Routing.COORDINATOR,
    ),
    # KIP-932 share groups (their delivery, ShareFetch/ShareAcknowledge, is the data plane's)
    Api(
        "ShareGroupHeartbeat",
        _group("ShareGroupHeartbeat"),
        Wrapped(acl.share_group_heartbeat, "READ on the group, then DESCRIBE on each subscribed topic name"),
        Routing.COORDINATOR,
    ),
    Api(
        "ShareGroupDescribe",
        _group("ShareGroupDescribe"),
        Wrapped(acl.share_group_describe, "DESCRIBE on each group and on every topic its members are assigned"),
        Routing.COORDINATOR,
    ),
    Api(
        "DescribeShareGroupOffsets",
        _group("DescribeShareGroupOffsets"),
        Wrapped(acl.describe_share_group_offsets, "DESCRIBE on each group, then DESCRIBE on each topic"),
        Routing.COORDINATOR,
    ),
    Api(
        "AlterShareGroupOffsets",
        _group("AlterShareGroupOffsets"),
        Wrapped(acl.alter_share_group_offsets, "READ on the group, then READ on each topic"),
        Routing.COORDINATOR,
    ),
    Api(
        "DeleteShareGroupOffsets",
        _group("DeleteShareGroupOffsets"),
        Wrapped(acl.delete_share_group_offsets, "DELETE on the group, then READ on each topic"),
        Routing.COORDINATOR,
    ),
    # --- the data plane ---------------------------------------------------------------------------
    Api(
        "Produce",
        lambda b, _: b.data.produce,
        Wrapped(acl.produce, "WRITE on the transactional id (transactional records), then WRITE on each topic"),
        Routing.LEADER,
        PRODUCE_VERSIONS,
    ),
    Api("Fetch", lambda b, _: b.data.fetch, Wrapped(acl.fetch, "READ on each topic"), Routing.LEADER, FETCH_VERSIONS),
    Api(
        "ListOffsets",
        lambda b, _: b.data.list_offsets,
        Wrapped(acl.list_offsets, "DESCRIBE on each topic"),
        Routing.LEADER,
        LIST_OFFSETS_VERSIONS,
    ),
    Api(
        "DescribeProducers",
        lambda b, _: b.data.describe_producers,
        Wrapped(acl.describe_producers, "READ on each topic"),
        versions=DESCRIBE_PRODUCERS_VERSIONS,
    ),
    # --- share groups: delivery (KIP-932) ---------------------------------------------------------
    # Each broker keeps its own share sessions and answers NOT_LEADER_OR_FOLLOWER per partition it
    # does not lead (the handler is made per broker, as a coordinator's is).
    Api(
        "ShareFetch",
        lambda b, node_id: b.share_handlers(node_id).share_fetch,
        InHandler("ShareHandlers: READ on the group, then READ on each topic (the session's, by id)"),
        Routing.SHARE_LEADER,
        SHARE_FETCH_VERSIONS,
    ),
    Api(
        "ShareAcknowledge",
        lambda b, node_id: b.share_handlers(node_id).share_acknowledge,
        InHandler("ShareHandlers: READ on the group, then READ on each topic"),
        Routing.SHARE_LEADER,
        SHARE_ACKNOWLEDGE_VERSIONS,
    ),
    # --- transactions (one producer-id sequence with idempotent producers: the data plane's) -------
    Api(
        "InitProducerId",
        lambda b, node_id: b.txns.init_producer_id_handler(b.data.init_producer_id, node_id),
        Wrapped(acl.init_producer_id, "WRITE on the transactional id (none for an idempotent producer)"),
        Routing.COORDINATOR,
    ),
    Api(
        "AddPartitionsToTxn",
        _txn("AddPartitionsToTxn"),
        Wrapped(
            acl.add_partitions_to_txn,
            "WRITE on the transactional id and each topic; v4+ CLUSTER_ACTION, then WRITE on each id",
        ),
        Routing.COORDINATOR,
    ),
    Api(
        "AddOffsetsToTxn",
        _txn("AddOffsetsToTxn"),
        Wrapped(acl.add_offsets_to_txn, "WRITE on the transactional id, then READ on the group"),
        Routing.COORDINATOR,
    ),
    # EndTxn v5+: transaction version 2 (KIP-890 part 2), answering the producer id and epoch.
    Api("EndTxn", _txn("EndTxn"), Wrapped(acl.end_txn, "WRITE on the transactional id"), Routing.COORDINATOR),
    Api(
        "DescribeTransactions",
        _txn("DescribeTransactions"),
        Wrapped(acl.describe_transactions, "DESCRIBE on each transactional id; topics filtered by DESCRIBE"),
        Routing.COORDINATOR,
    ),
    Api(
        "ListTransactions",
        _txn("ListTransactions"),
        Wrapped(acl.list_transactions, "DESCRIBE on each transactional id; the listing leaves out the others"),
        Routing.COORDINATOR,
    ),
)

API_TABLE: dict[str, Api] = {api.name: api for api in APIS}
# The share-group APIs (KIP-932): served only where share.version is finalized at 1 or more
SHARE_APIS = frozenset(
    {
        "ShareGroupHeartbeat",
        "ShareGroupDescribe",
        "DescribeShareGroupOffsets",
        "AlterShareGroupOffsets",
        "DeleteShareGroupOffsets",
        "ShareFetch",
        "ShareAcknowledge",
    }
)


def share_disabled(name: str) -> Handler:
    """A share-group API where share groups are off (``--kafka-version 4.1``: share.version finalized
    0): KafkaApis' ``isShareGroupProtocolEnabled`` check answers UNSUPPORTED_VERSION."""
    api = API_BY_NAME[name]
    return lambda req: error_response(api, req.api_version, req.body, ErrorCode.UNSUPPORTED_VERSION)


# The highest level of each finalized feature groupd implements; under --kafka-version a release's
# features are capped to these and the others (streams.version) are not advertised.
IMPLEMENTED_FEATURES: dict[str, int] = {"group.version": 1, "transaction.version": 2, "share.version": 1}
# What ``groupd.security.acl.install`` wraps when ACLs are on.
ACL_WRAPPERS: dict[str, acl.Wrapper] = {api.name: api.auth.wrapper for api in APIS if isinstance(api.auth, Wrapped)}
