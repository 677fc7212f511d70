"""The KIP-848 consumer-group APIs served by the shard: ConsumerGroupHeartbeat and
ConsumerGroupDescribe (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` /
``consumerGroupDescribe``), the consumer groups' timers, and their writes.

The sans-IO consumer-group core is :mod:`.consumer`; this module puts it under the coordinator
runtime. A consumer group's records are applied when produced, as Kafka's runtime does, and one
write per group is in flight at a time (``write``): what arrives meanwhile waits behind it, and a
failed write rolls the group back to its copy from before it. Upgrades and downgrades between the
classic and the consumer protocol are :mod:`.migration`'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import default_message
from ..protocol.ratelimit import LogLimiter
from . import errors as err
from .classic.admin import GROUP_AUTHORIZED_OPERATIONS
from .classic.manager import ClassicGroupManager
from .consumer_wire import SteadyBody, steady_answer
from .lazy import DeferredGroups
from .migration import Migration
from .records import GroupMetadataKey, Record
from .result import Result
from .routing import partition_for
from .runtime import CoordinatorRuntime

if TYPE_CHECKING:  # the consumer core is imported by its first use (coordinator/lazy.py)
    from .consumer import ConsumerGroup, ConsumerGroupManager, TopicsImage


class ConsumerGroupRequests:
    def __init__(
        self,
        runtime: CoordinatorRuntime[Result],
        consumer: ConsumerGroupManager,
        classic: ClassicGroupManager,
        *,
        log: Any,
        topics_image: Callable[[], TopicsImage] | None = None,
    ) -> None:
        self.rt = runtime
        self.consumer = consumer
        self.classic = classic
        self.group_records = classic.group_records
        self.log = log
        self._topics_image = topics_image
        # One write per consumer group in flight (see write): what waits behind it, and the group
        # as it was before the write that is about to be made.
        self.busy: dict[str, deque[Callable[[], None]]] = {}
        self.snapshots: dict[str, ConsumerGroup | None] = {}
        self._partitions: dict[str, int] = {}  # group id -> its __consumer_offsets partition (steady_heartbeat)
        self.migration: Migration  # wired by the shard (it needs this object too)
        self.share_side: Any = None  # ShareGroupRequests, wired by the shard (one group id namespace)
        consumer.before_write = self.snapshot
        # a steady member's answer carries its bytes (consumer_wire, issue 26: no generic encoder)
        consumer.steady_answer = steady_answer  # type: ignore[method-assign]
        # The core's info events go to our logger; what a client can repeat per request (fenced
        # heartbeats of a zombie) at most once per 10 s per group and error, timed by the
        # coordinator's clock (the runtime's now, never a clock of the core's own)
        consumer.events.attach(log, LogLimiter(log, clock=lambda: self.rt.now / 1000))

    def route_error(self, group_id: str) -> int:
        return self.classic.route_error(group_id)

    def on_loaded(self, partition: int) -> None:
        """Every member of the loaded partition's consumer groups gets a session deadline, and a
        revocation deadline when it still has partitions to revoke (``onLoaded``)."""
        n = self.classic.config.num_offsets_partitions
        self.consumer.end_load(
            self.rt.now, [g for g in self.consumer.groups.groups if partition_for(g, n) == partition]
        )

    def on_unloaded(self, partition: int) -> int:
        """The partition's consumer groups leave memory with their writes, snapshots and timers
        ((group, member, kind[, epoch]) of every group of the partition, including one a failed
        write just rolled back out of existence). Returns how many groups."""
        n = self.classic.config.num_offsets_partitions
        gids = [g for g in self.consumer.groups.groups if partition_for(g, n) == partition]
        self.consumer.deadlines.cancel_where(lambda key: partition_for(key[0], n) == partition)
        for gid in gids:
            self.busy.pop(gid, None)
            self.snapshots.pop(gid, None)
            del self.consumer.groups.groups[gid]
            self.consumer.events.forget(gid)
        return len(gids)

    def error_response(self, code: int, message: str | None = None) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": message if message is not None else default_message(code),
            "member_id": None,
            "member_epoch": 0,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

    def refresh_topics(self) -> None:
        if self._topics_image is not None:
            image = self._topics_image()
            if image is not self.consumer.topics:
                self.consumer.set_topics(image)

    def heartbeat(self, version: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str) -> None:
        """ConsumerGroupHeartbeat (``GroupCoordinatorService.consumerGroupHeartbeat``). The records are
        applied at once and the answer waits until they are durable, as Kafka's runtime does; the
        group's next request waits for that too (``write``)."""
        gid = req["group_id"]
        code = self.route_error(gid) if gid else err.NONE
        if code != err.NONE:
            self.rt.respond(ctx, self.error_response(code))
            return
        busy = self.busy.get(gid)
        if busy is not None:
            receiver = self.rt.receiver  # it is answered later, as the broker it came to

            def later() -> None:
                self.rt.receiver = receiver
                self.heartbeat(version, req, ctx, client_id, client_host)

            busy.append(later)
            return
        if self.share_side.is_share_group(gid):
            # getOrMaybeCreateConsumerGroup: a group of another type (after the request's validation)
            invalid = self.consumer.check_request(req, version)
            message = f"Group {gid} is not a consumer group."
            self.rt.respond(ctx, invalid or self.error_response(err.GROUP_ID_NOT_FOUND, message))
            return
        pre: list[Record] = []
        classic = self.classic.groups.get(gid)
        self.refresh_topics()
        if classic is not None or gid in self.group_records:
            if classic is not None and classic.members:  # members only pending: Empty (ClassicGroup.isEmpty)
                # getOrMaybeCreateConsumerGroup: a joining member upgrades the classic group when
                # validateOnlineUpgrade allows it; otherwise the group is not a consumer group
                message = self.migration.online_upgrade_refusal(classic, req)
                if message is None:
                    invalid = self.consumer.check_request(req, version)
                    if invalid is not None:  # answered before the group is touched
                        self.rt.respond(ctx, invalid)
                        return
                    message = self.migration.convert_to_consumer_group(classic, pre)
                if message is not None:
                    self.rt.respond(ctx, self.error_response(err.GROUP_ID_NOT_FOUND, message))
                    return
            if req.get("member_epoch") == 0:
                # an empty classic group makes way for the consumer group (maybeDeleteEmptyClassicGroup)
                old = self.classic.groups.pop(gid, None)
                if old is not None:
                    self.classic.forget_group(old)
                if gid in self.group_records:
                    pre.append((GroupMetadataKey(gid), None))
                    self.group_records.pop(gid)
        result = self.consumer.heartbeat(self.rt.now, req, version, client_id=client_id, client_host=client_host)
        records: list[Record] = [*pre, *result.records]
        if not records:
            self.rt.respond(ctx, result.response)
            return
        response = result.response

        def on_done(code: int | None) -> None:
            if code is None:
                self.rt.respond(ctx, response)
            else:
                self.rt.respond(ctx, self.error_response(err.append_error_to_response_error(code)))

        self.write(gid, records, on_done)

    def steady_heartbeat(
        self, version: int, req: dict[str, Any], client_id: str, client_host: str
    ) -> dict[str, Any] | None:
        """``heartbeat``'s answer for a steady member of a consumer group that nothing holds (no
        write in flight, no classic group or record under its id, not a share group, its partition
        served here), else None having changed nothing: then ``heartbeat`` takes it."""
        gid = req["group_id"]
        rt = self.rt
        if not gid or gid in self.busy or gid in self.group_records or gid in self.classic.groups:
            return None
        # partition_for's answer kept per group id here: its lru_cache wrapper (a key tuple hashed
        # per call) cost ~600 instructions of a ~40,000-instruction steady heartbeat (issue 26);
        # bounded as the lru_cache is, so clients inventing group ids cannot grow it
        partition = self._partitions.get(gid)
        if partition is None:
            if len(self._partitions) >= 1 << 16:
                self._partitions.clear()
            partition = self._partitions[gid] = partition_for(gid, self.classic.config.num_offsets_partitions)
        if rt.route_error(partition) != err.NONE:
            return None
        # is_share_group, without its calls: an unbuilt share core holds no group (its stand-in,
        # DeferredGroups, answers None; each attribute read of it costs a __getattr__ hook)
        share = self.share_side.share
        if (type(share) is not DeferredGroups or share._real is not None) and share.group(gid) is not None:
            return None
        consumer = self.consumer
        if self._topics_image is not None:  # refresh_topics, inline on the hot path
            image = self._topics_image()
            if image is not consumer.topics:
                consumer.set_topics(image)
        return consumer.steady_heartbeat(rt.now, req, version, client_id, client_host, type(req) is SteadyBody)

    def snapshot(self, gid: str) -> None:
        # the first snapshot before a write wins: an upgrade applies the conversion, then the heartbeat
        if gid in self.snapshots:
            return
        g = self.consumer.group(gid)
        self.snapshots[gid] = None if g is None else g.copy()

    def write(self, gid: str, records: list[Record], on_done: Callable[[int | None], None]) -> None:
        """Append records the consumer-group core has just applied. Until they are durable the group's
        next requests and deadlines wait (a per-group actor): if the write fails, the group goes back
        to its copy from before it (Kafka's runtime reverts to its last committed offset), and nothing
        was built on the records that are not in the log."""
        snapshot = self.snapshots.pop(gid, None)
        self.busy[gid] = deque()
        downgrade = self.consumer.take_downgrade(gid)
        if downgrade is not None:
            records = [*records, self.migration.convert_to_classic_group(downgrade)]
        undo = self.migration.undo.pop(gid, None)

        def done(code: int | None) -> None:
            if code is not None:
                self.log.warning("consumer_group_write_failed", group=gid, error=code, records=len(records))
                if downgrade is not None:
                    classic = self.classic.groups.pop(gid, None)
                    if classic is not None:
                        self.classic.forget_group(classic)
                    self.group_records.pop(gid, None)
                self.consumer.events.forget(gid)  # what was logged as converged may not be any more
                if snapshot is None:
                    self.consumer.groups.groups.pop(gid, None)
                else:
                    self.consumer.groups.groups[gid] = snapshot
                    self.consumer.end_load(self.rt.now, [gid])  # its members' sessions start again
                if undo is not None:
                    undo()
            on_done(code)
            waiting = self.busy.pop(gid)
            while waiting and gid not in self.busy:
                waiting.popleft()()
            if waiting:  # one of them wrote again: the rest stay behind that write
                self.busy[gid].extend(waiting)

        self.rt.append(self.classic.partition_for(gid), records, done, applied=True)

    def delete_consumer_group(self, gid: str, reason: str, on_done: Callable[[int | None], None] | None = None) -> None:
        """Delete an empty consumer group now: its tombstones, applied and written like its other records."""
        records: list[Record] = list(self.consumer.groups.tombstones(gid))
        self.snapshot(gid)
        for r in records:
            self.consumer.replay(r)  # type: ignore[arg-type]
        self.log.info("consumer_group_deleted", group=gid, reason=reason)
        self.consumer.events.forget(gid)
        self.write(gid, records, on_done or (lambda code: None))

    def fire(self, key: tuple[Any, ...]) -> None:
        gid = key[0]
        busy = self.busy.get(gid)
        if busy is not None:
            busy.append(lambda: self.fire(key))
            return
        records = self.consumer.fire(key, self.rt.now)
        if records:
            self.write(gid, list(records), lambda code: None)

    def describe(self, version: int, req: dict[str, Any], ctx: Any, client_id: str, client_host: str) -> None:
        """ConsumerGroupDescribe (``GroupMetadataManager.consumerGroupDescribe``)."""
        self.refresh_topics()
        names = {tid: name for name, (tid, _n) in self.consumer.topics.topics.items()}

        def assignment(parts: Any) -> dict[str, Any]:
            return {
                "topic_partitions": [
                    {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                    for t, ps in sorted(parts.items())
                ]
            }

        out = []
        for gid in req["group_ids"]:
            entry: dict[str, Any] = {
                "group_id": gid,
                "error_code": 0,
                "error_message": None,
                "group_state": "",
                "group_epoch": 0,
                "assignment_epoch": 0,
                "assignor_name": "",
                "members": [],
            }
            code = self.route_error(gid)
            g = self.consumer.group(gid) if code == err.NONE else None
            if code != err.NONE:
                entry["error_code"] = code
            elif g is None:
                entry["error_code"] = err.GROUP_ID_NOT_FOUND  # and no message, as Kafka's consumerGroupDescribe
            else:
                entry.update(
                    group_state=g.state.value,
                    group_epoch=g.group_epoch,
                    assignment_epoch=g.target_epoch,
                    assignor_name=self.consumer.preferred_assignor(g.members),
                    members=[
                        {
                            "member_id": m.member_id,
                            "instance_id": m.instance_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.member_epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": list(m.subscribed_topic_names),
                            "subscribed_topic_regex": m.subscribed_topic_regex,
                            "assignment": assignment(m.assigned),
                            "target_assignment": assignment(g.target.get(m.member_id, {})),
                            # v1+: 0 CLASSIC for a member speaking the classic protocol, 1 CONSUMER
                            "member_type": 0 if m.uses_classic_protocol else 1,
                        }
                        for m in sorted(g.members.values(), key=lambda m: m.member_id)
                    ],
                )
                if req.get("include_authorized_operations"):
                    entry["authorized_operations"] = GROUP_AUTHORIZED_OPERATIONS
            out.append(entry)
        self.rt.respond(ctx, {"throttle_time_ms": 0, "groups": out})

    def consumer_group_request(self, gid: str, retry: Callable[[], None], run: Callable[[], None]) -> None:
        """A classic request to a consumer group: behind the group's write in flight, if any."""
        busy = self.busy.get(gid)
        if busy is not None:
            busy.append(retry)
            return
        run()

    def write_then(self, gid: str, records: list[Record], answer: Callable[[int], None]) -> None:
        """Write a consumer group's applied records, then ``answer`` with NONE or the write's error."""
        if not records and self.consumer.downgrades.get(gid) is None:
            answer(err.NONE)
            return
        self.write(
            gid, records, lambda code: answer(err.NONE if code is None else err.append_error_to_response_error(code))
        )
