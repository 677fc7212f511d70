"""Moving ``__consumer_offsets`` partitions at run time: Kafka's coordinator election and resignation.

``GroupCoordinatorService.onElection`` -> ``CoordinatorRuntime.scheduleLoadOperation`` (the partition
loads, its groups answer COORDINATOR_LOAD_IN_PROGRESS, then ``GroupMetadataManager.onLoaded``) and
``onResignation`` -> ``scheduleUnloadOperation`` (deferred events and the current batch fail with
NOT_COORDINATOR, timers are cancelled, ``GroupMetadataManager.onUnloaded`` answers the classic
members' pending JoinGroup/SyncGroup NOT_COORDINATOR). In a cluster sharing one core, only the
broker leading a group's partition serves it: every other answers NOT_COORDINATOR.
"""

from __future__ import annotations

from typing import Any

import pytest
from groupd.coordinator import CoordinatorConfig, Node, PartitionOwnership, partition_for
from harness import Shell, assignment
from test_consumer_group_coordinator import IMAGE, hb
from test_rebalance import stable_group

P = partition_for("g")  # 3
OTHER = "h"  # partition 4
B1, B2, B3 = Node(1, "b1", 9092), Node(2, "b2", 9093), Node(3, "b3", 9094)


def cluster_shell(**kw: Any) -> Shell:
    """A core shared by three brokers; every partition led by broker 1 to begin with."""
    s = Shell(**kw)
    s.coord.ownership = PartitionOwnership(B1, 50, nodes=[B2, B3])
    return s


def persisted(s: Shell, gid: str) -> tuple[Any, ...]:
    consumer = s.coord.consumer.group(gid)
    return (
        s.coord.group_records.get(gid),
        dict(s.coord.offsets.get(gid, {})),
        None if consumer is None else consumer.persisted(),
    )


def commit_request(c: Any, offset: int, partition: int = 0) -> dict[str, Any]:
    return {
        "group_id": c.group,
        "generation_id_or_member_epoch": c.generation,
        "member_id": c.member_id,
        "group_instance_id": None,
        "topics": [
            {"name": "t", "partitions": [{"partition_index": partition, "committed_offset": offset}]},
        ],
    }


def fetch(s: Shell, gid: str = "g") -> dict[tuple[str, int], int] | int:
    resp = s.answer(s.send("OffsetFetch", 7, {"group_id": gid, "topics": None}))
    assert resp is not None
    if resp["error_code"]:
        return resp["error_code"]
    return {(t["name"], p["partition_index"]): p["committed_offset"] for t in resp["topics"] for p in t["partitions"]}


# -- onUnloaded: what waits is answered NOT_COORDINATOR ---------------------------------------------


def test_on_unloaded_answers_pending_joins_of_a_preparing_rebalance_group_not_coordinator() -> None:
    s, (a, _b) = stable_group(2)
    a.join()  # the leader rejoins: PreparingRebalance, a's JoinGroup parked until b rejoins
    assert s.state() == "PreparingRebalance" and a.pending_join is not None
    s.unload(P)
    s.deliver()
    assert a.last_join["error_code"] == 16 and a.last_join["member_id"] == a.member_id
    assert s.coord.group("g") is None
    assert s.coord.partition_state(P) == "unloaded"


def test_on_unloaded_answers_pending_syncs_of_a_completing_rebalance_group_not_coordinator() -> None:
    s, (a, b) = stable_group(2)
    a.join()
    b.join()
    s.deliver()
    assert s.state() == "CompletingRebalance"
    follower = b if a.is_leader else a
    follower.sync()
    assert follower.pending_sync is not None
    s.unload(P)
    s.deliver()
    assert follower.last_sync["error_code"] == 16


