"""The authorization decision: who may do what, from Kafka's ACL bindings and the broker's settings.

``Authorizer`` is Kafka's ``StandardAuthorizer`` over two sets of bindings, the ``[acl]`` table of
the configuration file and the ACLs created through CreateAcls (``acl_model.AclStore``), with its
two settings: ``super.users`` (``--super-users 'User:admin;User:ops'``: these principals are
allowed everything, before any ACL is looked at) and ``allow.everyone.if.no.acl.found``
(``--allow-everyone-if-no-acl-found``: an action on a resource that no ACL names at all, for any
principal, host or operation, is allowed rather than denied). The per-API wrappers that ask it are
``acl.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from groupd.protocol.frozen import frozen_record

from .acl_model import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBinding,
    AclOperation,
    AclStore,
    PatternType,
    Permission,
    ResourceType,
    bit_field,
    decide,
)

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's ``super.users``: principals separated by semicolons (``User:alice;User:bob``), each
    ``Type:name`` (``SecurityUtils.parseKafkaPrincipal``); blanks around them are dropped."""
    out = set()
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        kind, sep, name = item.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"super user {item!r}: expected Type:name, e.g. User:admin")
        out.add(item)
    return frozenset(out)


@frozen_record
class Subject:
    """Who asks, from where, with which API: what an ACL check needs besides the resource."""

    principal: str
    host: str
    api_key: int = -1

    def __init__(self, principal: str, host: str, api_key: int = -1) -> None:
        _set(self, "principal", principal)
        _set(self, "host", host)
        _set(self, "api_key", api_key)


# The operation each API needs on a group / a topic (KafkaApis' authorize calls per handler).
_GROUP_OPS: dict[int, AclOperation] = {
    10: AclOperation.DESCRIBE,  # FindCoordinator
    9: AclOperation.DESCRIBE,  # OffsetFetch
    15: AclOperation.DESCRIBE,  # DescribeGroups
    16: AclOperation.DESCRIBE,  # ListGroups (listing filtered by DESCRIBE)
    42: AclOperation.DELETE,  # DeleteGroups
    47: AclOperation.DELETE,  # OffsetDelete
    69: AclOperation.DESCRIBE,  # ConsumerGroupDescribe
}  # JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, ConsumerGroupHeartbeat: READ
_TOPIC_OPS: dict[int, AclOperation] = {
    0: AclOperation.WRITE,  # Produce
    1: AclOperation.READ,  # Fetch
    2: AclOperation.DESCRIBE,  # ListOffsets
    3: AclOperation.DESCRIBE,  # Metadata
    8: AclOperation.READ,  # OffsetCommit
    9: AclOperation.DESCRIBE,  # OffsetFetch
    19: AclOperation.CREATE,  # CreateTopics
    20: AclOperation.DELETE,  # DeleteTopics
    37: AclOperation.ALTER,  # CreatePartitions
    47: AclOperation.READ,  # OffsetDelete
    61: AclOperation.READ,  # DescribeProducers
}


def toml_bindings(acl: dict[str, Any]) -> list[AclBinding]:
    """The ``[acl]`` table as Kafka bindings: each prefix of ``groups``, ``topics`` and
    ``transactional_ids`` is ALLOW ALL on a PREFIXED pattern (``"*"``: the LITERAL wildcard), from any
    host; ``cluster`` lists operations allowed on the cluster (``["ALL"]``, ``["ALTER", "DESCRIBE"]``)."""
    out: list[AclBinding] = []
    kinds = {
        "groups": ResourceType.GROUP,
        "topics": ResourceType.TOPIC,
        "transactional_ids": ResourceType.TRANSACTIONAL_ID,
    }
    for principal, entry in acl.items():
        if ":" not in principal:
            raise ValueError(f"acl: principal {principal!r} must look like 'User:name' (or 'User:*')")
        if not isinstance(entry, dict) or set(entry) - {*kinds, "cluster"}:
            raise ValueError(
                f"acl.{principal!r}: expected a table with `groups`, `topics`, `transactional_ids` and/or `cluster` lists"
            )
        for key, rtype in kinds.items():
            values = entry.get(key, [])
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                raise ValueError(f"acl.{principal!r}.{key}: expected a list of name prefixes")
            for v in values:
                pattern = PatternType.LITERAL if v == WILDCARD else PatternType.PREFIXED
                out.append(AclBinding(rtype, v, pattern, principal, WILDCARD, AclOperation.ALL, Permission.ALLOW))
        ops = entry.get("cluster", [])
        if not isinstance(ops, list) or not all(
            isinstance(o, str) and o.upper() in AclOperation.__members__ for o in ops
        ):
            raise ValueError(f"acl.{principal!r}.cluster: expected a list of operations (ALL, ALTER, DESCRIBE, ...)")
        for o in ops:
            op = AclOperation[o.upper()]
            out.append(
                AclBinding(
                    ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, principal, WILDCARD, op, Permission.ALLOW
                )
            )
    return out


