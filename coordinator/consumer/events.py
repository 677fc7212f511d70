"""The info-level log events of KIP-848 consumer groups, as Kafka's ``GroupMetadataManager`` logs them.

A consumer group changes in steps that Kafka logs at info: a member joins ("Member {} joins the
consumer group using the {} protocol"), the group epoch is bumped ("Bumped group epoch to {}"), the
assignor computes a new target ("Computed a new target assignment for epoch {} with '{}' assignor"),
a member leaves ("Member {} left the consumer group") or is fenced ("Member {} fenced from the group
because its session expired" / "... failed to transition from epoch {} within {}ms"). groupd names
them as the classic groups' events are named, one event per line with ``group``, ``generation`` (the
group epoch) and, where one member is concerned, ``member``:

- ``member_joined``: a new member id, with its subscription, instance id and protocol;
- ``member_left``: a leave heartbeat (epoch -1, or -2 for a static member leaving for a while);
- ``member_fenced``: a session, rebalance (revocation), join or sync timeout, or a static member
  replaced by a new member id with its instance id;
- ``group_epoch_bumped``: from, to and why (a join, a subscription or topic change, a regex resolved,
  a member gone);
- ``target_assignment_computed``: the epoch, the assignor and how many members' targets moved;
- ``group_converged``: every member reached the target epoch and holds its target (the group is
  Stable), once per epoch, with the time since the epoch was bumped when this coordinator bumped it.

A steady heartbeat changes nothing and logs nothing: every event follows a change that writes records.
What a request can repeat (a zombie's fenced heartbeats, a client joining again and again with epoch
0) goes through the injected rate limiter (``protocol/ratelimit.py``'s ``LogLimiter``), keyed by group
and error. A member's reconciliation steps are logged at debug, as Kafka 4.x does ("new assignment
state"). Sans-IO: the logger and the limiter are handed in by the shell, times are the ``now_ms`` the
manager was given.
"""

from __future__ import annotations

from typing import Any

from .. import errors
from .group import ConsumerGroup
from .member import ConsumerGroupMember

# Why a group epoch was bumped (``group_epoch_bumped``'s ``reason``).
MEMBER_JOINED = "member_joined"
SUBSCRIPTION_CHANGED = "subscription_changed"
REGEX_SUBSCRIPTION_CHANGED = "regex_subscription_changed"
TOPIC_METADATA_CHANGED = "topic_metadata_changed"
REGEX_RESOLVED = "regex_resolved"
MEMBER_LEFT = "member_left"
MEMBER_FENCED = "member_fenced"
GROUP_CREATED = "group_created"

# Why a member was fenced (``member_fenced``'s ``reason``), by the kind of its deadline.
FENCE_REASONS = {
    "session": "session_timeout",
    "rebalance": "rebalance_timeout",
    "join": "join_timeout",
    "sync": "sync_timeout",
}
STATIC_MEMBER_REPLACED = "static_member_replaced"

# The refusals a client can repeat at every heartbeat (a zombie, a duplicate instance id): logged
# through the limiter, named as Kafka's Errors are.
REFUSALS = {
    errors.UNKNOWN_MEMBER_ID: "UNKNOWN_MEMBER_ID",
    errors.FENCED_MEMBER_EPOCH: "FENCED_MEMBER_EPOCH",
    errors.FENCED_INSTANCE_ID: "FENCED_INSTANCE_ID",
    errors.UNRELEASED_INSTANCE_ID: "UNRELEASED_INSTANCE_ID",
    errors.GROUP_MAX_SIZE_REACHED: "GROUP_MAX_SIZE_REACHED",
}


class _NoLog:
    """The logger of a manager nobody gave one (tests, tools): every event costs one no-op call."""

    def bind(self, **_kw: Any) -> _NoLog:
        return self

    def debug(self, *_a: Any, **_kw: Any) -> None:
        pass

    info = warning = debug


NO_LOG = _NoLog()


def subscription(m: ConsumerGroupMember) -> dict[str, Any]:
    """What a member subscribes to, for its ``member_joined`` line."""
    out: dict[str, Any] = {"topics": list(m.subscribed_topic_names)}
    if m.subscribed_topic_regex:
        out["regex"] = m.subscribed_topic_regex
    return out