def test_schedule_unload_operation_fails_an_inflight_commit_not_coordinator_and_ignores_its_completion() -> None:
    """CoordinatorRuntime's unload fails the deferred events (the commit waiting for the log) with
    NOT_COORDINATOR; the write itself may still reach the log, and the next load replays it."""
    s, (a, _b) = stable_group(2)
    s.auto_append = False
    ctx = s.send("OffsetCommit", 8, commit_request(a, 42))
    assert s.answer(ctx) is None and len(s.queued) == 1
    s.unload(P)
    assert s.answer(ctx)["topics"][0]["partitions"][0]["error_code"] == 16
    assert s.coord.pending_appends == 0
    s.flush()  # the write lands after all: its completion is no one's any more
    s.auto_append = True
    s.reload(P)
    assert fetch(s) == {("t", 0): 42}


def test_a_write_that_fails_after_the_unload_is_not_answered_twice() -> None:
    s, (a, _b) = stable_group(2)
    s.auto_append = False
    ctx = s.send("OffsetCommit", 8, commit_request(a, 7))
    s.unload(P)
    s.flush(error=56)  # the Shell asserts that no ctx is answered twice
    assert s.answer(ctx)["topics"][0]["partitions"][0]["error_code"] == 16
    s.auto_append = True
    s.reload(P)
    assert fetch(s) == {}


def test_an_acknowledged_commit_is_visible_after_the_partition_comes_back() -> None:
    s, (a, _b) = stable_group(2)
    ctx = s.send("OffsetCommit", 8, commit_request(a, 99, partition=1))
    assert s.answer(ctx)["topics"][0]["partitions"][0]["error_code"] == 0
    before = persisted(s, "g")
    s.unload(P)
    assert fetch(s) == 16
    s.reload(P)
    assert persisted(s, "g") == before
    assert fetch(s) == {("t", 1): 99}


def test_a_failed_assignment_write_restarting_the_join_is_not_handed_out() -> None:
    """The leader's SyncGroup write is in flight when the partition goes: its continuation (as on any
    failed write, reset the assignment and rebalance) must not leave a write behind for the shell."""
    s, (a, b) = stable_group(2)
    a.join()
    b.join()
    s.deliver()
    assert s.state() == "CompletingRebalance"
    s.auto_append = False
    leader, follower = (a, b) if a.is_leader else (b, a)
    follower.sync()
    leader.sync({m["member_id"]: assignment("t", i) for i, m in enumerate(leader.members)})
    assert leader.pending_sync is not None and s.coord.pending_appends == 1
    queued = len(s.queued)
    s.unload(P)
    s.deliver()
    assert leader.last_sync["error_code"] == 16 and follower.last_sync["error_code"] == 16
    assert len(s.queued) == queued and s.coord.pending_appends == 0


# -- timers -----------------------------------------------------------------------------------------


def test_unload_cancels_the_partitions_deadlines_and_on_loaded_rearms_sessions() -> None:
    s, (a, b) = stable_group(2, session_timeout_ms=10000)
    s.unload(P)
    assert s.coord._deadlines.get(("hb", "g", a.member_id)) is None
    s.advance(60000)  # no expiry fires for a group no longer here
    s.reload(P)
    g = s.group()
    assert s.state() == "Stable" and set(g.members) == {a.member_id, b.member_id}
    assert s.coord._deadlines.get(("hb", "g", a.member_id)) == s.now + 10000
    assert a.heartbeat() == 0
    s.advance(10001)  # b never heartbeats to the new coordinator: its session runs out
    assert b.member_id not in s.group().members


def test_consumer_group_timers_cancelled_on_unload_and_sessions_rearmed_on_load() -> None:
    s = Shell(topics_image=lambda: IMAGE)
    first = hb(s, "m1")
    hb(s, "m2")
    cg = partition_for("cg")
    assert len(s.coord.consumer.deadlines) == 2
    before = persisted(s, "cg")
    s.unload(cg)
    assert len(s.coord.consumer.deadlines) == 0 and s.coord.consumer.group("cg") is None
    assert hb(s, "m1", first["member_epoch"])["error_code"] == 16
    s.advance(100000)
    s.reload(cg)
    assert persisted(s, "cg") == before
    assert {k[1] for k in s.coord.consumer.deadlines.due_keys()} == {"m1", "m2"}
    s.advance(45001)  # neither heartbeats after the move: both fenced
    assert s.coord.consumer.group("cg").members == {}


