"""TxnOffsetCommit and end-transaction markers in the group coordinator (Kafka's
OffsetMetadataManager.commitTransactionalOffset / replay with a producer id / replayEndTransactionMarker,
ClassicGroup and ConsumerGroup.validateOffsetCommit with isTransactional, fetchOffsets with requireStable)."""

from __future__ import annotations

from typing import Any

import pytest
from groupd.coordinator import CoordinatorConfig, GroupState, Node
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from harness import Ctx, Shell
from test_offsets import DAY, WEEK, errors, fetch, offsets_of, standalone_commit
from test_rebalance import stable_group

PID = 4000
GROUP_PARTITION = 12  # "my-group" -> 12 (design principle 6)


def txn_commit(
    s: Shell,
    offsets: dict[tuple[str, int], int],
    *,
    group: str = "my-group",
    pid: int = PID,
    epoch: int = 0,
    version: int = 3,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "",
) -> Ctx:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 3, "committed_metadata": metadata}
        )
    req = {
        "transactional_id": "tx",
        "group_id": group,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    return s.send("TxnOffsetCommit", version, req)


def txn_errors(s: Shell, ctx: Ctx) -> dict[tuple[str, int], int]:
    resp = s.answer(ctx)
    assert resp is not None
    return errors(resp)


def marker(
    s: Shell, committed: bool, *, pid: int = PID, epoch: int = 0, partition: int = GROUP_PARTITION, coord_epoch: int = 0
) -> int | None:
    ctx = Ctx(0, "marker")
    s.absorb(s.coord.write_txn_marker(s.now, ctx, partition, pid, epoch, committed, coord_epoch))
    resp = s.answer(ctx)
    s.answers.pop(ctx, None)
    return None if resp is None else resp["error_code"]


def stable_fetch(s: Shell, group: str = "my-group", topics: dict[str, list[int]] | None = None) -> dict:
    req = {
        "group_id": group,
        "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        "require_stable": True,
    }
    resp = s.answer(s.send("OffsetFetch", 7, req))
    assert resp is not None
    return resp


def fetch_errors(resp: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def assert_reload_equal(s: Shell) -> None:
    fresh = s.reloaded()
    assert fresh.offsets == s.coord.offsets
    assert fresh.offset_manager.pending == s.coord.offset_manager.pending
    assert fresh.offset_manager.open_txns == s.coord.offset_manager.open_txns
    assert fresh.offset_manager.producers == s.coord.offset_manager.producers
    # A simple group whose only offsets were aborted is not rebuilt (Kafka's replay rebuilds it from
    # the aborted record, and its next retention check deletes it: empty, no offsets).
    gone = set(s.coord.groups) - set(fresh.groups)
    assert set(fresh.groups) <= set(s.coord.groups)
    for gid in gone:
        g = s.coord.groups[gid]
        assert g.is_in(GroupState.EMPTY) and gid not in s.coord.offsets and gid not in s.coord.group_records


# -- commitTransactionalOffset + replay with a producer id -----------------------------------------


def test_txn_commit_is_pending_until_the_commit_marker_replayEndTransactionMarker() -> None:
    s = Shell()
    assert txn_errors(s, txn_commit(s, {("t", 0): 10, ("t", 1): 20})) == {("t", 0): 0, ("t", 1): 0}
    # durable, in a transactional batch of the producer, in the group's partition
    batch = s.batches[-1]
    assert (batch.partition, batch.producer_id, batch.producer_epoch, batch.marker) == (GROUP_PARTITION, PID, 0, None)
    key, value = batch.records[0]
    assert key == OffsetCommitKey("my-group", "t", 0) and value.offset == 10 and value.leader_epoch == 3
    assert value.expire_timestamp == -1 and value.commit_timestamp == s.now
    # pending: not visible
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): -1, ("t", 1): -1}
    assert s.coord.group("my-group") is not None  # the simple group was created
    assert marker(s, True) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): 10, ("t", 1): 20}
    assert s.batches[-1].marker == (True, 0) and s.batches[-1].records == []
    assert not s.coord.offset_manager.pending and not s.coord.offset_manager.open_txns
    assert_reload_equal(s)


