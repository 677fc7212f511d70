"""Server-side assignors ``uniform`` and ``range`` (Kafka's UniformAssignor and RangeAssignor): validity,
balance and stickiness as properties, plus worked examples (``test_kip848_assignor_vectors.py`` holds
the cases computed by Kafka's own classes)."""

from __future__ import annotations

import uuid

from groupd.coordinator.consumer.assignors import MemberSpec, RangeAssignor, UniformAssignor
from hypothesis import given
from hypothesis import strategies as st

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
NUM = {A: 3, B: 3}


def spec(*topics: uuid.UUID, **assigned: list[int]) -> MemberSpec:
    return MemberSpec(frozenset(topics), {A: frozenset(assigned["a"])} if assigned.get("a") else {})


def flat(assignment: dict) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for parts in assignment.values() for t, ps in parts.items() for p in ps)


def test_range_gives_co_partitioned_topics_the_same_partition_numbers_RangeAssignor() -> None:
    out = RangeAssignor().assign({"m1": spec(A, B), "m2": spec(A, B)}, NUM)
    assert out == {"m1": {A: {0, 1}, B: {0, 1}}, "m2": {A: {2}, B: {2}}}


def test_range_ignores_current_owners_a_new_member_takes_the_last_range() -> None:
    # Kafka's RangeAssignor only sorts the members (static ones first) and cuts contiguous ranges
    before = RangeAssignor().assign({"m1": spec(A), "m2": spec(A)}, {A: 6})
    assert before == {"m1": {A: {0, 1, 2}}, "m2": {A: {3, 4, 5}}}
    specs = {m: MemberSpec(frozenset({A}), before[m]) for m in before}
    specs["m3"] = MemberSpec(frozenset({A}), {})
    after = RangeAssignor().assign(specs, {A: 6})
    assert after["m1"][A] == {0, 1} and after["m2"][A] == {2, 3} and after["m3"][A] == {4, 5}


def test_range_puts_static_members_first_by_instance_id() -> None:
    specs = {
        "a": MemberSpec(frozenset({A}), {}),
        "z": MemberSpec(frozenset({A}), {}, instance_id="i2"),
        "y": MemberSpec(frozenset({A}), {}, instance_id="i1"),
    }
    out = RangeAssignor().assign(specs, {A: 3})
    assert out == {"a": {A: {2}}, "z": {A: {1}}, "y": {A: {0}}}


def test_uniform_hands_fresh_partitions_out_in_contiguous_runs() -> None:
    # UniformHomogeneousAssignmentBuilder: each unfilled member, in member order, takes its quota of
    # the unassigned partitions in a row (topics in HashSet<Uuid> order)
    out = UniformAssignor().assign({"m1": spec(A, B), "m2": spec(A, B)}, NUM)
    assert out == {"m1": {A: {0, 1, 2}}, "m2": {B: {0, 1, 2}}}
    out = UniformAssignor().assign({"m1": spec(A), "m2": spec(A)}, {A: 6})
    assert out == {"m1": {A: {0, 1, 2}}, "m2": {A: {3, 4, 5}}}


members_st = st.dictionaries(
    st.sampled_from([f"m{i}" for i in range(6)]),
    st.lists(st.tuples(st.sampled_from([A, B]), st.integers(0, 5))),
    min_size=1,
)


@given(current=members_st, na=st.integers(0, 6), nb=st.integers(0, 6), homogeneous=st.booleans(), data=st.data())
def test_uniform_valid_balanced_and_sticky(current, na, nb, homogeneous, data) -> None:
    num = {A: na, B: nb}
    # current assignments as a previous target would be: each partition with at most one member
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for m, tps in sorted(current.items()):
        for tp in tps:
            owner.setdefault(tp, m)
    specs = {}
    for m in current:
        topics = (
            frozenset({A, B})
            if homogeneous
            else data.draw(st.sampled_from([frozenset({A}), frozenset({B}), frozenset({A, B})]))
        )
        mine: dict[uuid.UUID, set[int]] = {}
        for (t, p), o in owner.items():
            if o == m:
                mine.setdefault(t, set()).add(p)
        specs[m] = MemberSpec(topics, {t: frozenset(ps) for t, ps in mine.items()})
    out = UniformAssignor().assign(specs, num)
    subscribed = {(t, p) for s in specs.values() for t in s.subscribed for p in range(num[t])}
    assert flat(out) == sorted(subscribed)  # every subscribed partition exactly once
    for m, parts in out.items():
        assert all(t in specs[m].subscribed for t in parts)
    if homogeneous:
        sizes = [sum(len(ps) for ps in out[m].values()) for m in specs]
        assert max(sizes) - min(sizes) <= 1
        quota = (na + nb) // len(specs)
        for m, s in specs.items():  # a member keeps min(valid current, quota) of what it had
            valid = {(t, p) for t, ps in s.assigned.items() for p in ps if p < num[t]}
            kept = {(t, p) for t, ps in out[m].items() for p in ps} & valid
            assert len(kept) >= min(len(valid), quota)
    else:
        # no partition could move to a subscriber with two fewer partitions
        load = {m: sum(len(ps) for ps in out[m].values()) for m in specs}
        for m, parts in out.items():
            for t in parts:
                assert all(load[m] - load[o] < 2 for o in specs if t in specs[o].subscribed)
