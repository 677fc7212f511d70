"""KIP-848 consumer groups through the GroupCoordinator: answers wait for durability, classic and consumer
groups share the group-id space, the log replays into the same consumer-group state, and a session
deadline armed at load time fences a member that never comes back (GroupMetadataManager.onLoaded)."""

from __future__ import annotations

from typing import Any

from consumer_harness import image, topic_id
from groupd.coordinator.consumer import ConsumerGroupConfig
from groupd.coordinator.serde import decode_record, encode_record
from harness import Shell

IMAGE = image(1, t=4)
T = topic_id("t")


def hb(shell: Shell, member: str, epoch: int = 0, owned: list[int] | None = None, group: str = "cg") -> dict[str, Any]:
    req = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": ["t"] if epoch == 0 else None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else [{"topic_id": T, "partitions": owned or []}],
    }
    ctx = shell.send("ConsumerGroupHeartbeat", 1, req)
    return shell.answer(ctx)


def test_heartbeat_answers_only_once_its_records_are_durable() -> None:
    shell = Shell(auto_append=False, topics_image=lambda: IMAGE)
    req_ctx = shell.send(
        "ConsumerGroupHeartbeat",
        1,
        {
            "group_id": "cg",
            "member_id": "m1",
            "member_epoch": 0,
            "rebalance_timeout_ms": 1000,
            "subscribed_topic_names": ["t"],
            "topic_partitions": [],
        },
    )
    assert shell.answer(req_ctx) is None and len(shell.queued) == 1
    shell.flush()
    answer = shell.answer(req_ctx)
    assert answer["error_code"] == 0 and answer["member_epoch"] == 1
    assert answer["assignment"]["topic_partitions"] == [{"topic_id": T, "partitions": [0, 1, 2, 3]}]


def test_failed_write_answers_with_the_mapped_error() -> None:
    shell = Shell(auto_append=False, topics_image=lambda: IMAGE)
    ctx = shell.send(
        "ConsumerGroupHeartbeat",
        1,
        {
            "group_id": "cg",
            "member_id": "m1",
            "member_epoch": 0,
            "rebalance_timeout_ms": 1000,
            "subscribed_topic_names": ["t"],
            "topic_partitions": [],
        },
    )
    shell.flush(error=56)  # KAFKA_STORAGE_ERROR -> NOT_COORDINATOR (appendGroupMetadataErrorToResponseError)
    assert shell.answer(ctx)["error_code"] == 16


def test_a_live_classic_group_is_not_a_consumer_group_when_the_migration_policy_is_disabled() -> None:
    # validateOnlineUpgrade: with group.consumer.migration.policy=disabled there is no upgrade
    shell = Shell(topics_image=lambda: IMAGE, consumer_config=ConsumerGroupConfig(migration_policy="disabled"))
    c = shell.client("a")
    c.join()
    shell.deliver()
    r = hb(shell, "m1", group="g")
    assert r["error_code"] == 69 and r["error_message"] == "Group g is not a consumer group."


def test_describe_and_replay_of_the_log_then_session_expiry_after_load() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    a = hb(shell, "m1")
    b = hb(shell, "m2")
    hb(shell, "m1", a["member_epoch"], [0, 1, 2, 3])
    hb(shell, "m1", a["member_epoch"], [0, 1])
    hb(shell, "m2", b["member_epoch"], [])
    ctx = shell.send("ConsumerGroupDescribe", 1, {"group_ids": ["cg", "nope"], "include_authorized_operations": False})
    groups = shell.answer(ctx)["groups"]
    assert groups[0]["group_state"] == "Stable" and groups[0]["assignor_name"] == "uniform"
    assert [m["assignment"]["topic_partitions"][0]["partitions"] for m in groups[0]["members"]] == [[0, 1], [2, 3]]
    assert groups[1]["error_code"] == 69
    before = shell.coord.consumer.group("cg").persisted()

    fresh = Shell(topics_image=lambda: IMAGE)
    fresh.log = [(p, decode_record(*encode_record(r))) for p, r in shell.log]
    partition = fresh.coord.partition_for("cg")
    fresh.coord.begin_load(partition)
    fresh.end_load(partition)
    assert fresh.coord.consumer.group("cg").persisted() == before
    fresh.advance(45000)  # nobody heartbeats after the restart: both sessions expire
    assert fresh.coord.consumer.group("cg").members == {}


