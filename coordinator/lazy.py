"""A group subsystem built on its first use (issue 26: ``serve`` imports only what it needs before
its first answer).

The KIP-848 consumer-group core and the KIP-932 share-group core are 16 modules (assignors,
reconciliation, migration, the share assignor; ~8 ms of serve's ~60 ms of groupd imports) that a
broker serving only classic groups, offsets and the data plane never runs. Kafka's ``GroupMetadataManager`` builds them all at
start; groupd builds each on the first call that needs it: a heartbeat of its kind, a replayed
record of its kind, a describe of one of its groups, a change of its settings.

Until then :class:`DeferredGroups` answers what the rest of the shard asks of a manager that holds
no group (the classic, offset, admin and retention paths ask "is ``gid`` one of yours?" on every
request), exactly as the empty manager would; any other attribute builds the real manager, applies
the attributes set on the stand-in meanwhile, and points the holders registered with
:meth:`DeferredGroups.hold` at it, so the hot paths call the real manager directly afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .consumer.config import TopicsImage
from .timers import Deadlines


class _NoGroups:
    """The ``groups`` of a manager that holds none: ``groups.groups`` and ``groups.get`` as the
    empty ``ConsumerGroups``/``ShareGroups`` answer them; anything else builds the manager."""

    __slots__ = ("_owner",)

    def __init__(self, owner: DeferredGroups) -> None:
        self._owner = owner

    @property
    def groups(self) -> dict[str, Any]:
        real = self._owner._real
        return {} if real is None else real.groups.groups  # a fresh dict: nothing to mutate

    def get(self, group_id: str) -> None:
        real = self._owner._real
        return None if real is None else real.groups.get(group_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.real().groups, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_owner":
            object.__setattr__(self, name, value)
        else:
            setattr(self._owner.real().groups, name, value)


class _Calls:
    """A collaborator of the unbuilt manager (its ``events``): calls made on it are kept and made
    on the real one, in order, when the manager is built (``ConsumerGroupRequests`` attaches its
    logger to the consumer core's events when the shard is built)."""

    __slots__ = ("_attribute", "_owner")

    def __init__(self, owner: DeferredGroups, attribute: str) -> None:
        self._owner, self._attribute = owner, attribute

    def __getattr__(self, name: str) -> Callable[..., None]:
        owner, attribute = self._owner, self._attribute
        if owner._real is not None:
            return getattr(getattr(owner._real, attribute), name)  # type: ignore[no-any-return]

        def call(*args: Any, **kwargs: Any) -> None:
            if owner._real is None:
                owner._calls.append((attribute, name, args, kwargs))
            else:
                getattr(getattr(owner._real, attribute), name)(*args, **kwargs)

        return call


class DeferredGroups:
    """Stands in for a ``ConsumerGroupManager`` or ``ShareGroupManager`` until its first use."""

    __slots__ = ("_build", "_calls", "_groups", "_holders", "_pending", "_real", "deadlines")

    def __init__(self, build: Callable[[], Any]) -> None:
        _set = object.__setattr__
        _set(self, "_build", build)
        _set(self, "_real", None)
        _set(self, "_pending", {})  # attributes set before the build, applied to the real manager
        _set(self, "_holders", [])  # (object, attribute) that hold the stand-in, rebound at the build
        # Empty: what the shard's timers read meanwhile; the real manager's once built. A plain
        # slot, not a property: the shell reads it after every heartbeat (Wakeup.arm, issue 26).
        _set(self, "deadlines", Deadlines())
        _set(self, "_groups", _NoGroups(self))
        _set(self, "_calls", [])  # (attribute, method, args, kwargs) made on a collaborator meanwhile

    @property
    def built(self) -> bool:
        return self._real is not None

    def hold(self, holder: object, attribute: str) -> None:
        """``holder.attribute`` is this stand-in: make it the real manager once built."""
        if self._real is None:
            self._holders.append((holder, attribute))
        elif getattr(holder, attribute) is self:
            setattr(holder, attribute, self._real)

    def real(self) -> Any:
        real = self._real
        if real is None:
            real = self._build()
            for name, value in self._pending.items():
                setattr(real, name, value)
            for attribute, method, args, kwargs in self._calls:
                getattr(getattr(real, attribute), method)(*args, **kwargs)
            object.__setattr__(self, "_real", real)
            object.__setattr__(self, "deadlines", real.deadlines)
            for holder, attribute in self._holders:
                if getattr(holder, attribute) is self:
                    setattr(holder, attribute, real)
            self._holders.clear()
            self._pending.clear()
            self._calls.clear()
        return real

    # What the empty manager answers, without building it --------------------------------------
    def group(self, group_id: str) -> Any:
        real = self._real
        return None if real is None else real.group(group_id)

    @property
    def groups(self) -> Any:
        real = self._real
        return self._groups if real is None else real.groups

    @property
    def events(self) -> Any:
        real = self._real
        return _Calls(self, "events") if real is None else real.events

    @property
    def topics(self) -> Any:
        """The topics image last given (an empty one before any, as the managers start with): each
        request of a consumer or share group refreshes it first, a describe of an unknown group too."""
        real = self._real
        if real is not None:
            return real.topics
        image = self._pending.get("topics")
        if image is None:
            image = self._pending["topics"] = TopicsImage()
        return image

    def set_topics(self, image: Any) -> None:
        real = self._real
        if real is None:
            self._pending["topics"] = image  # applied at the build: no group to flag before it
        else:
            real.set_topics(image)

    def next_deadline(self) -> int | None:
        real = self._real
        return None if real is None else real.next_deadline()

    def due(self, now_ms: int) -> list[tuple[Any, ...]]:
        real = self._real
        return [] if real is None else real.due(now_ms)

    def end_load(self, now_ms: int, group_ids: Iterable[str] | None = None) -> None:
        """``onLoaded`` of a partition: a manager without groups has no member to give a session."""
        real = self._real
        if real is not None:
            real.end_load(now_ms, group_ids)
        elif group_ids is not None and (ids := list(group_ids)):  # none can exist unbuilt (replay
            self.real().end_load(now_ms, ids)  # builds it); answered as the real one all the same

    # Everything else: the real manager -----------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        pending = self._pending
        if self._real is None and name in pending:
            return pending[name]
        return getattr(self.real(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._real is None:
            self._pending[name] = value
        else:
            setattr(self._real, name, value)
