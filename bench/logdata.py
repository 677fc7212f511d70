"""Write a ``__consumer_offsets`` log of N records into a data directory, the way groupd writes it:
records built with ``coordinator/serde.py``'s ``encode_record``, appended in Kafka record batches
through ``groupd.storage``, each group in its partition ``abs(javaHash(group)) % 50``.

Per group, ``rounds`` rebalances: a group-metadata record (10 members with subscriptions and
assignments) followed by commits of every partition of its topic. The last group-metadata record of
each group is the Empty group (members gone) so that replay leaves no sessions to expire.

    python -m bench.logdata DATA_DIR --records 1000000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from groupd.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)
from groupd.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from groupd.coordinator.routing import partition_for
from groupd.coordinator.serde import encode_record
from groupd.storage import LogConfig, LogManager

OFFSETS_TOPIC = "__consumer_offsets"


def generate(
    data_dir: Path, records: int, *, members: int = 10, partitions: int = 99, rounds: int = 10, batch: int = 500
) -> dict[str, float]:
    """Returns {"records", "groups", "seconds", "bytes"}. ``records`` is rounded to whole groups."""
    per_group = rounds * (1 + partitions)
    n_groups = max(1, records // per_group)
    config = LogConfig(cleanup_policy="compact", retention_ms=None)
    mgr = LogManager(data_dir, config, topic_config=lambda t: config if t == OFFSETS_TOPIC else None)
    mgr.open_all()
    t0 = time.perf_counter()
    now = int(time.time() * 1000)
    topic = "orders"
    sub = encode_subscription(Subscription(topics=(topic,)))
    per = partitions // members
    assigns = [
        encode_assignment(Assignment((TopicPartitions(topic, tuple(range(i * per, (i + 1) * per))),)))
        for i in range(members)
    ]
    pending: dict[int, list[tuple[bytes, bytes | None, tuple[()], int]]] = {}
    written = 0

    def flush(p: int) -> None:
        items = pending.pop(p, [])
        if items:
            mgr.get_or_create(OFFSETS_TOPIC, p).append_records(items)

    for g in range(n_groups):
        group = f"bench-group-{g}"
        p = partition_for(group)
        buf = pending.setdefault(p, [])
        for r in range(rounds):
            last = r == rounds - 1
            member_list = (
                ()
                if last
                else tuple(
                    MemberMetadata(
                        member_id=f"consumer-{g}-{i}-{r:04d}-0000-0000-000000000000",
                        group_instance_id=None,
                        client_id=f"consumer-{g}-{i}",
                        client_host="/127.0.0.1",
                        rebalance_timeout=300_000,
                        session_timeout=10_000,
                        subscription=sub,
                        assignment=assigns[i],
                    )
                    for i in range(members)
                )
            )
            value = GroupMetadataValue(
                protocol_type="consumer",
                generation=r + 1,
                protocol=None if last else "range",
                leader=None if last else member_list[0].member_id,
                current_state_timestamp=now,
                members=member_list,
            )
            k, v = encode_record((GroupMetadataKey(group), value))
            buf.append((k, v, (), now))
            for part in range(partitions):
                k, v = encode_record(
                    (
                        OffsetCommitKey(group, topic, part),
                        OffsetCommitValue(offset=1000 * r + part, leader_epoch=0, metadata="", commit_timestamp=now),
                    )
                )
                buf.append((k, v, (), now))
            written += 1 + partitions
            if len(buf) >= batch:
                flush(p)
                buf = pending.setdefault(p, [])
    for p in list(pending):
        flush(p)
    size = sum(log.size_in_bytes for log in mgr.logs.values())
    mgr.flush_all()
    mgr.close()
    return {"records": written, "groups": n_groups, "seconds": time.perf_counter() - t0, "bytes": size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    print(generate(args.data_dir, args.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
