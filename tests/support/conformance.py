"""Processing consumers for the conformance suite: each library's own poll loop, commit after processing.

A worker subscribes to one topic in a group, "processes" every record by reporting it to a sink,
then commits exactly what it processed (``last offset + 1`` per partition) synchronously, and
reports every commit it made (acknowledged or failed) and every change of its assignment. The same
loop runs in a thread (:class:`ThreadWorker`) or in its own process (:class:`ProcessWorker`, which
can be SIGKILLed); a process reports over stdout as JSON lines, read back into the same
:class:`Recorder`, so a test checks one record of everything that happened, whoever did it.

Timestamps are ``time.monotonic()``, which on Linux is one clock for every process of the machine.

    python -m tests.support.conformance '{"kind": ..., "bootstrap": ..., "group": ..., "topic": ..., "name": ...}'
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.support import kafka_python

KINDS = ("kafka-python", "aiokafka", "confluent-kafka")


class Sink(Protocol):
    def processed(
        self, member: str, partition: int, offset: int, key: bytes | None, value: bytes, t: float
    ) -> None: ...

    def committed(self, member: str, offsets: dict[int, int], error: str | None, t: float) -> None: ...

    def assignment(self, member: str, partitions: frozenset[int], t: float) -> None: ...

    def error(self, member: str, message: str, t: float) -> None: ...


@dataclass(frozen=True)
class Processed:
    member: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    t: float


@dataclass(frozen=True)
class Commit:
    member: str
    offsets: dict[int, int]
    error: str | None
    t: float


@dataclass
class Recorder:
    """Everything every worker of a test reported, in the order it arrived."""

    processed_log: list[Processed] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    assignments: dict[str, list[tuple[float, frozenset[int]]]] = field(default_factory=lambda: defaultdict(list))
    errors: list[tuple[str, str, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def processed(self, member: str, partition: int, offset: int, key: bytes | None, value: bytes, t: float) -> None:
        with self._lock:
            self.processed_log.append(Processed(member, partition, offset, key, value, t))

    def committed(self, member: str, offsets: dict[int, int], error: str | None, t: float) -> None:
        with self._lock:
            self.commits.append(Commit(member, dict(offsets), error, t))

    def assignment(self, member: str, partitions: frozenset[int], t: float) -> None:
        with self._lock:
            self.assignments[member].append((t, partitions))

    def error(self, member: str, message: str, t: float) -> None:
        with self._lock:
            self.errors.append((member, message, t))

    # -- views --------------------------------------------------------------------------------

    def snapshot(self) -> list[Processed]:
        with self._lock:
            return list(self.processed_log)

    def count(self) -> int:
        with self._lock:
            return len(self.processed_log)

    def distinct(self) -> set[tuple[int, int]]:
        with self._lock:
            return {(r.partition, r.offset) for r in self.processed_log}

    def acknowledged_commits(self) -> list[Commit]:
        with self._lock:
            return sorted((c for c in self.commits if c.error is None), key=lambda c: c.t)

    def failed_commits(self) -> list[Commit]:
        with self._lock:
            return [c for c in self.commits if c.error is not None]

    def current_assignment(self, member: str) -> frozenset[int]:
        with self._lock:
            history = self.assignments.get(member)
            return history[-1][1] if history else frozenset()


def commit_decreases(commits: Iterable[Commit]) -> list[str]:
    """Acknowledged commits, in the order they were acknowledged: a partition's offset never goes back."""
    last: dict[int, tuple[int, str]] = {}
    bad = []
    for c in sorted(commits, key=lambda c: c.t):
        if c.error is not None:
            continue
        for p, off in sorted(c.offsets.items()):
            if p in last and off < last[p][0]:
                bad.append(f"partition {p}: {last[p][1]} committed {last[p][0]}, then {c.member} committed {off}")
            last[p] = (off, c.member)
    return bad


# ------------------------------------------------------------------------------------------------
# The loops. ``opts``: assignor, session_timeout_ms, heartbeat_interval_ms, max_poll_interval_ms,
# metadata_max_age_ms, max_records, batch_sleep (seconds of "work" per batch).


def _opt(opts: dict[str, Any], name: str) -> Any:
    defaults = {
        "assignor": "range",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
        "max_poll_interval_ms": 10000,
        "metadata_max_age_ms": 1000,
        "max_records": 500,
        "batch_sleep": 0.0,
    }
    return opts.get(name, defaults[name])


class _Held:
    """Tells the sink whenever the member's assignment (as its client reports it) changes."""

    def __init__(self, name: str, sink: Sink) -> None:
        self.name, self.sink = name, sink
        self.partitions: frozenset[int] | None = None

    def update(self, assignment: Iterable[Any]) -> None:
        now = frozenset(tp.partition for tp in assignment)
        if now != self.partitions:
            self.partitions = now
            self.sink.assignment(self.name, now, time.monotonic())


