"""``frozen_record`` behaves as ``@dataclass(frozen=True)`` did for the value classes it replaced
(issue 26, start-up: the generated methods cost ~0.4 ms per class at import)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from groupd.coordinator.consumer.records import ConsumerGroupMemberMetadataKey, ConsumerGroupMetadataValue
from groupd.coordinator.records import GroupMetadataValue, MemberMetadata
from groupd.protocol.frozen import DEFAULT_FACTORY, frozen_record, mutable_record
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


def test_the_docstring_a_dataclass_gets() -> None:
    assert Rec.__doc__.removeprefix("Rec") == Twin.__doc__.removeprefix("Twin")  # type: ignore[union-attr]
    assert Mut.__doc__.removeprefix("Mut") == MutTwin.__doc__.removeprefix("MutTwin")  # type: ignore[union-attr]
    assert One.__doc__.removeprefix("One") == OneTwin.__doc__.removeprefix("OneTwin")  # type: ignore[union-attr]


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


@mutable_record
class Mut:
    group: str
    epoch: int = 0
    members: dict[str, int] = dataclasses.field(default_factory=dict)

    def __init__(self, group: str, epoch: int = 0, members: dict[str, int] = DEFAULT_FACTORY) -> None:
        self.group = group
        self.epoch = epoch
        self.members = {} if members is DEFAULT_FACTORY else members


@dataclasses.dataclass
class MutTwin:
    group: str
    epoch: int = 0
    members: dict[str, int] = dataclasses.field(default_factory=dict)


@given(st.text(max_size=3), st.integers(-3, 3), st.text(max_size=3), st.integers(-3, 3))
def test_mutable_record_is_a_mutable_dataclass(g1: str, e1: int, g2: str, e2: int) -> None:
    a, b, ta, tb = Mut(g1, e1), Mut(g2, e2), MutTwin(g1, e1), MutTwin(g2, e2)
    assert (a == b) == (ta == tb)
    assert repr(a).removeprefix("Mut") == repr(ta).removeprefix("MutTwin")
    assert Mut.__hash__ is None and MutTwin.__hash__ is None  # unhashable, as a mutable dataclass
    assert a.members == {} and a.members is not Mut(g1).members  # a new dict each, as the factory gives
    a.epoch = e1 + 1
    assert a == dataclasses.replace(Mut(g1, e1), epoch=e1 + 1)
    assert dataclasses.asdict(Mut(g1, e1, {"m": 1})) == dataclasses.asdict(MutTwin(g1, e1, {"m": 1}))


def test_mutable_record_keeps_a_method_the_class_defines() -> None:
    @mutable_record
    class Custom:
        a: int

        def __init__(self, a: int) -> None:
            self.a = a

        def __repr__(self) -> str:
            return "custom"

    assert repr(Custom(1)) == "custom" and Custom(1) == Custom(1)
    with pytest.raises(TypeError, match="must take the fields"):

        @mutable_record
        class NoFactory:
            a: dict[str, int] = dataclasses.field(default_factory=dict)

            def __init__(self, a: dict[str, int] | None = None) -> None:
                self.a = a or {}


@frozen_record
class Partial:
    a: int
    hidden: str = dataclasses.field(default="", repr=False)
    ignored: int = dataclasses.field(default=0, compare=False)

    def __init__(self, a: int, hidden: str = "", ignored: int = 0) -> None:
        _set(self, "a", a)
        _set(self, "hidden", hidden)
        _set(self, "ignored", ignored)


@dataclasses.dataclass(frozen=True)
class PartialTwin:
    a: int
    hidden: str = dataclasses.field(default="", repr=False)
    ignored: int = dataclasses.field(default=0, compare=False)


@given(st.integers(0, 2), st.text(max_size=2), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))
def test_compare_and_repr_false_fields_as_in_dataclasses(a: int, h: str, i: int, a2: int, i2: int) -> None:
    x, y, tx, ty = Partial(a, h, i), Partial(a2, h, i2), PartialTwin(a, h, i), PartialTwin(a2, h, i2)
    assert (x == y) == (tx == ty)
    assert hash(x) == hash(tx)
    assert repr(x).removeprefix("Partial") == repr(tx).removeprefix("PartialTwin")
