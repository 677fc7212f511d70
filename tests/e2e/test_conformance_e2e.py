"""Issue 6 acceptance: the conformance suite, each scenario for kafka-python, aiokafka and
confluent-kafka (and kcat), against a real ``groupd serve``.

1. 10,000 keyed messages over 20 partitions; a group of 3 consumes each exactly once, in order.
2. Rebalance under load: members added, one SIGKILLed (a separate process), one closed; every
   message processed at least once, committed offsets never go back, one owner per partition.
3. Daemon restart mid-consumption (SIGTERM, and separately SIGKILL): consumers resume from their
   committed offsets; duplicates only from after the last acknowledged commit.
4. CreatePartitions on a subscribed topic: the new partitions are assigned and consumed.
5. kcat ``-G`` as a balanced group member alongside a Python consumer.
6. aiokafka at default settings (auto-commit), the busiest of three members SIGKILLed, and why
   such a group "stalls" when it processes whole ``getmany()`` batches (issue 16, item 14).

Every consumer "processes" a record by reporting it and then commits exactly what it processed
(``tests/support/conformance.py``). Stabilization times after each membership change of scenario 2
are printed (``-s`` shows them) and attached to the test report as ``stabilization``.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.conformance import KINDS, Commit, ProcessWorker, Recorder, ThreadWorker, commit_decreases
from tests.support.daemon import GroupdProcess
from tests.support.groups import admin_for, forget_admin, wait_balanced

pytestmark = pytest.mark.e2e

# Cooperative rebalancing where the library has it (KIP-429): librdkafka and kafka-python 3
# (``CooperativeStickyAssignor``); aiokafka 0.14 has only eager assignors.
REBALANCE_ASSIGNOR = {
    "kafka-python": "cooperative-sticky",
    "aiokafka": "range",
    "confluent-kafka": "cooperative-sticky",
}

Sent = dict[int, list[tuple[int, bytes, bytes]]]  # partition -> [(offset, key, value)] in offset order


def _admin(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, topic: str, partitions: int) -> str:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # kept alive until the answer is in
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(15)
    return topic


def _produce(bootstrap: str, topic: str, start: int, n: int, partitions: int | None = None) -> Sent:
    """``n`` keyed messages with values ``m<start..>``; partitioned by key (librdkafka's default
    partitioner), or round-robin over ``partitions`` explicitly when given."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True})
    sent: Sent = defaultdict(list)
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            sent[msg.partition()].append((msg.offset(), msg.key(), msg.value()))  # type: ignore[attr-defined]

    for i in range(start, start + n):
        kwargs = {} if partitions is None else {"partition": i % partitions}
        p.produce(topic, key=b"key-%d" % (i % 997), value=b"m%07d" % i, on_delivery=report, **kwargs)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert errors == []
    return {part: sorted(msgs) for part, msgs in sent.items()}


def _merge(a: Sent, b: Sent) -> Sent:
    out: Sent = defaultdict(list)
    for s in (a, b):
        for p, msgs in s.items():
            out[p] += msgs
    return {p: sorted(m) for p, m in out.items()}


def _ids(sent: Sent) -> set[tuple[int, int]]:
    return {(p, o) for p, msgs in sent.items() for o, _, _ in msgs}