def commit(shell: Shell, member: str, epoch: int, version: int = 9, group: str = "cg") -> int:
    ctx = shell.send(
        "OffsetCommit",
        version,
        {
            "group_id": group,
            "generation_id_or_member_epoch": epoch,
            "member_id": member,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
        },
    )
    return shell.answer(ctx)["topics"][0]["partitions"][0]["error_code"]


def fetch_error(shell: Shell, member: str | None, epoch: int) -> int:
    req = {"groups": [{"group_id": "cg", "member_id": member, "member_epoch": epoch, "topics": None}]}
    return shell.answer(shell.send("OffsetFetch", 9, req))["groups"][0]["error_code"]


def test_offset_commit_and_fetch_check_member_epochs_validateOffsetCommit() -> None:
    shell = Shell(topics_image=lambda: IMAGE, topic_partitions=lambda t: 4 if t == "t" else None)
    epoch = hb(shell, "m1")["member_epoch"]
    assert commit(shell, "m1", epoch) == 0
    assert commit(shell, "m1", epoch - 1) == 113  # STALE_MEMBER_EPOCH
    assert commit(shell, "nobody", epoch) == 25  # UNKNOWN_MEMBER_ID
    assert commit(shell, "m1", epoch, version=8) == 35  # KIP-848 members commit with v9+
    assert commit(shell, "", -1) == 25  # no epoch while the group has members: refused
    assert fetch_error(shell, "m1", epoch) == 0
    assert fetch_error(shell, "m1", epoch + 1) == 113
    assert fetch_error(shell, None, -1) == 0  # admin tools and classic clients are not checked
    hb(shell, "m1", -1)  # leaves: the group is empty
    assert commit(shell, "", -1) == 0
    assert shell.coord.offsets["cg"][("t", 0)].offset == 5
    assert shell.coord.group("cg") is None  # no classic group was made for it


def test_classic_join_replaces_an_empty_consumer_group_and_keeps_its_offsets_maybeDeleteEmptyConsumerGroup() -> None:
    shell = Shell(topics_image=lambda: IMAGE, topic_partitions=lambda t: 4 if t == "t" else None)
    epoch = hb(shell, "m1")["member_epoch"]
    assert commit(shell, "m1", epoch) == 0
    c = shell.client("classic", group="cg")
    c.join()
    shell.deliver()
    # classicGroupJoinToConsumerGroup: a live consumer group takes the classic member in
    assert c.last_join["error_code"] == 0 and shell.coord.consumer.group("cg").members[c.member_id].classic
    assert c.leave()["members"][0]["error_code"] == 0  # classicGroupLeaveToConsumerGroup
    hb(shell, "m1", -1)
    c2 = shell.client("classic2", group="cg")
    c2.join()
    shell.deliver()
    assert c2.last_join["error_code"] == 0
    assert shell.coord.consumer.group("cg") is None and shell.coord.group("cg") is not None
    fetched = shell.answer(shell.send("OffsetFetch", 7, {"group_id": "cg", "topics": None}))
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5
    # and after a restart the log says the same
    fresh = Shell(topics_image=lambda: IMAGE)
    fresh.log = list(shell.log)
    fresh.coord.begin_load(fresh.coord.partition_for("cg"))
    fresh.end_load(fresh.coord.partition_for("cg"))
    assert fresh.coord.consumer.group("cg") is None


def test_list_groups_shows_both_kinds_and_filters_by_type_and_state() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    hb(shell, "m1")
    c = shell.client("classic", group="g")
    c.join()
    shell.deliver()

    def listed(**filters: Any) -> set[tuple[str, str, str]]:
        resp = shell.answer(shell.send("ListGroups", 5, filters))
        return {(g["group_id"], g["group_type"], g["group_state"]) for g in resp["groups"]}

    assert ("cg", "consumer", "Stable") in listed() and any(t == "classic" for _, t, _ in listed())
    assert listed(types_filter=["Consumer"]) == {("cg", "consumer", "Stable")}
    assert listed(types_filter=["consumer"], states_filter=["empty"]) == set()


def test_delete_groups_deletes_an_empty_consumer_group_and_its_offsets_only() -> None:
    shell = Shell(topics_image=lambda: IMAGE, topic_partitions=lambda t: 4 if t == "t" else None)
    epoch = hb(shell, "m1")["member_epoch"]
    assert commit(shell, "m1", epoch) == 0

    def delete() -> int:
        return shell.answer(shell.send("DeleteGroups", 2, {"groups_names": ["cg"]}))["results"][0]["error_code"]

    assert delete() == 68  # NON_EMPTY_GROUP
    hb(shell, "m1", -1)
    assert delete() == 0
    assert shell.coord.consumer.group("cg") is None and "cg" not in shell.coord.offsets
    assert delete() == 69  # GROUP_ID_NOT_FOUND
    fresh = Shell(topics_image=lambda: IMAGE)
    fresh.log = list(shell.log)
    partition = fresh.coord.partition_for("cg")
    fresh.coord.begin_load(partition)
    fresh.end_load(partition)
    assert fresh.coord.consumer.group("cg") is None and "cg" not in fresh.coord.offsets