def _processed(name: str, sink: Sink, batches: dict[Any, list[Any]]) -> dict[int, int]:
    """Record a poll's records (kafka-python and aiokafka shape); the offsets to commit after them."""
    offsets: dict[int, int] = {}
    for tp, records in batches.items():
        for r in records:
            sink.processed(name, tp.partition, r.offset, r.key, r.value, time.monotonic())
        offsets[tp.partition] = records[-1].offset + 1
    return offsets


def run_loop(
    kind: str, bootstrap: str, group: str, topic: str, name: str, opts: dict[str, Any], sink: Sink, stop: Any
) -> None:
    """Consume until ``stop.is_set()``, then close the consumer (a graceful leave)."""
    fn: Callable[..., None] = {
        "kafka-python": _kafka_python,
        "aiokafka": lambda *a: asyncio.run(_aiokafka(*a)),
        "aiokafka-autocommit": lambda *a: asyncio.run(_aiokafka_autocommit(*a)),
        "confluent-kafka": _confluent,
    }[kind]
    fn(bootstrap, group, topic, name, opts, sink, stop)


def _kafka_python(
    bootstrap: str, group: str, topic: str, name: str, opts: dict[str, Any], sink: Sink, stop: Any
) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    strategy = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }[_opt(opts, "assignor")]
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        partition_assignment_strategy=[strategy],
        session_timeout_ms=_opt(opts, "session_timeout_ms"),
        heartbeat_interval_ms=_opt(opts, "heartbeat_interval_ms"),
        max_poll_interval_ms=_opt(opts, "max_poll_interval_ms"),
        metadata_max_age_ms=_opt(opts, "metadata_max_age_ms"),
        max_poll_records=_opt(opts, "max_records"),
        reconnect_backoff_max_ms=1000,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    kafka_python.subscribe(c, topic)
    held = _Held(name, sink)
    try:
        while not stop.is_set():
            offsets = _processed(name, sink, c.poll(timeout_ms=1000))
            if offsets:
                if _opt(opts, "batch_sleep"):
                    time.sleep(_opt(opts, "batch_sleep"))
                try:
                    c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
                    sink.committed(name, offsets, None, time.monotonic())
                except Exception as e:
                    sink.committed(name, offsets, repr(e), time.monotonic())
            held.update(c.assignment())
    finally:
        c.close()


async def _aiokafka(
    bootstrap: str, group: str, topic: str, name: str, opts: dict[str, Any], sink: Sink, stop: Any
) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[_opt(opts, "assignor")]
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        partition_assignment_strategy=(strategy,),
        session_timeout_ms=_opt(opts, "session_timeout_ms"),
        heartbeat_interval_ms=_opt(opts, "heartbeat_interval_ms"),
        max_poll_interval_ms=_opt(opts, "max_poll_interval_ms"),
        metadata_max_age_ms=_opt(opts, "metadata_max_age_ms"),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    # aiokafka rebalances in a background task, concurrently with this loop: what was processed
    # but not yet committed when partitions are revoked is committed by the listener, before the
    # member rejoins (aiokafka's documented way to commit on revocation).
    pending: dict[int, int] = {}

    async def commit(offsets: dict[int, int]) -> None:
        try:
            await c.commit({TopicPartition(topic, p): o for p, o in offsets.items()})
            sink.committed(name, offsets, None, time.monotonic())
            for p, o in offsets.items():
                if pending.get(p) == o:
                    del pending[p]
        except Exception as e:
            sink.committed(name, offsets, repr(e), time.monotonic())

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            todo = {tp.partition: pending[tp.partition] for tp in revoked if tp.partition in pending}
            if todo:
                await commit(todo)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    c.subscribe([topic], listener=Listener())
    await c.start()
    held = _Held(name, sink)
    try:
        while not stop.is_set():
            batches = await c.getmany(timeout_ms=100, max_records=_opt(opts, "max_records"))
            pending.update(_processed(name, sink, batches))
            if batches:
                if _opt(opts, "batch_sleep"):
                    await asyncio.sleep(_opt(opts, "batch_sleep"))
                if pending:
                    await commit(dict(pending))
            held.update(c.assignment())
    finally:
        await c.stop()


async def _aiokafka_autocommit(
    bootstrap: str, group: str, topic: str, name: str, opts: dict[str, Any], sink: Sink, stop: Any
) -> None:
    """aiokafka as its documentation's simplest group consumer: every setting at its default
    (auto-commit every 5 s and before rejoining, 10 s sessions, 3 s heartbeats, round-robin assignor)
    except ``auto_offset_reset="earliest"`` (the topic is filled before the group starts). Records
    are taken one at a time, which aiokafka's docs give as the way auto-commit is at-least-once;
    ``record_sleep`` seconds of (asynchronous) work each. The commits are aiokafka's own, not reported."""
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, client_id=name, auto_offset_reset="earliest"
    )
    await c.start()
    held = _Held(name, sink)
    work = opts.get("record_sleep", 0.0)
    try:
        while not stop.is_set():
            held.update(c.assignment())
            # One record per call, as ``async for`` takes them, but with a timeout so that a SIGTERM
            # is noticed while idle (asyncio.wait_for around getone can drop a record on 3.11).
            for tp, records in (await c.getmany(timeout_ms=200, max_records=1)).items():
                await asyncio.sleep(work)
                r = records[0]
                sink.processed(name, tp.partition, r.offset, r.key, r.value, time.monotonic())
    finally:
        await c.stop()