def test_a_consumer_heartbeat_write_in_flight_and_the_one_queued_behind_it_get_not_coordinator() -> None:
    s = Shell(auto_append=False, topics_image=lambda: IMAGE)
    req = {
        "group_id": "cg",
        "member_id": "m1",
        "member_epoch": 0,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    }
    first = s.send("ConsumerGroupHeartbeat", 1, req)
    second = s.send("ConsumerGroupHeartbeat", 1, {**req, "member_id": "m2"})
    assert s.answer(first) is None and s.answer(second) is None
    s.unload(partition_for("cg"))
    assert s.answer(first)["error_code"] == 16 and s.answer(second)["error_code"] == 16
    s.flush()
    assert s.coord.consumer.group("cg") is None


# -- loading: COORDINATOR_LOAD_IN_PROGRESS for that partition only --------------------------------------


def test_while_a_partition_loads_its_groups_wait_and_the_others_are_served() -> None:
    s, (a, _b) = stable_group(2)
    other = s.client("x", group=OTHER)
    other.join()
    other.sync({other.member_id: assignment("t", 0)})
    s.unload(P)
    s.begin_load(P)
    assert s.coord.partition_state(P) == "loading"
    assert fetch(s) == 14
    assert a.heartbeat() == 0  # GroupCoordinatorService.heartbeat: loading answers NONE
    join = s.answer(s.send("JoinGroup", 5, {**a.join_request(), "member_id": ""}))
    assert join["error_code"] == 14
    assert other.heartbeat() == 0 and s.state(OTHER) == "Stable"
    s.finish_load(P)
    assert s.coord.partition_state(P) == "active" and s.state() == "Stable"


def test_a_stale_election_or_resignation_is_ignored() -> None:
    """scheduleLoadOperation / scheduleUnloadOperation ignore an epoch not above the context's."""
    s, _ = stable_group(2)
    s.unload(P, epoch=5)
    assert s.coord.partition_epoch(P) == 5 and s.coord.ownership.epoch(P) == 5
    s.begin_load(P, epoch=5)  # not newer: ignored
    assert s.coord.partition_state(P) == "unloaded"
    s.reload(P, epoch=6)
    assert s.state() == "Stable"
    s.unload(P, epoch=6)  # a resignation of the epoch we were elected at is stale
    assert s.coord.partition_state(P) == "active"


def test_a_load_overtaken_by_a_newer_election_is_not_completed() -> None:
    s, _ = stable_group(2)
    s.unload(P)
    s.begin_load(P, epoch=10)
    s.begin_load(P, epoch=11)
    assert not s.coord.is_loading(P, 10) and s.coord.is_loading(P, 11)
    s.absorb(s.coord.end_load(P, s.now, 10))  # the stale load finishing: ignored
    assert s.coord.partition_state(P) == "loading"
    s.finish_load(P)
    assert s.state() == "Stable"


def test_each_election_bumps_the_leader_epoch() -> None:
    s = cluster_shell()
    e0 = s.coord.ownership.epoch(P)
    s.reload(P, node=B2)  # a leader change
    assert s.coord.ownership.epoch(P) == e0 + 1 and s.coord.partition_epoch(P) == e0 + 1
    s.unload(P)
    s.reload(P, node=B2)
    assert s.coord.ownership.epoch(P) == e0 + 3


# -- classic groups come back as onLoaded makes them -------------------------------------------------


