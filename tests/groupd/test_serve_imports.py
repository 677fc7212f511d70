"""What a running ``groupd serve`` has imported once it answers: none of the modules only other
commands need (the admin CLI and its Kafka client, the fault CLI, the dashboard, the PySpark
pipeline, the pytest plugin), nor importlib.metadata (the version is read on demand), nor what
only a setting asks for (metrics, the dashboard, the control endpoint, cluster mode). Each of
them cost start-up time and resident memory of every daemon (issue 26: 122 ms of a 463 ms start
was the admin CLI). Checked for a plain ``serve`` and for the pytest fixture's brokers (a
control endpoint each)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

NOT_FOR_SERVE = (
    "groupd.ops.admin_cli",
    "groupd.ops.kafka_client",
    "groupd.ops.fault_cli",
    "groupd.ops.dashboard",
    "groupd.ops.pytest_plugin",
    "groupd.pipeline",
    "pyspark",
    "pytest",
    "importlib.metadata",
    # the HTTP endpoints, each imported by its own --*-port (groupd/daemon.py)
    "prometheus_client",
    "groupd.ops.metrics",
    "groupd.ops.control",
    "groupd.ops.http",
)
# Imported by --control-port, which the pytest plugin's brokers all have.
CONTROL = ("groupd.ops.control", "groupd.ops.http", "groupd.ops")

# Imported on first use, not at start-up: the compression libraries by the first compressed
# batch (storage/codecs.py), RE2 by the first regex subscription (coordinator/consumer/regex.py),
# tomllib by a config file (groupd/config.py), cluster mode by --brokers N (broker/node.py).
# The control endpoint's OpenAPI document (importlib.resources) by its first GET.
# The KIP-848 consumer-group and KIP-932 share-group cores by the first use of such a group
# (coordinator/lazy.py; tests/groupd/test_deferred_imports.py checks that first use).
LAZY = (
    "lz4",
    "snappy",
    "cramjam",
    "re2",
    "tomllib",
    "groupd.broker.cluster",
    "importlib.resources",
    "groupd.coordinator.consumer.manager",
    "groupd.coordinator.consumer.assignors",
    "groupd.coordinator.share.manager",
    "groupd.coordinator.share.group",
)

# Runs `groupd serve` in the main thread as the console script does; a watcher thread waits until
# the daemon answers a connection, then writes the loaded modules and ends the process.
_SCRIPT = textwrap.dedent(
    """
    import gc, json, os, socket, sys, threading, time

    port, data_dir, out, extra = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]

    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        records = sys.modules.get("groupd.storage.records")
        table = len(records._ZZ_CACHE) if records is not None else 0
        with open(out, "w") as fh:
            gc_state = {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
            json.dump({"modules": sorted(sys.modules), "varint_table": table, "gc": gc_state}, fh)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    from groupd.cli import main

    main(["serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", data_dir, *extra])
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("extra", [(), ("--control-port", "0")], ids=["serve", "fixture-broker"])
def test_serve_imports_nothing_only_other_commands_need(tmp_path: Path, extra: tuple[str, ...]) -> None:
    out = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(_free_port()), str(tmp_path / "data"), str(out), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.exists(), f"the daemon did not start: {proc.stderr[-2000:]}"
    got = json.loads(out.read_text())
    modules = got["modules"]
    allowed = CONTROL if extra else ()
    loaded = sorted(
        m for m in modules for bad in NOT_FOR_SERVE if (m == bad or m.startswith(bad + ".")) and m not in allowed
    )
    assert loaded == [], f"serve imported {loaded}"
    eager = sorted(m for m in modules for lazy in LAZY if m == lazy or m.startswith(lazy + "."))
    assert eager == [], f"serve imported before first use {eager}"
    # storage/records.py's table of small varints (0.7 MiB) is built by the first encode
    assert got["varint_table"] == 0
    # groupd/cli.py turns the cyclic GC off while serve imports: back on once it serves, with what
    # the imports made frozen (never scanned again)
    assert got["gc"]["enabled"] is True
    assert got["gc"]["frozen"] > 10_000
