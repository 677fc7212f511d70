"""Share groups (KIP-932) on a real daemon: ShareFetch + ShareAcknowledge throughput of 1, 3 and 10
share consumers on one partition against a classic consumer reading the same partition in the same
run, and the redelivery latency after a lock expires.

    python -m bench.sharefetch [--quick] [--records 20000]

Throughput: one 1-partition topic of ``--records`` records (100 B, in batches of 100) written once;
each reader reads all of it from the start: the classic consumer (confluent-kafka ``Consumer``,
``auto.offset.reset=earliest``) and share groups of 1, 3 and 10 ``ShareConsumer`` threads
(confluent-kafka 2.16, implicit acknowledgement, ``share.auto.offset.reset=earliest``, each group
new). Figures: records/s until every offset was delivered, and the daemon's CPU µs per record (the
steadier figure on a shared machine).

Redelivery: a raw client acquires a record under a 1 s lock (``--group-share-record-lock-duration-ms
1000``) and never acknowledges it, a second member's ShareFetch waits (max_wait 5 s) and is answered
when the lock expires: latency = answer time - acquisition time - lock duration, p50 / max over the
rounds (the share-partition's lock timer wakes the waiting fetch; nothing polls).
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer
from groupd.coordinator.share_partition import ACCEPT, AckBatch, BatchInfo, SharePartition, SharePartitionConfig
from groupd.ops.kafka_client import BrokerConnection

from .targets import Target, start_groupd, workdir

LOCK_MS = 1000


def _call(conn: BrokerConnection, name: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
    return conn.send(name, body, version)[1]  # type: ignore[no-any-return]


def _connect(target: Target) -> BrokerConnection:
    host, port = target.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=60, client_id="sharebench")


def _group_earliest(conn: BrokerConnection, group: str) -> None:
    r = _call(
        conn,
        "IncrementalAlterConfigs",
        1,
        {
            "resources": [
                {
                    "resource_type": 32,
                    "resource_name": group,
                    "configs": [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}],
                }
            ],
            "validate_only": False,
        },
    )
    assert r["responses"][0]["error_code"] == 0, r


def _classic(target: Target, topic: str, n: int) -> dict[str, float]:
    c = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": "classic-" + uuid.uuid4().hex[:6],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    cpu0, t0, got = target.cpu_s(), time.perf_counter(), 0
    first = None
    deadline = t0 + 120
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                got += 1
                if first is None:
                    first = time.perf_counter()
    end, cpu1 = time.perf_counter(), target.cpu_s()
    c.close()
    return _rates(n, got, end - t0, cpu0, cpu1, (first or end) - t0)


def _share(target: Target, conn: BrokerConnection, topic: str, n: int, consumers: int) -> dict[str, float]:
    group = f"share{consumers}-" + uuid.uuid4().hex[:6]
    _group_earliest(conn, group)
    seen: set[int] = set()
    lock = threading.Lock()
    stop = threading.Event()
    deliveries = [0]
    first: list[float] = []

    def member() -> None:
        c = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": group})
        c.subscribe([topic])
        while not stop.is_set():
            msgs = [m for m in c.poll(0.2) if m.error() is None]
            with lock:
                if msgs and not first:
                    first.append(time.perf_counter())
                deliveries[0] += len(msgs)
                seen.update(m.offset() for m in msgs)
                if len(seen) >= n:
                    stop.set()
        c.commit_sync(10)
        c.close()

    cpu0, t0 = target.cpu_s(), time.perf_counter()
    threads = [threading.Thread(target=member, daemon=True) for _ in range(consumers)]
    for t in threads:
        t.start()
    stop.wait(180)
    end, cpu1 = time.perf_counter(), target.cpu_s()
    stop.set()
    for t in threads:
        t.join(30)
    start = first[0] if first else t0
    out = _rates(n, len(seen), end - t0, cpu0, cpu1, start - t0)
    out["redelivered"] = deliveries[0] - len(seen)
    return out


def _rates(
    n: int, got: int, elapsed: float, cpu0: float | None, cpu1: float | None, first_s: float
) -> dict[str, float]:
    """Records/s and the daemon's CPU over the whole read, joining the group included (librdkafka's
    classic consumer prefetches while the application waits for its first record, so a rate from
    the first record would not compare); ``first_s``: when the first record arrived."""
    return {
        "records": got,
        "seconds": elapsed,
        "first_record_s": first_s,
        "records_per_s": got / elapsed if elapsed > 0 else 0.0,
        "cpu_us_per_record": ((cpu1 - cpu0) * 1e6 / max(got, 1)) if cpu0 is not None and cpu1 is not None else -1,
        "complete": float(got >= n),
    }


def _fetch_body(group: str, member: str, epoch: int, tid: uuid.UUID | None, wait_ms: int) -> dict[str, Any]:
    topics = (
        []
        if tid is None
        else [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
    )
    return {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 1,
        "batch_size": 1,
        "topics": topics,
        "forgotten_topics_data": [],
    }


def _join(conn: BrokerConnection, group: str, topic: str) -> None:
    """ShareGroupHeartbeat until the group coordinator initialized and assigned the topic (raw
    ShareFetch of an uninitialized share-partition is refused, as in Kafka)."""
    member, epoch = uuid.uuid4().hex[:22], 0
    for _ in range(300):
        body = {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rack_id": None,
            "subscribed_topic_names": [topic] if epoch == 0 else None,
        }
        r = _call(conn, "ShareGroupHeartbeat", 1, body)
        epoch = r["member_epoch"]
        if r["assignment"] is not None and any(tp["partitions"] for tp in r["assignment"]["topic_partitions"]):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{group} was not assigned {topic}")


def _redelivery(target: Target, rounds: int) -> dict[str, float]:
    a, b = _connect(target), _connect(target)
    topic = "redeliver-" + uuid.uuid4().hex[:6]
    _call(
        a,
        "CreateTopics",
        4,
        {
            "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 10000,
            "validate_only": False,
        },
    )
    md = _call(
        a,
        "Metadata",
        12,
        {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    tid = md["topics"][0]["topic_id"]
    p = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
    latencies = []
    group = "redeliver-" + uuid.uuid4().hex[:6]
    _group_earliest(a, group)
    _join(a, group, topic)
    eb = 0
    for ea in range(rounds):  # the holder's session epoch: one fetch per round
        p.produce(topic, value=b"x")  # one record per round: the taker can only get the held one
        p.flush(10)
        r = _call(a, "ShareFetch", 1, _fetch_body(group, "holder", ea, tid if ea == 0 else None, 5000))
        acquired = r["responses"][0]["partitions"][0]["acquired_records"] if r["responses"] else []
        assert acquired, r
        t0 = time.perf_counter()
        got: list[Any] = []
        while not got:
            r = _call(b, "ShareFetch", 1, _fetch_body(group, "taker", eb, tid if eb == 0 else None, 5000))
            eb += 1
            got = [x for t in r["responses"] for pp in t["partitions"] for x in pp["acquired_records"]]
        latencies.append((time.perf_counter() - t0) * 1000 - LOCK_MS)
        # the taker accepts it, so the next round's record is the next offset
        off = got[0]["first_offset"]
        ack = {
            "group_id": group,
            "member_id": "taker",
            "share_session_epoch": eb,
            "topics": [
                {
                    "topic_id": tid,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "acknowledgement_batches": [
                                {"first_offset": off, "last_offset": off, "acknowledge_types": [1]}
                            ],
                        }
                    ],
                }
            ],
        }
        _call(b, "ShareAcknowledge", 1, ack)
        eb += 1
    a.close()
    b.close()
    latencies.sort()
    return {"rounds": rounds, "p50_ms": latencies[len(latencies) // 2], "max_ms": latencies[-1]}


def core_us_per_record(n: int = 200_000) -> float:
    """The sans-IO ``SharePartition`` alone: acquire 500-record fetches (5 batches of 100) and
    accept them, µs per record (no I/O, no codec)."""
    sp = SharePartition(SharePartitionConfig(), 0)
    t0 = time.perf_counter()
    off = 0
    while off < n:
        got = sp.acquire("m", 0, 1000, [BatchInfo(off + i * 100, off + i * 100 + 99) for i in range(5)], 500, off)
        sp.acknowledge("m", [AckBatch(r.first_offset, r.last_offset, [ACCEPT]) for r in got])
        off += 500
    return (time.perf_counter() - t0) / n * 1e6


def run(quick: bool = False, records: int | None = None) -> dict[str, Any]:
    n = records or (5_000 if quick else 20_000)
    root = workdir("groupd-share-bench-")
    target, _times = start_groupd(root / "data", "--group-share-record-lock-duration-ms", str(LOCK_MS))
    try:
        topic = "sharebench"
        conn = _connect(target)
        _call(
            conn,
            "CreateTopics",
            4,
            {
                "topics": [
                    {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 10000,
                "validate_only": False,
            },
        )
        p = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 5, "batch.num.messages": 100})
        value = b"v" * 100
        for i in range(n):
            p.produce(topic, value=value)
            if (i + 1) % 100 == 0:
                p.poll(0)
        assert p.flush(30) == 0
        out: dict[str, Any] = {"records": n, "classic": _classic(target, topic, n)}
        for k in (1, 3, 10):
            out[f"share_{k}"] = _share(target, conn, topic, n, k)
        conn.close()
        out["redelivery"] = _redelivery(target, 5 if quick else 10)
        out["core_us_per_record"] = core_us_per_record(50_000 if quick else 200_000)
        return out
    finally:
        target.stop()


def print_results(out: dict[str, Any], print_figures: Any) -> None:
    base = out["classic"]
    rows = []
    for k in (1, 3, 10):
        r = out[f"share_{k}"]
        rows.append(
            (f"{k} share consumer(s): records/s", {"groupd": r["records_per_s"], "classic": base["records_per_s"]})
        )
        rows.append(
            (
                f"{k} share consumer(s): daemon CPU us/record",
                {"groupd": r["cpu_us_per_record"], "classic": base["cpu_us_per_record"]},
            )
        )
    print_figures(
        f"share groups: ShareFetch + ShareAcknowledge of {out['records']:,} records on one partition",
        rows,
        ("classic",),
        "groupd = share consumers (confluent-kafka ShareConsumer, implicit acks); baseline = one classic "
        "consumer reading the same partition, same daemon, same run",
    )
    print(f"SharePartition core (acquire + accept, 500-record fetches): {out['core_us_per_record']:.2f} us/record")
    rd = out["redelivery"]
    print(
        f"redelivery after a {LOCK_MS} ms lock expires: p50 {rd['p50_ms']:.1f} ms, max {rd['max_ms']:.1f} ms over {rd['rounds']} rounds"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--records", type=int)
    args = ap.parse_args()
    out = run(args.quick, args.records)

    def print_figures(
        title: str, rows: list[tuple[str, dict[str, float]]], baselines: tuple[str, ...], note: str
    ) -> None:
        print(title)
        for label, fig in rows:
            ratio = fig["groupd"] / fig["classic"] if fig["classic"] else float("nan")
            print(f"  {label:45s} groupd {fig['groupd']:10.1f}   classic {fig['classic']:10.1f}   x{ratio:.2f}")
        print(f"  ({note})")

    print_results(out, print_figures)
    for k in (1, 3, 10):
        r = out[f"share_{k}"]
        print(
            f"  share_{k}: {r['records']:.0f} records in {r['seconds']:.2f} s "
            f"(the first after {r['first_record_s']:.2f} s), redelivered {r['redelivered']:.0f}"
        )


if __name__ == "__main__":
    main()
