"""JoinGroup on a classic group (Kafka's ``GroupMetadataManager.classicGroupJoin`` and the paths it
takes: a new member, a known member, a static member replacing its old id), and on a consumer group
that classic members join (handed to the migration side)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from .. import errors as err
from ..records import GroupMetadataKey, GroupMetadataValue
from .group import CR, PR, ClassicGroup, D, E, Member, S, Waiter
from .manager import ClassicGroupManager, hb_key
from .responses import group_join_response, join_response, sync_response


class JoinGroupHandler:
    """JoinGroup through the classic group manager: the group's phases and timers stay there."""

    def __init__(self, classic: ClassicGroupManager, uuid_factory: Callable[[], str] | None = None) -> None:
        self.classic = classic
        self.rt = classic.rt
        self.config = classic.config
        self.log = classic.log
        self.groups = classic.groups
        self.deadlines = classic.deadlines
        self._uuid = uuid_factory or (lambda: str(uuid.uuid4()))

    def join_group(self, v: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str) -> None:
        gid = req.get("group_id") or ""
        member_id = req.get("member_id") or ""
        instance_id = req.get("group_instance_id") if v >= 5 else None
        session_timeout = int(req.get("session_timeout_ms", 0))
        cfg = self.config

        def fail(code: int, mid: str = member_id) -> None:
            self.rt.respond(ctx, join_response(v, code, member_id=mid))

        if not gid:
            return fail(err.INVALID_GROUP_ID)
        if not cfg.group_min_session_timeout_ms <= session_timeout <= cfg.group_max_session_timeout_ms:
            return fail(err.INVALID_SESSION_TIMEOUT)
        code = self.classic.route_error(gid)
        if code:
            return fail(code)
        if self.classic.share_side.is_share_group(gid):
            # classicGroupJoin: a group of another type (not consumer or classic) refuses the member
            return fail(err.INCONSISTENT_GROUP_PROTOCOL, "")
        consumer_group = self.classic.consumer.group(gid)
        busy = self.classic.consumer_side.busy.get(gid) if consumer_group is not None else None
        if busy is not None:
            # a write of the consumer group is in flight and may yet be rolled back: the join waits
            busy.append(lambda: self.join_group(v, req, ctx, client_id, client_host))
            return None
        if consumer_group is not None:
            if consumer_group.members:
                # classicGroupJoin: a non-empty consumer group answers classic members itself
                return self.classic.migration.classic_join_to_consumer_group(v, req, ctx, client_id, client_host)
            # maybeDeleteEmptyConsumerGroup: the empty consumer group makes way for a classic one
            self.classic.consumer_side.delete_consumer_group(gid, "replaced by a classic group")

        group = self.groups.get(gid)
        new_group = group is None
        if group is None:
            if member_id:
                # A member id for a group that does not exist: it was deleted or expired under it.
                return fail(err.UNKNOWN_MEMBER_ID)
            group = ClassicGroup(gid, E, self.rt.now)
            self.groups[gid] = group
        appends_before = len(self.rt.out.appends)
        self._join_to_group(v, req, ctx, group, member_id, instance_id, client_id, client_host)
        if new_group and len(self.rt.out.appends) == appends_before:
            self._store_new_empty_group(group)

    def _store_new_empty_group(self, group: ClassicGroup) -> None:
        """Persist a group that a join created without writing anything (MEMBER_ID_REQUIRED, ...).

        GroupMetadataManager.classicGroupJoinToClassicGroup: "if a group was newly created, we need
        to append records to the log to commit the group", an empty group-metadata record
        (GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord), so that the group outlives a
        restart. If the write fails Kafka reverts the group's creation (the snapshot before it):
        here too, unless a generation has completed since, and a join still parked gets the error.
        """
        gid = group.group_id
        record = GroupMetadataValue(
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=group.state_timestamp,
        )

        def done(error: int | None) -> None:
            if error is None or self.groups.get(gid) is not group or group.generation != 0:
                return
            self.classic.glog(group).warning("new_group_metadata_not_stored", error=error)
            code = err.append_error_to_response_error(error)
            for member in list(group.members.values()):
                waiter = group.set_join_waiter(member, None)
                if waiter is not None:
                    self.rt.respond(waiter.ctx, join_response(waiter.version, code, member_id=member.member_id))
            group.transition_to(D, self.rt.now)
            self.classic.forget_group(group)
            del self.groups[gid]

        self.classic.append(gid, [(GroupMetadataKey(gid), record)], done)

    def _join_to_group(
        self,
        v: int,
        req: dict[str, Any],
        ctx: Any,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
    ) -> None:
        gid = group.group_id
        session_timeout = int(req.get("session_timeout_ms", 0))
        rebalance_timeout = int(req.get("rebalance_timeout_ms", -1)) if v >= 1 else -1
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout  # JoinGroup v0 has one timeout for both
        protocol_type = req.get("protocol_type") or ""
        protocols = [(p.get("name") or "", bytes(p.get("metadata") or b"")) for p in req.get("protocols") or []]
        waiter = Waiter(ctx, v)

        if not self._accept_joining_member(group, member_id):
            removed = group.remove(member_id)
            if removed is not None:
                self.deadlines.cancel(hb_key(gid, member_id))
                self.classic.unpark_removed_member(group, removed)
            return self.rt.respond(ctx, join_response(v, err.GROUP_MAX_SIZE_REACHED, member_id=""))

        ident = (
            instance_id,
            client_id,
            client_host,
            session_timeout,
            rebalance_timeout,
            protocol_type,
            protocols,
        )
        reason = req.get("reason")
        if not member_id:
            self._join_new_member(group, v, waiter, ident, reason)
        else:
            self._join_existing_member(group, v, waiter, member_id, ident, reason)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.is_in(E, D):
            return True
        if group.is_in(PR):
            # Counting members already parked (not all members) lets a shrunk max size kick out
            # the last members to rejoin, as in Kafka.
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, v: int, waiter: Waiter, ident: tuple, reason: str | None) -> None:
        instance_id, client_id, _host, session_timeout, _rt, protocol_type, protocols = ident
        if group.is_in(D):
            return self.rt.respond(waiter.ctx, join_response(v, err.COORDINATOR_NOT_AVAILABLE))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return self.rt.respond(waiter.ctx, join_response(v, err.INCONSISTENT_GROUP_PROTOCOL))
        new_id = f"{instance_id if instance_id is not None else client_id}-{self._uuid()}"
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is not None:
                return self._replace_static_member(group, waiter, existing, new_id, ident, reason)
            return self._add_member_and_rebalance(group, waiter, new_id, ident, reason)
        if v >= 4:
            # KIP-394: hand out the id first, so a client that times out and retries does not leave
            # a ghost member behind; the id is forgotten if it does not come back in time.
            group.pending_join_members.add(new_id)
            self.deadlines.set(hb_key(group.group_id, new_id), self.rt.now + session_timeout)
            # debug, not info: a protocol handshake step every new member goes through (the
            # member_joined that follows is the event); at info it was a third of the log volume,
            # and of the server CPU, of a 1,000-member rebalance.
            self.log.debug(
                "member_id_required",
                group=group.group_id,
                member=new_id,
                generation=group.generation,
                state=group.state.value,
            )
            return self.rt.respond(waiter.ctx, join_response(v, err.MEMBER_ID_REQUIRED, member_id=new_id))
        return self._add_member_and_rebalance(group, waiter, new_id, ident, reason)

    def _join_existing_member(
        self, group: ClassicGroup, v: int, waiter: Waiter, member_id: str, ident: tuple, reason: str | None
    ) -> None:
        instance_id, _cid, _host, _st, _rt, protocol_type, protocols = ident
        ctx = waiter.ctx
        if group.is_in(D):
            return self.rt.respond(ctx, join_response(v, err.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return self.rt.respond(ctx, join_response(v, err.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        if group.is_pending_member(member_id):
            if instance_id is not None:
                return self.rt.respond(ctx, join_response(v, err.INVALID_REQUEST, member_id=member_id))
            return self._add_member_and_rebalance(group, waiter, member_id, ident, reason)
        code = self.classic.validate_member(group, member_id, instance_id)
        if code:
            return self.rt.respond(ctx, join_response(v, code, member_id=member_id))
        member = group.members[member_id]
        if group.is_in(PR):
            return self._update_member_and_rebalance(group, member, waiter, ident, "rejoin during PreparingRebalance")
        if group.is_in(CR):
            if member.matches(protocols):
                # It missed its JoinGroup answer (the seeds' lost-response cases): answer again.
                return self.rt.respond(
                    ctx,
                    group_join_response(group, waiter, member_id, with_members=group.is_leader(member_id)),
                )
            return self._update_member_and_rebalance(group, member, waiter, ident, "metadata changed")
        if group.is_in(S):
            if group.is_leader(member_id):
                # The leader rejoining is how a client asks for a new assignment (e.g. metadata changed).
                return self._update_member_and_rebalance(group, member, waiter, ident, "leader rejoined")
            if not member.matches(protocols):
                return self._update_member_and_rebalance(group, member, waiter, ident, "metadata changed")
            return self.rt.respond(ctx, group_join_response(group, waiter, member_id, with_members=False))
        # Empty with a known member id cannot happen with members present; tell it to start over.
        return self.rt.respond(ctx, join_response(v, err.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _add_member_and_rebalance(
        self, group: ClassicGroup, waiter: Waiter, member_id: str, ident: tuple, reason: str | None
    ) -> None:
        instance_id, client_id, client_host, session_timeout, rebalance_timeout, protocol_type, protocols = ident
        member = Member(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=session_timeout,
            protocol_type=protocol_type,
            protocols=protocols,
            is_new=True,
        )
        if group.is_in(PR) and group.previous_state is E:
            group.new_member_added = True
        group.add(member, waiter)
        # A parked new member cannot heartbeat and a parked socket reveals no disconnect, so its
        # join is bounded separately; a client still alive simply retries.
        self.deadlines.set(
            hb_key(group.group_id, member_id), self.rt.now + self.config.group_new_member_join_timeout_ms
        )
        # The fields glog would bind, passed directly: binding a logger per member cost ~2 us.
        self.log.info(
            "member_joined",
            group=group.group_id,
            generation=group.generation,
            member=member_id,
            instance=instance_id,
            client_id=client_id,
            state=group.state.value,
            members=len(group.members),
            reason=reason,
        )
        self.classic.maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, waiter: Waiter, ident: tuple, reason: str
    ) -> None:
        _iid, _cid, _host, session_timeout, rebalance_timeout, _ptype, protocols = ident
        old = group.update_member(member, protocols, rebalance_timeout, session_timeout, waiter)
        if old is not None and old is not waiter:
            # A second JoinGroup for a parked member (a retry on another connection): Kafka drops the
            # first silently; answering it keeps that connection from waiting for nothing.
            self.rt.respond(
                old.ctx,
                join_response(old.version, err.REBALANCE_IN_PROGRESS, member_id=member.member_id),
            )
        self.classic.glog(group, member=member.member_id).info("member_rejoined", state=str(group.state), reason=reason)
        self.classic.maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id}: {reason}")

    def _replace_static_member(
        self, group: ClassicGroup, waiter: Waiter, old_id: str, new_id: str, ident: tuple, reason: str | None
    ) -> None:
        instance_id, _cid, _host, session_timeout, rebalance_timeout, _ptype, protocols = ident
        old_leader = group.leader_id
        old_member, new_member = group.replace_static_member(instance_id, old_id, new_id)
        # Whoever still holds the old id is a zombie of the same instance: fence it now.
        if old_member.join_waiter is not None:
            w, old_member.join_waiter = old_member.join_waiter, None
            self.rt.respond(w.ctx, join_response(w.version, err.FENCED_INSTANCE_ID, member_id=old_id))
        self.classic.complete_sync_waiter(old_member, sync_response(err.FENCED_INSTANCE_ID))
        self.deadlines.cancel(hb_key(group.group_id, old_id))
        self.classic.reschedule_heartbeat(group, new_member)
        old_protocols = new_member.protocols
        old_timeouts = (new_member.rebalance_timeout_ms, new_member.session_timeout_ms)
        group.update_member(new_member, protocols, rebalance_timeout, session_timeout, waiter)
        self.classic.glog(group, member=new_id).info(
            "static_member_replaced", instance=instance_id, old_member=old_id, state=str(group.state)
        )

        if group.is_in(S):
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: no rebalance, just persist the new id.
                self._store_static_replacement(group, new_member, old_id, old_leader, old_protocols, old_timeouts)
                return
            return self.classic.maybe_prepare_rebalance_or_complete_join(
                group, f"static member {instance_id} changed protocol"
            )
        if group.is_in(CR):
            # The leader may already be assigning with the old member id; only a new round is safe.
            return self.classic.prepare_rebalance(
                group, f"static member {instance_id} rejoined during CompletingRebalance"
            )
        self.classic.maybe_complete_join_phase(group)

    def _store_static_replacement(
        self,
        group: ClassicGroup,
        member: Member,
        old_id: str,
        old_leader: str | None,
        old_protocols: list[tuple[str, bytes]],
        old_timeouts: tuple[int, int],
    ) -> None:
        assignment = {m.member_id: m.assignment for m in group.members.values()}
        record = self.classic.group_metadata_record(group, assignment)
        generation = group.generation
        new_id = member.member_id

        def done(error: int | None) -> None:
            waiter = member.join_waiter
            if group is not self.groups.get(group.group_id) or group.members.get(new_id) is not member:
                return
            if error is not None and group.is_in(S) and group.generation == generation:
                # Not durable: put the old member id back, as Kafka does, and tell the newcomer.
                group.update_member(member, old_protocols, old_timeouts[0], old_timeouts[1], None)
                _, restored = group.replace_static_member(member.group_instance_id or "", new_id, old_id)
                self.deadlines.cancel(hb_key(group.group_id, new_id))
                self.classic.reschedule_heartbeat(group, restored)
                if waiter is not None:
                    resp = join_response(
                        waiter.version,
                        err.append_error_to_response_error(error),
                        generation=generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=old_leader or "",
                    )
                    self.rt.respond(waiter.ctx, resp)
                return
            if waiter is None or error is not None:
                return
            group.set_join_waiter(member, None)
            if waiter.version >= 9:
                is_leader = group.is_leader(new_id)
                resp = group_join_response(group, waiter, new_id, with_members=is_leader, skip=is_leader)
            else:
                # Before v9 a static leader must not learn it is the leader, or it would reassign
                # and trigger the rebalance this path exists to avoid; it is told the old leader id.
                resp = group_join_response(group, waiter, new_id, with_members=False)
                resp["leader"] = old_leader or ""
            self.rt.respond(waiter.ctx, resp)

        self.classic.append(group.group_id, [(GroupMetadataKey(group.group_id), record)], done)