def test_abort_marker_drops_the_pending_offsets_and_keeps_the_committed_ones() -> None:
    s = Shell()
    standalone_commit(s, {("t", 0): 5}, group="my-group")
    txn_commit(s, {("t", 0): 10, ("t", 1): 20})
    assert marker(s, False) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): 5, ("t", 1): -1}
    assert not s.coord.offset_manager.pending
    # a later commit marker of the same producer finds nothing left
    assert marker(s, True) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): 5, ("t", 1): -1}
    assert_reload_equal(s)


def test_marker_ends_the_producer_transaction_only_in_its_own_partition() -> None:
    s = Shell()
    other = "polygenelubricants"  # partition 0
    txn_commit(s, {("t", 0): 10})
    txn_commit(s, {("t", 0): 11}, group=other)
    assert marker(s, True) == 0  # partition 12 only
    assert offsets_of(fetch(s, "my-group", {"t": [0]})) == {("t", 0): 10}
    assert offsets_of(fetch(s, other, {"t": [0]})) == {("t", 0): -1}
    assert marker(s, True, partition=0) == 0
    assert offsets_of(fetch(s, other, {"t": [0]})) == {("t", 0): 11}


def test_two_producers_pending_on_one_partition_each_ends_its_own() -> None:
    s = Shell()
    txn_commit(s, {("t", 0): 10}, pid=1)
    txn_commit(s, {("t", 1): 20}, pid=2)
    assert marker(s, False, pid=1) == 0
    assert marker(s, True, pid=2) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): -1, ("t", 1): 20}
    assert_reload_equal(s)


def test_a_later_plain_commit_wins_over_an_earlier_pending_offset_recordOffset() -> None:
    # replayEndTransactionMarker keeps "the most recent committed offset": the pending offset was
    # written before the plain commit, so its transaction's commit does not overwrite it.
    s = Shell()
    txn_commit(s, {("t", 0): 10, ("t", 1): 11})
    standalone_commit(s, {("t", 0): 99}, group="my-group")
    assert marker(s, True) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): 99, ("t", 1): 11}
    assert_reload_equal(s)


def test_a_pending_offset_written_after_a_plain_commit_wins_when_committed() -> None:
    s = Shell()
    standalone_commit(s, {("t", 0): 99}, group="my-group")
    txn_commit(s, {("t", 0): 10})
    assert marker(s, True) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0]})) == {("t", 0): 10}


def test_between_two_producers_the_later_written_pending_offset_wins() -> None:
    s = Shell()
    txn_commit(s, {("t", 0): 10}, pid=1)
    txn_commit(s, {("t", 0): 20}, pid=2)
    assert marker(s, True, pid=2) == 0
    assert marker(s, True, pid=1) == 0  # older than what pid 2 committed: skipped
    assert offsets_of(fetch(s, "my-group", {"t": [0]})) == {("t", 0): 20}
    assert_reload_equal(s)


def test_a_tombstone_removes_the_pending_offsets_of_its_partition() -> None:
    # OffsetMetadataManager.replay of a tombstone clears every open transaction of the partition.
    s = Shell()
    txn_commit(s, {("t", 0): 10, ("t", 1): 11})
    resp = s.answer(
        s.send(
            "OffsetDelete",
            0,
            {"group_id": "my-group", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
        )
    )
    assert resp["error_code"] == 0
    # a tombstone was written although nothing is committed there (hasPendingTransactionalOffsets)
    assert (OffsetCommitKey("my-group", "t", 0), None) in s.records()
    assert marker(s, True) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): -1, ("t", 1): 11}
    assert_reload_equal(s)


def test_commit_answered_only_when_durable_and_failed_write_leaves_nothing_pending() -> None:
    s = Shell(auto_append=False)
    ctx = txn_commit(s, {("t", 0): 10})
    assert s.answer(ctx) is None
    s.flush(error=56)
    assert txn_errors(s, ctx) == {("t", 0): 16}  # KAFKA_STORAGE_ERROR -> NOT_COORDINATOR
    assert not s.coord.offset_manager.pending


