"""The Docker image without Docker (it cannot run here): docker/Dockerfile is parsed, its build
steps are done in their local equivalent (the COPY'd paths into a build directory, ``pip wheel``,
``pip install`` of the wheel into a fresh venv), and its exact CMD and HEALTHCHECK are run, with only
the listen address, port and data directory swapped for test ones. The compose demo's script runs
against a real broker too.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from groupd.ops.kafka_client import KafkaClient
from groupd.ops.pytest_plugin import GroupdBroker
from kafka import KafkaProducer

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


def swap(argv: list[str], flag: str, value: str) -> list[str]:
    i = argv.index(flag)
    return [*argv[: i + 1], value, *argv[i + 2 :]]


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKER / "Dockerfile")


def test_the_image_is_what_the_issue_asks_for(stages: list[Stage]) -> None:
    build, final = stages[0], stages[-1]
    assert all(s.base == "python:3.11-slim" for s in stages)
    assert final.last("USER") not in ("root", "0", "")
    assert final.last("VOLUME") == "/data"
    assert final.last("EXPOSE") == "9092"
    assert "GROUPD_ADVERTISED_HOST" in env_of(final)
    cmd = exec_form(final.last("CMD"))
    assert cmd[:2] == ["groupd", "serve"]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    assert cmd[cmd.index("--data-dir") + 1] == "/data"
    health = final.last("HEALTHCHECK")
    assert exec_form(health.partition(" CMD ")[2])[:2] == ["groupd", "healthcheck"]

    # Every folder the wheel is built from is copied into the build stage.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = set(pyproject["tool"]["setuptools"]["package-dir"].values())
    copied = {src for arg in build.all("COPY") for src in arg.split()[:-1]}
    assert folders <= copied, f"docker/Dockerfile does not COPY {sorted(folders - copied)}"


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


@pytest.fixture
def container(stages: list[Stage], installed: Path, image_env: dict[str, str], tmp_path: Path) -> Iterator[dict]:
    """The image's CMD, run from the fresh venv on 127.0.0.1 and a free port."""
    data = tmp_path / "data"
    data.mkdir()
    cmd = exec_form(stages[-1].last("CMD"))
    cmd = swap(swap(swap(cmd, "--host", "127.0.0.1"), "--port", "0"), "--data-dir", str(data))
    assert cmd[cmd.index("--log-format") + 1] == "json"  # the listening line is read as JSON
    cmd[0] = str(installed / "bin" / cmd[0])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=data, env=image_env)
    try:
        assert proc.stdout is not None
        listening = None
        for line in proc.stdout:  # ends when the daemon exits: no wait of our own can hang here
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "groupd_listening":
                listening = event
                break
        assert listening, f"the image's CMD did not start (exit {proc.wait(10)})"
        yield {"proc": proc, "listening": listening, "port": int(listening["listen"].rsplit(":", 1)[1])}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_cmd_and_healthcheck_of_the_installed_wheel(
    stages: list[Stage], installed: Path, image_env: dict[str, str], container: dict
) -> None:
    port = container["port"]
    # The advertised host comes from the image's GROUPD_ADVERTISED_HOST.
    assert container["listening"]["advertised"] == f"{image_env['GROUPD_ADVERTISED_HOST']}:{port}"

    health = exec_form(stages[-1].last("HEALTHCHECK").partition(" CMD ")[2])
    health = swap(health, "--bootstrap-server", f"127.0.0.1:{port}")
    health[0] = str(installed / "bin" / health[0])
    ok = subprocess.run(health, capture_output=True, text=True, env=image_env, timeout=60, check=False)
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
    proc = container["proc"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    down = subprocess.run(health, capture_output=True, text=True, env=image_env, timeout=60, check=False)
    assert down.returncode == 1
    assert down.stderr.startswith("groupd: cannot connect")


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
