from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import GroupdProcess


@pytest.fixture(scope="session")
def groupd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupdProcess]:
    """One daemon shared by the end-to-end tests; tests use unique topic and group names."""
    # regex subscriptions are resolved at most once per interval (Kafka: 10 s); 1 s keeps tests short
    d = GroupdProcess(
        Path(tmp_path_factory.mktemp("groupd")) / "data", "--group-consumer-regex-refresh-interval-ms", "1000"
    )
    d.start()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]
