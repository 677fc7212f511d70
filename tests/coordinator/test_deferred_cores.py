"""The KIP-848 consumer-group and KIP-932 share-group cores are built by their first use
(coordinator/lazy.py, issue 26 start-up): until then the classic, offset, admin and timer paths get
the empty manager's answers from a stand-in; the first request or replayed record of the kind builds
the real core, and every collaborator holds the real one from then on."""

from __future__ import annotations

import uuid
from typing import Any

from groupd.coordinator.consumer import TopicsImage
from groupd.coordinator.consumer.manager import ConsumerGroupManager
from groupd.coordinator.lazy import DeferredGroups
from groupd.coordinator.share.manager import ShareGroupManager

from .harness import Shell

T = uuid.uuid5(uuid.NAMESPACE_DNS, "t")
IMAGE = TopicsImage(1, {"t": (T, 3)})


def _holders(shell: Shell) -> dict[str, Any]:
    c = shell.coord
    return {
        "coordinator": c.consumer,
        "managers": c._managers.consumer,
        "classic": c.classic.consumer,
        "consumer_requests": c.consumer_requests.consumer,
        "migration": c.migration.consumer,
        "offsets": c.offset_manager.consumer,
        "admin": c.admin.consumer,
        "share_requests": c.share_requests.consumer,
    }


def _cg_heartbeat(shell: Shell, member: str, group: str = "cg") -> dict[str, Any]:
    req = {
        "group_id": group,
        "member_id": member,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    answer = shell.answer(shell.send("ConsumerGroupHeartbeat", 1, req))
    assert answer is not None
    return answer


def _share_heartbeat(shell: Shell, member: str, group: str = "sg") -> dict[str, Any]:
    req = {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]}
    answer = shell.answer(shell.send("ShareGroupHeartbeat", 1, req))
    assert answer is not None
    return answer


def test_classic_groups_offsets_listing_and_timers_leave_both_cores_unbuilt() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    c = shell.coord
    assert isinstance(c.consumer, DeferredGroups) and not c.consumer.built
    assert isinstance(c.share, DeferredGroups) and not c.share.built
    a = shell.client("a")
    a.join()
    a.sync()
    assert a.heartbeat() == 0
    assert shell.answer(a.commit({("t", 0): 5}))["topics"][0]["partitions"][0]["error_code"] == 0
    listed = shell.answer(shell.send("ListGroups", 5, {"states_filter": [], "types_filter": []}))
    assert [g["group_id"] for g in listed["groups"]] == ["g"]
    shell.advance(60_000)  # the member's session expires, the retention check runs
    assert a.heartbeat() == 25  # UNKNOWN_MEMBER_ID: expired by the shard's timers
    assert c.next_deadline() is not None
    for p in range(3):  # a partition's unload and load ask each kind of group for its own
        shell.unload(p)
        shell.reload(p)
    assert not c.consumer.built and not c.share.built
    # a describe of a consumer group that does not exist: answered as before, by the stand-in
    described = shell.answer(shell.send("ConsumerGroupDescribe", 0, {"group_ids": ["nope"]}))
    assert described["groups"][0]["error_code"] == 69  # GROUP_ID_NOT_FOUND


def test_the_first_consumer_heartbeat_builds_the_core_and_every_holder_gets_it() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    stand_in = shell.coord.consumer
    assert all(h is stand_in for h in _holders(shell).values())
    answer = _cg_heartbeat(shell, "m1")
    assert answer["error_code"] == 0 and answer["member_epoch"] == 1
    assert stand_in.built
    real = shell.coord.consumer
    assert isinstance(real, ConsumerGroupManager)
    assert all(h is real for h in _holders(shell).values()), _holders(shell)
    assert real.group("cg") is not None and stand_in.group("cg") is real.group("cg")
    # the log events were attached to the stand-in when the shard was built: the real one has them
    assert real.events.log is not None
    assert not shell.coord.share.built


def test_the_first_share_heartbeat_builds_the_share_core() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    stand_in = shell.coord.share
    answer = _share_heartbeat(shell, "s1")
    assert answer["error_code"] == 0 and answer["member_epoch"] == 1
    real = shell.coord.share
    assert isinstance(real, ShareGroupManager) and stand_in.built
    assert shell.coord.share_requests.share is real and shell.coord._managers.share is real
    # what ShareGroupRequests set on the stand-in before the build
    assert real.before_write == shell.coord.share_requests.snapshot and real.log is shell.coord.log
    assert real.group("sg") is not None


def test_a_restart_replaying_consumer_and_share_records_builds_both_cores() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    _cg_heartbeat(shell, "m1")
    _share_heartbeat(shell, "s1")
    fresh = shell.reloaded()
    assert isinstance(fresh.consumer, ConsumerGroupManager) and fresh.consumer.group("cg") is not None
    assert isinstance(fresh.share, ShareGroupManager) and fresh.share.group("sg") is not None
    # and a restart on a log of classic groups only builds neither
    classic_only = Shell(topics_image=lambda: IMAGE)
    a = classic_only.client("a")
    a.join()
    a.sync()
    again = classic_only.reloaded()
    assert isinstance(again.consumer, DeferredGroups) and not again.consumer.built
    assert isinstance(again.share, DeferredGroups) and not again.share.built
