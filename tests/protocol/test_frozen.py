"""``frozen_record`` behaves as ``@dataclass(frozen=True)`` did for the value classes it replaced
(issue 26, start-up: the generated methods cost ~0.4 ms per class at import)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from groupd.coordinator.consumer.records import ConsumerGroupMemberMetadataKey, ConsumerGroupMetadataValue
from groupd.coordinator.records import GroupMetadataValue, MemberMetadata
from groupd.protocol.frozen import frozen_record
from hypothesis import given
from hypothesis import strategies as st

_set = object.__setattr__


@frozen_record
class Rec:
    group: str
    epoch: int = 0
    members: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    def __init__(self, group: str, epoch: int = 0, members: tuple[str, ...] = ()) -> None:
        _set(self, "group", group)
        _set(self, "epoch", epoch)
        _set(self, "members", members)


@dataclasses.dataclass(frozen=True)
class Twin:
    group: str
    epoch: int = 0
    members: tuple[str, ...] = dataclasses.field(default_factory=tuple)


@frozen_record
class One:
    group: str

    def __init__(self, group: str) -> None:
        _set(self, "group", group)


@dataclasses.dataclass(frozen=True)
class OneTwin:
    group: str


values = st.tuples(st.text(max_size=5), st.integers(-3, 3), st.lists(st.text(max_size=2), max_size=3).map(tuple))


@given(values, values)
def test_same_equality_hash_and_repr_as_a_frozen_dataclass(a: tuple, b: tuple) -> None:
    ra, rb, ta, tb = Rec(*a), Rec(*b), Twin(*a), Twin(*b)
    assert (ra == rb) == (ta == tb)
    assert (ra != rb) == (ta != tb)
    assert hash(ra) == hash(ta)
    assert repr(ra).removeprefix("Rec") == repr(ta).removeprefix("Twin")
    assert dataclasses.asdict(ra) == dataclasses.asdict(ta)
    assert dataclasses.astuple(ra) == dataclasses.astuple(ta)
    assert dataclasses.replace(ra, epoch=a[1] + 1) == Rec(a[0], a[1] + 1, a[2])
    assert ra == copy.deepcopy(ra) == pickle.loads(pickle.dumps(ra))
    assert ra != ta and (ra == a) is False  # another class is never equal, not even a tuple of the fields


def test_single_field_hash_and_match_args() -> None:
    assert hash(One("g")) == hash(OneTwin("g"))
    assert One("g") == One("g") and One("g") != One("h")
    assert One.__match_args__ == OneTwin.__match_args__ == ("group",)
    match Rec("g", 3):
        case Rec(group, epoch):
            assert (group, epoch) == ("g", 3)


def test_immutable_and_still_a_dataclass() -> None:
    r = Rec("g")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.epoch = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del r.group  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.other = 1  # type: ignore[attr-defined]
    assert dataclasses.is_dataclass(r)
    assert [f.name for f in dataclasses.fields(r)] == ["group", "epoch", "members"]
    assert Rec.__dataclass_params__.frozen  # type: ignore[attr-defined]
    with pytest.raises(TypeError):  # as with a frozen dataclass: a subclass dataclass must be frozen too

        @dataclasses.dataclass
        class Thawed(Rec):
            extra: int = 0


def test_an_init_that_drifts_from_the_fields_is_refused() -> None:
    with pytest.raises(TypeError, match="must take the fields"):

        @frozen_record
        class WrongDefault:
            a: int = 1

            def __init__(self, a: int = 2) -> None:
                _set(self, "a", a)

    with pytest.raises(TypeError, match="must take the fields"):

        @frozen_record
        class WrongOrder:
            a: int
            b: int

            def __init__(self, b: int, a: int) -> None:
                _set(self, "a", a)
                _set(self, "b", b)

    with pytest.raises(TypeError, match="hand-written __init__"):

        @frozen_record
        class NoInit:
            a: int


def test_the_converted_records_keep_their_dataclass_behaviour() -> None:
    key = ConsumerGroupMemberMetadataKey("g", "m")
    assert key == ConsumerGroupMemberMetadataKey("g", "m") and {key: 1}[ConsumerGroupMemberMetadataKey("g", "m")]
    assert repr(key) == "ConsumerGroupMemberMetadataKey(group_id='g', member_id='m')"
    assert ConsumerGroupMetadataValue(3) == ConsumerGroupMetadataValue(epoch=3, metadata_hash=0)
    member = MemberMetadata("m", None, "c", "/h", 1, 2, b"s", b"a")
    value = GroupMetadataValue("consumer", 1, "range", "m", 0, (member,))
    assert GroupMetadataValue("consumer", 1, "range", "m", 0).members == ()
    assert dataclasses.replace(value, generation=2).members == (member,)
