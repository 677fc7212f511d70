"""What ``groupd analyze`` says before and while Spark works: a Java check first, then progress.

Spark's Python side starts a JVM through ``spark-submit``; without a usable ``java`` that ends in
pyspark's ``JAVA_GATEWAY_EXITED`` traceback after a few seconds. ``java_problem`` finds the same
``java`` Spark's launcher (``bin/spark-class``) would run -- ``$JAVA_HOME/bin/java`` when JAVA_HOME
is set, else the first ``java`` on PATH -- and says plainly what is missing. Spark 4 runs on Java
17 or later.

A run on a large log takes minutes in a handful of Spark jobs; ``Progress`` prints one line per
phase (reading, each table, the report) and, every few seconds while a stage runs, its task counts
from Spark's status tracker, all to stderr (stdout keeps the summary).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from typing import Any, TextIO

JAVA_MIN = 17


def java_executable(env: dict[str, str] | None = None) -> str | None:
    """The ``java`` Spark's launcher would run, or None."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        exe = os.path.join(home, "bin", "java")
        return exe if os.access(exe, os.X_OK) else None
    return shutil.which("java", path=env.get("PATH", os.defpath))


def java_version(exe: str) -> int | None:
    """The major version ``exe -version`` reports (8 for "1.8.0_402", 17 for "17.0.15")."""
    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def java_problem(env: dict[str, str] | None = None) -> str | None:
    """None when a Java Spark can run on is there, else what is wrong and how to fix it."""
    env = os.environ if env is None else env
    exe = java_executable(env)
    hint = (
        f"Spark needs Java {JAVA_MIN} or later: install it (Debian/Ubuntu: apt-get install "
        f"openjdk-{JAVA_MIN}-jre-headless) and put java on PATH or set JAVA_HOME"
    )
    if exe is None:
        where = f"JAVA_HOME={env['JAVA_HOME']} has no bin/java" if env.get("JAVA_HOME") else "no java on PATH"
        return f"{where}. {hint}"
    version = java_version(exe)
    if version is None:
        return f"{exe} -version did not run or said no version. {hint}"
    if version < JAVA_MIN:
        return f"{exe} is Java {version}. {hint}"
    return None


class Progress:
    """Phase lines, and a daemon thread printing the running stages every `interval` seconds."""

    def __init__(self, spark: Any | None = None, *, interval: float = 5.0, out: TextIO | None = None) -> None:
        self.spark = spark
        self._interval = interval
        self._out = out
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _print(self, text: str) -> None:
        out = self._out or sys.stderr
        print(f"[{time.monotonic() - self._started:6.1f}s] {text}", file=out, flush=True)

    def phase(self, text: str) -> None:
        self._print(text)

    def __enter__(self) -> Progress:
        if self.spark is not None and self._interval > 0:
            self._thread = threading.Thread(target=self._watch, name="groupd-analyze-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._interval + 5)

    def stage_lines(self) -> list[str]:
        """One line per stage running now: its id, what it computes, and its tasks."""
        tracker = self.spark.sparkContext.statusTracker()
        lines = []
        for sid in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(sid)
            if info is None:
                continue
            name = info.name.split(" at ")[0]
            lines.append(
                f"  stage {sid} ({name}): {info.numCompletedTasks}/{info.numTasks} tasks done, "
                f"{info.numActiveTasks} running"
            )
        return lines

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                for line in self.stage_lines():
                    self._print(line)
            except Exception:  # the session stopped under us: nothing left to report
                return
