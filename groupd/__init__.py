"""groupd: a Kafka-wire-protocol consumer-group coordinator daemon for development, tests and CI.

This folder is the top floor and holds only the entry point (``cli.py``, ``__main__.py``), the
process around a node (``daemon.py``), configuration loading (``config.py``: flags, environment, TOML
over ``groupd.broker.settings``) and logging (``logs.py``). Every subsystem lives in a folder of its
own, mapped into this namespace: ``protocol``, ``storage``, ``coordinator``, ``broker``, ``security``,
``ops``, ``pipeline``. Nothing below imports this package.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    # ``__version__`` on first use: importlib.metadata costs ~25 ms, which `serve` never needs.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    global __version__
    try:
        __version__ = version("groupd")
    except PackageNotFoundError:  # running from a source tree without an install
        __version__ = "0.0.0"
    return __version__
