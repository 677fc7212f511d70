"""Start and stop a real ``groupd serve`` subprocess on a free port with its own data directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


class GroupdProcess:
    def __init__(
        self,
        data_dir: Path,
        *extra_args: str,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], object] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.extra_args = list(extra_args)
        self.env = env
        self.preexec_fn = preexec_fn  # run in the child before exec (e.g. resource limits)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0, port: int = 0) -> GroupdProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        start_at = log.tell()
        cmd = [
            sys.executable,
            "-m",
            "groupd",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port or self.port),
            "--data-dir",
            str(self.data_dir),
            "--log-format",
            "json",
            *self.extra_args,
        ]
        env = dict(os.environ)
        env.update(self.env or {})
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, preexec_fn=self.preexec_fn)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"groupd exited with {self.proc.returncode}: {self.log_tail()}")
            with self.log_path.open("rb") as fh:
                fh.seek(start_at)
                for line in fh:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if ev.get("event") == "groupd_listening":
                        self.port = int(ev["listen"].rsplit(":", 1)[1])
                        return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"groupd did not start in {timeout}s: {self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def events(self, name: str) -> list[dict[str, object]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == name:
                out.append(ev)
        return out

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait (graceful); SIGKILL if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> GroupdProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