def _wait(cond: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s: {what()}")


def _wait_all_processed(rec: Recorder, want: set[tuple[int, int]], timeout: float) -> None:
    _wait(
        lambda: want <= rec.distinct(),
        timeout,
        lambda: (
            f"{len(want - rec.distinct())} of {len(want)} messages never processed, "
            f"e.g. {sorted(want - rec.distinct())[:5]}"
        ),
    )


def _check_processed_match_sent(rec: Recorder, sent: Sent) -> None:
    """What was processed is what was sent at those offsets (key and value)."""
    by_offset = {(p, o): (k, v) for p, msgs in sent.items() for o, k, v in msgs}
    wrong = [r for r in rec.snapshot() if by_offset.get((r.partition, r.offset)) != (r.key, r.value)]
    assert not wrong, f"processed records that do not match what was produced: {wrong[:5]}"


def _close_all(workers: list[ThreadWorker | ProcessWorker]) -> None:
    for w in workers:
        try:
            w.close()
        except AssertionError:
            if isinstance(w, ProcessWorker):
                w.kill()
    crashed = [(w.name, w.crash) for w in workers if isinstance(w, ThreadWorker) and w.crash is not None]
    assert not crashed, crashed


class CommitWatcher:
    """Reads the group's committed offsets back from the broker every 100 ms (OffsetFetch through
    librdkafka's admin client) and notes any partition whose committed offset went back."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap, self.group = bootstrap, group
        self.last: dict[int, int] = {}
        self.reads = 0
        self.decreases: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="commit-watcher")

    def __enter__(self) -> CommitWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(20)

    def _run(self) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = None
        while not self._stop.wait(0.1):
            try:
                if admin is None:
                    admin = _admin(self.bootstrap)
                fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(self.group)])[self.group]
                tps = fut.result(timeout=3).topic_partitions
            except Exception:
                admin = None  # a restarted daemon: start over with a fresh client
                continue
            self.reads += 1
            for tp in tps:
                if tp.error is not None or tp.offset < 0:
                    continue
                prev = self.last.get(tp.partition)
                if prev is not None and tp.offset < prev:
                    self.decreases.append(f"partition {tp.partition}: read {prev}, then {tp.offset}")
                self.last[tp.partition] = max(tp.offset, prev or 0)


@pytest.fixture
def cleanup() -> Iterator[list[ThreadWorker | ProcessWorker]]:
    """Workers a test started; whatever is still running at the end is closed (processes killed)."""
    workers: list[ThreadWorker | ProcessWorker] = []
    yield workers
    for w in workers:
        if isinstance(w, ProcessWorker):
            w.kill()
        else:
            with contextlib.suppress(AssertionError):
                w.close(10)


# ------------------------------------------------------------------------------------------------
# 1. exactly once, in order


@pytest.mark.parametrize("kind", KINDS)
def test_group_of_three_consumes_10000_messages_exactly_once_in_order(
    groupd: GroupdProcess, unique: str, kind: str, cleanup: list[ThreadWorker | ProcessWorker]
) -> None:
    topic = _create(groupd.bootstrap, f"c1-{unique}", 20)
    group = f"c1-{unique}"
    sent = _produce(groupd.bootstrap, topic, 0, 10_000)
    assert sum(map(len, sent.values())) == 10_000 and len(sent) == 20
    rec = Recorder()
    workers: list[ThreadWorker | ProcessWorker] = [
        ThreadWorker(kind, groupd.bootstrap, group, topic, f"{kind}-{i}", rec, assignor="range") for i in range(3)
    ]
    cleanup += workers
    for w in workers:
        w.start()
    _wait_all_processed(rec, _ids(sent), 90)
    view = wait_balanced(groupd.bootstrap, group, topic, 3, 20)
    _close_all(workers)

    assert rec.errors == []
    assert rec.failed_commits() == []
    # The three members shared the work (each held partitions in the final generation).
    assert sorted(len(m["assignment"]) for m in view.members) == [6, 7, 7]
    _check_processed_match_sent(rec, sent)
    # Exactly once, and each partition in offset order (arrival order across members: a partition
    # moves to a new owner only after its old owner committed and gave it up).
    got: dict[int, list[int]] = defaultdict(list)
    for r in rec.snapshot():
        got[r.partition].append(r.offset)
    for p, msgs in sent.items():
        assert got[p] == [o for o, _, _ in msgs], f"partition {p}: processed {got[p][:20]}..."
    # The last commits are the log end offsets.
    last: dict[int, int] = {}
    for c in rec.acknowledged_commits():
        last.update(c.offsets)
    assert last == {p: msgs[-1][0] + 1 for p, msgs in sent.items()}
    assert commit_decreases(rec.commits) == []


# ------------------------------------------------------------------------------------------------
# 2. rebalance under load


class _SteadyProducer:
    """Produces keyed messages at roughly ``rate`` per second until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 2000) -> None:
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.sent: Sent = {}
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="steady-producer")

    def _run(self) -> None:
        try:
            i = 0
            chunk = self.rate // 10
            while not self._stop.is_set():
                self.sent = _merge(self.sent, _produce(self.bootstrap, self.topic, i, chunk))
                i += chunk
                self._stop.wait(0.1)
        except BaseException as e:
            self.error = e

    def __enter__(self) -> _SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> Sent:
        self._stop.set()
        self._thread.join(60)
        assert self.error is None, self.error
        return self.sent


