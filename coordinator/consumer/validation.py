"""A ConsumerGroupHeartbeat request's checks and the shapes of the answers (Kafka's
``throwIfConsumerGroupHeartbeatRequestIsInvalid`` and ``throwIfMemberEpochIsInvalid``): what is
refused before any group is looked at, and the error a refusal answers. Raised as ``RequestError``
by the heartbeat path and by the classic members' handlers, turned into an answer at their edge."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import field
from operator import itemgetter
from typing import Any

from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record

from .. import errors
from .member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    is_subset,
)
from .records import ConsumerRecord
from .regex import InvalidRegularExpression, compile_regex


@mutable_record
class HeartbeatResult:
    response: dict[str, Any]
    records: list[ConsumerRecord] = field(default_factory=list)

    def __init__(self, response: dict[str, Any], records: list[ConsumerRecord] = DEFAULT_FACTORY) -> None:
        self.response = response
        self.records = [] if records is DEFAULT_FACTORY else records


class RequestError(Exception):
    """A request refused with ``code`` (and ``message``, the answer's error message)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(e: RequestError) -> dict[str, Any]:
    """The ConsumerGroupHeartbeat answer to a refused request."""
    return {
        "throttle_time_ms": 0,
        "error_code": e.code,
        "error_message": e.message,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


# module-level, not a closure per request: this runs on every heartbeat
def _blank(v: str | None) -> bool:
    return v is not None and not v.strip()


def _blank_or_null(v: str | None) -> bool:
    return v is None or not v.strip()


def validate_request(req: Mapping[str, Any], version: int, assignors: tuple[str, ...]) -> None:
    """``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (a blank string counts as empty, as its
    ``throwIfEmptyString`` trims). groupd also compiles a regex here; Kafka does it in
    ``maybeUpdateRegularExpressions`` when the regex is new to the group: same error, same
    absence of records."""
    invalid = errors.INVALID_REQUEST
    epoch = req["member_epoch"]
    get = req.get
    if (version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank_or_null(get("member_id")):
        raise RequestError(invalid, "MemberId can't be empty.")
    if not get("group_id") or _blank(get("group_id")):
        raise RequestError(invalid, "GroupId can't be empty.")
    if _blank(get("instance_id")):
        raise RequestError(invalid, "InstanceId can't be empty.")
    if _blank(get("rack_id")):
        raise RequestError(invalid, "RackId can't be empty.")
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.get("rebalance_timeout_ms", -1) == -1:
            raise RequestError(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if req.get("topic_partitions") is None or req["topic_partitions"]:
            raise RequestError(invalid, "TopicPartitions must be empty when (re-)joining.")
        # an empty list or an empty regex is accepted: a member subscribed to nothing
        if req.get("subscribed_topic_names") is None and req.get("subscribed_topic_regex") is None:
            raise RequestError(
                invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.get("instance_id") is None:
            raise RequestError(invalid, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise RequestError(invalid, "MemberEpoch is invalid.")
    assignor = req.get("server_assignor")
    if assignor is not None and assignor not in assignors:
        raise RequestError(
            errors.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
        )
    regex = req.get("subscribed_topic_regex")
    if regex:
        try:
            compile_regex(regex)
        except InvalidRegularExpression as e:
            raise RequestError(
                errors.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.",
            ) from None


def check_member_epoch(
    member: ConsumerGroupMember, received: int, owned: list[tuple[uuid.UUID, list[int]]] | None
) -> None:
    """``throwIfMemberEpochIsInvalid``: a newer epoch than ours is fenced; an older one is accepted only
    when it is the previous epoch and the member owns nothing beyond its assignment (it missed our
    last answer)."""
    if received > member.member_epoch:
        raise RequestError(
            errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if received < member.member_epoch and not (
        received == member.previous_member_epoch and is_subset(owned, member.assigned)
    ):
        raise RequestError(
            errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


# A steady heartbeat's unset fields (``steady_heartbeat``) and what _steady requires of them, by
# request version (v0 has no regex field).
_UNSET_FIELDS = ("instance_id", "rack_id", "rebalance_timeout_ms", "server_assignor", "subscribed_topic_names")
_STEADY_V0 = (itemgetter(*_UNSET_FIELDS), (None, None, -1, None, None))
_STEADY_V1 = (itemgetter(*_UNSET_FIELDS, "subscribed_topic_regex"), (None, None, -1, None, None, None))


def leaves_unset(request: Mapping[str, Any], version: int) -> bool:
    """Whether ``request`` leaves unset what a steady heartbeat does: fetched in one C call (issue 26:
    six .get calls cost ~0.25 us), or one by one from a body without all of them (not decoded)."""
    fields, unset = _STEADY_V1 if version else _STEADY_V0
    try:
        return fields(request) == unset  # type: ignore[no-any-return]
    except KeyError:
        pass
    return (
        request.get("instance_id") is None
        and request.get("rack_id") is None
        and request.get("rebalance_timeout_ms", -1) == -1
        and request.get("server_assignor") is None
        and request.get("subscribed_topic_names") is None
        and request.get("subscribed_topic_regex") is None
    )
