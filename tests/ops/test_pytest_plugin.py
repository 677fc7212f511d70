"""groupd's pytest plugin, as its users meet it: an inner pytest run (pytester) of test files that
use the fixtures with kafka-python, with the plugin loaded from the installed ``pytest11`` entry
point (not imported by hand)."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from groupd.ops.pytest_plugin import GroupdBroker

# Here and not in conftest.py: pytest refuses ``pytest_plugins`` in a conftest below the rootdir.
pytest_plugins = ["pytester"]

pytestmark = pytest.mark.e2e

USER_TESTS = '''
import os
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer

PIDS = os.environ["GROUPD_PLUGIN_TEST_PIDS"]
SESSION_PORTS = set()


def note(broker):
    with open(PIDS, "a") as fh:
        fh.write(f"{broker.pid}\\n")


def roundtrip(bootstrap):
    """Produce three records; a consumer group reads them and commits; a restarted member resumes."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(3):
        producer.send(topic, str(i).encode())
    producer.flush()
    producer.close()
    consumer = subscribed(KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                        auto_offset_reset="earliest", enable_auto_commit=False), topic)
    values = []
    for _ in range(20):
        for records in consumer.poll(timeout_ms=1000).values():
            values += [r.value for r in records]
        if len(values) == 3:
            break
    consumer.commit()
    consumer.close()
    assert sorted(values) == [b"0", b"1", b"2"]
    return topic, group


def create_topic(bootstrap, topic):
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.partitions_for(topic)  # a Metadata request naming the topic auto-creates it
    producer.close()


def subscribed(consumer, topic):
    """Subscribe once the (existing) topic's metadata is known. kafka-python 3.0.12 can lose a
    finished join when a short poll() times out while the leader's SyncGroup is in flight, which a
    needless second join (the first one raced the topic's metadata) makes likely."""
    consumer.subscribe([topic])
    consumer.partitions_for_topic(topic)
    return consumer


def partitions(bootstrap, topic):
    with KafkaConsumer(bootstrap_servers=bootstrap) as c:
        return c.partitions_for_topic(topic)


def test_function_broker(groupd_broker):
    note(groupd_broker)
    assert str(groupd_broker) == groupd_broker.bootstrap
    assert groupd_broker.bootstrap.startswith("127.0.0.1:")
    topic, _ = roundtrip(groupd_broker.bootstrap)
    assert partitions(groupd_broker.bootstrap, topic) == set(range(int(os.environ["WANT_DEFAULT_PARTITIONS"])))


@pytest.mark.groupd(num_partitions=4)
def test_marker_settings(groupd_broker):
    note(groupd_broker)
    topic, _ = roundtrip(str(groupd_broker))
    assert partitions(str(groupd_broker), topic) == {0, 1, 2, 3}


@pytest.mark.parametrize("n", [1, 2])
def test_session_broker_is_shared(groupd_broker_session, n):
    note(groupd_broker_session)
    SESSION_PORTS.add(groupd_broker_session.port)
    assert len(SESSION_PORTS) == 1
    roundtrip(groupd_broker_session.bootstrap)


def test_factory(groupd_broker_factory):
    a = groupd_broker_factory()
    b = groupd_broker_factory(num_partitions=2, group_min_session_timeout_ms=1000)
    note(a)
    note(b)
    assert a.port != b.port and a.data_dir != b.data_dir
    # a session timeout below groupd's default minimum (6000) is accepted only by b
    create_topic(b.bootstrap, "x")
    c = subscribed(KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g", session_timeout_ms=2000,
                                 heartbeat_interval_ms=500), "x")
    for _ in range(20):
        c.poll(timeout_ms=1000)
        if c.assignment():
            break
    assert c.assignment()
    c.close()
'''


# What the inner runs need besides the plugin: pytest-asyncio (installed here) wants its loop scope set.
INNER_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\nfilterwarnings = ignore::DeprecationWarning\n"


@pytest.fixture
def pids_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pids"
    monkeypatch.setenv("GROUPD_PLUGIN_TEST_PIDS", str(path))
    return path


def assert_all_stopped(pids_file: Path, expected: int) -> None:
    pids = {int(p) for p in pids_file.read_text().split()}
    assert len(pids) == expected
    for pid in pids:
        with pytest.raises(ProcessLookupError):  # stopped and reaped, not left running
            os.kill(pid, 0)


def test_entry_point_registers_the_plugin() -> None:
    (ep,) = entry_points(group="pytest11", name="groupd")
    assert ep.value == "groupd.ops.pytest_plugin"


def test_fixtures_in_a_user_test_suite(
    pytester: pytest.Pytester, pids_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANT_DEFAULT_PARTITIONS", "3")
    pytester.makeini(INNER_INI)
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "--groupd-num-partitions=3")
    result.assert_outcomes(passed=5)
    # function brokers: 1 + 1 + 2 from the factory; the session broker once
    assert_all_stopped(pids_file, expected=5)


def test_ini_options(pytester: pytest.Pytester, pids_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANT_DEFAULT_PARTITIONS", "2")
    pytester.makeini(INNER_INI + "groupd_num_partitions = 2\ngroupd_initial_rebalance_delay_ms = 0\n")
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "function_broker")
    result.assert_outcomes(passed=1)
    assert_all_stopped(pids_file, expected=1)


def test_the_option_is_listed_in_help(pytester: pytest.Pytester) -> None:
    pytester.makeini(INNER_INI)
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--groupd-num-partitions=N*", "*--groupd-min-session-timeout-ms=N*"])


def test_a_daemon_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    broker = GroupdBroker(tmp_path / "data", startup_timeout=30, num_partitions="many")
    with pytest.raises(RuntimeError, match=r"(?s)groupd exited with 2.*bad configuration"):
        broker.start()
    assert broker.proc is not None and broker.proc.returncode == 2


def test_unknown_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_partition"):
        GroupdBroker(tmp_path / "data", num_partition=3)
    with pytest.raises(ValueError, match="port"):
        GroupdBroker(tmp_path / "data", port=9092)


@pytest.mark.parametrize("heading", ["### The pytest plugin", "## Fault injection", "## Cluster mode"])
def test_the_readme_example_runs(pytester: pytest.Pytester, heading: str) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split(heading, 1)[1].split("\n## ", 1)[0]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makeini(INNER_INI)
    pytester.makepyfile(test_readme=example)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_broker_killed_without_stop_starts_again(tmp_path: Path) -> None:
    """The reader of a daemon killed without stop() reaches its end of output while the next start()
    waits: it woke that wait before the new daemon's start-up line (port 0: "did not start"; the old code
    failed at the first restart)."""
    broker = GroupdBroker(tmp_path / "data")
    broker.start()
    try:
        for _ in range(5):
            assert broker.proc is not None
            broker.proc.kill()
            broker.start()
            assert broker.port and broker.proc.poll() is None
    finally:
        broker.stop()
