"""What the consumer-group manager hands its assignors, as Kafka's ``TargetAssignmentBuilder`` does (member
order, topic order, instance ids, subscription type), the Java collection orders behind it, and what
members end up with through heartbeats."""

from __future__ import annotations

import uuid

from consumer_harness import Shell, image, topic_id
from groupd.coordinator.consumer.assignor_spec import (
    SubscriptionType,
    consumer_subscription_type,
    java_member_spec,
    target_assignment_member_order,
)
from groupd.coordinator.consumer.java_collections import (
    JavaHashMap,
    int_hash,
    java_hashmap_order,
    string_hash,
    timeline_capacity,
    timeline_order,
    uuid_hash,
    uuid_order_key,
)

HOMO, HETERO = SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS


def settle(clients, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in clients:
            c.heartbeat()


def owned(client, topic: str) -> list[int]:
    return sorted(client.owned.get(topic_id(topic), ()))


# -- through the manager -------------------------------------------------------------------------


def test_uniform_gives_two_members_contiguous_halves_as_kafka() -> None:
    shell = Shell()
    a, b = shell.client("a"), shell.client("b")
    settle([a, b])
    # UniformHomogeneousAssignmentBuilder: a (first in member order) keeps the first 3 of its 6, b takes
    # the rest in a row (groupd used to deal 0, 2, 4 / 1, 3, 5)
    assert owned(a, "t") == [0, 1, 2] and owned(b, "t") == [3, 4, 5]


def test_uniform_third_member_takes_what_the_first_ones_give_up() -> None:
    shell = Shell(topics=image(t=9))
    clients = [shell.client(x) for x in "abc"]
    for i in range(1, 4):
        settle(clients[:i])
    # a: 0-8, then a 0-4 (its quota of 5 with the extra one) and b 5-8; then a and b keep their
    # first 3 and c takes what they gave up, in the order they gave it up
    assert [owned(c, "t") for c in clients] == [[0, 1, 2], [5, 6, 7], [3, 4, 8]]


def test_range_puts_static_members_first_and_ignores_current_owners() -> None:
    shell = Shell()
    a = shell.client("a")
    a.heartbeat(server_assignor="range")
    settle([a])
    assert owned(a, "t") == [0, 1, 2, 3, 4, 5]
    z = shell.client("z", instance_id="i0")
    z.heartbeat(server_assignor="range")
    settle([a, z])
    # RangeAssignor.sortMemberIds: the static member z comes before the dynamic a
    assert owned(z, "t") == [0, 1, 2] and owned(a, "t") == [3, 4, 5]


def test_a_static_member_rejoining_with_a_new_member_id_keeps_its_range() -> None:
    shell = Shell()
    a, z = shell.client("a"), shell.client("z", instance_id="i0")
    for c in (a, z):
        c.heartbeat(server_assignor="range")
    settle([a, z])
    assert owned(z, "t") == [0, 1, 2]
    z.leave(epoch=-2)  # a static member's temporary leave
    z2 = shell.client("z2", instance_id="i0")
    z2.heartbeat(server_assignor="range")
    settle([a, z2])
    assert owned(z2, "t") == [0, 1, 2] and owned(a, "t") == [3, 4, 5]


# -- the member order -----------------------------------------------------------------------------


def _colliding_pair() -> tuple[str, str]:
    """Two ids in the same bucket of a 16-bucket HashMap and the same slot of a 2-slot timeline table."""
    ids = [f"m{i}" for i in range(2000)]
    for i, x in enumerate(ids):
        for y in ids[i + 1 :]:
            hx, hy = string_hash(x), string_hash(y)
            if (hx ^ hx >> 16) & 15 == (hy ^ hy >> 16) & 15 and timeline_order([x, y]) == [y, x]:
                return x, y
    raise AssertionError("no pair")


def test_member_order_follows_the_groups_timeline_map_then_the_builders_hashmap() -> None:
    x, y = _colliding_pair()
    # TimelineHashMap iterates a slot backwards, so y comes first and is put into the HashMap first
    assert target_assignment_member_order([x, y], x) == [y, x]
    assert java_hashmap_order([x, y]) == [x, y]
    # a new member is put after the group's members; a replaced static member is removed last
    assert target_assignment_member_order([x], y) == [x, y]
    assert target_assignment_member_order([x], y, removed_member_id=x) == [y]


def test_member_order_is_the_hashmap_bucket_order() -> None:
    ids = ["consumer-b", "m1", "m10", "ITHeDojUkg3hq9atGsowKQ"]

    # (h ^ h >>> 16) & 15 of String.hashCode, ascending
    def bucket(s: str) -> int:
        h = string_hash(s)
        return (h ^ h >> 16) & 15

    assert [bucket(m) for m in java_hashmap_order(ids)] == sorted(bucket(m) for m in ids)


def test_timeline_table_doubles_when_an_add_would_pass_four_thirds_of_it() -> None:
    # BaseHashTable.baseAddOrReplace grows when (size + 1) * 0.75 > slots
    assert [timeline_capacity(n) for n in (0, 1, 2, 3, 5, 6, 10, 11)] == [2, 2, 2, 4, 4, 8, 8, 16]


# -- the Java tables -------------------------------------------------------------------------------


def test_put_appends_to_a_chain_compute_if_absent_links_at_its_head() -> None:
    # 1 and 17 share bucket 1 of 16
    put: JavaHashMap[int, None] = JavaHashMap(int_hash)
    put.put(1, None)
    put.put(17, None)
    assert put.keys() == [1, 17]
    computed: JavaHashMap[int, int] = JavaHashMap(int_hash)
    computed.compute_if_absent(1, lambda: 0)
    computed.compute_if_absent(17, lambda: 0)
    assert computed.keys() == [17, 1]


def test_a_resize_splits_chains_in_order_and_a_small_table_grows_from_its_initial_capacity() -> None:
    m: JavaHashMap[int, None] = JavaHashMap(int_hash, 2)
    for k in (5, 1, 3, 7):
        m.put(k, None)
    assert m.keys() == [1, 3, 5, 7]  # the table is 8 after two resizes
    s = JavaHashMap.copy_of(int_hash, [20, 4, 36])  # HashSet(Collection): 16 buckets
    assert s.keys() == [20, 4, 36]


def test_uuid_hash_and_order_are_javas() -> None:
    u = uuid.UUID("00000000-0000-0001-0000-000000000002")
    assert uuid_hash(u) == 3  # (msb ^ lsb) folded: 1 ^ 2
    neg = uuid.UUID("80000000-0000-0000-0000-000000000000")
    assert uuid_order_key(neg) < uuid_order_key(u)  # Uuid.compareTo compares signed longs


# -- the member spec and the subscription type ------------------------------------------------------


def test_member_spec_topics_come_in_hashset_order_unknown_names_skipped() -> None:
    ids = {"b": uuid.UUID(int=2), "a": uuid.UUID(int=1)}
    spec = java_member_spec(["b", "a", "gone"], ids.get, {}, None)
    names = JavaHashMap.copy_of(string_hash, ["b", "a", "gone"]).keys()
    assert spec.subscribed == [ids[n] for n in names if n in ids]
    assert spec.size() == 3  # TopicIds.size() counts the names
    # a regex next to names: a UnionSet, the larger set first
    both = java_member_spec(["a"], ids.get, {}, None, regex_topics=["a", "b"])
    assert set(both.subscribed) == {ids["a"], ids["b"]} and both.size() == 2


def test_consumer_subscription_type() -> None:
    assert consumer_subscription_type([(["a"], None), (["a"], None)], {}) is HOMO
    assert consumer_subscription_type([(["a"], None), ([], None)], {}) is HETERO
    assert consumer_subscription_type([([], None), ([], None)], {}) is HOMO
    # one regex used by every member and no names: homogeneous
    assert consumer_subscription_type([([], "t.*"), ([], "t.*")], {"t.*": frozenset({"t1"})}) is HOMO
    assert consumer_subscription_type([(["t1"], "t.*"), ([], "t.*")], {"t.*": frozenset({"t1"})}) is HETERO
    assert consumer_subscription_type([([], "t.*"), ([], "u.*")], {}) is HETERO