def test_delete_groups_of_a_consumer_group_without_offsets() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    hb(shell, "m1")
    hb(shell, "m1", -1)
    # answered although only one append (the group's tombstones) was made: nothing waits for offsets
    resp = shell.answer(shell.send("DeleteGroups", 2, {"groups_names": ["cg"]}))
    assert resp["results"] == [{"group_id": "cg", "error_code": 0}]
    assert shell.coord.consumer.group("cg") is None


def join_request(member: str) -> dict[str, Any]:
    return {
        "group_id": "cg",
        "member_id": member,
        "member_epoch": 0,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    }


def test_a_group_waits_for_its_write_before_the_next_request_runs() -> None:
    shell = Shell(auto_append=False, topics_image=lambda: IMAGE)
    first = shell.send("ConsumerGroupHeartbeat", 1, join_request("m1"))
    second = shell.send("ConsumerGroupHeartbeat", 1, join_request("m2"))
    other = shell.send("ConsumerGroupHeartbeat", 1, {**join_request("x"), "group_id": "other"})
    assert len(shell.queued) == 2  # cg's first write and other's: m2 waits behind m1
    shell.flush(count=1)
    assert shell.answer(first)["member_epoch"] == 1 and shell.answer(second) is None
    assert len(shell.queued) == 2  # other's write, then m2's, made once m1's was durable
    shell.flush()
    assert shell.answer(second)["member_epoch"] == 2 and shell.answer(other)["error_code"] == 0


def test_a_failed_write_rolls_the_group_back_to_what_the_log_holds() -> None:
    shell = Shell(auto_append=False, topics_image=lambda: IMAGE)
    shell.send("ConsumerGroupHeartbeat", 1, join_request("m1"))
    shell.flush()
    before = shell.coord.consumer.group("cg").persisted()
    failed = shell.send("ConsumerGroupHeartbeat", 1, join_request("m2"))
    waiting = shell.send("ConsumerGroupHeartbeat", 1, join_request("m3"))
    shell.flush(error=56, count=1)
    assert shell.answer(failed)["error_code"] == 16  # NOT_COORDINATOR: the client retries
    assert set(shell.coord.consumer.group("cg").members) == {"m1", "m3"}  # m3 ran on the rolled-back group
    shell.flush()
    assert shell.answer(waiting)["member_epoch"] == before[0] + 1
    fresh = Shell(topics_image=lambda: IMAGE)
    fresh.log = list(shell.log)
    partition = fresh.coord.partition_for("cg")
    fresh.coord.begin_load(partition)
    fresh.end_load(partition)
    assert fresh.coord.consumer.group("cg").persisted() == shell.coord.consumer.group("cg").persisted()


def test_a_failed_first_write_forgets_the_new_group() -> None:
    shell = Shell(auto_append=False, topics_image=lambda: IMAGE)
    ctx = shell.send("ConsumerGroupHeartbeat", 1, join_request("m1"))
    shell.flush(error=56)
    assert shell.answer(ctx)["error_code"] == 16 and shell.coord.consumer.group("cg") is None


def test_delete_and_classic_join_wait_for_a_consumer_group_write_in_flight() -> None:
    shell = Shell(auto_append=False, topics_image=lambda: IMAGE)
    shell.send("ConsumerGroupHeartbeat", 1, join_request("m1"))
    shell.flush()
    shell.send("ConsumerGroupHeartbeat", 1, {**join_request("m1"), "member_epoch": -1})  # leave, not durable
    resp = shell.answer(shell.send("DeleteGroups", 2, {"groups_names": ["cg"]}))
    assert resp["results"][0]["error_code"] == 14  # COORDINATOR_LOAD_IN_PROGRESS (retriable)
    c = shell.client("classic", group="cg")
    c.join()
    shell.deliver()
    assert c.last_join is None  # the join waits behind the write (a per-group actor)
    shell.flush()
    shell.deliver()
    # then runs on the durable state: the empty consumer group makes way (maybeDeleteEmptyConsumerGroup)
    assert c.last_join["error_code"] == 79 and shell.coord.consumer.group("cg") is None
    shell.flush()
    ctx = shell.send("DeleteGroups", 2, {"groups_names": ["cg"]})
    shell.flush()
    assert shell.answer(ctx)["results"][0]["error_code"] == 0


