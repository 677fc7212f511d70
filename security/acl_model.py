"""Kafka's ACL model: resource patterns, bindings, filters, and the authorization decision.

A binding is Kafka's ``AclBinding``: a resource pattern (type, name, LITERAL or PREFIXED) and an
entry (principal, host, operation, ALLOW or DENY). The decision follows Kafka's
``StandardAuthorizer`` (``StandardAuthorizerData.authorize``, the same rules as ZooKeeper-era
``AclAuthorizer``):

- the ACLs that apply to a resource are the LITERAL ones of its name, the LITERAL ``*`` ones of its
  type, and the PREFIXED ones whose name starts the resource's name; of those, the ones whose
  principal is the caller's or ``User:*`` and whose host is the caller's or ``*``;
- a DENY for the operation (or ALL) wins over everything;
- otherwise an ALLOW for the operation, for ALL, or for an operation that implies it (READ, WRITE,
  DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows it;
- nothing matching: denied, unless no ACL at all names the resource and
  ``allow.everyone.if.no.acl.found`` is set (``--allow-everyone-if-no-acl-found``; false by default).

Filters (DescribeAcls, DeleteAcls) are ``AclBindingFilter``: ANY matches every value, a null name,
principal or host matches every value, and the pattern type MATCH matches the patterns that would
apply to that literal name (the name itself, ``*``, and its prefixes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path

from groupd.protocol.frozen import frozen_record
from groupd.storage.files import write_atomically

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # Kafka's only valid CLUSTER resource name

Op = AclOperation
# Kafka's AclEntry.supportedOperations: what authorized-operations bit fields are made of.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}
# An ALLOW of the key also allows these (Kafka's StandardAuthorizerData.IMPLIES_DESCRIBE and
# IMPLIES_DESCRIBE_CONFIGS, read the other way round).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL}),
    Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL}),
}


def bit_field(ops: Iterable[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``op.code`` set for each operation."""
    out = 0
    for op in ops:
        out |= 1 << int(op)
    return out


CLUSTER_OPERATIONS = bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])  # Kafka's seven cluster operations
TOPIC_OPERATIONS = bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
GROUP_OPERATIONS = bit_field(SUPPORTED_OPERATIONS[ResourceType.GROUP])


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def applies_to(self, resource_type: int, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.name)


@frozen_record
class AclFilter:
    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def __init__(
        self,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> None:
        _set(self, "resource_type", resource_type)
        _set(self, "name", name)
        _set(self, "pattern_type", pattern_type)
        _set(self, "principal", principal)
        _set(self, "host", host)
        _set(self, "operation", operation)
        _set(self, "permission", permission)

    def unknown(self) -> str | None:
        """Why the filter is invalid (Kafka's ``AclBindingFilter.findIndefiniteField`` UNKNOWN checks), or None."""
        for label, value, enum in (
            ("resource type", self.resource_type, ResourceType),
            ("pattern type", self.pattern_type, PatternType),
            ("operation", self.operation, AclOperation),
            ("permission type", self.permission, Permission),
        ):
            # a code Kafka does not know reads as UNKNOWN (ResourceType.fromCode and friends)
            if value == 0 or value not in set(enum):
                return f"Filter contains UNKNOWN {label}"
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission == Permission.ANY or self.permission == b.permission

    def _pattern_matches(self, b: AclBinding) -> bool:
        # Kafka's ResourcePatternFilter.matches
        if self.pattern_type == PatternType.ANY:
            return self.name is None or self.name == b.name
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.name == self.name or b.name == WILDCARD
            return b.pattern_type == PatternType.PREFIXED and self.name.startswith(b.name)
        return b.pattern_type == self.pattern_type and (self.name is None or self.name == b.name)


def validate_binding(b: AclBinding) -> str | None:
    """Why Kafka refuses to create ``b`` (INVALID_REQUEST), or None: ``AclControlManager.validateNewAcl``
    and ``AclApis.handleCreateAcls``."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or b.resource_type not in set(ResourceType):
        return f"Invalid resourceType {b.resource_type}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type}"
    if b.operation in (AclOperation.ANY, AclOperation.UNKNOWN) or b.operation not in set(AclOperation):
        return f"Invalid operation {b.operation}"
    if b.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {b.permission}"
    if not b.name:
        return "Invalid empty resource name specified"
    if b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, _ = b.principal.partition(":")
    if not sep or not kind:
        return f"Could not parse principal from `{b.principal}` (no colon is present separating the principal type from the principal name)"
    if not b.host:
        return "Invalid empty host"
    return None


def decide(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    op: AclOperation,
    rtype: int,
    name: str,
    *,
    if_no_acl: bool = False,
) -> bool:
    """Kafka's authorization decision for one action (module docstring). ``if_no_acl`` is the
    answer when no binding applies to the resource at all, whatever its principal, host or
    operation (``allow.everyone.if.no.acl.found``: ``StandardAuthorizerData``'s ``noAclRule``,
    taken only when ``hasResourceAcls`` stayed false)."""
    allowed = False
    resource_has_acls = False
    implied = _IMPLIED_BY.get(op, frozenset({op, Op.ALL}))
    for b in bindings:
        if not b.applies_to(rtype, name):
            continue
        resource_has_acls = True
        if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
            continue
        if b.host != host and b.host != WILDCARD:
            continue
        if b.permission == Permission.DENY:
            if b.operation in (op, Op.ALL):
                return False
        elif b.operation in implied or b.operation == op:
            allowed = True
    return allowed or (if_no_acl and not resource_has_acls)


class AclStore:
    """The ACLs created through CreateAcls, persisted as JSON in the data directory (temp file,
    fsync, rename, fsync of the directory: a crash leaves the old or the new set, never half)."""

    FILE = "acls.json"

    def __init__(self, data_dir: Path | None) -> None:
        self.path = data_dir / self.FILE if data_dir is not None else None
        self.bindings: list[AclBinding] = []

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            self.bindings = sorted({AclBinding(**b) for b in data.get("acls", [])})
        except (OSError, TypeError, AttributeError, ValueError) as exc:
            # a daemon must not start with ACLs it cannot read: it would enforce the wrong ones
            raise ValueError(f"cannot read the ACLs in {self.path}: {exc}") from exc

    def save(self, bindings: list[AclBinding]) -> None:
        """Persist ``bindings``, then make them current (so a failed write changes nothing)."""
        bindings = sorted(set(bindings))
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, json.dumps({"version": 1, "acls": [asdict(b) for b in bindings]}, indent=1))
        self.bindings = bindings