@pytest.mark.parametrize("kind", KINDS)
def test_rebalance_under_load(
    groupd: GroupdProcess,
    unique: str,
    kind: str,
    cleanup: list[ThreadWorker | ProcessWorker],
    record_property: Callable[[str, object], None],
) -> None:
    partitions = 20
    topic = _create(groupd.bootstrap, f"c2-{unique}", partitions)
    group = f"c2-{unique}"
    assignor = REBALANCE_ASSIGNOR[kind]
    rec = Recorder()
    # A little work per batch, so there is a backlog to hand over at every change.
    opts = {"assignor": assignor, "max_records": 200, "batch_sleep": 0.02}

    def thread(name: str) -> ThreadWorker:
        w = ThreadWorker(kind, groupd.bootstrap, group, topic, name, rec, **opts)
        cleanup.append(w)
        return w.start()

    stabilization: dict[str, float] = {}

    def change(label: str, n_members: int, action: Callable[[], object]) -> None:
        t0 = time.monotonic()
        action()
        wait_balanced(groupd.bootstrap, group, topic, n_members, partitions, timeout=40)
        stabilization[label] = round(time.monotonic() - t0, 2)

    with CommitWatcher(groupd.bootstrap, group) as watcher, _SteadyProducer(groupd.bootstrap, topic) as producer:
        a, b = thread("a"), thread("b")
        wait_balanced(groupd.bootstrap, group, topic, 2, partitions, timeout=40)
        _wait(lambda: rec.count() > 1000, 20, lambda: f"only {rec.count()} processed")
        killable: list[ProcessWorker] = []

        def add_process_member() -> None:
            # Slow work between processing and committing: the SIGKILL most likely lands in that
            # window and leaves processed-but-uncommitted records for the next owner.
            w = ProcessWorker(kind, groupd.bootstrap, group, topic, "c", rec, **{**opts, "batch_sleep": 0.3})
            cleanup.append(w)
            killable.append(w)

        change("add member c (process)", 3, add_process_member)
        d = None

        def add_thread_member() -> None:
            nonlocal d
            d = thread("d")

        change("add member d", 4, add_thread_member)
        n_before_kill = len(rec.distinct())
        change("SIGKILL member c", 3, killable[0].kill)
        change("close member d", 2, lambda: d.close())  # type: ignore[union-attr]
        sent = producer.stop()
        _wait_all_processed(rec, _ids(sent), 60)
        final = wait_balanced(groupd.bootstrap, group, topic, 2, partitions, timeout=30)
        # The survivors' own view of the final generation agrees with the coordinator's.
        _wait(
            lambda: (
                sorted(rec.current_assignment("a") | rec.current_assignment("b")) == list(range(partitions))
                and not rec.current_assignment("a") & rec.current_assignment("b")
            ),
            20,
            lambda: f"a holds {sorted(rec.current_assignment('a'))}, b holds {sorted(rec.current_assignment('b'))}",
        )
        by_client = {m["client_id"]: {p for _, p in m["assignment"]} for m in final.members}
        assert by_client == {"a": set(rec.current_assignment("a")), "b": set(rec.current_assignment("b"))}
        # Let the survivors commit what they processed last.
        end = {p: msgs[-1][0] + 1 for p, msgs in sent.items()}
        _wait(lambda: watcher.last == end, 20, lambda: f"committed {watcher.last}, log end {end}")
        a.close()
        b.close()

    dups = sum(n - 1 for n in Counter((r.partition, r.offset) for r in rec.snapshot()).values())
    by_c = sum(1 for r in rec.snapshot() if r.member == "c")
    print(
        f"\n[{kind} {assignor}] stabilization after each membership change (s): {stabilization}; "
        f"{len(rec.distinct())} messages, {dups} processed again, {by_c} by the killed member, "
        f"{len(rec.failed_commits())} failed commits {sorted({c.error or '' for c in rec.failed_commits()})}"
    )
    record_property("stabilization", stabilization)
    assert final.protocol == assignor
    assert n_before_kill > 1000
    assert watcher.reads > 10 and watcher.decreases == []
    assert commit_decreases(rec.commits) == []
    assert rec.errors == []
    _check_processed_match_sent(rec, sent)
    assert [w.name for w in (a, b, d) if w is not None and w.crash is not None] == []
    _check_redelivered_only_if_not_committed(rec)