def test_an_impossible_record_in_the_log_is_skipped_not_the_partition() -> None:
    from groupd.coordinator.consumer import records as cr

    shell = Shell(topics_image=lambda: IMAGE)
    hb(shell, "m1")
    hb(shell, "m2")  # m2 waits for partitions m1 still holds
    p = shell.coord.partition_for("cg")
    # a record giving m2 partition 0 while m1 owns it: replay refuses it (addPartitionEpochs)
    bad = (
        cr.ConsumerGroupCurrentMemberAssignmentKey("cg", "m2"),
        cr.ConsumerGroupCurrentMemberAssignmentValue(2, 0, 0, ((T, (0,)),), ()),
    )
    fresh = Shell(topics_image=lambda: IMAGE)
    fresh.log = [*shell.log, (p, bad)]
    fresh.coord.begin_load(p)
    fresh.end_load(p)
    assert fresh.coord.consumer.group("cg").persisted() == shell.coord.consumer.group("cg").persisted()


def test_consumer_group_offsets_expire_for_unsubscribed_topics_then_the_empty_group_goes() -> None:
    from groupd.coordinator import CoordinatorConfig

    config = CoordinatorConfig(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    shell = Shell(config=config, topics_image=lambda: IMAGE, topic_partitions=lambda t: 4)
    epoch = hb(shell, "m1")["member_epoch"]
    ctx = shell.send(
        "OffsetCommit",
        9,
        {
            "group_id": "cg",
            "generation_id_or_member_epoch": epoch,
            "member_id": "m1",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]},
                {"name": "gone", "partitions": [{"partition_index": 0, "committed_offset": 7}]},
            ],
        },
    )
    assert all(p["error_code"] == 0 for t in shell.answer(ctx)["topics"] for p in t["partitions"])
    for _ in range(8):  # 80 s, the member heartbeating: only the topic nobody subscribes to expires
        shell.advance(10_000)
        hb(shell, "m1", epoch, [0, 1, 2, 3])
    assert set(shell.coord.offsets["cg"]) == {("t", 0)}
    hb(shell, "m1", -1)
    shell.advance(70_000)  # ConsumerGroup.offsetExpirationCondition: from the commit time
    assert "cg" not in shell.coord.offsets and shell.coord.consumer.group("cg") is None
    fresh = Shell(topics_image=lambda: IMAGE)
    fresh.log = list(shell.log)
    p = fresh.coord.partition_for("cg")
    fresh.coord.begin_load(p)
    fresh.end_load(p)
    assert "cg" not in fresh.coord.offsets and fresh.coord.consumer.group("cg") is None


def test_describe_groups_of_a_consumer_group_is_dead_or_not_a_classic_group() -> None:
    shell = Shell(topics_image=lambda: IMAGE)
    hb(shell, "m1")
    old = shell.answer(shell.send("DescribeGroups", 5, {"groups": ["cg"]}))["groups"][0]
    assert (old["error_code"], old["group_state"]) == (0, "Dead")
    new = shell.answer(shell.send("DescribeGroups", 6, {"groups": ["cg"]}))["groups"][0]
    assert (new["error_code"], new["error_message"]) == (69, "Group cg is not a classic group.")


def steady_hb(shell: Shell, req: dict[str, Any], client_id: str, host: str) -> dict[str, Any] | None:
    shell.coord.enter(shell.now)
    return shell.coord.consumer_requests.steady_heartbeat(1, req, client_id, host)


