"""Issue 29 item 1: a damaged batch at every position of a user topic and of ``__consumer_offsets``,
with a real daemon and real clients at their default settings.

Between two runs of ``groupd serve`` one batch is damaged on disk: zeroed (a lost write), a
flipped payload bit (bad CRC), a flipped length bit (the length points into the next batch), or
its file cut in the middle of it. After a clean shutdown, and after SIGKILL with ``--fsync
always`` (the recovery point then lies past the damage, so it is not a torn tail), every valid
record before and after the damage is served to confluent-kafka and kafka-python, the high
watermark is the log end, the damaged range is reported once (``storage.batch.corrupt``), and
records produced afterwards are readable. In ``__consumer_offsets`` the commits of every group
outside the damaged batch survive the restart, and a crash after it.

A cut in the active segment is the torn tail Kafka's recovery truncates (``LogSegment.recover``):
there the records after the cut are gone, not skipped.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest
from groupd.coordinator import partition_for
from groupd.storage import records as rec

from tests.support.daemon import GroupdProcess

pytestmark = pytest.mark.e2e

KINDS = ("zeroed", "crc", "length", "cut")
BATCHES = 8  # per topic; segment.bytes below puts them in three segments
RECORDS_PER_BATCH = 3
SEGMENT_BYTES = "300"


def _damage(kind: str, seg: Path, start: int, end: int) -> None:
    data = bytearray(seg.read_bytes())
    if kind == "zeroed":
        data[start:end] = bytes(end - start)
    elif kind == "crc":
        data[end - 1] ^= 0x10
    elif kind == "length":
        data[start + 10] ^= 0x04  # batchLength, which the CRC does not cover
    else:
        del data[(start + end) // 2 :]
    seg.write_bytes(bytes(data))


def _layout(directory: Path) -> list[tuple[Path, int, int, int, int]]:
    """(segment, start, end, base offset, last offset) of every batch of a partition directory."""
    out = []
    for seg in sorted(directory.glob("*.log")):
        data = seg.read_bytes()
        out += [(seg, v.position, v.position + v.size, v.base_offset, v.last_offset) for v in rec.iter_batches(data)]
    return out


def _recovery_point(directory: Path) -> int:
    """The byte of the active segment up to which the last run made its data durable."""
    _base, position, _next, _crc = struct.unpack(">qqqI", (directory / "recovery-point").read_bytes())
    return position


def _lost(kind: str, layout: list[tuple[Path, int, int, int, int]], i: int, point: int | None) -> tuple[set[int], bool]:
    """Offsets the damage of batch i takes away, and whether it is a torn tail (cut, not reported).

    `point`: the recovery point after a crash. Past it, in the active segment, damage is what a
    torn write looks like, and recovery truncates the log there (Kafka's LogLoader: everything
    after its recovery-point checkpoint is checked, LogSegment.recover cuts at the first bad
    batch); so is a file cut short under its recovery point. Elsewhere only the batch is lost,
    or, for a cut, the rest of its file."""
    seg, start = layout[i][0], layout[i][1]
    if seg == layout[-1][0] and (kind == "cut" or (point is not None and start >= point)):
        return {o for _s, _a, _b, base, last in layout[i:] for o in range(base, last + 1)}, True
    if kind != "cut":
        return set(range(layout[i][3], layout[i][4] + 1)), False
    return {o for s, _a, _b, base, last in layout[i:] if s == seg for o in range(base, last + 1)}, False


def _produce(bootstrap: str, topics: list[str], rounds: int, tag: str) -> None:
    from confluent_kafka import Producer

    # Idempotent, so each partition has producer state to load around the damage.
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for b in range(rounds):
        for t in topics:
            for r in range(RECORDS_PER_BATCH):
                p.produce(t, value=f"{tag}-{b}-{r}".encode())
        assert p.flush(30) == 0  # one batch per topic per round


def _consume_confluent(
    bootstrap: str, want: dict[str, list[bytes]], high: dict[str, int], timeout: float = 60
) -> dict[str, list[bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "damage-reader", "enable.auto.commit": False})
    got: dict[str, list[bytes]] = {t: [] for t in want}
    try:
        c.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in want])
        deadline = time.monotonic() + timeout
        while any(len(got[t]) < len(w) for t, w in want.items()) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                got[m.topic()].append(m.value())
        # Nothing more arrives (the damaged records are not served late).
        for m in c.consume(500, 1.0):
            assert m.error() is None, m.error()
            got[m.topic()].append(m.value())
        for t in want:
            # What the last Fetch answered (-1 with KAFKA_STORAGE_ERROR before), and ListOffsets.
            assert c.get_watermark_offsets(TopicPartition(t, 0), cached=True)[1] == high[t], t
            assert c.get_watermark_offsets(TopicPartition(t, 0), timeout=10) == (0, high[t]), t
    finally:
        c.close()
    return got


def _consume_kafka_python(bootstrap: str, want: dict[str, list[bytes]], timeout: float = 60) -> dict[str, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap)  # check_crcs=True, as by default
    got: dict[str, list[bytes]] = {t: [] for t in want}
    try:
        tps = [TopicPartition(t, 0) for t in want]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while any(len(got[t]) < len(w) for t, w in want.items()) and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=500, max_records=10_000).items():
                got[tp.topic] += [m.value for m in msgs]
        for tp, msgs in c.poll(timeout_ms=1000).items():
            got[tp.topic] += [m.value for m in msgs]
    finally:
        c.close()
    return got


@pytest.mark.parametrize("crash", [False, True], ids=["clean-shutdown", "sigkill-fsync-always"])
def test_a_damaged_user_batch_at_every_position_costs_only_its_records(tmp_path: Path, crash: bool) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    cases = [(kind, i) for kind in KINDS for i in range(BATCHES)]
    topics = [f"dmg-{kind}-{i}" for kind, i in cases]
    d = GroupdProcess(tmp_path / "data", "--fsync", "always").start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=d.bootstrap)
        admin.create_topics(
            [
                NewTopic(t, 1, 1, topic_configs={"segment.bytes": SEGMENT_BYTES, "index.interval.bytes": "100"})
                for t in topics
            ]
        )
        admin.close()
        _produce(d.bootstrap, topics, BATCHES, "before")
        if crash:
            d.kill()
        else:
            assert d.stop() == 0

        want: dict[str, list[bytes]] = {}
        high: dict[str, int] = {}
        torn: set[str] = set()
        for (kind, i), t in zip(cases, topics):
            layout = _layout(tmp_path / "data" / f"{t}-0")
            assert len(layout) == BATCHES and len({s for s, *_ in layout}) >= 3, (t, layout)
            seg, start, end, _base, _last = layout[i]
            point = _recovery_point(tmp_path / "data" / f"{t}-0") if crash else None
            _damage(kind, seg, start, end)
            lost, tail = _lost(kind, layout, i, point)
            high[t] = layout[i][3] if tail else BATCHES * RECORDS_PER_BATCH
            if tail:
                torn.add(t)
            want[t] = [
                f"before-{b}-{r}".encode()
                for b in range(BATCHES)
                for r in range(RECORDS_PER_BATCH)
                if b * RECORDS_PER_BATCH + r not in lost
            ]

        d.start()
        assert _consume_confluent(d.bootstrap, want, high) == want
        assert _consume_kafka_python(d.bootstrap, want) == want
        # Produce goes on, and what it acknowledges is readable, after the damage too.
        _produce(d.bootstrap, topics, 1, "after")
        for t in topics:
            want[t] = want[t] + [f"after-0-{r}".encode() for r in range(RECORDS_PER_BATCH)]
            high[t] += RECORDS_PER_BATCH
        assert _consume_kafka_python(d.bootstrap, want) == want
        assert _consume_confluent(d.bootstrap, want, high) == want

        events = [e for e in d.events("storage.batch.corrupt") if e["level"] == "error"]
        by_topic: dict[str, int] = {}
        for e in events:
            by_topic[str(e["topic"])] = by_topic.get(str(e["topic"]), 0) + 1
        assert by_topic == {t: 1 for t in topics if t not in torn}
        assert not d.events("fetch_read_failed")
        assert not d.events("producer_state_load_failed")
        # The producer state loaded around the damage: the idempotent producer of the intact batches.
        loaded = {str(e["topic"]): e["producers"] for e in d.events("producer_state_loaded")}
        assert loaded == {t: 1 for t in topics}
    finally:
        d.stop()


OFFSETS_GROUPS = 8  # groups (one commit, one batch each) per __consumer_offsets partition


def _groups_in(partition: int, tag: str, n: int) -> list[str]:
    out: list[str] = []
    i = 0
    while len(out) < n:
        g = f"{tag}-{i}"
        if partition_for(g) == partition:
            out.append(g)
        i += 1
    return out


def _alter(admin: Any, commits: list[tuple[str, int]]) -> None:
    """Commit `offset` of orders-0 for each group, concurrently (the groups' partitions differ)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    futures = [
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, [TopicPartition("orders", 0, o)])])[g]
        for g, o in commits
    ]
    for f in futures:
        (tp,) = f.result(timeout=30).topic_partitions
        assert tp.error is None, tp.error


