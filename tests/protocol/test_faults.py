"""The fault injector on the request path (protocol.faults), in process: the dispatcher's hook is
None while no rule exists (the heartbeat path pays one attribute check), rules match by API, group,
topic, client id and broker, counts run out, a seeded probability is reproducible."""

from __future__ import annotations

from typing import Any

from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.faults import FaultInjector, FaultRule, request_groups, request_topics
from groupd.protocol.messages import API_BY_NAME


class _Req:
    def __init__(self, api: str, body: dict[str, Any], client_id: str = "c") -> None:
        self.api_key = API_BY_NAME[api].key
        self.body = body
        self.client_id = client_id


def test_the_hook_exists_only_while_rules_do() -> None:
    d = Dispatcher()
    inj = FaultInjector()
    inj.attach(d, node_id=1)
    assert d.faults is None
    rule = inj.add(FaultRule(api="Heartbeat", kind="error", error_code=16))
    assert d.faults is not None
    inj.remove(rule.id)
    assert d.faults is None
    inj.add(FaultRule(api="Heartbeat", kind="error", error_code=16, count=1))
    assert inj._pick(_Req("Heartbeat", {"group_id": "g"}), 1) is not None  # type: ignore[arg-type]
    assert d.faults is None and inj.rules == []  # spent


def test_filters_group_topic_client_broker() -> None:
    inj = FaultInjector()
    inj.add(FaultRule(api="OffsetCommit", kind="error", error_code=16, group="billing", topic="orders", broker=1))
    inj.add(FaultRule(api="Heartbeat", kind="error", error_code=27, client_id="worker-3"))
    commit = {"group_id": "billing", "topics": [{"name": "orders", "partitions": []}]}
    assert inj._pick(_Req("OffsetCommit", commit), 1) is not None  # type: ignore[arg-type]
    assert inj._pick(_Req("OffsetCommit", commit), 2) is None  # type: ignore[arg-type]  # another broker
    assert inj._pick(_Req("OffsetCommit", {**commit, "group_id": "other"}), 1) is None  # type: ignore[arg-type]
    assert inj._pick(_Req("OffsetCommit", {**commit, "topics": [{"name": "x"}]}), 1) is None  # type: ignore[arg-type]
    assert inj._pick(_Req("Heartbeat", {"group_id": "g"}, "worker-3"), 1) is not None  # type: ignore[arg-type]
    assert inj._pick(_Req("Heartbeat", {"group_id": "g"}, "worker-4"), 1) is None  # type: ignore[arg-type]


def test_probability_is_a_fraction_and_seeded() -> None:
    def run() -> list[bool]:
        inj = FaultInjector(seed=7)
        inj.add(FaultRule(api="Heartbeat", kind="error", error_code=16, probability=0.25))
        return [inj._pick(_Req("Heartbeat", {}), 1) is not None for _ in range(2000)]  # type: ignore[arg-type]

    hits = run()
    assert 400 < sum(hits) < 600
    assert hits == run()


def test_what_a_request_names() -> None:
    assert list(request_groups(10, {"key": "g", "key_type": 0})) == ["g"]
    assert list(request_groups(10, {"key": "tx", "key_type": 1})) == []
    assert list(request_groups(10, {"key_type": 0, "coordinator_keys": ["a", "b"]})) == ["a", "b"]
    assert list(request_groups(15, {"groups": ["a", "b"]})) == ["a", "b"]
    assert list(request_groups(42, {"groups_names": ["a"]})) == ["a"]
    assert list(request_groups(9, {"groups": [{"group_id": "a", "topics": None}]})) == ["a"]
    assert list(request_topics({"topic_data": [{"name": "t", "partition_data": []}]})) == ["t"]
    assert list(request_topics({"topics": [{"topic": "t", "partitions": []}]})) == ["t"]
    assert list(request_topics({"topic_names": ["t"]})) == ["t"]
    assert list(request_topics({"groups": [{"group_id": "g", "topics": [{"name": "t"}]}]})) == ["t"]
    assert list(request_topics({"topics": None})) == []
