"""How the suite is sorted: which tests ``make test-quick`` leaves out, and how ``make test`` spreads
the whole suite over pytest-xdist workers.

Two markers are set here rather than in each module, so a new test lands on the right side by the
fixtures it asks for:

- ``e2e``: the test talks to a real ``groupd serve`` (a daemon fixture, or one the test starts
  itself), or drives a real Kafka client (kafka-python, aiokafka, confluent-kafka, kcat, kafkajs,
  the Go clients) against a broker;
- ``spark``: the test runs PySpark (the session-scoped ``spark`` and ``analyzed`` fixtures).

``make test-quick`` is ``-m "not e2e and not spark"``: the unit and property tests.

Under xdist (``--dist loadgroup``) the Spark tests (every test of ``tests/pipeline/``) are one unit
of work, so one worker starts the JVM and runs ``groupd analyze`` on the fixture history once (each
worker would otherwise pay both, and four JVMs on two cores crawl); every other test is a unit of its
own. That is done by the scheduler below rather than by ``xdist_group`` markers: pytest-xdist 3.8
groups by renaming ``item._nodeid``, which pytest 9 no longer reads, so the markers are silently
ignored. The Spark unit is handed out first (xdist hands out the largest unit first), then the
end-to-end tests, then the unit and property tests, which fill the workers' last minutes: starting a
long test last would leave one worker finishing alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parent

# Fixtures that start a real daemon (or a cluster of them): the plugin's, and the folders' own.
DAEMON_FIXTURES = frozenset(
    {
        "groupd_broker",
        "groupd_broker_session",
        "groupd_broker_factory",
        "groupd_cluster",
        "groupd",  # tests/e2e/conftest.py, tests/bench/test_simulator.py
        "cluster",  # tests/cluster/conftest.py (a 3-broker groupd), tests/pipeline/test_pipeline_cluster.py
        "daemon",  # module fixtures in tests/e2e, tests/limits, tests/ops, tests/security
        "secure_daemon",  # tests/security/conftest.py
    }
)
SPARK_FIXTURES = frozenset({"spark", "analyzed"})
SPARK_FOLDER = "tests/pipeline/"  # one xdist unit of work (node ids are relative to the rootdir)
# A test whose own body names one of these starts a daemon itself.
DAEMON_CLASSES = frozenset({"GroupdBroker", "GroupdProcess"})

# Folders whose every test is end-to-end, and modules that start a daemon or a real client inside
# their tests (no fixture says so).
E2E_FOLDERS = ("e2e", "cluster/test_isolation_clients.py", "cluster/test_failover_clients.py")
E2E_MODULES = frozenset(
    {
        "bench/test_consumer_groups_bench.py",
        "bench/test_simulator.py",
        "broker/test_coordinator_moves_tcp.py",  # kafka-python against an in-process broker on TCP
        "broker/test_offsets_compaction.py",  # a real admin client
        "broker/test_txn_clients.py",  # kafka-python, aiokafka, confluent-kafka
        "broker/test_txn_state_compaction.py",  # a confluent-kafka transactional producer
        "pipeline/test_pipeline_consumer_groups.py",
        "pipeline/test_pipeline_e2e.py",
    }
)


def _relpath(item: pytest.Item) -> str:
    try:
        return Path(str(item.path)).relative_to(TESTS).as_posix()
    except ValueError:  # a test outside tests/ (pytester's temporary suites)
        return ""


def _distributed(config: pytest.Config) -> bool:
    """True on the xdist controller and its workers when the run is spread over processes."""
    return hasattr(config, "workerinput") or getattr(config.option, "dist", "no") != "no"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = _relpath(item)
        if not rel:
            continue
        names = set(getattr(item, "fixturenames", ()))
        if names & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)
        code = getattr(getattr(item, "function", None), "__code__", None)
        starts_daemon = code is not None and not DAEMON_CLASSES.isdisjoint(code.co_names)
        e2e = names & DAEMON_FIXTURES or starts_daemon or rel.startswith(E2E_FOLDERS) or rel in E2E_MODULES
        if e2e and item.get_closest_marker("e2e") is None:
            item.add_marker(pytest.mark.e2e)
    if _distributed(config):
        # Longest first (a stable sort keeps each module's own order): the Spark group, then the
        # end-to-end tests, then the unit and property tests, which fill the workers' last minutes.
        def weight(item: pytest.Item) -> int:
            if item.nodeid.startswith(SPARK_FOLDER):
                return 0
            return 1 if item.get_closest_marker("e2e") is not None else 2

        items.sort(key=weight)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: the Spark folder is one unit of work, every other test a unit of its own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SparkOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SPARK_FOLDER if nodeid.startswith(SPARK_FOLDER) else nodeid

    return SparkOnOneWorker(config, log)
