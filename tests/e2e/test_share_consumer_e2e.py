"""confluent-kafka 2.16's ``ShareConsumer`` (librdkafka's KIP-932 share consumer) at its default
settings against a real daemon, each consumer in its own process (``tests/support/share_member.py``):
three consumers share one partition's records, RELEASE hands a record to another consumer, REJECT
archives it, a consumer killed or stopped while it holds records loses them to the others, the
delivery-count limit archives a record that keeps failing, read_committed never sees aborted
records, and the daemon killed mid-stream and restarted redelivers exactly what was not
acknowledged."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from groupd.ops.kafka_client import KafkaClient

from tests.support.daemon import GroupdProcess
from tests.support.wire import Wire

ROOT = Path(__file__).resolve().parents[2]
LOCK_MS = 2000


class Member:
    """One share-consumer process and what it printed."""

    def __init__(self, d: GroupdProcess, group: str, topic: str, mode: str, arg: str = "") -> None:
        cmd = [sys.executable, "-m", "tests.support.share_member", d.bootstrap, group, topic, mode]
        if arg:
            cmd.append(arg)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def records(self) -> list[tuple[int, str, int]]:
        """(offset, value, delivery count) of every record it received."""
        out = []
        for line in list(self.lines):
            if line.startswith("msg "):
                _m, _p, offset, value, count = line.split(" ")
                out.append((int(offset), value, int(count)))
        return out

    def acked(self) -> list[tuple[int, int]]:
        out = []
        for line in list(self.lines):
            if line.startswith("acked "):
                out += [(int(o), int(t)) for o, t in (x.split(":") for x in line.split(" ")[1:])]
        return out

    def ack_failed(self) -> set[int]:
        """The offsets of acknowledgements whose commit failed."""
        out: set[int] = set()
        for line in list(self.lines):
            if line.startswith("ack-failed "):
                out |= {int(x.split(":")[0]) for x in line.split(" | ")[0].split(" ")[1:]}
        return out

    def printed(self, word: str) -> bool:
        return any(line.startswith(word) for line in list(self.lines))

    def stop(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        if m.proc.poll() is None:
            os.kill(m.proc.pid, signal.SIGCONT)
            m.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(cond: Callable[[], bool], timeout: float, what: str | Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what if isinstance(what, str) else what()}")


def group_configs(d: GroupdProcess, group: str, **configs: str) -> None:
    """The group's own configs (IncrementalAlterConfigs on the GROUP resource, type 32)."""
    with Wire(d.port) as w:
        w.pipeline(
            (
                "IncrementalAlterConfigs",
                1,
                {
                    "resources": [
                        {
                            "resource_type": 32,
                            "resource_name": group,
                            "configs": [
                                {"name": k.replace("_", "."), "config_operation": 0, "value": v}
                                for k, v in configs.items()
                            ],
                        }
                    ],
                    "validate_only": False,
                },
            )
        )
        _, answer = w.read()
    assert answer["responses"][0]["error_code"] == 0, answer


def new_topic(d: GroupdProcess) -> str:
    name = "share-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": d.bootstrap})
    admin.create_topics([NewTopic(name, 1)])[name].result(10)
    return name


