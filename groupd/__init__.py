"""groupd: a Kafka-wire-protocol consumer-group coordinator daemon for development, tests and CI.

This folder is the top floor and holds only the entry point (``cli.py``, ``__main__.py``), the
process around a node (``daemon.py``), configuration loading (``config.py``: flags, environment, TOML
over ``groupd.broker.settings``) and logging (``logs.py``). Every subsystem lives in a folder of its
own, mapped into this namespace: ``protocol``, ``storage``, ``coordinator``, ``broker``, ``security``,
``ops``, ``pipeline``. Nothing below imports this package.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("groupd")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"
