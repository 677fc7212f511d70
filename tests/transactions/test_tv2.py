"""Transaction version 2 (KIP-890 part 2) in the sans-IO coordinator, against Kafka 4.2's
``TransactionCoordinator.endTransaction`` / ``TransactionMetadata.prepareAbortOrCommit`` /
``prepareComplete``: the epoch bump in every Prepare*, producer-id rollover, retries, "abort when
unsure", partitions added by partition leaders (AddPartitionsToTxn v5), the client's version kept in
the log and replayed, and transaction version 1 untouched beside it."""

from __future__ import annotations

from typing import Any

import pytest
from groupd.transactions import serde
from groupd.transactions.coordinator import TransactionConfig
from groupd.transactions.errors import TxnError as E
from groupd.transactions.records import TransactionLogKey, TransactionLogValue
from groupd.transactions.records import TransactionState as S
from groupd.transactions.state import SHORT_MAX

from .txn_harness import TxnShell


def leader_add(shell: TxnShell, txn_id: str, pid: int, epoch: int, partitions: dict[str, list[int]]) -> dict:
    """What a partition leader sends for a TV2 client's Produce (AddPartitionsToTxn v5, not verify-only)."""
    req = {
        "transactions": [
            {
                "transactional_id": txn_id,
                "producer_id": pid,
                "producer_epoch": epoch,
                "verify_only": False,
                "topics": [{"name": t, "partitions": ps} for t, ps in partitions.items()],
            }
        ]
    }
    resp = shell.call("AddPartitionsToTxn", 5, req)
    (txn,) = resp["results_by_transaction"]
    return {
        (t["name"], p["partition_index"]): p["partition_error_code"]
        for t in txn["topic_results"]
        for p in t["results_by_partition"]
    }


def end5(shell: TxnShell, txn_id: str, pid: int, epoch: int, commit: bool) -> dict[str, Any]:
    req = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    return shell.call("EndTxn", 5, req)


def init(shell: TxnShell, txn_id: str = "x") -> tuple[int, int]:
    r = shell.init(txn_id)
    assert r["error_code"] == 0
    return r["producer_id"], r["producer_epoch"]


