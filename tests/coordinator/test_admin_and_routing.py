"""FindCoordinator, DescribeGroups, ListGroups, DeleteGroups; routing; loading from the log."""

from __future__ import annotations

import pytest
from groupd.coordinator import CoordinatorConfig, GroupCoordinator, Node, PartitionOwnership
from groupd.coordinator.classic.admin import GROUP_AUTHORIZED_OPERATIONS
from groupd.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey
from groupd.coordinator.routing import java_string_hashcode, partition_for
from harness import Shell, sub
from test_rebalance import stable_group

# -- routing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "hashcode", "partition"),
    [("my-group", -1906497762, 12), ("polygenelubricants", -(2**31), 0), ("😀", None, 49), ("", 0, 0)],
)
def test_partition_vectors(group: str, hashcode: int | None, partition: int) -> None:
    if hashcode is not None:
        assert java_string_hashcode(group) == hashcode
    assert partition_for(group) == partition


def test_find_coordinator_versions() -> None:
    s = Shell()
    v0 = s.answer(s.send("FindCoordinator", 0, {"key": "my-group"}))
    assert (v0["error_code"], v0["node_id"], v0["host"], v0["port"]) == (0, 0, "localhost", 9092)
    v4 = s.answer(s.send("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["a", "b"]}))
    assert [c["key"] for c in v4["coordinators"]] == ["a", "b"]
    assert all(c["error_code"] == 0 and c["node_id"] == 0 for c in v4["coordinators"])
    share = s.answer(s.send("FindCoordinator", 3, {"key": "sg", "key_type": 2}))
    assert share["error_code"] == 42 and share["node_id"] == -1


def test_find_coordinator_share_key_type() -> None:
    # KafkaApis.getCoordinator: key type 2 from v6, "groupId:topicId:partition" (SharePartitionKey.validate)
    s = Shell()
    keys = [
        "sg:AAAAAAAAAAAAAAAAAAAAAQ:0",
        "sg",
        "sg:nope:0",
        "sg:AAAAAAAAAAAAAAAAAAAAAQ:x",
        ":AAAAAAAAAAAAAAAAAAAAAQ:0",
    ]
    r = s.answer(s.send("FindCoordinator", 6, {"key_type": 2, "coordinator_keys": keys}))
    assert [(c["error_code"], c["node_id"]) for c in r["coordinators"]] == [(0, 0)] + [(42, -1)] * 4
    r = s.answer(s.send("FindCoordinator", 5, {"key_type": 2, "coordinator_keys": keys[:1]}))
    assert r["coordinators"][0]["error_code"] == 42


def test_find_coordinator_error_message_by_version() -> None:
    # KafkaApis.handleFindCoordinatorRequestLessThanV4 fills v1-3's error_message with
    # Errors.message(), which is "NONE" for NONE; v4's per-key message keeps its schema default "".
    s = Shell()
    for v in (1, 2, 3):
        r = s.answer(s.send("FindCoordinator", v, {"key": "my-group", "key_type": 0}))
        assert (r["error_code"], r["error_message"], r["node_id"]) == (0, "NONE", 0)
    r = s.answer(s.send("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["my-group"]}))
    assert r["coordinators"][0]["error_message"] == ""
    s.coord.begin_load(s.coord.partition_for("loading"))
    r = s.answer(s.send("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["loading"]}))
    assert r["coordinators"][0]["error_code"] == 0  # FindCoordinator does not wait for a load


def test_find_coordinator_of_a_transactional_id_is_this_node() -> None:
    # KafkaApis.getCoordinator, CoordinatorType.TRANSACTION: the leader of the id's partition of
    # __transaction_state; groupd, one broker, leads them all. Never INVALID_REQUEST, which
    # librdkafka retries every 500 ms for as long as init_transactions() waits.
    s = Shell()
    v1 = s.answer(s.send("FindCoordinator", 1, {"key": "tx", "key_type": 1}))
    assert (v1["error_code"], v1["error_message"], v1["node_id"], v1["host"], v1["port"]) == (
        0,
        "NONE",
        0,
        "localhost",
        9092,
    )
    v4 = s.answer(s.send("FindCoordinator", 4, {"key_type": 1, "coordinator_keys": ["tx", "", "other"]}))
    assert [(c["key"], c["error_code"], c["node_id"], c["error_message"]) for c in v4["coordinators"]] == [
        ("tx", 0, 0, ""),
        ("", 0, 0, ""),
        ("other", 0, 0, ""),
    ]


def test_groups_of_partitions_owned_elsewhere_get_not_coordinator() -> None:
    here, there = Node(1, "h1", 9092), Node(2, "h2", 9093)
    owners = {p: (here if p != 12 else there) for p in range(50)}
    coord = GroupCoordinator(ownership=PartitionOwnership(here, 50, owners))
    r = coord.handle(0, "FindCoordinator", 1, {"key": "my-group", "key_type": 0}, "ctx")
    assert r.responses[0][1]["node_id"] == 2 and r.responses[0][1]["host"] == "h2"
    r = coord.handle(0, "Heartbeat", 0, {"group_id": "my-group", "generation_id": 1, "member_id": "m"}, "ctx")
    assert r.responses[0][1]["error_code"] == 16


# -- DescribeGroups / ListGroups ----------------------------------------------------------------


def test_describe_stable_and_rebalancing_groups() -> None:
    s, (a, b) = stable_group(2)
    d = s.answer(s.send("DescribeGroups", 5, {"groups": ["g"], "include_authorized_operations": True}))["groups"][0]
    assert (d["error_code"], d["group_state"], d["protocol_type"], d["protocol_data"]) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    assert {m["member_id"] for m in d["members"]} == {a.member_id, b.member_id}
    by_id = {m["member_id"]: m for m in d["members"]}
    assert by_id[a.member_id]["member_metadata"] == sub("t")
    assert by_id[a.member_id]["member_assignment"] == a.assignment
    assert by_id[a.member_id]["client_id"] == "c1" and by_id[a.member_id]["client_host"] == "/127.0.0.1"
    assert d["authorized_operations"] > 0
    a.join()
    d = s.answer(s.send("DescribeGroups", 0, {"groups": ["g"]}))["groups"][0]
    assert d["group_state"] == "PreparingRebalance" and d["protocol_data"] == ""
    assert d["authorized_operations"] == -(2**31)


def test_describe_outside_stable_keeps_last_assignment_as_describe_no_metadata() -> None:
    """Kafka's ClassicGroupMember.describeNoMetadata(): no metadata outside Stable, but the
    member's last assignment is still reported (until a rebalance resets it)."""
    s, (a, b) = stable_group(2)
    assert a.assignment and b.assignment and a.assignment != b.assignment

    def members() -> dict[str, tuple[bytes, bytes]]:
        d = s.answer(s.send("DescribeGroups", 5, {"groups": ["g"]}))["groups"][0]
        return {m["member_id"]: (m["member_metadata"], m["member_assignment"]) for m in d["members"]}

    a.join()
    assert s.state() == "PreparingRebalance"
    assert members() == {a.member_id: (b"", a.assignment), b.member_id: (b"", b.assignment)}
    b.join()
    assert s.state() == "CompletingRebalance"
    assert members() == {a.member_id: (b"", a.assignment), b.member_id: (b"", b.assignment)}
    a.topics = ("t", "u")
    a.join()  # new metadata: CompletingRebalance -> PreparingRebalance resets the assignments
    assert s.state() == "PreparingRebalance"
    assert members() == {a.member_id: (b"", b""), b.member_id: (b"", b"")}


def test_describe_missing_group_dead_or_not_found_by_version() -> None:
    s = Shell()
    old = s.answer(s.send("DescribeGroups", 5, {"groups": ["nope"]}))["groups"][0]
    assert (old["error_code"], old["group_state"], old["members"]) == (0, "Dead", [])
    new = s.answer(s.send("DescribeGroups", 6, {"groups": ["nope"]}))["groups"][0]
    assert (new["error_code"], new["group_state"]) == (69, "Dead")


def test_list_groups_with_filters() -> None:
    s, _ = stable_group(1)
    s2 = s.client("x", group="other")
    s2.join()
    s2.leave()
    listed = s.answer(s.send("ListGroups", 3, {}))
    assert sorted(g["group_id"] for g in listed["groups"]) == ["g", "other"]
    only = s.answer(s.send("ListGroups", 4, {"states_filter": ["stable"]}))
    assert [(g["group_id"], g["group_state"]) for g in only["groups"]] == [("g", "Stable")]
    typed = s.answer(s.send("ListGroups", 5, {"states_filter": [], "types_filter": ["Classic"]}))
    assert {g["group_type"] for g in typed["groups"]} == {"classic"} and len(typed["groups"]) == 2
    none = s.answer(s.send("ListGroups", 5, {"types_filter": ["consumer"]}))
    assert none["groups"] == []


def test_list_groups_trims_state_filters() -> None:
    # GroupMetadataManager.listGroups: statesFilter.map(toLowerCase).map(trim); types are not trimmed.
    s, _ = stable_group(1)
    e = s.client("x", group="other")
    e.join()
    e.leave()
    both = s.answer(s.send("ListGroups", 4, {"states_filter": [" Stable ", "\tEMPTY\n"]}))
    assert sorted((g["group_id"], g["group_state"]) for g in both["groups"]) == [("g", "Stable"), ("other", "Empty")]
    blank = s.answer(s.send("ListGroups", 4, {"states_filter": [" "]}))
    assert blank["groups"] == []  # a filter that trims to "" matches no state
    untrimmed_type = s.answer(s.send("ListGroups", 5, {"states_filter": [], "types_filter": [" classic"]}))
    assert untrimmed_type["groups"] == []


def test_describe_sets_authorized_operations_only_without_error() -> None:
    # KafkaApis.handleDescribeGroupsRequest: authorized operations on groupResult.errorCode == NONE.
    s, _ = stable_group(1)
    ask = {"include_authorized_operations": True}
    v5 = s.answer(s.send("DescribeGroups", 5, {"groups": ["g", "nope"], **ask}))["groups"]
    assert [(d["error_code"], d["group_state"]) for d in v5] == [(0, "Stable"), (0, "Dead")]
    assert v5[0]["authorized_operations"] == v5[1]["authorized_operations"] == GROUP_AUTHORIZED_OPERATIONS
    v6 = s.answer(s.send("DescribeGroups", 6, {"groups": ["g", "nope"], **ask}))["groups"]
    assert v6[0]["authorized_operations"] == GROUP_AUTHORIZED_OPERATIONS
    assert (v6[1]["error_code"], v6[1]["authorized_operations"]) == (69, -(2**31))
    s.coord.begin_load(s.coord.partition_for("loading"))
    loading = s.answer(s.send("DescribeGroups", 5, {"groups": ["loading"], **ask}))["groups"][0]
    assert (loading["error_code"], loading["authorized_operations"]) == (14, -(2**31))


def test_empty_group_id_is_a_group_for_offsets_describe_and_delete() -> None:
    # GroupCoordinatorService: commitOffsets, fetchOffsets, describeGroups and deleteGroups support
    # the empty group id "for backwards compatibility" (only null is INVALID_GROUP_ID).
    s = Shell()
    commit = {
        "group_id": "",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7}]}],
    }
    r = s.answer(s.send("OffsetCommit", 8, commit))
    assert r["topics"][0]["partitions"][0]["error_code"] == 0
    old = s.answer(s.send("OffsetFetch", 5, {"group_id": "", "topics": None}))
    assert old["error_code"] == 0 and old["topics"][0]["partitions"][0]["committed_offset"] == 7
    new = s.answer(s.send("OffsetFetch", 8, {"groups": [{"group_id": "", "topics": None}], "require_stable": True}))
    assert (
        new["groups"][0]["error_code"] == 0 and new["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 7
    )
    d = s.answer(s.send("DescribeGroups", 5, {"groups": [""]}))["groups"][0]
    assert (d["error_code"], d["group_id"], d["group_state"]) == (0, "", "Empty")
    assert "" in {g["group_id"] for g in s.answer(s.send("ListGroups", 3, {}))["groups"]}
    deleted = s.answer(s.send("DeleteGroups", 2, {"groups_names": [""]}))
    assert deleted["results"] == [{"group_id": "", "error_code": 0}]
    assert s.coord.group("") is None and "" not in s.coord.offsets
    # The APIs that check isGroupIdNotEmpty still refuse it.
    assert s.answer(s.send("OffsetDelete", 0, {"group_id": "", "topics": []}))["error_code"] == 24
    assert s.answer(s.send("Heartbeat", 0, {"group_id": "", "generation_id": 0, "member_id": "m"}))["error_code"] == 24


# -- DeleteGroups -------------------------------------------------------------------------------


def test_delete_groups_semantics() -> None:
    s, (_a,) = stable_group(1)
    e = s.client("e", group="empty")
    e.join()
    e.sync({e.member_id: b""})
    e.commit({("t", 0): 42})
    e.leave()
    names = ["g", "empty", "missing", "", "empty", "g"]
    resp = s.answer(s.send("DeleteGroups", 2, {"groups_names": names}))
    # One answer per group, named twice or not (KafkaApis: groupsNames.distinct); "" is an id like
    # any other (GroupCoordinatorService.deleteGroups: only null is INVALID_GROUP_ID).
    assert [(r["group_id"], r["error_code"]) for r in resp["results"]] == [
        ("g", 68),
        ("empty", 0),
        ("missing", 69),
        ("", 69),
    ]
    assert s.coord.group("empty") is None and "empty" not in s.coord.offsets
    tail = s.records()[-2:]
    assert tail == [(OffsetCommitKey("empty", "t", 0), None), (GroupMetadataKey("empty"), None)]
    again = s.answer(s.send("DeleteGroups", 0, {"groups_names": ["empty"]}))
    assert again["results"][0]["error_code"] == 69
    fetched = s.answer(s.send("OffsetFetch", 5, {"group_id": "empty", "topics": None}))
    assert fetched["topics"] == []


def test_delete_waits_for_tombstones_and_restores_on_failure() -> None:
    s = Shell()
    c = s.client("c")
    c.join()
    c.sync({c.member_id: b""})
    c.commit({("t", 0): 1})
    c.leave()
    s.auto_append = False
    ctx = s.send("DeleteGroups", 1, {"groups_names": ["g"]})
    assert s.answer(ctx) is None and s.coord.group("g") is None
    s.flush(error=OSError("disk"))
    assert s.answer(ctx)["results"][0]["error_code"] == 16
    assert s.state() == "Empty" and s.coord.offsets["g"][("t", 0)].offset == 1


def test_join_after_delete_creates_a_new_group() -> None:
    s = Shell()
    c = s.client("c")
    c.join()
    c.leave()
    s.send("DeleteGroups", 1, {"groups_names": ["g"]})
    d = s.client("d")
    d.join()
    assert d.generation == 1 and s.state() == "CompletingRebalance"


# -- loading ------------------------------------------------------------------------------------


def test_loaded_group_is_stable_with_fresh_sessions() -> None:
    s, (a, b) = stable_group(2)
    a.commit({("t", 0): 7})
    fresh = Shell()
    fresh.now = 100000
    fresh.coord.load(fresh.now, s.records())
    g = fresh.group()
    assert str(g.state) == "Stable" and g.generation == s.group().generation
    assert g.leader_id == a.member_id and g.members[b.member_id].assignment == b.assignment
    assert g.protocol_name == "range" and g.subscribed_topics == frozenset({"t"})
    a.shell = b.shell = fresh
    assert a.heartbeat() == 0
    fresh.advance(9999)
    assert a.heartbeat() == 0
    fresh.advance(1)  # b's session ran from load time
    assert b.member_id not in fresh.group().members and fresh.state() == "PreparingRebalance"
    assert fresh.coord.offsets["g"][("t", 0)].offset == 7


def test_requests_during_load_get_load_in_progress() -> None:
    s, (a,) = stable_group(1)
    p = s.coord.partition_for("g")
    s.coord.begin_load(p)
    a.join()
    assert a.last_join["error_code"] == 14
    assert s.answer(s.send("ListGroups", 0, {}))["error_code"] == 14
    s.end_load(p)
    assert a.heartbeat() == 0


def test_heartbeat_during_load_is_answered_none_as_group_coordinator_service_heartbeat() -> None:
    """Kafka's GroupCoordinatorService.heartbeat turns COORDINATOR_LOAD_IN_PROGRESS into NONE
    ("the group is still loading, so blindly respond"), on both of the shell's paths."""
    s, (a,) = stable_group(1)
    p = s.coord.partition_for("g")
    s.coord.begin_load(p)
    assert a.heartbeat() == 0  # the harness checks the hot path answers the same
    stranger = {"group_id": "g", "generation_id": 7, "member_id": "nobody", "group_instance_id": None}
    assert s.answer(s.send("Heartbeat", 4, stranger))["error_code"] == 0
    assert s.answer(s.send("Heartbeat", 4, {**stranger, "group_id": ""}))["error_code"] == 24
    s.end_load(p)
    assert s.answer(s.send("Heartbeat", 4, stranger))["error_code"] == 25


def test_deleted_group_stays_deleted_after_restart() -> None:
    """Redpanda once forgot to apply the deletion tombstone on restart; deleted groups came back."""
    s = Shell()
    c = s.client("c")
    c.join()
    c.sync({c.member_id: b"a"})
    c.commit({("t", 0): 3})
    c.leave()
    s.send("DeleteGroups", 2, {"groups_names": ["g"]})
    fresh = Shell()
    fresh.coord.load(0, s.records())
    assert fresh.coord.group("g") is None and fresh.coord.offsets == {} and fresh.coord.group_records == {}


def test_group_created_by_a_member_id_required_join_survives_a_restart() -> None:
    # GroupMetadataManager.classicGroupJoinToClassicGroup: a join that creates a group and writes
    # nothing (MEMBER_ID_REQUIRED) appends an empty group-metadata record
    # (newEmptyGroupMetadataRecord: protocol type "", generation 0, no protocol, leader or members).
    s = Shell()
    s.now = 1234
    first = s.answer(s.send("JoinGroup", 4, s.client("a").join_request(), client_id="a"))
    assert first["error_code"] == 79
    assert s.records() == [(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, 1234))]
    # Joining an existing group writes nothing more until a generation completes.
    again = s.answer(s.send("JoinGroup", 4, s.client("b").join_request(), client_id="b"))
    assert again["error_code"] == 79 and len(s.records()) == 1

    fresh = Shell()
    fresh.coord.load(fresh.now, s.records())
    g = fresh.group()
    assert (str(g.state), g.generation, g.protocol_type, g.protocol_name, g.members) == ("Empty", 0, None, None, {})
    listed = fresh.answer(fresh.send("ListGroups", 4, {"states_filter": []}))["groups"]
    assert [(x["group_id"], x["group_state"], x["protocol_type"]) for x in listed] == [("g", "Empty", "")]
    d = fresh.answer(fresh.send("DescribeGroups", 5, {"groups": ["g"]}))["groups"][0]
    assert (d["error_code"], d["group_state"], d["protocol_type"], d["members"]) == (0, "Empty", "", [])


def test_new_group_whose_empty_record_fails_is_dropped() -> None:
    # If the empty group-metadata record cannot be written Kafka reverts the group's creation.
    s = Shell(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000), auto_append=False)
    assert s.answer(s.send("JoinGroup", 4, s.client("a").join_request(), client_id="a"))["error_code"] == 79
    v0 = s.send("JoinGroup", 0, {**s.client("b").join_request(), "member_id": ""}, client_id="b")
    assert s.answer(v0) is None  # parked in the initial join phase of the same group
    s.flush(error=56)
    assert s.coord.group("g") is None
    assert s.answer(v0)["error_code"] == 16  # KAFKA_STORAGE_ERROR -> NOT_COORDINATOR, as Kafka maps it
    assert (
        s.answer(s.send("JoinGroup", 4, {**s.client("a").join_request(), "member_id": "a-uuid1"}))["error_code"] == 25
    )
