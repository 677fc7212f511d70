"""End-transaction markers in Kafka's bytes (``EndTransactionMarker``, ``ControlRecordType``)."""

from groupd.storage.markers import EndTxnMarker, end_txn_marker_batch, read_end_txn_marker
from groupd.storage.records import BatchView, build_batch


def test_a_commit_marker_is_a_transactional_control_batch_in_kafkas_bytes() -> None:
    raw = end_txn_marker_batch(4000, 3, True, 7, 1_700_000_000_000)
    b = BatchView(raw)
    assert b.crc_ok
    assert b.is_control and b.is_transactional
    assert (b.producer_id, b.producer_epoch, b.record_count) == (4000, 3, 1)
    (r,) = b.records()
    # ControlRecordType v0 COMMIT(1); EndTransactionMarker v0, coordinator epoch 7
    assert r.key == b"\x00\x00\x00\x01"
    assert r.value == b"\x00\x00\x00\x00\x00\x07"
    assert read_end_txn_marker(b) == EndTxnMarker(True, 7)


def test_an_abort_marker_reads_back_and_longer_values_are_accepted() -> None:
    assert read_end_txn_marker(BatchView(end_txn_marker_batch(1, 0, False, 0, 0))) == EndTxnMarker(False, 0)
    longer = build_batch(
        [(b"\x00\x01\x00\x00", b"\x00\x01\x00\x00\x00\x02\x00", (), 0)], producer_id=1, transactional=True, control=True
    )
    assert read_end_txn_marker(BatchView(longer)) == EndTxnMarker(False, 2)


def test_data_batches_and_other_control_types_are_not_markers() -> None:
    assert read_end_txn_marker(BatchView(build_batch([(b"k", b"v", (), 0)], producer_id=1, transactional=True))) is None
    leader_change = build_batch([(b"\x00\x00\x00\x02", b"", (), 0)], control=True)
    assert read_end_txn_marker(BatchView(leader_change)) is None