def produce(d: GroupdProcess, topic: str, values: list[str], per_batch: int = 1_000_000) -> None:
    p = Producer({"bootstrap.servers": d.bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode())
        if (i + 1) % per_batch == 0:
            p.flush(10)
    assert p.flush(10) == 0


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[GroupdProcess]:
    d = GroupdProcess(tmp_path / "data", "--group-share-record-lock-duration-ms", str(LOCK_MS))
    d.start()
    try:
        yield d
    finally:
        d.stop()


def _members_assigned(d: GroupdProcess, group: str) -> int:
    """How many members of the share group hold an assignment (ShareGroupDescribe)."""
    with KafkaClient(d.bootstrap) as client:
        _, resp = client.coordinator(group).send(
            "ShareGroupDescribe", {"group_ids": [group], "include_authorized_operations": False}
        )
    (g,) = resp["groups"]
    return sum(1 for m in g["members"] if (m.get("assignment") or {}).get("topic_partitions"))


def _start_offsets(d: GroupdProcess, group: str) -> list[tuple[str, list[tuple[int, int]]]] | None:
    """The group's share-partition start offsets (DescribeShareGroupOffsets), None when unanswered."""
    try:
        with Wire(d.port) as w:
            w.pipeline(("DescribeShareGroupOffsets", 0, {"groups": [{"group_id": group, "topics": None}]}))
            _, described = w.read()
    except OSError:
        return None
    (g,) = described["groups"]
    return [
        (t["topic_name"], [(p["partition_index"], p["start_offset"]) for p in t["partitions"]]) for t in g["topics"]
    ]


def _setup(d: GroupdProcess, **configs: str) -> tuple[str, str]:
    group = "sg-" + uuid.uuid4().hex[:8]
    group_configs(d, group, share_auto_offset_reset="earliest", **configs)
    return group, new_topic(d)


def test_three_share_consumers_share_one_partition_each_record_once(tmp_path: Path, members: list[Member]) -> None:
    # the default lock duration (30 s): nothing expires while the three keep polling
    with GroupdProcess(tmp_path / "data") as d:
        group, topic = _setup(d)
        # All three in the group (each assigned the partition) before the records arrive: started
        # after them, the first consumer could read all 3,000 before the others had joined.
        members += [Member(d, group, topic, "accept") for _ in range(3)]
        wait_for(lambda: _members_assigned(d, group) == 3, 60, "three members assigned the partition")
        produce(d, topic, [f"r{i}" for i in range(3000)], per_batch=50)
        wait_for(lambda: len({o for m in members for o, _v, _c in m.records()}) >= 3000, 60, "3000 records")
        time.sleep(1)  # a redelivery, if any, would show up now
        for m in members:
            m.stop()
        offsets = [o for m in members for o, _v, _c in m.records()]
        assert sorted(offsets) == list(range(3000)), "each record delivered exactly once"
        assert all(c == 1 for m in members for _o, _v, c in m.records())
        assert sum(1 for m in members if m.records()) >= 2, [len(m.records()) for m in members]
        # DescribeShareGroupOffsets reads the share-partition state: the start offset is past them all
        assert _start_offsets(d, group) == [(topic, [(0, 3000)])]


def test_release_hands_records_to_another_consumer(daemon: GroupdProcess, members: list[Member]) -> None:
    group, topic = _setup(daemon)
    produce(daemon, topic, [f"r{i}" for i in range(5)])
    a = Member(daemon, group, topic, "release-once")
    members.append(a)
    wait_for(lambda: a.printed("closed"), 30, "the first consumer to release and close")
    assert a.acked() == [(o, 2) for o in range(5)]  # RELEASE
    b = Member(daemon, group, topic, "accept")
    members.append(b)
    wait_for(lambda: len(b.records()) >= 5, 30, "the released records at the second consumer")
    b.stop()
    assert b.records() == [(o, f"r{o}", 2) for o in range(5)]


def test_reject_archives_a_record(daemon: GroupdProcess, members: list[Member]) -> None:
    group, topic = _setup(daemon)
    produce(daemon, topic, ["ok1", "bad", "ok2"])
    a = Member(daemon, group, topic, "reject", "bad")
    members.append(a)
    wait_for(lambda: len(a.acked()) >= 3, 30, "three acknowledgements")
    a.stop()
    assert a.acked() == [(0, 1), (1, 3), (2, 1)]
    b = Member(daemon, group, topic, "accept")
    members.append(b)
    produce(daemon, topic, ["later"])
    wait_for(lambda: len(b.records()) >= 1, 30, "the record produced later")
    time.sleep(LOCK_MS / 1000 + 1)
    b.stop()
    assert [v for _o, v, _c in b.records()] == ["later"]


def test_a_killed_consumers_records_go_to_the_others(daemon: GroupdProcess, members: list[Member]) -> None:
    group, topic = _setup(daemon)
    produce(daemon, topic, [f"r{i}" for i in range(20)])
    a = Member(daemon, group, topic, "hold")
    members.append(a)
    wait_for(lambda: a.printed("holding"), 30, "the first consumer to hold records")
    held = {o for o, _v, _c in a.records()}
    a.kill()  # SIGKILL: its share session goes with its connection and the records with it
    b = Member(daemon, group, topic, "accept")
    members.append(b)
    wait_for(lambda: {o for o, _v, _c in b.records()} >= set(range(20)), 30, "every record at the survivor")
    b.stop()
    assert {o for o, _v, c in b.records() if c == 2} == held


def test_a_stopped_consumers_records_go_to_the_others_after_the_lock_duration(
    daemon: GroupdProcess, members: list[Member]
) -> None:
    group, topic = _setup(daemon)
    produce(daemon, topic, [f"r{i}" for i in range(10)])
    a = Member(daemon, group, topic, "hold")
    members.append(a)
    wait_for(lambda: a.printed("holding"), 30, "the first consumer to hold records")
    os.kill(a.proc.pid, signal.SIGSTOP)  # alive, connected, silent: only the lock expiry frees them
    held = {o for o, _v, _c in a.records()}
    b = Member(daemon, group, topic, "accept")
    members.append(b)
    wait_for(lambda: {o for o, _v, _c in b.records()} >= held, 30, "the held records at the other consumer")
    b.stop()
    assert {o for o, _v, c in b.records() if c == 2} == held
    assert daemon.events("share_locks_expired")


def test_the_delivery_count_limit_archives_a_failing_record(tmp_path: Path, members: list[Member]) -> None:
    with GroupdProcess(tmp_path / "data", "--group-share-delivery-count-limit", "3") as d:
        group, topic = _setup(d)
        produce(d, topic, ["poison", "fine"])
        a = Member(d, group, topic, "fail", "poison")
        members.append(a)
        wait_for(lambda: [c for _o, v, c in a.records() if v == "poison"] == [1, 2, 3], 30, "three deliveries")
        produce(d, topic, ["after"])
        wait_for(lambda: any(v == "after" for _o, v, _c in a.records()), 30, "the next record")
        time.sleep(1)
        a.stop()
        assert [c for _o, v, c in a.records() if v == "poison"] == [1, 2, 3]
        assert sorted(v for _o, v, _c in a.records() if v != "poison") == ["after", "fine"]


def test_read_committed_share_consumers_never_see_aborted_records(daemon: GroupdProcess, members: list[Member]) -> None:
    group, topic = _setup(daemon, share_isolation_level="read_committed")
    p = Producer({"bootstrap.servers": daemon.bootstrap, "transactional.id": "tx-" + uuid.uuid4().hex[:6]})
    p.init_transactions(10)
    for kind, n in (("c", 3), ("a", 3), ("c", 2), ("a", 2)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, value=f"{kind}{i}".encode())
        p.flush(10)
        (p.commit_transaction if kind == "c" else p.abort_transaction)(10)
    p.begin_transaction()
    p.produce(topic, value=b"open")  # an open transaction: above the LSO, not delivered
    p.flush(10)
    a = Member(daemon, group, topic, "accept")
    members.append(a)
    wait_for(lambda: len(a.records()) >= 5, 30, "the committed records")
    time.sleep(1)
    seen = [v for _o, v, _c in a.records()]
    assert sorted(seen) == ["c0", "c0", "c1", "c1", "c2"]
    p.commit_transaction(10)
    wait_for(lambda: "open" in [v for _o, v, _c in a.records()], 30, "the record of the committed transaction")
    a.stop()


def test_daemon_killed_mid_stream_redelivers_exactly_the_unacknowledged(tmp_path: Path, members: list[Member]) -> None:
    d = GroupdProcess(tmp_path / "data", "--group-share-record-lock-duration-ms", str(LOCK_MS), "--fsync", "always")
    d.start()
    try:
        group, topic = _setup(d)
        produce(d, topic, [f"r{i}" for i in range(2000)], per_batch=20)
        a = Member(d, group, topic, "explicit")
        members.append(a)
        wait_for(lambda: len(a.acked()) >= 300, 60, "some acknowledgements")
        d.kill()
        acked_before = {o for o, _t in a.acked()}
        seen_before = len(a.records())
        d.start(port=d.port)
        every = set(range(2000))

        def settled() -> bool:
            acked = {o for o, _t in a.acked()}
            return acked | a.ack_failed() >= every and _start_offsets(d, group) == [(topic, [(0, 2000)])]

        wait_for(
            settled,
            90,
            lambda: (
                f"every record acknowledged: the start offset {_start_offsets(d, group)}, {len(every - {o for o, _t in a.acked()})}"
                f" not acknowledged at the client, {len(every - {o for o, _t in a.acked()} - a.ack_failed())} of them"
                f" in no failed commit, first {sorted(every - {o for o, _t in a.acked()} - a.ack_failed())[:5]};"
                f" the consumer {'exited ' + str(a.proc.returncode) if a.proc.poll() is not None else 'runs'},"
                f" last printed {[line[:120] for line in a.lines[-4:]]}; {seen_before} received before the kill,"
                f" acknowledged {sorted(acked_before)[-1:]}"
            ),
        )
        a.stop()
        after = a.records()[seen_before:]
        redelivered = {o for o, _v, _c in after}
        assert not redelivered & acked_before, sorted(redelivered & acked_before)[:10]
        # Every record is acknowledged in the share-partition state (the start offset is past them
        # all), and the client saw each acknowledged, except those of the commit the kill cut off:
        # the daemon may have made it durable before dying, as Kafka's broker would (the
        # persister's write is done before the answer), and then they are not redelivered.
        assert every - {o for o, _t in a.acked()} <= a.ack_failed()
    finally:
        d.stop()


def test_fault_injection_expires_a_share_groups_locks(tmp_path: Path, members: list[Member]) -> None:
    # the default lock duration (30 s): only the control endpoint's expire-locks frees them sooner
    control = free_port()
    with GroupdProcess(tmp_path / "data", "--control-port", str(control)) as d:
        group, topic = _setup(d)
        produce(d, topic, [f"r{i}" for i in range(5)])
        a = Member(d, group, topic, "hold")
        members.append(a)
        wait_for(lambda: a.printed("holding"), 30, "the first consumer to hold records")
        os.kill(a.proc.pid, signal.SIGSTOP)
        held = {o for o, _v, _c in a.records()}
        url = f"http://127.0.0.1:{control}/actions/expire-locks"
        nobody = urllib.request.Request(url, json.dumps({"group": "nobody"}).encode(), method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(nobody, timeout=10)
        assert e.value.code == 404
        req = urllib.request.Request(url, json.dumps({"group": group}).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read())["released"] == len(held)
        b = Member(d, group, topic, "accept")
        members.append(b)
        wait_for(lambda: {o for o, _v, _c in b.records()} >= held, 20, "the held records at the other consumer")
        b.stop()
