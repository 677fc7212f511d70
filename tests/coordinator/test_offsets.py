"""OffsetCommit / OffsetFetch / OffsetDelete and KIP-211 retention (Kafka's OffsetMetadataManager)."""

from __future__ import annotations

from typing import Any

from groupd.coordinator import CoordinatorConfig
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from harness import Shell, assignment, sub
from test_rebalance import stable_group

DAY = 24 * 3600 * 1000
WEEK = 7 * DAY


def errors(resp: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def fetch(s: Shell, group: str = "g", topics: dict[str, list[int]] | None = None, version: int = 7) -> dict:
    req = {
        "group_id": group,
        "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
    }
    resp = s.answer(s.send("OffsetFetch", version, req))
    assert resp is not None
    return resp


def offsets_of(resp: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["committed_offset"] for t in resp["topics"] for p in t["partitions"]}


def standalone_commit(s: Shell, offsets: dict[tuple[str, int], int], group: str = "g", version: int = 8, **kw):
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, **kw})
    req = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    return s.answer(s.send("OffsetCommit", version, req))


# -- commit validation --------------------------------------------------------------------------


def test_member_commit_and_fetch_round_trip() -> None:
    s, (a, _b) = stable_group(2)
    ctx = a.commit({("t", 0): 10, ("t", 1): 20})
    assert errors(s.answer(ctx)) == {("t", 0): 0, ("t", 1): 0}
    assert offsets_of(fetch(s, topics={"t": [0, 1, 2]})) == {("t", 0): 10, ("t", 1): 20, ("t", 2): -1}
    assert offsets_of(fetch(s)) == {("t", 0): 10, ("t", 1): 20}  # null topics: everything committed
    key, value = s.records()[-1]
    assert key == OffsetCommitKey("g", "t", 1) and value.offset == 20 and value.version == 3


def test_commit_acknowledged_only_when_durable() -> None:
    s, (a,) = stable_group(1)
    s.auto_append = False
    ctx = a.commit({("t", 0): 5})
    assert s.answer(ctx) is None
    assert offsets_of(fetch(s, topics={"t": [0]})) == {("t", 0): -1}  # not visible before it is durable
    s.flush()
    assert errors(s.answer(ctx)) == {("t", 0): 0}
    assert offsets_of(fetch(s, topics={"t": [0]})) == {("t", 0): 5}


def test_failed_commit_write() -> None:
    s, (a,) = stable_group(1)
    s.auto_append = False
    ctx = a.commit({("t", 0): 5})
    s.flush(error=OSError("disk"))
    assert errors(s.answer(ctx)) == {("t", 0): 16}
    assert s.coord.offsets == {}


def test_commit_generation_and_member_checks() -> None:
    s, (a, b) = stable_group(2)
    gen = a.generation
    assert errors(s.answer(a.commit({("t", 0): 1}, generation=gen - 1))) == {("t", 0): 22}
    a.member_id, real = "nobody", a.member_id
    assert errors(s.answer(a.commit({("t", 0): 1}))) == {("t", 0): 25}
    a.member_id = real
    # A standalone commit (no member, no generation) is refused while the group has members.
    assert errors(standalone_commit(s, {("t", 0): 1})) == {("t", 0): 25}
    a.join()
    b.join()  # CompletingRebalance: members with the new generation must sync first
    assert s.state() == "CompletingRebalance"
    assert errors(s.answer(a.commit({("t", 0): 1}))) == {("t", 0): 27}


def test_commit_in_preparing_rebalance_with_current_generation_is_accepted() -> None:
    s, (a, b) = stable_group(2)
    a.join()
    assert s.state() == "PreparingRebalance"
    assert errors(s.answer(b.commit({("t", 1): 99}))) == {("t", 1): 0}


def test_commit_to_missing_group_by_version() -> None:
    s = Shell()
    c = s.client("c")
    c.generation, c.member_id = 3, "m"
    assert errors(s.answer(c.commit({("t", 0): 1}, version=8))) == {("t", 0): 22}
    assert errors(s.answer(c.commit({("t", 0): 1}, version=9))) == {("t", 0): 69}


