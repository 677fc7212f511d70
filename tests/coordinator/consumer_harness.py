"""A fake shell for the KIP-848 consumer-group core: fake clock, a record log, clients that act on answers."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from typing import Any

from groupd.coordinator.consumer import ConsumerGroupManager, ConsumerGroups, TopicsImage
from groupd.coordinator.consumer.member import freeze
from groupd.coordinator.consumer.records import ConsumerRecord
from groupd.coordinator.consumer_wire import SteadyBody, parse_body_for
from groupd.protocol.messages import API_BY_NAME

GROUP = "g"


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def image(version: int = 1, **partitions: int) -> TopicsImage:
    return TopicsImage(version, {n: (topic_id(n), c) for n, c in partitions.items()})


@functools.cache
def _reader(version: int) -> Any:
    """One reader per version, as the dispatcher keeps one: a member's unchanged bytes get the body
    read from them last time (coordinator/_native.c steady_consumer_reader), which the hot path and
    the generic path are then both handed, as they are in the daemon."""
    return parse_body_for(version)


def _as_read(version: int, request: dict[str, Any]) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat body as the dispatcher hands it on: encoded, then read by the steady
    reader (``consumer_wire.parse_body_for``, the generic decoder for the rest); one the codec cannot
    encode (a test's malformed request) as it is."""
    try:
        wire = API_BY_NAME["ConsumerGroupHeartbeat"].request.codec(version).encode(request)
    except Exception:
        return request
    return _reader(version)(wire, 0)[0]  # type: ignore[no-any-return]


@dataclass
class Client:
    """A consumer: remembers its member id and epoch, owns what it was last given (it acknowledges a
    revocation in its next heartbeat, as librdkafka does after its revoke callback)."""

    shell: Shell
    member_id: str
    topics: list[str] | None = None
    regex: str | None = None
    instance_id: str | None = None
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    last: dict[str, Any] = field(default_factory=dict)

    def heartbeat(self, **over: Any) -> dict[str, Any]:
        full = self.epoch == 0
        req: dict[str, Any] = {
            "group_id": GROUP,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.instance_id,
            "rack_id": None,
            "rebalance_timeout_ms": 30000 if full else -1,
            "subscribed_topic_names": self.topics if full else None,
            "subscribed_topic_regex": self.regex if full else None,
            "server_assignor": None,
            "topic_partitions": [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(self.owned.items())],
        }
        req.update(over)
        resp = self.shell.heartbeat(req)
        self.last = resp
        if resp["error_code"] == 0:
            if resp["member_epoch"] >= 0:
                self.epoch = resp["member_epoch"]
            if resp["assignment"] is not None:
                self.owned = freeze({tp["topic_id"]: tp["partitions"] for tp in resp["assignment"]["topic_partitions"]})
        return resp

    def leave(self, epoch: int = -1) -> dict[str, Any]:
        resp = self.heartbeat(member_epoch=epoch)
        self.owned = {}
        return resp


@dataclass
class Shell:
    topics: TopicsImage = field(default_factory=lambda: image(t=6))
    now: int = 0

    def __post_init__(self) -> None:
        self.mgr = ConsumerGroupManager(topics=self.topics)
        self.log: list[ConsumerRecord] = []

    def heartbeat(self, req: dict[str, Any]) -> dict[str, Any]:
        # The shell's hot path (steady_heartbeat) answers what heartbeat answers whenever it answers,
        # and changes nothing else: a session renewed twice at one time is idempotent.
        # It is handed the body as the dispatcher reads it, and told when the steady reader read it
        # (a SteadyBody: its unset fields are not looked at again), as ConsumerGroupRequests does.
        body = _as_read(1, req)
        fast = self.mgr.steady_heartbeat(self.now, body, 1, "", "", type(body) is SteadyBody)
        result = self.mgr.heartbeat(self.now, req)
        self.log.extend(result.records)
        if fast is not None:
            assert fast == result.response and not result.records, (fast, result)
        return result.response

    def client(self, name: str, topics: list[str] | None = None, **kw: Any) -> Client:
        return Client(self, name, topics=topics if topics is not None or kw.get("regex") else ["t"], **kw)

    def advance(self, ms: int) -> None:
        self.now += ms
        self.log.extend(self.mgr.tick(self.now))

    def set_topics(self, img: TopicsImage) -> None:
        self.topics = img
        self.mgr.set_topics(img)

    def group(self) -> Any:
        return self.mgr.group(GROUP)

    def recovered(self) -> ConsumerGroups:
        fresh = ConsumerGroups()
        for r in self.log:
            fresh.replay(r)
        return fresh
