"""GroupShell.elect/resign/move over real partition logs: a ``__consumer_offsets`` partition changes
coordinator at run time while appends are in flight (Kafka's onElection/onResignation).

A commit acknowledged before a move is visible on the new coordinator; one whose write was still in
flight at the resignation is answered NOT_COORDINATOR, and is durable or not -- never acknowledged
and lost; the new coordinator reads the log only once the writes started before the move are done.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from groupd.broker.group_shell import GroupShell
from groupd.coordinator import GroupCoordinator, Node, PartitionOwnership, partition_for
from groupd.storage import LogManager, PartitionLog, StorageError

OFFSETS = "__consumer_offsets"
GROUP = "g"
P = partition_for(GROUP)
N1, N2, N3 = Node(1, "b1", 9092), Node(2, "b2", 9093), Node(3, "b3", 9094)


@dataclass
class FakeRequest:
    """What the shell's handlers read of a ``Request``, and every answer it is given."""

    body: dict[str, Any]
    api_version: int
    client_id: str = "client"
    conn: Any = field(default_factory=lambda: SimpleNamespace(peer_host="127.0.0.1"))
    answers: list[dict[str, Any]] = field(default_factory=list)

    def respond(self, response: dict[str, Any]) -> None:
        self.answers.append(response)


class GatedAppender:
    """Writes to the log when the gate opens (or fails then, when told to)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False

    async def append(self, plog: PartitionLog, records: list[Any]) -> None:
        await self.gate.wait()
        if self.fail:
            raise StorageError("injected")
        plog.append_records(records)


@dataclass
class Node3:
    shell: GroupShell
    core: GroupCoordinator
    appender: GatedAppender

    def send(self, api: str, version: int, body: dict[str, Any], node_id: int | None = None) -> FakeRequest:
        req = FakeRequest(body, version)
        self.shell.handler(api, node_id)(req)  # type: ignore[arg-type]
        return req

    def commit(self, offset: int, node_id: int | None = None) -> FakeRequest:
        body = {
            "group_id": GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
        }
        return self.send("OffsetCommit", 8, body, node_id)

    async def committed(self, offset: int, node_id: int | None = None) -> int:
        """Commit and wait for the answer (the write is durable, or failed)."""
        req = self.commit(offset, node_id)
        await settle()
        return commit_code(req)

    def fetch(self, node_id: int | None = None) -> tuple[int, int | None]:
        req = self.send("OffsetFetch", 7, {"group_id": GROUP, "topics": None}, node_id)
        (resp,) = req.answers
        parts = [p for t in resp["topics"] for p in t["partitions"]]
        return resp["error_code"], parts[0]["committed_offset"] if parts else None


def commit_code(req: FakeRequest) -> int:
    (resp,) = req.answers  # exactly one answer, never two
    return resp["topics"][0]["partitions"][0]["error_code"]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def open_node(data_dir: Path, load: bool = True) -> tuple[Node3, LogManager]:
    """A shell over the logs in ``data_dir``; its group's partition loaded unless told otherwise
    (the others stay empty, their logs unopened)."""
    logs = LogManager(data_dir)
    logs.open_all()
    core = GroupCoordinator(ownership=PartitionOwnership(N1, 50, nodes=[N2, N3]))
    appender = GatedAppender()
    shell = GroupShell(core, lambda p: logs.get_or_create(OFFSETS, p), appender)  # type: ignore[arg-type]
    if load:
        shell.begin_load([P])
        await shell.load([P])
    return Node3(shell, core, appender), logs


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node3]:
    n, logs = await open_node(tmp_path)
    try:
        yield n
    finally:
        await n.shell.drain(1)
        logs.close()


async def test_an_acknowledged_commit_is_served_by_the_new_coordinator_after_a_move(node: Node3) -> None:
    assert await node.committed(41, node_id=1) == 0
    assert await node.shell.move(P, 2)
    assert node.fetch(node_id=1) == (16, None)  # the old coordinator refuses the group
    assert node.fetch(node_id=2) == (0, 41)
    assert await node.committed(42, node_id=2) == 0
    assert await node.shell.move(P, N1)
    assert node.fetch(node_id=1) == (0, 42)


async def test_a_commit_in_flight_at_the_resignation_is_not_acknowledged_and_the_new_load_waits_for_it(
    node: Node3,
) -> None:
    node.appender.gate.clear()
    req = node.commit(7)
    await settle()
    assert req.answers == []  # its write is on its way to the log
    resigned = node.shell.resign(P)
    assert commit_code(req) == 16  # CoordinatorRuntime fails the deferred event: NOT_COORDINATOR
    elected = node.shell.elect(P, N1)
    await settle()
    assert not resigned.done() and not elected.done()  # both wait for the write
    assert node.fetch() == (14, None)  # loading meanwhile
    node.appender.gate.set()
    assert await elected
    await resigned
    assert node.fetch() == (0, 7)  # the write landed after all, and the load read it
    assert len(req.answers) == 1


async def test_a_commit_whose_write_fails_after_the_resignation_is_answered_once_and_absent(node: Node3) -> None:
    node.appender.gate.clear()
    node.appender.fail = True
    req = node.commit(9)
    await settle()
    node.shell.resign(P)
    node.appender.gate.set()
    assert await node.shell.elect(P, N1)
    assert commit_code(req) == 16 and node.fetch() == (0, None)


async def test_a_load_overtaken_by_a_newer_election_resolves_false(node: Node3) -> None:
    assert await node.committed(5) == 0
    node.appender.gate.clear()
    node.commit(6)  # an append in flight holds the first load back
    await settle()
    first = node.shell.elect(P, N2)
    second = node.shell.elect(P, N3)
    node.appender.gate.set()
    assert (await first, await second) == (False, True)
    assert node.core.ownership.owner(P) == N3
    assert node.fetch(node_id=3)[0] == 0


async def test_a_stale_election_is_ignored_and_electing_the_active_leader_changes_nothing(node: Node3) -> None:
    epoch = node.core.partition_epoch(P)
    assert await node.shell.elect(P, N1)  # already leads it, active: nothing to do
    assert node.core.partition_epoch(P) == epoch
    assert not await node.shell.elect(P, N2, epoch=epoch)  # not newer
    assert node.core.ownership.owner(P) == N1
    assert await node.shell.elect(P, N2, epoch=epoch + 5)
    assert node.core.ownership.epoch(P) == epoch + 5


async def test_heartbeat_handlers_of_brokers_not_leading_the_partition_answer_not_coordinator(node: Node3) -> None:
    body = {"group_id": GROUP, "generation_id": 1, "member_id": "m"}
    assert node.send("Heartbeat", 3, body, node_id=2).answers[0]["error_code"] == 16
    assert node.send("Heartbeat", 3, body, node_id=1).answers[0]["error_code"] == 25  # served: unknown member
    assert node.send("Heartbeat", 3, body).answers[0]["error_code"] == 25  # the single-broker path
    node.shell.resign(P)
    assert node.send("Heartbeat", 3, body, node_id=1).answers[0]["error_code"] == 16
    find = node.send("FindCoordinator", 1, {"key": GROUP, "key_type": 0}, node_id=2)
    assert find.answers[0]["error_code"] == 15


async def restart_after_commit(data_dir: Path, offset: int) -> tuple[Node3, LogManager, list[Any]]:
    """Commit ``offset``, stop, and open the directory again without loading it; the list collects
    every record the new core replays."""
    first, logs = await open_node(data_dir)
    assert await first.committed(offset) == 0
    logs.close()
    node, logs = await open_node(data_dir, load=False)
    replayed: list[Any] = []
    plain_replay = node.core.replay
    node.core.replay = lambda k, v: (replayed.append(k), plain_replay(k, v))  # type: ignore[method-assign]
    # the load's fast path for plain commits still in bytes (it replays without core.replay)
    plain_encoded = node.core.replay_encoded

    def encoded(records: list[Any], start: int) -> int:
        end = plain_encoded(records, start)
        replayed.extend(r[2] for r in records[start:end])
        return end

    node.core.replay_encoded = encoded  # type: ignore[method-assign]
    return node, logs, replayed


async def test_a_partition_elected_during_the_start_up_load_is_replayed_once(tmp_path: Path) -> None:
    """The cluster assigns coordinators right after the start-up load began: the partition moved
    away from the start-up load is loaded by its election alone, once."""
    node, logs, replayed = await restart_after_commit(tmp_path, 41)
    node.shell.begin_load([P])
    elected = node.shell.elect(P, N2)
    await node.shell.load([P])
    assert await elected
    assert len(replayed) == 1 and node.core.partition_state(P) == "active"
    assert node.fetch(node_id=2) == (0, 41)
    logs.close()


async def test_electing_the_start_up_leader_again_during_the_start_up_load_replays_once(tmp_path: Path) -> None:
    node, logs, replayed = await restart_after_commit(tmp_path, 43)
    node.shell.begin_load([P])
    elected = node.shell.elect(P, N1)  # the leader it loads on, named again: a newer epoch
    await node.shell.load([P])
    assert await elected
    assert len(replayed) == 1 and node.fetch() == (0, 43)
    logs.close()


async def test_drain_cancels_a_load_still_waiting(node: Node3) -> None:
    node.appender.gate.clear()
    node.commit(8)
    await settle()
    elected = node.shell.move(P, N2)  # waits for the commit's write, which never comes
    await node.shell.drain(0.01)
    await asyncio.sleep(0)
    assert elected.cancelled()
    node.appender.gate.set()
