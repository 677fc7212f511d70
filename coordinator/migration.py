"""Migration between the classic and the consumer protocol (KIP-848's upgrade path): a live classic
group upgraded by a ConsumerGroupHeartbeat (``GroupMetadataManager.convertToConsumerGroup``), a
consumer group downgraded when its last consumer-protocol member leaves (``convertToClassicGroup``),
and the classic JoinGroup/SyncGroup/LeaveGroup of members of a consumer group
(``classicGroupJoinToConsumerGroup`` and its siblings)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from . import errors as err
from .classic.group import ClassicGroup, Member, S
from .classic.manager import ClassicGroupManager
from .classic.responses import join_response, leave_response, sync_response
from .consumer_protocol import ConsumerProtocolError, decode_subscription
from .records import GroupMetadataKey, Record
from .result import Result
from .runtime import CoordinatorRuntime

if TYPE_CHECKING:  # the consumer core is imported by its first use (coordinator/lazy.py)
    from .consumer import ConsumerGroup, ConsumerGroupManager
    from .consumer.manager import Downgrade


class ConsumerWrites(Protocol):
    """The consumer groups' writes as the migration sees them (``ConsumerGroupRequests``)."""

    snapshots: dict[str, ConsumerGroup | None]

    def snapshot(self, gid: str) -> None: ...
    def write_then(self, gid: str, records: list[Record], answer: Callable[[int], None]) -> None: ...


