"""Issue #17's scenario: a consume-transform-produce loop of 3 members (each its own process, a
transactional producer plus a read_committed consumer of one group), 20,000 input records, one
member SIGKILLed mid-transaction and the daemon SIGKILLed and restarted once during the run. The
output read with read_committed holds every input exactly once, and the group's committed offsets
never point past output that is not committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from groupd.ops.kafka_client import LATEST_TIMESTAMP, KafkaClient

from tests.e2e.test_transactions_e2e import _kafkajs_path, read_all
from tests.support.daemon import GroupdProcess

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 20_000
PARTITIONS = 3


class EosMember:
    """``tests.support.eos_member`` in its own process; its stdout lines are read by a thread."""

    def __init__(self, client: str, bootstrap: str, group: str, source: str, sink: str, txn_id: str, log: Path):
        self.stderr = log.open("ab")
        args = [bootstrap, group, source, sink, txn_id]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if client == "kafkajs":
            cmd = ["node", str(ROOT / "tests" / "support" / "kafkajs_eos_member.js"), *args]
            env["NODE_PATH"] = _kafkajs_path() or ""
        else:
            cmd = [sys.executable, "-m", "tests.support.eos_member", client, *args]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        self.txn_id = txn_id
        self.committed = 0
        self.opened = threading.Event()
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode().strip()
            self.lines.append(line)
            if line == "open":
                self.opened.set()
            elif line.startswith("committed "):
                self.committed = int(line.split()[1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stderr.close()


def _wait(cond, what: str, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _input(bootstrap: str, topic: str) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every input record."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):
        p.produce(topic, key=str(i).encode(), value=b"%05d" % i)
        if i % 5000 == 4999:
            p.flush(30)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: dict[tuple[int, int], bytes] = {}
    done: set[int] = set()
    while len(done) < PARTITIONS:
        m = c.poll(1)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaException(m.error())
            done.add(m.partition())
            continue
        out[(m.partition(), m.offset())] = m.value()
    c.close()
    assert len(out) == RECORDS
    return out


def _committed_offsets_are_covered_by_committed_output(
    bootstrap: str, group: str, source: str, sink: str, inputs: dict[tuple[int, int], bytes]
) -> int:
    """Every input below the group's committed offsets has its output committed: a read_committed
    consumer of the output finds them all (it may have to wait for transactions still open before
    them in the log, the last stable offset). Returns how many inputs the offsets cover."""
    with KafkaClient(bootstrap, timeout=30) as client:
        committed = client.committed_offsets(group)
    wanted = {b"out:" + v for (p, o), v in inputs.items() if o < committed.get((source, p), 0)}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "isolation.level": "read_committed"})
    c.assign([TopicPartition(sink, p, 0) for p in range(PARTITIONS)])
    missing = set(wanted)
    deadline = time.monotonic() + 30
    try:
        while missing and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if not m.error():
                    missing.discard(m.value())
    finally:
        c.close()
    assert not missing, (
        f"offsets committed past {len(missing)} inputs whose output is not committed: {sorted(missing)[:5]}"
    )
    return len(wanted)


@pytest.mark.parametrize("client", ["confluent", "aiokafka", "kafka-python", "kafkajs"])
def test_consume_transform_produce_exactly_once_through_a_member_kill_and_a_daemon_kill(
    tmp_path: Path, client: str
) -> None:
    if client == "kafkajs" and _kafkajs_path() is None:
        pytest.skip("kafkajs not found: npm install --prefix DIR kafkajs@2, then GROUPD_KAFKAJS_PATH=DIR/node_modules")
    daemon = GroupdProcess(tmp_path / "data", "--group-initial-rebalance-delay-ms", "0").start()
    members: list[EosMember] = []
    source, sink, group = "eos-in", "eos-out", "eos"
    try:
        with KafkaClient(daemon.bootstrap) as admin:
            admin.create_topic(source, PARTITIONS, -1, {})
            admin.create_topic(sink, PARTITIONS, -1, {})
        inputs = _input(daemon.bootstrap, source)
        members = [
            EosMember(client, daemon.bootstrap, group, source, sink, f"eos-{client}-{i}", tmp_path / f"member{i}.log")
            for i in range(3)
        ]

        def progress() -> int:
            return sum(m.committed for m in members)

        _wait(lambda: progress() >= 3000, f"members stuck at {progress()}", 30)
        victim = max(members, key=lambda m: m.committed)
        victim.opened.clear()
        assert victim.opened.wait(10), "the victim never opened a transaction"
        victim.kill()  # its flushed, uncommitted records stay in the log; its transaction times out

        before = progress()
        _wait(lambda: progress() >= before + 3000, f"members stuck at {progress()} after the kill", 30)
        daemon.kill()
        daemon.start(port=daemon.port)
        covered = _committed_offsets_are_covered_by_committed_output(daemon.bootstrap, group, source, sink, inputs)
        assert covered > 0

        def all_committed() -> bool:
            with KafkaClient(daemon.bootstrap, timeout=30) as admin:
                ends = admin.list_offsets([(source, p) for p in range(PARTITIONS)], LATEST_TIMESTAMP)
                return admin.committed_offsets(group) == ends

        restarted: list[str] = []

        def supervise() -> bool:
            # A member whose producer was fenced (its transaction timed out while the daemon was
            # down) exits, as an application must; its supervisor starts it again, same id.
            for i, m in enumerate(members):
                if m is not victim and m.proc.poll() is not None:
                    restarted.append(f"member {i} exited {m.proc.returncode}: {m.lines[-2:]}")
                    m.kill()
                    log = tmp_path / f"member{i}.log"
                    members[i] = EosMember(client, daemon.bootstrap, group, source, sink, m.txn_id, log)
            return all_committed()

        _wait(supervise, f"the group never committed every input (restarts: {restarted})", 60)

        output = Counter(read_all(daemon.bootstrap, sink, "read_committed", PARTITIONS, timeout=60))
        expected = Counter(b"out:" + v for v in inputs.values())
        missing, duplicated = expected - output, output - expected
        assert (len(missing), len(duplicated)) == (0, 0), (list(missing)[:5], list(duplicated)[:5], restarted)
        assert (
            _committed_offsets_are_covered_by_committed_output(daemon.bootstrap, group, source, sink, inputs) == RECORDS
        )
        # the victim's open transaction was in the log: read_uncommitted sees more than the inputs
        assert len(read_all(daemon.bootstrap, sink, "read_uncommitted", PARTITIONS, timeout=60)) > RECORDS
    finally:
        for m in members:
            m.kill()
        daemon.stop()