class Authorizer:
    """Kafka's authorizer over two sets of bindings: the ``[acl]`` table (configuration, read-only)
    and the ACLs created through CreateAcls (``AclStore``, persisted in the data directory).

    It is configured (``enabled``) when the table has an entry, ``super_users`` names someone,
    ``allow_everyone_if_no_acl_found`` is true (the two settings only mean something to an
    authorizer, as in Kafka), or the data directory has an ACL file, i.e. ACLs were created while
    it was configured: enforcement never silently turns off across a restart. Unconfigured, nothing is checked and the ACL APIs answer SECURITY_DISABLED,
    as a Kafka broker without ``authorizer.class.name`` does."""

    def __init__(
        self,
        acl: dict[str, Any],
        data_dir: Path | None = None,
        *,
        super_users: str = "",
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.static = toml_bindings(acl)
        self.super_users = parse_super_users(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self.store = AclStore(data_dir)
        self.store.load()
        self.enabled = (
            bool(self.static)
            or bool(self.super_users)
            or allow_everyone_if_no_acl_found
            or (self.store.path is not None and self.store.path.exists())
        )
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        # The name of a topic by its id, for requests that name topics by id (DeleteTopics v6+):
        # the node that owns the topic registry sets it.
        self.topic_name_for_id: Callable[[uuid.UUID], str | None] = lambda _topic_id: None

    def bindings(self) -> list[AclBinding]:
        return [*self.static, *self.store.bindings]

    def replace_dynamic(self, bindings: list[AclBinding]) -> None:
        """Persist and apply a new set of CreateAcls-made bindings."""
        self.store.save(bindings)
        self._cache.clear()

    def authorize(self, subject: Subject | str, op: AclOperation, rtype: int, name: str) -> bool:
        if not self.enabled:
            return True
        if isinstance(subject, str):
            subject = Subject(subject, "")
        if subject.principal in self.super_users:
            return True  # StandardAuthorizerData.authorize: SuperUserRule, before any ACL
        key = (subject.principal, subject.host, int(op), int(rtype), name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        ok = decide(self.bindings(), subject.principal, subject.host, op, rtype, name, if_no_acl=self.allow_if_no_acl)
        if len(self._cache) > 100_000:  # names come from clients: keep the memo bounded
            self._cache.clear()
        self._cache[key] = ok
        return ok

    def authorized_operations(self, subject: Subject | str, rtype: ResourceType, name: str) -> int:
        """Kafka's ``AuthHelper.authorizedOperations``: the supported operations the subject may do
        (all of them without an authorizer), as a bit field."""
        ops = SUPPORTED_OPERATIONS[rtype]
        return bit_field(op for op in ops if self.authorize(subject, op, rtype, name))

    def group(self, subject: Subject | str, group_id: str) -> bool:
        api = subject.api_key if isinstance(subject, Subject) else -1
        return self.authorize(subject, _GROUP_OPS.get(api, AclOperation.READ), ResourceType.GROUP, group_id)

    def topic(self, subject: Subject | str, topic: str) -> bool:
        api = subject.api_key if isinstance(subject, Subject) else -1
        if api == 19 and self.authorize(subject, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
            return True  # KafkaApis.handleCreateTopicsRequest: CREATE on the cluster covers every topic
        return self.authorize(subject, _TOPIC_OPS.get(api, AclOperation.DESCRIBE), ResourceType.TOPIC, topic)

    def transactional_id(self, subject: Subject | str, transactional_id: str) -> bool:
        # KafkaApis.getCoordinator: DESCRIBE on the transactional id (FindCoordinator key type 1).
        return self.authorize(subject, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