def test_standalone_commit_creates_simple_group() -> None:
    s = Shell()
    assert errors(standalone_commit(s, {("t", 0): 4})) == {("t", 0): 0}
    assert s.state() == "Empty" and s.group().protocol_type is None
    assert offsets_of(fetch(s, topics={"t": [0]})) == {("t", 0): 4}
    v0 = s.answer(
        s.send(
            "OffsetCommit",
            0,
            {
                "group_id": "g",
                "topics": [{"name": "t", "partitions": [{"partition_index": 1, "committed_offset": 9}]}],
            },
        )
    )
    assert errors(v0) == {("t", 1): 0}


def test_per_partition_errors() -> None:
    s = Shell(topic_partitions=lambda name: {"t": 2}.get(name))
    resp = standalone_commit(s, {("t", 0): 1, ("t", 5): 1, ("nope", 0): 1}, committed_metadata="x" * 4097)
    assert errors(resp) == {("t", 0): 12, ("t", 5): 3, ("nope", 0): 3}
    ok = standalone_commit(s, {("t", 1): 1}, committed_metadata="x" * 4096)
    assert errors(ok) == {("t", 1): 0}


def test_commit_naming_no_existing_partition_creates_no_group() -> None:
    # KafkaApis.handleOffsetCommitRequest answers a commit without one existing partition itself
    # (UNKNOWN_TOPIC_OR_PARTITION each) and never calls the coordinator, which would create the group.
    s = Shell(topic_partitions=lambda name: {"t": 2}.get(name))
    resp = standalone_commit(s, {("nope", 0): 1, ("t", 2): 1}, group="ghost")
    assert errors(resp) == {("nope", 0): 3, ("t", 2): 3}
    # Not even a member check: a generation naming nobody gets the same answer.
    resp = standalone_commit(s, {("nope", 0): 1}, group="ghost", version=8)
    member = s.answer(
        s.send(
            "OffsetCommit",
            8,
            {
                "group_id": "ghost",
                "generation_id_or_member_epoch": 3,
                "member_id": "m",
                "topics": [{"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
            },
        )
    )
    assert errors(member) == {("nope", 0): 3}
    empty = standalone_commit(s, {}, group="ghost")
    assert empty["topics"] == []
    assert s.coord.group("ghost") is None and s.records() == []
    assert s.answer(s.send("ListGroups", 3, {}))["groups"] == []
    # One existing partition is enough to create the group.
    assert errors(standalone_commit(s, {("nope", 0): 1, ("t", 1): 1}, group="ghost")) == {("nope", 0): 3, ("t", 1): 0}
    assert s.coord.group("ghost") is not None


def test_leader_epoch_metadata_and_timestamps_kept() -> None:
    s = Shell()
    s.now = 5000
    standalone_commit(s, {("t", 0): 7}, committed_leader_epoch=3, committed_metadata="m", version=6)
    value = s.coord.offsets["g"][("t", 0)]
    assert value == OffsetCommitValue(offset=7, leader_epoch=3, metadata="m", commit_timestamp=5000)
    p = fetch(s, topics={"t": [0]}, version=5)["topics"][0]["partitions"][0]
    assert (p["committed_offset"], p["committed_leader_epoch"], p["metadata"]) == (7, 3, "m")
    standalone_commit(s, {("t", 1): 1}, commit_timestamp=1234, version=1)
    assert s.coord.offsets["g"][("t", 1)].commit_timestamp == 1234  # v1's explicit commit time


def test_retention_time_v2_to_v4_writes_expire_timestamp() -> None:
    s = Shell()
    req = {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time_ms": 60000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    }
    s.answer(s.send("OffsetCommit", 2, req))
    value = s.records()[-1][1]
    assert value.expire_timestamp == 60000 and value.version == 1
    s.answer(s.send("OffsetCommit", 5, {**req, "topics": [{"name": "t", "partitions": [{"partition_index": 1}]}]}))
    assert s.records()[-1][1].expire_timestamp == -1  # v5+ has no retention field


# -- fetch --------------------------------------------------------------------------------------


def test_fetch_multi_group_v8() -> None:
    s = Shell()
    standalone_commit(s, {("t", 0): 1}, group="g1")
    standalone_commit(s, {("u", 0): 2}, group="g2")
    req = {
        "groups": [
            {"group_id": "g1", "topics": None},
            {"group_id": "g2", "topics": [{"name": "u", "partition_indexes": [0, 1]}]},
            {"group_id": "", "topics": None},
        ],
        "require_stable": True,
    }
    resp = s.answer(s.send("OffsetFetch", 8, req))
    g1, g2, empty_id = resp["groups"]
    assert offsets_of(g1) == {("t", 0): 1} and g1["error_code"] == 0
    assert offsets_of(g2) == {("u", 0): 2, ("u", 1): -1}
    assert (empty_id["error_code"], empty_id["topics"]) == (0, [])  # "" is a group (with no offsets)


def test_fetch_error_placement_by_version() -> None:
    s = Shell()
    p = s.coord.partition_for("g")
    s.coord.begin_load(p)
    v1 = fetch(s, topics={"t": [0]}, version=1)
    assert v1["error_code"] == 0 and v1["topics"][0]["partitions"][0]["error_code"] == 14
    v2 = fetch(s, topics={"t": [0]}, version=2)
    assert v2["error_code"] == 14 and v2["topics"] == []


# -- delete ---------------------------------------------------------------------------------------


def test_offset_delete_rules() -> None:
    s, (a,) = stable_group(1)  # subscribed to "t"
    a.commit({("t", 0): 1, ("old", 0): 2})
    req = {
        "group_id": "g",
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]},
            {"name": "old", "partitions": [{"partition_index": 0}]},
        ],
    }
    resp = s.answer(s.send("OffsetDelete", 0, req))
    assert resp["error_code"] == 0 and errors(resp) == {("t", 0): 86, ("old", 0): 0}
    assert offsets_of(fetch(s)) == {("t", 0): 1}
    assert s.records()[-1] == (OffsetCommitKey("g", "old", 0), None)
    missing = s.answer(s.send("OffsetDelete", 0, {**req, "group_id": "nope"}))
    assert missing["error_code"] == 69


