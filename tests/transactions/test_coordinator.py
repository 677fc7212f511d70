"""The transaction coordinator's handlers against Kafka 4's ``TransactionCoordinator`` (transaction
version 1), with the fake clock; every scenario ends with the same check: a coordinator loaded from
the log (Kafka's bytes) has the state the live one has."""

from __future__ import annotations

import pytest
from groupd.protocol.partitioning import coordinator_partition
from groupd.transactions.coordinator import TransactionConfig
from groupd.transactions.errors import TxnError as E
from groupd.transactions.records import TransactionLogKey, TransactionLogValue, TransactionState
from groupd.transactions.state import VALID_PREVIOUS_STATES, IllegalTransactionTransition, TransactionMetadata
from txn_harness import Marker, Producer, TxnShell

S = TransactionState


@pytest.fixture
def shell() -> TxnShell:
    return TxnShell()


def replays_equal(shell: TxnShell) -> None:
    live = shell.coord.snapshot()
    assert shell.restart() == live


def test_a_committed_transaction_goes_empty_ongoing_prepare_complete(shell: TxnShell) -> None:
    p = Producer(shell, "tx")
    assert p.init() == 0
    assert (p.pid, p.epoch) == (1000, 0)
    assert shell.state("tx") == "Empty"
    assert p.add({"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
    assert shell.state("tx") == "Ongoing"
    assert shell.coord.transactions["tx"].start_timestamp_ms == shell.now
    assert shell.add_offsets("tx", p.pid, p.epoch, "my-group") == 0
    assert p.end(commit=True) == 0
    assert shell.state("tx") == "CompleteCommit"
    assert [r[1].state for r in shell.records()] == [S.EMPTY, S.ONGOING, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    # the markers: every partition, the group's __consumer_offsets partition included ("my-group" -> 12)
    assert sorted(shell.markers, key=lambda m: (m.topic, m.partition)) == [
        Marker("__consumer_offsets", 12, 1000, 0, True),
        Marker("t", 0, 1000, 0, True),
        Marker("t", 1, 1000, 0, True),
    ]
    assert shell.coord.transactions["tx"].partitions == frozenset()
    # EndTxn retried after it succeeded: NONE again; the other outcome is INVALID_TXN_STATE
    assert p.end(commit=True) == 0
    assert p.end(commit=False) == E.INVALID_TXN_STATE
    replays_equal(shell)


def test_end_txn_is_answered_once_prepare_commit_is_durable_and_markers_follow() -> None:
    shell = TxnShell(auto_append=False, auto_markers=False)
    p = Producer(shell, "tx")
    ctx = shell.send("InitProducerId", 4, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
    assert ctx not in shell.responses
    # a second InitProducerId while the first record is being written
    assert shell.init("tx")["error_code"] == E.CONCURRENT_TRANSACTIONS
    shell.flush()
    p.pid, p.epoch = shell.responses[ctx]["producer_id"], shell.responses[ctx]["producer_epoch"]
    shell.add_send("tx", p.pid, p.epoch, {"t": [2]})
    shell.flush()
    end = shell.end_send("tx", p.pid, p.epoch, commit=True)
    assert end not in shell.responses and shell.coord.transactions["tx"].pending_state == S.PREPARE_COMMIT
    shell.flush()
    assert shell.responses[end]["error_code"] == 0
    assert shell.state("tx") == "PrepareCommit" and len(shell.pending_markers) == 1
    # markers not yet written: the client's next transaction and a new producer must wait
    assert p.add({"t": [0]}) == {("t", 0): E.CONCURRENT_TRANSACTIONS}
    assert shell.init("tx")["error_code"] == E.CONCURRENT_TRANSACTIONS
    shell.write_markers()
    shell.flush()
    assert shell.state("tx") == "CompleteCommit"


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(shell: TxnShell) -> None:
    old = Producer(shell, "tx")
    old.init()
    old.add({"t": [0], "u": [1]})
    new = Producer(shell, "tx")
    # prepareFenceProducerEpoch + endTransaction(ABORT): the client retries after the abort
    assert new.init() == E.CONCURRENT_TRANSACTIONS
    assert shell.state("tx") == "CompleteAbort"
    assert {(m.topic, m.partition, m.producer_epoch, m.committed) for m in shell.markers} == {
        ("t", 0, 1, False),
        ("u", 1, 1, False),
    }
    assert new.init() == 0
    assert (new.pid, new.epoch) == (old.pid, 2)
    # the old producer can do nothing any more
    assert old.end(commit=True) == E.PRODUCER_FENCED
    assert old.add({"t": [1]}) == {("t", 1): E.PRODUCER_FENCED}
    assert shell.end("tx", old.pid, old.epoch, True, version=1) == E.INVALID_PRODUCER_EPOCH  # KIP-588: v0-1
    assert old.init(recover=True) == E.PRODUCER_FENCED  # KIP-360 with a stale epoch
    replays_equal(shell)


def test_kip_360_recovery_bumps_the_epoch_and_a_lost_answer_can_be_retried(shell: TxnShell) -> None:
    p = Producer(shell, "tx")
    p.init()
    before = p.epoch
    assert p.init(recover=True) == 0
    assert p.epoch == before + 1 and shell.coord.transactions["tx"].last_producer_epoch == before
    # the answer was lost: the client asks again with the epoch it had
    assert shell.init("tx", pid=p.pid, epoch=before) == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": p.pid,
        "producer_epoch": before + 1,
    }
    assert shell.init("tx", pid=p.pid + 7, epoch=p.epoch)["error_code"] == E.PRODUCER_FENCED
    # Kafka does not persist the last epoch (TransactionLog.read gives NO_PRODUCER_EPOCH): after a
    # restart the same retry is fenced
    shell.restart()
    assert shell.coord.transactions["tx"].last_producer_epoch == -1
    assert shell.init("tx", pid=p.pid, epoch=before)["error_code"] == E.PRODUCER_FENCED


def test_an_exhausted_epoch_rotates_the_producer_id(shell: TxnShell) -> None:
    shell.coord.replay(
        TransactionLogKey("tx"),
        TransactionLogValue(50, 32765, 60000, S.COMPLETE_COMMIT, last_update_timestamp_ms=1, start_timestamp_ms=1),
    )
    p = Producer(shell, "tx", pid=50, epoch=32765)
    assert p.init(recover=True) == 0 and (p.pid, p.epoch) == (50, 32766)  # 32766 = Short.MAX_VALUE - 1: exhausted
    assert p.init(recover=True) == 0
    assert (p.pid, p.epoch) == (1000, 0)
    meta = shell.coord.transactions["tx"]
    assert meta.previous_producer_id == 50 and meta.last_producer_epoch == 32766
    # the rotation's answer was lost: a retry with the old id and exhausted epoch gets the same
    assert shell.init("tx", pid=50, epoch=32766) == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": 1000,
        "producer_epoch": 0,
    }
    replays_equal(shell)


def test_a_fence_at_the_exhausted_epoch_is_followed_by_a_rotation(shell: TxnShell) -> None:
    shell.coord.replay(
        TransactionLogKey("tx"),
        TransactionLogValue(50, 32766, 60000, S.ONGOING, frozenset({("t", 0)}), 1, 1),
    )
    assert shell.init("tx")["error_code"] == E.CONCURRENT_TRANSACTIONS
    assert shell.markers == [Marker("t", 0, 50, 32767, False)]
    assert shell.init("tx") == {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 0}


def test_a_transaction_past_its_timeout_is_aborted_with_a_bumped_epoch(shell: TxnShell) -> None:
    p = Producer(shell, "tx", timeout_ms=5000)
    p.init()
    p.add({"t": [3]})
    start = shell.now
    assert shell.coord.next_deadline() == start + 5001
    shell.advance(5000)  # Kafka: txnStartTimestamp + txnTimeoutMs < now
    assert shell.state("tx") == "Ongoing"
    shell.advance(1)
    assert shell.state("tx") == "CompleteAbort"
    assert shell.markers == [Marker("t", 3, p.pid, p.epoch + 1, False)]
    assert p.end(commit=True) == E.PRODUCER_FENCED
    assert shell.describe("tx")[0]["producer_epoch"] == p.epoch + 1
    replays_equal(shell)


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_a_timeout_outside_the_limits_is_invalid(shell: TxnShell, timeout: int) -> None:
    assert shell.init("tx", timeout_ms=timeout)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
    assert "tx" not in shell.coord.transactions


def test_init_producer_id_bad_requests(shell: TxnShell) -> None:
    assert shell.init("")["error_code"] == E.INVALID_REQUEST
    assert shell.init("tx", pid=5)["error_code"] == E.INVALID_REQUEST  # an id without an epoch
    # a null transactional id: a fresh producer id, epoch 0, nothing written (idempotent producer)
    resp = shell.call("InitProducerId", 4, {"transactional_id": None, "transaction_timeout_ms": 1})
    assert (resp["error_code"], resp["producer_epoch"]) == (0, 0) and shell.log == []


def test_unknown_partitions_fail_the_whole_add(shell: TxnShell) -> None:
    p = Producer(shell, "tx")
    p.init()
    assert p.add({"t": [0, 9], "nope": [0]}) == {
        ("t", 0): E.OPERATION_NOT_ATTEMPTED,
        ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert shell.state("tx") == "Empty"


def test_requests_for_unknown_or_mismatched_producers(shell: TxnShell) -> None:
    assert shell.add("ghost", 1, 0, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert shell.end("ghost", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    p = Producer(shell, "tx")
    p.init()
    assert shell.add("tx", p.pid + 1, p.epoch, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert p.end(commit=True) == E.INVALID_TXN_STATE  # nothing added: Empty
    assert shell.add_offsets("tx", p.pid, p.epoch + 1, "g") == E.PRODUCER_FENCED
    assert shell.add_offsets("tx", p.pid, p.epoch + 1, "g", version=1) == E.INVALID_PRODUCER_EPOCH


def test_add_partitions_v4_batches_transactions_and_verifies(shell: TxnShell) -> None:
    a, b = Producer(shell, "a"), Producer(shell, "b")
    a.init()
    b.init()
    a.add({"t": [0]})

    def txn(p: Producer, verify: bool, parts: list[int]) -> dict:
        return {
            "transactional_id": p.txn_id,
            "producer_id": p.pid,
            "producer_epoch": p.epoch,
            "verify_only": verify,
            "topics": [{"name": "t", "partitions": parts}],
        }

    resp = shell.call("AddPartitionsToTxn", 4, {"transactions": [txn(a, True, [0, 1]), txn(b, False, [2])]})
    assert resp["error_code"] == 0
    by_txn = {
        r["transactional_id"]: {
            (t["name"], p["partition_index"]): p["partition_error_code"]
            for t in r["topic_results"]
            for p in t["results_by_partition"]
        }
        for r in resp["results_by_transaction"]
    }
    assert by_txn == {"a": {("t", 0): 0, ("t", 1): E.TRANSACTION_ABORTABLE}, "b": {("t", 2): 0}}
    assert shell.coord.transactions["a"].partitions == {("t", 0)}  # verify_only changes nothing
    assert shell.coord.transactions["b"].partitions == {("t", 2)}


def test_describe_and_list_transactions(shell: TxnShell) -> None:
    a, b, c = Producer(shell, "app-a"), Producer(shell, "app-b"), Producer(shell, "other")
    for p in (a, b, c):
        p.init()
    a.add({"t": [1, 0], "u": [0]})
    shell.advance(10)
    b.add({"t": [0]})
    b.end(commit=False)
    unknown = {
        "transaction_state": "",
        "transaction_timeout_ms": 0,
        "transaction_start_time_ms": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }
    assert shell.describe("app-a", "nope", "") == [
        {
            "error_code": 0,
            "transactional_id": "app-a",
            "transaction_state": "Ongoing",
            "transaction_timeout_ms": 60000,
            "transaction_start_time_ms": shell.now - 10,
            "producer_id": a.pid,
            "producer_epoch": 0,
            "topics": [{"topic": "t", "partitions": [0, 1]}, {"topic": "u", "partitions": [0]}],
        },
        {**unknown, "error_code": E.TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": "nope"},
        {**unknown, "error_code": E.INVALID_REQUEST, "transactional_id": ""},
    ]

    def ids(**filters: object) -> list[str]:
        return [t["transactional_id"] for t in shell.list(**filters)["transaction_states"]]

    assert ids() == ["app-a", "app-b", "other"]
    assert ids(state_filters=["Ongoing", "CompleteAbort"]) == ["app-a", "app-b"]
    assert shell.list(state_filters=["Bogus"])["unknown_state_filters"] == ["Bogus"]
    assert ids(producer_id_filters=[b.pid]) == ["app-b"]
    assert ids(transactional_id_pattern="app-.*") == ["app-a", "app-b"]
    # v1 duration filter: running for longer than 5 ms (a never-started one has start -1: "forever")
    assert ids(duration_filter=5, state_filters=["Ongoing"]) == ["app-a"]
    assert ids(duration_filter=50, state_filters=["Ongoing"]) == []
    assert shell.list(transactional_id_pattern="(")["error_code"] == E.INVALID_REQUEST


def test_an_idle_transactional_id_expires_into_a_tombstone() -> None:
    shell = TxnShell(config=TransactionConfig(transactional_id_expiration_ms=1000))
    p = Producer(shell, "tx")
    p.init()
    p.add({"t": [0]})
    shell.advance(2000)  # Ongoing (timeout 60 s): not expirable
    assert "tx" in shell.coord.transactions
    p.end(commit=True)
    assert shell.coord.next_deadline() == shell.now + 1000
    shell.advance(1000)
    assert "tx" not in shell.coord.transactions
    assert shell.log[-1][1] is None
    assert shell.restart() == {}


def test_a_failed_append_is_answered_with_kafkas_mapping_and_leaves_no_trace() -> None:
    shell = TxnShell(auto_append=False)
    ctx = shell.send("InitProducerId", 4, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
    shell.flush(error=E.KAFKA_STORAGE_ERROR)
    assert shell.responses[ctx]["error_code"] == E.NOT_COORDINATOR  # appendTransactionToLog's mapping
    assert shell.coord.snapshot() == {} and "tx" not in shell.coord.transactions


def test_a_failed_complete_is_retried_by_tick() -> None:
    shell = TxnShell(auto_append=False)
    p = Producer(shell, "tx")
    shell.auto_append = True
    p.init()
    p.add({"t": [0]})
    shell.auto_append = False
    shell.end_send("tx", p.pid, p.epoch, True)
    shell.flush(count=1)  # PrepareCommit durable, markers written, CompleteCommit handed out
    shell.flush(error=E.NOT_ENOUGH_REPLICAS)
    assert shell.state("tx") == "PrepareCommit"
    assert shell.coord.next_deadline() == shell.now
    shell.advance(0)
    shell.flush()
    assert shell.state("tx") == "CompleteCommit"


def test_loading_a_log_caught_between_prepare_and_complete_resends_the_markers() -> None:
    shell = TxnShell(auto_markers=False)
    p = Producer(shell, "tx")
    p.init()
    p.add({"u": [0]})
    p.end(commit=False)
    assert shell.state("tx") == "PrepareAbort"
    shell.pending_markers.clear()  # the daemon died before writing them
    shell.restart()
    assert [(m.transactional_id, m.committed, m.partitions) for m in shell.pending_markers] == [
        ("tx", False, {("u", 0)})
    ]
    shell.write_markers()
    assert shell.state("tx") == "CompleteAbort"


def test_add_offsets_adds_the_groups_offsets_partition(shell: TxnShell) -> None:
    p = Producer(shell, "tx")
    p.init()
    assert shell.add_offsets("tx", p.pid, p.epoch, "polygenelubricants") == 0
    assert (
        shell.coord.transactions["tx"].partitions
        == {("__consumer_offsets", coordinator_partition("polygenelubricants", 50))}
        == {("__consumer_offsets", 0)}
    )


@pytest.mark.parametrize("to", list(S))
@pytest.mark.parametrize("frm", list(S))
def test_the_transition_table_is_enforced(frm: TransactionState, to: TransactionState) -> None:
    meta = TransactionMetadata("tx", 1, producer_epoch=3, timeout_ms=10, state=frm, start_timestamp_ms=5)
    value = TransactionLogValue(1, 3, 10, to, frozenset(), 9, -1 if to == S.EMPTY else 5)
    if frm in VALID_PREVIOUS_STATES[to] and to not in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        meta.transition_to(value)
        assert meta.state == to
    else:
        with pytest.raises(IllegalTransactionTransition):
            meta.transition_to(value)


def test_end_txn_while_markers_are_written_is_concurrent_whatever_the_outcome() -> None:
    # Kafka: prepareComplete is pending from the moment Prepare* is durable, so both outcomes meet
    # "pendingTransitionInProgress" -> CONCURRENT_TRANSACTIONS (not INVALID_TXN_STATE)
    shell = TxnShell(auto_markers=False)
    p = Producer(shell, "tx")
    p.init()
    p.add({"t": [0]})
    assert p.end(commit=True) == 0
    assert p.end(commit=True) == E.CONCURRENT_TRANSACTIONS
    assert p.end(commit=False) == E.CONCURRENT_TRANSACTIONS


def test_every_answer_encodes_with_the_apis_schema_at_its_version(shell: TxnShell) -> None:
    """The handlers' answers are shaped as the codec (and so Kafka's JSON specs) expects, and a request
    decoded by the codec is what the handlers read."""
    from groupd.protocol.messages import API_BY_NAME

    def send(api: str, version: int, request: dict) -> None:
        schema = API_BY_NAME[api].request.codec(version)
        shell.send(api, version, schema.decode(schema.encode(request)))

    for v in range(4):
        send("InitProducerId", 3, {"transactional_id": f"v{v}", "transaction_timeout_ms": 1000})
        pid = shell.coord.transactions[f"v{v}"].producer_id
        send(
            "AddPartitionsToTxn",
            v,
            {
                "v3_and_below_transactional_id": f"v{v}",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": 0,
                "v3_and_below_topics": [{"name": "t", "partitions": [0, 9]}],
            },
        )
        send(
            "AddPartitionsToTxn",
            v,
            {
                "v3_and_below_transactional_id": f"v{v}",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": 0,
                "v3_and_below_topics": [{"name": "t", "partitions": [1]}],
            },
        )
    for v in (4, 5):
        send(
            "AddPartitionsToTxn",
            v,
            {
                "transactions": [
                    {
                        "transactional_id": "v0",
                        "producer_id": 1000,
                        "producer_epoch": 0,
                        "verify_only": True,
                        "topics": [{"name": "t", "partitions": [1, 2]}],
                    }
                ]
            },
        )
    for v in range(5):
        send(
            "AddOffsetsToTxn",
            v,
            {"transactional_id": "v1", "producer_id": 1001, "producer_epoch": v % 2, "group_id": "g"},
        )
        send("EndTxn", v, {"transactional_id": "v2", "producer_id": 1002, "producer_epoch": 0, "committed": True})
    send("DescribeTransactions", 0, {"transactional_ids": ["v0", "v2", "nope"]})
    for v in range(3):
        send(
            "ListTransactions", v, {"state_filters": ["Ongoing", "x"], "producer_id_filters": [], "duration_filter": 0}
        )
    assert len(shell.responses) == 28
    codes = set()
    for ctx, response in shell.responses.items():
        API_BY_NAME[ctx.api].response.codec(ctx.version).encode(response)
        codes.add(response.get("error_code"))
    assert {0, E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH} <= codes
