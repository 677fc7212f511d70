"""A dict one of whose entries is decoded from bytes only when something needs it.

The hot paths keep a body as the bytes it came in as or goes out as (an OffsetCommit request's
topics walked in C, its answer and a Produce answer packed in C or by ``struct``) and the
dispatcher sends those bytes as they are; everything else (observers, wrappers, tests) may still
read the body as the dict the generic codec would have made. ``LazyDict`` is that dict: its ``LAZY``
entry is filled by the subclass's ``_fill`` the first time anything reads it, or reads every key
(iteration, length, equality, ``repr``, a copy, pickling). The other entries are plain.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["LazyDict"]

_contains = dict.__contains__
_get = dict.get


class LazyDict(dict):  # type: ignore[type-arg]
    """Subclasses set ``LAZY`` (the key) and define ``_fill()``, which sets it with
    ``dict.__setitem__`` (and forgets whatever bytes it made stale)."""

    __slots__ = ()
    LAZY = ""

    def _full(self) -> None:
        if not _contains(self, self.LAZY):
            self._fill()  # type: ignore[attr-defined]

    def __missing__(self, key: str) -> Any:
        if key == self.LAZY:
            self._full()
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key == self.LAZY:
            self._full()
        return _get(self, key, default)

    def __contains__(self, key: object) -> bool:
        if key == self.LAZY:
            self._full()
        return _contains(self, key)

    def __iter__(self) -> Iterator[str]:
        self._full()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._full()
        return dict.__len__(self)

    def keys(self):  # type: ignore[no-untyped-def]
        self._full()
        return dict.keys(self)

    def items(self):  # type: ignore[no-untyped-def]
        self._full()
        return dict.items(self)

    def values(self):  # type: ignore[no-untyped-def]
        self._full()
        return dict.values(self)

    def copy(self) -> dict[str, Any]:  # type: ignore[override]
        self._full()
        return dict(dict.items(self))

    def pop(self, key: str, *default: Any) -> Any:  # type: ignore[override]
        if key == self.LAZY:
            self._full()
        return dict.pop(self, key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key == self.LAZY:
            self._full()
        return dict.setdefault(self, key, default)

    def __eq__(self, other: object) -> bool:
        self._full()
        if isinstance(other, LazyDict):
            other._full()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._full()
        return dict.__repr__(self)

    def __reduce__(self) -> Any:
        self._full()
        return (dict, (dict(dict.items(self)),))
