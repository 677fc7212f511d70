"""The shell's short path of OffsetCommit (``native.steady_commit`` + its ``finish``, what
``GroupShell.handler("OffsetCommit")`` runs) against the general path (``GroupCoordinator.handle``
-> ``OffsetManager.commit`` -> ``append_done`` through Results): for random sequences of commits
(right and wrong members, generations and instance ids, unknown groups and topics, versions 0-9),
rebalances (a new generation), failed appends and unloads with commits in flight, the two
coordinators answer the same bytes, write the same batches, and hold the same offsets, commits
in flight, pending appends, groups and deadlines after every step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from groupd.coordinator import CoordinatorConfig, native, partition_for
from groupd.coordinator.result import Append
from groupd.protocol.messages.offsets import OFFSET_COMMIT
from harness import Ctx, Shell
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_native_commit import wire_body
from test_rebalance import assignment

needs_native = pytest.mark.skipif(not native.available(), reason="the C module is not built (or GROUPD_NO_NATIVE=1)")

NOW = 1_700_000_000_000
TOPICS = {"t": 4, "orders": 2, "empty": 0}  # "gone" is unknown
GROUP_PARTITION = partition_for("g", CoordinatorConfig().num_offsets_partitions)


@dataclass(eq=False)
class RCtx(Ctx):
    """A ctx the short path answers directly (``ctx.respond``), as it answers a Request."""

    shell: Any = None

    def respond(self, response: dict[str, Any]) -> None:
        assert self not in self.shell.answers, f"{self} answered twice"
        self.shell.answers[self] = response


@dataclass(eq=False)
class Short:
    """An append the short path handed out: what ``GroupShell._commit_append`` queues."""

    token: int
    partition: int
    batch: bytes
    finish: Any


class ShortShell(Shell):
    """A coordinator driven as ``GroupShell`` drives it on the short path."""

    def commit(self, version: int, body: dict[str, Any]) -> Ctx:
        ctx = RCtx(next(self._ctx), "OffsetCommit", self)
        self.sent.append(ctx)
        self.coord.enter(self.now, None)
        out = native.steady_commit(self.coord.offset_manager, version, body, ctx)
        if out is None:  # declined: the general path (as handle_offset_commit falls back)
            self.absorb(self.coord.handle(self.now, "OffsetCommit", version, body, ctx, client_id="c"))
        elif out != ():
            self.queued.append(Short(*out))  # type: ignore[arg-type]
            if self.auto_append:
                self.flush()
        self.settle()
        return ctx

    def flush(self, error: BaseException | int | None = None, count: int | None = None) -> None:
        done = 0
        while self.queued and (count is None or done < count):
            a = self.queued.popleft()
            if isinstance(a, Short):
                if error is None:
                    written = Append(a.token, a.partition, [], batch=a.batch)
                    self.log.extend((a.partition, r) for r in _records(written))
                    self.batches.append(written)
                if error is None and self.coord.runtime.pending.pop(a.token, None) is not None:
                    a.finish()
                else:
                    self.absorb(self.coord.append_done(self.now, a.token, error))
            else:
                if error is None:
                    self.log.extend((a.partition, r) for r in _records(a))
                    self.batches.append(a)
                self.absorb(self.coord.append_done(self.now, a.token, error))
            done += 1


def _records(a: Append) -> list[Any]:
    from harness import records_of

    return records_of(a)


class Pair:
    def __init__(self) -> None:
        config = CoordinatorConfig(offset_metadata_max_bytes=8)
        self.general = Shell(config=config, topic_partitions=TOPICS.get)
        self.short = ShortShell(config=config, topic_partitions=TOPICS.get)
        self.versions: list[int] = []
        self.clients = []
        for s in (self.general, self.short):
            s.now = NOW
            self.clients.append([s.client("c1"), s.client("c2")])
        self.rebalance()

    def shells(self) -> tuple[Shell, Shell]:
        return self.general, self.short

    def rebalance(self) -> None:
        """Both members (re)join and sync: a new generation (writes flushed first)."""
        for s, cs in zip(self.shells(), self.clients, strict=True):
            s.flush()
            s.auto_append = True
            group = s.coord.classic.groups.get("g")
            for c in cs:
                if group is None or c.member_id not in group.members:  # its session expired
                    c.member_id, c.generation, c.pending_join, c.pending_sync = "", -1, None, None
            for c in cs:
                c.join()
            for c in cs:
                if c.pending_join is None and s.state() == "PreparingRebalance":
                    c.join()
            s.deliver()
            leader = next((c for c in cs if c.is_leader), None)
            if leader is not None:
                leader.sync({m["member_id"]: assignment("t", i) for i, m in enumerate(leader.members)})
                for c in cs:
                    if not c.is_leader:
                        c.sync()
            s.deliver()
            s.auto_append = False

    def rejoin(self) -> None:
        """One member rejoins: the group prepares a rebalance (commits: REBALANCE_IN_PROGRESS)."""
        for s, cs in zip(self.shells(), self.clients, strict=True):
            s.auto_append = True
            cs[0].join()
            s.auto_append = False

    def commit(self, version: int, group: str, who: int, delta: int, instance: str | None, topics: Any) -> None:
        bodies = []
        for cs in self.clients:
            member = cs[who] if who < 2 else None
            body = {
                "group_id": group,
                "generation_id_or_member_epoch": (member.generation + delta) if member else -1 + delta,
                "member_id": member.member_id if member else ("" if who == 2 else "stranger"),
                "group_instance_id": instance,
                "retention_time_ms": -1,
                "topics": topics,
            }
            bodies.append(body)
        assert bodies[0] == bodies[1]  # the uuid factories agree: the same member ids on both sides
        self.general.send("OffsetCommit", version, wire_body(version, bodies[0]), client_id="c")
        self.short.commit(version, wire_body(version, bodies[1]))
        self.versions.append(version)

    def check(self) -> None:
        g, s = self.general, self.short
        answers = []
        for shell in (g, s):
            out = []
            for ctx in shell.sent:
                if ctx.api != "OffsetCommit":
                    continue
                out.append(shell.answer(ctx))
            answers.append(out)
        assert len(answers[0]) == len(answers[1]) == len(self.versions)
        for v, want, got in zip(self.versions, *answers, strict=True):
            assert (want is None) == (got is None)
            if want is not None:
                codec = OFFSET_COMMIT.response.codec(v)
                wire = [getattr(a, "wire_payload", None) or codec.encode(a) for a in (want, got)]
                assert wire[0] == wire[1]
        assert [a.batch for a in g.batches] == [a.batch for a in s.batches]
        assert g.records() == s.records()
        gm, sm = g.coord.offset_manager, s.coord.offset_manager
        assert gm.offsets == sm.offsets
        assert {k: gm._writing(k) for k in gm.inflight} == {k: sm._writing(k) for k in sm.inflight}
        assert sorted(g.coord.runtime.pending) == sorted(s.coord.runtime.pending)
        assert g.coord.runtime.abandoned == s.coord.runtime.abandoned
        assert {k: (v.state, v.generation, sorted(v.members)) for k, v in g.coord.classic.groups.items()} == {
            k: (v.state, v.generation, sorted(v.members)) for k, v in s.coord.classic.groups.items()
        }
        assert g.coord.next_deadline() == s.coord.next_deadline()


metadata = st.one_of(st.none(), st.just(""), st.text(max_size=10))
partitions = st.lists(
    st.fixed_dictionaries(
        {
            "partition_index": st.integers(-1, 4),
            "committed_offset": st.integers(-1, 2**40),
            "committed_leader_epoch": st.integers(-2, 5),
            "commit_timestamp": st.sampled_from([-1, 5]),
            "committed_metadata": metadata,
        }
    ),
    max_size=5,
)
topics = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from([*TOPICS, "gone"]), "partitions": partitions}), max_size=3
)
commit_op = st.tuples(
    st.just("commit"),
    st.integers(0, 9),
    st.sampled_from(["g", "g", "g", "other", ""]),
    st.sampled_from([0, 0, 0, 1, 2, 3]),  # c1, c2, no member id, a stranger's
    st.sampled_from([0, 0, 0, -1, 1]),
    st.sampled_from([None, None, "i-1"]),
    topics,
)
ops = st.lists(
    st.one_of(
        commit_op,
        commit_op,
        st.tuples(st.just("flush"), st.sampled_from([None, None, 56]), st.sampled_from([None, 1])),
        st.tuples(st.just("advance"), st.sampled_from([1, 1000, 20_000])),
        st.just(("rebalance",)),
        st.just(("rejoin",)),
        st.just(("unload",)),
    ),
    max_size=14,
)


@needs_native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops)
def test_the_short_path_answers_writes_and_folds_as_the_general_path(ops: list[tuple[Any, ...]]) -> None:
    pair = Pair()
    for op in ops:
        kind = op[0]
        if kind == "commit":
            pair.commit(*op[1:])
        elif kind == "flush":
            for s in pair.shells():
                s.flush(op[1], op[2])
        elif kind == "advance":
            for s in pair.shells():
                s.advance(op[1])
        elif kind == "rebalance":
            if all(s.coord.classic.groups.get("g") is not None for s in pair.shells()):
                pair.rebalance()
        elif kind == "rejoin":
            if all(s.state() == "Stable" for s in pair.shells()):
                pair.rejoin()
        elif kind == "unload":
            # the group's partition resigned with commits in flight (answered NOT_COORDINATOR,
            # their outcome ignored), then loaded again from the log
            for s in pair.shells():
                s.unload(GROUP_PARTITION)
                s.reload(GROUP_PARTITION)
        pair.check()
    for s in pair.shells():
        s.flush()
    pair.check()
    # and a restart reads the same offsets back from either log
    assert pair.general.reloaded().offset_manager.offsets == pair.short.reloaded().offset_manager.offsets
