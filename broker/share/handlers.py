"""ShareFetch (78) and ShareAcknowledge (79), as ``KafkaApis.handleShareFetchRequest`` /
``handleShareAcknowledgeRequest`` answer them.

ShareFetch, in Kafka's order: READ on the group (else GROUP_AUTHORIZATION_FAILED, the whole
answer); the member id (empty or longer than 36: INVALID_REQUEST); v2's RENEW rule (with
``is_renew_ack`` the max bytes, min bytes, max records and max wait must be 0); the share session
(``ShareSessionCache.fetch_context``: its errors are the whole answer; SHARE_SESSION_LIMIT_REACHED
after waiting ``max_wait_ms``, as Kafka's idle timer); then the piggybacked acknowledgements, each
partition checked as ``validateAcknowledgementBatches`` does (INVALID_REQUEST) and refused where
the topic id is unknown (UNKNOWN_TOPIC_ID), READ on the topic is missing
(TOPIC_AUTHORIZATION_FAILED), the partition does not exist (UNKNOWN_TOPIC_OR_PARTITION), this
broker does not lead it (NOT_LEADER_OR_FOLLOWER), or the share-partition refuses them
(INVALID_RECORD_STATE: not acquired, or by another member); then the fetch over every partition of
the session, ``max_records`` (soft) and ``max_bytes`` shared among them, starting from a
partition that rotates with the session epoch (``PartitionRotateStrategy``). When nothing could
be acquired the request waits up to ``max_wait_ms`` for an append, a lock expiry, a release or an
acknowledgement of one of its partitions (``DelayedShareFetch``), then answers what it has. The
acknowledgements' records are in the log before the answer leaves. Epoch -1 closes the session and
releases what the member still holds (``releaseSession``); so does the connection closing.

The answer names every partition of an opening request; later ones name the partitions with
records, an error or an acknowledgement result (``ShareSessionContext``'s ``mustRespond``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from groupd.coordinator.share_partition import AckBatch, SharePartitionKey
from groupd.coordinator.share_partition.partition import RENEW, AckError
from groupd.coordinator.share_partition.sessions import FINAL_EPOCH, INITIAL_EPOCH, SessionError, ShareSessionCache
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.security.acl import Authorizer, subject_of
from groupd.security.acl_model import AclOperation, ResourceType
from groupd.storage.errors import CorruptRecordError, OffsetOutOfRangeError, StorageError

from .partitions import SharePartitions

__all__ = ["SHARE_ACKNOWLEDGE_VERSIONS", "SHARE_FETCH_VERSIONS", "ShareHandlers"]

log = structlog.get_logger("groupd.share")

SHARE_FETCH_VERSIONS = (1, 2)
SHARE_ACKNOWLEDGE_VERSIONS = (1, 2)
# ShareFetch v1 has max_records; a request asking for none gets Kafka's consumer default
_DEFAULT_MAX_RECORDS = 500
_MAX_MEMBER_ID = 36  # KafkaApis.isMemberIdValid

TopicPartition = tuple[uuid.UUID, int]
# (topic, partition) -> (error code, leader id, leader epoch): a cluster's leadership check
LeaderCheck = Callable[[str, int], tuple[int, int, int]]


def _top(code: int, message: str | None = None, lock_ms: int = 0) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "acquisition_lock_timeout_ms": lock_ms,
        "responses": [],
        "node_endpoints": [],
    }


def _no_leader() -> dict[str, int]:
    return {"leader_id": -1, "leader_epoch": -1}


def _validate_acks(batches: list[dict[str, Any]], v: int, renew: bool) -> bool:
    """``KafkaApis.validateAcknowledgementBatches``: ordered, well-formed, known types."""
    prev_end = -1
    max_type = RENEW if v >= 2 else 3
    for b in batches:
        first, last, types = b["first_offset"], b["last_offset"], b["acknowledge_types"] or []
        if first > last or first < prev_end or not types:
            return False
        if len(types) > 1 and last - first != len(types) - 1:
            return False
        if any(t < 0 or t > max_type for t in types) or (not renew and RENEW in types):
            return False
        prev_end = last
    return True


class ShareHandlers:
    """The two APIs of one broker (its share sessions are its own, as in Kafka)."""

    def __init__(
        self,
        parts: SharePartitions,
        authorizer: Authorizer | None = None,
        *,
        leader: LeaderCheck | None = None,
        endpoint: Callable[[int], tuple[str, int] | None] | None = None,
    ) -> None:
        self.parts = parts
        self.topics = parts.topics
        self.authz = authorizer if authorizer is not None and authorizer.enabled else None
        self.leader = leader
        self.endpoint = endpoint
        self.sessions = ShareSessionCache(parts.settings.max_share_sessions)
        parts.session_caches.append(self.sessions)
        self._watched: set[int] = set()
        self._waiting: dict[int, set[asyncio.Future[None]]] = {}  # connection -> its long polls
        self.fetches = 0
        self.acknowledged = 0

    # --- checks -----------------------------------------------------------------------------------
    def _group_refused(self, req: Request, group: str) -> bool:
        return self.authz is not None and not self.authz.authorize(
            subject_of(req), AclOperation.READ, ResourceType.GROUP, group
        )

    def _topic_refused(self, req: Request, topic: str) -> bool:
        return self.authz is not None and not self.authz.authorize(
            subject_of(req), AclOperation.READ, ResourceType.TOPIC, topic
        )

    def _partition_error(self, req: Request, tid: uuid.UUID, p: int) -> tuple[int, Any, dict[str, int]]:
        """(error code, topic, current leader) of one partition a request names."""
        t = self.topics.by_id(tid)
        if t is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None, _no_leader()
        if self._topic_refused(req, t.name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, t, _no_leader()
        if not 0 <= p < t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, t, _no_leader()
        if self.leader is not None:
            code, leader, epoch = self.leader(t.name, p)
            if code:
                return code, t, {"leader_id": leader, "leader_epoch": epoch}
        return ErrorCode.NONE, t, _no_leader()

    def _watch(self, conn: Any) -> None:
        """Sessions of a closed connection go and release their records (Kafka's
        ``ConnectionDisconnectListener``)."""
        if id(conn) in self._watched:
            return
        add = getattr(conn, "add_close_callback", None)
        if add is None:
            return
        self._watched.add(id(conn))

        def closed(c: Any) -> None:
            self._watched.discard(id(c))
            for fut in self._waiting.pop(id(c), ()):
                if not fut.done():
                    fut.set_result(None)  # a long poll of a closed connection ends now
            for s in self.sessions.remove_connection(c):
                self.parts.release_member(*s.key)

        add(closed)

    # --- ShareAcknowledge -------------------------------------------------------------------------
    def share_acknowledge(self, req: Request) -> Any:
        return self._share_acknowledge(req)

    async def _share_acknowledge(self, req: Request) -> dict[str, Any]:
        body, v = req.body, req.api_version
        group = body["group_id"] or ""
        if self._group_refused(req, group):
            return _top(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        member = body["member_id"] or ""
        if not member or len(member) > _MAX_MEMBER_ID:
            return _top(ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
        epoch = body["share_session_epoch"]
        try:
            self.sessions.acknowledge_context((group, member), epoch)
        except SessionError as e:
            return _top(e.code)
        renew = v >= 2 and bool(body.get("is_renew_ack"))
        results = await self._acknowledge(req, group, member, body["topics"] or [], v, renew, keep_empty=True)
        if epoch == FINAL_EPOCH:
            self.sessions.remove((group, member))
            self.parts.release_member(group, member)
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        endpoints: dict[int, dict[str, Any]] = {}
        for (tid, p), (code, msg, leader) in results.items():
            by_topic.setdefault(tid, []).append(
                {"partition_index": p, "error_code": code, "error_message": msg, "current_leader": leader}
            )
            self._endpoint(code, leader, endpoints)
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "acquisition_lock_timeout_ms": self.parts.lock_ms(group),
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()],
            "node_endpoints": list(endpoints.values()),
        }

    async def _acknowledge(
        self,
        req: Request,
        group: str,
        member: str,
        topics: list[dict[str, Any]],
        v: int,
        renew: bool,
        *,
        keep_empty: bool,
    ) -> dict[TopicPartition, tuple[int, str | None, dict[str, int]]]:
        """Apply the acknowledgements of every partition; wait for their records; per partition
        (error code, message, current leader)."""
        out: dict[TopicPartition, tuple[int, str | None, dict[str, int]]] = {}
        writes: list[tuple[TopicPartition, asyncio.Task[Any]]] = []
        lock_ms = self.parts.lock_ms(group)
        now = self.parts.clock()
        for td in topics:
            tid = td["topic_id"]
            for pd in td["partitions"] or []:
                p = pd["partition_index"]
                batches = pd["acknowledgement_batches"] or []
                if not batches:
                    if keep_empty:
                        out[(tid, p)] = (ErrorCode.NONE, None, _no_leader())
                    continue
                if not _validate_acks(batches, v, renew):
                    out[(tid, p)] = (ErrorCode.INVALID_REQUEST, None, _no_leader())
                    continue
                code, t, leader = self._partition_error(req, tid, p)
                if code:
                    out[(tid, p)] = (code, None, leader)
                    continue
                key = SharePartitionKey(group, tid, p)
                if key not in self.parts.partitions and self.parts.store.get(key) is None:
                    # SharePartitionManager.acknowledge: no such share-partition
                    out[(tid, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, leader)
                    continue
                try:
                    sp = self.parts.get(key, t)
                    changed = sp.acknowledge(
                        member,
                        [AckBatch(b["first_offset"], b["last_offset"], b["acknowledge_types"]) for b in batches],
                        now,
                        lock_ms,
                    )
                except AckError as e:
                    out[(tid, p)] = (e.code, e.message, leader)
                    continue
                except (StorageError, CorruptRecordError, OSError) as e:
                    log.error("share_acknowledge_failed", group=group, topic=t.name, partition=p, error=str(e))
                    out[(tid, p)] = (ErrorCode.KAFKA_STORAGE_ERROR, None, leader)
                    continue
                self.acknowledged += sum(b["last_offset"] - b["first_offset"] + 1 for b in batches)
                if any(RENEW in b["acknowledge_types"] for b in batches):
                    self.parts.renewed(key)
                out[(tid, p)] = (ErrorCode.NONE, None, leader)
                task = self.parts.changed(key, t.name, changed)
                if task is not None:
                    writes.append(((tid, p), task))
        for tp, task in writes:
            try:
                await task
            except Exception as e:  # the state is applied; the answer says it may not survive a crash
                log.error("share_state_write_failed", group=group, error=str(e))
                out[tp] = (ErrorCode.KAFKA_STORAGE_ERROR, None, out[tp][2])
        return out

    def _endpoint(self, code: int, leader: dict[str, int], endpoints: dict[int, dict[str, Any]]) -> None:
        if code != ErrorCode.NOT_LEADER_OR_FOLLOWER or self.endpoint is None:
            return
        node = leader["leader_id"]
        ep = self.endpoint(node) if node >= 0 else None
        if ep is not None:
            endpoints[node] = {"node_id": node, "host": ep[0], "port": ep[1], "rack": None}

    # --- ShareFetch -------------------------------------------------------------------------------
    def share_fetch(self, req: Request) -> Any:
        return self._share_fetch(req)

    async def _share_fetch(self, req: Request) -> dict[str, Any]:
        body, v = req.body, req.api_version
        group = body["group_id"] or ""
        if self._group_refused(req, group):
            return _top(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        member = body["member_id"] or ""
        if not member or len(member) > _MAX_MEMBER_ID:
            return _top(ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
        renew = v >= 2 and bool(body.get("is_renew_ack"))
        if renew and any(body[f] for f in ("max_bytes", "min_bytes", "max_records", "max_wait_ms")):
            return _top(
                ErrorCode.INVALID_REQUEST,
                "maxBytes, minBytes, maxRecords and maxWaitMs must be set to 0 if isRenewAck is true.",
            )
        epoch = body["share_session_epoch"]
        topics = body["topics"] or []
        fetch = [(td["topic_id"], pd["partition_index"]) for td in topics for pd in td["partitions"] or []]
        forget = [(td["topic_id"], p) for td in body["forgotten_topics_data"] or [] for p in td["partitions"] or []]
        has_acks = any(pd["acknowledgement_batches"] for td in topics for pd in td["partitions"] or [])
        try:
            session, reading = self.sessions.fetch_context((group, member), epoch, fetch, forget, has_acks, req.conn)
        except SessionError as e:
            if e.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED and body["max_wait_ms"] > 0:
                await asyncio.sleep(body["max_wait_ms"] / 1000)  # createIdleShareFetchTimerTask
            return _top(e.code)
        self._watch(req.conn)
        self.fetches += 1
        lock_ms = self.parts.lock_ms(group)
        acks: dict[TopicPartition, tuple[int, str | None, dict[str, int]]] = {}
        if has_acks:
            acks = await self._acknowledge(req, group, member, topics, v, renew, keep_empty=False)
        fetched: dict[TopicPartition, dict[str, Any]] = {}
        if not renew and epoch != FINAL_EPOCH:
            rotate = (session.epoch if session is not None else 0) % max(len(reading), 1)
            fetched = await self._fetch(req, group, member, reading[rotate:] + reading[:rotate], body)
        if epoch == FINAL_EPOCH:
            self.sessions.remove((group, member))
            self.parts.release_member(group, member)
        # the answer: fetch results in session order, then the acknowledgement results
        entries: dict[TopicPartition, dict[str, Any]] = {}
        initial = epoch == INITIAL_EPOCH
        for tp in reading:
            e = fetched.get(tp)
            if e is not None and (initial or e["error_code"] or e["acquired_records"] or tp in acks):
                entries[tp] = e
        endpoints: dict[int, dict[str, Any]] = {}
        for tp, (code, msg, leader) in acks.items():
            e = entries.get(tp)
            if e is None:
                e = entries[tp] = _fetch_entry(tp[1])
            e["acknowledge_error_code"] = code
            e["acknowledge_error_message"] = msg
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                e["current_leader"] = leader
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for (tid, _p), e in entries.items():
            by_topic.setdefault(tid, []).append(e)
            self._endpoint(e["error_code"] or e["acknowledge_error_code"], e["current_leader"], endpoints)
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms,
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()],
            "node_endpoints": list(endpoints.values()),
        }

    async def _fetch(
        self, req: Request, group: str, member: str, reading: list[TopicPartition], body: dict[str, Any]
    ) -> dict[TopicPartition, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(body["max_wait_ms"], 0) / 1000
        while True:
            out, acquired, waiting, loads = self._read_all(req, group, member, reading, body)
            if loads:
                for t, p, plog in loads:
                    await self.parts.load_producer_state(t, p, plog)
                continue
            left = deadline - loop.time()
            if acquired or not waiting or left <= 0 or req.conn.closed:
                return out
            fut = self.parts.wait(waiting, left)
            mine = self._waiting.setdefault(id(req.conn), set())
            mine.add(fut)
            try:
                await fut
            finally:
                mine.discard(fut)
                if not mine:
                    self._waiting.pop(id(req.conn), None)

    def _read_all(
        self, req: Request, group: str, member: str, reading: list[TopicPartition], body: dict[str, Any]
    ) -> tuple[dict[TopicPartition, dict[str, Any]], bool, list[tuple[str, int]], list[Any]]:
        """One pass over the session's partitions: (entries, anything acquired, the logs to wait
        on, the producer states to load first)."""
        records_left = body.get("max_records") or _DEFAULT_MAX_RECORDS
        bytes_left = body["max_bytes"] if body["max_bytes"] > 0 else 2**31 - 1
        out: dict[TopicPartition, dict[str, Any]] = {}
        waiting: list[tuple[str, int]] = []
        loads: list[Any] = []
        acquired_any = False
        for tid, p in reading:
            e = out[(tid, p)] = _fetch_entry(p)
            code, t, leader = self._partition_error(req, tid, p)
            if code:
                e["error_code"] = code
                e["current_leader"] = leader
                continue
            key = SharePartitionKey(group, tid, p)
            if key not in self.parts.partitions and self.parts.store.get(key) is None:
                # the share coordinator's read of an uninitialized share-partition fails
                # (INVALID_REQUEST), which SharePartition.fetchPersisterError makes UNKNOWN_SERVER_ERROR
                e["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
                e["error_message"] = "Read operation on uninitialized share partition not allowed."
                continue
            waiting.append((t.name, p))
            plog = self.parts.needs_producer_state(key, t)
            if plog is not None:
                loads.append((t, p, plog))
                continue
            if records_left <= 0 or bytes_left <= 0:
                continue
            try:
                acquired, data = self.parts.read(key, t, member, records_left, bytes_left)
            except OffsetOutOfRangeError:
                continue  # the log moved under the read (retention): the next pass reads from the new start
            except (StorageError, CorruptRecordError, ValueError, OSError) as exc:
                log.error("share_fetch_read_failed", group=group, topic=t.name, partition=p, error=str(exc))
                e["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if acquired:
                acquired_any = True
                e["records"] = data
                e["acquired_records"] = [
                    {"first_offset": a.first_offset, "last_offset": a.last_offset, "delivery_count": a.delivery_count}
                    for a in acquired
                ]
                records_left -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
                bytes_left -= len(data)
        return out, acquired_any, waiting, loads


def _fetch_entry(p: int) -> dict[str, Any]:
    return {
        "partition_index": p,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "acknowledge_error_code": ErrorCode.NONE,
        "acknowledge_error_message": None,
        "current_leader": _no_leader(),
        "records": b"",
        "acquired_records": [],
    }