class ConsumerGroupEvents:
    """Logs the consumer groups' events; remembers per group only what ``group_converged`` needs
    (the epoch last announced, when the current epoch was bumped, a member known not to be there yet)."""

    def __init__(self, log: Any = None, limited: Any = None) -> None:
        self.log: Any = NO_LOG
        self.limited: Any = _Unlimited(NO_LOG)
        self.attach(log, limited)
        self._converged: dict[str, int] = {}  # group -> the epoch group_converged was logged for
        self._bumped_at: dict[str, tuple[int, int]] = {}  # group -> (epoch, now_ms) of its last bump
        # group -> a member last seen not reconciled: checked first, so that a rebalance's steps do
        # not each scan the whole group
        self._behind: dict[str, str] = {}

    def attach(self, log: Any, limited: Any = None) -> None:
        """Use ``log`` (structlog-like) and ``limited`` (``LogLimiter``-like: ``log(level, event, key,
        **fields)``); without a limiter the repeatable events go straight to ``log``."""
        self.log = log if log is not None else NO_LOG
        self.limited = limited if limited is not None else _Unlimited(self.log)

    def forget(self, group_id: str) -> None:
        """The group left memory (unloaded, deleted, rolled back): its next convergence is news."""
        self._converged.pop(group_id, None)
        self._bumped_at.pop(group_id, None)
        self._behind.pop(group_id, None)

    # -- members ---------------------------------------------------------------------------------

    def member_joined(
        self, group_id: str, m: ConsumerGroupMember, generation: int, *, replaces: str | None = None
    ) -> None:
        """``getOrMaybeSubscribe...ConsumerGroupMember``: "Member {} joins the consumer group using the {}
        protocol" (a static member replacing another: "re-joins ... to replace the existing member")."""
        fields = subscription(m)
        if m.instance_id is not None:
            fields["instance"] = m.instance_id
        if replaces is not None:
            fields["replaces"] = replaces
        if m.server_assignor is not None:
            fields["assignor"] = m.server_assignor
        self.log.info(
            "member_joined",
            group=group_id,
            generation=generation,
            member=m.member_id,
            client_id=m.client_id,
            protocol="classic" if m.uses_classic_protocol else "consumer",
            **fields,
        )

    def member_rejoined(self, group_id: str, m: ConsumerGroupMember, generation: int) -> None:
        """A known member sent epoch 0 again (it lost its state): a client can repeat it, so limited."""
        self.limited.log(
            "info",
            "member_rejoined",
            (group_id, m.member_id),
            group=group_id,
            generation=generation,
            member=m.member_id,
            member_epoch=m.member_epoch,
        )

    def member_left(self, group_id: str, m: ConsumerGroupMember, generation: int, reason: str) -> None:
        """``consumerGroupLeave``: "Member {} left the consumer group" / "Static member {} with instance
        id {} temporarily left the consumer group"."""
        self.log.info(
            "member_left",
            group=group_id,
            generation=generation,
            member=m.member_id,
            instance=m.instance_id,
            member_epoch=m.member_epoch,
            reason=reason,
            protocol="classic" if m.uses_classic_protocol else "consumer",
        )

    def member_fenced(self, group_id: str, member_id: str, generation: int, reason: str, **fields: Any) -> None:
        """``consumerGroupFenceMember`` after a timeout: "Member {} fenced from the group because ..."."""
        self.log.info("member_fenced", group=group_id, generation=generation, member=member_id, reason=reason, **fields)

    def member_updated(self, group_id: str, m: ConsumerGroupMember, target_epoch: int) -> None:
        """``maybeReconcile``: a member's new assignment state (debug, as Kafka 4.x)."""
        self.log.debug(
            "member_assignment_updated",
            group=group_id,
            generation=target_epoch,
            member=m.member_id,
            member_epoch=m.member_epoch,
            previous_member_epoch=m.previous_member_epoch,
            state=m.state.name,
            assigned=sum(len(ps) for ps in m.assigned.values()),
            pending_revocation=sum(len(ps) for ps in m.pending_revocation.values()),
        )

    def refused(self, group_id: str, member_id: str, member_epoch: int, code: int, message: str | None) -> None:
        """A heartbeat refused with a membership error, at most one line per group and error per interval."""
        name = REFUSALS.get(code)
        if name is None:
            return
        self.limited.log(
            "info",
            "heartbeat_refused",
            (group_id, code),
            group=group_id,
            member=member_id,
            member_epoch=member_epoch,
            error=name,
            message=message,
        )

    # -- the group -------------------------------------------------------------------------------

    def epoch_bumped(self, group_id: str, old: int, new: int, reason: str, now_ms: int | None) -> None:
        """ "Bumped group epoch to {}"."""
        if now_ms is not None:
            self._bumped_at[group_id] = (new, now_ms)
        self.log.info("group_epoch_bumped", group=group_id, generation=new, from_epoch=old, reason=reason)

    def target_computed(self, group_id: str, epoch: int, assignor: str, members: int, changed: int) -> None:
        """ "Computed a new target assignment for epoch {} with '{}' assignor" (``changed``: the members
        whose target moved, the ones that have partitions to give up or to receive)."""
        self.log.info(
            "target_assignment_computed",
            group=group_id,
            generation=epoch,
            assignor=assignor,
            members=members,
            changed=changed,
        )

    def maybe_converged(self, g: ConsumerGroup, m: ConsumerGroupMember, now_ms: int) -> None:
        """After a member's change (``m`` as it is now): log ``group_converged`` if that made the group
        Stable (``ConsumerGroup.maybeUpdateGroupState``) at an epoch not announced yet."""
        gid, epoch = g.group_id, g.target_epoch
        if (
            g.group_epoch != epoch
            or not m.is_reconciled_to(epoch)
            or self._converged.get(gid) == epoch
            or not self._all_reconciled(g)
        ):
            return
        self._converged[gid] = epoch
        fields: dict[str, Any] = {}
        bumped = self._bumped_at.pop(gid, None)
        if bumped is not None and bumped[0] == epoch:
            fields["duration_ms"] = now_ms - bumped[1]
        partitions = sum(len(ps) for mm in g.members.values() for ps in mm.assigned.values())
        self.log.info(
            "group_converged", group=gid, generation=epoch, members=len(g.members), partitions=partitions, **fields
        )

    def _all_reconciled(self, g: ConsumerGroup) -> bool:
        """Every member at the target epoch and Stable. The member last found behind is looked at first;
        a new one is searched from the newest member back (members join, and so mostly reconcile, in
        insertion order), so a rebalance of n members costs about n lookups, not n * n."""
        epoch, members = g.target_epoch, g.members
        behind = self._behind.get(g.group_id)
        if behind is not None:
            m = members.get(behind)
            if m is not None and not m.is_reconciled_to(epoch):
                return False
        for mid in reversed(members):
            if not members[mid].is_reconciled_to(epoch):
                self._behind[g.group_id] = mid
                return False
        self._behind.pop(g.group_id, None)
        return True


class _Unlimited:
    """The limiter's interface over a plain logger (a core built without a limiter)."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def log(self, level: str, event: str, key: Any = None, **fields: Any) -> bool:
        getattr(self._log, level)(event, **fields)
        return True
