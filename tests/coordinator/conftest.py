from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from groupd.coordinator.classic.group import ClassicGroup


@pytest.fixture
def transitions(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Every state each group passes through, starting with the state it was created in."""
    seen: dict[str, list[str]] = {}
    original = ClassicGroup.transition_to

    def spy(self: ClassicGroup, new, now_ms: int) -> None:  # type: ignore[no-untyped-def]
        history = seen.setdefault(self.group_id, [str(self.state)])
        original(self, new, now_ms)
        history.append(str(new))

    monkeypatch.setattr(ClassicGroup, "transition_to", spy)
    return seen
