"""groupd.broker.data_plane: Produce, Fetch, ListOffsets, InitProducerId and DescribeProducers over
the partition logs, and the partition side of transactions (markers, last stable offset).

One module per API, as franz-go's kfake keeps them, each part handed the one shared ``DataState``
(``state.py``: topics, logs, appender, clock, the loaded producer states) and the collaborators it
calls, none inheriting from another; ``DataPlane`` (``plane.py``) puts them together and is what the
rest of the broker holds.

- ``produce.py``: Produce, the idempotent and transactional producer checks, the append;
  ``batch_checks.py``: Kafka's checks of a batch before it is appended, in Kafka's order;
  ``produce_wire.py``: a successful answer's bytes, without the generic encoder.
- ``fetch.py``: Fetch, read_committed, and the fetches parked until data arrives.
- ``list_offsets.py``: ListOffsets (v0 by segment, as Kafka 3.x).
- ``describe_producers.py``: DescribeProducers.
- ``markers.py``: the transaction coordinator's COMMIT/ABORT markers in user partitions.
- ``producers.py``: the partitions' producer states, loaded from the log on first use, snapshotted.
- ``producer_ids.py``: the producer-id allocator and InitProducerId for idempotent producers.
- ``maintenance.py``: retention and compaction on Kafka's two cadences.
- ``topic_config.py``: a topic's configs as its partitions' ``LogConfig``.

Every broker of the process shares one log per partition (cluster mode only decides which broker
may answer for it: ``broker/cluster.py``), so the high watermark of a partition is its log end
offset and ``acks=1`` and ``acks=all`` mean the same thing: the append is in the log (and fsynced
first under ``--fsync always``). The parts know nothing of cluster routing, authorization, or the
group and transaction coordinators (the transaction shell drives the markers).
"""

from ..producer_state import PartitionProducers
from .describe_producers import DESCRIBE_PRODUCERS_VERSIONS
from .fetch import FETCH_VERSIONS
from .list_offsets import LIST_OFFSETS_VERSIONS
from .plane import DataPlane
from .produce import PRODUCE_VERSIONS
from .producer_ids import INIT_PRODUCER_ID_VERSIONS, ProducerIdManager
from .topic_config import topic_log_config

__all__ = [
    "DESCRIBE_PRODUCERS_VERSIONS",
    "FETCH_VERSIONS",
    "INIT_PRODUCER_ID_VERSIONS",
    "LIST_OFFSETS_VERSIONS",
    "PRODUCE_VERSIONS",
    "DataPlane",
    "PartitionProducers",
    "ProducerIdManager",
    "topic_log_config",
]
