"""KIP-848 migration between the classic and the consumer group protocol, through the GroupCoordinator
with the fake clock (Kafka 4's ``GroupMetadataManager``: ``convertToConsumerGroup`` /
``validateOnlineUpgrade``, ``classicGroupJoin/Sync/Heartbeat/LeaveToConsumerGroup``,
``convertToClassicGroup`` / ``validateOnlineDowngradeWithFencedMembers``; ``ConsumerGroup.fromClassicGroup``,
``ClassicGroup.fromConsumerGroup``; ``group.consumer.migration.policy``)."""

from __future__ import annotations

from typing import Any

from consumer_harness import image, topic_id
from groupd.coordinator.consumer import ConsumerGroupConfig
from groupd.coordinator.consumer import records as cr
from groupd.coordinator.consumer.member import MemberState
from groupd.coordinator.consumer_protocol import Assignment, TopicPartitions, decode_assignment, encode_assignment
from groupd.coordinator.records import GroupMetadataKey
from groupd.coordinator.serde import decode_record, encode_record
from harness import Client, Shell, assignment
from test_consumer_group_coordinator import hb as consumer_hb
from test_consumer_group_coordinator import join_request

IMAGE = image(1, t=4)
T = topic_id("t")
REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND = 27, 22, 25, 69


def shell_with(policy: str = "bidirectional", **kw: Any) -> Shell:
    return Shell(topics_image=lambda: IMAGE, consumer_config=ConsumerGroupConfig(migration_policy=policy), **kw)


def hb(shell: Shell, member: str, epoch: int = 0, owned: list[int] | None = None) -> dict[str, Any]:
    return consumer_hb(shell, member, epoch, owned, group="g")


def owned_by(c: Client) -> set[int]:
    if not c.assignment:
        return set()
    return {p for tp in decode_assignment(c.assignment).assigned_partitions for p in tp.partitions}


def classic_pair(shell: Shell) -> tuple[Client, Client]:
    """Two classic consumers of topic t in a Stable classic group: a has 0-1, b has 2-3."""
    a, b = shell.client("a"), shell.client("b")
    a.join()
    b.join()
    if a.pending_join is None:  # a's first generation completed alone: it rejoins for b
        a.join()
    shell.deliver()
    leader, other = (a, b) if a.is_leader else (b, a)
    other.sync()
    leader.sync({leader.member_id: assignment("t", 0, 1), other.member_id: assignment("t", 2, 3)})
    shell.deliver()
    assert shell.state() == "Stable" and owned_by(leader) == {0, 1} and owned_by(other) == {2, 3}
    return leader, other


def rejoin(c: Client) -> None:
    """What an eager classic client does on REBALANCE_IN_PROGRESS: drop everything, JoinGroup, SyncGroup."""
    c.assignment = None
    c.join()
    assert c.last_join["error_code"] == 0, c.last_join
    c.sync()
    assert c.last_sync["error_code"] == 0, c.last_sync


def converge(shell: Shell, classic: list[Client], consumers: dict[str, int], rounds: int = 6) -> dict[str, int]:
    """Heartbeat everyone until nothing changes: classic clients rejoin when told, consumer-protocol
    members report what they own. Returns the consumer members' epochs."""
    owned: dict[str, list[int]] = {m: [] for m in consumers}
    for _ in range(rounds):
        for c in classic:
            if c.heartbeat() == REBALANCE_IN_PROGRESS:
                rejoin(c)
        for m, epoch in list(consumers.items()):
            r = hb(shell, m, epoch, owned[m])
            assert r["error_code"] == 0, r
            consumers[m] = r["member_epoch"]
            if r["assignment"] is not None:
                owned[m] = [p for tp in r["assignment"]["topic_partitions"] for p in tp["partitions"]]
        held = [p for c in classic for p in owned_by(c)] + [p for ps in owned.values() for p in ps]
        assert len(held) == len(set(held)), f"a partition owned twice: {held}"
    return consumers


