"""Every case of ``vectors/kip848-assignors.jsonl`` -- inputs and the assignments Kafka 4.2's own assignor
classes computed for them (``UniformAssignor``, ``RangeAssignor``, ``SimpleAssignor``; see
``vectors/README.md``) -- run through groupd's ports: the result must be Kafka's, member for member.

The members reach the assignor in the order Kafka's ``HashMap`` iterates them, which each case also
records (``java_member_order``), so the emulation of that order is checked on its own first.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
from groupd.coordinator.consumer.assignor_spec import (
    GroupSpec,
    SubscriptionType,
    java_assignment,
    java_member_spec,
)
from groupd.coordinator.consumer.assignors import ASSIGNORS
from groupd.coordinator.consumer.java_collections import java_hashmap_order
from groupd.coordinator.consumer.simple import simple_assign

VECTORS = Path(__file__).parent / "vectors" / "kip848-assignors.jsonl"
CASES = [json.loads(line) for line in VECTORS.read_text(encoding="utf-8").split("\n") if line.strip()]


def kafka_uuid(s: str) -> uuid.UUID:
    """``Uuid.fromString``: base64url without padding."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=="))


def run(case: dict) -> dict[str, dict[str, list[int]]]:
    ids = {name: kafka_uuid(t["id"]) for name, t in case["topics"].items()}
    names = {tid: name for name, tid in ids.items()}
    num_partitions = {ids[name]: t["partitions"] for name, t in case["topics"].items()}
    order = java_hashmap_order(m["member_id"] for m in case["members"])
    assert order == case["java_member_order"]
    by_id = {m["member_id"]: m for m in case["members"]}
    members = {
        mid: java_member_spec(
            by_id[mid]["subscribed"],
            ids.get,
            {ids[t]: ps for t, ps in by_id[mid]["owned"].items()},
            by_id[mid]["instance_id"],
        )
        for mid in order
    }
    assignable = case.get("assignable")
    spec = GroupSpec(
        members,
        SubscriptionType(case["subscription_type"]),
        None if assignable is None else {ids[t]: frozenset(ps) for t, ps in assignable.items()},
    )
    if case["assignor"] == "simple":
        out = simple_assign(spec, num_partitions)
    else:
        out = ASSIGNORS[case["assignor"]].assign(spec, num_partitions)
    return {m: {names[t]: sorted(ps) for t, ps in parts.items()} for m, parts in out.items()}


def test_the_vectors_are_all_there() -> None:
    # the README counts 703 lines with 101 ``simple`` ones; the file as shared ends at case 701, one
    # ``simple`` case short (every ``uniform`` and ``range`` case is there)
    assert [c["case"] for c in CASES] == list(range(702))
    assert sum(c["assignor"] == "uniform" for c in CASES) == 401
    assert sum(c["assignor"] == "range" for c in CASES) == 201
    assert sum(c["assignor"] == "simple" for c in CASES) == 100


@pytest.mark.parametrize("case", CASES, ids=[f"{c['case']}-{c['assignor']}-{c['subscription_type']}" for c in CASES])
def test_assignment_is_kafkas(case: dict) -> None:
    assert run(case) == case["expected"]


def test_java_assignment_iterates_as_a_hashmap_of_uuids() -> None:
    a, b = uuid.UUID(int=1), uuid.UUID(int=17)  # Uuid.hashCode 1 and 17: the same bucket of 16
    assert list(java_assignment({b: [3], a: [1]})) == [b, a]
