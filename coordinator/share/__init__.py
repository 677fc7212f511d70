"""KIP-932 share groups (Kafka 4.2's ``modern/share``): the group and its fold over records
(``group.py``), the sans-IO heartbeat, fencing and assignment (``manager.py``), the records
(``records.py``) and what the coordinator asks of the share-partition state (``state.py``)."""

from ..lazy_exports import lazy_getattr

# Imported on first use (PEP 562): serve needs the settings (config.py), the record types
# (records.py) and the state interface (state.py) at start, the core only when a share group is
# first used (coordinator/lazy.py; issue 26).
_LAZY = {
    "PROTOCOL_TYPE": "group",
    "ShareGroup": "group",
    "ShareGroupMember": "group",
    "ShareGroups": "group",
    "ShareGroupState": "group",
    "ShareGroupConfig": "config",
    "ShareGroupManager": "manager",
    "ShareHeartbeatResult": "manager",
    "SHARE_KEY_TYPES": "records",
    "InMemoryShareState": "state",
    "PartitionSummary": "state",
    "ShareGroupConfigLookup": "state",
    "ShareStateStore": "state",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


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