def _held_since(rec: Recorder, member: str, partition: int, t: float) -> float:
    """When ``member`` (as its client reported it) last started holding ``partition`` before ``t``."""
    since = t
    for at, partitions in reversed([h for h in rec.assignments.get(member, []) if h[0] <= t]):
        if partition not in partitions:
            break
        since = at
    return since


def _check_redelivered_only_if_not_committed(rec: Recorder) -> None:
    """Commit after processing gives at-least-once: a record is processed again only if the member
    that processed it first had no commit covering it acknowledged before the next owner was given
    the partition (it was killed first, its commit failed, or the commit came too late). An
    acknowledged commit followed by a redelivery would mean a lost commit.

    "Too late" is Kafka's own: a classic group accepts a commit from any member of the current
    generation, of any partition (``ClassicGroup.validateOffsetCommit`` checks member and
    generation, not the assignment), so a member that processed a batch, lost the partition in a
    rebalance its client ran meanwhile (librdkafka rebalances in its own thread) and commits with
    the new generation is acknowledged, after the new owner fetched the older offset."""
    acked = rec.acknowledged_commits()
    first: dict[tuple[int, int], str] = {}
    bad = []
    for r in rec.snapshot():
        k = (r.partition, r.offset)
        if k not in first:
            first[k] = r.member
            continue
        given = _held_since(rec, r.member, r.partition, r.t)
        acks = [
            (round(c.t, 3), c.offsets[r.partition])
            for c in acked
            if c.member == first[k] and c.offsets.get(r.partition, 0) > r.offset
        ]
        if any(t < given for t, _o in acks):
            bad.append(
                f"{k} processed by {first[k]}, whose commit covered it, and again by {r.member} at {r.t:.3f}"
                f" (given it at {given:.3f}; covering commits acknowledged at {acks[:3]}; {r.member}'s assignments"
                f" {[(round(t, 3), sorted(ps)) for t, ps in rec.assignments.get(r.member, [])]};"
                f" {first[k]}'s {[(round(t, 3), sorted(ps)) for t, ps in rec.assignments.get(first[k], [])]})"
            )
    assert bad == [], bad[:3]


