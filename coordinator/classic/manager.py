"""The classic group manager: JoinGroup's sessions and phases, SyncGroup, Heartbeat, LeaveGroup and
their timers (Kafka's ``GroupMetadataManager``, its classic paths).

It holds the live classic groups (soft state: who is parked, session deadlines, the rebalance in
flight) and works through explicit collaborators: the coordinator runtime (the call's Result, the
writes in flight, routing), the persisted group-metadata records (the shard's ``replay`` folds
records into them; an unload drops a partition's), the offset manager, and the KIP-848 side for a group id that is a consumer group
(``ConsumerSide``: its one write in flight; ``ClassicMigration``: classic requests served by a
consumer group). JoinGroup itself is :mod:`.join`; DescribeGroups, ListGroups and DeleteGroups are
:mod:`.admin`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import errors as err
from .. import listener as events
from ..config import CoordinatorConfig
from ..listener import CoordinatorListener
from ..offsets import OffsetManager
from ..records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record
from ..result import Result
from ..routing import partition_for
from ..runtime import CoordinatorRuntime
from ..timers import Deadlines
from .group import CR, PR, ClassicGroup, D, E, Member, S, Waiter
from .responses import group_join_response, join_response, leave_response, sync_response

if TYPE_CHECKING:  # the consumer core is imported by its first use (coordinator/lazy.py)
    from ..consumer import ConsumerGroupManager


def hb_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    """The deadline of a member's session (or of a pending member's first join)."""
    return ("hb", group_id, member_id)


class ConsumerSide(Protocol):
    """The KIP-848 consumer groups as the classic paths see them (``ConsumerGroupRequests``)."""

    # a consumer group with a write in flight -> what waits behind it
    busy: dict[str, Any]

    def consumer_group_request(self, gid: str, retry: Callable[[], None], run: Callable[[], None]) -> None: ...
    def delete_consumer_group(
        self, gid: str, reason: str, on_done: Callable[[int | None], None] | None = None
    ) -> None: ...


class ClassicMigration(Protocol):
    """Classic requests a consumer group answers (``Migration``)."""

    def classic_join_to_consumer_group(
        self, v: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str
    ) -> None: ...
    def classic_sync(self, v: int, req: dict[str, Any], ctx: Any) -> None: ...
    def classic_leave(
        self, v: int, gid: str, identities: list[tuple[str, str | None, str | None]], ctx: Any
    ) -> None: ...


class ClassicGroupManager:
    def __init__(
        self,
        config: CoordinatorConfig,
        runtime: CoordinatorRuntime[Result],
        deadlines: Deadlines,
        group_records: dict[str, GroupMetadataValue],
        consumer: ConsumerGroupManager,
        *,
        log: Any,
        listener: CoordinatorListener,
    ) -> None:
        self.config = config
        self.rt = runtime
        self.deadlines = deadlines
        # persisted (the shard's replay folds records into it): each group's last durable record
        self.group_records = group_records
        self.consumer = consumer
        self.log = log
        # told about rebalances and expiries; the shell may replace it (through the shard)
        self.listener = listener
        self.groups: dict[str, ClassicGroup] = {}
        self._join_timer: dict[str, tuple[Any, ...]] = {}
        self._sync_timer_generation: dict[str, int] = {}
        # Whether per-heartbeat/per-commit debug lines are wanted, decided on first use (logging is
        # configured before requests arrive): every ``self.log.debug`` goes through structlog's
        # lazy proxy (~1.5 us) even when the level filters it out.
        self._debug_per_request: bool | None = None
        # collaborators wired by the shard once they exist (they need this manager too)
        self.offset_manager: OffsetManager
        self.consumer_side: ConsumerSide
        self.share_side: Any  # ShareGroupRequests, wired by the shard (share groups share the id namespace)
        self.migration: ClassicMigration

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_offsets_partitions)

    def route_error(self, group_id: str) -> int:
        return self.rt.route_error(partition_for(group_id, self.config.num_offsets_partitions))

    def append(self, group_id: str, records: list[Record], on_done: Callable[[int | None], None]) -> None:
        self.rt.append(partition_for(group_id, self.config.num_offsets_partitions), records, on_done)

    def on_loaded(self, partition: int) -> None:
        """Bring the loaded partition's classic groups to life (``GroupMetadataManager.onLoaded``):
        those with a group-metadata record, committed offsets or (as ``OffsetMetadataManager.replay``
        creates a simple group for one) a pending transactional offset, and no consumer group."""
        n, offsets = self.config.num_offsets_partitions, self.offset_manager
        gids = {g for g in (*self.group_records, *offsets.offsets) if partition_for(g, n) == partition}
        gids |= set(offsets.groups_with_pending_of(partition))
        for gid in sorted(gids - set(self.consumer.groups.groups)):
            if gid not in self.groups:
                self.materialize(gid)

    def on_unloaded(self, partition: int) -> int:
        """``GroupMetadataManager.onUnloaded``: a classic group of ``partition`` goes Dead, its
        members' pending JoinGroup (PreparingRebalance) and SyncGroup (CompletingRebalance/Stable)
        answered NOT_COORDINATOR; then the groups, their deadlines and their records leave memory.
        Returns how many groups."""
        n = self.config.num_offsets_partitions
        classic = [g for g in self.groups if partition_for(g, n) == partition]
        for gid in classic:
            group = self.groups[gid]
            for member in list(group.members.values()):
                waiter = member.join_waiter
                if waiter is not None:
                    response = join_response(waiter.version, err.NOT_COORDINATOR, member_id=member.member_id)
                    self.complete_join_waiter(group, member, response)
                self.complete_sync_waiter(member, sync_response(err.NOT_COORDINATOR))
            group.transition_to(D, self.rt.now)
            self.forget_group(self.groups.pop(gid))
        for gid in [g for g in self.group_records if partition_for(g, n) == partition]:
            del self.group_records[gid]  # leaves memory; a load replays it
        return len(classic)

    def heartbeat(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        # The general path: heartbeat_error's checks, every one (the reference of heartbeat_code's
        # short path, tests/coordinator/harness.py)
        code = self.heartbeat_error(
            req.get("group_id") or "",
            req.get("member_id") or "",
            int(req.get("generation_id", -1)),
            req.get("group_instance_id") if v >= 3 else None,
        )
        self.rt.respond(ctx, {"throttle_time_ms": 0, "error_code": code})

    def heartbeat_code(self, v: int, req: dict[str, Any]) -> int:
        """A Heartbeat's error code: it only checks its member and moves its session deadline later."""
        code = self.steady_heartbeat_code(v, req)
        if code is not None:
            return code
        instance_id = req.get("group_instance_id") if v >= 3 else None
        gid, member_id = req.get("group_id") or "", req.get("member_id") or ""
        return self.heartbeat_error(gid, member_id, int(req.get("generation_id", -1)), instance_id)

    def steady_heartbeat_code(self, v: int, req: dict[str, Any]) -> int | None:
        """``heartbeat_code`` of a dynamic member of a Stable group at its generation, the group's
        partition served here and no debug line per heartbeat: every check of heartbeat_error passes,
        in one frame (issue 26: its calls cost ~0.5 us of a ~6 us heartbeat), and nothing is logged.
        Else None, having changed nothing: the rest is heartbeat_error's to answer."""
        gid = req.get("group_id")
        group = self.groups.get(gid)  # type: ignore[arg-type]
        if (
            group is None
            or group.state is not S
            or (v >= 3 and req.get("group_instance_id") is not None)
            or req.get("generation_id") != group.generation
            or not gid
            or self._debug_per_request is not False
        ):
            return None
        member = group.members.get(req.get("member_id"))  # type: ignore[arg-type]
        rt = self.rt
        if member is None or rt.route_error(partition_for(gid, self.config.num_offsets_partitions)) != 0:
            return None
        deadline = rt.now + member.session_timeout_ms
        # The session moved later in the member's own deadline slot, as Deadlines.set would
        # (timers.Slot): Kafka's GroupMetadataManager.scheduleClassicGroupMemberHeartbeat cancels and
        # re-schedules the session timer; here its heap entry is re-checked when it surfaces. Else
        # (the first heartbeat since the slot went, a clock moving back) by key.
        slot = member.session
        if slot is not None and slot.due is not None and slot.live <= deadline:
            slot.due = deadline
        else:
            member.session = self.deadlines.set(hb_key(gid, member.member_id), deadline)
        return err.NONE

    def debug_enabled(self) -> bool:
        enabled = self._debug_per_request
        if enabled is None:
            try:
                enabled = bool(self.log.bind().is_enabled_for(logging.DEBUG))
            except AttributeError:  # a logger without level filtering: always call it
                enabled = True
            self._debug_per_request = enabled
        return enabled

    def glog(self, group: ClassicGroup, **kw: Any) -> Any:
        return self.log.bind(group=group.group_id, generation=group.generation, **kw)

    def fire(self, key: tuple[Any, ...]) -> None:
        """A deadline of a classic group is due: a session, a join phase or a sync phase."""
        kind = key[0]
        if kind == "hb":
            self.expire_member_heartbeat(key[1], key[2])
        elif kind == "join":
            self.fire_join_timer(key[1])
        elif kind == "sync":
            self.expire_pending_sync(key[1], self._sync_timer_generation.pop(key[1], -1))

    def forget_group(self, group: ClassicGroup) -> None:
        for mid in list(group.members) + list(group.pending_join_members):
            self.deadlines.cancel(hb_key(group.group_id, mid))
        self.deadlines.cancel(("join", group.group_id))
        self.deadlines.cancel(("sync", group.group_id))
        self._join_timer.pop(group.group_id, None)
        self._sync_timer_generation.pop(group.group_id, None)

    def materialize(self, group_id: str) -> ClassicGroup:
        """A live group rebuilt from persisted state (Kafka's GroupMetadataManager.replay + onLoaded)."""
        now = self.rt.now
        value = self.group_records.get(group_id)
        if value is None:
            # Offsets without group metadata: a standalone consumer's group.
            group = ClassicGroup(group_id, E, now)
            self.groups[group_id] = group
            return group
        group = ClassicGroup(
            group_id,
            S if value.members else E,
            value.current_state_timestamp if value.current_state_timestamp != -1 else now,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
        )
        for m in value.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[group_id] = group
        for member in group.members.values():
            self.reschedule_heartbeat(group, member)
        if len(group.members) > self.config.group_max_size:
            self.prepare_rebalance(group, f"loaded group is over capacity {self.config.group_max_size}")
        return group

    def restore_group(self, group_id: str) -> None:
        """Undo an in-memory removal whose tombstone could not be written."""
        if group_id not in self.groups and (
            group_id in self.group_records
            or group_id in self.offset_manager.offsets
            or self.offset_manager.has_pending(group_id)
        ):
            self.materialize(group_id)

    def complete_join_waiter(self, group: ClassicGroup, member: Member, response: dict[str, Any]) -> bool:
        waiter = group.set_join_waiter(member, None)
        if waiter is None:
            return False
        self.rt.respond(waiter.ctx, response)
        return True

    def complete_sync_waiter(self, member: Member, response: dict[str, Any]) -> bool:
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is None:
            return False
        self.rt.respond(waiter.ctx, response)
        return True

    def unpark_removed_member(self, group: ClassicGroup, member: Member) -> None:
        # Kafka answers a parked JoinGroup of a removed member with UNKNOWN_MEMBER_ID so that a
        # still-alive client retries. It leaves a parked SyncGroup unanswered; groupd answers it the
        # same way so that the connection is not stuck until the client's request timeout.
        if member.join_waiter is not None:
            w = member.join_waiter
            self.complete_join_waiter(group, member, join_response(w.version, err.UNKNOWN_MEMBER_ID))
        self.complete_sync_waiter(member, sync_response(err.UNKNOWN_MEMBER_ID))

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(CR):
            self.reset_and_propagate_assignment_with_error(group, err.REBALANCE_IN_PROGRESS)
        self.remove_sync_expiration(group)
        initial = group.is_in(E)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_join(group, delay, ("initial", delay, remaining))
        old_state = group.state
        group.transition_to(PR, self.rt.now)
        group.rebalance_started_ms = self.rt.now
        self.glog(group).info("rebalance_started", from_state=str(old_state), members=len(group.members), reason=reason)
        self.listener.rebalance_started(group.group_id, group.generation, len(group.members), reason)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _schedule_join(self, group: ClassicGroup, delay_ms: int, kind: tuple[Any, ...]) -> None:
        self._join_timer[group.group_id] = kind
        self.deadlines.set(("join", group.group_id), self.rt.now + max(delay_ms, 0))

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self.complete_join(group)
        else:
            self._schedule_join(group, group.rebalance_timeout_ms(), ("complete",))

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        # During the initial delay the timer alone completes the join, however many have joined.
        if group.is_in(PR) and group.previous_state is not E and group.has_all_members_joined():
            self.complete_join(group)

    def fire_join_timer(self, group_id: str) -> None:
        kind = self._join_timer.pop(group_id, None)
        group = self.groups.get(group_id)
        if group is None or kind is None:
            return
        if kind[0] == "initial":
            _, delay, remaining = kind
            if group.new_member_added and remaining != 0:
                # Members are still arriving: wait another step, never past the rebalance timeout.
                group.new_member_added = False
                new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                self._schedule_join(group, new_delay, ("initial", new_delay, max(remaining - delay, 0)))
                return
        self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.deadlines.cancel(("join", gid))
        self._join_timer.pop(gid, None)
        dropped = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in dropped:
            group.remove(member.member_id)
            self.deadlines.cancel(hb_key(gid, member.member_id))
            self.unpark_removed_member(group, member)
        if dropped:
            self.glog(group).info("members_removed_not_rejoined", removed=[m.member_id for m in dropped])
            for member in dropped:
                self.listener.member_expired(gid, member.member_id, group.generation, events.REBALANCE_TIMEOUT)
        if group.is_in(D):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for them or their expiry.
            self.glog(group).warning("rebalance_postponed_no_member_rejoined", members=len(group.members))
            self._schedule_join(group, group.rebalance_timeout_ms(), ("complete",))
            return
        group.init_next_generation(self.rt.now)
        started = group.rebalance_started_ms
        duration = None if started is None else self.rt.now - started
        if group.is_in(E):
            self.glog(group).info("group_empty", duration_ms=duration)
            group.rebalance_started_ms = None
            self.listener.rebalance_completed(gid, group.generation, 0, duration, events.EMPTY)
            record = self.group_metadata_record(group, {})

            def done(error: int | None) -> None:
                if error is not None:
                    # Harmless: the previous generation in the log has no live members either way.
                    self.glog(group).warning("empty_group_metadata_not_stored", error=error)

            self.append(gid, [(GroupMetadataKey(gid), record)], done)
            return
        self.glog(group).info(
            "join_phase_completed",
            members=len(group.members),
            protocol=group.protocol_name,
            leader=group.leader_id,
            duration_ms=duration,
        )
        for member in group.members.values():
            waiter = member.join_waiter
            if waiter is not None:
                resp = group_join_response(
                    group, waiter, member.member_id, with_members=group.is_leader(member.member_id)
                )
                self.complete_join_waiter(group, member, resp)
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._sync_timer_generation[gid] = group.generation
        self.deadlines.set(("sync", gid), self.rt.now + group.rebalance_timeout_ms())

    def group_metadata_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(group.protocol_name),
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in group.members.values()
            ),
        )

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.session = self.deadlines.set(hb_key(group.group_id, member.member_id), self.rt.now + timeout)

    def expire_member_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(D):
            return
        if group.is_pending_member(member_id):
            group.remove(member_id)
            self.glog(group, member=member_id).info("pending_member_expired")
            self.listener.member_expired(group_id, member_id, group.generation, events.PENDING)
            if group.is_in(PR) and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        # A new member parked in its first JoinGroup is bounded by the new-member join timeout,
        # not its session (see JoinGroupHandler._add_member_and_rebalance).
        reason = events.NEW_MEMBER_JOIN_TIMEOUT if member.is_new else events.SESSION_TIMEOUT
        self.glog(group, member=member_id).info(
            "member_expired",
            state=str(group.state),
            session_timeout_ms=member.session_timeout_ms,
            reason=reason,
        )
        self.listener.member_expired(group_id, member_id, group.generation, reason)
        self.remove_member_and_update_group(group, member, f"member {member_id} session expired")

    def remove_member_and_update_group(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self.unpark_removed_member(group, member)
        group.remove(member.member_id)
        self.deadlines.cancel(hb_key(group.group_id, member.member_id))
        if group.is_in(S, CR):
            self.maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(PR) and group.has_all_members_joined():
            self.complete_join(group)

    def remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.deadlines.cancel(("sync", group.group_id))
        self._sync_timer_generation.pop(group.group_id, None)

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(CR, S) or not group.pending_sync_members:
            self.deadlines.cancel(("sync", group.group_id))
            self._sync_timer_generation.pop(group.group_id, None)

    def expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation or not group.is_in(CR, S):
            return
        if not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        for mid in missing:
            member = group.remove(mid)
            self.deadlines.cancel(hb_key(group_id, mid))
            if member is not None:
                self.unpark_removed_member(group, member)
        self.glog(group).info("members_removed_no_sync", removed=missing, state=str(group.state))
        for mid in missing:
            self.listener.member_expired(group_id, mid, generation, events.REBALANCE_TIMEOUT)
        self.prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ok = error == err.NONE
        for member in group.members.values():
            resp = sync_response(
                error,
                member.assignment,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
            )
            if self.complete_sync_waiter(member, resp):
                # Sessions that ran out while the member was parked were forgiven; start afresh.
                self.reschedule_heartbeat(group, member)

    def validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        """``ClassicGroup.validateMember``, logging a fenced static member as Kafka does."""
        code = group.validate_member(member_id, instance_id)
        if code == err.FENCED_INSTANCE_ID:
            self.glog(group, member=member_id).info("fenced_instance_id", instance=instance_id)
        return code

    def sync_group(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        gid = req.get("group_id") or ""
        member_id = req.get("member_id") or ""
        generation = int(req.get("generation_id", -1))
        instance_id = req.get("group_instance_id") if v >= 3 else None
        ptype = req.get("protocol_type") if v >= 5 else None
        pname = req.get("protocol_name") if v >= 5 else None

        def fail(code: int) -> None:
            self.rt.respond(ctx, sync_response(code))

        if v >= 5 and (ptype is None or pname is None):
            # Mandatory from v5 (KIP-559): KafkaApis.handleSyncGroupRequest answers this before
            # anything else, the group id and the ACL check included
            # (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent).
            return fail(err.INCONSISTENT_GROUP_PROTOCOL)
        if not gid:
            return fail(err.INVALID_GROUP_ID)
        code = self.route_error(gid)
        if code:
            return fail(code)
        if gid not in self.groups and self.consumer.group(gid) is not None:
            return self.consumer_side.consumer_group_request(
                gid, lambda: self.sync_group(v, req, ctx, _cid, _host), lambda: self.migration.classic_sync(v, req, ctx)
            )
        group = self.groups.get(gid)
        if group is None or group.is_in(E):
            return fail(err.UNKNOWN_MEMBER_ID)
        if group.is_in(D):
            return fail(err.COORDINATOR_NOT_AVAILABLE)
        code = self.validate_member(group, member_id, instance_id)
        if code:
            return fail(code)
        if generation != group.generation:
            return fail(err.ILLEGAL_GENERATION)
        if (ptype is not None and group.protocol_type is not None and ptype != group.protocol_type) or (
            pname is not None and group.protocol_name is not None and pname != group.protocol_name
        ):
            return fail(err.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(PR):
            return fail(err.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.is_in(S):
            self.remove_pending_sync_member(group, member_id)
            return self.rt.respond(
                ctx,
                sync_response(err.NONE, member.assignment, group.protocol_type, group.protocol_name),
            )
        # CompletingRebalance: park until the leader's assignment is durable.
        old = member.sync_waiter
        member.sync_waiter = Waiter(ctx, v)
        if old is not None:
            self.rt.respond(old.ctx, sync_response(err.REBALANCE_IN_PROGRESS))
        self.remove_pending_sync_member(group, member_id)
        if not group.is_leader(member_id):
            return
        assignment: dict[str, bytes] = {}
        for a in req.get("assignments") or []:
            assignment[a.get("member_id") or ""] = bytes(a.get("assignment") or b"")
        missing = [mid for mid in group.members if mid not in assignment]
        for mid in missing:
            assignment[mid] = b""
        assignment = {mid: assignment[mid] for mid in group.members}  # members of this generation only
        self.glog(group, member=member_id).info(
            "assignment_received", members=len(group.members), missing=missing or None
        )
        record = self.group_metadata_record(group, assignment)

        def done(error: int | None) -> None:
            # Another member may have joined while the record was being written; then this
            # generation is over and its assignment is moot.
            if group is not self.groups.get(gid) or not group.is_in(CR) or group.generation != generation:
                return
            if error is not None:
                code = err.append_error_to_response_error(error)
                self.reset_and_propagate_assignment_with_error(group, code)
                self.maybe_prepare_rebalance_or_complete_join(group, f"error {code} storing the assignment")
                return
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, b"")
            self.propagate_assignment(group, err.NONE)
            group.transition_to(S, self.rt.now)
            started = group.rebalance_started_ms
            duration = None if started is None else self.rt.now - started
            self.glog(group).info(
                "rebalance_completed",
                members=len(group.members),
                protocol=group.protocol_name,
                leader=group.leader_id,
                duration_ms=duration,
            )
            group.rebalance_started_ms = None
            self.listener.rebalance_completed(gid, generation, len(group.members), duration, events.STABLE)

        self.append(gid, [(GroupMetadataKey(gid), record)], done)

    def heartbeat_error(self, gid: str, member_id: str, generation: int, instance_id: str | None) -> int:
        if not gid:
            return err.INVALID_GROUP_ID
        code = self.route_error(gid)
        if code:
            # Kafka's GroupCoordinatorService.heartbeat maps COORDINATOR_LOAD_IN_PROGRESS to NONE
            # ("the group is still loading, so blindly respond"): the member keeps its session.
            return err.NONE if code == err.COORDINATOR_LOAD_IN_PROGRESS else code
        group = self.groups.get(gid)
        if group is None:
            if self.consumer.group(gid) is not None:
                # classicGroupHeartbeatToConsumerGroup (on the group as it is, as Kafka's heartbeats)
                return self.consumer.classic_heartbeat(self.rt.now, gid, member_id, generation, instance_id)
            return err.UNKNOWN_MEMBER_ID
        # The hot path of a steady group: identity checks on the state and dict lookups only, and
        # no log line (even a filtered debug call paid for building its arguments every time).
        state = group.state
        if state is D:
            return err.COORDINATOR_NOT_AVAILABLE
        code = self.validate_member(group, member_id, instance_id)
        if code:
            return code
        if generation != group.generation:
            return err.ILLEGAL_GENERATION
        if state is E:
            return err.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        member.session = self.deadlines.set(hb_key(gid, member_id), self.rt.now + member.session_timeout_ms)
        if self.debug_enabled():  # README: --log-level debug shows every heartbeat
            self.log.debug("heartbeat", group=gid, member=member_id, generation=generation, state=state.value)
        return err.REBALANCE_IN_PROGRESS if state is PR else err.NONE

    def leave_group(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        gid = req.get("group_id") or ""
        if v >= 3:
            identities = [
                (m.get("member_id") or "", m.get("group_instance_id"), m.get("reason"))
                for m in req.get("members") or []
            ]
        else:
            identities = [(req.get("member_id") or "", None, None)]

        def top(code: int) -> None:
            self.rt.respond(ctx, {"throttle_time_ms": 0, "error_code": code, "members": []})

        if not gid:
            return top(err.INVALID_GROUP_ID)
        code = self.route_error(gid)
        if code:
            return top(code)
        if gid not in self.groups and self.consumer.group(gid) is not None:
            return self.consumer_side.consumer_group_request(
                gid,
                lambda: self.leave_group(v, req, ctx, _cid, _host),
                lambda: self.migration.classic_leave(v, gid, identities, ctx),
            )
        group = self.groups.get(gid)
        if group is None:
            if v >= 3:
                # GroupCoordinatorService.leaveGroup: "Group was not found" is no top-level error
                # from v3, each member named is answered UNKNOWN_MEMBER_ID.
                members = [
                    {"member_id": mid, "group_instance_id": iid, "error_code": err.UNKNOWN_MEMBER_ID}
                    for mid, iid, _reason in identities
                ]
                return self.rt.respond(ctx, {"throttle_time_ms": 0, "error_code": err.NONE, "members": members})
            return top(err.UNKNOWN_MEMBER_ID)
        if group.is_in(D):
            return top(err.COORDINATOR_NOT_AVAILABLE)

        results: list[dict[str, Any]] = []
        left = 0
        for member_id, instance_id, reason in identities:
            code = err.NONE
            if not member_id:
                # Admin removal by instance id alone.
                target = group.static_members.get(instance_id) if instance_id is not None else None
                if target is None:
                    code = err.UNKNOWN_MEMBER_ID
                else:
                    self._remove_current_member(group, target, reason)
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.deadlines.cancel(hb_key(gid, member_id))
                self.glog(group, member=member_id).info("pending_member_left", reason=reason)
            else:
                code = self.validate_member(group, member_id, instance_id)
                if not code:
                    self._remove_current_member(group, member_id, reason)
            if not code:
                left += 1
            results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})

        if left:
            if group.is_in(S, CR):
                self.maybe_prepare_rebalance_or_complete_join(group, f"{left} member(s) left")
            elif group.is_in(PR):
                self.maybe_complete_join_phase(group)

        self.rt.respond(ctx, leave_response(v, results))

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.members[member_id]
        self.deadlines.cancel(hb_key(group.group_id, member_id))
        self.log.info(
            "member_left",
            group=group.group_id,
            generation=group.generation,
            member=member_id,
            instance=member.group_instance_id,
            state=group.state.value,
            reason=reason,
        )
        self.unpark_removed_member(group, member)
        group.remove(member_id)

    def expire_member(self, group_id: str, member_id: str) -> int:
        """Expire a classic member's session now (fault injection): what its session deadline would
        do when it fires (Kafka's ``onExpireHeartbeat``), whether or not the member is parked.
        Answers NONE, GROUP_ID_NOT_FOUND or UNKNOWN_MEMBER_ID with the Result to apply. A share
        group's member is fenced as when its session expires (``ShareGroupRequests.expire_member``)."""
        if self.share_side.is_share_group(group_id):
            return int(self.share_side.expire_member(group_id, member_id))
        group = self.groups.get(group_id)
        if group is None or group.is_in(D):
            return err.GROUP_ID_NOT_FOUND
        member = group.members.get(member_id)
        if member is None:
            return err.UNKNOWN_MEMBER_ID
        self.glog(group, member=member_id).info("member_expired", state=str(group.state), reason="injected")
        self.listener.member_expired(group_id, member_id, group.generation, events.SESSION_TIMEOUT)
        self.remove_member_and_update_group(group, member, f"member {member_id} session expired (injected)")
        return err.NONE

    def trigger_rebalance(self, group_id: str, reason: str) -> int:
        """Start a rebalance of a classic group with members (fault injection), as a member joining
        with new metadata would (Kafka's ``prepareRebalance``): members learn it from their next
        heartbeat (REBALANCE_IN_PROGRESS) and rejoin. Answers NONE, GROUP_ID_NOT_FOUND, or
        REBALANCE_IN_PROGRESS for a group already rebalancing or with no member to rebalance."""
        group = self.groups.get(group_id)
        if group is None or group.is_in(D):
            return err.GROUP_ID_NOT_FOUND
        if not group.is_in(S, CR) or not group.members:
            return err.REBALANCE_IN_PROGRESS
        self.prepare_rebalance(group, reason)
        return err.NONE