def _committed(admin: Any, groups: list[str], timeout: float = 30) -> dict[str, int | None]:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    out: dict[str, int | None] = {}
    deadline = time.monotonic() + timeout
    for g in groups:
        while True:
            try:
                req = [ConsumerGroupTopicPartitions(g, [TopicPartition("orders", 0)])]
                (tp,) = admin.list_consumer_group_offsets(req)[g].result(timeout=10).topic_partitions
                break
            except KafkaException:  # the coordinator is still loading: retried until the deadline
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        out[g] = tp.offset if tp.offset >= 0 else None
    return out


@pytest.mark.parametrize("crash", [False, True], ids=["clean-shutdown", "sigkill-fsync-always"])
def test_a_damaged_offsets_batch_at_every_position_costs_only_its_commit(tmp_path: Path, crash: bool) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    # One __consumer_offsets partition per (kind, position): every case is set up in one run.
    cases = [(kind, i) for kind in KINDS for i in range(OFFSETS_GROUPS)]
    groups = {p: _groups_in(p, f"g{p}", OFFSETS_GROUPS) for p in range(len(cases))}
    d = GroupdProcess(tmp_path / "data", "--fsync", "always").start()
    try:
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(timeout=30)
        for k in range(OFFSETS_GROUPS):  # one commit per partition at a time: one batch each
            _alter(admin, [(groups[p][k], 1000 * p + k) for p in groups])
        if crash:
            d.kill()
        else:
            assert d.stop() == 0

        want: dict[str, int | None] = {}
        torn: set[int] = set()
        for p, (kind, i) in enumerate(cases):
            directory = tmp_path / "data" / f"__consumer_offsets-{p}"
            layout = _layout(directory)
            assert len(layout) == OFFSETS_GROUPS, (p, layout)
            seg, start, end, _base, _last = layout[i]
            point = _recovery_point(directory) if crash else None
            _damage(kind, seg, start, end)
            lost, tail = _lost(kind, layout, i, point)
            if tail:
                torn.add(p)
            for k, g in enumerate(groups[p]):
                want[g] = None if k in lost else 1000 * p + k  # commit k is at offset k

        d.start()
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        everyone = [g for gs in groups.values() for g in gs]
        assert _committed(admin, everyone) == want
        events = [e for e in d.events("storage.batch.corrupt") if e["level"] == "error"]
        assert sorted(int(str(e["partition"])) for e in events) == [p for p in groups if p not in torn]
        assert {e["topic"] for e in events} == {"__consumer_offsets"}
        assert d.events("offsets_loaded")[-1]["corrupt_batches"] == len(groups) - len(torn)
        listed = {g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid}
        assert {g for g, o in want.items() if o is not None} <= listed

        # Commits made after the damage survive a crash: recovery does not cut the log there.
        for k in range(2):
            _alter(admin, [(groups[p][k], 5000 * p + k) for p in groups])
        want.update({groups[p][k]: 5000 * p + k for p in groups for k in range(2)})
        d.kill()
        d.start()
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        assert _committed(admin, everyone) == want
        assert not d.events("offsets_partition_load_failed")
    finally:
        d.stop()


