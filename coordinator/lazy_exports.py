"""A package's names imported from its modules on first use (PEP 562's module ``__getattr__``).

The KIP-848 and share-group packages (``coordinator/consumer``, ``coordinator/share``) export
their classes from ``__init__`` as before, but import the modules behind them only when a name is
first read: a broker serving classic groups never loads them (issue 26, start-up)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, names: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: ``names`` maps an exported name to the module (of the
    package) that defines it; a name read once is kept in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
