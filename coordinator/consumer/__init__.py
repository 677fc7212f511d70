"""KIP-848 consumer groups (Kafka 4's "consumer" group protocol), sans-IO, beside the classic groups.

- ``manager.py``: ``ConsumerGroupManager`` -- ConsumerGroupHeartbeat in, response and records out;
  session and revocation deadlines.
- ``classic_members.py``: classic-protocol members in a consumer group (their JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup); ``migration.py``: classic <-> consumer group conversion. Both are
  collaborators handed the manager.
- ``validation.py``: the heartbeat request's checks and error answers; ``record_helpers.py``: a
  member's records; ``config.py``: the broker's consumer-group settings and the topics image.
- ``group.py``: group state and its fold over records (``replay``).
- ``member.py``: members, member states and the reconciliation engine.
- ``assignors.py``: server-side assignors ``uniform`` and ``range``, ports of Kafka's (``uniform.py`` has
  the uniform builders, ``simple.py`` the share-group ``simple`` assignor); ``assignor_spec.py``: what
  they are handed, in the Java iteration orders ``java_collections.py`` models.
- ``regex.py``: subscription regular expressions (RE2 syntax, as Kafka's RE2/J).
- ``events.py``: the info-level log events (member joined/left/fenced, epoch bumped, target computed,
  group converged) through the logger and rate limiter the shell hands the manager.
- ``records.py``: the ``__consumer_offsets`` record types (serialized by ``coordinator/serde.py``).
"""

from ..lazy_exports import lazy_getattr

# The names below are imported on first use (PEP 562): serve imports this package for its settings
# (config.py) and record types (records.py) at start, and the core (manager, assignors, members,
# migration: ~20 modules) only when a consumer group is first used (coordinator/lazy.py; issue 26).
_LAZY = {
    "CONSUMER_KEY_TYPES": "records",
    "ASSIGNORS": "assignors",
    "RangeAssignor": "assignors",
    "UniformAssignor": "assignors",
    "ConsumerGroup": "group",
    "ConsumerGroups": "group",
    "ConsumerGroupState": "group",
    "IllegalRecord": "records",  # raised by group.py's replay
    "ConsumerGroupConfig": "config",
    "TopicsImage": "config",
    "ConsumerGroupManager": "manager",
    "HeartbeatResult": "manager",
    "ConsumerGroupMember": "member",
    "MemberState": "member",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "ASSIGNORS",
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "ConsumerGroupManager",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "ConsumerGroups",
    "HeartbeatResult",
    "IllegalRecord",
    "MemberState",
    "RangeAssignor",
    "TopicsImage",
    "UniformAssignor",
]