def test_a_group_unloaded_while_completing_rebalance_comes_back_stable_at_its_last_durable_generation() -> None:
    s, (a, b) = stable_group(2)
    gen = s.group().generation
    a.join()
    b.join()
    s.deliver()
    assert s.state() == "CompletingRebalance" and s.group().generation == gen + 1
    s.unload(P)
    s.reload(P)
    assert s.state() == "Stable" and s.group().generation == gen
    # the members, at gen + 1, are told to rejoin
    a.sync()
    s.deliver()
    assert a.last_sync["error_code"] == 22


def test_a_loaded_group_over_capacity_rebalances_as_on_loaded_does() -> None:
    s, _ = stable_group(3)
    s.coord.config = CoordinatorConfig(group_max_size=2)
    s.unload(P)
    s.reload(P)
    assert s.state() == "PreparingRebalance"


# -- ownership per receiving broker ------------------------------------------------------------------

GROUP_REQUESTS: list[tuple[str, int, dict[str, Any]]] = [
    (
        "JoinGroup",
        5,
        {
            "group_id": "g",
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    ),
    ("SyncGroup", 3, {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []}),
    ("Heartbeat", 3, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
    ("LeaveGroup", 1, {"group_id": "g", "member_id": "m"}),
    (
        "OffsetCommit",
        8,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
        },
    ),
    ("OffsetFetch", 7, {"group_id": "g", "topics": None}),
    ("OffsetDelete", 0, {"group_id": "g", "topics": []}),
    ("DescribeGroups", 5, {"groups": ["g"]}),
    ("DeleteGroups", 2, {"groups_names": ["g"]}),
    ("ConsumerGroupDescribe", 0, {"group_ids": ["g"]}),
    (
        "ConsumerGroupHeartbeat",
        0,
        {"group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1000, "topic_partitions": []},
    ),
]


def error_of(api: str, resp: dict[str, Any]) -> int:
    if api == "DescribeGroups" or api == "ConsumerGroupDescribe":
        return resp["groups"][0]["error_code"]
    if api == "DeleteGroups":
        return resp["results"][0]["error_code"]
    if api == "OffsetCommit":
        return resp["topics"][0]["partitions"][0]["error_code"]
    return resp["error_code"]


@pytest.mark.parametrize("api,version,request_", GROUP_REQUESTS, ids=[r[0] for r in GROUP_REQUESTS])
def test_a_broker_not_leading_the_partition_answers_not_coordinator(api: str, version: int, request_: dict) -> None:
    s, _ = stable_group(2, shell=cluster_shell())
    s.coord.ownership.assign(P, B2)
    wrong = s.answer(s.send(api, version, dict(request_), node_id=3))
    assert error_of(api, wrong) == 16
    right = s.answer(s.send(api, version, dict(request_), node_id=2))
    assert right is None or error_of(api, right) != 16


@pytest.mark.parametrize("api,version,request_", GROUP_REQUESTS, ids=[r[0] for r in GROUP_REQUESTS])
def test_every_group_api_of_a_loading_partition_answers_load_in_progress(
    api: str, version: int, request_: dict
) -> None:
    """CoordinatorRuntime.withActiveContextOrThrow: a read or write of a partition still loading
    fails with COORDINATOR_LOAD_IN_PROGRESS, which GroupCoordinatorService answers per group
    (DescribeGroups, DeleteGroups, ConsumerGroupDescribe), per partition (OffsetCommit) or for the
    request; only a classic Heartbeat is answered NONE ("the group is still loading, so blindly
    respond"). Once loaded, the same request is served (whatever it then answers, not 14)."""
    s, _ = stable_group(2)
    s.unload(P)
    s.begin_load(P)
    loading = s.answer(s.send(api, version, dict(request_)))
    assert loading is not None and error_of(api, loading) == (0 if api == "Heartbeat" else 14)
    s.finish_load(P)
    loaded = s.answer(s.send(api, version, dict(request_)))
    assert loaded is None or error_of(api, loaded) != 14


def test_the_heartbeat_fast_path_checks_the_receiving_broker() -> None:
    s, (a, _b) = stable_group(2, shell=cluster_shell())
    req = {"group_id": "g", "generation_id": a.generation, "member_id": a.member_id}
    assert s.coord.heartbeat(s.now, 3, req, 1) == 0
    assert s.coord.heartbeat(s.now, 3, req, 2) == 16
    assert s.coord.heartbeat(s.now, 3, req) == 0  # no node named: the local node (broker 1)


def test_find_coordinator_answers_the_current_leader_from_any_broker() -> None:
    s = cluster_shell()
    s.reload(P, node=B3)
    for node in (1, 2, 3):
        resp = s.answer(s.send("FindCoordinator", 1, {"key": "g", "key_type": 0}, node_id=node))
        assert (resp["error_code"], resp["node_id"], resp["port"]) == (0, 3, 9094)
    s.unload(P)
    resp = s.answer(s.send("FindCoordinator", 1, {"key": "g", "key_type": 0}, node_id=1))
    assert (resp["error_code"], resp["node_id"]) == (15, -1)


def test_list_groups_lists_the_groups_the_receiving_broker_coordinates() -> None:
    s, _ = stable_group(2, shell=cluster_shell())
    s.client("x", group=OTHER).join()
    s.reload(P, node=B2)

    def listed(node: int) -> set[str]:
        return {g["group_id"] for g in s.answer(s.send("ListGroups", 4, {}, node_id=node))["groups"]}

    assert listed(1) == {OTHER} and listed(2) == {"g"} and listed(3) == set()
    s.unload(P)
    s.begin_load(P, node=B2)
    assert s.answer(s.send("ListGroups", 4, {}, node_id=2))["error_code"] == 14
    assert listed(1) == {OTHER}


def test_move_to_another_broker_keeps_the_persisted_state_and_members_carry_on_there() -> None:
    s, (a, b) = stable_group(2, shell=cluster_shell())
    assert s.answer(s.send("OffsetCommit", 8, commit_request(a, 5)))["topics"][0]["partitions"][0]["error_code"] == 0
    before = persisted(s, "g")
    a.join()  # parked: the rebalance is what the move interrupts
    s.reload(P, node=B2)  # begin_load of an active partition unloads it first
    s.deliver()
    assert a.last_join["error_code"] == 16
    assert persisted(s, "g") == before
    assert (
        s.coord.heartbeat(s.now, 3, {"group_id": "g", "generation_id": b.generation, "member_id": b.member_id}, 1) == 16
    )
    req = {"group_id": "g", "generation_id": b.generation, "member_id": b.member_id}
    assert s.coord.heartbeat(s.now, 3, req, 2) == 0


def test_unload_logs_what_it_dropped() -> None:
    import io
    import json

    import structlog

    out = io.StringIO()
    s, _ = stable_group(
        2,
        shell=Shell(
            logger=structlog.wrap_logger(structlog.PrintLogger(out), processors=[structlog.processors.JSONRenderer()])
        ),
    )
    s.unload(P)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    unloaded = [e for e in events if e["event"] == "partition_unloaded"]
    assert unloaded == [
        {
            "event": "partition_unloaded",
            "partition": P,
            "classic_groups": 1,
            "consumer_groups": 0,
            "share_groups": 0,
            "writes_abandoned": 0,
            "was_loading": False,
        }
    ]


def test_offsets_of_partitions_deleted_while_the_partition_is_unloaded_go_when_it_is_loaded() -> None:
    """OffsetMetadataManager.onPartitionsDeleted runs on the active shards; a partition resigned
    meanwhile is tombstoned when it is elected again, so a re-created topic starts clean."""
    s, (a, _b) = stable_group(2)
    s.send("OffsetCommit", 8, commit_request(a, 11))
    s.unload(P)
    s.absorb(s.coord.on_partitions_deleted(s.now, [("t", 0)]))
    s.reload(P)
    assert fetch(s) == {}
    s.reload(P)  # the tombstones are in the log: a later load agrees
    assert fetch(s) == {}
