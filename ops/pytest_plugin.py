"""pytest plugin: real groupd brokers as fixtures (registered through the ``pytest11`` entry point,
so installing groupd is all a project needs).

Fixtures
    ``groupd_broker_session``  one broker for the whole test session
    ``groupd_broker``          a fresh broker for one test (settings from ``@pytest.mark.groupd(...)``)
    ``groupd_broker_factory``  ``factory(**settings)`` starts more brokers; all stop after the test
    ``groupd_cluster``         a fresh 3-broker cluster in one process (``brokers=3``) for one test

Each yields a :class:`GroupdBroker`: ``.bootstrap`` (and ``str()``) is ``"127.0.0.1:PORT"``, and
``.faults`` injects faults through the broker's control endpoint (``--control-port``, on a free port
of 127.0.0.1 for every fixture broker unless ``control_port=-1``):
``broker.faults.add(api="Heartbeat", error="NOT_COORDINATOR", count=3, group="billing")``. A broker
is a ``python -m groupd serve --port 0`` subprocess with its own temporary data directory; the port
comes from its ``groupd_listening`` start-up line.

Cluster mode (``brokers=3``, or the ``groupd_cluster`` fixture): ``.bootstrap`` lists every broker,
``.nodes`` maps node ids to addresses, and ``stop_broker(node_id)``, ``start_broker(node_id,
rebalance=False)``, ``isolate_broker(node_id, isolated=True)``, ``rebalance_leaders()``,
``move_coordinator(group, node_id)`` and ``brokers()`` act on the brokers through the control endpoint.
Share groups (KIP-932): ``group_configs(group, share_auto_offset_reset="earliest")`` sets a group's
own configs and ``expire_locks(group)`` expires its acquisition locks now. Settings are ``groupd serve`` flags in snake case
(``num_partitions=3`` is ``--num-partitions 3``). Defaults for every broker come from
``--groupd-num-partitions``, ``--groupd-initial-rebalance-delay-ms`` and
``--groupd-min-session-timeout-ms`` or the ini options of the same names (``groupd_num_partitions``).

Brokers are stopped by process id (SIGTERM, then SIGKILL) and never by name, so parallel test runs
on one machine leave each other alone. ``GROUPD_*`` environment variables are not passed on: a
test's broker is configured by the test alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from groupd.broker.settings import Config

from .control_client import FaultsClient

_SETTINGS = {f.name: f for f in dataclasses.fields(Config)}
# The plugin owns where a broker listens and keeps its files; tests choose everything else.
_RESERVED = {"host", "port", "data_dir", "log_format", "config"}
# (option, ini name, Config field, help)
_OPTIONS = (
    ("--groupd-num-partitions", "groupd_num_partitions", "num_partitions", "partitions of auto-created topics"),
    (
        "--groupd-initial-rebalance-delay-ms",
        "groupd_initial_rebalance_delay_ms",
        "group_initial_rebalance_delay_ms",
        "group.initial.rebalance.delay.ms",
    ),
    (
        "--groupd-min-session-timeout-ms",
        "groupd_min_session_timeout_ms",
        "group_min_session_timeout_ms",
        "smallest session timeout a member may ask for",
    ),
)


class GroupdBroker:
    """One ``groupd serve`` subprocess on 127.0.0.1 and a free port."""

    host = "127.0.0.1"

    def __init__(self, data_dir: Path, startup_timeout: float = 30.0, **settings: Any) -> None:
        bad = sorted(k for k in settings if k not in _SETTINGS or k in _RESERVED)
        if bad:
            raise ValueError(f"unknown or reserved groupd setting(s): {', '.join(bad)}")
        self.data_dir = Path(data_dir)
        # The fault-injection endpoint, on a free port (a loopback HTTP listener: nothing else to pay).
        settings.setdefault("control_port", 0)
        self.settings = settings
        self.control_url: str | None = None
        self.startup_timeout = startup_timeout
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self.port = 0
        # node id -> "127.0.0.1:PORT" of each broker (one entry unless brokers=N)
        self.nodes: dict[int, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``; every broker's address, comma-separated, in cluster mode."""
        if len(self.nodes) > 1:
            return ",".join(self.nodes.values())
        return f"{self.host}:{self.port}"

    # --- broker actions (cluster mode) ---------------------------------------------------------------
    def brokers(self) -> list[dict[str, Any]]:
        """Each broker's ``node_id``, ``host``, ``port`` and ``state`` (live, stopped, isolated)."""
        return self.faults.brokers()["brokers"]

    def stop_broker(self, node_id: int) -> dict[str, Any]:
        """Close the broker's connections, refuse new ones, move its partitions' leaders elsewhere."""
        return self.faults.stop_broker(node_id)

    def start_broker(self, node_id: int, *, rebalance: bool = False) -> dict[str, Any]:
        """Listen again; ``rebalance=True`` also gives every partition back to its preferred broker."""
        return self.faults.start_broker(node_id, rebalance=rebalance)

    def isolate_broker(self, node_id: int, isolated: bool = True) -> dict[str, Any]:
        """Nothing is read from the broker's connections: requests time out (``isolated=False`` ends it)."""
        return self.faults.isolate_broker(node_id, isolated)

    def rebalance_leaders(self) -> dict[str, Any]:
        return self.faults.rebalance_leaders()

    def move_coordinator(self, group: str, node_id: int) -> dict[str, Any]:
        """Make broker ``node_id`` the coordinator of ``group`` (and of its offsets partition's groups)."""
        return self.faults.move_coordinator(group, node_id)

    # --- share groups (KIP-932) -------------------------------------------------------------------
    def group_configs(self, group: str, **configs: str | None) -> None:
        """Set (None: delete) a group's own configs, dots as underscores: a share consumer that
        starts after the records were produced sees them only with
        ``broker.group_configs("jobs", share_auto_offset_reset="earliest")`` (Kafka's default is
        ``latest``); ``share_record_lock_duration_ms="2000"`` shortens the acquisition lock.
        IncrementalAlterConfigs on the GROUP resource, as ``kafka-configs.sh --entity-type groups``."""
        from .kafka_client import KafkaClient, KafkaError

        ops = [
            {"name": k.replace("_", "."), "config_operation": 1 if v is None else 0, "value": v}
            for k, v in configs.items()
        ]
        body = {"resources": [{"resource_type": 32, "resource_name": group, "configs": ops}], "validate_only": False}
        with KafkaClient(self.bootstrap) as client:
            _, resp = client.any_connection().send("IncrementalAlterConfigs", body)
        (r,) = resp["responses"]
        if r["error_code"]:
            raise KafkaError("IncrementalAlterConfigs", r["error_code"], r.get("error_message"))

    def expire_locks(self, group: str, topic: str | None = None, partition: int | None = None) -> dict[str, Any]:
        """A share group's acquisition locks expire now: its acquired records are delivered again."""
        return self.faults.expire_locks(group, topic, partition)

    @property
    def faults(self) -> FaultsClient:
        """Fault injection on this broker (``add``, ``list``, ``clear``, ``expire_member``,
        ``expire_locks``, ``trigger_rebalance``)."""
        if self.control_url is None:
            raise RuntimeError("this broker has no control endpoint (started with control_port=-1?)")
        return FaultsClient(self.control_url)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def __str__(self) -> str:
        return self.bootstrap

    def __repr__(self) -> str:
        return f"GroupdBroker({self.bootstrap}, pid={self.pid}, data_dir={str(self.data_dir)!r})"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "groupd", "serve", "--host", self.host, "--port", "0"]
        cmd += ["--data-dir", str(self.data_dir), "--log-format", "json"]
        for name, value in self.settings.items():
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                cmd.append(flag if value else "--no-" + flag[2:])
            else:
                cmd += [flag, str(value)]
        return cmd

    def start(self) -> GroupdBroker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # A restart waits for the new process's start-up line: a fresh event per process, since the
        # reader of one that was killed without stop() can still reach its end of output (and set its
        # event) after this start began.
        listening = threading.Event()
        self.port, self.control_url = 0, None
        env = {k: v for k, v in os.environ.items() if not k.startswith("GROUPD_")}
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        assert self.proc.stdout is not None
        log = self.log_path.open("ab")
        self._reader = threading.Thread(
            target=self._pump,
            args=(self.proc.stdout, log, listening),
            daemon=True,
            name=f"groupd-log-{self.proc.pid}",
        )
        self._reader.start()
        # The reader sets the event on the start-up line, and also when the output ends (the
        # daemon exited), so this wait never outlasts a daemon that died.
        if not listening.wait(self.startup_timeout) or not self.port:
            code = self.proc.poll()
            if code is None and listening.is_set():  # its output ended: it is exiting
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = self.proc.wait(5)
            self.stop()
            why = f"exited with {code}" if code is not None else f"did not start within {self.startup_timeout:g}s"
            raise RuntimeError(f"groupd {why}; its log ({self.log_path}):\n{self.log_tail()}")
        return self

    def _pump(self, out: BinaryIO, log: BinaryIO, listening: threading.Event) -> None:
        """Copy the daemon's output to its log file (a full pipe would stall it) and note the port."""
        with log:
            for line in out:
                log.write(line)
                log.flush()
                if not self.port and b"groupd_listening" in line:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        event = json.loads(line)
                        self.control_url = event.get("control")
                        self.port = int(event["listen"].rsplit(":", 1)[1])
                        brokers = event.get("brokers") or {str(event.get("node_id", 1)): event["listen"]}
                        self.nodes = {int(k): v for k, v in brokers.items()}
                        listening.set()
        listening.set()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it has not exited within ``timeout``."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        return proc.returncode

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> GroupdBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("groupd", "groupd brokers (groupd_broker fixtures)")
    for option, ini, _field, help_ in _OPTIONS:
        group.addoption(option, dest=ini, default=None, metavar="N", help=f"{help_} (default: ini {ini})")
        parser.addini(ini, f"groupd brokers: {help_}", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "groupd(**settings): groupd serve settings for the groupd_broker fixture, e.g. num_partitions=3"
    )


