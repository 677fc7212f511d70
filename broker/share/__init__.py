"""groupd.broker.share: KIP-932 delivery on a broker, the asyncio shell around the sans-IO cores of
``groupd.coordinator.share_partition``.

- ``partitions.py``: ``SharePartitions`` (Kafka's ``SharePartitionManager`` and the persister):
  the share-partitions of this broker, read from the partition logs, their acquisition-lock timer
  (one ``call_at`` for the earliest deadline), the wake-ups of waiting ShareFetch requests, and
  ``__share_group_state`` (written through the group-commit appender, replayed at start-up).
- ``handlers.py``: ShareFetch and ShareAcknowledge (``KafkaApis.handleShareFetchRequest`` /
  ``handleShareAcknowledgeRequest``, ``DelayedShareFetch``): share sessions, piggybacked
  acknowledgements, long-poll waits.
"""

from .handlers import SHARE_ACKNOWLEDGE_VERSIONS, SHARE_FETCH_VERSIONS, ShareHandlers
from .partitions import SHARE_STATE_TOPIC, SharePartitions, ShareSettings

__all__ = [
    "SHARE_ACKNOWLEDGE_VERSIONS",
    "SHARE_FETCH_VERSIONS",
    "SHARE_STATE_TOPIC",
    "ShareHandlers",
    "SharePartitions",
    "ShareSettings",
]
