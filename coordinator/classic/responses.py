"""The answers of the classic group APIs, built the way Kafka's response constructors build them."""

from __future__ import annotations

from typing import Any

from .. import errors as err
from .group import ClassicGroup, Waiter


def join_response(
    version: int,
    error: int,
    *,
    member_id: str = "",
    generation: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str = "",
    members: list[dict[str, Any]] | None = None,
    skip_assignment: bool = False,
) -> dict[str, Any]:
    # The JoinGroupResponse constructor: "" below v7 where the name is null, and from v7
    # (nullable) null where it is "".
    if version < 7:
        protocol_name = protocol_name or ""
    elif protocol_name == "":
        protocol_name = None
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "generation_id": generation,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "leader": leader or "",
        "skip_assignment": skip_assignment,
        "member_id": member_id,
        "members": members or [],
    }


def group_join_response(
    group: ClassicGroup, waiter: Waiter, member_id: str, *, with_members: bool, skip: bool = False
) -> dict[str, Any]:
    """A successful JoinGroup answer of ``group``'s current generation (the member list: the leader's)."""
    return join_response(
        waiter.version,
        err.NONE,
        member_id=member_id,
        generation=group.generation,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        members=group.current_member_list() if with_members else [],
        skip_assignment=skip,
    )


def sync_response(
    error: int, assignment: bytes = b"", ptype: str | None = None, pname: str | None = None
) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "protocol_type": ptype,
        "protocol_name": pname,
        "assignment": assignment,
    }


def leave_response(version: int, results: list[dict[str, Any]]) -> dict[str, Any]:
    """LeaveGroup's answer: per member from v3, else the first member's error."""
    if version >= 3:
        return {"throttle_time_ms": 0, "error_code": err.NONE, "members": results}
    first_error = next((r["error_code"] for r in results if r["error_code"]), err.NONE)
    return {"throttle_time_ms": 0, "error_code": first_error}
