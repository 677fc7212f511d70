"""Kafka's ACL model in groupd (``security/acl_model.py``, ``security/acl.py``): the decision rules of
``StandardAuthorizerData``, ``AclBindingFilter`` matching, ``AclControlManager.validateNewAcl``, the
``[acl]`` table's mapping and the persisted store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from groupd.security.acl import Authorizer, Subject, toml_bindings
from groupd.security.acl_model import (
    CLUSTER_NAME,
    CLUSTER_OPERATIONS,
    AclBinding,
    AclFilter,
    AclOperation,
    AclStore,
    PatternType,
    Permission,
    ResourceType,
    decide,
    validate_binding,
)

Op, RT, PT, P = AclOperation, ResourceType, PatternType, Permission


def acl(
    rt: int, name: str, pt: int, op: int, perm: int = P.ALLOW, principal: str = "User:bob", host: str = "*"
) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def allowed(
    bindings: list[AclBinding],
    op: AclOperation,
    rt: int,
    name: str,
    principal: str = "User:bob",
    host: str = "10.0.0.1",
) -> bool:
    return decide(bindings, principal, host, op, rt, name)


def test_nothing_matching_is_denied() -> None:
    # allow.everyone.if.no.acl.found=false
    assert not allowed([], Op.READ, RT.TOPIC, "t")
    assert not allowed([acl(RT.TOPIC, "other", PT.LITERAL, Op.ALL)], Op.READ, RT.TOPIC, "t")


def test_literal_prefixed_and_wildcard_patterns() -> None:
    assert allowed([acl(RT.TOPIC, "orders", PT.LITERAL, Op.READ)], Op.READ, RT.TOPIC, "orders")
    assert not allowed([acl(RT.TOPIC, "orders", PT.LITERAL, Op.READ)], Op.READ, RT.TOPIC, "orders-eu")
    assert allowed([acl(RT.TOPIC, "orders", PT.PREFIXED, Op.READ)], Op.READ, RT.TOPIC, "orders-eu")
    assert allowed([acl(RT.TOPIC, "*", PT.LITERAL, Op.READ)], Op.READ, RT.TOPIC, "anything")
    assert not allowed([acl(RT.GROUP, "*", PT.LITERAL, Op.READ)], Op.READ, RT.TOPIC, "anything")  # other type


def test_deny_wins_and_all_covers_every_operation() -> None:
    both = [acl(RT.TOPIC, "t", PT.PREFIXED, Op.ALL), acl(RT.TOPIC, "t-secret", PT.LITERAL, Op.READ, P.DENY)]
    assert allowed(both, Op.READ, RT.TOPIC, "t-public")
    assert allowed(both, Op.WRITE, RT.TOPIC, "t-secret")
    assert not allowed(both, Op.READ, RT.TOPIC, "t-secret")
    assert not allowed([*both, acl(RT.TOPIC, "*", PT.LITERAL, Op.ALL, P.DENY)], Op.WRITE, RT.TOPIC, "t-public")


def test_allows_imply_describe_but_denies_do_not() -> None:
    # StandardAuthorizerData: READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed([acl(RT.TOPIC, "t", PT.LITERAL, op)], Op.DESCRIBE, RT.TOPIC, "t"), op
    assert not allowed([acl(RT.TOPIC, "t", PT.LITERAL, Op.CREATE)], Op.DESCRIBE, RT.TOPIC, "t")
    assert allowed([acl(RT.TOPIC, "t", PT.LITERAL, Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    deny_read = [acl(RT.TOPIC, "t", PT.LITERAL, Op.DESCRIBE), acl(RT.TOPIC, "t", PT.LITERAL, Op.READ, P.DENY)]
    assert allowed(deny_read, Op.DESCRIBE, RT.TOPIC, "t")


def test_principal_and_host_matching() -> None:
    everyone = [acl(RT.GROUP, "g", PT.LITERAL, Op.READ, principal="User:*")]
    assert allowed(everyone, Op.READ, RT.GROUP, "g", principal="User:carol")
    from_host = [acl(RT.GROUP, "g", PT.LITERAL, Op.READ, host="10.0.0.1")]
    assert allowed(from_host, Op.READ, RT.GROUP, "g", host="10.0.0.1")
    assert not allowed(from_host, Op.READ, RT.GROUP, "g", host="10.0.0.2")
    assert not allowed(from_host, Op.READ, RT.GROUP, "g", principal="User:alice", host="10.0.0.1")


def test_filters_as_kafkas_acl_binding_filter() -> None:
    lit = acl(RT.TOPIC, "orders", PT.LITERAL, Op.READ)
    pre = acl(RT.TOPIC, "ord", PT.PREFIXED, Op.WRITE)
    wild = acl(RT.TOPIC, "*", PT.LITERAL, Op.READ, P.DENY)
    group = acl(RT.GROUP, "orders", PT.LITERAL, Op.READ)
    every = [lit, pre, wild, group]

    def match(
        rt: int, name: str | None, pt: int, op: int = Op.ANY, perm: int = P.ANY, principal: str | None = None
    ) -> list[AclBinding]:
        f = AclFilter(rt, name, pt, principal, None, op, perm)
        return [b for b in every if f.matches(b)]

    assert match(RT.ANY, None, PT.ANY) == every
    assert match(RT.TOPIC, "orders", PT.MATCH) == [lit, pre, wild]  # what applies to the name
    assert match(RT.TOPIC, "orders", PT.LITERAL) == [lit]
    assert match(RT.TOPIC, "orders", PT.ANY) == [lit]
    assert match(RT.TOPIC, None, PT.PREFIXED) == [pre]
    assert match(RT.ANY, None, PT.ANY, op=Op.READ, perm=P.ALLOW) == [lit, group]
    assert match(RT.ANY, None, PT.ANY, principal="User:alice") == []
    assert AclFilter(RT.TOPIC, None, PT.UNKNOWN, None, None, Op.ANY, P.ANY).unknown() is not None
    assert AclFilter(99, None, PT.ANY, None, None, Op.ANY, P.ANY).unknown() == "Filter contains UNKNOWN resource type"
    assert AclFilter(RT.ANY, None, PT.ANY, None, None, Op.ANY, P.ANY).unknown() is None


@pytest.mark.parametrize(
    ("binding", "why"),
    [
        (acl(RT.ANY, "t", PT.LITERAL, Op.READ), "Invalid resourceType"),
        (acl(RT.TOPIC, "t", PT.MATCH, Op.READ), "Invalid patternType"),
        (acl(RT.TOPIC, "t", PT.LITERAL, Op.ANY), "Invalid operation"),
        (acl(RT.TOPIC, "t", PT.LITERAL, Op.READ, P.ANY), "Invalid permissionType"),
        (acl(RT.TOPIC, "", PT.LITERAL, Op.READ), "Invalid empty resource name"),
        (acl(RT.CLUSTER, "c", PT.LITERAL, Op.ALTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (acl(RT.TOPIC, "t", PT.LITERAL, Op.READ, principal="bob"), "Could not parse principal"),
    ],
)
def test_invalid_bindings(binding: AclBinding, why: str) -> None:
    reason = validate_binding(binding)
    assert reason is not None and reason.startswith(why)


def test_valid_binding() -> None:
    assert validate_binding(acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, Op.ALTER)) is None
    assert validate_binding(acl(RT.TRANSACTIONAL_ID, "tx-", PT.PREFIXED, Op.WRITE, P.DENY)) is None


def test_the_toml_table_maps_onto_allow_all_bindings() -> None:
    got = toml_bindings(
        {
            "User:alice": {"groups": ["app-"], "topics": ["*"], "cluster": ["alter", "DESCRIBE"]},
            "User:*": {"topics": ["pub-"]},
        }
    )
    assert got == [
        acl(RT.GROUP, "app-", PT.PREFIXED, Op.ALL, principal="User:alice"),
        acl(RT.TOPIC, "*", PT.LITERAL, Op.ALL, principal="User:alice"),
        acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, Op.ALTER, principal="User:alice"),
        acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, Op.DESCRIBE, principal="User:alice"),
        acl(RT.TOPIC, "pub-", PT.PREFIXED, Op.ALL, principal="User:*"),
    ]
    with pytest.raises(ValueError, match="operations"):
        toml_bindings({"User:a": {"cluster": ["FLY"]}})
    with pytest.raises(ValueError, match="must look like"):
        toml_bindings({"alice": {"topics": ["*"]}})


def test_the_operation_depends_on_the_api() -> None:
    authz = Authorizer({}, None)
    authz.enabled = True
    authz.static = [acl(RT.TOPIC, "t", PT.LITERAL, Op.READ), acl(RT.GROUP, "g", PT.LITERAL, Op.DESCRIBE)]
    fetch, produce, metadata = (Subject("User:bob", "h", k) for k in (1, 0, 3))
    assert authz.topic(fetch, "t") and authz.topic(metadata, "t")  # READ, and DESCRIBE implied by it
    assert not authz.topic(produce, "t")  # WRITE
    create = Subject("User:bob", "h", 19)
    assert not authz.topic(create, "new")
    authz.static.append(acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, Op.CREATE))
    authz._cache.clear()
    assert authz.topic(create, "new")  # CreateTopics: CREATE on the cluster, or on the topic
    find, join = Subject("User:bob", "h", 10), Subject("User:bob", "h", 11)
    assert authz.group(find, "g") and not authz.group(join, "g")  # FindCoordinator DESCRIBE, JoinGroup READ


def test_authorized_operations_bit_fields() -> None:
    off = Authorizer({}, None)
    assert not off.enabled
    # no authorizer: every supported operation (AuthHelper.authorizedOperations)
    assert off.authorized_operations("User:x", RT.CLUSTER, CLUSTER_NAME) == CLUSTER_OPERATIONS
    assert sum(1 << o for o in (5, 7, 8, 9, 10, 11, 12)) == CLUSTER_OPERATIONS  # Kafka's seven, no DELETE
    on = Authorizer({"User:bob": {"topics": ["t"]}}, None)
    assert on.authorized_operations("User:bob", RT.TOPIC, "t") == sum(1 << o for o in (3, 4, 5, 6, 7, 8, 10, 11))
    assert on.authorized_operations("User:bob", RT.CLUSTER, CLUSTER_NAME) == 0


def test_the_store_persists_and_turns_the_authorizer_on_across_restarts(tmp_path: Path) -> None:
    assert not Authorizer({}, tmp_path).enabled
    a = Authorizer({"User:admin": {"cluster": ["ALL"]}}, tmp_path)
    b = acl(RT.TOPIC, "t", PT.LITERAL, Op.READ)
    a.replace_dynamic([b, b])
    assert a.authorize(Subject("User:bob", "h", 1), Op.READ, RT.TOPIC, "t")
    assert json.loads((tmp_path / AclStore.FILE).read_text())["acls"] == [
        {
            "resource_type": 2,
            "name": "t",
            "pattern_type": 3,
            "principal": "User:bob",
            "host": "*",
            "operation": 3,
            "permission": 3,
        }
    ]
    assert not list(tmp_path.glob("*.tmp"))
    # without the table, the file alone keeps enforcement on (ACLs never silently stop applying)
    again = Authorizer({}, tmp_path)
    assert again.enabled and again.store.bindings == [b]
    again.replace_dynamic([])
    assert Authorizer({}, tmp_path).enabled
    assert not Authorizer({}, tmp_path).authorize("User:bob", Op.READ, RT.TOPIC, "t")


def test_a_decision_is_recomputed_after_a_change(tmp_path: Path) -> None:
    a = Authorizer({"User:admin": {"cluster": ["ALL"]}}, tmp_path)
    s = Subject("User:bob", "h", 1)
    assert not a.authorize(s, Op.READ, RT.TOPIC, "t")
    a.replace_dynamic([acl(RT.TOPIC, "t", PT.LITERAL, Op.READ)])
    assert a.authorize(s, Op.READ, RT.TOPIC, "t")
