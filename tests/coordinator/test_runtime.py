"""The coordinator runtime on its own: no group or transaction semantics, any result type."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import pytest
from groupd.coordinator.routing import Node, PartitionOwnership
from groupd.coordinator.runtime import ACTIVE, LOADING, UNLOADED, CoordinatorRuntime, PlainAppend


@dataclass
class _Result:
    responses: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    appends: list[Any] = field(default_factory=list)
    markers: list[Any] = field(default_factory=list)


class _Err(enum.IntEnum):
    NONE = 0
    COORDINATOR_LOAD_IN_PROGRESS = 14
    NOT_COORDINATOR = 16


def _runtime(**kw: Any) -> CoordinatorRuntime[_Result]:
    return CoordinatorRuntime(
        PartitionOwnership(Node(0, "h", 1), 4),
        result_factory=_Result,
        none=_Err.NONE,
        not_coordinator=_Err.NOT_COORDINATOR,
        load_in_progress=_Err.COORDINATOR_LOAD_IN_PROGRESS,
        **kw,
    )


def test_a_write_is_handed_out_and_settled_once() -> None:
    rt = _runtime()
    rt.begin(5)
    done: list[Any] = []
    token = rt.append(2, ["r"], done.append, key="x")
    out = rt.finish()
    assert out.appends == [PlainAppend(token, 2, ["r"])] and rt.pending_appends == 1
    rt.begin(6)
    pending = rt.complete(token)
    assert pending is not None and pending.extra == {"key": "x"} and pending.records == ["r"]
    with pytest.raises(KeyError):
        rt.complete(token)


def test_routing_follows_leadership_and_loading() -> None:
    rt = _runtime()
    rt.receive(None)
    assert rt.route_error(1) is _Err.NONE and rt.state(1) == ACTIVE
    assert rt.begin_load(1) == 0 and rt.state(1) == LOADING
    assert rt.route_error(1) is _Err.COORDINATOR_LOAD_IN_PROGRESS
    assert rt.end_load(1) and rt.route_error(1) is _Err.NONE
    rt.receive(7)  # another broker of the process does not lead it
    assert rt.route_error(1) is _Err.NOT_COORDINATOR


def test_an_unload_fails_writes_and_abandons_the_handed_out_ones() -> None:
    unloaded: list[tuple[int, bool, int]] = []
    rt = _runtime(on_unload=lambda *a: unloaded.append(a))
    rt.begin(0)
    codes: list[Any] = []
    first = rt.append(3, ["a"], codes.append)
    rt.finish()
    rt.begin(1)
    second = rt.append(3, ["b"], codes.append)
    assert rt.unload(3) == 1
    assert codes == [_Err.NOT_COORDINATOR, _Err.NOT_COORDINATOR] and unloaded == [(3, False, 2)]
    assert rt.finish().appends == []  # never handed out
    assert rt.complete(first) is None  # handed out before: its outcome is ignored
    with pytest.raises(KeyError):
        rt.complete(second)
    assert rt.state(3) == UNLOADED and rt.route_error(3) is _Err.NOT_COORDINATOR
    assert rt.unload(3, epoch=1) is None and rt.begin_load(3, epoch=1) is None  # stale
    assert rt.begin_load(3, epoch=2) == 2 and rt.is_loading(3, 2) and not rt.is_loading(3, 1)


def test_owns_replaces_the_ownership_check() -> None:
    rt = CoordinatorRuntime(result_factory=_Result, owns=lambda p: p != 0, num_partitions=2)
    assert rt.route_error(0) == 16 and rt.route_error(1) == 0 and not rt.is_local(0)
