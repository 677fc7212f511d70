"""``__share_group_state`` pruned as Kafka's share coordinator prunes it (cold-partition snapshots,
then DeleteRecords below the oldest snapshot a key still needs): what a restart replays from the
pruned log is the state from before, and a deleted key leaves nothing behind."""

from __future__ import annotations

import uuid
from pathlib import Path

from groupd.broker.node import Broker
from groupd.broker.settings import Config
from groupd.broker.share import SHARE_STATE_TOPIC
from groupd.coordinator.share_partition import (
    ACCEPT,
    RELEASE,
    AckBatch,
    BatchInfo,
    SharePartition,
    SharePartitionConfig,
    SharePartitionKey,
    share_state_partition,
)


def _states(b: Broker) -> dict[SharePartitionKey, tuple[int, list]]:
    return {k: (s.start_offset, s.batches()) for k, s in b.share_partitions.store.states.items()}


async def test_pruned_state_topic_replays_to_the_same_state(tmp_path: Path) -> None:
    b = Broker(Config(data_dir=str(tmp_path), port=0, fsync="never"))
    await b.start()
    # three keys of one __share_group_state partition: the oldest snapshot among them decides
    first = SharePartitionKey("g", uuid.uuid4(), 0)
    keys = [first]
    while len(keys) < 3:
        k = SharePartitionKey("g", uuid.uuid4(), len(keys))
        if share_state_partition(k) == share_state_partition(first):
            keys.append(k)
    try:
        parts = b.share_partitions
        for key in keys:
            sp = SharePartition(SharePartitionConfig(), 0)
            parts.partitions[key] = sp
            await parts.persist(key, sp, [])
            for i in range(20):  # acquire one, release it once, then accept it: 2 records each
                sp.acquire("m", 0, 1000, [BatchInfo(i, i)], 1)
                await parts.persist(key, sp, sp.acknowledge("m", [AckBatch(i, i, [RELEASE])]))
                sp.acquire("m", 0, 1000, [BatchInfo(i, i)], 1)
                await parts.persist(key, sp, sp.acknowledge("m", [AckBatch(i, i, [ACCEPT])]))
        gone = keys.pop()
        parts.delete("g", [(gone.topic_id, gone.partition)])
        await parts.drain()
        before = _states(b)
        assert set(before) == set(keys) and all(start == 20 for start, _ in before.values())
        pruned = await parts.prune()
        for key in keys:
            p = share_state_partition(key)
            plog = b.logs.get(SHARE_STATE_TOPIC, p)
            assert plog is not None and pruned.get(p) == plog.log_start_offset > 0
        if share_state_partition(gone) not in {share_state_partition(k) for k in keys}:
            plog = b.logs.get(SHARE_STATE_TOPIC, share_state_partition(gone))
            assert plog is not None and plog.log_start_offset == plog.log_end_offset
    finally:
        await b.stop()
    again = Broker(Config(data_dir=str(tmp_path), port=0, fsync="never"))
    await again.start()
    try:
        assert _states(again) == before
    finally:
        await again.stop()
