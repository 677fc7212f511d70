"""The Docker image without Docker (it cannot run here): docker/Dockerfile is parsed, its build
steps are done in their local equivalent (the COPY'd paths into a build directory, ``pip wheel``,
``pip install`` of the wheel into a fresh venv), and its exact CMD and HEALTHCHECK are run with the
image's ENV, where only the listen address, port and data directory are overridden by environment
variables (as ``docker run -e`` would). The compose file's groupd environment (an internal and an
external listener) is run the same way, and the compose demo's script runs against a real broker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from groupd.broker.settings import Config
from groupd.ops.kafka_client import KafkaClient
from groupd.ops.pytest_plugin import GroupdBroker
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


@dataclass
class Stage:
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, name: str) -> list[str]:
        return [arg for ins, arg in self.instructions if ins == name]

    def last(self, name: str) -> str:
        found = self.all(name)
        assert found, f"no {name} in the stage FROM {self.base}"
        return found[-1]


def parse_dockerfile(path: Path) -> list[Stage]:
    """Stages of a Dockerfile: (instruction, arguments) with continuation lines joined, comments dropped."""
    stages: list[Stage] = []
    logical = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not logical and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        ins, _, arg = logical.partition(" ")
        logical = ""
        ins = ins.upper()
        if ins == "FROM":
            stages.append(Stage(arg.split()[0]))
        else:
            stages[-1].instructions.append((ins, arg.strip()))
    return stages


def exec_form(arg: str) -> list[str]:
    """CMD/HEALTHCHECK arguments must be exec form (a JSON array): no shell between docker and groupd."""
    value = json.loads(arg)
    assert isinstance(value, list) and all(isinstance(s, str) for s in value), arg
    return value


def env_of(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for arg in stage.all("ENV"):
        for item in shlex.split(arg):
            key, sep, value = item.partition("=")
            assert sep, f"ENV {arg!r}: use KEY=VALUE"
            env[key] = value
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compose_environment(text: str, service: str = "groupd") -> dict[str, str]:
    """The ``environment:`` mapping of one service of docker/compose.yaml (no YAML library here)."""
    env: dict[str, str] = {}
    in_service = in_env = False
    for line in text.splitlines():
        if re.match(r"^  \S", line):
            in_service, in_env = line.strip() == f"{service}:", False
        elif in_service and re.match(r"^    \S", line):
            in_env = line.strip() == "environment:"
        elif in_service and in_env and re.match(r"^      \S", line):
            key, _, value = line.strip().partition(":")
            env[key] = value.strip().strip('"')
    return env


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKER / "Dockerfile")


def test_the_image_is_what_the_issue_asks_for(stages: list[Stage]) -> None:
    build, final = stages[0], stages[-1]
    assert all(s.base == "python:3.11-slim" for s in stages)
    assert final.last("USER") not in ("root", "0", "")
    assert final.last("VOLUME") == "/data"
    assert final.last("EXPOSE") == "9092 9093 9094"  # 9093-9094: --brokers 3
    env = env_of(final)
    # The settings are ENV defaults and CMD carries no flag, so every GROUPD_* variable is honoured
    # (a flag beats the environment: the issue's "CMD flags override them").
    assert exec_form(final.last("CMD")) == ["groupd", "serve"]
    assert {k: env[k] for k in ("GROUPD_HOST", "GROUPD_PORT", "GROUPD_DATA_DIR", "GROUPD_LOG_FORMAT")} == {
        "GROUPD_HOST": "0.0.0.0",
        "GROUPD_PORT": "9092",
        "GROUPD_DATA_DIR": "/data",
        "GROUPD_LOG_FORMAT": "json",
    }
    settings = {"GROUPD_" + f.name.upper() for f in dataclasses.fields(Config)}
    assert {k for k in env if k.startswith("GROUPD_")} <= settings  # no variable that nothing reads
    health = final.last("HEALTHCHECK")
    assert exec_form(health.partition(" CMD ")[2])[:3] == ["groupd", "healthcheck", "--local"]

    # Every folder the wheel is built from is copied into the build stage.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = set(pyproject["tool"]["setuptools"]["package-dir"].values())
    copied = {src for arg in build.all("COPY") for src in arg.split()[:-1]}
    assert folders <= copied, f"docker/Dockerfile does not COPY {sorted(folders - copied)}"

    compose = compose_environment((DOCKER / "compose.yaml").read_text())
    assert {"GROUPD_LISTENERS", "GROUPD_LISTENER_SECURITY_PROTOCOL_MAP", "GROUPD_ADVERTISED_LISTENERS"} <= set(compose)
    assert set(compose) <= settings


@pytest.fixture(scope="module")
def installed(stages: list[Stage], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build stage's COPY + ``pip wheel`` and the final stage's ``pip install``, into a fresh venv."""
    work = tmp_path_factory.mktemp("image")
    src, wheels, venv = work / "src", work / "wheels", work / "venv"
    src.mkdir()
    for arg in stages[0].all("COPY"):
        *sources, dest = arg.split()
        target = src / dest if dest not in ("./", ".") else src
        for s in sources:
            path = ROOT / s
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy(path, src / path.name)
    # The RUN lines, with the image's paths mapped to the test's.
    (wheel_run,) = [r for r in stages[0].all("RUN") if "pip wheel" in r]
    assert "--no-deps" in wheel_run
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels), str(src)],
        check=True,
        timeout=300,
    )
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (install_run,) = [r for r in stages[-1].all("RUN") if "pip install" in r]
    assert "/wheels/*.whl" in install_run
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-cache-dir", *map(str, wheels.glob("*.whl"))],
        check=True,
        timeout=300,
        cwd=work,
    )
    return venv


