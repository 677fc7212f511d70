"""KIP-932 share groups (Kafka 4.2's ``modern/share``): the group and its fold over records
(``group.py``), the sans-IO heartbeat, fencing and assignment (``manager.py``), the records
(``records.py``) and what the coordinator asks of the share-partition state (``state.py``)."""

from .group import PROTOCOL_TYPE, ShareGroup, ShareGroupMember, ShareGroups, ShareGroupState
from .manager import ShareGroupConfig, ShareGroupManager, ShareHeartbeatResult
from .records import SHARE_KEY_TYPES
from .state import InMemoryShareState, PartitionSummary, ShareGroupConfigLookup, ShareStateStore

__all__ = [
    "PROTOCOL_TYPE",
    "SHARE_KEY_TYPES",
    "InMemoryShareState",
    "PartitionSummary",
    "ShareGroup",
    "ShareGroupConfig",
    "ShareGroupConfigLookup",
    "ShareGroupManager",
    "ShareGroupMember",
    "ShareGroupState",
    "ShareGroups",
    "ShareHeartbeatResult",
    "ShareStateStore",
]