# -- validation (validateTransactionalOffsetCommit) ------------------------------------------------


def test_member_of_a_classic_group_commits_with_its_generation_validateOffsetCommit() -> None:
    s, (a, _b) = stable_group(2)
    ok = txn_commit(s, {("t", 0): 1}, group="g", generation=a.generation, member_id=a.member_id)
    assert txn_errors(s, ok) == {("t", 0): 0}
    stale = txn_commit(s, {("t", 0): 1}, group="g", generation=a.generation - 1, member_id=a.member_id)
    assert txn_errors(s, stale) == {("t", 0): 22}  # ILLEGAL_GENERATION
    unknown = txn_commit(s, {("t", 0): 1}, group="g", generation=a.generation, member_id="nobody")
    assert txn_errors(s, unknown) == {("t", 0): 25}  # UNKNOWN_MEMBER_ID
    # v0-2 carry no member fields: accepted even though the group is not Empty (isTransactional)
    assert txn_errors(s, txn_commit(s, {("t", 0): 1}, group="g", version=2)) == {("t", 0): 0}


def test_static_member_with_another_member_id_is_fenced() -> None:
    s, (a,) = stable_group(1, instance_id="i1")
    ctx = txn_commit(s, {("t", 0): 1}, group="g", generation=a.generation, member_id="old", instance_id="i1")
    assert txn_errors(s, ctx) == {("t", 0): 82}  # FENCED_INSTANCE_ID
    ok = txn_commit(s, {("t", 0): 1}, group="g", generation=a.generation, member_id=a.member_id, instance_id="i1")
    assert txn_errors(s, ok) == {("t", 0): 0}


def test_no_rebalance_in_progress_for_transactional_commits_in_completing_rebalance() -> None:
    s = Shell()
    c = s.client("c1", group="g")
    c.join()
    assert s.state("g") == "CompletingRebalance"
    ctx = txn_commit(s, {("t", 0): 1}, group="g", generation=c.generation, member_id=c.member_id)
    assert txn_errors(s, ctx) == {("t", 0): 0}
    # OffsetCommit answers REBALANCE_IN_PROGRESS there
    assert errors(s.answer(c.commit({("t", 0): 1}))) == {("t", 0): 27}


def test_unknown_group_with_a_generation_is_illegal_generation_at_every_version() -> None:
    s = Shell()
    for v in range(3, 6):
        ctx = txn_commit(s, {("t", 0): 1}, group="nope", generation=1, member_id="m", version=v)
        assert txn_errors(s, ctx) == {("t", 0): 22}
    assert s.coord.group("nope") is None


def test_empty_group_id_is_invalid_group_id_commitTransactionalOffsets() -> None:
    s = Shell()
    assert txn_errors(s, txn_commit(s, {("t", 0): 1}, group="")) == {("t", 0): 24}
    # OffsetCommit accepts "" (GroupCoordinatorService.commitOffsets)
    assert errors(standalone_commit(s, {("t", 0): 1}, group="")) == {("t", 0): 0}


def test_unknown_topics_answered_before_the_coordinator_handleTxnOffsetCommitRequest() -> None:
    s = Shell(topic_partitions=lambda t: 2 if t == "t" else None)
    ctx = txn_commit(s, {("t", 0): 1, ("t", 5): 1, ("gone", 0): 1})
    assert txn_errors(s, ctx) == {("t", 0): 0, ("t", 5): 3, ("gone", 0): 3}
    # nothing known: no group is created, nothing written
    before = len(s.batches)
    assert txn_errors(s, txn_commit(s, {("gone", 0): 1}, group="other")) == {("gone", 0): 3}
    assert s.coord.group("other") is None and len(s.batches) == before


def test_metadata_too_large_per_partition() -> None:
    s = Shell(config=CoordinatorConfig(offset_metadata_max_bytes=4))
    ctx = txn_commit(s, {("t", 0): 1}, metadata="12345")
    assert txn_errors(s, ctx) == {("t", 0): 12}
    assert txn_errors(s, txn_commit(s, {("t", 0): 1}, metadata="1234")) == {("t", 0): 0}


def test_routing_errors_as_the_other_group_apis() -> None:
    s = Shell()
    s.coord.begin_load(GROUP_PARTITION)
    assert txn_errors(s, txn_commit(s, {("t", 0): 1})) == {("t", 0): 14}  # COORDINATOR_LOAD_IN_PROGRESS
    assert marker(s, True) == 14
    s.end_load(GROUP_PARTITION)
    assert txn_errors(s, txn_commit(s, {("t", 0): 1})) == {("t", 0): 0}


def test_not_owned_partition_is_not_coordinator() -> None:
    s = Shell()
    s.coord.ownership.assign(GROUP_PARTITION, Node(7, "elsewhere", 9092))
    assert txn_errors(s, txn_commit(s, {("t", 0): 1})) == {("t", 0): 16}
    # the shared core writes markers for any partition a broker of this process leads; between a
    # resignation and the next election nobody does
    s.coord.ownership.assign(GROUP_PARTITION, None)
    assert marker(s, True) == 16


def test_zombie_producer_with_an_older_epoch_is_fenced_checkProducerEpoch() -> None:
    s = Shell()
    assert txn_errors(s, txn_commit(s, {("t", 0): 1}, epoch=3)) == {("t", 0): 0}
    # the coordinator fences epoch 3 with an abort marker at epoch 4
    assert marker(s, False, epoch=4) == 0
    assert txn_errors(s, txn_commit(s, {("t", 0): 2}, epoch=3)) == {("t", 0): 47}  # INVALID_PRODUCER_EPOCH
    assert not s.coord.offset_manager.pending
    assert marker(s, True, epoch=3) == 47
    assert marker(s, True, epoch=4) == 0
    assert_reload_equal(s)


def test_marker_from_an_older_coordinator_epoch_is_fenced() -> None:
    s = Shell()
    assert marker(s, False, coord_epoch=7) == 0
    assert marker(s, True, coord_epoch=6) == 52  # TRANSACTION_COORDINATOR_FENCED
    assert marker(s, True, coord_epoch=7) == 0


def test_consumer_group_member_epoch_checked_stale_is_illegal_generation() -> None:
    from test_consumer_group_coordinator import IMAGE, hb

    s = Shell(topics_image=lambda: IMAGE, topic_partitions=lambda t: 4 if t == "t" else None)
    epoch = hb(s, "m1")["member_epoch"]
    ok = txn_commit(s, {("t", 0): 5}, group="cg", generation=epoch, member_id="m1", version=3)
    assert txn_errors(s, ok) == {("t", 0): 0}  # no v9 requirement for transactional commits
    stale = txn_commit(s, {("t", 0): 5}, group="cg", generation=epoch + 1, member_id="m1")
    assert txn_errors(s, stale) == {("t", 0): 22}  # STALE_MEMBER_EPOCH -> ILLEGAL_GENERATION
    unknown = txn_commit(s, {("t", 0): 5}, group="cg", generation=epoch, member_id="m2")
    assert txn_errors(s, unknown) == {("t", 0): 25}
    p = s.coord.partition_for("cg")
    assert marker(s, True, partition=p) == 0
    assert offsets_of(fetch(s, "cg", {"t": [0]})) == {("t", 0): 5}


@pytest.mark.parametrize("version", [0, 2, 3, 5])
def test_consumer_group_takes_a_commit_that_names_only_the_group_validateOffsetCommit(version: int) -> None:
    """TxnOffsetCommit v0-2, and v3+ from a producer given only the group id
    (``consumer_group_metadata_new``), carry no member: ConsumerGroup.validateOffsetCommit skips
    the member checks for a transactional commit with generation -1, no member id, no instance id."""
    from test_consumer_group_coordinator import IMAGE, hb

    s = Shell(topics_image=lambda: IMAGE, topic_partitions=lambda t: 4 if t == "t" else None)
    hb(s, "m1")  # the group has a member
    ok = txn_commit(s, {("t", 0): 7}, group="cg", version=version)
    assert txn_errors(s, ok) == {("t", 0): 0}
    # naming anything at all is checked as before
    static = txn_commit(s, {("t", 0): 7}, group="cg", instance_id="i", version=max(version, 3))
    assert txn_errors(s, static) == {("t", 0): 25}  # UNKNOWN_MEMBER_ID
    assert marker(s, True, partition=s.coord.partition_for("cg")) == 0
    assert offsets_of(fetch(s, "cg", {"t": [0]})) == {("t", 0): 7}


# -- fetchOffsets with requireStable -----------------------------------------------------------------


def test_require_stable_answers_unstable_offset_commit_for_pending_partitions_fetchOffsets() -> None:
    s = Shell()
    standalone_commit(s, {("t", 0): 5, ("t", 1): 6}, group="my-group")
    txn_commit(s, {("t", 0): 10})
    resp = stable_fetch(s, topics={"t": [0, 1, 2]})
    assert resp["error_code"] == 0
    assert fetch_errors(resp) == {("t", 0): 88, ("t", 1): 0, ("t", 2): 0}
    assert offsets_of(resp) == {("t", 0): -1, ("t", 1): 6, ("t", 2): -1}
    # fetchAllOffsets: committed partitions only, the pending one unstable
    assert fetch_errors(stable_fetch(s)) == {("t", 0): 88, ("t", 1): 0}
    # without require_stable the last committed offset
    assert offsets_of(fetch(s, "my-group", {"t": [0]})) == {("t", 0): 5}
    assert marker(s, True) == 0
    assert fetch_errors(stable_fetch(s, topics={"t": [0]})) == {("t", 0): 0}
    assert offsets_of(stable_fetch(s, topics={"t": [0]})) == {("t", 0): 10}


def test_require_stable_in_the_v8_batched_form() -> None:
    s = Shell()
    txn_commit(s, {("t", 0): 10})
    req = {"groups": [{"group_id": "my-group", "topics": [{"name": "t", "partition_indexes": [0]}]}]}
    resp = s.answer(s.send("OffsetFetch", 8, {**req, "require_stable": True}))
    (group,) = resp["groups"]
    assert group["error_code"] == 0 and group["topics"][0]["partitions"][0]["error_code"] == 88
    resp = s.answer(s.send("OffsetFetch", 8, {**req, "require_stable": False}))
    assert resp["groups"][0]["topics"][0]["partitions"][0]["error_code"] == 0


# -- groups: expiry, deletion ----------------------------------------------------------------------


def test_group_with_pending_offsets_is_not_deleted_by_retention_cleanupExpiredOffsets() -> None:
    s = Shell()
    standalone_commit(s, {("t", 1): 1}, group="my-group")
    txn_commit(s, {("t", 0): 10})
    s.advance(WEEK + DAY)
    # the committed offset of another partition expired; the group stays for its open transaction
    assert s.coord.group("my-group") is not None
    assert offsets_of(fetch(s, "my-group", {"t": [0, 1]})) == {("t", 0): -1, ("t", 1): -1}
    assert marker(s, True) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [0]})) == {("t", 0): 10}


def test_committed_offset_with_a_pending_one_on_its_partition_does_not_expire() -> None:
    s = Shell()
    standalone_commit(s, {("t", 0): 1}, group="my-group")
    txn_commit(s, {("t", 0): 10})
    s.advance(WEEK + DAY)
    assert offsets_of(fetch(s, "my-group", {"t": [0]})) == {("t", 0): 1}
    assert marker(s, False) == 0
    s.advance(WEEK + DAY)
    assert s.coord.group("my-group") is None and not s.coord.offsets


def test_delete_groups_tombstones_pending_partitions_deleteAllOffsets() -> None:
    s = Shell()
    txn_commit(s, {("t", 0): 10})
    resp = s.answer(s.send("DeleteGroups", 2, {"groups_names": ["my-group"]}))
    assert resp["results"] == [{"group_id": "my-group", "error_code": 0}]
    assert (OffsetCommitKey("my-group", "t", 0), None) in s.records()
    assert (GroupMetadataKey("my-group"), None) in s.records()
    assert marker(s, True) == 0
    assert not s.coord.offsets and s.coord.group("my-group") is None
    assert_reload_equal(s)


def test_deleted_topic_removes_pending_offsets_onTopicsDeleted() -> None:
    s = Shell()
    txn_commit(s, {("t", 0): 10, ("u", 0): 3})
    s.absorb(s.coord.on_partitions_deleted(s.now, [("t", 0)]))
    assert (OffsetCommitKey("my-group", "t", 0), None) in s.records()
    assert marker(s, True) == 0
    assert s.coord.offsets == {"my-group": {("u", 0): OffsetCommitValue(3, 3, "", 0)}}


# -- load ------------------------------------------------------------------------------------------


def test_reload_keeps_pending_pending_committed_committed_aborted_gone() -> None:
    s = Shell()
    txn_commit(s, {("t", 0): 10}, pid=1)
    marker(s, True, pid=1)
    txn_commit(s, {("t", 1): 20}, pid=2)
    marker(s, False, pid=2)
    txn_commit(s, {("t", 2): 30}, pid=3)  # open at the crash
    fresh = s.reloaded()
    assert fresh.offsets == {"my-group": {("t", 0): OffsetCommitValue(10, 3, "", 0)}}
    assert set(fresh.offset_manager.open_txns["my-group"]) == {("t", 2)}
    assert fresh.group("my-group") is not None
    assert_reload_equal(s)
    # the coordinator re-sends the marker after its own load
    s.coord = fresh
    assert marker(s, True, pid=3) == 0
    assert offsets_of(fetch(s, "my-group", {"t": [2]})) == {("t", 2): 30}


def test_group_with_only_pending_offsets_comes_back_after_a_reload() -> None:
    s = Shell()
    txn_commit(s, {("t", 0): 10}, group="solo")
    p = s.coord.partition_for("solo")
    s.coord.begin_load(p)
    assert s.coord.group("solo") is None and not s.coord.offset_manager.pending
    s.end_load(p)
    assert s.coord.group("solo") is not None
    assert marker(s, True, partition=p) == 0
    assert offsets_of(fetch(s, "solo", {"t": [0]})) == {("t", 0): 10}


# -- KIP-890 verification (maybeStartTransactionVerification) ----------------------------------------


def test_the_transaction_coordinator_verifies_the_offsets_partition_is_in_the_transaction() -> None:
    s = Shell()
    asked: list[tuple[str, int, int, str, int]] = []
    answer = {"code": 0}

    def verifier(txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> int:
        asked.append((txn_id, pid, epoch, topic, partition))
        return answer["code"]

    s.coord.txn_verifier = verifier
    assert txn_errors(s, txn_commit(s, {("t", 0): 1}, epoch=2)) == {("t", 0): 0}
    assert asked == [("tx", PID, 2, "__consumer_offsets", GROUP_PARTITION)]
    for code, version, expected in [
        (90, 5, 47),  # PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH (AddPartitionsToTxnManager)
        (120, 4, 120),  # TRANSACTION_ABORTABLE from v4
        (120, 3, 48),  # ... INVALID_TXN_STATE before (TransactionSupportedOperation.DEFAULT_ERROR)
        (13, 5, 14),  # NETWORK_EXCEPTION -> COORDINATOR_LOAD_IN_PROGRESS (handleOperationException)
        (7, 5, 15),  # REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE
        (48, 5, 48),
    ]:
        answer["code"] = code
        ctx = txn_commit(s, {("t", 1): 1}, version=version, epoch=2)
        assert txn_errors(s, ctx) == {("t", 1): expected}, (code, version)
    # nothing unverified was written
    assert set(s.coord.offset_manager.open_txns["my-group"]) == {("t", 0)}