# ------------------------------------------------------------------------------------------------
# 3. daemon restart mid-consumption


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("kind", KINDS)
def test_daemon_restart_mid_consumption_resumes_from_committed_offsets(
    tmp_path: Path, kind: str, sig: str, cleanup: list[ThreadWorker | ProcessWorker]
) -> None:
    partitions = 6
    d = GroupdProcess(tmp_path / "data").start()
    try:
        topic = _create(d.bootstrap, "restart", partitions)
        group = "restart"
        sent = _produce(d.bootstrap, topic, 0, 6000)
        rec = Recorder()
        # Slow enough that the restart lands in the middle: ~2 x 100 records per 50 ms.
        workers: list[ThreadWorker | ProcessWorker] = [
            ThreadWorker(kind, d.bootstrap, group, topic, f"{kind}-{i}", rec, max_records=100, batch_sleep=0.05)
            for i in range(2)
        ]
        cleanup += workers
        for w in workers:
            w.start()
        wait_balanced(d.bootstrap, group, topic, 2, partitions, timeout=40)
        _wait(lambda: rec.count() >= 1500, 30, lambda: f"only {rec.count()} processed")

        t_down = time.monotonic()
        if sig == "SIGTERM":
            assert d.stop() == 0
        else:
            d.kill()
        processed_before = rec.snapshot()
        acked_before: list[Commit] = [c for c in rec.acknowledged_commits() if c.t < t_down]
        assert len(processed_before) < 6000, "consumption finished before the restart"
        d.start(port=d.port)
        forget_admin(d.bootstrap)
        t_up = time.monotonic()
        # The group comes back from the log as it was (Stable, same members), as in Kafka.
        wait_balanced(d.bootstrap, group, topic, 2, partitions, timeout=30)
        _wait(lambda: rec.count() > len(processed_before), 30, lambda: "nothing processed after the restart")
        resumed_after = time.monotonic() - t_up
        # A member that joins now moves partitions: their new owner starts at the committed offsets
        # the restarted daemon read back from its log.
        newcomer = ThreadWorker(kind, d.bootstrap, group, topic, "newcomer", rec, max_records=100, batch_sleep=0.05)
        workers.append(newcomer)
        newcomer.start()
        wait_balanced(d.bootstrap, group, topic, 3, partitions, timeout=30)

        more = _produce(d.bootstrap, topic, 6000, 1200)
        sent = _merge(sent, more)
        _wait_all_processed(rec, _ids(sent), 60)
        end = {p: msgs[-1][0] + 1 for p, msgs in sent.items()}

        def committed() -> dict[int, int]:
            last: dict[int, int] = {}
            for c in rec.acknowledged_commits():
                for p, o in c.offsets.items():
                    last[p] = max(o, last.get(p, 0))
            return last

        _wait(lambda: committed() == end, 30, lambda: f"committed {committed()}, log end {end}")
        wait_balanced(d.bootstrap, group, topic, 3, partitions, timeout=30)
        _close_all(workers)
        forget_admin(d.bootstrap)
    finally:
        d.stop()

    _check_processed_match_sent(rec, sent)
    assert commit_decreases(rec.commits) == []
    last_commit: dict[int, int] = {}
    for c in acked_before:
        for p, o in c.offsets.items():
            last_commit[p] = max(o, last_commit.get(p, 0))
    high_before: dict[int, int] = {}
    for r in processed_before:
        high_before[r.partition] = max(r.offset, high_before.get(r.partition, -1))
    counts = Counter((r.partition, r.offset) for r in rec.snapshot())
    dups = sorted(k for k, n in counts.items() if n > 1)
    # Duplicates only between the last commit acknowledged before the daemon went down and what
    # had been processed by then: everything earlier was committed and is not read again.
    outside = [(p, o) for p, o in dups if not last_commit.get(p, 0) <= o <= high_before.get(p, -1)]
    assert outside == [], (
        f"re-processed offsets outside [last commit, processed before restart]: {outside[:10]}; "
        f"last commits {last_commit}, processed up to {high_before}"
    )
    # The newcomer started each partition it was given exactly at the offset committed for it
    # (by then): neither re-reading committed records nor skipping any.
    started: dict[int, tuple[int, float]] = {}
    for r in rec.snapshot():
        if r.member == "newcomer" and r.partition not in started:
            started[r.partition] = (r.offset, r.t)
    assert started, "the newcomer was given no partition"
    for p, (first, t) in started.items():
        at = max((c.offsets[p] for c in rec.acknowledged_commits() if p in c.offsets and c.t < t), default=0)
        assert first == at, f"partition {p}: newcomer started at {first}, committed offset was {at}"
    print(
        f"\n[{kind} {sig}] consuming again {resumed_after:.2f}s after the restart; {len(dups)} messages "
        f"processed twice (all after the last commit); {len(rec.failed_commits())} failed commits; "
        f"newcomer started at the committed offsets of partitions {sorted(started)}"
    )


# ------------------------------------------------------------------------------------------------
# 4. CreatePartitions on a subscribed topic