def test_a_steady_heartbeat_takes_the_hot_path_and_the_others_are_left_to_handle() -> None:
    # consumer_requests.steady_heartbeat (the shell's hot path, issue 26): a steady member is
    # answered without a Result or a record; a join, a write in flight, a fenced epoch and an
    # invalid request come back None, having changed nothing, for ``handle`` to answer.
    shell = Shell(topics_image=lambda: IMAGE)
    first = hb(shell, "m1")
    epoch = first["member_epoch"]
    hb(shell, "m1", epoch, owned=[0, 1, 2, 3])  # acks its assignment: reconciled, Stable
    steady = {"group_id": "cg", "member_id": "m1", "member_epoch": epoch}
    n = len(shell.log)
    fast = steady_hb(shell, steady, "client", "/127.0.0.1")
    assert fast is not None and fast["error_code"] == 0 and fast["member_epoch"] == epoch
    assert fast["assignment"] is None and len(shell.log) == n
    assert steady_hb(shell, {**steady, "member_epoch": epoch + 5}, "client", "/h") is None
    assert steady_hb(shell, {**steady, "member_id": ""}, "client", "/127.0.0.1") is None
    assert steady_hb(shell, {**steady, "member_epoch": -1}, "client", "/127.0.0.1") is None
    joiner = {**steady, "member_id": "m2", "member_epoch": 0, "rebalance_timeout_ms": 1000}
    assert steady_hb(shell, {**joiner, "subscribed_topic_names": ["t"]}, "c", "/h") is None
    assert "m2" not in shell.coord.consumer.groups.groups["cg"].members
    # a write in flight holds the group: the hot path leaves the heartbeat to wait behind it
    slow = Shell(auto_append=False, topics_image=lambda: IMAGE)
    slow.send("ConsumerGroupHeartbeat", 1, {**joiner, "member_id": "m1", "subscribed_topic_names": ["t"]})
    assert steady_hb(slow, {**steady, "member_epoch": 1}, "client", "/127.0.0.1") is None


def _steady_member(shell: Shell) -> dict[str, Any]:
    epoch = hb(shell, "m1")["member_epoch"]
    hb(shell, "m1", epoch, owned=[0, 1, 2, 3])  # acks its assignment: reconciled, Stable
    return {"group_id": "cg", "member_id": "m1", "member_epoch": epoch}


def test_the_hot_path_routes_as_the_long_way_after_the_partition_moves() -> None:
    # steady_heartbeat keeps each group's __consumer_offsets partition (issue 26), never whether it
    # is served here: an unloaded or loading partition is the long way's NOT_COORDINATOR /
    # COORDINATOR_LOAD_IN_PROGRESS (GroupCoordinatorService.consumerGroupHeartbeat via the runtime's
    # scheduleWriteOperation), and once loaded again the hot path answers as before.
    shell = Shell(topics_image=lambda: IMAGE)
    steady = _steady_member(shell)
    assert steady_hb(shell, steady, "client", "/127.0.0.1") is not None  # the partition now kept
    p = shell.coord.partition_for("cg")
    shell.unload(p)
    assert steady_hb(shell, steady, "client", "/127.0.0.1") is None
    assert shell.answer(shell.send("ConsumerGroupHeartbeat", 1, steady))["error_code"] == 16  # NOT_COORDINATOR
    shell.begin_load(p)
    assert steady_hb(shell, steady, "client", "/127.0.0.1") is None
    assert shell.answer(shell.send("ConsumerGroupHeartbeat", 1, steady))["error_code"] == 14  # LOAD_IN_PROGRESS
    shell.finish_load(p)
    fast = steady_hb(shell, steady, "client", "/127.0.0.1")
    assert fast is not None and fast["error_code"] == 0 and fast["member_epoch"] == steady["member_epoch"]
    # and the send compares the hot path's answer with the long way's (harness.Shell.send)
    assert shell.answer(shell.send("ConsumerGroupHeartbeat", 1, steady))["error_code"] == 0


def test_the_hot_path_with_the_share_core_built_or_not() -> None:
    # is_share_group without its calls: the stand-in of an unbuilt share core holds no group; once a
    # share group exists (the core built) the hot path asks the core, and a consumer heartbeat
    # naming the share group is the long way's (GroupMetadataManager.consumerGroupHeartbeat refuses
    # a group of another type: GROUP_ID_NOT_FOUND)
    from groupd.coordinator.lazy import DeferredGroups

    shell = Shell(topics_image=lambda: IMAGE)
    steady = _steady_member(shell)
    assert type(shell.coord.share_requests.share) is DeferredGroups
    assert steady_hb(shell, steady, "client", "/127.0.0.1") is not None
    share_join = {"group_id": "sg", "member_id": "s1", "member_epoch": 0, "rack_id": None}
    answer = shell.answer(shell.send("ShareGroupHeartbeat", 1, {**share_join, "subscribed_topic_names": ["t"]}))
    assert answer["error_code"] == 0
    assert type(shell.coord.share_requests.share) is not DeferredGroups  # built, and the holder rebound
    assert steady_hb(shell, steady, "client", "/127.0.0.1") is not None
    assert steady_hb(shell, {**steady, "group_id": "sg"}, "client", "/127.0.0.1") is None
    long_way = shell.answer(shell.send("ConsumerGroupHeartbeat", 1, {**steady, "group_id": "sg"}))
    assert long_way["error_code"] == 69, long_way  # GROUP_ID_NOT_FOUND