class Migration:
    def __init__(
        self,
        runtime: CoordinatorRuntime[Result],
        consumer: ConsumerGroupManager,
        classic: ClassicGroupManager,
        consumer_side: ConsumerWrites,
        *,
        log: Any,
    ) -> None:
        self.rt = runtime
        self.consumer = consumer
        self.classic = classic
        self.group_records = classic.group_records
        self.consumer_side = consumer_side
        self.log = log
        # how to bring back a classic group an upgrade replaced if the upgrade's write fails
        self.undo: dict[str, Callable[[], None]] = {}

    def online_upgrade_refusal(self, classic: ClassicGroup, req: dict[str, Any]) -> str | None:
        """``validateOnlineUpgrade`` (why a ConsumerGroupHeartbeat may not turn this live classic group
        into a consumer group), or None when it may."""
        gid = classic.group_id
        refused = f"Group {gid} is not a consumer group."
        if req.get("member_epoch") != 0:
            return refused
        if not self.consumer.config.upgrade_enabled:
            self.log.info("online_upgrade_refused", group=gid, reason="the online upgrade is disabled")
            return refused
        if not classic.uses_consumer_protocol() or not classic.members:
            self.log.info("online_upgrade_refused", group=gid, reason="not the consumer embedded protocol")
            return refused
        if len(classic.members) > self.consumer.config.max_size:
            self.log.info("online_upgrade_refused", group=gid, reason="larger than group.consumer.max.size")
            return refused
        return None

    def convert_to_consumer_group(self, classic: ClassicGroup, pre: list[Record]) -> str | None:
        """``convertToConsumerGroup``: parked JoinGroup/SyncGroup requests get REBALANCE_IN_PROGRESS (the
        members rejoin the consumer group), the classic group's tombstone goes into ``pre`` and the
        consumer group's records are applied (``ConsumerGroup.fromClassicGroup``). A refusal's message
        when the embedded protocol cannot be read."""
        from .consumer.manager import ClassicMemberSpec, UpgradeRefused  # built by now (self.consumer)

        gid = classic.group_id
        specs = [
            ClassicMemberSpec(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                tuple(m.protocols),
                m.assignment,
            )
            for m in classic.members.values()
        ]
        self.consumer_side.snapshot(gid)
        try:
            converted = self.consumer.convert_from_classic(
                self.rt.now, gid, classic.generation, classic.protocol_name, specs
            )
        except UpgradeRefused as e:  # malformed embedded protocol, user data, a partition twice
            self.consumer_side.snapshots.pop(gid, None)
            return e.message
        for member in list(classic.members.values()):
            if member.join_waiter is not None:
                w = member.join_waiter
                self.classic.complete_join_waiter(
                    classic,
                    member,
                    join_response(w.version, err.REBALANCE_IN_PROGRESS, member_id=member.member_id),
                )
            self.classic.complete_sync_waiter(member, sync_response(err.REBALANCE_IN_PROGRESS))
        self.classic.forget_group(self.classic.groups.pop(gid))
        old_record = self.group_records.pop(gid, None)
        pre.append((GroupMetadataKey(gid), None))
        pre.extend(converted)  # type: ignore[arg-type]

        def undo() -> None:
            if old_record is not None:
                self.group_records[gid] = old_record
            self.classic.restore_group(gid)

        self.undo[gid] = undo
        self.log.info("group_upgraded", group=gid, members=len(specs), generation=classic.generation)
        return None

    def convert_to_classic_group(self, d: Downgrade) -> Record:
        """``convertToClassicGroup`` / ``ClassicGroup.fromConsumerGroup``: the classic members that stay
        form a Stable classic group at the group epoch, each with its target assignment, and a rebalance
        starts at once. Applied now (Kafka updates the state directly too); its record returned."""
        cg = d.group
        gid = cg.group_id
        group = ClassicGroup(gid, S, self.rt.now, generation=cg.group_epoch, protocol_type="consumer")
        versions: dict[str, int] = {}
        for mid, m in cg.members.items():
            if mid in d.leaving or m.classic is None:
                continue
            protocols = [(p.name, p.metadata) for p in m.classic.supported_protocols]
            group.add(
                Member(
                    member_id=mid,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.classic.session_timeout_ms,
                    protocol_type="consumer",
                    protocols=protocols,
                ),
                None,
            )
            try:
                versions[mid] = decode_subscription(protocols[0][1]).version if protocols else 0
            except ConsumerProtocolError:
                versions[mid] = 0
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        for mid, member in group.members.items():
            member.assignment = self.consumer.assignment_bytes(cg.target.get(mid, {}), versions[mid])
        value = self.classic.group_metadata_record(group, {mid: m.assignment for mid, m in group.members.items()})
        self.classic.groups[gid] = group
        self.group_records[gid] = value
        for member in group.members.values():
            self.classic.reschedule_heartbeat(group, member)
        self.log.info("group_downgraded", group=gid, members=len(group.members), generation=group.generation)
        if d.rebalance:
            self.classic.prepare_rebalance(group, f"Downgrade group {gid} from consumer to classic.")
        return (GroupMetadataKey(gid), value)

    def classic_join_to_consumer_group(
        self, v: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str
    ) -> None:
        """``classicGroupJoinToConsumerGroup``: answered when its records are durable."""
        gid = req["group_id"]
        result = self.consumer.classic_join(self.rt.now, req, v, client_id=client_id, client_host=client_host)
        r = result.response
        if r["error_code"] != err.NONE:
            self.rt.respond(ctx, join_response(v, r["error_code"], member_id=r.get("member_id") or ""))
            return

        def answer(code: int) -> None:
            if code != err.NONE:
                self.rt.respond(ctx, join_response(v, code, member_id=r["member_id"]))
                return
            self.rt.respond(
                ctx,
                join_response(
                    v,
                    err.NONE,
                    member_id=r["member_id"],
                    generation=r["generation_id"],
                    protocol_type="consumer",
                    protocol_name=r["protocol_name"],
                ),
            )

        self.consumer_side.write_then(gid, list(result.records), answer)

    def classic_sync(self, v: int, req: dict[str, Any], ctx: Any) -> None:
        """``classicGroupSyncToConsumerGroup``."""
        r = self.consumer.classic_sync(self.rt.now, req, v)
        if r["error_code"] != err.NONE:
            self.rt.respond(ctx, sync_response(r["error_code"]))
            return
        self.rt.respond(ctx, sync_response(err.NONE, r["assignment"], r["protocol_type"], r["protocol_name"]))

    def classic_leave(self, v: int, gid: str, identities: list[tuple[str, str | None, str | None]], ctx: Any) -> None:
        """``classicGroupLeaveToConsumerGroup``: answered when the removal is durable."""
        codes, records = self.consumer.classic_leave(self.rt.now, gid, [(mid, iid) for mid, iid, _r in identities])
        results = [
            {"member_id": mid, "group_instance_id": iid, "error_code": code}
            for (mid, iid, _r), code in zip(identities, codes, strict=True)
        ]
        for (mid, _iid, reason), code in zip(identities, codes, strict=True):
            if code == err.NONE:
                self.log.info("member_left", group=gid, member=mid, reason=reason, protocol="classic")

        def answer(code: int) -> None:
            if code != err.NONE:
                self.rt.respond(ctx, {"throttle_time_ms": 0, "error_code": code, "members": []})
            else:
                self.rt.respond(ctx, leave_response(v, results))

        self.consumer_side.write_then(gid, records, answer)
