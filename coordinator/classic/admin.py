"""DescribeGroups, ListGroups and DeleteGroups (Kafka's ``GroupMetadataManager.describeGroups``,
``listGroups`` and ``deleteGroups`` with ``GroupCoordinatorShard.deleteGroups``): classic groups,
and the consumer groups beside them where the API covers both kinds."""

from __future__ import annotations

from typing import Any

from .. import errors as err
from ..offsets import OffsetManager
from ..records import GroupMetadataKey, OffsetCommitKey, Record
from ..routing import partition_for
from .group import ClassicGroup, D, E, S
from .manager import ClassicGroupManager

# Kafka's group authorized operations (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) as
# the bit field DescribeGroups (and ConsumerGroupDescribe) reports when asked. The core reports
# them all: under ACLs, security/acl.py answers a group the principal may not DESCRIBE with
# GROUP_AUTHORIZATION_FAILED (and no operations) before the core sees it, but does not narrow this
# field to the principal's own operations the way Kafka's AuthHelper.authorizedOperations does.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# What Java's String.trim() strips from both ends.
_JAVA_TRIMMED = "".join(map(chr, range(0x21)))


class GroupAdmin:
    """The group admin APIs over the classic group manager and the consumer groups."""

    def __init__(self, classic: ClassicGroupManager) -> None:
        self.classic = classic
        self.rt = classic.rt
        self.config = classic.config
        self.groups = classic.groups
        self.consumer = classic.consumer

    @property
    def offset_manager(self) -> OffsetManager:
        return self.classic.offset_manager

    def describe_groups(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        ops = GROUP_AUTHORIZED_OPERATIONS if req.get("include_authorized_operations") else AUTHORIZED_OPERATIONS_OMITTED
        described = []
        for gid in req.get("groups") or []:
            base = {
                "error_code": err.NONE,
                "error_message": None,
                "group_id": gid,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": ops,
            }
            # "" is a group id like any other here (GroupCoordinatorService.describeGroups: only a
            # null id, which the wire cannot carry, is INVALID_GROUP_ID).
            code = self.classic.route_error(gid)
            group = self.groups.get(gid) if not code else None
            if code:
                base["error_code"] = code
            elif group is None or group.is_in(D):
                base["group_state"] = str(D)
                if v >= 6:
                    # KIP-1043: from v6 a missing group is an error rather than a Dead placeholder.
                    base["error_code"] = err.GROUP_ID_NOT_FOUND
                    base["error_message"] = (
                        f"Group {gid} is not a classic group."  # GroupMetadataManager.classicGroup
                        if self.consumer.group(gid) is not None or self.classic.share_side.is_share_group(gid)
                        else f"Group {gid} not found."
                    )
            else:
                stable = group.is_in(S)
                base["group_state"] = str(group.state)
                base["protocol_type"] = group.protocol_type or ""
                base["protocol_data"] = (group.protocol_name or "") if stable else ""
                # Outside Stable, Kafka's ClassicGroupMember.describeNoMetadata() leaves out the
                # metadata but still reports the member's last assignment.
                base["members"] = [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                        "member_assignment": m.assignment,
                    }
                    for m in group.members.values()
                ]
            if base["error_code"] != err.NONE:
                # KafkaApis.handleDescribeGroupsRequest sets authorized operations only on the
                # groups described without an error.
                base["authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED
            described.append(base)
        self.rt.respond(ctx, {"throttle_time_ms": 0, "groups": described})

    def list_groups(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        # GroupMetadataManager.listGroups lower-cases and trims the state filters (String.trim:
        # every char <= U+0020 at either end); the type filters are only lower-cased.
        states = {s.lower().strip(_JAVA_TRIMMED) for s in (req.get("states_filter") or [])} if v >= 4 else set()
        types = {t.lower() for t in (req.get("types_filter") or [])} if v >= 5 else set()
        # Each broker lists the groups it coordinates (KafkaApis asks its own coordinator).
        owner_ids, receiver, n = self.rt.ownership.owner_ids, self.rt.receiver, self.config.num_offsets_partitions
        if any(owner_ids[p] == receiver for p in self.rt.loading):
            return self.rt.respond(
                ctx, {"throttle_time_ms": 0, "error_code": err.COORDINATOR_LOAD_IN_PROGRESS, "groups": []}
            )
        listed = []
        if not types or "classic" in types:
            for gid, group in self.groups.items():
                if group.is_in(D) or (states and str(group.state).lower() not in states):
                    continue
                if owner_ids[partition_for(gid, n)] != receiver:
                    continue
                listed.append(
                    {
                        "group_id": gid,
                        "protocol_type": group.protocol_type or "",
                        "group_state": str(group.state),
                        "group_type": "classic",
                    }
                )
        if not types or "consumer" in types:
            # ConsumerGroup: protocol type "consumer", states Empty/Assigning/Reconciling/Stable
            for gid, cgroup in self.consumer.groups.groups.items():
                state = cgroup.state.value
                if (states and state.lower() not in states) or owner_ids[partition_for(gid, n)] != receiver:
                    continue
                listed.append(
                    {"group_id": gid, "protocol_type": "consumer", "group_state": state, "group_type": "consumer"}
                )
        if not types or "share" in types:
            # ShareGroup: protocol type "share", states Empty/Stable
            for gid, state in self.classic.share_side.groups_for_listing():
                if (states and state.lower() not in states) or owner_ids[partition_for(gid, n)] != receiver:
                    continue
                listed.append({"group_id": gid, "protocol_type": "share", "group_state": state, "group_type": "share"})
        self.rt.respond(ctx, {"throttle_time_ms": 0, "error_code": err.NONE, "groups": listed})

    def delete_groups(self, v: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        results: list[dict[str, Any]] = []
        by_partition: dict[int, list[tuple[dict[str, Any], ClassicGroup]]] = {}
        # KafkaApis.handleDeleteGroupsRequest answers each group once (groupsNames.distinct), and
        # "" is a group id like any other (GroupCoordinatorService.deleteGroups).
        consumer_deletes: list[tuple[dict[str, Any], str]] = []
        share_deletes: list[tuple[dict[str, Any], str]] = []
        share_side = self.classic.share_side
        for gid in dict.fromkeys(req.get("groups_names") or []):
            entry = {"group_id": gid, "error_code": err.NONE}
            results.append(entry)
            code = self.classic.route_error(gid)
            group = self.groups.get(gid) if not code else None
            cgroup = self.consumer.group(gid) if not code else None
            if code:
                entry["error_code"] = code
            elif share_side.is_share_group(gid):
                # ShareGroup.validateDeleteGroup: only an Empty share group can go
                if gid in share_side.busy:
                    entry["error_code"] = err.COORDINATOR_LOAD_IN_PROGRESS
                elif not share_side.is_empty(gid):
                    entry["error_code"] = err.NON_EMPTY_GROUP
                elif (state_error := share_side.delete_state(gid)) != err.NONE:
                    # deleteShareGroups: the share partitions' state goes first; a group whose
                    # state could not be deleted stays, answered with the persister's error
                    entry["error_code"] = state_error
                else:
                    share_deletes.append((entry, gid))
            elif cgroup is not None:
                # ConsumerGroup.validateDeleteGroup: only an Empty consumer group can go
                if gid in self.classic.consumer_side.busy:  # a write in flight may be rolled back: retry later
                    entry["error_code"] = err.COORDINATOR_LOAD_IN_PROGRESS
                elif cgroup.members:
                    entry["error_code"] = err.NON_EMPTY_GROUP
                else:
                    consumer_deletes.append((entry, gid))
            elif group is None or group.is_in(D):
                entry["error_code"] = err.GROUP_ID_NOT_FOUND
            elif not group.is_in(E):
                entry["error_code"] = err.NON_EMPTY_GROUP
            else:
                by_partition.setdefault(self.classic.partition_for(gid), []).append((entry, group))

        waiting = (
            len(by_partition)
            + len(consumer_deletes)
            + len(share_deletes)
            + sum(1 for _e, gid in consumer_deletes if self.offset_manager.keys_of(gid))
        )
        if not waiting:
            return self.rt.respond(ctx, {"throttle_time_ms": 0, "results": results})

        for entry, gid in consumer_deletes:
            # the group's own tombstones apply at once (a heartbeat arriving meanwhile starts a new
            # group, which the tombstones' later replay must not touch); its offsets go when durable
            offsets: list[Record] = [
                (OffsetCommitKey(gid, t, p), None) for t, p in sorted(self.offset_manager.keys_of(gid))
            ]

            def consumer_done(error: int | None, entry: dict[str, Any] = entry) -> None:
                nonlocal waiting
                if error is not None:
                    entry["error_code"] = err.append_error_to_response_error(error)
                waiting -= 1
                if waiting == 0:
                    self.rt.respond(ctx, {"throttle_time_ms": 0, "results": results})

            self.classic.consumer_side.delete_consumer_group(gid, "deleted by DeleteGroups", consumer_done)
            if offsets:
                self.classic.append(gid, offsets, consumer_done)

        for entry, gid in share_deletes:

            def share_done(error: int | None, entry: dict[str, Any] = entry) -> None:
                nonlocal waiting
                if error is not None:
                    entry["error_code"] = err.append_error_to_response_error(error)
                waiting -= 1
                if waiting == 0:
                    self.rt.respond(ctx, {"throttle_time_ms": 0, "results": results})

            share_side.delete_share_group(gid, "deleted by DeleteGroups", share_done)

        for batch in by_partition.values():
            records: list[Record] = []
            for _entry, group in batch:
                records.extend(self._delete_group_now(group, "deleted by DeleteGroups"))

            def done(error: int | None, batch: list[tuple[dict[str, Any], ClassicGroup]] = batch) -> None:
                nonlocal waiting
                if error is not None:
                    for entry, group in batch:
                        entry["error_code"] = err.append_error_to_response_error(error)
                        self.classic.restore_group(group.group_id)
                waiting -= 1
                if waiting == 0:
                    self.rt.respond(ctx, {"throttle_time_ms": 0, "results": results})

            self.classic.append(batch[0][1].group_id, records, done)

    def _delete_group_now(self, group: ClassicGroup, reason: str) -> list[Record]:
        """Kill an Empty group in memory and return the tombstones that make it so on disk."""
        gid = group.group_id
        keys = self.offset_manager.keys_of(gid)
        records: list[Record] = [(OffsetCommitKey(gid, t, p), None) for t, p in sorted(keys)]
        records.append((GroupMetadataKey(gid), None))
        group.transition_to(D, self.rt.now)
        self.classic.forget_group(group)
        del self.groups[gid]
        self.classic.glog(group).info("group_deleted", reason=reason, offsets=len(keys))
        return records