@pytest.mark.parametrize("kind", KINDS)
def test_added_partitions_are_assigned_and_consumed(
    groupd: GroupdProcess, unique: str, kind: str, cleanup: list[ThreadWorker | ProcessWorker]
) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = _create(groupd.bootstrap, f"c4-{unique}", 4)
    group = f"c4-{unique}"
    rec = Recorder()
    workers: list[ThreadWorker | ProcessWorker] = [
        ThreadWorker(kind, groupd.bootstrap, group, topic, f"{kind}-{i}", rec, metadata_max_age_ms=500)
        for i in range(2)
    ]
    cleanup += workers
    for w in workers:
        w.start()
    wait_balanced(groupd.bootstrap, group, topic, 2, 4, timeout=40)
    first = _produce(groupd.bootstrap, topic, 0, 400, partitions=4)
    _wait_all_processed(rec, _ids(first), 30)

    admin = _admin(groupd.bootstrap)
    t0 = time.monotonic()
    admin.create_partitions([NewPartitions(topic, 8)])[topic].result(15)
    view = wait_balanced(groupd.bootstrap, group, topic, 2, 8, timeout=40)
    took = time.monotonic() - t0
    second = _produce(groupd.bootstrap, topic, 400, 800, partitions=8)
    assert sorted(second) == list(range(8))
    sent = _merge(first, second)
    _wait_all_processed(rec, _ids(sent), 30)
    _wait(
        lambda: sorted(rec.current_assignment(f"{kind}-0") | rec.current_assignment(f"{kind}-1")) == list(range(8)),
        20,
        lambda: f"members hold {[sorted(rec.current_assignment(w.name)) for w in workers]}",
    )
    _close_all(workers)

    print(f"\n[{kind}] group balanced over 8 partitions {took:.2f}s after CreatePartitions")
    assert len(view.members) == 2
    assert rec.errors == []
    assert rec.failed_commits() == []
    _check_processed_match_sent(rec, sent)
    # The new partitions were read from their beginning, by the members they were assigned to.
    for p in range(4, 8):
        got = sorted({r.offset for r in rec.snapshot() if r.partition == p})
        assert got == [o for o, _, _ in sent[p]]
    assert commit_decreases(rec.commits) == []


# ------------------------------------------------------------------------------------------------
# 5. kcat -G alongside a Python consumer


