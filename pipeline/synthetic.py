"""A synthetic ``__consumer_offsets`` log of any size, for measuring the pipeline.

    python -m groupd.pipeline.synthetic DATA_DIR --records 10000000 [--groups 200] [--seed 1] [--rebalance-every 50]

Groups of 3-6 consumer members own a 12-partition topic each; every round, each group commits
all its partitions in one batch (as groupd's appender merges a group's commits), and every 50th
round (``--rebalance-every``) a group rebalances (a member joins or leaves; range assignment; its
sync phase -- join end to assignment durable -- lasts 5 ms to 5 s, log-uniform). Records go through
groupd's own serde and storage engine, into 100 MiB segments as groupd writes them.
"""

from __future__ import annotations

import argparse
import random
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
from groupd.coordinator.serde import encode_key, encode_value
from groupd.storage import LogConfig, LogManager

OFFSETS = "__consumer_offsets"
PARTITIONS = 12


def _range_assign(members: list[str], topic: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {m: [] for m in members}
    ordered = sorted(members)
    per, extra = divmod(PARTITIONS, len(ordered))
    p = 0
    for i, m in enumerate(ordered):
        n = per + (1 if i < extra else 0)
        out[m] = list(range(p, p + n))
        p += n
    return out


def generate(
    data_dir: Path,
    records: int,
    groups: int = 200,
    seed: int = 1,
    start_ms: int = 1_700_000_000_000,
    rebalance_every: int = 50,
) -> int:
    rng = random.Random(seed)
    manager = LogManager(data_dir, LogConfig(segment_ms=None, retention_ms=None))
    manager.open_all()
    state = []
    for g in range(groups):
        name = f"group-{g:04d}"
        members = [f"{name}-m{i}" for i in range(rng.randint(3, 6))]
        keys = [encode_key(OffsetCommitKey(name, f"topic-{g:04d}", p)) for p in range(PARTITIONS)]
        state.append(
            {
                "name": name,
                "topic": f"topic-{g:04d}",
                "members": members,
                "generation": 0,
                "next": len(members),
                "offsets": [0] * PARTITIONS,
                "keys": keys,
                "log": partition_for(name),
            }
        )
    written = 0
    now = start_ms
    round_no = 0
    while written < records:
        for s in state:
            if written >= records:
                break
            log = manager.get_or_create(OFFSETS, s["log"])
            if round_no % rebalance_every == 0:
                if round_no and len(s["members"]) > 2 and rng.random() < 0.5:
                    s["members"].pop(rng.randrange(len(s["members"])))
                elif round_no:
                    s["members"].append(f"{s['name']}-m{s['next']}")
                    s["next"] += 1
                s["generation"] += 1
                assignment = _range_assign(s["members"], s["topic"])
                sub = encode_subscription(Subscription(topics=(s["topic"],), version=1))
                value = GroupMetadataValue(
                    protocol_type="consumer",
                    generation=s["generation"],
                    protocol="range",
                    leader=s["members"][0],
                    current_state_timestamp=now - int(5 * 1000 ** rng.random()),
                    members=tuple(
                        MemberMetadata(
                            m,
                            None,
                            m,
                            "/10.0.0.1",
                            30000,
                            10000,
                            sub,
                            encode_assignment(Assignment((TopicPartitions(s["topic"], tuple(ps)),))),
                        )
                        for m, ps in assignment.items()
                    ),
                )
                log.append_records([(encode_key(GroupMetadataKey(s["name"])), encode_value(value), (), now)])
                written += 1
            batch = []
            for p in range(PARTITIONS):
                s["offsets"][p] += rng.randint(1, 1000)
                value = OffsetCommitValue(offset=s["offsets"][p], leader_epoch=s["generation"], commit_timestamp=now)
                batch.append((s["keys"][p], encode_value(value), (), now))
            log.append_records(batch)
            written += len(batch)
            now += 7
        round_no += 1
    manager.close()
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m groupd.pipeline.synthetic", description=__doc__.split("\n\n")[0])
    p.add_argument("data_dir", type=Path)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--groups", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rebalance-every", type=int, default=50, metavar="ROUNDS")
    args = p.parse_args(argv)
    started = time.monotonic()
    n = generate(args.data_dir, args.records, args.groups, args.seed, rebalance_every=args.rebalance_every)
    print(f"wrote {n} records to {args.data_dir} in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
