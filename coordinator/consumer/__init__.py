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

from .assignors import ASSIGNORS, RangeAssignor, UniformAssignor
from .group import ConsumerGroup, ConsumerGroups, ConsumerGroupState, IllegalRecord
from .manager import ConsumerGroupConfig, ConsumerGroupManager, HeartbeatResult, TopicsImage
from .member import ConsumerGroupMember, MemberState

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
