"""A real ``groupd serve`` imports the KIP-848 consumer-group core and the KIP-932 share-group core
only when a client first uses a group of that kind (issue 26, start-up: coordinator/lazy.py), and
that first use works as before: real clients at their default settings (confluent-kafka's classic
consumer, its ``group.protocol=consumer`` consumer, its ``ShareConsumer``).

What the daemon imported is read from its own ``-X importtime`` report (``PYTHONPROFILEIMPORTTIME``:
one line per module, written to its log as the import finishes), so the test sees the daemon's
imports in the order they happened without a hook in the daemon. It cannot pass vacuously: the
modules it looks for must be absent at first and present after the first use."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient

from tests.support.daemon import GroupdProcess
from tests.support.wire import Wire

CONSUMER_CORE = (
    "groupd.coordinator.consumer.manager",
    "groupd.coordinator.consumer.group",
    "groupd.coordinator.consumer.member",
    "groupd.coordinator.consumer.assignors",
)
SHARE_CORE = ("groupd.coordinator.share.manager", "groupd.coordinator.share.group")
RECORDS = 20


def _imported(d: GroupdProcess) -> set[str]:
    out = set()
    for line in d.log_path.read_text(errors="replace").splitlines():
        if line.startswith("import time:") and "|" in line:
            out.add(line.rsplit("|", 1)[1].strip())
    return out


def _consume(consumer: Consumer | ShareConsumer, want: int, timeout: float = 30.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        polled = consumer.poll(0.2)  # a Message or None; the ShareConsumer's: an iterable of them
        for m in list(polled) if isinstance(consumer, ShareConsumer) else [polled] if polled is not None else []:
            assert m.error() is None, m.error()
            got.append(m.value())
    return got


def test_serve_imports_the_consumer_and_share_cores_on_their_first_use(tmp_path: Path) -> None:
    d = GroupdProcess(tmp_path / "data", env={"PYTHONPROFILEIMPORTTIME": "1"})
    d.start()
    try:
        with Wire(d.port) as w:
            w.pipeline(("ApiVersions", 3, {"client_software_name": "t", "client_software_version": "1"}))
            _, versions = w.read()
            assert versions["error_code"] == 0
            at_start = _imported(d)
            # the report is there (the shard and the stand-in were imported), the two cores are not
            assert {"groupd.coordinator.coordinator", "groupd.coordinator.lazy"} <= at_start
            assert at_start.isdisjoint(CONSUMER_CORE + SHARE_CORE), sorted(at_start & {*CONSUMER_CORE, *SHARE_CORE})
            topic = f"t-{uuid.uuid4().hex[:8]}"
            w.create_topic(topic, partitions=3)
        producer = Producer({"bootstrap.servers": d.bootstrap})
        for i in range(RECORDS):
            producer.produce(topic, f"v{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0

        # A classic group: join, consume, commit; listed and described by the admin client.
        classic = Consumer({"bootstrap.servers": d.bootstrap, "group.id": "classic", "auto.offset.reset": "earliest"})
        classic.subscribe([topic])
        assert len(_consume(classic, RECORDS)) == RECORDS
        committed = classic.commit(asynchronous=False)
        assert committed is not None and all(tp.error is None for tp in committed)
        classic.close()
        admin = AdminClient({"bootstrap.servers": d.bootstrap})
        listed = admin.list_consumer_groups().result(15)
        assert "classic" in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups(["classic"])["classic"].result(15)
        assert described.group_id == "classic"
        after_classic = _imported(d)
        assert after_classic.isdisjoint(CONSUMER_CORE + SHARE_CORE), sorted(
            after_classic & {*CONSUMER_CORE, *SHARE_CORE}
        )

        # The first KIP-848 consumer: its heartbeat builds the consumer core.
        kip848 = Consumer(
            {
                "bootstrap.servers": d.bootstrap,
                "group.id": "kip848",
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )
        kip848.subscribe([topic])
        assert sorted(_consume(kip848, RECORDS)) == sorted(f"v{i}".encode() for i in range(RECORDS))
        committed = kip848.commit(asynchronous=False)
        assert committed is not None and all(tp.error is None for tp in committed)
        kip848.close()
        after_kip848 = _imported(d)
        assert set(CONSUMER_CORE) <= after_kip848
        assert after_kip848.isdisjoint(SHARE_CORE)

        # The first share consumer: its ShareGroupHeartbeat builds the share core. A share group
        # starts at the log end (share.auto.offset.reset=latest): records produced once it is assigned.
        share = ShareConsumer({"bootstrap.servers": d.bootstrap, "group.id": "share"})
        share.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < RECORDS and time.monotonic() < deadline:
            for i in range(RECORDS):
                producer.produce(topic, f"s{i}".encode(), partition=i % 3)
            producer.flush(30)
            got += _consume(share, RECORDS, timeout=2.0)
        share.close()
        assert len(got) >= RECORDS and all(v.startswith(b"s") for v in got)
        assert set(SHARE_CORE) <= _imported(d)
    finally:
        d.stop()
