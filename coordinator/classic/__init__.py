"""Classic consumer groups (the JoinGroup/SyncGroup protocol), beside ``consumer/`` (KIP-848).

``group.py`` is the state machine of one group; ``manager.py`` the classic group manager (sessions,
join and sync phases, SyncGroup, Heartbeat, LeaveGroup and their timers, Kafka's
``GroupMetadataManager`` classic paths); ``join.py`` JoinGroup; ``admin.py`` DescribeGroups,
ListGroups and DeleteGroups; ``responses.py`` their answers. It works through the coordinator
runtime and the collaborators the shard hands it, and never imports the shard.
"""

from .group import ClassicGroup, GroupState, IllegalStateTransition, Member, Waiter

__all__ = ["ClassicGroup", "GroupState", "IllegalStateTransition", "Member", "Waiter"]