def _confluent(bootstrap: str, group: str, topic: str, name: str, opts: dict[str, Any], sink: Sink, stop: Any) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "partition.assignment.strategy": _opt(opts, "assignor"),
            "session.timeout.ms": _opt(opts, "session_timeout_ms"),
            "heartbeat.interval.ms": _opt(opts, "heartbeat_interval_ms"),
            "max.poll.interval.ms": _opt(opts, "max_poll_interval_ms"),
            "topic.metadata.refresh.interval.ms": _opt(opts, "metadata_max_age_ms"),
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    held = _Held(name, sink)
    # The assignment as librdkafka hands it over, before it fetches the committed offsets: its
    # background thread rebalances while this one processes, so a commit of the previous owner
    # can be acknowledged after that fetch (see _check_redelivered_only_if_not_committed).
    c.subscribe([topic], on_assign=lambda _c, partitions: held.update(partitions))
    try:
        while not stop.is_set():
            msgs = c.consume(_opt(opts, "max_records"), 0.1)
            offsets: dict[int, int] = {}
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        sink.error(name, str(m.error()), time.monotonic())
                    continue
                sink.processed(name, m.partition(), m.offset(), m.key(), m.value(), time.monotonic())
                offsets[m.partition()] = m.offset() + 1
            if offsets:
                if _opt(opts, "batch_sleep"):
                    time.sleep(_opt(opts, "batch_sleep"))
                try:
                    result = c.commit(
                        offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
                    )
                    bad = [str(tp.error) for tp in result or [] if tp.error is not None]
                    sink.committed(name, offsets, "; ".join(bad) or None, time.monotonic())
                except KafkaException as e:
                    sink.committed(name, offsets, str(e), time.monotonic())
            held.update(c.assignment())
    finally:
        c.close()


# ------------------------------------------------------------------------------------------------
# Workers


class ThreadWorker:
    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, name: str, sink: Sink, **opts: Any) -> None:
        self.kind, self.name = kind, name
        self.crash: BaseException | None = None
        self._stop = threading.Event()
        self._args = (kind, bootstrap, group, topic, name, opts, sink, self._stop)
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def _run(self) -> None:
        try:
            run_loop(*self._args)
        except BaseException as e:
            self.crash = e

    def start(self) -> ThreadWorker:
        self._thread.start()
        return self

    def close(self, timeout: float = 30.0) -> None:
        """Graceful: the loop ends and the consumer is closed (it leaves the group)."""
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self.name} did not close in {timeout}s")


class ProcessWorker:
    """The same loop in a child process reporting on stdout; ``kill()`` is a SIGKILL."""

    def __init__(
        self, kind: str, bootstrap: str, group: str, topic: str, name: str, sink: Recorder, **opts: Any
    ) -> None:
        self.kind, self.name, self.sink = kind, name, sink
        spec = {"kind": kind, "bootstrap": bootstrap, "group": group, "topic": topic, "name": name, "opts": opts}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.conformance", json.dumps(spec)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"{name}-reader")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            e = ev["e"]
            if e == "p":
                key = None if ev["k"] is None else ev["k"].encode("latin-1")
                self.sink.processed(self.name, ev["p"], ev["o"], key, ev["v"].encode("latin-1"), ev["t"])
            elif e == "c":
                self.sink.committed(self.name, {int(p): o for p, o in ev["o"].items()}, ev["err"], ev["t"])
            elif e == "a":
                self.sink.assignment(self.name, frozenset(ev["a"]), ev["t"])
            elif e == "x":
                self.sink.error(self.name, ev["m"], ev["t"])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)

    def close(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not close in {timeout}s") from None
        self._reader.join(10)


class _StdoutSink:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    def _out(self, ev: dict[str, Any]) -> None:
        with self._lock:
            sys.stdout.write(json.dumps(ev) + "\n")
            sys.stdout.flush()

    def processed(self, member: str, partition: int, offset: int, key: bytes | None, value: bytes, t: float) -> None:
        k = None if key is None else key.decode("latin-1")
        self._out({"e": "p", "p": partition, "o": offset, "k": k, "v": value.decode("latin-1"), "t": t})

    def committed(self, member: str, offsets: dict[int, int], error: str | None, t: float) -> None:
        self._out({"e": "c", "o": offsets, "err": error, "t": t})

    def assignment(self, member: str, partitions: frozenset[int], t: float) -> None:
        self._out({"e": "a", "a": sorted(partitions), "t": t})

    def error(self, member: str, message: str, t: float) -> None:
        self._out({"e": "x", "m": message, "t": t})


def main() -> None:
    spec = json.loads(sys.argv[1])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    run_loop(
        spec["kind"], spec["bootstrap"], spec["group"], spec["topic"], spec["name"], spec["opts"], _StdoutSink(), stop
    )


if __name__ == "__main__":
    main()
