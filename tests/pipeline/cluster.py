"""A real Spark standalone cluster on 127.0.0.1: one master and one worker, started from pyspark's
own distribution (``pyspark/bin/spark-class``), as processes cleaned up by pid.

The worker runs Python tasks with this interpreter (``PYSPARK_PYTHON``), where groupd is
installed, as a cluster node with ``groupd[pipeline]`` installed would.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent


def spark_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp / "logs"),
        SPARK_WORKER_DIR=str(tmp / "work"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        # small, quick-starting JVMs for a test cluster
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    url: str
    env: dict[str, str]
    tmp: Path

    def submit(
        self, script: str, *args: str, timeout: float = 240, conf: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess:
        cmd = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            self.url,
            *[a for item in conf for a in ("--conf", item)],
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            f"spark.pyspark.python={sys.executable}",
            script,
            *args,
        ]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.tmp)


def _wait_for(proc: subprocess.Popen, log: Path, pattern: str, timeout: float) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name} exited {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"no {pattern!r} in {log} after {timeout}s:\n{text[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextmanager
def standalone_cluster(tmp: Path, cores: int = 2, memory: str = "1g") -> Iterator[Cluster]:
    """A master and a worker on 127.0.0.1 (free ports), up until the worker registered."""
    env = spark_env(tmp)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = _free_port()
    ui = ["--webui-port", str(_free_port())]
    procs: list[subprocess.Popen] = []
    try:
        master_log = tmp / "master.log"
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), *ui],
            env=env,
            stdout=master_log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(master)
        _wait_for(master, master_log, r"I have been elected leader", 120)
        url = f"spark://127.0.0.1:{port}"
        ui = ["--webui-port", str(_free_port())]
        limits = ["--cores", str(cores), "--memory", memory]
        worker_log = tmp / "worker.log"
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", *ui, *limits, url],
            env=env,
            stdout=worker_log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(worker)
        _wait_for(worker, worker_log, r"Successfully registered with master", 120)
        yield Cluster(url, env, tmp)
    finally:
        for proc in reversed(procs):
            _stop(proc)