TXN_IDS = 6  # transactional ids (one InitProducerId, one batch each) per __transaction_state partition


def _init_producer_id(port: int, transactional_id: str, timeout: float = 30) -> tuple[int, int]:
    """(producer id, epoch) from InitProducerId, retried while the coordinator loads."""
    from tests.support.raw_client import RawClient

    deadline = time.monotonic() + timeout
    c = RawClient(port)
    try:
        while True:
            r = c.request("InitProducerId", 4, {"transactional_id": transactional_id, "transaction_timeout_ms": 60000})
            if r["error_code"] == 0:
                return r["producer_id"], r["producer_epoch"]
            assert r["error_code"] in (14, 15, 51), r  # loading, not available, concurrent transactions
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
    finally:
        c.close()


@pytest.mark.parametrize("crash", [False, True], ids=["clean-shutdown", "sigkill-fsync-always"])
def test_a_damaged_transaction_state_batch_at_every_position_costs_only_its_id(tmp_path: Path, crash: bool) -> None:
    """A transactional id whose record is intact keeps its producer id across the restart (its
    epoch is bumped); only the one whose batch is damaged starts afresh with a new producer id."""
    from groupd.transactions.coordinator import partition_for as txn_partition_for

    cases = [(kind, i) for kind in KINDS for i in range(TXN_IDS)]
    ids: dict[int, list[str]] = {}
    for p in range(len(cases)):
        ids[p], n = [], 0
        while len(ids[p]) < TXN_IDS:
            if txn_partition_for(f"tx{p}-{n}") == p:
                ids[p].append(f"tx{p}-{n}")
            n += 1
    d = GroupdProcess(tmp_path / "data", "--fsync", "always").start()
    try:
        first: dict[str, tuple[int, int]] = {}
        for k in range(TXN_IDS):
            for p in ids:
                first[ids[p][k]] = _init_producer_id(d.port, ids[p][k])
        if crash:
            d.kill()
        else:
            assert d.stop() == 0
        lost_ids: set[str] = set()
        torn: set[int] = set()
        for p, (kind, i) in enumerate(cases):
            directory = tmp_path / "data" / f"__transaction_state-{p}"
            layout = _layout(directory)
            assert len(layout) == TXN_IDS, (p, layout)
            seg, start, end, _base, _last = layout[i]
            point = _recovery_point(directory) if crash else None
            _damage(kind, seg, start, end)
            lost, tail = _lost(kind, layout, i, point)
            if tail:
                torn.add(p)
            lost_ids |= {ids[p][k] for k in range(TXN_IDS) if k in lost}
        d.start()
        for tid, (pid, epoch) in first.items():
            again = _init_producer_id(d.port, tid)
            if tid in lost_ids:
                assert again[0] != pid, tid
            else:
                assert again == (pid, epoch + 1), tid
        events = [e for e in d.events("storage.batch.corrupt") if e["topic"] == "__transaction_state"]
        assert sorted(int(str(e["partition"])) for e in events) == [p for p in ids if p not in torn]
    finally:
        d.stop()
