"""Operating groupd: the admin CLI, the pytest plugin, the Docker image.

The daemons here come from groupd's own pytest plugin (``groupd_broker_session`` / ``groupd_broker``,
registered by the ``pytest11`` entry point), which is what the plugin's users get.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from groupd.ops.pytest_plugin import GroupdBroker

from groupd.cli import main
from tests.support.groups import Member

# pytester is enabled in test_pytest_plugin.py itself: pytest refuses ``pytest_plugins`` in a conftest
# below the rootdir once the whole suite is collected ("non-top-level conftest").


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``groupd ARGS...`` in this process (the console script's ``main``), capturing its output."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def broker(groupd_broker_session: GroupdBroker) -> str:
    return groupd_broker_session.bootstrap


@pytest.fixture
def members() -> Iterator[Callable[..., Member]]:
    """Start real consumer-group members (tests.support.groups.Member); all stopped afterwards."""
    started: list[Member] = []

    def start(kind: str, bootstrap: str, group: str, topic: str, **opts: Any) -> Member:
        m = Member(kind, bootstrap, group, topic, **opts).start()
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()


def free_port() -> int:
    """A port nothing listens on right now (for a setting that needs a number, such as metrics_port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
