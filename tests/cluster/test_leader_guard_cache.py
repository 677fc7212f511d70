"""``leader_guard`` remembers the partitions its broker led when last checked (issue 29 item 4: the
guard's cost per Produce and Fetch at three brokers). Whatever moves leaders or epochs between
requests, each request is answered as ``Leadership.check`` answers it at that moment: a stateful
test drives moves, stops, starts, preferred elections and topics deleted and made again, and
compares every partition of every request with the check."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from groupd.broker.cluster import Leadership, leader_guard
from groupd.broker.topics import TopicRegistry
from groupd.protocol.errors import ErrorCode
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

NODES = [1, 2, 3]
TOPICS = ["a", "b"]


class _Req:
    """What the guard touches of a request: body, version, connection, answer encoder."""

    def __init__(self, body: dict[str, Any], version: int) -> None:
        self.body = body
        self.api_version = version
        self.conn = None
        self.encode_response = lambda _r, resp: resp


def _fetch(guard: Any, topic: str, parts: list[tuple[int, int | None]]) -> dict[int, int]:
    """Send a Fetch of ``parts`` (partition, current_leader_epoch) through ``guard``: partition ->
    0 when handed on (with its epoch cleared), else the error answered for it."""
    seen: dict[str, Any] = {}

    def inner(req: Any) -> dict[str, Any]:
        seen["body"] = req.body
        return {"responses": []}

    body = {
        "max_wait_ms": 500,
        "topics": [{"topic": topic, "partitions": [{"partition": p, "current_leader_epoch": e} for p, e in parts]}],
    }
    req = _Req(body, 12)
    out: dict[int, int] = {}
    handed = guard_call(guard, inner, req)
    for td in seen["body"]["topics"]:
        for pd in td["partitions"]:
            assert pd["current_leader_epoch"] in (-1, None)  # the data plane checks epoch 0 only
            out[pd["partition"]] = 0
    resp = req.encode_response(req, handed)
    for tr in resp["responses"]:
        for pr in tr["partitions"]:
            out[pr["partition_index"]] = pr["error_code"]
    return out


def guard_call(guard: Any, inner: Any, req: _Req) -> Any:
    guard.inner = inner
    return guard(req)


def _guard(leaders: Leadership, node: int) -> Any:
    class Guard:
        inner: Any = None

        def __init__(self) -> None:
            self.call = leader_guard("Fetch", lambda req: self.inner(req), node, leaders, lambda: {})

        def __call__(self, req: _Req) -> Any:
            return self.call(req)

    return Guard()


def test_a_partition_moved_away_after_a_fetch_is_refused_on_the_next(tmp_path: Path) -> None:
    topics = TopicRegistry(tmp_path)
    topics.load()
    leaders = Leadership(NODES, topics)
    t = topics.create("t", 2, replication_factor=3)
    leader, epoch = leaders.get(t, 0)
    guard = _guard(leaders, leader)
    assert _fetch(guard, "t", [(0, epoch)])[0] == 0  # remembered as led here
    other = leader % 3 + 1
    leaders.move(t, 0, other)
    assert _fetch(guard, "t", [(0, -1)])[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _fetch(guard, "t", [(0, epoch)])[0] == ErrorCode.FENCED_LEADER_EPOCH
    leaders.move(t, 0, leader)  # back, epoch + 2
    assert _fetch(guard, "t", [(0, epoch + 2)])[0] == 0
    assert _fetch(guard, "t", [(0, epoch + 3)])[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert _fetch(guard, "t", [(0, epoch + 1)])[0] == ErrorCode.FENCED_LEADER_EPOCH
    # Moved to `other` and remembered there; the topic deleted and made again goes back to its
    # preferred leader at epoch 0, which `other`'s guard must not take for the old one.
    away = next(n for n in NODES if n != leaders.replicas(t, 1)[0])
    leaders.move(t, 1, away)
    there = _guard(leaders, away)
    assert _fetch(there, "t", [(1, -1)])[1] == 0
    topics.delete("t")
    leaders.forget("t")
    t = topics.create("t", 2, replication_factor=3)
    assert leaders.get(t, 1)[0] != away
    assert _fetch(there, "t", [(1, -1)])[1] == ErrorCode.NOT_LEADER_OR_FOLLOWER


class GuardMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.topics = TopicRegistry(Path(self.dir.name))
        self.topics.load()
        self.leaders = Leadership(list(NODES), self.topics)
        for name in TOPICS:
            self.topics.create(name, 3, replication_factor=2)
        self.guards = {n: _guard(self.leaders, n) for n in NODES}

    def teardown(self) -> None:
        self.dir.cleanup()

    @rule(topic=st.sampled_from(TOPICS), partition=st.integers(0, 4), to=st.sampled_from(NODES))
    def move(self, topic: str, partition: int, to: int) -> None:
        t = self.topics.get(topic)
        if t is not None and partition < t.partitions and to in self.leaders.live:
            self.leaders.move(t, partition, to)

    @rule(node=st.sampled_from(NODES))
    def stop(self, node: int) -> None:
        if node in self.leaders.live and len(self.leaders.live) > 1:
            self.leaders.broker_stopped(node)

    @rule(node=st.sampled_from(NODES))
    def start(self, node: int) -> None:
        if node not in self.leaders.live:
            self.leaders.broker_started(node)

    @rule()
    def rebalance(self) -> None:
        self.leaders.rebalance()

    @rule(topic=st.sampled_from(TOPICS), partitions=st.integers(1, 5))
    def remake(self, topic: str, partitions: int) -> None:
        """Deleted and made again (Cluster wires ``forget`` to the topic's deletion)."""
        self.topics.delete(topic)
        self.leaders.forget(topic)
        self.topics.create(topic, partitions, replication_factor=2)

    @rule(
        node=st.sampled_from(NODES),
        topic=st.sampled_from(TOPICS),
        asks=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["none", "-1", "cur", "old", "new"])), max_size=4),
    )
    def fetch(self, node: int, topic: str, asks: list[tuple[int, str]]) -> None:
        parts: list[tuple[int, int | None]] = []
        for p, which in dict(asks).items():
            t = self.topics.get(topic)
            assert t is not None
            cur = self.leaders.get(t, p)[1] if p < t.partitions else 0
            epoch = {"none": None, "-1": -1, "cur": cur, "old": cur - 1, "new": cur + 1}[which]
            parts.append((p, epoch))
        # What the check answers now (it may elect a partition never asked for: done first, as the
        # guard's own first check of it would).
        expected = {p: self.leaders.check(node, topic, p, -1 if e is None else e)[0] for p, e in parts}
        assert _fetch(self.guards[node], topic, parts) == expected


GuardMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestGuardMachine = GuardMachine.TestCase


def test_forgetting_a_topic_the_leadership_file_does_not_name_leaves_the_file(tmp_path: Path) -> None:
    """A deleted topic whose partitions never moved is not in ``cluster-leaders.json``: the file is
    not written again (no write and fsync on the event loop per deleted topic); a deleted topic
    the file names is taken out of it, also after a restart read the file."""
    topics = TopicRegistry(tmp_path)
    topics.load()
    path = tmp_path / "cluster-leaders.json"
    leaders = Leadership(NODES, topics, path=path)
    still = topics.create("still", 2, replication_factor=3)
    moved = topics.create("moved", 2, replication_factor=3)
    leaders.get(still, 0)
    leader, _ = leaders.get(moved, 0)
    leaders.move(moved, 0, leader % 3 + 1)
    written = path.stat()
    assert "moved" in path.read_text() and "still" not in path.read_text()
    topics.delete("still")
    leaders.forget("still")
    assert path.stat().st_ino == written.st_ino and path.stat().st_mtime_ns == written.st_mtime_ns
    again = Leadership(NODES, topics, path=path)  # a restart
    topics.delete("moved")
    again.forget("moved")
    assert "moved" not in path.read_text()