def test_consumerGroupHeartbeat_convertToConsumerGroup_upgrades_a_live_classic_group() -> None:
    shell = shell_with()
    a, b = classic_pair(shell)
    before = len(shell.log)
    r = hb(shell, "m1")
    assert r["error_code"] == 0 and r["member_epoch"] == a.generation + 1
    # the classic group's tombstone, then the consumer group as fromClassicGroup builds it
    written = [rec for _, rec in shell.log[before:]]
    assert written[0] == (GroupMetadataKey("g"), None)
    members = {k.member_id: v for k, v in written if isinstance(k, cr.ConsumerGroupMemberMetadataKey)}
    assert members[a.member_id].classic_member_metadata.session_timeout_ms == a.session_timeout_ms
    assert [p.name for p in members[a.member_id].classic_member_metadata.supported_protocols] == ["range"]
    targets = [(k.member_id, v) for k, v in written if isinstance(k, cr.ConsumerGroupTargetAssignmentMemberKey)]
    assert [(m, v.topic_partitions) for m, v in targets[:2]] == [
        (a.member_id, ((T, (0, 1)),)),
        (b.member_id, ((T, (2, 3)),)),
    ]
    assert shell.coord.group("g") is None
    g = shell.coord.consumer.group("g")
    assert set(g.members) == {a.member_id, b.member_id, "m1"}
    assert r["assignment"] == {"topic_partitions": []}  # m1 waits: a and b still hold everything

    # the classic members learn from their heartbeats that they must rejoin; then m1 gets its share
    epochs = converge(shell, [a, b], {"m1": r["member_epoch"]})
    g = shell.coord.consumer.group("g")
    assert g.state.value == "Stable"
    assert sorted(len(m.assigned.get(T, ())) for m in g.members.values()) == [1, 1, 2]
    assert all(m.member_epoch == g.group_epoch for m in g.members.values()) and epochs["m1"] == g.group_epoch
    assert owned_by(a) | owned_by(b) | set(g.members["m1"].assigned[T]) == {0, 1, 2, 3}


