"""KIP-848 consumer groups, sans-IO: scenarios from GroupMetadataManager.consumerGroupHeartbeat (fake clock)."""

from __future__ import annotations

from consumer_harness import GROUP, Shell, image, topic_id
from groupd.coordinator.consumer import ConsumerGroupState, MemberState
from groupd.coordinator.consumer import records as cr

T = topic_id("t")


def settle(clients, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in clients:
            c.heartbeat()
            c.shell.advance(0)  # what the shell does: fire what is due now (a regex refresh)


def covered_once(clients, n: int) -> bool:
    seen = [p for c in clients for p in c.owned.get(T, ())]
    return sorted(seen) == list(range(n))


def test_three_members_cover_every_partition_once_uniform_two_each() -> None:
    shell = Shell()
    a, b, c = (shell.client(x) for x in "abc")
    settle([a, b, c])
    assert covered_once([a, b, c], 6)
    assert [len(x.owned[T]) for x in (a, b, c)] == [2, 2, 2]
    g = shell.group()
    assert g.state == ConsumerGroupState.STABLE
    assert g.group_epoch == g.target_epoch == 3 and {x.epoch for x in (a, b, c)} == {3}


def test_partition_moves_only_after_its_owner_revoked_it_CurrentAssignmentBuilder() -> None:
    shell = Shell()
    a = shell.client("a")
    a.heartbeat()
    assert a.owned[T] == frozenset(range(6)) and a.epoch == 1
    b = shell.client("b")
    rb = b.heartbeat()
    # b moves to epoch 2 but gets nothing: a still holds what b's target has (UNRELEASED_PARTITIONS)
    assert rb["member_epoch"] == 2 and rb["assignment"]["topic_partitions"] == []
    assert shell.group().members["b"].state == MemberState.UNRELEASED_PARTITIONS
    ra = a.heartbeat()
    # a is asked to give up 3 partitions and stays at epoch 1 until it confirms (UNREVOKED_PARTITIONS)
    assert ra["member_epoch"] == 1 and len(a.owned[T]) == 3
    assert shell.group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert b.heartbeat()["assignment"] is None  # still nothing free
    a.heartbeat()  # a's owned list no longer has them: revoked
    assert a.epoch == 2 and shell.group().members["a"].state == MemberState.STABLE
    b.heartbeat()
    assert covered_once([a, b], 6) and len(b.owned[T]) == 3
    assert shell.group().state == ConsumerGroupState.STABLE


def test_stale_and_future_epochs_are_fenced_throwIfMemberEpochIsInvalid() -> None:
    shell = Shell()
    a = shell.client("a")
    a.heartbeat()
    assert a.heartbeat(member_epoch=5)["error_code"] == 110  # FENCED_MEMBER_EPOCH
    b = shell.client("b")
    settle([a, b])
    assert a.epoch == 2
    # the previous epoch is accepted when the member owns nothing beyond its assignment (lost response)
    assert a.heartbeat(member_epoch=1)["error_code"] == 0
    # ... but not when it claims partitions it does not have
    everything = [{"topic_id": T, "partitions": [0, 1, 2, 3, 4, 5]}]
    assert a.heartbeat(member_epoch=1, topic_partitions=everything)["error_code"] == 110
    assert shell.client("zz").heartbeat(member_epoch=3)["error_code"] == 25  # UNKNOWN_MEMBER_ID


def test_unknown_group_and_invalid_requests() -> None:
    shell = Shell()
    a = shell.client("a")
    assert a.heartbeat(member_epoch=1)["error_code"] == 69  # GROUP_ID_NOT_FOUND
    assert a.heartbeat(rebalance_timeout_ms=-1)["error_code"] == 42
    assert a.heartbeat(topic_partitions=None)["error_code"] == 42
    assert a.heartbeat(member_epoch=-3)["error_code"] == 42
    assert a.heartbeat(member_id="")["error_code"] == 42
    assert a.heartbeat(server_assignor="sticky")["error_code"] == 112  # UNSUPPORTED_ASSIGNOR
    r = a.heartbeat(subscribed_topic_regex="(?=x).*")  # look-ahead: fine in Python's re, not in RE2/J
    assert r["error_code"] == 128 and "not a valid regular expression" in r["error_message"]
    assert shell.group() is None and shell.log == []


def test_leave_gives_partitions_to_the_others_consumerGroupLeave() -> None:
    shell = Shell()
    a, b = shell.client("a"), shell.client("b")
    settle([a, b])
    assert a.leave()["member_epoch"] == -1
    settle([b])
    assert b.owned[T] == frozenset(range(6))
    assert set(shell.group().members) == {"b"}


def test_session_expiry_fences_a_silent_member() -> None:
    shell = Shell()
    a, b = shell.client("a"), shell.client("b")
    settle([a, b])
    for _ in range(10):
        shell.advance(5000)
        b.heartbeat()
    assert set(shell.group().members) == {"b"} and b.owned[T] == frozenset(range(6))
    assert a.heartbeat()["error_code"] == 25  # UNKNOWN_MEMBER_ID: rejoin at epoch 0


def test_revocation_deadline_fences_a_member_that_does_not_revoke() -> None:
    shell = Shell()
    a = shell.client("a")
    a.heartbeat()
    b = shell.client("b")
    b.heartbeat()
    a.heartbeat()  # asked to revoke
    assert shell.group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    for _ in range(7):  # a keeps heartbeating but never lets go: still owns everything
        shell.advance(5000)
        a.heartbeat(topic_partitions=[{"topic_id": T, "partitions": list(range(6))}])
        b.heartbeat()
    assert "a" not in shell.group().members  # 30 s rebalance timeout
    settle([b])
    assert b.owned[T] == frozenset(range(6))


def test_static_member_rejoins_within_session_with_its_partitions_replaceStaticMember() -> None:
    shell = Shell()
    a = shell.client("a", instance_id="ia")
    b = shell.client("b", instance_id="ib")
    settle([a, b])
    before = dict(a.owned)
    assert a.leave(epoch=-2)["member_epoch"] == -2
    epoch = shell.group().group_epoch
    a2 = shell.client("a2", instance_id="ia")
    assert shell.client("a3", instance_id="ib").heartbeat()["error_code"] == 111  # UNRELEASED_INSTANCE_ID
    a2.heartbeat()
    assert a2.owned == before and shell.group().group_epoch == epoch
    assert set(shell.group().members) == {"a2", "b"}


def test_partition_growth_rebalances_on_next_heartbeat() -> None:
    shell = Shell()
    a, b = shell.client("a"), shell.client("b")
    settle([a, b])
    shell.set_topics(image(2, t=10))
    settle([a, b])
    assert covered_once([a, b], 10)


def test_regex_subscription_picks_up_a_topic_created_later() -> None:
    shell = Shell(topics=image(1, t=2, other=1))
    a = shell.client("a", topics=None, regex="t.*")
    settle([a])
    assert a.owned == {T: frozenset({0, 1})}
    shell.advance(10001)  # past the batching interval (maybeUpdateRegularExpressions)
    shell.set_topics(image(2, t=2, other=1, t2=3))
    settle([a])
    assert a.owned == {T: frozenset({0, 1}), topic_id("t2"): frozenset({0, 1, 2})}
    assert GROUP in shell.mgr.groups.groups


def regex_refreshes(shell: Shell) -> int:
    return sum(1 for k, v in shell.log if isinstance(k, cr.ConsumerGroupRegularExpressionKey) and v is not None)


def test_regex_resolution_is_batched_maybeUpdateRegularExpressions_REGEX_BATCH_REFRESH_INTERVAL() -> None:
    shell = Shell(topics=image(1, t=2, other=1))
    a = shell.client("a", topics=None, regex="t.*")
    r = a.heartbeat()
    # not resolved in the heartbeat: a refresh is due at once, outside it (Kafka's executor)
    assert r["assignment"] == {"topic_partitions": []} and regex_refreshes(shell) == 0
    assert shell.mgr.next_deadline() == shell.now
    epoch = shell.group().group_epoch
    shell.advance(0)
    assert regex_refreshes(shell) == 1 and shell.group().group_epoch == epoch + 1  # one bump for the batch
    settle([a])
    assert a.owned == {T: frozenset({0, 1})}
    # a topic created 1 s later: nothing until 10 s after the last resolution
    shell.advance(1000)
    shell.set_topics(image(2, t=2, other=1, t2=3))
    for _ in range(9):
        settle([a], rounds=1)
        shell.advance(1000)
    assert regex_refreshes(shell) == 1 and topic_id("t2") not in a.owned
    shell.advance(1)
    settle([a])
    assert regex_refreshes(shell) == 2 and topic_id("t2") in a.owned
    # a second member with a regex new to the group within the interval: it waits for the next batch
    b = shell.client("b", topics=None, regex="o.*")
    settle([a, b])
    assert regex_refreshes(shell) == 2 and b.owned == {}
    shell.advance(10001)
    settle([a, b])
    assert regex_refreshes(shell) == 2 + 2  # both regexes written by one refresh
    assert b.owned == {topic_id("other"): frozenset({0})}
    # no new topic since (only partitions added): no resolution, however long it has been
    shell.advance(20000)
    shell.set_topics(image(3, t=3, other=1, t2=3))
    settle([a, b])
    assert regex_refreshes(shell) == 4 and a.owned[T] == frozenset({0, 1, 2})


def test_recovered_state_equals_state_before() -> None:
    shell = Shell()
    a, b, c = (shell.client(x) for x in "abc")
    settle([a, b, c])
    a.leave()
    settle([b, c])
    assert shell.recovered().get(GROUP).persisted() == shell.group().persisted()


def test_v0_join_without_member_id_gets_one_v1_must_bring_its_own() -> None:
    shell = Shell()
    a = shell.client("")
    req = {
        "group_id": GROUP,
        "member_id": "",
        "member_epoch": 0,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    }
    assert shell.mgr.heartbeat(0, req, version=1).response["error_code"] == 42
    r = shell.mgr.heartbeat(0, req, version=0).response
    assert r["error_code"] == 0 and r["member_id"] and r["member_epoch"] == 1
    assert a.heartbeat(member_id="  ")["error_code"] == 42  # blank counts as empty (throwIfEmptyString)


def test_full_group_refuses_new_members_only_throwIfConsumerGroupIsFull() -> None:
    from groupd.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupManager

    shell = Shell()
    shell.mgr = ConsumerGroupManager(ConsumerGroupConfig(max_size=1), topics=shell.topics)
    a, b = shell.client("a"), shell.client("b")
    a.heartbeat()
    assert b.heartbeat()["error_code"] == 81  # GROUP_MAX_SIZE_REACHED
    assert a.heartbeat()["error_code"] == 0


def test_member_joining_with_no_topics_does_not_bump_the_epoch_hasMemberSubscriptionChanged() -> None:
    shell = Shell()
    a = shell.client("a")
    a.heartbeat()
    idle = shell.client("idle", topics=[])
    assert idle.heartbeat()["member_epoch"] == 1 and shell.group().group_epoch == 1
    assert idle.owned == {}


def test_a_refused_record_leaves_the_group_as_it_was_addPartitionEpochs() -> None:
    import pytest
    from groupd.coordinator.consumer import IllegalRecord
    from groupd.coordinator.consumer import records as cr

    shell = Shell()
    a, b = shell.client("a"), shell.client("b")
    settle([a, b])
    before = shell.group().persisted()
    # b keeps its partitions and claims one of a's: refused whole, b's own epochs untouched
    claim = tuple(sorted(b.owned[T] | {min(a.owned[T])}))
    record = (
        cr.ConsumerGroupCurrentMemberAssignmentKey(GROUP, "b"),
        cr.ConsumerGroupCurrentMemberAssignmentValue(9, b.epoch, 0, ((T, claim),), ()),
    )
    with pytest.raises(IllegalRecord):
        shell.mgr.replay(record)
    assert shell.group().persisted() == before


def test_a_groups_own_session_timeout_and_heartbeat_interval_consumerGroupSessionTimeoutMs() -> None:
    """Kafka's GroupConfigManager: a group's consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    override the broker's (45 s / 5 s here) from each member's next heartbeat; other groups keep the broker's."""
    shell = Shell()
    a, b = shell.client("a"), shell.client("b")
    settle([a, b])
    assert b.heartbeat()["heartbeat_interval_ms"] == 5000
    shell.mgr.set_group_config(GROUP, session_timeout_ms=10000, heartbeat_interval_ms=2000)
    assert b.heartbeat()["heartbeat_interval_ms"] == 2000
    a.heartbeat()  # its next session deadline is the group's 10 s
    shell.advance(9000)
    b.heartbeat()
    shell.advance(1001)  # 45 s at the broker's: a would still be in the group
    b.heartbeat()
    assert set(shell.group().members) == {"b"} and b.owned[T] == frozenset(range(6))
    other = shell.client("c")
    assert other.heartbeat(group_id="other")["heartbeat_interval_ms"] == 5000


def test_a_group_config_with_only_one_setting_keeps_the_brokers_other_and_removing_it_restores_both() -> None:
    shell = Shell()
    a = shell.client("a")
    settle([a])
    shell.mgr.set_group_config(GROUP, heartbeat_interval_ms=7000)
    assert a.heartbeat()["heartbeat_interval_ms"] == 7000
    shell.advance(44000)
    assert a.heartbeat()["error_code"] == 0  # session: still the broker's 45 s
    shell.mgr.set_group_config(GROUP)
    assert a.heartbeat()["heartbeat_interval_ms"] == 5000


def test_a_classic_member_keeps_its_own_session_timeout_under_a_group_config() -> None:
    """classicProtocolSessionTimeout: a classic member of a consumer group keeps its JoinGroup's."""
    from groupd.coordinator.consumer.member import ConsumerGroupMember

    mgr = Shell().mgr
    mgr.set_group_config(GROUP, session_timeout_ms=50000)
    classic = ConsumerGroupMember(
        member_id="m", classic=cr.ClassicMemberMetadata(6000, (cr.ClassicProtocol("range", b""),))
    )
    plain = ConsumerGroupMember(member_id="n")
    assert (mgr.session_timeout(GROUP, classic), mgr.session_timeout(GROUP, plain)) == (6000, 50000)