@pytest.fixture
def image_env(stages: list[Stage]) -> dict[str, str]:
    """The container's environment: the Dockerfile's ENV, none of the test runner's GROUPD_*/PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUPD_") and k != "PYTHONPATH"}
    env.update(env_of(stages[-1]))
    return env


@dataclass
class Container:
    proc: subprocess.Popen[bytes]
    listening: dict[str, Any]
    env: dict[str, str]
    data: Path
    lines: list[dict[str, Any]]


class PortTaken(Exception):
    """The daemon refused to start: a port it was given was taken between choosing and binding."""


@pytest.fixture
def run_image(
    stages: list[Stage], installed: Path, image_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., Container]]:
    """The image's CMD, run from the fresh venv with the image's ENV plus ``overrides`` (``docker run
    -e``): the test's data directory and, unless given, GROUPD_HOST=127.0.0.1 and a free GROUPD_PORT."""
    started: list[subprocess.Popen[bytes]] = []

    def run(**overrides: str) -> Container:
        data = tmp_path / f"data{len(started)}"
        data.mkdir()
        env = {**image_env, "GROUPD_HOST": "127.0.0.1", "GROUPD_PORT": str(free_port()), "GROUPD_DATA_DIR": str(data)}
        env.update(overrides)
        cmd = exec_form(stages[-1].last("CMD"))
        cmd[0] = str(installed / "bin" / cmd[0])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=data, env=env)
        started.append(proc)
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # ends when the daemon exits: no wait of our own can hang here
            if b"is already in use by another process" in line:  # the one-line refusal, not a log event
                proc.wait(10)
                raise PortTaken(line.decode())
            lines.append(json.loads(line))  # JSON logs (GROUPD_LOG_FORMAT from the image): every line
            if lines[-1].get("event") == "groupd_listening":
                return Container(proc, lines[-1], env, data, lines)
        raise AssertionError(f"the image's CMD did not start (exit {proc.wait(10)}): {lines}")

    yield run
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def healthcheck(stages: list[Stage], installed: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK, exactly, in the container's environment."""
    health = exec_form(stages[-1].last("HEALTHCHECK").partition(" CMD ")[2])
    health[0] = str(installed / "bin" / health[0])
    return subprocess.run(health, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_cmd_and_healthcheck_of_the_installed_wheel(
    stages: list[Stage], installed: Path, image_env: dict[str, str], run_image: Callable[..., Container]
) -> None:
    c = run_image()
    port = int(c.env["GROUPD_PORT"])
    assert c.listening["listen"] == f"127.0.0.1:{port}"  # GROUPD_HOST and GROUPD_PORT, not a CMD flag
    # The advertised host comes from the image's GROUPD_ADVERTISED_HOST.
    assert c.listening["advertised"] == f"{image_env['GROUPD_ADVERTISED_HOST']}:{port}"
    assert c.listening["data_dir"] == str(c.data)

    ok = healthcheck(stages, installed, c.env)  # finds the port through GROUPD_PORT
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"ok: 127.0.0.1:{port} answered ApiVersions")

    # The installed daemon is a working broker, not just a port: a group commit goes through.
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
    producer.send("image-topic", b"hello").get(timeout=30)
    producer.close()
    with KafkaClient(f"127.0.0.1:{port}") as client:
        client.commit_offsets("image-smoke", {("image-topic", 0): 1})
        assert client.committed_offsets("image-smoke") == {("image-topic", 0): 1}
        assert [g.group_id for g in client.list_groups()] == ["image-smoke"]

    # The healthcheck fails once the daemon is gone (SIGTERM: a graceful stop, exit 0).
    c.proc.send_signal(signal.SIGTERM)
    assert c.proc.wait(15) == 0
    down = healthcheck(stages, installed, c.env)
    assert down.returncode == 1
    assert down.stderr.startswith("groupd: cannot connect")


def test_every_groupd_variable_reaches_the_daemon(
    stages: list[Stage], installed: Path, run_image: Callable[..., Container]
) -> None:
    """What `docker run -e GROUPD_...` sets wins over the image's defaults: here the partitions of
    auto-created topics, the log level and the broker id."""
    c = run_image(GROUPD_NUM_PARTITIONS="3", GROUPD_LOG_LEVEL="debug", GROUPD_NODE_ID="7")
    assert c.listening["node_id"] == 7
    bootstrap = c.listening["listen"]
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        assert producer.partitions_for("env-topic") == {0, 1, 2}  # auto-created with GROUPD_NUM_PARTITIONS
    finally:
        producer.close()
    assert healthcheck(stages, installed, c.env).returncode == 0
    c.proc.send_signal(signal.SIGTERM)
    assert c.proc.wait(15) == 0
    assert c.proc.stdout is not None
    rest = [json.loads(line) for line in c.proc.stdout]
    assert any(e.get("level") == "debug" for e in c.lines + rest)


def test_the_image_runs_a_cluster_with_groupd_brokers(
    stages: list[Stage], installed: Path, run_image: Callable[..., Container]
) -> None:
    """`docker run -e GROUPD_BROKERS=3`: three brokers on consecutive ports from GROUPD_PORT (the
    image exposes 9092-9094), every one answering with all three; the healthcheck passes."""
    for attempt in range(5):
        base = free_port()
        while base > 65000 or not all(_port_free(base + i) for i in (1, 2)):
            base = free_port()
        try:
            c = run_image(GROUPD_BROKERS="3", GROUPD_PORT=str(base))
            break
        except PortTaken:  # another test's process took one of the three ports meanwhile
            if attempt == 4:
                raise
    assert c.listening["brokers"] == {str(i + 1): f"127.0.0.1:{base + i}" for i in range(3)}
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{base + 2}")
    try:
        assert [b["broker_id"] for b in admin.describe_cluster()["brokers"]] == [1, 2, 3]
    finally:
        admin.close()
    assert healthcheck(stages, installed, c.env).returncode == 0
    c.proc.send_signal(signal.SIGTERM)
    assert c.proc.wait(15) == 0


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_compose_listeners_internal_and_external(
    stages: list[Stage], installed: Path, run_image: Callable[..., Container]
) -> None:
    """compose.yaml's groupd environment: clients on the host (EXTERNAL, published) are told
    localhost:<port>, clients on the compose network (INTERNAL) groupd:<port>, both over PLAINTEXT;
    the healthcheck finds the daemon through the same variables. Only the ports are swapped for
    free ones (and 0.0.0.0 for 127.0.0.1)."""
    env = compose_environment((DOCKER / "compose.yaml").read_text())
    ports = {"9092": str(free_port()), "19092": str(free_port())}
    for key in ("GROUPD_LISTENERS", "GROUPD_ADVERTISED_LISTENERS"):
        env[key] = re.sub(r":(9092|19092)\b", lambda m: ":" + ports[m.group(1)], env[key]).replace(
            "0.0.0.0", "127.0.0.1"
        )
    c = run_image(**env)
    ext, internal = int(ports["9092"]), int(ports["19092"])
    assert c.listening["listeners"] == [f"EXTERNAL://127.0.0.1:{ext}", f"INTERNAL://127.0.0.1:{internal}"]

    for port, seen in ((ext, ("localhost", ext)), (internal, ("groupd", internal))):
        with KafkaClient(f"127.0.0.1:{port}") as client:
            assert client.metadata([]).brokers == {1: seen}
            _, found = client.any_connection().send("FindCoordinator", {"key": "billing", "key_type": 0}, 3)
            assert (found["error_code"], found["host"], found["port"]) == (0, *seen)

    # A real consumer group on the host side: bootstrap, metadata and coordinator all via localhost.
    producer = KafkaProducer(bootstrap_servers=f"localhost:{ext}")
    producer.send("orders", b"o-1").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        "orders", bootstrap_servers=f"localhost:{ext}", group_id="billing", auto_offset_reset="earliest"
    )
    try:
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                records += batch
        assert [r.value for r in records] == [b"o-1"]
        consumer.commit()
    finally:
        consumer.close()
    with KafkaClient(f"127.0.0.1:{ext}") as client:  # compose's GROUPD_NUM_PARTITIONS=3 holds too
        committed = client.committed_offsets("billing")
        assert sorted(committed) == [("orders", 0), ("orders", 1), ("orders", 2)] and sum(committed.values()) == 1

    ok = healthcheck(stages, installed, c.env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"ok: 127.0.0.1:{ext} answered ApiVersions")


