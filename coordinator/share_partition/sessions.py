"""Share sessions: Kafka's ``ShareSessionCache``, ``ShareSession`` and the epoch rules of
``SharePartitionManager.newContext`` / ``acknowledgeSessionUpdate``.

A share session is keyed by (group id, member id) and remembers the partitions a member fetches, so
later ShareFetch requests name only what changed. Epochs:

- ShareFetch epoch 0 opens a session (an existing one for the key is replaced); piggybacked
  acknowledgements are refused (INVALID_REQUEST: nothing can have been acquired in a session that
  did not exist); at ``max_sessions`` (``group.share.max.share.sessions``) SHARE_SESSION_LIMIT_REACHED.
- epoch -1 closes it after the request's acknowledgements (SHARE_SESSION_NOT_FOUND without one);
  the member's acquired records are released by the caller.
- any other epoch must be the session's (INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND when
  there is none), then it moves to the next (after ``Integer.MAX_VALUE`` comes 1, as
  ``ShareRequestMetadata.nextEpoch``).
- ShareAcknowledge may not open a session (epoch 0: INVALID_SHARE_SESSION_EPOCH).

Sessions go when their connection closes (Kafka's ``ConnectionDisconnectListener``) or their member
leaves the group; the caller does both through ``remove``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from groupd.protocol.errors import ErrorCode
from groupd.protocol.frozen import DEFAULT_FACTORY, mutable_record

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1

SessionKey = tuple[str, str]  # (group id, member id)
TopicIdPartition = tuple[Any, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    """``ShareRequestMetadata.nextEpoch``."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


@mutable_record
class ShareSession:
    key: SessionKey
    epoch: int
    # insertion-ordered, as Kafka's ImplicitLinkedHashCollection of CachedSharePartition
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    conn: Any = None

    def __init__(
        self,
        key: SessionKey,
        epoch: int,
        partitions: dict[TopicIdPartition, None] = DEFAULT_FACTORY,
        conn: Any = None,
    ) -> None:
        self.key = key
        self.epoch = epoch
        self.partitions = {} if partitions is DEFAULT_FACTORY else partitions
        self.conn = conn


class SessionError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.get(key)

    def fetch_context(
        self,
        key: SessionKey,
        epoch: int,
        fetch: list[TopicIdPartition],
        forget: list[TopicIdPartition],
        has_acks: bool,
        conn: Any = None,
    ) -> tuple[ShareSession | None, list[TopicIdPartition]]:
        """The session of a ShareFetch and the partitions it reads (``newContext``); raises
        ``SessionError``. Epoch -1 returns (the session, []) without changing it: the caller
        acknowledges, then removes it."""
        if epoch == FINAL_EPOCH:
            s = self.sessions.get(key)
            if s is None:
                raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return s, []
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise SessionError(ErrorCode.INVALID_REQUEST)
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                raise SessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            s = ShareSession(key, next_epoch(INITIAL_EPOCH), dict.fromkeys(fetch), conn)
            self.sessions[key] = s
            return s, list(s.partitions)
        s = self.sessions.get(key)
        if s is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if s.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        for tp in fetch:
            s.partitions.setdefault(tp, None)
        for tp in forget:
            s.partitions.pop(tp, None)
        s.epoch = next_epoch(s.epoch)
        return s, list(s.partitions)

    def acknowledge_context(self, key: SessionKey, epoch: int) -> ShareSession:
        """``acknowledgeSessionUpdate``: the session a ShareAcknowledge is in; raises ``SessionError``."""
        if epoch == INITIAL_EPOCH:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        s = self.sessions.get(key)
        if s is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            return s
        if s.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        s.epoch = next_epoch(s.epoch)
        return s

    def remove(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.pop(key, None)

    def remove_connection(self, conn: Any) -> list[ShareSession]:
        """The sessions opened on ``conn`` (closed): removed and returned."""
        gone = [s for s in self.sessions.values() if s.conn is conn]
        for s in gone:
            del self.sessions[s.key]
        return gone

    def remove_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def drop_partition(self, tp: TopicIdPartition) -> None:
        for s in self.sessions.values():
            s.partitions.pop(tp, None)