class _Kcat:
    """``kcat -G``: librdkafka's balanced consumer (auto-commit), lines ``partition offset value``."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.lines: list[tuple[int, int, bytes]] = []
        self.proc = subprocess.Popen(
            [
                "kcat",
                "-b",
                bootstrap,
                "-G",
                group,
                "-o",
                "beginning",
                "-X",
                "partition.assignment.strategy=range",
                "-X",
                "session.timeout.ms=6000",
                "-X",
                "heartbeat.interval.ms=500",
                "-X",
                "client.id=kcat",
                "-X",
                "auto.commit.interval.ms=500",
                "-q",
                "-u",
                "-f",
                "%p %o %s\n",
                topic,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name="kcat-reader")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            p, o, v = line.rstrip(b"\n").split(b" ", 2)
            self.lines.append((int(p), int(o), v))

    def terminate(self, timeout: float = 15) -> int:
        self.proc.terminate()
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _kcat_produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    lines = "".join(f"key-{i % 97}:m{i:07d}\n" for i in range(start, start + n))
    subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", ":"], input=lines.encode(), timeout=30, check=True
    )


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (.ci/run installs it)")
@pytest.mark.parametrize("kind", KINDS)
def test_kcat_balanced_consumer_alongside_python(
    groupd: GroupdProcess, unique: str, kind: str, cleanup: list[ThreadWorker | ProcessWorker]
) -> None:
    partitions = 4
    topic = _create(groupd.bootstrap, f"c5-{unique}", partitions)
    group = f"c5-{unique}"
    kcat = _Kcat(groupd.bootstrap, group, topic)
    try:
        rec = Recorder()
        py = ThreadWorker(kind, groupd.bootstrap, group, topic, kind, rec, assignor="range")
        cleanup.append(py)
        py.start()
        view = wait_balanced(groupd.bootstrap, group, topic, 2, partitions, timeout=40)
        owners = {p: m["client_id"] for m in view.members for _, p in m["assignment"]}
        assert set(owners.values()) == {"kcat", kind}, owners

        _kcat_produce(groupd.bootstrap, topic, 0, 400)
        want = {b"m%07d" % i for i in range(400)}

        def values() -> set[bytes]:
            return {v for _, _, v in kcat.lines} | {r.value for r in rec.snapshot()}

        _wait(lambda: values() >= want, 30, lambda: f"{len(want - values())} messages not consumed")
        # Each side consumed exactly the partitions the coordinator gave it, each message once.
        assert {p for p, _, _ in kcat.lines} == {p for p, o in owners.items() if o == "kcat"}
        assert {r.partition for r in rec.snapshot()} == {p for p, o in owners.items() if o == kind}
        assert len(kcat.lines) + rec.count() == 400

        # kcat leaves (SIGTERM: it commits and closes its consumer); the Python member takes over
        # kcat's partitions from kcat's committed offsets and reads what is produced next.
        assert kcat.terminate() == 0
        wait_balanced(groupd.bootstrap, group, topic, 1, partitions, timeout=30)
        _kcat_produce(groupd.bootstrap, topic, 400, 100)
        want2 = {b"m%07d" % i for i in range(400, 500)}
        _wait(
            lambda: {r.value for r in rec.snapshot()} >= want2,
            30,
            lambda: f"{len(want2 - {r.value for r in rec.snapshot()})} messages not consumed",
        )
        py.close()
        assert py.crash is None
    finally:
        kcat.kill()
    kcat_values = [v for _, _, v in kcat.lines]
    assert len(kcat_values) == len(set(kcat_values))
    both = Counter(kcat_values + [r.value for r in rec.snapshot()])
    assert sorted(both) == sorted(want | want2)
    assert [v for v, n in both.items() if n > 1] == [], "kcat's committed offsets were not honoured"
    assert rec.errors == [] and rec.failed_commits() == []


# ------------------------------------------------------------------------------------------------
# 6. aiokafka at its default settings, the busiest member SIGKILLed (issue 16, item 14)


def test_aiokafka_defaults_consume_everything_after_the_busiest_member_is_sigkilled(
    groupd: GroupdProcess, unique: str, cleanup: list[ThreadWorker | ProcessWorker]
) -> None:
    """The shape of the reported stall: one member forms the group alone, two more join in the next
    generation, ~5 ms of work per record, the member holding most partitions is SIGKILLed halfway.
    Its partitions go to the survivors after its 10 s session, from the offsets it auto-committed
    (usually inside a stored batch: the producer lingers), and every record is processed at least
    once. Guards the survivors' OffsetFetch, ListOffsets and Fetch answers after the
    rebalances; the stall itself came from aiokafka's batch semantics (next test)."""
    partitions, n = 4, 1200
    topic = _create(groupd.bootstrap, f"c6-{unique}", partitions)
    group = f"c6-{unique}"
    sent = _produce(groupd.bootstrap, topic, 0, n, partitions=partitions)
    rec = Recorder()

    def member(name: str) -> ProcessWorker:
        w = ProcessWorker("aiokafka-autocommit", groupd.bootstrap, group, topic, name, rec, record_sleep=0.005)
        cleanup.append(w)
        return w

    workers = [member("m0")]
    _wait(lambda: len(rec.current_assignment("m0")) == partitions, 20, lambda: "m0 never held the whole topic")
    workers += [member("m1"), member("m2")]
    wait_balanced(groupd.bootstrap, group, topic, 3, partitions, timeout=20)
    # The members' own callbacks lag the coordinator's answer while they work through a batch
    # (aiokafka rebalances between getmany calls): wait until they too hold 2/1/1.
    _wait(
        lambda: sorted(len(rec.current_assignment(w.name)) for w in workers) == [1, 1, 2],
        20,
        lambda: f"assignments seen by the members: {[sorted(rec.current_assignment(w.name)) for w in workers]}",
    )
    _wait(lambda: len(rec.distinct()) >= n // 2, 20, lambda: f"only {len(rec.distinct())} processed")
    busiest = max(workers, key=lambda w: len(rec.current_assignment(w.name)))
    held = rec.current_assignment(busiest.name)
    busiest.kill()
    at_kill = len(rec.distinct())
    _wait_all_processed(rec, _ids(sent), 30)
    survivors = [w for w in workers if w is not busiest]
    wait_balanced(groupd.bootstrap, group, topic, 2, partitions, timeout=10)
    _close_all(survivors)  # a graceful stop commits the final positions (aiokafka's last auto-commit)

    _check_processed_match_sent(rec, sent)
    assert rec.errors == []
    assert len(held) == 2 and at_kill < n
    # The survivors took over what the killed member had not finished (and read it to the end).
    taken = {r.partition for r in rec.snapshot() if r.member != busiest.name and r.partition in held}
    assert taken, f"{busiest.name} had finished {sorted(held)} before it was killed"
    tps = admin_offsets(groupd.bootstrap, group)
    assert tps == {p: len(msgs) for p, msgs in sent.items()}
    print(f"\n[aiokafka defaults] {busiest.name} killed holding {sorted(held)} at {at_kill}/{n} processed")


def admin_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets as OffsetFetch answers them (librdkafka's admin client)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    fut = admin_for(bootstrap).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in fut.result(timeout=15).topic_partitions}


def test_aiokafka_getmany_autocommit_commits_a_batch_handed_out_but_not_yet_processed(
    groupd: GroupdProcess, unique: str
) -> None:
    """Why default-settings aiokafka consumers of a pre-filled topic "stall" when they process what
    ``getmany()`` returns: the first member alone gets every partition and one ``getmany()`` hands
    it every record (one Fetch answer carries all four partitions, as Kafka's does: 1 MiB per
    partition, 50 MiB per answer). Handing records out moves the positions. A member joining
    starts a rebalance, which aiokafka runs in a background task while the application is still
    working through the batch; before rejoining it auto-commits the positions, i.e. records not
    processed yet. Kafka accepts that commit (generation still current, group PreparingRebalance:
    ``ClassicGroup.validateOffsetCommit``) and so does groupd; the newcomers start at those offsets,
    the log end, and receive nothing. If the first member dies before it finishes the batch, those
    records are never processed (aiokafka's docs: auto-commit is at-least-once only one record at
    a time). Nothing in the daemon is stuck: the group is Stable and every partition is committed
    at its end."""
    import asyncio

    from aiokafka import AIOKafkaConsumer

    partitions, per = 4, 500
    topic = _create(groupd.bootstrap, f"c6b-{unique}", partitions)
    group = f"c6b-{unique}"
    sent = _produce(groupd.bootstrap, topic, 0, partitions * per, partitions=partitions)

    async def scenario() -> tuple[dict[int, int], dict[int, int], dict[int, int], dict[int, int], int]:
        def consumer(name: str) -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                topic, bootstrap_servers=groupd.bootstrap, group_id=group, client_id=name, auto_offset_reset="earliest"
            )

        first, newcomer = consumer("first"), consumer("newcomer")
        await first.start()
        try:
            batch: dict = {}
            for _ in range(20):
                if not batch:
                    batch = await first.getmany(timeout_ms=500)
            handed = {tp.partition: msgs[-1].offset + 1 for tp, msgs in batch.items()}
            # The newcomer's start() returns once it is in the group (it joins in the background of
            # this loop, as a separate process would).
            joining = asyncio.create_task(newcomer.start())
            processed: dict[int, int] = {}
            for tp, msgs in batch.items():
                for m in msgs:
                    if len(first.assignment()) < partitions:
                        break  # revoked and reassigned while working through the batch
                    await asyncio.sleep(0.005)
                    processed[tp.partition] = m.offset + 1
            await joining
            committed = admin_offsets(groupd.bootstrap, group)
            deadline = time.monotonic() + 20  # its assignment is set by its own background task
            while not newcomer.assignment() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            positions = {tp.partition: await newcomer.position(tp) for tp in newcomer.assignment()}
            got = sum(map(len, (await newcomer.getmany(timeout_ms=1000)).values()))
            return handed, processed, committed, positions, got
        finally:
            await newcomer.stop()
            await first.stop()

    handed, processed, committed, positions, got = asyncio.run(scenario())
    end = {p: len(msgs) for p, msgs in sent.items()}
    assert handed == end, "one getmany() did not hand out the whole topic"
    assert sum(processed.values()) < sum(end.values()), "the batch was processed before the rebalance"
    # Committed at revocation: everything handed out, not what was processed.
    assert committed == end
    # The newcomer starts there, at the log end: it never receives a record.
    assert positions and all(positions[p] == end[p] for p in positions)
    assert got == 0
    print(f"\n[aiokafka getmany] processed {sum(processed.values())} of {sum(end.values())} before the rebalance")