def test_commit_bumps_the_epoch_answers_it_and_writes_markers_with_it() -> None:
    shell = TxnShell()
    pid, epoch = init(shell)
    assert leader_add(shell, "x", pid, epoch, {"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
    meta = shell.coord.transactions["x"]
    assert meta.state == S.ONGOING and meta.client_transaction_version == 2
    r = end5(shell, "x", pid, epoch, True)
    assert r == {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch + 1}
    assert {(m.topic, m.partition, m.producer_epoch, m.committed) for m in shell.markers} == {
        ("t", 0, epoch + 1, True),
        ("t", 1, epoch + 1, True),
    }
    assert shell.state("x") == "CompleteCommit"
    # the Prepare* record carries the bump and the client's version
    prepare = [v for _k, v in shell.records() if v is not None and v.state == S.PREPARE_COMMIT]
    assert prepare[-1].producer_epoch == epoch + 1 and prepare[-1].client_transaction_version == 2
    # the old epoch is fenced from then on; the new one starts the next transaction
    assert leader_add(shell, "x", pid, epoch, {"t": [2]}) == {("t", 2): E.PRODUCER_FENCED}
    assert leader_add(shell, "x", pid, epoch + 1, {"t": [2]}) == {("t", 2): 0}


def test_a_retried_commit_is_answered_with_the_new_epoch_and_an_old_one_fenced() -> None:
    shell = TxnShell()
    pid, epoch = init(shell)
    leader_add(shell, "x", pid, epoch, {"t": [0]})
    assert end5(shell, "x", pid, epoch, True)["producer_epoch"] == epoch + 1
    # retryOnEpochBump: the same request again (its answer was lost)
    assert end5(shell, "x", pid, epoch, True) == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": pid,
        "producer_epoch": epoch + 1,
    }
    # a retried commit that is an abort now: INVALID_TXN_STATE
    assert end5(shell, "x", pid, epoch, False)["error_code"] == E.INVALID_TXN_STATE
    # an epoch two behind is a zombie
    assert end5(shell, "x", pid, epoch - 1 if epoch else 100, True)["error_code"] == E.PRODUCER_FENCED
    # the same epoch as the current one, with nothing added: commit is refused, abort is "abort when unsure"
    assert end5(shell, "x", pid, epoch + 1, True)["error_code"] == E.INVALID_TXN_STATE
    assert end5(shell, "x", pid, epoch + 1, False)["producer_epoch"] == epoch + 2


def test_abort_when_unsure_from_empty_writes_an_empty_prepare_abort() -> None:
    shell = TxnShell()
    pid, epoch = init(shell)
    before = len(shell.markers)
    r = end5(shell, "x", pid, epoch, False)
    assert r["error_code"] == 0 and (r["producer_id"], r["producer_epoch"]) == (pid, epoch + 1)
    assert shell.state("x") == "CompleteAbort" and len(shell.markers) == before
    # TV1 refuses the same (EndTxn v4 from Empty: INVALID_TXN_STATE)
    pid, epoch = init(shell, "y")
    assert shell.end("y", pid, epoch, False, version=4) == E.INVALID_TXN_STATE


def test_epoch_exhaustion_rolls_over_to_a_new_producer_id() -> None:
    shell = TxnShell()
    # an id as many transactions later: in the log, so that a restart sees it too
    pid, epoch = 500, SHORT_MAX - 2
    record = (
        TransactionLogKey("x"),
        TransactionLogValue(pid, epoch, 60000, S.EMPTY, last_update_timestamp_ms=shell.now),
    )
    shell.log.append(serde.encode_record(record))
    shell.coord.replay(*record)
    leader_add(shell, "x", pid, epoch, {"t": [0]})
    r = end5(shell, "x", pid, epoch, True)
    assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (0, pid, SHORT_MAX - 1)
    epoch = SHORT_MAX - 1  # exhausted: the next bump takes a new producer id
    leader_add(shell, "x", pid, epoch, {"t": [1]})
    r = end5(shell, "x", pid, epoch, True)
    new_pid = r["producer_id"]
    assert r["error_code"] == 0 and new_pid != pid and r["producer_epoch"] == 0
    # the markers went out under the old producer id at the last epoch
    assert shell.markers[-1].producer_id == pid and shell.markers[-1].producer_epoch == SHORT_MAX
    meta = shell.coord.transactions["x"]
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (new_pid, 0, pid)
    # retryOnOverflow: the same EndTxn again is answered with the new producer id
    r = end5(shell, "x", pid, SHORT_MAX - 1, True)
    assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (0, new_pid, 0)
    # and the new producer id carries on; a replay rebuilds the same state
    assert leader_add(shell, "x", new_pid, 0, {"t": [2]}) == {("t", 2): 0}
    before = shell.coord.snapshot()
    assert shell.restart() == before


def test_fence_by_init_producer_id_and_timeout_use_the_finalized_version() -> None:
    shell = TxnShell()
    pid, epoch = init(shell)
    leader_add(shell, "x", pid, epoch, {"t": [0]})
    assert shell.init("x")["error_code"] == E.CONCURRENT_TRANSACTIONS
    aborted = [v for _k, v in shell.records() if v is not None and v.state == S.PREPARE_ABORT][-1]
    assert aborted.producer_epoch == epoch + 1 and aborted.client_transaction_version == 2
    assert shell.markers[-1].producer_epoch == epoch + 1 and not shell.markers[-1].committed
    r = shell.init("x")
    assert (r["error_code"], r["producer_epoch"]) == (0, epoch + 2)
    # the fenced producer: its epoch is gone
    assert end5(shell, "x", pid, epoch, True)["error_code"] == E.PRODUCER_FENCED


def test_finalized_version_1_keeps_version_1_fences() -> None:
    shell = TxnShell(config=TransactionConfig(transaction_version=1))
    pid, epoch = init(shell)
    shell.add("x", pid, epoch, {"t": [0]})
    assert shell.init("x")["error_code"] == E.CONCURRENT_TRANSACTIONS
    aborted = [v for _k, v in shell.records() if v is not None and v.state == S.PREPARE_ABORT][-1]
    assert aborted.producer_epoch == epoch + 1 and aborted.client_transaction_version == 0


def test_tv2_requests_are_served_as_tv2_whatever_is_finalized() -> None:
    """Kafka decides by the request's version (TransactionVersion.transactionVersionForEndTxn), not
    by the finalized level: EndTxn v5 bumps even when only version 1 is finalized."""
    shell = TxnShell(config=TransactionConfig(transaction_version=1))
    pid, epoch = init(shell)
    shell.add("x", pid, epoch, {"t": [0]})  # a TV1 add (v3)
    r = end5(shell, "x", pid, epoch, True)
    assert (r["error_code"], r["producer_epoch"]) == (0, epoch + 1)


def test_version_1_clients_keep_their_epoch() -> None:
    shell = TxnShell()
    pid, epoch = init(shell)
    shell.add("x", pid, epoch, {"t": [0]})
    assert shell.coord.transactions["x"].client_transaction_version == 0
    assert shell.end("x", pid, epoch, True, version=4) == 0
    assert shell.markers[-1].producer_epoch == epoch
    assert shell.coord.transactions["x"].producer_epoch == epoch
    assert shell.add("x", pid, epoch, {"t": [1]}) == {("t", 1): 0}
    assert "producer_id" not in shell.responses[shell.end_send("x", pid, epoch, True, version=4)]


def test_errors_of_end_txn_v5_answer_no_producer() -> None:
    shell = TxnShell()
    assert end5(shell, "nope", 1, 0, True) == {
        "throttle_time_ms": 0,
        "error_code": E.INVALID_PRODUCER_ID_MAPPING,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    pid, epoch = init(shell)
    leader_add(shell, "x", pid, epoch, {"t": [0]})
    assert end5(shell, "x", pid + 1, epoch, True)["error_code"] == E.INVALID_PRODUCER_ID_MAPPING
    r = end5(shell, "x", pid, epoch + 1, True)
    assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (E.PRODUCER_FENCED, -1, -1)


def test_end_txn_v5_while_markers_are_written_is_concurrent() -> None:
    shell = TxnShell(auto_markers=False)
    pid, epoch = init(shell)
    leader_add(shell, "x", pid, epoch, {"t": [0]})
    assert end5(shell, "x", pid, epoch, True)["error_code"] == 0
    assert end5(shell, "x", pid, epoch + 1, True)["error_code"] == E.CONCURRENT_TRANSACTIONS
    assert leader_add(shell, "x", pid, epoch + 1, {"t": [0]}) == {("t", 0): E.CONCURRENT_TRANSACTIONS}
    shell.write_markers()
    assert leader_add(shell, "x", pid, epoch + 1, {"t": [0]}) == {("t", 0): 0}


@pytest.mark.parametrize("state", ["ongoing", "prepare", "complete"])
def test_a_restart_replays_tv2_state(state: str) -> None:
    shell = TxnShell(auto_markers=state != "prepare")
    pid, epoch = init(shell)
    leader_add(shell, "x", pid, epoch, {"t": [0], "u": [1]})
    if state != "ongoing":
        end5(shell, "x", pid, epoch, True)
    before = shell.coord.snapshot()
    shell.pending_markers.clear()  # the crash lost the markers in flight
    loaded = shell.restart()
    assert loaded == before
    meta = shell.coord.transactions["x"]
    assert meta.client_transaction_version == 2
    if state == "prepare":
        # the markers are sent again, with the bumped epoch, and the transaction completes
        assert {m.producer_epoch for m in shell.pending_markers} == {epoch + 1}
        shell.write_markers()
        assert shell.state("x") == "CompleteCommit"
    if state == "ongoing":
        r = end5(shell, "x", pid, epoch, True)
        assert (r["error_code"], r["producer_epoch"]) == (0, epoch + 1)
    else:
        assert end5(shell, "x", pid, epoch, True)["producer_epoch"] == epoch + 1  # retry after the restart


def test_end_txn_v4_over_a_tv2_transaction_ends_it_as_version_1() -> None:
    """The request's version decides: a partition added for TV2, then EndTxn v4, is ended without a
    bump (endTransactionWithTV1), and the record says version 0."""
    shell = TxnShell()
    pid, epoch = init(shell)
    leader_add(shell, "x", pid, epoch, {"t": [0]})
    assert shell.end("x", pid, epoch, True, version=4) == 0
    assert shell.markers[-1].producer_epoch == epoch
    meta = shell.coord.transactions["x"]
    assert (meta.state, meta.producer_epoch, meta.client_transaction_version) == (S.COMPLETE_COMMIT, epoch, 0)


def test_recovering_at_an_exhausted_epoch_that_is_not_the_current_one_is_unknown_server_error() -> None:
    """prepareIncrementProducerEpoch refuses an exhausted epoch (IllegalStateException): a TV2 fence
    at Short.MAX_VALUE - 1 leaves the id at Short.MAX_VALUE, and the fenced producer asking to
    recover with its last epoch is not handed Short.MAX_VALUE."""
    shell = TxnShell()
    pid, epoch = 500, SHORT_MAX - 1
    record = (
        TransactionLogKey("x"),
        TransactionLogValue(pid, epoch, 60000, S.EMPTY, last_update_timestamp_ms=shell.now),
    )
    shell.log.append(serde.encode_record(record))
    shell.coord.replay(*record)
    leader_add(shell, "x", pid, epoch, {"t": [0]})
    assert shell.init("x", pid=pid, epoch=epoch)["error_code"] == E.CONCURRENT_TRANSACTIONS  # fenced to MAX
    assert shell.coord.transactions["x"].producer_epoch == SHORT_MAX
    assert shell.init("x", pid=pid, epoch=epoch)["error_code"] == E.UNKNOWN_SERVER_ERROR
    r = shell.init("x")  # a new producer: the id rotates
    assert r["error_code"] == 0 and r["producer_id"] != pid and r["producer_epoch"] == 0
