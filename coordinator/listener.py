"""Hooks through which the core reports notable group events (for metrics), without knowing who listens.

The core calls these synchronously, in the middle of a ``handle``/``tick``/``append_done`` call, with
times taken from the ``now_ms`` it was handed (never a clock of its own). A listener must be quick,
must not raise and must not call back into the core. The default does nothing, so a core built
without one (tests, tools) pays one no-op method call per event; these events are per rebalance or
per expiry, never per heartbeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Why members are removed without asking to leave (``member_expired``'s ``reason``).
SESSION_TIMEOUT = "session_timeout"  # a member of the group stopped heartbeating
NEW_MEMBER_JOIN_TIMEOUT = "new_member_join_timeout"  # a new member's first JoinGroup was abandoned
REBALANCE_TIMEOUT = "rebalance_timeout"  # it did not rejoin, or did not sync, within the rebalance timeout
PENDING = "pending"  # a member id handed out with MEMBER_ID_REQUIRED never came back (KIP-394)

EXPIRY_REASONS = (SESSION_TIMEOUT, NEW_MEMBER_JOIN_TIMEOUT, REBALANCE_TIMEOUT, PENDING)

# How a rebalance ended (``rebalance_completed``'s ``outcome``).
STABLE = "stable"  # the leader's assignment is durable and every member has its share
EMPTY = "empty"  # the join phase completed with nobody left: the group is Empty again

REBALANCE_OUTCOMES = (STABLE, EMPTY)


class CoordinatorListener:
    """No-op base: subclass and override what you need."""

    def rebalance_started(self, group_id: str, generation: int, members: int, reason: str) -> None:
        """The group entered PreparingRebalance. ``generation`` is the one being left behind."""

    def rebalance_completed(
        self, group_id: str, generation: int, members: int, duration_ms: int | None, outcome: str
    ) -> None:
        """The group reached Stable (``outcome`` STABLE) or Empty (EMPTY) in ``generation``;
        ``duration_ms`` runs from the last entry into PreparingRebalance."""

    def member_expired(self, group_id: str, member_id: str, generation: int, reason: str) -> None:
        """The coordinator removed a member on a deadline; ``reason`` is one of EXPIRY_REASONS."""

    def consumer_group_written(self, group_id: str, records: Sequence[tuple[Any, Any]]) -> None:
        """Records of a KIP-848 consumer group became durable (one call per write, with the group
        already in the state they describe); ``records`` are (key, value) pairs, value None for a
        tombstone. Writes happen on changes (joins, leaves, epoch bumps, reconciliation steps), not on
        every heartbeat."""
