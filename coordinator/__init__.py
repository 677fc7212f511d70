"""groupd's sans-IO group coordinator (Kafka's classic and KIP-848 group protocols, committed offsets).

Owns the coordinator runtime (``runtime.py``: partition load/unload and epochs, pending writes,
routing), the shard over it (``coordinator.py``: the handler table and ``replay``), classic groups
(``classic/``), KIP-848 consumer groups (``consumer/``, served by ``consumer_requests.py``, with
``migration.py`` between the two), committed offsets (``offsets.py``), the ``__consumer_offsets``
records and their replay (``records.py``, ``serde.py``). It knows nothing of sockets, transports, clocks or file layout: it is handed the time
and requests, and hands back answers and records.

How the shell drives it (all calls from one thread or under one lock; each is quick and never blocks):

    coord = GroupCoordinator(config, ownership=..., topic_partitions=lambda name: count_or_None)
    coord.load(now_ms, records_from_the_log)           # or begin_load(p) / replay(k, v)... / end_load(p, now)
    result = coord.handle(now_ms, "JoinGroup", version, request_dict, ctx, client_id=..., client_host=...)
    result = coord.tick(now_ms)                         # when the wake-up armed at next_deadline() fires
    result = coord.append_done(now_ms, token, error)    # when an Append of a Result is durable (or failed)

Every Result carries ``responses`` -- ``(ctx, response_dict)`` pairs to send now -- and ``appends`` --
records to write, in order, to one ``__consumer_offsets`` partition each. After every call the shell
re-arms its single timer at ``next_deadline()`` (at or before now means: tick again straight away).
A parked request (JoinGroup, SyncGroup, a commit awaiting durability) is answered in a later Result.
"""

from .classic.group import ClassicGroup, GroupState, IllegalStateTransition, Member
from .config import CoordinatorConfig
from .coordinator import HANDLED_APIS, GroupCoordinator
from .listener import CoordinatorListener
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from .result import Append, Result
from .routing import Node, PartitionOwnership, java_string_hashcode, partition_for

__all__ = [
    "HANDLED_APIS",
    "Append",
    "ClassicGroup",
    "CoordinatorConfig",
    "CoordinatorListener",
    "GroupCoordinator",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupState",
    "IllegalStateTransition",
    "Member",
    "MemberMetadata",
    "Node",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionOwnership",
    "Record",
    "Result",
    "java_string_hashcode",
    "partition_for",
]
