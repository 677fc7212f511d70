"""The start-up load's fast path for plain offset commits (``GroupCoordinator.replay_encoded``)
leaves exactly the state that decoding each record and replaying it leaves."""

from __future__ import annotations

from groupd.coordinator import GroupCoordinator
from groupd.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from groupd.coordinator.serde import decode_record, encode_record
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.coordinator.harness import quiet_logger

keys = st.builds(OffsetCommitKey, st.sampled_from(["g1", "g2", "gé"]), st.sampled_from(["t", "u"]), st.integers(0, 3))
values = st.one_of(
    st.none(),  # tombstone
    st.builds(
        OffsetCommitValue, st.integers(0, 2**40), st.integers(-1, 5), st.just(""), st.integers(0, 2**41), st.just(-1)
    ),
    st.builds(
        OffsetCommitValue, st.integers(0, 99), st.integers(-1, 5), st.text(max_size=5), st.integers(0, 99), st.just(-1)
    ),
    st.builds(OffsetCommitValue, st.integers(0, 99), st.just(-1), st.just(""), st.integers(0, 9), st.integers(10, 99)),
)
other = st.builds(
    lambda g: (GroupMetadataKey(g), GroupMetadataValue("consumer", 1, None, None, 0, ())), st.sampled_from(["g1", "g3"])
)
records = st.lists(st.one_of(st.tuples(keys, values), other), max_size=40)


def _core() -> GroupCoordinator:
    return GroupCoordinator(logger=quiet_logger())


@settings(max_examples=200, deadline=None)
@given(records)
def test_replay_encoded_leaves_the_state_decode_and_replay_leave(recs: list) -> None:
    chunk = [(i, 0, *encode_record(r)) for i, r in enumerate(recs)]
    generic, fast = _core(), _core()
    for _o, _t, kb, vb in chunk:
        generic.replay(*decode_record(kb, vb))
    # as the shell's load does: the fast path as far as it goes, one record the generic way, again
    i = 0
    while i < len(chunk):
        j = fast.replay_encoded(chunk, i)
        assert i <= j <= len(chunk)
        if j == len(chunk):
            break
        fast.replay(*decode_record(chunk[j][2], chunk[j][3]))
        i = j + 1
    assert fast.offset_manager.offsets == generic.offset_manager.offsets
    assert fast.group_records == generic.group_records
