"""CreateAcls, DescribeAcls and DeleteAcls over the node's authorizer (``groupd.security.acl``).

As Kafka's ``AclApis``: without a configured authorizer every one answers SECURITY_DISABLED ("No
Authorizer is configured."); DescribeAcls needs DESCRIBE on the cluster, Create/DeleteAcls ALTER on
the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, per creation or filter). Bindings of the
``[acl]`` table are described with the others but are configuration: DeleteAcls removes only what
CreateAcls made (the next start would bring the table's back anyway).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.security.acl import Authorizer, subject_of
from groupd.security.acl_model import CLUSTER_NAME, AclBinding, AclFilter, AclOperation, ResourceType, validate_binding

log = structlog.get_logger("groupd.acl")

_NO_AUTHORIZER = "No Authorizer is configured."


class AclApis:
    def __init__(self, authorizer: Authorizer) -> None:
        self.authz = authorizer

    def _cluster_refusal(self, req: Request, op: AclOperation) -> tuple[int, str | None] | None:
        """(error code, message) when the request may not run at all, else None."""
        if not self.authz.enabled:
            return ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER
        if not self.authz.authorize(subject_of(req), op, ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
        return None

    # --- CreateAcls -------------------------------------------------------------------------------
    def create_acls(self, req: Request) -> dict[str, Any]:
        creations = req.body.get("creations") or []
        refusal = self._cluster_refusal(req, AclOperation.ALTER)
        if refusal is not None:
            code, message = refusal
            return {
                "throttle_time_ms": 0,
                "results": [{"error_code": code, "error_message": message} for _ in creations],
            }
        results: list[dict[str, Any]] = []
        new = list(self.authz.store.bindings)
        for c in creations:
            b = AclBinding(
                c["resource_type"],
                c["resource_name"],
                c.get("resource_pattern_type", 3),
                c["principal"],
                c["host"],
                c["operation"],
                c["permission_type"],
            )
            why = validate_binding(b)
            if why is not None:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": why})
                continue
            new.append(b)  # creating an existing binding again succeeds (Kafka: idempotent)
            results.append({"error_code": 0, "error_message": None})
        if len(new) != len(self.authz.store.bindings):
            try:
                self.authz.replace_dynamic(new)
            except OSError as exc:
                log.error("acls_save_failed", error=str(exc))
                for r in results:
                    if r["error_code"] == 0:
                        r.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"cannot save ACLs: {exc}")
                return {"throttle_time_ms": 0, "results": results}
            log.info("acls_created", count=sum(r["error_code"] == 0 for r in results))
        return {"throttle_time_ms": 0, "results": results}

    # --- DescribeAcls -----------------------------------------------------------------------------
    def describe_acls(self, req: Request) -> dict[str, Any]:
        refusal = self._cluster_refusal(req, AclOperation.DESCRIBE)
        if refusal is not None:
            code, message = refusal
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}
        flt = _filter(req.body)
        why = flt.unknown()
        if why is not None:
            return {
                "throttle_time_ms": 0,
                "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": why,
                "resources": [],
            }
        grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = defaultdict(list)
        for b in sorted(set(self.authz.bindings())):
            if flt.matches(b):
                grouped[(b.resource_type, b.name, b.pattern_type)].append(
                    {
                        "principal": b.principal,
                        "host": b.host,
                        "operation": b.operation,
                        "permission_type": b.permission,
                    }
                )
        resources = [
            {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
            for (rt, name, pt), acls in grouped.items()
        ]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": resources}

    # --- DeleteAcls -------------------------------------------------------------------------------
    def delete_acls(self, req: Request) -> dict[str, Any]:
        filters = req.body.get("filters") or []
        refusal = self._cluster_refusal(req, AclOperation.ALTER)
        if refusal is not None:
            code, message = refusal
            return {
                "throttle_time_ms": 0,
                "filter_results": [
                    {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters
                ],
            }
        before = list(self.authz.store.bindings)
        remaining = list(before)
        results: list[dict[str, Any]] = []
        for raw in filters:
            flt = _filter(raw)
            why = flt.unknown()
            if why is not None:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": why, "matching_acls": []})
                continue
            # Kafka matches every filter against the ACLs as they were before the request.
            matched = [b for b in before if flt.matches(b)]
            remaining = [b for b in remaining if b not in matched]
            results.append({"error_code": 0, "error_message": None, "matching_acls": [_matching(b) for b in matched]})
        if len(remaining) != len(before):
            try:
                self.authz.replace_dynamic(remaining)
            except OSError as exc:
                log.error("acls_save_failed", error=str(exc))
                for r in results:
                    r["matching_acls"] = [
                        {**m, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc)}
                        for m in r["matching_acls"]
                    ]
                return {"throttle_time_ms": 0, "filter_results": results}
            log.info("acls_deleted", count=len(before) - len(remaining))
        return {"throttle_time_ms": 0, "filter_results": results}


def _filter(body: dict[str, Any]) -> AclFilter:
    return AclFilter(
        body["resource_type_filter"],
        body.get("resource_name_filter"),
        body.get("pattern_type_filter", 3),
        body.get("principal_filter"),
        body.get("host_filter"),
        body["operation"],
        body["permission_type"],
    )


def _matching(b: AclBinding) -> dict[str, Any]:
    return {
        "error_code": 0,
        "error_message": None,
        "resource_type": b.resource_type,
        "resource_name": b.name,
        "pattern_type": b.pattern_type,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation,
        "permission_type": b.permission,
    }


__all__ = ["AclApis", "ResourceType"]
