"""``__transaction_state`` records in Kafka's bytes (TransactionLogKey v0, TransactionLogValue v0-1)
and the placement of a transactional id (``Utils.abs(hashCode) % 50``).

kio 0.6.5 has no transaction-log types, so the oracle is the byte layout written out by hand from
Kafka's JSON specs (``TransactionLogKey.json``, ``TransactionLogValue.json``) and
``TransactionLog.valueToBytes``: partitions grouped by topic, null while Empty, tagged fields only
when they differ from their defaults."""

from __future__ import annotations

import struct

import pytest
from groupd.protocol.partitioning import coordinator_partition, java_string_hashcode
from groupd.transactions import serde
from groupd.transactions.records import TransactionLogKey, TransactionLogValue, TransactionState
from hypothesis import given, settings
from hypothesis import strategies as st

S = TransactionState


def _str16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_key_v0_bytes() -> None:
    assert serde.encode_key(TransactionLogKey("tx-1")) == b"\x00\x00" + _str16("tx-1")
    assert serde.decode_key(b"\x00\x00" + _str16("tx-1")) == TransactionLogKey("tx-1")


def test_value_v0_bytes_of_an_ongoing_transaction() -> None:
    value = TransactionLogValue(
        producer_id=4000,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=S.ONGOING,
        partitions=frozenset({("out", 1), ("out", 0), ("audit", 2)}),
        last_update_timestamp_ms=1_700_000_000_123,
        start_timestamp_ms=1_700_000_000_100,
    )
    expected = (
        struct.pack(">hqhib", 0, 4000, 3, 60000, 1)
        + struct.pack(">i", 2)
        + _str16("audit")
        + struct.pack(">ii", 1, 2)
        + _str16("out")
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_100)
    )
    assert serde.encode_value(value, version=0) == expected
    assert serde.decode_value(expected) == value


def test_value_v1_writes_null_partitions_when_empty_and_tagged_fields_only_when_set() -> None:
    empty = TransactionLogValue(producer_id=7, producer_epoch=0, transaction_timeout_ms=100, state=S.EMPTY)
    assert serde.encode_value(empty) == (
        struct.pack(">hqhib", 1, 7, 0, 100, 0)
        + b"\x00"  # compact null array
        + struct.pack(">qq", -1, -1)
        + b"\x00"  # no tagged fields: all at their defaults
    )
    rotated = TransactionLogValue(
        producer_id=8,
        producer_epoch=0,
        transaction_timeout_ms=100,
        state=S.COMPLETE_ABORT,
        partitions=frozenset(),
        last_update_timestamp_ms=5,
        start_timestamp_ms=4,
        previous_producer_id=7,
        client_transaction_version=2,
    )
    assert serde.encode_value(rotated) == (
        struct.pack(">hqhib", 1, 8, 0, 100, 5)
        + b"\x01"  # compact empty array (not null: the state is not Empty)
        + struct.pack(">qq", 5, 4)
        + b"\x02"  # two tagged fields, in tag order
        + b"\x00\x08"
        + struct.pack(">q", 7)
        + b"\x02\x02"
        + struct.pack(">h", 2)
    )
    assert serde.decode_value(serde.encode_value(rotated)) == rotated


def test_an_unknown_tagged_field_is_skipped_as_kafka_does() -> None:
    # Kafka trunk's tag 3 (NextProducerEpoch, KIP-939): an older reader skips it
    value = TransactionLogValue(producer_id=9, producer_epoch=1, transaction_timeout_ms=10, state=S.EMPTY)
    data = serde.encode_value(value)
    assert data[-1:] == b"\x00"
    with_tag3 = data[:-1] + b"\x01\x03\x02" + struct.pack(">h", 4)
    assert serde.decode_value(with_tag3) == value


def test_an_empty_transaction_with_partitions_is_refused_as_transaction_log_does() -> None:
    with pytest.raises(ValueError):
        serde.encode_value(
            TransactionLogValue(1, 0, 10, S.EMPTY, partitions=frozenset({("t", 0)})),
        )


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x01" + _str16("x"), b"\x00\x00\x00\x05ab"],
)
def test_bad_keys_are_decode_errors(data: bytes) -> None:
    with pytest.raises(serde.RecordDecodeError):
        serde.decode_key(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00",
        b"\x00\x02" + bytes(40),
        struct.pack(">hqhib", 0, 1, 0, 1, 9) + struct.pack(">iqq", -1, 0, 0),
        b"\x00\x00\x01",
    ],
)
def test_bad_values_are_decode_errors(data: bytes) -> None:
    with pytest.raises(serde.RecordDecodeError):
        serde.decode_value(data)


def test_a_tombstone_is_a_null_value() -> None:
    assert serde.encode_record((TransactionLogKey("a"), None))[1] is None
    assert serde.decode_record(serde.encode_key(TransactionLogKey("a")), None) == (TransactionLogKey("a"), None)


int16 = st.integers(0, 2**15 - 1)
int64 = st.integers(-1, 2**63 - 1)
partitions = st.frozensets(st.tuples(st.text(max_size=10), st.integers(0, 2**31 - 1)), max_size=8)


@st.composite
def values(draw: st.DrawFn) -> TransactionLogValue:
    state = draw(st.sampled_from(list(S)))
    return TransactionLogValue(
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        transaction_timeout_ms=draw(st.integers(1, 2**31 - 1)),
        state=state,
        partitions=frozenset() if state == S.EMPTY else draw(partitions),
        last_update_timestamp_ms=draw(int64),
        start_timestamp_ms=draw(int64),
        previous_producer_id=draw(int64),
        next_producer_id=draw(int64),
        client_transaction_version=draw(st.integers(0, 2)),
    )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), values())
def test_records_round_trip(txn_id: str, value: TransactionLogValue) -> None:
    key, data = serde.encode_record((TransactionLogKey(txn_id), value))
    assert serde.decode_record(key, data) == (TransactionLogKey(txn_id), value)
    # v0 drops the tagged fields (Kafka's readers default them)
    v0 = serde.decode_value(serde.encode_value(value, version=0))
    assert v0 == TransactionLogValue(
        value.producer_id,
        value.producer_epoch,
        value.transaction_timeout_ms,
        value.state,
        value.partitions,
        value.last_update_timestamp_ms,
        value.start_timestamp_ms,
    )


@pytest.mark.parametrize(
    ("txn_id", "hashcode", "partition"),
    [("my-group", -1906497762, 12), ("polygenelubricants", -(2**31), 0), ("😀", None, 49)],
)
def test_a_transactional_id_is_placed_as_kafka_places_it(txn_id: str, hashcode: int | None, partition: int) -> None:
    # TransactionStateManager.partitionFor: Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount
    if hashcode is not None:
        assert java_string_hashcode(txn_id) == hashcode
    assert coordinator_partition(txn_id, 50) == partition


def test_the_error_codes_agree_with_the_protocol_table() -> None:
    from groupd.protocol.errors import ErrorCode
    from groupd.transactions.errors import TxnError

    for e in TxnError:
        if e.name in ErrorCode.__members__:
            assert ErrorCode[e.name] == e, e.name