def _default_settings(config: pytest.Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for option, ini, field, _help in _OPTIONS:
        raw = config.getoption(ini) or config.getini(ini)
        if raw in (None, ""):
            continue
        try:
            out[field] = int(str(raw).strip())
        except ValueError:
            raise pytest.UsageError(f"{option} / {ini}: not an integer: {raw!r}") from None
    return out


@pytest.fixture
def groupd_broker_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., GroupdBroker]]:
    """``factory(**settings)`` starts a broker (settings over the command-line/ini defaults)."""
    started: list[GroupdBroker] = []
    defaults = _default_settings(request.config)

    def factory(**settings: Any) -> GroupdBroker:
        broker = GroupdBroker(tmp_path_factory.mktemp("groupd") / "data", **{**defaults, **settings})
        started.append(broker)
        return broker.start()

    try:
        yield factory
    finally:
        for broker in reversed(started):
            broker.stop()


@pytest.fixture
def groupd_broker(request: pytest.FixtureRequest, groupd_broker_factory: Callable[..., GroupdBroker]) -> GroupdBroker:
    """A broker of its own for this test; ``@pytest.mark.groupd(num_partitions=3)`` sets it up."""
    settings: dict[str, Any] = {}
    for mark in reversed(list(request.node.iter_markers("groupd"))):  # closest marker wins
        settings.update(mark.kwargs)
    return groupd_broker_factory(**settings)


@pytest.fixture(scope="session")
def groupd_broker_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GroupdBroker]:
    """One broker for the whole session: tests share it, so they use unique group and topic names."""
    broker = GroupdBroker(tmp_path_factory.mktemp("groupd-session") / "data", **_default_settings(request.config))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def groupd_cluster(request: pytest.FixtureRequest, groupd_broker_factory: Callable[..., GroupdBroker]) -> GroupdBroker:
    """Three brokers in one process (node ids 1-3) for this test; ``@pytest.mark.groupd(...)`` adds settings."""
    settings: dict[str, Any] = {"brokers": 3}
    for mark in reversed(list(request.node.iter_markers("groupd"))):
        settings.update(mark.kwargs)
    return groupd_broker_factory(**settings)