def delete_offsets(s: Shell, topics: dict[str, list[int]], group: str = "g") -> dict[str, Any]:
    req = {
        "group_id": group,
        "topics": [{"name": t, "partitions": [{"partition_index": i} for i in ps]} for t, ps in topics.items()],
    }
    resp = s.answer(s.send("OffsetDelete", 0, req))
    assert resp is not None
    return resp


def test_offset_delete_unknown_topics_and_partitions_as_kafka_apis() -> None:
    """KafkaApis.handleOffsetDeleteRequest answers UNKNOWN_TOPIC_OR_PARTITION for topics and
    partitions the broker does not have, before the coordinator sees the rest; the unknown ones
    come first in the answer, as its response builder merges them."""
    catalogue = {"t": 2, "old": 2}
    s, (a,) = stable_group(1, Shell(topic_partitions=catalogue.get))  # subscribed to "t"
    a.commit({("t", 0): 1, ("old", 0): 2, ("old", 1): 3})
    resp = delete_offsets(s, {"t": [0, 5], "old": [1], "gone": [0], "x": []})
    assert resp["error_code"] == 0
    assert [
        (t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]]) for t in resp["topics"]
    ] == [
        ("t", [(5, 3), (0, 86)]),
        ("gone", [(0, 3)]),
        ("old", [(1, 0)]),
    ]
    assert offsets_of(fetch(s)) == {("t", 0): 1, ("old", 0): 2}
    # A group-level error wins over unknown topics: only the top-level code, as Kafka.
    missing = delete_offsets(s, {"gone": [0]}, group="nope")
    assert (missing["error_code"], missing["topics"]) == (69, [])


