"""``_Fd``: a file descriptor that closes itself when unreferenced.

When ``os.open`` failed inside ``_Fd.__init__`` (a missing directory, or EMFILE once the daemon ran
out of descriptors), the half-built object had no ``fd`` attribute and its ``__del__`` raised
AttributeError, printed as "Exception ignored in ... __del__" on top of the real error.
"""

from __future__ import annotations

import errno
import gc
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from groupd.storage import log as log_module
from groupd.storage.log import _Fd


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every exception that Python could only report as 'ignored' (as from __del__)."""
    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    return seen


def _collect() -> None:
    for _ in range(3):
        gc.collect()


def test_open_of_a_missing_path_raises_and_leaves_no_noise(tmp_path: Path, unraisable: list[Any]) -> None:
    try:
        _Fd(tmp_path / "no-such-dir" / "00000000000000000000.log", os.O_RDONLY)
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("the open should have failed")
    _collect()
    assert [(u.exc_type, u.exc_value) for u in unraisable] == []


def test_open_failing_with_emfile_leaves_no_noise(
    tmp_path: Path, unraisable: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def out_of_fds(*args: Any, **kwargs: Any) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(log_module.os, "open", out_of_fds)
    with pytest.raises(OSError) as info:
        _Fd(tmp_path / "x.log", os.O_RDWR | os.O_CREAT)
    assert info.value.errno == errno.EMFILE
    monkeypatch.undo()
    del info  # the traceback holds the half-built object
    _collect()
    assert [(u.exc_type, u.exc_value) for u in unraisable] == []


def _opens(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still this file: by name, not by ``fstat`` raising, since a thread left
    running by an earlier test of the same worker may be given the freed number at once."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == str(path)
    except OSError:
        return False


def test_an_opened_fd_closes_once_and_on_collection(tmp_path: Path, unraisable: list[Any]) -> None:
    f = _Fd(tmp_path / "a.log", os.O_RDWR | os.O_CREAT)
    fd = f.fd
    assert _opens(fd, tmp_path / "a.log")
    f.close()
    f.close()
    assert f.fd == -1
    assert not _opens(fd, tmp_path / "a.log")

    g = _Fd(tmp_path / "b.log", os.O_RDWR | os.O_CREAT)
    fd = g.fd
    del g
    _collect()
    assert not _opens(fd, tmp_path / "b.log")
    assert unraisable == []
