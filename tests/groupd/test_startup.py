"""What a newcomer meets when the daemon cannot start: one line saying why, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

GROUPD = [sys.executable, "-m", "groupd"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(data_dir: Path, port: int, *extra: str) -> list[str]:
    return [*GROUPD, "serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir), *extra]


def _wait_listening(proc: subprocess.Popen[str], port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the daemon did not listen")


def _refused(argv: list[str]) -> str:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, "GROUPD_LOG_LEVEL": "warning"}
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_second_daemon_on_one_data_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = _free_port()
    first = subprocess.Popen(_serve(data, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(first, port)
        line = _refused(_serve(data, _free_port()))
        assert str(data.resolve()) in line
        assert f"process {first.pid}" in line
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
    # the lock goes with the process: a daemon started afterwards gets the directory
    port = _free_port()
    again = subprocess.Popen(_serve(data, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(again, port)
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 0


def test_port_in_use_names_the_address_and_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _refused(_serve(tmp_path / "data", port))
    assert f"127.0.0.1:{port} is already in use" in line
    assert "--port" in line and "PORT=" in line
    assert "Errno" not in line


def test_data_dir_that_is_a_file_says_so(tmp_path: Path) -> None:
    f = tmp_path / "data"
    f.write_text("")
    line = _refused(_serve(f, _free_port()))
    assert f"{f}: the path is a file, not a directory" in line


def _listening_events(argv: list[str], until: str = "groupd_listening") -> list[dict[str, object]]:
    """The JSON events a daemon logs up to ``until``; the daemon is stopped afterwards."""
    proc = subprocess.Popen(
        [*argv, "--log-format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    events: list[dict[str, object]] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            events.append(json.loads(line))
            if events[-1].get("event") == until:
                return events
        raise AssertionError(f"the daemon ended before {until}: {events}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_startup_line_shows_the_listen_and_the_advertised_address(tmp_path: Path) -> None:
    port = _free_port()
    argv = [*GROUPD, "serve", "--data-dir", str(tmp_path / "data")]
    argv += [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{port}",
        "--advertised-listeners",
        "PLAINTEXT://kafka.example:29092",
    ]
    listening = _listening_events(argv)[-1]
    assert listening["listen"] == f"127.0.0.1:{port}"
    assert listening["advertised"] == "kafka.example:29092"


def test_cluster_brokers_log_their_addresses_as_strings(tmp_path: Path) -> None:
    # --port 0: every broker gets its own port from the OS, which nothing else can hold (a port
    # picked here and its neighbour could be taken by another process before the daemon binds them)
    events = _listening_events(_serve(tmp_path / "data", 0, "--brokers", "2"))
    (broker,) = [e for e in events if e["event"] == "broker_listening"]
    listening = events[-1]
    brokers = listening["brokers"]
    assert isinstance(brokers, dict) and set(brokers) == {"1", "2"}
    address = brokers["2"]
    assert isinstance(address, str)
    host, port = address.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert broker["node_id"] == 2
    assert broker["listen"] == address
    assert broker["advertised"] == address
    assert brokers["1"] == listening["listen"] != address


def _consecutive_free_ports(n: int) -> int:
    """A port free now with its ``n - 1`` successors (each bound once to check)."""
    while True:
        base = _free_port()
        if base + n - 1 > 65535:
            continue
        try:
            for p in range(base + 1, base + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return base


def test_cluster_brokers_take_consecutive_ports_from_port(tmp_path: Path) -> None:
    """``--port P --brokers 2``: the second broker on P + 1. The two ports are only free when they
    are checked: another process may take one before the daemon binds it, and the daemon then
    refuses in one line naming it, so that (and only that) is tried again on other ports."""
    for attempt in range(5):
        port = _consecutive_free_ports(2)
        argv = [*_serve(tmp_path / f"data{attempt}", port, "--brokers", "2"), "--log-format", "json"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        events: list[dict[str, object]] = []
        refused = ""
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                if not line.startswith("{"):
                    refused = line.strip()
                    break
                events.append(json.loads(line))
                if events[-1].get("event") == "groupd_listening":
                    break
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        if refused.endswith("already in use by another process: choose another with --port (PORT=... for make run)"):
            continue
        assert not refused, refused
        (broker,) = [e for e in events if e["event"] == "broker_listening"]
        assert broker["listen"] == broker["advertised"] == f"127.0.0.1:{port + 1}"
        assert events[-1]["brokers"] == {"1": f"127.0.0.1:{port}", "2": f"127.0.0.1:{port + 1}"}
        return
    raise AssertionError("five pairs of consecutive ports were taken before the daemon bound them")
