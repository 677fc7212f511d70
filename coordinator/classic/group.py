"""The classic consumer group: its five states, the legal transitions between them, its members.

Theory of operation
===================

A classic group is a set of members that agree, once per *generation*, on who consumes what. The
coordinator never computes that agreement itself; it runs a two-phase barrier and lets one member,
the *leader*, do the assignment.

The story of a rebalance, as the seeds draw it:

1. A group that has no members is **Empty** (a brand-new group starts here too; offsets committed by
   a standalone consumer also live in an Empty group).

2. Something changes membership or metadata: a new member sends JoinGroup, a member leaves or its
   session expires, the leader rejoins (the leader rejoining is how a client asks for a new
   assignment), a follower rejoins with different metadata. The group goes to
   **PreparingRebalance**. From now on every member must (re)send JoinGroup; those requests are
   *parked* -- no answer yet -- in a delayed join. Heartbeats answer REBALANCE_IN_PROGRESS, which
   is how members that are busy consuming learn they must rejoin.

3. The join phase completes when every known member has rejoined, or when the rebalance timeout
   (the largest rebalance timeout among members) runs out; dynamic members that did not rejoin are
   removed then. A group leaving Empty waits ``group.initial.rebalance.delay.ms`` first, in steps
   that are extended while new members keep arriving (never beyond the rebalance timeout), so a
   fleet starting together forms one generation instead of one per member.

4. Completing the join bumps the generation, selects the protocol (the assignor) by a vote among
   those every member supports, keeps the old leader if it rejoined (else elects a rejoined member)
   and answers every parked JoinGroup at once. Only the leader's answer carries the member list
   with everyone's metadata. The group is now **CompletingRebalance** ("AwaitingSync" in the seeds).

5. Every member sends SyncGroup. Followers' requests are parked until the leader's SyncGroup brings
   the assignment. The assignment is written to the log as one group-metadata record; once that
   record is durable every parked SyncGroup is answered with its member's share (an empty one for a
   member the leader left out) and the group is **Stable**. Members that do not send SyncGroup
   within the rebalance timeout are removed and a new rebalance starts.

6. In Stable, members heartbeat within their session timeout. A follower that missed its JoinGroup
   answer may rejoin with unchanged metadata and is simply told the current generation; a leader
   that missed its answer while the group is still CompletingRebalance gets it again the same way.

7. When the last member leaves, the join completes with nobody: the generation is bumped anyway,
   an empty group-metadata record is written and the group is **Empty** again. An Empty group whose
   offsets have all expired, or that an admin deletes, becomes **Dead**: it is removed and a
   tombstone is written. Dead is terminal; a later JoinGroup for the same id creates a new group.

Any of the live states can fall back to PreparingRebalance when membership changes again (the
seeds' first scenario goes Stable -> PreparingRebalance -> CompletingRebalance ->
PreparingRebalance -> CompletingRebalance -> Stable).

Valid predecessors (Kafka's ``ClassicGroupState``), enforced by :meth:`ClassicGroup.transition_to`:

    ====================  =================================================================
    state                 may be entered from
    ====================  =================================================================
    Empty                 PreparingRebalance
    PreparingRebalance    Stable, CompletingRebalance, Empty
    CompletingRebalance   PreparingRebalance
    Stable                CompletingRebalance
    Dead                  Stable, PreparingRebalance, CompletingRebalance, Empty, Dead
    ====================  =================================================================

A group is created in Empty (or, when loaded from the log with members, directly in Stable); no
transition leads *into* the initial state, so those two are constructor arguments, not transitions.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import errors as err
from ..consumer_protocol import ConsumerProtocolError, subscribed_topics
from ..routing import JAVA_HASHMAP_INITIAL_CAPACITY, java_hashmap_capacity, java_hashmap_order

if TYPE_CHECKING:
    from ..timers import Slot

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


E, PR, CR, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    E: frozenset({PR}),
    PR: frozenset({S, CR, E}),
    CR: frozenset({PR}),
    S: frozenset({CR}),
    D: frozenset({S, PR, CR, E, D}),
}


class IllegalStateTransition(RuntimeError):
    """A coordinator bug: the code tried a transition the table above does not allow."""

    def __init__(self, group_id: str, old: GroupState, new: GroupState) -> None:
        allowed = ", ".join(sorted(str(s) for s in VALID_PREVIOUS_STATES[new])) or "nothing"
        super().__init__(f"group {group_id!r}: illegal transition {old} -> {new} ({new} may follow: {allowed})")
        self.group_id, self.old, self.new = group_id, old, new


@dataclass(eq=False, slots=True)
class Waiter:
    """A parked request: where its answer goes and the API version it must be shaped for."""

    ctx: Any
    version: int


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    is_new: bool = False
    # The slot of its session deadline (``Deadlines.set``'s answer), kept by the heartbeat's short
    # path to move the deadline later without looking the key up (issue 26); not state.
    session: Slot | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise RuntimeError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        # Kafka's ClassicGroupMember.hasSatisfiedHeartbeat: a parked member cannot heartbeat, so
        # its session is not held against it -- unless it is new, which is how abandoned first
        # joins get cleaned up.
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState
    state_timestamp: int
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    previous_state: GroupState | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    num_awaiting_join: int = 0
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None
    # When the rebalance in progress started, for the duration logged at completion.
    rebalance_started_ms: int | None = None
    # The table size of Kafka's ``members`` HashMap (it grows with the group and never shrinks):
    # the order Kafka's members vote in, which decides ties (select_protocol).
    members_capacity: int = JAVA_HASHMAP_INITIAL_CAPACITY

    # -- the state machine -------------------------------------------------------------------

    def transition_to(self, new: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[new]:
            raise IllegalStateTransition(self.group_id, self.state, new)
        self.previous_state = self.state
        self.state = new
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[PR]

    # -- membership --------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        """``ClassicGroup.validateMember``: the member exists and, when static, still holds its
        instance id (FENCED_INSTANCE_ID when a newer member took it over). NONE when valid."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return err.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return err.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return err.UNKNOWN_MEMBER_ID
        return err.NONE

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, *, transactional: bool = False
    ) -> int:
        """``ClassicGroup.validateOffsetCommit``: NONE when the commit may go ahead, else the error.

        A commit without generation or member is accepted only by an Empty group (a consumer
        managing its own partitions, or an admin); a member's commit must be of the current
        generation, and not while the member waits for its assignment (REBALANCE_IN_PROGRESS).
        A transactional commit needs no member and is never refused for a rebalance."""
        if self.is_in(GroupState.DEAD):
            return err.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and self.is_in(GroupState.EMPTY):
            return err.NONE
        if generation >= 0 or member_id or instance_id is not None:
            code = self.validate_member(member_id, instance_id)
            if code:
                return code
            if generation != self.generation:
                return err.ILLEGAL_GENERATION
        elif not transactional and not self.is_in(GroupState.EMPTY):
            # Without member id and generation a commit could clobber a live group's progress.
            return err.UNKNOWN_MEMBER_ID
        if not transactional and self.is_in(GroupState.COMPLETING_REBALANCE):
            # The member has its JoinGroup answer but not its assignment: it must finish the
            # rebalance before committing (clients handle this code gracefully).
            return err.REBALANCE_IN_PROGRESS
        return err.NONE

    def add(self, member: Member, waiter: Waiter | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.members_capacity = java_hashmap_capacity(len(self.members), self.members_capacity)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.supported_protocols.update({name for name, _ in member.protocols})
        member.join_waiter = waiter
        if waiter is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract({name for name, _ in member.protocols})
            self.supported_protocols += Counter()  # drop zero counts
            if member.awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def set_join_waiter(self, member: Member, waiter: Waiter | None) -> Waiter | None:
        """Park (or unpark, with None) a member's JoinGroup; returns the waiter it replaces."""
        old = member.join_waiter
        if waiter is not None and old is None:
            self.num_awaiting_join += 1
        elif waiter is None and old is not None:
            self.num_awaiting_join -= 1
        member.join_waiter = waiter
        return old

    def update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: Waiter | None,
    ) -> Waiter | None:
        self.supported_protocols.subtract({name for name, _ in member.protocols})
        member.protocols = protocols
        self.supported_protocols.update({name for name, _ in protocols})
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        return self.set_join_waiter(member, waiter)

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> tuple[Member, Member]:
        """Give a static member's place to a new member id; returns (old, new) members.

        The caller answers the old member's parked requests with FENCED_INSTANCE_ID.
        """
        old = self.members.pop(old_member_id)
        if old.awaiting_join:
            self.num_awaiting_join -= 1
        new = Member(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return old, new

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ---------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        names = list(protocol_names)
        if self.state is E:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in names)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self.supported_protocols.items() if c == n}

    def select_protocol(self) -> str:
        """Kafka's ``ClassicGroup.selectProtocol``, ties included.

        Kafka counts the votes in a fresh ``HashMap<String, Integer>`` (members voting in the
        iteration order of its ``members`` HashMap) and takes ``entrySet().stream().max(...)``,
        which keeps the first of equal maxima: a tie goes to the protocol the vote map iterates
        first -- by bucket of the protocol name's hash, then by first vote.
        """
        if not self.members:
            raise RuntimeError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        top = max(votes.values())
        tied = [name for name, n in votes.items() if n == top]
        if len(tied) == 1:
            return tied[0]  # the common case needs no hashing
        # The vote map's insertion order is the order of first votes, members voting in the order
        # their HashMap iterates; the map then iterates by bucket, ties within a bucket by that order.
        first_votes = dict.fromkeys(
            self.members[mid].vote(candidates) for mid in java_hashmap_order(self.members, self.members_capacity)
        )
        return next(name for name in java_hashmap_order(first_votes) if votes[name] == top)

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
        except ConsumerProtocolError:
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        # Kafka's ClassicGroup.isSubscribedToTopic: when the subscriptions are unknown (not
        # parsed yet, or not parseable), a consumer group counts as subscribed to every topic.
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(CR, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(E, now_ms)
        self.pending_sync_members.clear()

    def current_member_list(self) -> list[dict[str, Any]]:
        return [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata(self.protocol_name),
            }
            for m in self.members.values()
        ]
