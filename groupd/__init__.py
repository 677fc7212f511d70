"""groupd: a Kafka-wire-protocol consumer-group coordinator daemon for development, tests and CI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("groupd")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"
