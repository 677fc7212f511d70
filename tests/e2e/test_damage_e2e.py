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

import pytest
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

    p = Producer({"bootstrap.servers": bootstrap})
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
            # ListOffsets; Fetch answered the same high watermark, or librdkafka would have stalled.
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
    finally:
        d.stop()
