"""KIP-848 __consumer_offsets records: bytes as Kafka 4 writes them (record type as the key's version,
value version 0, flexible), round trips, and a replay of a whole group's records from bytes.

kio 0.6.5 has no group-coordinator record schemas (only client messages), so the oracle here is a
hand-packed byte string built from the JSON spec, field by field."""

from __future__ import annotations

import struct
import uuid

from consumer_harness import Shell, topic_id
from groupd.coordinator.consumer import ConsumerGroups
from groupd.coordinator.consumer import records as cr
from groupd.coordinator.serde import decode_record, encode_record
from hypothesis import given
from hypothesis import strategies as st

T = topic_id("t")


def test_current_member_assignment_bytes_follow_the_json_spec() -> None:
    key = cr.ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    value = cr.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 1, ((T, (0, 2)),), ())
    kb, vb = encode_record((key, value))
    assert kb == struct.pack(">h", 8) + b"\x00\x01g" + b"\x00\x01m"
    expected = (
        struct.pack(">hiib", 0, 3, 2, 1)
        + b"\x02"  # compact array of 1 TopicPartitions
        + T.bytes
        + b"\x03"  # compact array of 2 int32
        + struct.pack(">ii", 0, 2)
        + b"\x00"  # its tagged fields
        + b"\x01"  # empty PartitionsPendingRevocation
        + b"\x00"  # the value's tagged fields
    )
    assert vb == expected
    assert decode_record(kb, vb) == (key, value)


def test_group_metadata_reads_kafka_4_1_metadata_hash_tag() -> None:
    kb, vb = encode_record((cr.ConsumerGroupMetadataKey("g"), cr.ConsumerGroupMetadataValue(7)))
    assert kb == struct.pack(">h", 3) + b"\x00\x01g"
    assert vb == struct.pack(">hi", 0, 7) + b"\x00"  # Kafka 4.0's form: no tagged field
    # as Kafka 4.1 writes it: epoch 7, tag 0 (8 bytes) = 0x0102030405060708
    tagged = struct.pack(">hi", 0, 7) + b"\x01\x00\x08" + bytes(range(1, 9))
    assert decode_record(kb, tagged)[1] == cr.ConsumerGroupMetadataValue(7, 0x0102030405060708)
    assert decode_record(kb, None) == (cr.ConsumerGroupMetadataKey("g"), None)


names = st.text(min_size=0, max_size=8)
tps = st.lists(st.tuples(st.uuids(), st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple)), max_size=3).map(tuple)
values = st.one_of(
    st.builds(cr.ConsumerGroupMetadataValue, st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1)),
    st.builds(
        cr.ConsumerGroupPartitionMetadataValue,
        st.lists(
            st.builds(cr.TopicMetadata, st.uuids(), names, st.integers(0, 100), st.just(((0, ("r1", "r2")),)))
        ).map(tuple),
    ),
    st.builds(
        cr.ConsumerGroupMemberMetadataValue,
        st.none() | names,
        st.none() | names,
        names,
        names,
        st.lists(names, max_size=3).map(tuple),
        st.none() | names,
        st.integers(-1, 2**31 - 1),
        st.none() | st.sampled_from(["uniform", "range"]),
        st.none()
        | st.builds(
            cr.ClassicMemberMetadata,
            st.integers(0, 2**31 - 1),
            st.lists(st.builds(cr.ClassicProtocol, names, st.binary(max_size=8)), max_size=2).map(tuple),
        ),
    ),
    st.builds(cr.ConsumerGroupTargetAssignmentMetadataValue, st.integers(0, 2**31 - 1)),
    st.builds(cr.ConsumerGroupTargetAssignmentMemberValue, tps),
    st.builds(
        cr.ConsumerGroupCurrentMemberAssignmentValue,
        st.integers(-2, 2**31 - 1),
        st.integers(-2, 2**31 - 1),
        st.sampled_from([0, 1, 2, 127]),
        tps,
        tps,
    ),
    st.builds(
        cr.ConsumerGroupRegularExpressionValue,
        st.lists(names, max_size=3).map(tuple),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**63 - 1),
    ),
)
KEY_OF = {
    cr.ConsumerGroupMetadataValue: lambda g, m: cr.ConsumerGroupMetadataKey(g),
    cr.ConsumerGroupPartitionMetadataValue: lambda g, m: cr.ConsumerGroupPartitionMetadataKey(g),
    cr.ConsumerGroupMemberMetadataValue: cr.ConsumerGroupMemberMetadataKey,
    cr.ConsumerGroupTargetAssignmentMetadataValue: lambda g, m: cr.ConsumerGroupTargetAssignmentMetadataKey(g),
    cr.ConsumerGroupTargetAssignmentMemberValue: cr.ConsumerGroupTargetAssignmentMemberKey,
    cr.ConsumerGroupCurrentMemberAssignmentValue: cr.ConsumerGroupCurrentMemberAssignmentKey,
    cr.ConsumerGroupRegularExpressionValue: cr.ConsumerGroupRegularExpressionKey,
}


@given(group=names, member=names, value=values, tombstone=st.booleans())
def test_every_consumer_group_record_round_trips(group: str, member: str, value, tombstone: bool) -> None:
    key = KEY_OF[type(value)](group, member)
    record = (key, None if tombstone else value)
    kb, vb = encode_record(record)
    assert struct.unpack_from(">h", kb)[0] == key.version
    assert decode_record(kb, vb) == record


def test_a_group_replayed_from_bytes_is_the_group_before() -> None:
    shell = Shell()
    clients = [shell.client(x) for x in "abc"]
    for _ in range(5):
        for c in clients:
            c.heartbeat()
    clients[0].leave()
    fresh = ConsumerGroups()
    for record in shell.log:
        fresh.replay(decode_record(*encode_record(record)))
    assert fresh.get("g").persisted() == shell.group().persisted()
    assert isinstance(next(iter(shell.group().partition_epochs))[0], uuid.UUID)