def test_compose_demo_consumer_group(groupd_broker_session: GroupdBroker, tmp_path: Path) -> None:
    """docker/demo/demo.py as compose runs it: a producer and two consumers of one group; the group
    becomes Stable with both members and commits what it reads."""
    compose = (DOCKER / "compose.yaml").read_text()
    assert "dockerfile: docker/Dockerfile" in compose and "condition: service_healthy" in compose
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"orders-{suffix}", f"billing-{suffix}"
    bootstrap = groupd_broker_session.bootstrap
    script = str(DOCKER / "demo" / "demo.py")
    common = ["--bootstrap-server", bootstrap, "--topic", topic]
    procs = [
        subprocess.Popen([sys.executable, script, "produce", *common, "--interval", "0.05"]),
        subprocess.Popen([sys.executable, script, "consume", *common, "--group", group], stdout=subprocess.DEVNULL),
        subprocess.Popen([sys.executable, script, "consume", *common, "--group", group], stdout=subprocess.DEVNULL),
    ]
    try:
        deadline = time.monotonic() + 60
        seen = None
        with KafkaClient(bootstrap) as client:
            while time.monotonic() < deadline:
                d = client.describe_group(group)
                committed = client.committed_offsets(group) if d else {}
                seen = (d.state if d else None, len(d.members) if d else 0, committed)
                if seen[0] == "Stable" and seen[1] == 2 and sum(committed.values()) > 0:
                    break
                assert all(p.poll() is None for p in procs), "a demo process exited"
                time.sleep(0.2)
            else:
                raise AssertionError(f"demo group never stable with commits: {seen}")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                assert p.wait(30) == 0  # they stop cleanly on SIGTERM, as `docker compose down` asks
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise
