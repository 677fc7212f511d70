"""Unit tests of the KIP-932 delivery cores: ``SharePartition`` (Kafka's core ``SharePartition``),
``ShareSessionCache`` (``ShareSessionCache`` / ``SharePartitionManager.newContext``) and
``ShareStateStore`` (``ShareCoordinatorShard``, the ShareSnapshot / ShareUpdate records)."""

from __future__ import annotations

import struct
import uuid

import pytest
from groupd.coordinator.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    AckBatch,
    BatchInfo,
    SharePartition,
    SharePartitionConfig,
    SharePartitionKey,
    ShareSessionCache,
    ShareStateStore,
    StateBatch,
    decode_record,
    encode_record,
    share_state_partition,
)
from groupd.coordinator.share_partition.partition import AckError
from groupd.coordinator.share_partition.sessions import SessionError, next_epoch
from groupd.protocol.errors import ErrorCode
from groupd.protocol.messages.share_records import SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE
from groupd.protocol.partitioning import coordinator_partition

LOCK = 1000
TID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def _sp(limit: int = 5, max_in_flight: int = 2000, start: int = 0) -> SharePartition:
    return SharePartition(SharePartitionConfig(delivery_count_limit=limit, max_in_flight=max_in_flight), start)


def _batches(*spans: tuple[int, int]) -> list[BatchInfo]:
    return [BatchInfo(a, b) for a, b in spans]


# --- SharePartition ----------------------------------------------------------------------------------
def test_acquire_whole_batches_past_max_records_as_kafkas_batch_optimized_mode() -> None:
    sp = _sp()
    got = sp.acquire("m", 0, LOCK, _batches((0, 4), (5, 9), (10, 14)), max_records=7)
    # the second batch is finished although it passes 7; the third is not started
    assert [tuple(r) for r in got] == [(0, 9, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 10)


def test_in_flight_limit_stops_new_batches() -> None:
    sp = _sp(max_in_flight=6)
    assert [tuple(r) for r in sp.acquire("m", 0, LOCK, _batches((0, 3), (4, 7), (8, 9)), 100)] == [(0, 7, 1)]
    assert sp.acquire("n", 0, LOCK, _batches((8, 9)), 100) == []
    sp.acknowledge("m", [AckBatch(0, 3, [ACCEPT])])
    assert (sp.start_offset, sp.end_offset) == (4, 8)
    assert [tuple(r) for r in sp.acquire("n", 0, LOCK, _batches((8, 9)), 100)] == [(8, 9, 1)]


def test_accept_reject_release_and_the_start_offset() -> None:
    sp = _sp()
    sp.acquire("m", 0, LOCK, _batches((0, 3)), 10)
    changed = sp.acknowledge("m", [AckBatch(0, 3, [ACCEPT, REJECT, RELEASE, ACCEPT])])
    assert changed == [
        StateBatch(0, 0, ACKNOWLEDGED, 1),
        StateBatch(1, 1, ARCHIVED, 1),
        StateBatch(2, 2, AVAILABLE, 1),
        StateBatch(3, 3, ACKNOWLEDGED, 1),
    ]
    assert sp.start_offset == 2 and sp.next_fetch_offset() == 2
    assert [tuple(r) for r in sp.acquire("n", 5, LOCK, _batches((0, 3)), 10)] == [(2, 2, 2)]


def test_acknowledging_what_another_member_holds_is_invalid_record_state_and_changes_nothing() -> None:
    sp = _sp()
    sp.acquire("m", 0, LOCK, _batches((0, 1)), 10)
    with pytest.raises(AckError) as e:
        sp.acknowledge("n", [AckBatch(0, 1, [ACCEPT])])
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    # all or nothing: the first batch of a refused request is not applied either
    sp.acquire("n", 0, LOCK, _batches((2, 2)), 10)
    with pytest.raises(AckError):
        sp.acknowledge("n", [AckBatch(2, 2, [ACCEPT]), AckBatch(0, 0, [ACCEPT])])
    assert sp.record(2) == (ACQUIRED, 1, "n")


def test_acknowledging_past_the_acquired_records_is_invalid_request() -> None:
    sp = _sp()
    with pytest.raises(AckError) as e:
        sp.acknowledge("m", [AckBatch(0, 0, [ACCEPT])])
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE  # nothing cached at all
    sp.acquire("m", 0, LOCK, _batches((0, 1)), 10)
    for batch in (AckBatch(5, 6, [ACCEPT]), AckBatch(1, 3, [ACCEPT])):
        with pytest.raises(AckError) as e:
            sp.acknowledge("m", [batch])
        assert e.value.code == ErrorCode.INVALID_REQUEST


def test_lock_expiry_and_the_delivery_count_limit() -> None:
    sp = _sp(limit=2)
    assert [tuple(r) for r in sp.acquire("m", 0, LOCK, _batches((0, 0)), 10)] == [(0, 0, 1)]
    assert sp.next_deadline() == LOCK
    assert sp.expire_locks(LOCK - 1) == []
    assert sp.expire_locks(LOCK) == [StateBatch(0, 0, AVAILABLE, 1)]
    assert [tuple(r) for r in sp.acquire("n", 2000, LOCK, _batches((0, 0)), 10)] == [(0, 0, 2)]
    # the second expiry reaches the limit: archived, the start moves past it
    assert sp.expire_locks(3000) == [StateBatch(0, 0, ARCHIVED, 2)]
    assert sp.start_offset == 1 and sp.acquire("n", 3000, LOCK, _batches((0, 0)), 10) == []


def test_a_record_that_keeps_coming_back_is_delivered_alone() -> None:
    # throttleRecordsDeliveryLimit: ceil(5 / 2) = 3
    sp = _sp(limit=5)
    now = 0
    for _ in range(3):
        sp.acquire("m", now, LOCK, _batches((0, 4)), 10)
        now += LOCK
        sp.expire_locks(now)
    got = sp.acquire("m", now, LOCK, _batches((0, 4)), 10)
    assert [tuple(r) for r in got] == [(0, 0, 4)]
    got = sp.acquire("n", now, LOCK, _batches((0, 4)), 10)
    assert [tuple(r) for r in got] == [(1, 1, 4)]


def test_release_member_keeps_the_delivery_count() -> None:
    sp = _sp()
    sp.acquire("m", 0, LOCK, _batches((0, 2)), 10)
    sp.acquire("n", 0, LOCK, _batches((3, 3)), 10)
    assert sp.release_member("m") == [StateBatch(0, 2, AVAILABLE, 1)]
    assert sp.record(3) == (ACQUIRED, 1, "n")
    assert [tuple(r) for r in sp.acquire("n", 0, LOCK, _batches((0, 3)), 10)] == [(0, 2, 2)]


def test_control_and_aborted_batches_are_archived_never_handed_out() -> None:
    sp = _sp()
    got = sp.acquire("m", 0, LOCK, [BatchInfo(0, 1, True), BatchInfo(2, 3), BatchInfo(4, 4, True)], 10)
    assert [tuple(r) for r in got] == [(2, 3, 1)]
    assert sp.start_offset == 2 and sp.end_offset == 5
    # a GAP acknowledgement over an offset groupd archived itself is accepted
    sp.acknowledge("m", [AckBatch(2, 4, [ACCEPT, ACCEPT, GAP])])
    assert sp.start_offset == 5


def test_offsets_missing_from_the_log_are_archived() -> None:
    sp = _sp()
    got = sp.acquire("m", 0, LOCK, _batches((3, 4)), 10, read_offset=0)
    assert [tuple(r) for r in got] == [(3, 4, 1)]
    assert sp.record(0) is None and sp.start_offset == 3


def test_restore_from_persisted_state() -> None:
    sp = SharePartition(
        SharePartitionConfig(),
        5,
        [StateBatch(5, 6, ACKNOWLEDGED, 1), StateBatch(7, 7, AVAILABLE, 2), StateBatch(10, 10, ARCHIVED, 1)],
    )
    # 5-6 done, 7 available with its count, 8-9 unwritten (were acquired): available, never delivered
    assert sp.start_offset == 7 and sp.end_offset == 11
    got = sp.acquire("m", 0, LOCK, _batches((5, 9), (10, 12)), 100, read_offset=7)
    assert [tuple(r) for r in got] == [(7, 7, 3), (8, 9, 1), (11, 12, 1)]


# --- sessions ------------------------------------------------------------------------------------------
def test_share_session_epochs() -> None:
    cache = ShareSessionCache(max_sessions=2)
    key = ("g", "m")
    s, parts = cache.fetch_context(key, 0, [(TID, 0)], [], False)
    assert s.epoch == 1 and parts == [(TID, 0)]
    with pytest.raises(SessionError) as e:
        cache.fetch_context(key, 2, [], [], False)
    assert e.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    s, parts = cache.fetch_context(key, 1, [(TID, 1)], [(TID, 0)], True)
    assert s.epoch == 2 and parts == [(TID, 1)]
    assert cache.acknowledge_context(key, 2).epoch == 3
    with pytest.raises(SessionError) as e:
        cache.acknowledge_context(key, 0)
    assert e.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    with pytest.raises(SessionError) as e:
        cache.fetch_context(("g", "x"), 1, [], [], False)
    assert e.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
    with pytest.raises(SessionError) as e:
        cache.fetch_context(("g", "x"), 0, [], [], True)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    cache.fetch_context(("g", "y"), 0, [], [], False)
    with pytest.raises(SessionError) as e:
        cache.fetch_context(("g", "z"), 0, [], [], False)
    assert e.value.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    # reopening an existing session does not count against the limit
    assert cache.fetch_context(key, 0, [], [], False)[0].epoch == 1
    assert next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_sessions_of_a_closed_connection_go() -> None:
    cache = ShareSessionCache()
    conn = object()
    cache.fetch_context(("g", "a"), 0, [], [], False, conn)
    cache.fetch_context(("g", "b"), 0, [], [], False, object())
    assert [s.key for s in cache.remove_connection(conn)] == [("g", "a")]
    assert cache.get(("g", "a")) is None and cache.get(("g", "b")) is not None


# --- __share_group_state --------------------------------------------------------------------------------
KEY = SharePartitionKey("my-group", TID, 3)


def test_share_update_key_bytes_are_kafkas() -> None:
    store = ShareStateStore()
    store.replay(store.write(KEY, 0, [], 1))
    rec = store.write(KEY, 4, [StateBatch(4, 6, ACKNOWLEDGED, 1)], 2)
    assert rec.type == SHARE_UPDATE_TYPE
    k, v = encode_record(rec)
    # ShareUpdateKey: int16 record type 1, then GroupId (int16 length + UTF-8), TopicId, Partition
    assert k == struct.pack(">hh", 1, 8) + b"my-group" + TID.bytes + struct.pack(">i", 3)
    # ShareUpdateValue v0 (flexible): version, snapshot epoch, leader epoch, start offset, compact
    # array of one batch, empty tagged fields of the batch and of the value
    body = struct.pack(">hiiq", 0, 0, 0, 4) + bytes([2]) + struct.pack(">qqbh", 4, 6, 2, 1) + b"\0\0"
    assert v == body
    assert decode_record(k, v).value == rec.value


def test_snapshot_first_then_updates_then_a_snapshot_at_the_cadence() -> None:
    store = ShareStateStore(snapshot_every=3)
    kinds = []
    for i in range(7):
        rec = store.write(KEY, i, [StateBatch(i, i, ACKNOWLEDGED, 1)], i)
        store.replay(decode_record(*encode_record(rec)))
        kinds.append(rec.type)
    S, U = SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE
    assert kinds == [S, U, U, S, U, U, S]
    state = store.get(KEY)
    assert state is not None and state.start_offset == 6 and state.batches() == [StateBatch(6, 6, ACKNOWLEDGED, 1)]


def test_updates_merge_newer_batches_over_older_and_drop_below_the_start() -> None:
    store = ShareStateStore()
    for start, batches in (
        (0, [StateBatch(0, 9, AVAILABLE, 1)]),
        (0, [StateBatch(3, 4, ARCHIVED, 2)]),
        (2, [StateBatch(0, 1, ACKNOWLEDGED, 1)]),
    ):
        store.replay(store.write(KEY, start, batches, 0))
    state = store.get(KEY)
    assert state is not None
    assert state.batches() == [
        StateBatch(2, 2, AVAILABLE, 1),
        StateBatch(3, 4, ARCHIVED, 2),
        StateBatch(5, 9, AVAILABLE, 1),
    ]
    assert store.start_offset("my-group", TID, 3) == 2
    store.replay(store.delete(KEY))
    assert store.get(KEY) is None


def test_share_state_partition_is_kafkas_coordinator_key_hash() -> None:
    # SharePartitionKey.asCoordinatorKey: "group:topicId:partition", the topic id in Kafka's base64
    assert KEY.coordinator_key() == "my-group:AAAAAAAAAAAAAAAAAAAAAQ:3"
    assert share_state_partition(KEY) == coordinator_partition("my-group:AAAAAAAAAAAAAAAAAAAAAQ:3", 50)
