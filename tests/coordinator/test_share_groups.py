"""Share groups (KIP-932) in the coordinator, with a fake clock: ShareGroupHeartbeat
(``GroupMetadataManager.shareGroupHeartbeat``), sessions, leaving, fencing, the share-partition
initialization round, ShareGroupDescribe, the group id namespace, and the records' replay."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from groupd.coordinator import errors as err
from groupd.coordinator.consumer import TopicsImage
from groupd.coordinator.serde import decode_record, encode_record
from groupd.coordinator.share import ShareGroupConfig

from .harness import Shell, replay_batches

G = "sg"


def tid(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def image(**parts: int) -> TopicsImage:
    return TopicsImage(1, {n: (tid(n), c) for n, c in parts.items()})


class ShareShell(Shell):
    pass


def make(topics: TopicsImage | None = None, **kw: Any) -> Shell:
    img = topics or image(t=3)
    shell = Shell(topics_image=lambda: img, **kw)
    return shell


def hb(shell: Shell, member: str, epoch: int, topics: list[str] | None = None, group: str = G, **over: Any) -> dict:
    req = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": topics,
    }
    req.update(over)
    ctx = shell.send("ShareGroupHeartbeat", 1, req)
    ans = shell.answer(ctx)
    assert ans is not None
    return ans


def parts_of(ans: dict) -> dict[uuid.UUID, list[int]]:
    return {tp["topic_id"]: tp["partitions"] for tp in ans["assignment"]["topic_partitions"]}


def test_join_then_assignment_after_initialization_as_kafka() -> None:
    """The first heartbeat records the subscribed share partitions as initializing and answers an
    empty assignment; once the share-partition state initialized them, the next heartbeat bumps the
    epoch (``initializedAssignmentPending``) and assigns them."""
    s = make()
    a = hb(s, "m1", 0, ["t"])
    assert a["error_code"] == 0 and a["member_id"] == "m1" and a["member_epoch"] == 1
    assert a["heartbeat_interval_ms"] == 5000 and a["assignment"] == {"topic_partitions": []}
    g = s.coord.share.group(G)
    assert g is not None and g.initialized_partitions() == {tid("t"): frozenset({0, 1, 2})}
    b = hb(s, "m1", 1)
    assert b["member_epoch"] == 2 and parts_of(b) == {tid("t"): [0, 1, 2]}
    c = hb(s, "m1", 2)
    assert c["member_epoch"] == 2 and c["assignment"] is None


def test_three_members_one_partition_all_share_it() -> None:
    s = make(image(t=1))
    for m in ("a", "b", "c"):
        hb(s, m, 0, ["t"])
    epochs = {m: hb(s, m, s.coord.share.group(G).members[m].member_epoch) for m in ("a", "b", "c")}
    # one more round: every member at the target epoch
    for m in ("a", "b", "c"):
        epochs[m] = hb(s, m, s.coord.share.group(G).members[m].member_epoch)
    g = s.coord.share.group(G)
    assert {m: dict(x.assigned) for m, x in g.members.items()} == {m: {tid("t"): frozenset({0})} for m in "abc"}


def test_leave_fence_and_session_timeout() -> None:
    s = make()
    hb(s, "m1", 0, ["t"])
    hb(s, "m2", 0, ["t"])
    before = s.coord.share.group(G).group_epoch
    left = hb(s, "m1", -1)
    assert left == {**left, "error_code": 0, "member_id": "m1", "member_epoch": -1}
    g = s.coord.share.group(G)
    assert "m1" not in g.members and g.group_epoch == before + 1  # shareGroupFenceMember bumps it
    assert hb(s, "m1", 3)["error_code"] == err.UNKNOWN_MEMBER_ID
    e = g.members["m2"].member_epoch
    assert hb(s, "m2", e + 5)["error_code"] == err.FENCED_MEMBER_EPOCH
    s.advance(45000)
    assert s.coord.share.group(G).members == {}
    assert hb(s, "m2", e)["error_code"] == err.UNKNOWN_MEMBER_ID


def test_invalid_requests() -> None:
    s = make()
    assert hb(s, "", 0, ["t"])["error_code"] == err.INVALID_REQUEST
    assert hb(s, "m", 0, None)["error_message"] == "SubscribedTopicNames must be set in first request."
    assert hb(s, "m", -2, None)["error_message"] == "MemberEpoch is invalid."
    assert hb(s, "m", 3, None)["error_code"] == err.GROUP_ID_NOT_FOUND


def test_namespace_shared_with_consumer_groups() -> None:
    s = make()
    ctx = s.send(
        "ConsumerGroupHeartbeat",
        0,
        {
            "group_id": "cg",
            "member_id": "x",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": ["t"],
            "server_assignor": None,
            "topic_partitions": [],
        },
    )
    assert s.answer(ctx)["error_code"] == 0
    ans = hb(s, "m", 0, ["t"], group="cg")
    assert ans["error_code"] == err.GROUP_ID_NOT_FOUND and ans["error_message"] == "Group cg is not a share group."


def test_group_max_size() -> None:
    s = make(config=None) if False else Shell(topics_image=lambda: image(t=1))
    s.coord.share.config = ShareGroupConfig(max_size=2)
    hb(s, "a", 0, ["t"])
    hb(s, "b", 0, ["t"])
    assert hb(s, "c", 0, ["t"])["error_code"] == err.GROUP_MAX_SIZE_REACHED


def test_records_round_trip_and_reload_rebuilds_the_group() -> None:
    s = make()
    hb(s, "m1", 0, ["t"])
    hb(s, "m1", 1)
    hb(s, "m2", 0, ["t"])
    for r in s.records():
        assert decode_record(*encode_record(r)) == r
    before = s.coord.share.group(G)
    img = image(t=3)
    from groupd.coordinator import GroupCoordinator

    from .harness import quiet_logger

    fresh = GroupCoordinator(s.config, logger=quiet_logger(), topics_image=lambda: img)
    parts = list(fresh.ownership.local_partitions())
    for p in parts:
        fresh.begin_load(p)
    replay_batches(fresh, s.batches)
    for p in parts:
        fresh.end_load(p, s.now)
    after = fresh.share.group(G)
    assert after is not None
    assert (after.group_epoch, after.target_epoch, after.members, after.target) == (
        before.group_epoch,
        before.target_epoch,
        before.members,
        before.target,
    )
    assert after.initialized_partitions() == before.initialized_partitions()


def test_assignment_is_simple_assignor() -> None:
    s = make(image(t=4, u=2))
    for m in ("a", "b", "c"):
        hb(s, m, 0, ["t", "u"] if m != "c" else ["t"])
    for _ in range(2):
        for m in ("a", "b", "c"):
            hb(s, m, s.coord.share.group(G).members[m].member_epoch)
    g = s.coord.share.group(G)
    assert all(m.member_epoch == g.target_epoch for m in g.members.values())
    assigned = {m: dict(x.assigned) for m, x in g.members.items()}
    assert assigned == {m: {t: ps for t, ps in g.target[m].items() if ps} for m in g.members}
    union = {}
    for parts in assigned.values():
        for t, ps in parts.items():
            union.setdefault(t, set()).update(ps)
    assert union == {tid("t"): {0, 1, 2, 3}, tid("u"): {0, 1}}


@pytest.mark.parametrize("n", [1, 2, 5])
def test_describe(n: int) -> None:
    s = make()
    for i in range(n):
        hb(s, f"m{i}", 0, ["t"])
    ctx = s.send("ShareGroupDescribe", 1, {"group_ids": [G, "nope"], "include_authorized_operations": False})
    groups = s.answer(ctx)["groups"]
    assert groups[0]["group_state"] == "Stable" and len(groups[0]["members"]) == n
    assert groups[0]["assignor_name"] == "simple"
    assert groups[1]["error_code"] == err.GROUP_ID_NOT_FOUND


def test_list_groups_types_filter_and_states() -> None:
    s = make()
    hb(s, "m1", 0, ["t"])
    s.send(
        "OffsetCommit",
        2,
        {
            "group_id": "simple",
            "generation_id": -1,
            "member_id": "",
            "retention_time_ms": -1,
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}
            ],
        },
    )

    def listed(**req: Any) -> list[dict]:
        return s.answer(s.send("ListGroups", 5, {"states_filter": [], "types_filter": [], **req}))["groups"]

    assert {g["group_id"]: (g["group_type"], g["protocol_type"], g["group_state"]) for g in listed()} == {
        G: ("share", "share", "Stable"),
        "simple": ("classic", "", "Empty"),
    }
    assert [g["group_id"] for g in listed(types_filter=["Share"])] == [G]
    assert [g["group_id"] for g in listed(types_filter=["share"], states_filter=["empty"])] == []
    assert [g["group_id"] for g in listed(types_filter=["consumer"])] == []


def test_describe_groups_of_a_share_group_is_not_found_as_kafka() -> None:
    """``GroupMetadataManager.describeGroups`` looks the id up as a classic group: v6+ answers
    GROUP_ID_NOT_FOUND "Group <id> is not a classic group.", older versions a Dead placeholder."""
    s = make()
    hb(s, "m1", 0, ["t"])
    new = s.answer(s.send("DescribeGroups", 6, {"groups": [G], "include_authorized_operations": False}))["groups"][0]
    assert (new["error_code"], new["error_message"], new["group_state"]) == (
        err.GROUP_ID_NOT_FOUND,
        f"Group {G} is not a classic group.",
        "Dead",
    )
    old = s.answer(s.send("DescribeGroups", 5, {"groups": [G], "include_authorized_operations": False}))["groups"][0]
    assert (old["error_code"], old["group_state"]) == (0, "Dead")


def test_delete_groups_only_when_empty_and_state_deleted() -> None:
    s = make()
    hb(s, "m1", 0, ["t"])
    res = s.answer(s.send("DeleteGroups", 2, {"groups_names": [G]}))["results"]
    assert res == [{"group_id": G, "error_code": err.NON_EMPTY_GROUP}]
    hb(s, "m1", -1)
    state = s.coord.share_requests.state
    assert any(k[0] == G for k in state.partitions)  # type: ignore[attr-defined]
    res = s.answer(s.send("DeleteGroups", 2, {"groups_names": [G]}))["results"]
    assert res == [{"group_id": G, "error_code": 0}]
    assert s.coord.share.group(G) is None
    assert not any(k[0] == G for k in state.partitions)  # type: ignore[attr-defined]
    # the tombstones replay to nothing
    from groupd.coordinator import GroupCoordinator

    from .harness import quiet_logger

    fresh = GroupCoordinator(s.config, logger=quiet_logger())
    fresh.load(0, s.records())
    assert fresh.share.groups.groups == {}


def test_classic_and_consumer_apis_on_a_share_group_id() -> None:
    """JoinGroup: INCONSISTENT_GROUP_PROTOCOL with no member id (``classicGroupJoin``);
    ConsumerGroupHeartbeat: GROUP_ID_NOT_FOUND "not a consumer group"; OffsetCommit and OffsetFetch:
    GROUP_ID_NOT_FOUND (``ShareGroup.validateOffsetCommit`` / ``validateOffsetFetch``)."""
    s = make()
    hb(s, "m1", 0, ["t"])
    join = s.answer(
        s.send(
            "JoinGroup",
            5,
            {
                "group_id": G,
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
    )
    assert (join["error_code"], join["member_id"]) == (err.INCONSISTENT_GROUP_PROTOCOL, "")
    chb = s.answer(
        s.send(
            "ConsumerGroupHeartbeat",
            0,
            {
                "group_id": G,
                "member_id": "x",
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": ["t"],
                "server_assignor": None,
                "topic_partitions": [],
            },
        )
    )
    assert (chb["error_code"], chb["error_message"]) == (err.GROUP_ID_NOT_FOUND, f"Group {G} is not a consumer group.")
    commit = s.answer(
        s.send(
            "OffsetCommit",
            2,
            {
                "group_id": G,
                "generation_id": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": "t",
                        "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}],
                    }
                ],
            },
        )
    )
    assert commit["topics"][0]["partitions"][0]["error_code"] == err.GROUP_ID_NOT_FOUND
    fetch = s.answer(s.send("OffsetFetch", 5, {"group_id": G, "topics": None, "require_stable": False}))
    assert fetch["error_code"] == err.GROUP_ID_NOT_FOUND
    assert s.coord.group(G) is None  # no simple classic group was made for it


def _alter(s: Shell, group: str, **offsets: dict[int, int]) -> dict:
    topics = [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in parts.items()]}
        for t, parts in offsets.items()
    ]
    return s.answer(s.send("AlterShareGroupOffsets", 0, {"group_id": group, "topics": topics}))


def _describe_offsets(s: Shell, group: str, topics: list[dict] | None, version: int = 1) -> dict:
    return s.answer(s.send("DescribeShareGroupOffsets", version, {"groups": [{"group_id": group, "topics": topics}]}))[
        "groups"
    ][0]


def test_alter_then_describe_offsets_and_members_get_the_altered_partitions() -> None:
    """``alterShareGroupOffsets`` on an empty (here new) group: the partitions are initialized in
    the share-partition state at the given start offsets and recorded initialized, so the first
    member is assigned them at once; DescribeShareGroupOffsets reads them back (``readSummary``)."""
    s = make(image(t=3))
    ans = _alter(s, G, t={0: 5, 1: 7, 9: 1}, nope={0: 1})
    assert ans["error_code"] == 0
    rows = {
        r["topic_name"]: [(p["partition_index"], p["error_code"]) for p in r["partitions"]] for r in ans["responses"]
    }
    assert rows == {
        "t": [(0, 0), (1, 0), (9, err.UNKNOWN_TOPIC_OR_PARTITION)],
        "nope": [(0, err.UNKNOWN_TOPIC_OR_PARTITION)],
    }
    d = _describe_offsets(s, G, None)
    assert [
        (t["topic_name"], [(p["partition_index"], p["start_offset"]) for p in t["partitions"]]) for t in d["topics"]
    ] == [("t", [(0, 5), (1, 7)])]
    d = _describe_offsets(s, G, [{"topic_name": "t", "partitions": [0, 2]}, {"topic_name": "x", "partitions": [0]}], 0)
    got = {t["topic_name"]: [(p["partition_index"], p["start_offset"]) for p in t["partitions"]] for t in d["topics"]}
    assert got == {"t": [(0, 5), (2, -1)], "x": [(0, -1)]}
    first = hb(s, "m1", 0, ["t"])
    # 0 and 1 were initialized by the alter: assigned at once; 2 is initialized by this heartbeat
    assert parts_of(first) == {tid("t"): [0, 1]}
    assert parts_of(hb(s, "m1", first["member_epoch"])) == {tid("t"): [0, 1, 2]}


def test_alter_and_delete_offsets_refused_while_members() -> None:
    s = make()
    hb(s, "m1", 0, ["t"])
    assert _alter(s, G, t={0: 1})["error_code"] == err.NON_EMPTY_GROUP
    d = s.answer(s.send("DeleteShareGroupOffsets", 0, {"group_id": G, "topics": [{"topic_name": "t"}]}))
    assert d["error_code"] == err.NON_EMPTY_GROUP
    assert _alter(s, "", t={0: 1})["error_code"] == err.INVALID_GROUP_ID
    d = s.answer(s.send("DeleteShareGroupOffsets", 0, {"group_id": "none", "topics": [{"topic_name": "t"}]}))
    assert d["error_code"] == err.GROUP_ID_NOT_FOUND


def test_delete_offsets_then_a_member_initializes_again() -> None:
    s = make()
    hb(s, "m1", 0, ["t"])
    hb(s, "m1", -1)
    d = s.answer(
        s.send("DeleteShareGroupOffsets", 0, {"group_id": G, "topics": [{"topic_name": "t"}, {"topic_name": "u"}]})
    )
    assert d["error_code"] == 0
    assert {r["topic_name"]: r["error_code"] for r in d["responses"]} == {"t": 0, "u": err.UNKNOWN_TOPIC_OR_PARTITION}
    g = s.coord.share.group(G)
    assert g.initialized_partitions() == {} and g.state_metadata.deleting == {}
    assert _describe_offsets(s, G, None)["topics"] == []
    d = s.answer(s.send("DeleteShareGroupOffsets", 0, {"group_id": G, "topics": [{"topic_name": "t"}]}))
    assert d["responses"][0]["error_code"] == err.UNKNOWN_TOPIC_OR_PARTITION
    hb(s, "m2", 0, ["t"])
    assert g is not s.coord.share.group(G) or True
    assert s.coord.share.group(G).initialized_partitions() == {tid("t"): frozenset({0, 1, 2})}


def test_a_failed_share_state_initialize_leaves_partitions_unassigned_then_retried() -> None:
    """``uninitializeShareGroupState``: the persister failed, the partitions leave initializing;
    the next heartbeat asks again."""
    s = make()
    state = s.coord.share_requests.state
    state.fail_with = err.COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]
    a = hb(s, "m1", 0, ["t"])
    g = s.coord.share.group(G)
    assert g.initialized_partitions() == {} and g.state_metadata.initializing == {}
    state.fail_with = None  # type: ignore[attr-defined]
    b = hb(s, "m1", a["member_epoch"])
    assert b["assignment"] is None
    c = hb(s, "m1", b["member_epoch"])
    assert parts_of(c) == {tid("t"): [0, 1, 2]}


def test_a_failed_write_rolls_the_group_back() -> None:
    s = make()
    s.auto_append = False
    ctx = s.send(
        "ShareGroupHeartbeat",
        1,
        {"group_id": G, "member_id": "m1", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]},
    )
    assert s.answer(ctx) is None and s.coord.share.group(G) is not None
    s.flush(error=err.NOT_COORDINATOR)
    assert s.answer(ctx)["error_code"] != 0
    assert s.coord.share.group(G) is None


def test_group_configs_set_the_session_and_interval() -> None:
    """``shareGroupSessionTimeoutMs`` / ``shareGroupHeartbeatIntervalMs``: the group's own configs,
    else the broker's; in force from the member's next heartbeat."""
    s = make()
    s.coord.share.set_group_config(G, 3000, 1234)
    a = hb(s, "m1", 0, ["t"])
    assert a["heartbeat_interval_ms"] == 1234
    s.advance(2999)
    assert "m1" in s.coord.share.group(G).members
    s.advance(1)
    assert "m1" not in s.coord.share.group(G).members
    s.coord.share.set_group_config(G, None, None)
    assert hb(s, "m2", 0, ["t"])["heartbeat_interval_ms"] == 5000
    s.advance(44999)
    assert "m2" in s.coord.share.group(G).members
    s.advance(1)
    assert "m2" not in s.coord.share.group(G).members


def test_describe_empty_group_id_is_invalid() -> None:
    s = make()
    groups = s.answer(
        s.send("ShareGroupDescribe", 1, {"group_ids": ["x", ""], "include_authorized_operations": False})
    )["groups"]
    assert [(g["group_id"], g["error_code"]) for g in groups] == [
        ("", err.INVALID_GROUP_ID),
        ("x", err.GROUP_ID_NOT_FOUND),
    ]


def test_a_topic_recreated_under_a_new_id_is_initialized_again_without_epoch_churn() -> None:
    img = {"v": image(t=2)}
    s = Shell(topics_image=lambda: img["v"])
    a = hb(s, "m1", 0, ["t"])
    b = hb(s, "m1", a["member_epoch"])
    assert parts_of(b) == {tid("t"): [0, 1]}
    new_id = uuid.uuid4()
    img["v"] = TopicsImage(2, {"t": (new_id, 3)})
    c = hb(s, "m1", b["member_epoch"])
    d = hb(s, "m1", c["member_epoch"])
    assert parts_of(d) == {new_id: [0, 1, 2]}
    e = hb(s, "m1", d["member_epoch"])
    f = hb(s, "m1", e["member_epoch"])
    assert f["member_epoch"] == d["member_epoch"]  # steady: no bump per heartbeat


def test_fault_injection_expires_a_share_member() -> None:
    s = make()
    hb(s, "m1", 0, ["t"])
    hb(s, "m2", 0, ["t"])
    code, result = s.coord.expire_member(s.now, G, "m1")
    s.absorb(result)
    assert code == 0 and set(s.coord.share.group(G).members) == {"m2"}
    assert s.coord.expire_member(s.now, G, "m1")[0] == err.UNKNOWN_MEMBER_ID
    assert hb(s, "m1", 2)["error_code"] == err.UNKNOWN_MEMBER_ID


def test_metrics_count_share_groups_and_members() -> None:
    from groupd.ops.metrics import Metrics

    s = make()
    hb(s, "m1", 0, ["t"])
    hb(s, "m2", 0, ["t"])
    hb(s, "m3", 0, ["t"], group="other")
    hb(s, "m3", -1, group="other")
    m = Metrics(process_metrics=False)
    m.core = s.coord
    text = m.render()[0].decode()
    assert 'groupd_groups_by_type{state="Stable",type="share"} 1.0' in text
    assert 'groupd_groups_by_type{state="Empty",type="share"} 1.0' in text
    assert "groupd_share_group_members 2.0" in text


def test_classic_heartbeat_sync_leave_on_a_share_group_id_are_unknown_member() -> None:
    """``classicGroupHeartbeat`` / ``classicGroupSync`` / ``classicGroupLeave``: a group of another
    type is UNKNOWN_MEMBER_ID ("Group g not found."), as a missing one."""
    s = make()
    hb(s, "m1", 0, ["t"])
    beat = s.answer(
        s.send("Heartbeat", 3, {"group_id": G, "generation_id": 1, "member_id": "m1", "group_instance_id": None})
    )
    assert beat["error_code"] == err.UNKNOWN_MEMBER_ID
    sync = s.answer(
        s.send(
            "SyncGroup",
            3,
            {"group_id": G, "generation_id": 1, "member_id": "m1", "group_instance_id": None, "assignments": []},
        )
    )
    assert sync["error_code"] == err.UNKNOWN_MEMBER_ID
    leave = s.answer(
        s.send("LeaveGroup", 3, {"group_id": G, "members": [{"member_id": "m1", "group_instance_id": None}]})
    )
    # v3+: not a top-level error, each member named is answered UNKNOWN_MEMBER_ID (leaveGroup)
    assert [m["error_code"] for m in leave["members"]] == [err.UNKNOWN_MEMBER_ID]
    assert set(s.coord.share.group(G).members) == {"m1"}
