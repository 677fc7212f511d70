"""The one kafka-python client bug our end-to-end tests have to step around, in one place."""

from __future__ import annotations

from typing import Any


def subscribe(consumer: Any, topic: str, listener: Any = None) -> None:
    """Subscribe a kafka-python ``KafkaConsumer`` to an existing topic without its join race.

    kafka-python 3.0.12 can wedge a group leader for good. When the leader rejoins because its topic
    metadata changed (its first join raced the first Metadata answer, or partitions were added),
    ``_perform_assignment`` sets ``_assignment_snapshot = _metadata_snapshot`` while the SyncGroup is
    still in flight. If ``poll(timeout_ms)`` expires in that window, ``coordinator.poll`` returns
    early; on the next poll ``need_rejoin()`` is False (the snapshots agree and ``rejoin_needed`` was
    never set for this kind of rejoin), so ``ensure_active_group`` is skipped and the finished join
    task (``_join_task``) is never collected: the heartbeat stays disabled and the assignment is
    never applied. The coordinator expires the member after session.timeout.ms and the client never
    notices. Seen against groupd about 1 run in 10 with 100 ms polls (and once in CI, in the pytest
    plugin's example suite); the broker's part is what Apache Kafka does, a rebalance when the leader
    rejoins a Stable group, and the race is entirely in the client.

    To test the broker rather than this race: learn the topic's metadata before the first join (no
    needless leader rejoin), and treat an uncollected join as "rejoin needed", so the client rejoins
    (one more rebalance) instead of going silent. (Reproduced at will by making the leader's
    ``_perform_assignment`` take 250 ms with a 100 ms poll and adding partitions: the leader expires
    every time without this, never with it.)
    """
    consumer.subscribe([topic], listener=listener)
    coordinator = consumer._coordinator
    if hasattr(coordinator, "_join_task"):
        plain_need_rejoin = coordinator.need_rejoin
        coordinator.need_rejoin = lambda: plain_need_rejoin() or coordinator._join_task is not None
    consumer.partitions_for_topic(topic)
