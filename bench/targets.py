"""The processes a benchmark aims at: groupd, the raw echo server and the librdkafka mock cluster.

Every process is started here, listens on 127.0.0.1 only, is remembered by pid and is stopped by that
pid (SIGTERM, then SIGKILL) -- on ``stop()``, at interpreter exit, or when the bench is interrupted.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .simulator import MOCK_CAPS

_LIVE: dict[int, subprocess.Popen[bytes]] = {}


def _reap_all() -> None:
    for pid, proc in list(_LIVE.items()):
        _stop_proc(proc)
        _LIVE.pop(pid, None)


atexit.register(_reap_all)


def _stop_proc(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    _LIVE.pop(proc.pid, None)
    return proc.returncode


def rss_kb(pid: int, field_name: str = "VmRSS") -> int | None:
    """A process's resident set (or peak, ``VmHWM``) from /proc/<pid>/status, in KiB."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (from /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            parts = fh.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class Target:
    name: str
    bootstrap: str
    proc: subprocess.Popen[bytes]
    caps: dict[str, int] = field(default_factory=dict)
    raw: bool = False  # not a Kafka broker: no discovery (echo)
    mock: bool = False  # librdkafka mock quirks (one long poll per connection, leader syncs last)
    log_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mb(self) -> float | None:
        kb = rss_kb(self.pid)
        return None if kb is None else kb / 1024

    def peak_rss_mb(self) -> float | None:
        kb = rss_kb(self.pid, "VmHWM")
        return None if kb is None else kb / 1024

    def cpu_s(self) -> float | None:
        return cpu_seconds(self.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int | None:
        prof = self.extra.pop("profiler", None)
        if prof is not None:
            # py-spy writes its profile when interrupted, and needs the target alive to do so.
            if prof.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(prof.pid, signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    prof.wait(30)
            _stop_proc(prof)
            out = self.extra.pop("profile_out", None)
            if out is not None:
                # Attaching to a process that is not its child needs ptrace rights (root, or
                # kernel.yama.ptrace_scope = 0): say where the profile is, or why there is none.
                done = out.exists() and out.stat().st_size > 0
                print(f"   profile: {out}" if done else f"   profile: none, see {out.with_suffix('.py-spy.log')}")
        return _stop_proc(self.proc)

    def profile(self, out: Path, rate: int = 100) -> None:
        """Sample this process with py-spy until ``stop()``: collapsed stacks (``--format raw``, one
        line per stack with its sample count; grep-able, and flamegraph.pl / speedscope read it)."""
        exe = Path(sys.executable).with_name("py-spy")
        cmd = [str(exe) if exe.exists() else "py-spy", "record", "--pid", str(self.pid), "--rate", str(rate)]
        cmd += ["--format", "raw", "--output", str(out), "--nonblocking"]
        log = out.with_suffix(".py-spy.log").open("ab")
        self.extra["profiler"] = _spawn(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.extra["profile_out"] = out
        log.close()

    def sim_kwargs(self) -> dict[str, Any]:
        """Simulator settings this target needs."""
        out: dict[str, Any] = {
            "caps": dict(self.caps),
            "raw": self.raw,
            "leader_syncs_last": self.mock,
            # Every target reads a connection's next request only once the previous one is answered
            # (Kafka's SocketServer, the librdkafka mock, groupd): one long poll per connection.
            "exclusive_long_polls": True,
        }
        if self.mock:
            out["connect_batch"] = 4  # its listen backlog is short: bigger bursts of connects time out
        return out

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        if self.log_path is None:
            return []
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if name is None or ev.get("event") == name:
                out.append(ev)
        return out

    def log_lines(self, levels: tuple[str, ...] = ("warning", "error", "critical")) -> list[str]:
        """Log lines at these levels (what the report quotes as odd behaviour)."""
        if self.log_path is None:
            return []
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                if line.strip():
                    out.append(line)
                continue
            if ev.get("level") in levels:
                out.append(line)
        return out

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _spawn(cmd: list[str], **kw: Any) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, **kw)
    _LIVE[proc.pid] = proc
    return proc


def _wait_json_line(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        chunk = proc.stdout.read()
        if chunk:
            buf += chunk
            if b"\n" in buf:
                return json.loads(buf.split(b"\n", 1)[0])
        time.sleep(0.01)
    _stop_proc(proc)
    raise RuntimeError(f"{proc.args} did not report in {timeout}s")


def start_echo() -> Target:
    proc = _spawn([sys.executable, "-m", "bench.echo", "--port", "0"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    info = _wait_json_line(proc, 15)
    return Target("echo", f"127.0.0.1:{info['port']}", proc, raw=True)


def start_mock(workdir: Path) -> Target:
    err = (workdir / "mock.log").open("ab")
    proc = _spawn([sys.executable, "-m", "bench.mock"], stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=err)
    err.close()
    info = _wait_json_line(proc, 20)
    if not info["bootstrap"].startswith("127.0.0.1:"):
        _stop_proc(proc)
        raise RuntimeError(f"mock cluster listens on {info['bootstrap']}, not loopback")
    return Target("mock", info["bootstrap"], proc, caps=dict(MOCK_CAPS), mock=True, log_path=workdir / "mock.log")


@dataclass
class StartTimes:
    listening_s: float  # spawn -> "groupd_listening" seen in the log
    loaded_s: float | None  # spawn -> "offsets_loaded" seen in the log
    startup_ms: float | None  # the daemon's own figure in the listening event
    loaded_event: dict[str, Any] | None


def start_groupd(
    data_dir: Path, *args: str, wait_loaded: bool = True, timeout: float = 120.0
) -> tuple[Target, StartTimes]:
    """``groupd serve`` on a free port with JSON logs next to the data dir; returns when it listens
    (and, with ``wait_loaded``, when its ``__consumer_offsets`` log is replayed)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir.parent / f"{data_dir.name}.log"
    log = log_path.open("ab")
    start_at = log.tell()
    cmd = [
        sys.executable,
        "-m",
        "groupd",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--data-dir",
        str(data_dir),
        "--log-format",
        "json",
        *args,
    ]
    t0 = time.perf_counter()
    proc = _spawn(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    listening = None
    loaded = None
    port = 0
    events: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    pos = start_at
    partial = b""
    while time.monotonic() < deadline:
        with log_path.open("rb") as fh:
            fh.seek(pos)
            data = fh.read()
        pos += len(data)
        now = time.perf_counter() - t0
        lines = (partial + data).split(b"\n")
        partial = lines.pop()
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            name = ev.get("event")
            if name == "groupd_listening" and listening is None:
                listening = now
                port = int(ev["listen"].rsplit(":", 1)[1])
                events["listening"] = ev
            elif name == "offsets_loaded" and loaded is None:
                loaded = now
                events["loaded"] = ev
        if listening is not None and (loaded is not None or not wait_loaded):
            break
        if proc.poll() is not None:
            raise RuntimeError(f"groupd exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
        time.sleep(0.002)
    else:
        _stop_proc(proc)
        raise RuntimeError(f"groupd did not start in {timeout}s: {log_path.read_text()[-3000:]}")
    target = Target("groupd", f"127.0.0.1:{port}", proc, log_path=log_path, extra={"args": list(args)})
    times = StartTimes(
        listening_s=listening,  # type: ignore[arg-type]
        loaded_s=loaded,
        startup_ms=events.get("listening", {}).get("startup_ms"),
        loaded_event=events.get("loaded"),
    )
    return target, times


def workdir(prefix: str = "groupd-bench-") -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def free_port() -> int:
    """A port nobody listens on now (a process started next may still lose it: rare, and the
    start-up probe then fails loudly)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ApiVersions v0 request: api_key 18, version 0, correlation id 1, client id "probe" (no body).
_API_VERSIONS_V0 = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x05probe"
_API_VERSIONS_FRAME = len(_API_VERSIONS_V0).to_bytes(4, "big") + _API_VERSIONS_V0


def first_answer_s(port: int, t0: float, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> float:
    """Seconds from ``t0`` (perf_counter) until an ApiVersions request to ``port`` is answered:
    connects as a client does at start-up, retrying a refused connect every millisecond."""
    import socket

    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
                s.sendall(_API_VERSIONS_FRAME)
                head = s.recv(4)
                if len(head) == 4:
                    return time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.001)
    raise RuntimeError(f"no ApiVersions answer on port {port} in {timeout}s")


def groupd_spawn_probe(data_dir: Path, settle_s: float = 1.0) -> tuple[float, float | None]:
    """(spawn -> first ApiVersions answer in ms, RSS in MiB once idle) of ``groupd serve`` on an
    empty data dir, started as a user starts it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [sys.executable, "-m", "groupd", "serve", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--data-dir", str(data_dir), "--log-format", "json"]
    log = (data_dir.parent / f"{data_dir.name}.log").open("ab")
    t0 = time.perf_counter()
    proc = _spawn(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    try:
        ms = first_answer_s(port, t0, 60, proc) * 1000
        time.sleep(settle_s)
        kb = rss_kb(proc.pid)
        return ms, None if kb is None else kb / 1024
    finally:
        _stop_proc(proc)


def mock_spawn_probe(workdir: Path, settle_s: float = 1.0) -> tuple[float, float | None]:
    """The same figures for the librdkafka mock (``bench.mock``): spawn -> its listener is known,
    which is after the holder's client has had ApiVersions and Metadata answered by it."""
    workdir.mkdir(parents=True, exist_ok=True)
    err = (workdir / "mock.log").open("ab")
    t0 = time.perf_counter()
    proc = _spawn([sys.executable, "-m", "bench.mock"], stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=err)
    err.close()
    try:
        _wait_json_line(proc, 20)
        ms = (time.perf_counter() - t0) * 1000
        time.sleep(settle_s)
        kb = rss_kb(proc.pid)
        return ms, None if kb is None else kb / 1024
    finally:
        _stop_proc(proc)
