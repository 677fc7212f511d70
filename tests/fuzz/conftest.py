from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from tests.fuzz.harness import FuzzTarget


@pytest.fixture
def target() -> Iterator[FuzzTarget]:
    t = FuzzTarget()
    try:
        yield t
    finally:
        t.close()
        structlog.reset_defaults()  # the harness silences logging; other tests configure their own