def test_offset_delete_unparsable_subscription_counts_as_subscribed_to_every_topic() -> None:
    """Kafka's ClassicGroup.isSubscribedToTopic: a consumer group whose subscriptions cannot be
    parsed is subscribed to every topic, so none of its offsets may be deleted while it has members."""
    s = Shell()
    c = s.client("c", protocols=[("range", b"\x00\x07garbage")])
    c.join()
    c.sync({c.member_id: b""})
    assert s.state() == "Stable" and s.group().subscribed_topics is None
    c.commit({("t", 0): 1, ("other", 0): 2})
    resp = delete_offsets(s, {"other": [0]})
    assert resp["error_code"] == 0 and errors(resp) == {("other", 0): 86}
    assert offsets_of(fetch(s)) == {("t", 0): 1, ("other", 0): 2}
    c.leave()  # Empty: nothing is subscribed any more
    assert errors(delete_offsets(s, {"other": [0]})) == {("other", 0): 0}
    assert offsets_of(fetch(s)) == {("t", 0): 1}


def test_offset_delete_non_consumer_group_with_members() -> None:
    s = Shell()
    c = s.client("c", protocol_type="connect", protocols=[("default", b"x")])
    c.join()
    c.sync({c.member_id: b""})
    resp = s.answer(s.send("OffsetDelete", 0, {"group_id": "g", "topics": []}))
    assert resp["error_code"] == 68


# -- deleted topics (OffsetMetadataManager.onPartitionsDeleted) -----------------------------------


def test_deleted_partitions_tombstone_every_groups_offsets_and_stay_gone_after_restart() -> None:
    s, (a,) = stable_group(1)
    a.commit({("orders", 0): 3, ("orders", 1): 4, ("t", 0): 5})
    standalone_commit(s, {("orders", 0): 7, ("other", 0): 1}, group="solo")
    assert s.coord.partition_for("g") != s.coord.partition_for("solo")
    before = len(s.log)
    s.absorb(s.coord.on_partitions_deleted(s.now, [("orders", 0), ("orders", 1), ("orders", 9)]))
    assert offsets_of(fetch(s)) == {("t", 0): 5}
    assert offsets_of(fetch(s, group="solo")) == {("other", 0): 1}
    # Tombstones only, each in its group's __consumer_offsets partition.
    assert sorted(s.log[before:], key=lambda e: (e[1][0].group, e[1][0].partition)) == [
        (s.coord.partition_for("g"), (OffsetCommitKey("g", "orders", 0), None)),
        (s.coord.partition_for("g"), (OffsetCommitKey("g", "orders", 1), None)),
        (s.coord.partition_for("solo"), (OffsetCommitKey("solo", "orders", 0), None)),
    ]
    assert s.state() == "Stable"  # the group itself is untouched
    fresh = Shell()
    fresh.coord.load(0, s.records())
    assert {g: set(o) for g, o in fresh.coord.offsets.items()} == {"g": {("t", 0)}, "solo": {("other", 0)}}
    # Nothing committed on the topic: nothing to write.
    assert fresh.coord.on_partitions_deleted(0, [("orders", 0)]).appends == []


def test_deleted_partitions_tombstone_commits_still_being_written() -> None:
    s, (a,) = stable_group(1)
    s.auto_append = False
    ctx = a.commit({("orders", 0): 3})
    s.absorb(s.coord.on_partitions_deleted(s.now, [("orders", 0)]))
    s.flush()
    assert errors(s.answer(ctx)) == {("orders", 0): 0}
    assert offsets_of(fetch(s)) == {}
    assert s.records()[-1] == (OffsetCommitKey("g", "orders", 0), None)