def test_validateOnlineUpgrade_disabled_or_downgrade_only_answers_GROUP_ID_NOT_FOUND() -> None:
    for policy in ("disabled", "downgrade"):
        shell = shell_with(policy)
        classic_pair(shell)
        r = hb(shell, "m1")
        assert (r["error_code"], r["error_message"]) == (GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
        assert shell.state() == "Stable" and shell.coord.consumer.group("g") is None


def test_validateOnlineUpgrade_refuses_a_group_of_another_protocol_type() -> None:
    shell = shell_with()
    c = shell.client("a", protocol_type="connect")
    c.join()
    shell.advance(0)
    assert hb(shell, "m1")["error_code"] == GROUP_ID_NOT_FOUND


def test_an_upgrade_whose_write_fails_brings_the_classic_group_back() -> None:
    shell = shell_with()
    a, b = classic_pair(shell)
    shell.auto_append = False
    ctx = shell.send("ConsumerGroupHeartbeat", 1, {**join_request("m1"), "group_id": "g"})
    shell.flush(error=56)
    assert shell.answer(ctx)["error_code"] == 16  # NOT_COORDINATOR
    assert shell.coord.consumer.group("g") is None and shell.state() == "Stable"
    assert a.heartbeat() == 0 and b.heartbeat() == 0


def test_classicGroupJoinToConsumerGroup_a_classic_member_joins_a_consumer_group() -> None:
    shell = shell_with()
    r = hb(shell, "m1")
    hb(shell, "m1", r["member_epoch"], [0, 1, 2, 3])
    c = shell.client("c", join_version=7, sync_version=5)
    ctx = shell.send("JoinGroup", 7, c.join_request())
    first = shell.answer(ctx)
    assert first["error_code"] == 79 and first["member_id"]  # MEMBER_ID_REQUIRED, nothing written
    c.member_id = first["member_id"]
    c.join()
    j = c.last_join
    # no leader, no members: the coordinator assigns; the generation is the member epoch
    assert j["error_code"] == 0 and j["leader"] == "" and j["members"] == []
    assert (j["protocol_type"], j["protocol_name"]) == ("consumer", "range")
    g = shell.coord.consumer.group("g")
    assert j["generation_id"] == g.members[c.member_id].member_epoch
    c.sync()
    assert c.last_sync["error_code"] == 0 and owned_by(c) == set()  # m1 has not released anything yet
    converge(shell, [c], {"m1": r["member_epoch"]})
    assert len(owned_by(c)) == 2 and shell.coord.consumer.group("g").state.value == "Stable"


def test_classicGroupJoinToConsumerGroup_refuses_unsupported_protocols() -> None:
    shell = shell_with()
    hb(shell, "m1")
    c = shell.client("c", protocol_type="connect")
    c.join()
    assert c.last_join["error_code"] == 23  # INCONSISTENT_GROUP_PROTOCOL
    d = shell.client("d")
    d.join()
    e = shell.client("e", protocols=[("roundrobin", d.join_request()["protocols"][0]["metadata"])])
    e.join()
    assert e.last_join["error_code"] == 23  # no protocol in common with the classic member d


def test_classicGroupHeartbeatToConsumerGroup_errors_and_session_expiry() -> None:
    shell = shell_with()
    a, _b = classic_pair(shell)
    hb(shell, "m1")
    assert a.heartbeat() == REBALANCE_IN_PROGRESS  # the group epoch moved past the member
    stale = Client(shell, "x", member_id=a.member_id, generation=a.generation - 1)
    assert stale.heartbeat() == ILLEGAL_GENERATION
    assert Client(shell, "y", member_id="nobody", generation=1).heartbeat() == UNKNOWN_MEMBER_ID
    assert Client(shell, "z", member_id="m1", generation=1).heartbeat() == UNKNOWN_MEMBER_ID  # not classic
    # a is told to rejoin and does not: fenced after its rebalance timeout (consumerGroupJoinTimeout);
    # b goes silent: fenced after its session timeout (10 s); m1 keeps heartbeating
    epoch = hb(shell, "m1", 0)["member_epoch"]
    for _ in range(7):
        shell.advance(5000)
        epoch = hb(shell, "m1", epoch, [])["member_epoch"]
    assert set(shell.coord.consumer.group("g").members) == {"m1"}


def test_classicGroupSyncToConsumerGroup_checks_generation_protocol_and_rebalance() -> None:
    shell = shell_with()
    a, _b = classic_pair(shell)
    hb(shell, "m1")
    sync = {"group_id": "g", "member_id": a.member_id, "generation_id": a.generation, "assignments": []}
    sync5 = {**sync, "protocol_type": "consumer", "protocol_name": "range"}
    assert shell.answer(shell.send("SyncGroup", 3, sync))["error_code"] == REBALANCE_IN_PROGRESS
    assert shell.answer(shell.send("SyncGroup", 3, {**sync, "generation_id": 99}))["error_code"] == ILLEGAL_GENERATION
    assert shell.answer(shell.send("SyncGroup", 5, {**sync5, "protocol_name": "roundrobin"}))["error_code"] == 23


def test_convertToClassicGroup_when_the_last_consumer_member_leaves() -> None:
    shell = shell_with()
    a, b = classic_pair(shell)
    r = hb(shell, "m1")
    epochs = converge(shell, [a, b], {"m1": r["member_epoch"]})
    g_epoch = shell.coord.consumer.group("g").group_epoch
    before = len(shell.log)
    assert hb(shell, "m1", -1)["error_code"] == 0
    written = [rec for _, rec in shell.log[before:]]
    assert written[-1][0] == GroupMetadataKey("g") and written[-1][1].generation == g_epoch
    assert all(isinstance(k, cr.CONSUMER_KEY_TYPES) and v is None for k, v in written[:-1])
    assert shell.coord.consumer.group("g") is None
    assert shell.state() == "PreparingRebalance" and set(shell.group().members) == {a.member_id, b.member_id}
    assert epochs["m1"] == g_epoch
    # the classic members rejoin the classic group and share everything again
    for c in (a, b):
        assert c.heartbeat() == REBALANCE_IN_PROGRESS
        c.assignment = None
        c.join()
    shell.advance(0)
    leader, other = (a, b) if a.is_leader else (b, a)
    other.sync()
    leader.sync({leader.member_id: assignment("t", 0, 1), other.member_id: assignment("t", 2, 3)})
    shell.deliver()
    assert shell.state() == "Stable" and a.generation == g_epoch + 1


def test_validateOnlineDowngrade_upgrade_only_policy_keeps_the_consumer_group() -> None:
    shell = shell_with("upgrade")
    a, b = classic_pair(shell)
    r = hb(shell, "m1")
    converge(shell, [a, b], {"m1": r["member_epoch"]})
    hb(shell, "m1", -1)
    g = shell.coord.consumer.group("g")
    assert g is not None and set(g.members) == {a.member_id, b.member_id} and shell.coord.group("g") is None
    converge(shell, [a, b], {})
    assert sorted(owned_by(a) | owned_by(b)) == [0, 1, 2, 3] and g.state.value == "Stable"


def test_classicGroupLeaveToConsumerGroup_then_downgrade_when_only_classic_members_stay() -> None:
    shell = shell_with()
    a, b = classic_pair(shell)
    r = hb(shell, "m1")
    converge(shell, [a, b], {"m1": r["member_epoch"]})
    resp = a.leave()
    assert resp["members"][0]["error_code"] == 0
    g = shell.coord.consumer.group("g")
    assert set(g.members) == {b.member_id, "m1"}
    member = {"member_id": "m1", "group_instance_id": None, "reason": None}
    resp = shell.answer(shell.send("LeaveGroup", 3, {"group_id": "g", "members": [member]}))
    assert resp["members"][0]["error_code"] == UNKNOWN_MEMBER_ID  # m1 does not use the classic protocol


def test_reload_of_the_log_equals_the_live_state_after_upgrade_and_downgrade() -> None:
    shell = shell_with()
    a, b = classic_pair(shell)
    r = hb(shell, "m1")
    converge(shell, [a, b], {"m1": r["member_epoch"]})
    live = shell.coord.consumer.group("g").persisted()

    def reload() -> Shell:
        fresh = shell_with()
        fresh.log = [(p, decode_record(*encode_record(rec))) for p, rec in shell.log]
        fresh.coord.begin_load(fresh.coord.partition_for("g"))
        fresh.end_load(fresh.coord.partition_for("g"))
        return fresh

    fresh = reload()
    assert fresh.coord.consumer.group("g").persisted() == live and fresh.coord.group("g") is None
    assert all(m.classic is not None for mid, m in fresh.coord.consumer.group("g").members.items() if mid != "m1")
    hb(shell, "m1", -1)
    fresh = reload()
    assert fresh.coord.consumer.group("g") is None
    assert fresh.coord.group_records["g"] == shell.coord.group_records["g"]
    assert set(fresh.group().members) == {a.member_id, b.member_id}


def test_a_partition_moves_from_a_classic_member_only_after_its_rejoin_releases_it() -> None:
    """A classic member's revocation is confirmed by its next JoinGroup (an eager client owns nothing when
    it rejoins): until then the consumer-protocol member waits in UNRELEASED_PARTITIONS
    (CurrentAssignmentBuilder), so no partition is held by two members."""
    shell = shell_with()
    _a, b = classic_pair(shell)
    r = hb(shell, "m1")
    g = shell.coord.consumer.group("g")
    assert g.members["m1"].state == MemberState.UNRELEASED_PARTITIONS and g.target["m1"] == {T: frozenset({3})}
    assert hb(shell, "m1", r["member_epoch"], [])["assignment"] is None  # 3 is still b's
    assert b.heartbeat() == REBALANCE_IN_PROGRESS
    rejoin(b)
    assert owned_by(b) == {2} and g.current_partition_epoch(T, 3) == -1
    after = hb(shell, "m1", r["member_epoch"], [])
    assert after["assignment"] == {"topic_partitions": [{"topic_id": T, "partitions": [3]}]}
    assert g.members["m1"].state == MemberState.STABLE


def test_validateOffsetCommit_a_classic_member_commits_with_its_generation_below_v9() -> None:
    shell = shell_with(topic_partitions=lambda t: 4 if t == "t" else None)
    a, _b = classic_pair(shell)
    hb(shell, "m1")
    rejoin(a)

    def commit_error(generation: int) -> int:
        resp = shell.answer(a.commit({("t", 0): 7}, version=8, generation=generation))
        return resp["topics"][0]["partitions"][0]["error_code"]

    assert commit_error(a.generation) == 0
    assert commit_error(a.generation - 1) == ILLEGAL_GENERATION


def test_getOrMaybeSubscribeStaticConsumerGroupMember_a_restarted_static_classic_member_takes_its_place() -> None:
    shell = shell_with()
    r = hb(shell, "m1")
    s1 = shell.client("s1", instance_id="i1")
    s1.join()
    s1.sync()
    converge(shell, [s1], {"m1": r["member_epoch"]})
    held, epoch = owned_by(s1), shell.coord.consumer.group("g").group_epoch
    assert len(held) == 2
    # the same instance restarts with no member id: it replaces the old member, keeps its partitions,
    # and nobody else moves (no new group epoch)
    s2 = shell.client("s2", instance_id="i1")
    s2.join()
    s2.sync()
    g = shell.coord.consumer.group("g")
    assert s2.member_id != s1.member_id and s1.member_id not in g.members
    assert owned_by(s2) == held and g.group_epoch == epoch
    assert s1.heartbeat() == 82  # FENCED_INSTANCE_ID: the old incarnation is fenced
    assert s2.heartbeat() == 0


def test_consumerGroupSessionTimeoutExpired_of_the_last_consumer_member_downgrades_the_group() -> None:
    shell = shell_with()
    a, b = classic_pair(shell)
    r = hb(shell, "m1")
    converge(shell, [a, b], {"m1": r["member_epoch"]})
    answers = []
    for _ in range(10):  # m1 goes silent; the classic members keep heartbeating
        shell.advance(5000)
        answers += [a.heartbeat(), b.heartbeat()]
    assert shell.coord.consumer.group("g") is None and shell.coord.group("g") is not None
    assert REBALANCE_IN_PROGRESS in answers  # the classic group's rebalance after the downgrade
    assert set(shell.group().members) == {a.member_id, b.member_id}


def test_upgrade_refused_when_a_custom_assignor_left_user_data_testOnlineMigrationWithNonEmptyUserDataInAssignment() -> (
    None
):
    shell = shell_with()
    c = shell.client("a")
    c.join()
    user_data = encode_assignment(Assignment((TopicPartitions("t", (0, 1, 2, 3)),), b"\x00"))
    c.sync({c.member_id: user_data})
    assert shell.state() == "Stable"
    r = hb(shell, "m1")
    assert r["error_code"] == GROUP_ID_NOT_FOUND
    assert r["error_message"].startswith("Cannot upgrade classic group g to consumer group because an unsupported")
    assert shell.state() == "Stable" and shell.coord.consumer.group("g") is None


def owned_m1_of(shell: Shell) -> set[int]:
    return set(shell.coord.consumer.group("g").members["m1"].assigned.get(T, ()))


def _static_hb(shell: Shell, member: str, instance: str, epoch: int = 0, owned: list[int] | None = None) -> dict:
    req = {**join_request(member), "group_id": "g", "instance_id": instance, "member_epoch": epoch}
    if epoch != 0:
        req.update(rebalance_timeout_ms=-1, subscribed_topic_names=None)
        req["topic_partitions"] = [{"topic_id": T, "partitions": owned or []}]
    return shell.answer(shell.send("ConsumerGroupHeartbeat", 1, req))


def test_validateOnlineDowngradeWithReplacedMemberId_a_classic_static_member_replaces_the_last_consumer_one() -> None:
    shell = shell_with()
    a, b = classic_pair(shell)
    r = _static_hb(shell, "m1", "i1")
    converge(shell, [a, b], {"m1": r["member_epoch"]})
    assert shell.coord.consumer.group("g").state.value == "Stable"
    held_by_m1 = owned_m1_of(shell)
    assert held_by_m1 and _static_hb(shell, "m1", "i1", -2)["error_code"] == 0  # static leave: m1 keeps its place
    # the same instance comes back as a classic consumer: it replaces m1 and the group is classic again
    s = shell.client("s", instance_id="i1")
    s.join()
    assert s.last_join["error_code"] == 0
    assert shell.coord.consumer.group("g") is None and shell.state() == "Stable"
    assert set(shell.group().members) == {a.member_id, b.member_id, s.member_id}
    s.sync()
    assert s.last_sync["error_code"] == 0 and owned_by(s) == held_by_m1
    assert a.heartbeat() == 0 and b.heartbeat() == 0  # nobody else moves: no rebalance


def test_maybeDeleteEmptyClassicGroup_a_group_with_only_pending_members_is_empty() -> None:
    shell = shell_with("disabled")
    c = shell.client("a", join_version=5)
    first = shell.answer(shell.send("JoinGroup", 5, c.join_request()))
    assert first["error_code"] == 79 and shell.state() == "Empty"  # only a pending member
    assert hb(shell, "m1")["error_code"] == 0  # the empty classic group makes way, whatever the policy
    assert shell.coord.group("g") is None and "m1" in shell.coord.consumer.group("g").members
