"""The KIP-932 share-group APIs served by the shard: ShareGroupHeartbeat, ShareGroupDescribe and the
share-group offsets APIs (Kafka 4.2's ``GroupCoordinatorService.shareGroupHeartbeat`` /
``shareGroupDescribe`` / ``describeShareGroupOffsets`` / ``alterShareGroupOffsets`` /
``deleteShareGroupOffsets`` over ``GroupMetadataManager``), the share groups' session timers, their
writes, and their place in DeleteGroups.

The sans-IO share-group core is :mod:`.share`; this module puts it under the coordinator runtime.
Like a consumer group's, a share group's records are applied when produced and one write per group
is in flight at a time (``write``): what arrives meanwhile waits behind it, and a failed write rolls
the group back to its copy from before it.

A group id names one group of one kind: a share heartbeat for a classic or consumer group's id is
answered GROUP_ID_NOT_FOUND "Group <id> is not a share group." (``getOrMaybeCreateShareGroup``),
and the classic and consumer APIs answer a share group's id as Kafka does (``foreign_kind``).

The share-partition state is asked through ``ShareStateStore`` (``share/state.py``).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import default_message
from . import errors as err
from .classic.admin import GROUP_AUTHORIZED_OPERATIONS
from .classic.manager import ClassicGroupManager
from .records import Record
from .result import Result
from .routing import partition_for
from .runtime import CoordinatorRuntime
from .share.state import UNINITIALIZED_START_OFFSET, InMemoryShareState, ShareStateStore

if TYPE_CHECKING:  # the consumer and share cores are imported by their first use (coordinator/lazy.py)
    from .consumer import ConsumerGroupManager, TopicsImage
    from .share.group import InitValue, ShareGroup
    from .share.manager import ShareGroupManager, ShareHeartbeatResult

_DESCRIBED_EMPTY: dict[str, Any] = {
    "error_message": None,
    "group_state": "",
    "group_epoch": 0,
    "assignment_epoch": 0,
    "assignor_name": "",
    "members": [],
}

# The share-group APIs the shard routes here (``coordinator.HANDLERS``): API -> method
SHARE_HANDLERS: dict[str, tuple[str, str]] = {
    "ShareGroupHeartbeat": ("share_requests", "heartbeat"),
    "ShareGroupDescribe": ("share_requests", "describe"),
    "DescribeShareGroupOffsets": ("share_requests", "describe_offsets"),
    "AlterShareGroupOffsets": ("share_requests", "alter_offsets"),
    "DeleteShareGroupOffsets": ("share_requests", "delete_offsets"),
}


class ShareGroupRequests:
    def __init__(
        self,
        runtime: CoordinatorRuntime[Result],
        share: ShareGroupManager,
        classic: ClassicGroupManager,
        consumer: ConsumerGroupManager,
        *,
        log: Any,
        topics_image: Callable[[], TopicsImage] | None = None,
        state: ShareStateStore | None = None,
    ) -> None:
        self.rt = runtime
        self.share = share
        self.classic = classic
        self.consumer = consumer
        self.log = log
        self._topics_image = topics_image
        # The share-partition state (the share coordinator's): set by the node once it has one
        self.state: ShareStateStore = state if state is not None else InMemoryShareState()
        self.busy: dict[str, deque[Callable[[], None]]] = {}
        self.snapshots: dict[str, ShareGroup | None] = {}
        # A partition's end offset (log end offset) for DescribeShareGroupOffsets v1's lag; set by
        # the node (None: no lag reported)
        self.end_offset: Callable[[str, int], int | None] | None = None
        share.before_write = self.snapshot
        share.log = log

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.classic.config.num_offsets_partitions

    def route_error(self, group_id: str) -> int:
        return self.classic.route_error(group_id)

    def refresh_topics(self) -> None:
        if self._topics_image is not None:
            image = self._topics_image()
            if image is not self.share.topics:
                self.share.set_topics(image)

    def other_kind(self, gid: str) -> str | None:
        """The kind of a non-share group with this id ("classic" or "consumer"), None when there is none."""
        if self.consumer.group(gid) is not None:
            return "consumer"
        if gid in self.classic.groups or gid in self.classic.group_records:
            return "classic"
        return None

    def is_share_group(self, gid: str) -> bool:
        return self.share.group(gid) is not None

    def is_empty(self, gid: str) -> bool:
        g = self.share.group(gid)
        return g is None or not g.members

    def queue_behind_write(self, gid: str, retry: Callable[[], None]) -> bool:
        busy = self.busy.get(gid)
        if busy is None:
            return False
        receiver = self.rt.receiver

        def later() -> None:
            self.rt.receiver = receiver
            retry()

        busy.append(later)
        return True

    # -- load / unload ---------------------------------------------------------------------------
    def on_loaded(self, partition: int) -> None:
        """``onLoaded``: every member of the loaded partition's share groups gets a session deadline."""
        n = self.n
        self.share.end_load(self.rt.now, [g for g in self.share.groups.groups if partition_for(g, n) == partition])

    def on_unloaded(self, partition: int) -> int:
        n = self.n
        gids = [g for g in self.share.groups.groups if partition_for(g, n) == partition]
        self.share.deadlines.cancel_where(lambda key: partition_for(key[0], n) == partition)  # type: ignore[index]
        for gid in gids:
            self.busy.pop(gid, None)
            self.snapshots.pop(gid, None)
            del self.share.groups.groups[gid]
        return len(gids)

    # -- writes ----------------------------------------------------------------------------------
    def snapshot(self, gid: str) -> None:
        if gid in self.snapshots:
            return
        g = self.share.group(gid)
        self.snapshots[gid] = None if g is None else g.copy()

    def write(self, gid: str, records: list[Record], on_done: Callable[[int | None], None]) -> None:
        """Append records the core has just applied; the group's next requests and deadlines wait
        until they are durable, and a failed write puts the group back as it was before them."""
        snapshot = self.snapshots.pop(gid, None)
        self.busy[gid] = deque()

        def done(code: int | None) -> None:
            if code is not None:
                self.log.warning("share_group_write_failed", group=gid, error=code, records=len(records))
                if snapshot is None:
                    self.share.groups.groups.pop(gid, None)
                else:
                    self.share.groups.groups[gid] = snapshot
                    self.share.end_load(self.rt.now, [gid])
            # the waiters are taken first: on_done may write again (the share partitions'
            # initialization after a heartbeat), and they then wait behind that write
            waiting = self.busy.pop(gid)
            on_done(code)
            while waiting and gid not in self.busy:
                waiting.popleft()()
            if waiting:
                self.busy[gid].extend(waiting)

        self.rt.append(partition_for(gid, self.n), records, done, applied=True, share=True)

    # -- ShareGroupHeartbeat ---------------------------------------------------------------------
    def heartbeat(self, version: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str) -> None:
        """ShareGroupHeartbeat (``GroupCoordinatorService.shareGroupHeartbeat``): answered once its
        records are durable; then the share partitions it found uninitialized are initialized in the
        share-partition state (``persisterInitialize``) and recorded as initialized."""
        from .share.manager import error_response, validate  # the share core, from its first use

        invalid = validate(req)
        if invalid is not None:
            self.rt.respond(ctx, error_response(invalid.code, invalid.message))
            return
        gid = req["group_id"]
        code = self.route_error(gid)
        if code != err.NONE:
            self.rt.respond(ctx, error_response(code, default_message(code)))
            return
        if self.queue_behind_write(gid, lambda: self.heartbeat(version, req, ctx, client_id, client_host)):
            return
        if self.other_kind(gid) is not None:
            message = f"Group {gid} is not a share group."
            self.rt.respond(ctx, error_response(err.GROUP_ID_NOT_FOUND, message))
            return
        self.refresh_topics()
        result = self.share.heartbeat(self.rt.now, req, client_id=client_id, client_host=client_host)
        if not result.records:
            self.rt.respond(ctx, result.response)
            return
        response = result.response

        def on_done(code: int | None) -> None:
            if code is None:
                self.rt.respond(ctx, response)
                if result.initialize:
                    self.initialize(gid, result)
            else:
                code = err.append_error_to_response_error(code)
                self.rt.respond(ctx, error_response(code, default_message(code)))

        self.write(gid, list(result.records), on_done)

    def initialize(self, gid: str, result: ShareHeartbeatResult) -> None:
        """``persisterInitialize`` then ``initializeShareGroupState`` (or, on an error,
        ``uninitializeShareGroupState``)."""
        self.initialize_partitions(gid, result.group_epoch, result.initialize, None)

    def initialize_partitions(
        self,
        gid: str,
        group_epoch: int,
        parts: dict[uuid.UUID, InitValue],
        offsets: dict[tuple[uuid.UUID, int], int] | None,
        then: Callable[[int], None] | None = None,
    ) -> None:
        if self.queue_behind_write(gid, lambda: self.initialize_partitions(gid, group_epoch, parts, offsets, then)):
            return
        start = {
            (tid, p): (UNINITIALIZED_START_OFFSET if offsets is None else offsets[(tid, p)])
            for tid, v in parts.items()
            for p in v.partitions
        }
        answers = self.state.initialize(gid, group_epoch, start)
        failed = next((c for c in answers.values() if c != err.NONE), err.NONE)
        by_topic = {tid: sorted(v.partitions) for tid, v in parts.items()}
        if failed == err.NONE:
            records = self.share.initialized(self.rt.now, gid, by_topic)
        else:
            self.log.warning("share_state_initialize_failed", group=gid, error=failed)
            records = self.share.uninitialized(self.rt.now, gid, by_topic)
        if not records:
            if then is not None:
                then(failed)
            return

        def done(code: int | None) -> None:
            if then is not None:
                then(failed if code is None else err.append_error_to_response_error(code))

        self.write(gid, list(records), done)

    def replay(self, key: Any, value: Any) -> None:
        """A durable share-group record (the shard's replay, live and at load)."""
        from .share.group import IllegalShareRecord  # the share core, from its first use

        try:
            self.share.groups.now_ms = self.rt.now
            self.share.replay((key, value))
        except IllegalShareRecord as e:
            # as for consumer groups: the one record is skipped, the partition's other groups load
            self.log.warning("share_group_record_skipped", key=repr(key), error=str(e))

    # -- timers ----------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        for key in self.share.due(now_ms):
            self.fire(key)

    def expire_member(self, gid: str, mid: str) -> int:
        """Fault injection: the member's session expires now (``shareGroupFenceMemberOperation``)."""
        g = self.share.group(gid)
        if g is None:
            return err.GROUP_ID_NOT_FOUND
        if mid not in g.members:
            return err.UNKNOWN_MEMBER_ID
        self.share.deadlines.cancel((gid, mid, "share-session"))
        self.fire((gid, mid, "share-session"))
        return err.NONE

    def fire(self, key: tuple[Any, ...]) -> None:
        gid = key[0]
        if self.queue_behind_write(gid, lambda: self.fire(key)):
            return
        records = self.share.fire(key, self.rt.now)
        if records:
            self.write(gid, list(records), lambda code: None)

    # -- ShareGroupDescribe ----------------------------------------------------------------------
    def describe(self, version: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str) -> None:
        """ShareGroupDescribe (``GroupMetadataManager.shareGroupDescribe``, ``ShareGroup.asDescribedGroup``)."""
        self.refresh_topics()
        names = {tid: name for name, (tid, _n) in self.share.topics.topics.items()}
        out = []
        ids = list(req.get("group_ids") or [])
        # GroupCoordinatorService.shareGroupDescribe: an empty id is INVALID_GROUP_ID, answered first
        for _empty in [g for g in ids if not g]:
            out.append({**_DESCRIBED_EMPTY, "group_id": "", "error_code": err.INVALID_GROUP_ID})
        for gid in [g for g in ids if g]:
            entry: dict[str, Any] = {
                "group_id": gid,
                "error_code": err.NONE,
                "error_message": None,
                "group_state": "",
                "group_epoch": 0,
                "assignment_epoch": 0,
                "assignor_name": "",
                "members": [],
            }
            code = self.route_error(gid)
            g = self.share.group(gid) if code == err.NONE else None
            if code != err.NONE:
                entry["error_code"] = code
            elif g is None:
                entry["error_code"] = err.GROUP_ID_NOT_FOUND
                entry["error_message"] = (
                    f"Group {gid} is not a share group."
                    if self.other_kind(gid) is not None
                    else f"Group {gid} not found."
                )
            else:
                entry.update(
                    group_state=g.state.value,
                    group_epoch=g.group_epoch,
                    assignment_epoch=g.target_epoch,
                    assignor_name=self.share.assignor_name,
                    members=[
                        {
                            "member_id": m.member_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.member_epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": list(m.subscribed_topic_names),
                            "assignment": {
                                "topic_partitions": [
                                    {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                                    for t, ps in sorted(m.assigned.items())
                                ]
                            },
                        }
                        for m in sorted(g.members.values(), key=lambda m: m.member_id)
                    ],
                )
                if req.get("include_authorized_operations"):
                    entry["authorized_operations"] = GROUP_AUTHORIZED_OPERATIONS
            out.append(entry)
        self.rt.respond(ctx, {"throttle_time_ms": 0, "groups": out})

    # -- DeleteGroups ----------------------------------------------------------------------------
    def delete_state(self, gid: str) -> int:
        """``GroupCoordinatorService.deleteShareGroups``' persister step: the group's share partitions'
        state is deleted before the group; NONE, or the error to answer the group with."""
        g = self.share.group(gid)
        if g is None or g.state_metadata is None:
            return err.NONE
        info = g.state_metadata
        parts = [
            (tid, p)
            for infos in (info.initialized, info.initializing)
            for tid, v in infos.items()
            for p in v.partitions
        ]
        parts += [(tid, p) for tid, name in info.deleting.items() for p in range(self._partition_count(name))]
        if not parts:
            return err.NONE
        return next((c for c in self.state.delete(gid, parts).values() if c != err.NONE), err.NONE)

    def _partition_count(self, name: str) -> int:
        t = self.share.topics.topics.get(name)
        return 0 if t is None else t[1]

    def delete_share_group(self, gid: str, reason: str, on_done: Callable[[int | None], None]) -> None:
        """Delete an empty share group now (``ShareGroup.createGroupTombstoneRecords``): its
        tombstones, applied and written like its other records (``delete_state`` went first)."""
        records: list[Record] = list(self.share.groups.tombstones(gid))
        self.snapshot(gid)
        self.share.apply(self.rt.now, records)  # type: ignore[arg-type]
        self.share.deadlines.cancel_where(lambda key: key[0] == gid)  # type: ignore[index]
        self.log.info("share_group_deleted", group=gid, reason=reason)
        self.write(gid, records, on_done)

    def groups_for_listing(self) -> Iterable[tuple[str, str]]:
        return ((gid, g.state.value) for gid, g in self.share.groups.groups.items())

    # -- DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets -------------
    def _topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.share.topics.topics.get(name)

    def describe_offsets(self, version: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        """DescribeShareGroupOffsets (``GroupCoordinatorService.describeShareGroupOffsets``, all of a
        group's initialized share partitions when its topics are null: ``describeShareGroupAllOffsets``),
        the start offsets read from the share-partition state (``readSummary``); v1's lag is the
        partition's end offset - start offset - delivery-complete count where both are known."""
        self.refresh_topics()
        out = []
        for group in req.get("groups") or []:
            gid = group["group_id"]
            entry: dict[str, Any] = {"group_id": gid, "topics": [], "error_code": err.NONE, "error_message": None}
            out.append(entry)
            code = self.route_error(gid)
            if code != err.NONE:
                entry.update(error_code=code, error_message=default_message(code))
                continue
            wanted: list[tuple[str, uuid.UUID, list[int]]] = []
            missing: list[dict[str, Any]] = []
            if group.get("topics") is None:
                g = self.share.group(gid)
                for tid, parts in sorted((g.initialized_partitions() if g is not None else {}).items()):
                    name = self.share.topics_name(tid)
                    if name is not None:
                        wanted.append((name, tid, sorted(parts)))
            else:
                for t in group["topics"]:
                    topic = self._topic(t["topic_name"])
                    if topic is None:
                        # an unknown topic: no offset information, not an error (as OffsetFetch)
                        missing.append(
                            {
                                "topic_name": t["topic_name"],
                                "topic_id": uuid.UUID(int=0),
                                "partitions": [
                                    {
                                        "partition_index": p,
                                        "start_offset": UNINITIALIZED_START_OFFSET,
                                        "leader_epoch": 0,
                                        "lag": -1,
                                        "error_code": err.NONE,
                                        "error_message": None,
                                    }
                                    for p in t["partitions"]
                                ],
                            }
                        )
                    else:
                        wanted.append((t["topic_name"], topic[0], list(t["partitions"])))
            summaries = self.state.read_summary(gid, [(tid, p) for _n, tid, ps in wanted for p in ps])
            topics = []
            for name, tid, ps in wanted:
                parts = []
                for p in ps:
                    s = summaries.get((tid, p))
                    ok = s is not None and s.error_code == err.NONE
                    start = s.start_offset if ok and s is not None else UNINITIALIZED_START_OFFSET
                    lag = -1
                    if ok and s is not None and start != UNINITIALIZED_START_OFFSET and s.delivery_complete_count >= 0:
                        end = self.end_offset(name, p) if self.end_offset is not None else None
                        if end is not None:
                            lag = end - start - s.delivery_complete_count
                    parts.append(
                        {
                            "partition_index": p,
                            "start_offset": start,
                            "leader_epoch": s.leader_epoch if ok and s is not None else 0,
                            "lag": lag,
                            "error_code": err.NONE,
                            "error_message": None,
                        }
                    )
                topics.append({"topic_name": name, "topic_id": tid, "partitions": parts})
            entry["topics"] = topics + missing
        self.rt.respond(ctx, {"throttle_time_ms": 0, "groups": out})

    @staticmethod
    def _offsets_error(code: int, message: str | None = None) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": message if message is not None else default_message(code),
            "responses": [],
        }

    def _empty_share_group_error(self, gid: str, create: bool) -> tuple[int, str] | None:
        """What refuses an offsets change of ``gid``: not a share group (GROUP_ID_NOT_FOUND), a member
        in it (NON_EMPTY_GROUP: ``throwIfShareGroupIsNotEmpty``)."""
        if self.other_kind(gid) is not None:
            return err.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group."
        g = self.share.group(gid)
        if g is None and not create:
            return err.GROUP_ID_NOT_FOUND, f"Share group {gid} not found."
        if g is not None and g.members:
            return err.NON_EMPTY_GROUP, default_message(err.NON_EMPTY_GROUP) or ""
        return None

    def _offsets_change_held(self, gid: str, ctx: Any, retry: Callable[[], None], create: bool) -> bool:
        """Whether an offsets change of ``gid`` is answered now with a refusal (an empty id, not this
        coordinator's, not an empty share group) or waits behind the group's write (``retry``)."""
        if not gid:
            code, message = err.INVALID_GROUP_ID, None
        elif (code := self.route_error(gid)) != err.NONE:
            message = None
        elif self.queue_behind_write(gid, retry):
            return True
        else:
            self.refresh_topics()
            refusal = self._empty_share_group_error(gid, create=create)
            if refusal is None:
                return False
            code, message = refusal
        self.rt.respond(ctx, self._offsets_error(code, message))
        return True

    def alter_offsets(self, version: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        """AlterShareGroupOffsets (``GroupMetadataManager.alterShareGroupOffsets`` then
        ``persisterInitialize``): an empty (or new) share group's start offsets, initialized in the
        share-partition state at the group's epoch; the partitions become initialized share partitions."""
        from .share.group import InitValue  # the share core, from its first use

        gid = req.get("group_id") or ""
        if self._offsets_change_held(gid, ctx, lambda: self.alter_offsets(version, req, ctx, _cid, _host), True):
            return None
        responses = []
        parts: dict[uuid.UUID, InitValue] = {}
        offsets: dict[tuple[uuid.UUID, int], int] = {}
        for t in req.get("topics") or []:
            topic = self._topic(t["topic_name"])
            rows = []
            for p in t["partitions"]:
                ok = topic is not None and 0 <= p["partition_index"] < topic[1]
                code = err.NONE if ok else err.UNKNOWN_TOPIC_OR_PARTITION
                rows.append(
                    {
                        "partition_index": p["partition_index"],
                        "error_code": code,
                        "error_message": None if ok else default_message(code),
                    }
                )
                if ok and topic is not None:
                    offsets[(topic[0], p["partition_index"])] = p["start_offset"]
            tid = topic[0] if topic is not None else uuid.UUID(int=0)
            if topic is not None:
                chosen = frozenset(p for (t_id, p) in offsets if t_id == tid)
                parts[tid] = InitValue(t["topic_name"], chosen, self.rt.now)
            responses.append({"topic_name": t["topic_name"], "topic_id": tid, "partitions": rows})
        response = {"throttle_time_ms": 0, "error_code": err.NONE, "error_message": None, "responses": responses}
        g = self.share.group(gid)
        records = self.share.initializing(self.rt.now, gid, {t: v for t, v in parts.items() if v.partitions})
        epoch = g.group_epoch if g is not None else 0

        def answer(code: int) -> None:
            if code != err.NONE:
                # buildErrorResponse: every partition that was to be altered gets the error
                for topic in responses:
                    for row in topic["partitions"]:
                        if row["error_code"] == err.NONE:
                            row["error_code"], row["error_message"] = code, default_message(code)
            self.rt.respond(ctx, response)

        def initialize(code: int | None) -> None:
            if code is not None:
                return answer(err.append_error_to_response_error(code))
            live = {t: v for t, v in parts.items() if v.partitions}
            if not live:
                return answer(err.NONE)
            self.initialize_partitions(gid, epoch, live, offsets, answer)
            return None

        if records:
            self.write(gid, list(records), initialize)
        else:
            initialize(None)
        return None

    def delete_offsets(self, version: int, req: dict[str, Any], ctx: Any, _cid: str, _host: str) -> None:
        """DeleteShareGroupOffsets (``initiateDeleteShareGroupOffsets``, the persister's ``deleteState``,
        ``completeDeleteShareGroupOffsets``): an empty share group's start offsets of whole topics go;
        the topics pass through deleting and are no longer initialized (a member subscribing later
        initializes them afresh)."""
        gid = req.get("group_id") or ""
        if self._offsets_change_held(gid, ctx, lambda: self.delete_offsets(version, req, ctx, _cid, _host), False):
            return None
        errors_out: list[dict[str, Any]] = []
        names = [t["topic_name"] for t in req.get("topics") or []]
        to_delete, records = self.share.start_deleting(self.rt.now, gid, names, errors_out)

        def after_initiate(code: int | None) -> None:
            if code is not None:
                return self.rt.respond(ctx, self._offsets_error(err.append_error_to_response_error(code)))
            done: dict[uuid.UUID, str] = {}
            responses = list(errors_out)
            for tid, (name, partitions) in to_delete.items():
                answers = self.state.delete(gid, [(tid, p) for p in partitions])
                failed = next((c for c in answers.values() if c != err.NONE), err.NONE)
                if failed != err.NONE:
                    responses.append(
                        {
                            "topic_name": name,
                            "topic_id": tid,
                            "error_code": failed,
                            "error_message": default_message(failed),
                        }
                    )
                else:
                    done[tid] = name
            if not done:
                return self.rt.respond(
                    ctx, {**self._offsets_error(err.NONE), "error_message": None, "responses": responses}
                )
            complete = self.share.finish_deleting(self.rt.now, gid, done)
            ok = [
                {"topic_name": name, "topic_id": tid, "error_code": err.NONE, "error_message": None}
                for tid, name in done.items()
            ]

            def finished(code: int | None) -> None:
                if code is not None:
                    self.rt.respond(ctx, self._offsets_error(err.append_error_to_response_error(code)))
                else:
                    self.rt.respond(
                        ctx, {**self._offsets_error(err.NONE), "error_message": None, "responses": ok + responses}
                    )

            if complete:
                self.write(gid, list(complete), finished)
            else:
                finished(None)
            return None

        if records:
            self.write(gid, list(records), after_initiate)
        else:
            after_initiate(None)
        return None