def test_deleted_partitions_of_a_loading_partition_are_tombstoned_once_loaded() -> None:
    """Kafka fails the write on a loading shard and logs it (the offsets stay); groupd defers it."""
    s, (a,) = stable_group(1)
    a.commit({("orders", 0): 3, ("t", 0): 5})
    p = s.coord.partition_for("g")
    s.coord.begin_load(p)
    assert s.coord.on_partitions_deleted(s.now, [("orders", 0)]).appends == []
    s.end_load(p)
    assert offsets_of(fetch(s)) == {("t", 0): 5}
    assert s.records()[-1] == (OffsetCommitKey("g", "orders", 0), None)


# -- retention (KIP-211) --------------------------------------------------------------------------


def test_empty_group_offsets_expire_from_when_it_became_empty() -> None:
    s = Shell(config=CoordinatorConfig(offsets_retention_check_interval_ms=DAY))
    c = s.client("c", session_timeout_ms=60000)
    c.join()
    c.sync({c.member_id: assignment("t", 0)})
    c.commit({("t", 0): 1})
    for _ in range(10):  # alive and committing nothing new for 10 days: offsets stay
        s.advance(50000)
        c.heartbeat()
    s.advance(DAY)
    assert c.heartbeat() == 25  # expired
    became_empty = s.group().state_timestamp
    s.advance(WEEK - (s.now - became_empty) - 1)
    assert s.coord.offsets["g"]
    s.advance(DAY)  # the next check after a week of emptiness
    assert "g" not in s.coord.offsets
    assert s.coord.group("g") is None  # Empty with no offsets: Dead and deleted
    assert s.records()[-2:] == [(OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]


def test_standalone_offsets_expire_from_commit_time() -> None:
    s = Shell(config=CoordinatorConfig(offsets_retention_check_interval_ms=3600000))
    standalone_commit(s, {("t", 0): 1})
    s.advance(DAY)
    standalone_commit(s, {("t", 1): 1})
    s.advance(WEEK - DAY)
    assert set(s.coord.offsets["g"]) == {("t", 1)}  # the first one is a week old
    s.advance(DAY)
    assert "g" not in s.coord.offsets and s.coord.group("g") is None


def test_stable_group_expires_only_unsubscribed_topics() -> None:
    s = Shell(config=CoordinatorConfig(offsets_retention_check_interval_ms=DAY))
    c = s.client("c", session_timeout_ms=1800000)
    c.join()
    c.sync({c.member_id: b""})
    c.commit({("t", 0): 1, ("gone", 0): 2})
    for _ in range(8 * 72):  # eight days of heartbeats every 20 minutes
        s.advance(1200000)
        assert c.heartbeat() == 0
    assert set(s.coord.offsets["g"]) == {("t", 0)}
    assert s.state() == "Stable"


def test_explicit_expire_timestamp_wins() -> None:
    s = Shell(config=CoordinatorConfig(offsets_retention_check_interval_ms=1000))
    req = {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time_ms": 5000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    }
    s.send("OffsetCommit", 3, req)
    s.advance(4000)
    assert s.coord.offsets["g"]
    s.advance(1000)
    assert "g" not in s.coord.offsets


def test_pending_commit_keeps_group_alive_through_retention() -> None:
    s = Shell(config=CoordinatorConfig(offsets_retention_check_interval_ms=1000))
    s.send("JoinGroup", 3, s.client("c").join_request(), client_id="c")  # an Empty group, no offsets
    s.auto_append = False
    ctx = s.send(
        "OffsetCommit",
        2,
        {
            "group_id": "x",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
        },
    )
    s.advance(1000)
    assert s.coord.group("x") is not None  # its commit is in flight
    s.flush()
    assert errors(s.answer(ctx)) == {("t", 0): 0}


def test_consumer_group_subscribed_topics_follow_members() -> None:
    s = Shell()
    c = s.client("c", protocols=[("range", sub("a", "b"))])
    c.join()
    assert s.group().subscribed_topics == frozenset({"a", "b"})
