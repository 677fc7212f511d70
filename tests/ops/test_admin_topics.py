"""``groupd topics ...``, ``groupd offsets delete``, ``groupd completion`` and the commands' --help,
against a real daemon; what the CLI changed is checked with kafka-python and confluent-kafka."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from groupd.ops.admin_cli import parse_duration_ms, parse_offsets_csv
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import MessageSizeTooLargeError

from groupd.cli import build_parser
from tests.ops.test_admin_cli import commit, json_out, make_topic, restarted_view
from tests.support.groups import Member, wait_balanced

pytestmark = pytest.mark.e2e


def described_configs(bootstrap: str, topic: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([res])[res].result(10)  # type: ignore[no-any-return]


def partitions_seen(bootstrap: str, topic: str) -> set[int] | None:
    with KafkaConsumer(bootstrap_servers=bootstrap, allow_auto_create_topics=False) as c:
        return c.partitions_for_topic(topic)


# --- topics ----------------------------------------------------------------------------------------


def test_create_describe_alter_delete_a_topic(broker: str, cli: Callable[..., Any], unique: str) -> None:
    topic = f"t-{unique}"
    r = cli(
        "topics",
        "create",
        topic,
        "--partitions",
        "2",
        "--config",
        "cleanup.policy=compact",
        "--bootstrap-server",
        broker,
    )
    assert (r.code, r.out.strip()) == (0, f"created topic '{topic}' with 2 partitions"), r.err
    assert partitions_seen(broker, topic) == {0, 1}

    r = cli("topics", "create", topic, "--bootstrap-server", broker)
    assert (r.code, r.err) == (1, f"groupd: topic '{topic}' already exists (--if-not-exists accepts that)\n")
    assert cli("topics", "create", topic, "--if-not-exists", "--bootstrap-server", broker).code == 0

    listed = json_out(cli("topics", "list", "--json", "--bootstrap-server", broker))
    assert {"topic": topic, "partitions": 2, "internal": False} in listed
    assert {"topic": "__consumer_offsets", "partitions": 50, "internal": True} in listed
    names = cli("topics", "list", "--exclude-internal", "--bootstrap-server", broker).out.split()
    assert topic in names and "__consumer_offsets" not in names

    producer = KafkaProducer(bootstrap_servers=broker)
    for i in range(3):
        producer.send(topic, key=b"k", value=str(i).encode(), partition=1)
    producer.flush()
    producer.close()
    (d,) = json_out(cli("topics", "describe", topic, "--json", "--bootstrap-server", broker))
    assert (d["topic"], d["partition_count"], d["replication_factor"], d["internal"]) == (topic, 2, 1, False)
    assert [(p["partition"], p["replicas"], p["isr"], p["start_offset"], p["end_offset"]) for p in d["partitions"]] == [
        (0, [1], [1], 0, 0),
        (1, [1], [1], 0, 3),
    ]
    assert d["configs"] == {"cleanup.policy": "compact"}  # the topic's own configs (DescribeConfigs)
    rows = [line.split() for line in cli("topics", "describe", topic, "--bootstrap-server", broker).out.splitlines()]
    assert rows == [
        ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "START-OFFSET", "END-OFFSET"],
        [topic, "0", "1", "1", "1", "0", "0"],
        [topic, "1", "1", "1", "1", "0", "3"],
        [],
        ["TOPIC", "CONFIG", "VALUE"],
        [topic, "cleanup.policy", "compact"],
    ]

    r = cli("topics", "alter", topic, "--partitions", "5", "--bootstrap-server", broker)
    assert (r.code, r.out.strip()) == (0, f"topic '{topic}': 2 -> 5 partitions"), r.err
    assert partitions_seen(broker, topic) == {0, 1, 2, 3, 4}
    r = cli("topics", "alter", topic, "--partitions", "3", "--bootstrap-server", broker)
    assert r.code == 1 and "can only grow" in r.err

    # configs through IncrementalAlterConfigs, checked with confluent-kafka's DescribeConfigs
    r = cli(
        "topics", "alter", topic, "--config", "retention.ms=1000", "--delete-config", "cleanup.policy",
        "--bootstrap-server", broker,
    )  # fmt: skip
    assert (r.code, r.out.strip()) == (0, f"topic '{topic}': configs altered (retention.ms=1000, cleanup.policy)")
    configs = described_configs(broker, topic)
    assert (configs["retention.ms"].value, configs["cleanup.policy"].value) == ("1000", "delete")
    # a refused config changes nothing, not even the partition count asked for with it
    r = cli(
        "topics", "alter", topic, "--partitions", "6", "--config", "retention.ms=soon", "--bootstrap-server", broker
    )
    assert r.code == 1
    assert "Invalid value soon for configuration retention.ms: Not a number of type LONG" in r.err, r.err
    assert partitions_seen(broker, topic) == {0, 1, 2, 3, 4}

    assert cli("topics", "delete", topic, "--bootstrap-server", broker).code == 0
    r = cli("topics", "describe", topic, "--bootstrap-server", broker)
    assert (r.code, r.err) == (1, f"groupd: topic '{topic}' does not exist\n")
    r = cli("topics", "delete", topic, "--bootstrap-server", broker)
    assert (r.code, r.err) == (1, f"groupd: topic '{topic}' does not exist (--if-exists accepts that)\n")
    assert cli("topics", "delete", topic, "--if-exists", "--bootstrap-server", broker).code == 0


def test_create_passes_configs_to_the_broker(broker: str, cli: Callable[..., Any], unique: str) -> None:
    """CreateTopics carries the configs: the broker applies them (a record over max.message.bytes is
    refused) and answers a config it does not know with its error."""
    topic = f"t-{unique}"
    r = cli("topics", "create", topic, "--config", "max.message.bytes=300", "--bootstrap-server", broker)
    assert r.code == 0, r.err
    producer = KafkaProducer(bootstrap_servers=broker)
    try:
        producer.send(topic, b"small").get(timeout=10)
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, b"x" * 1000).get(timeout=10)
    finally:
        producer.close()

    r = cli("topics", "create", f"{topic}-2", "--config", "no.such.config=1", "--bootstrap-server", broker, "--json")
    assert r.code == 1
    assert json.loads(r.out)["error"] == "INVALID_CONFIG"
    assert "no.such.config" in r.err
    assert cli("topics", "describe", f"{topic}-2", "--bootstrap-server", broker).code == 1  # not created


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["topics", "create", "x", "--partitions", "0"], "must be positive"),
        (["topics", "create", "x", "--config", "novalue"], "expected KEY=VALUE"),
        (["topics", "alter", "x"], "nothing to change"),
    ],
)
def test_topic_bad_input_is_a_usage_error(
    broker: str, cli: Callable[..., Any], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        r = cli(*argv, "--bootstrap-server", broker)
        code, err = r.code, r.err
    except SystemExit as e:  # argparse's own errors
        code, err = int(e.code or 0), capsys.readouterr().err
    assert code == 2 and message in err


# --- offsets delete ------------------------------------------------------------------------------


def test_offsets_delete_removes_one_topics_offsets(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    kept, dropped, group = f"keep-{unique}", f"drop-{unique}", f"g-{unique}"
    make_topic(broker, kept, partitions=1, messages=2)
    make_topic(broker, dropped, partitions=2, messages=2)
    commit(broker, group, kept, {0: 2})
    commit(broker, group, dropped, {0: 1, 1: 2})

    r = cli("offsets", "delete", "--group", group, "--topic", dropped, "--bootstrap-server", broker)
    assert r.code == 0, r.err
    assert [line.split() for line in r.out.splitlines()] == [
        ["TOPIC", "PARTITION", "STATUS"],
        [dropped, "0", "Successful"],
        [dropped, "1", "Successful"],
    ]
    assert [c for c, _ in restarted_view(broker, group, dropped, 2).values()] == [None, None]
    assert restarted_view(broker, group, kept, 1)[0][0] == 2  # the other topic's offset stays

    r = cli("offsets", "delete", "--group", f"nope-{unique}", "--topic", dropped, "--bootstrap-server", broker)
    assert (r.code, r.err) == (1, f"groupd: consumer group 'nope-{unique}' does not exist\n")


def test_offsets_delete_refuses_a_topic_the_group_consumes(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    """Kafka's OffsetMetadataManager.deleteOffsets: GROUP_SUBSCRIBED_TO_TOPIC for a topic an active
    member is subscribed to."""
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=1, messages=2)
    commit(broker, group, topic, {0: 1})
    members("kafka-python", broker, group, topic)
    wait_balanced(broker, group, topic, 1, 1)
    r = cli("offsets", "delete", "--group", group, "--topic", topic, "--bootstrap-server", broker, "--json")
    assert r.code == 1
    assert json.loads(r.out.splitlines()[-1])["error"] == "GROUP_SUBSCRIBED_TO_TOPIC"
    assert "the group's active members consume it" in r.err


# --- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [("PT1H", 3_600_000), ("P1D", 86_400_000), ("PT30M", 1_800_000), ("PT0.5S", 500), ("P1DT2H3M4.25S", 93_784_250),
     ("-PT1M", -60_000), ("pt15s", 15_000)],
)  # fmt: skip
def test_durations_as_java_duration_parse_reads_them(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["1h", "PT", "P", "PT1X", "P1H", "", "PT-"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="ISO-8601 duration"):
        parse_duration_ms(text)


def test_offsets_csv_in_both_of_kafkas_forms() -> None:
    assert parse_offsets_csv("orders,0,5\norders,1,7\n\n", "f") == {"": {("orders", 0): 5, ("orders", 1): 7}}
    assert parse_offsets_csv("a,orders,0,5\nb,orders,0,1\n", "f") == {"a": {("orders", 0): 5}, "b": {("orders", 0): 1}}
    for bad in ("orders,0\n", "orders,x,1\n", "orders,0,-1\n", ""):
        with pytest.raises(ValueError):
            parse_offsets_csv(bad, "f")


# --- completion and help -------------------------------------------------------------------------


def test_bash_completion_script_is_valid_and_lists_the_commands(cli: Callable[..., Any]) -> None:
    r = cli("completion", "bash")
    assert r.code == 0, r.err
    script = r.out
    for word in ("serve", "groups", "offsets", "topics", "healthcheck", "completion", "--command-config", "reset"):
        assert word in script
    bash = shutil.which("bash")
    assert bash is not None
    checked = subprocess.run([bash, "-n"], input=script, text=True, capture_output=True, timeout=30, check=False)
    assert checked.returncode == 0, checked.stderr
    # Sourced, it completes `groupd t` to `topics` as bash would.
    probe = script + '\nCOMP_WORDS=(groupd to); COMP_CWORD=1; COMP_LINE="groupd to"; COMP_POINT=9\n'
    probe += '_shtab_groupd groupd to groupd; echo "${COMPREPLY[@]}"\n'
    done = subprocess.run([bash, "-c", probe], text=True, capture_output=True, timeout=30, check=False)
    assert done.stdout.split() == ["topics"], done.stderr


def test_zsh_completion_script(cli: Callable[..., Any]) -> None:
    r = cli("completion", "zsh")
    assert r.code == 0 and r.out.startswith("#compdef groupd")


def _subcommands(parser: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    import argparse

    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append(((*path, name), sub))
                out += _subcommands(sub, (*path, name))
    return out


def test_every_admin_command_has_an_example_in_its_help() -> None:
    admin = ("groups", "offsets", "topics", "healthcheck", "completion")
    commands = [(path, p) for path, p in _subcommands(build_parser()) if path[0] in admin]
    assert len(commands) >= 15
    for path, p in commands:
        help_text = p.format_help()
        assert "examples:" in help_text, path
        assert f"groupd {' '.join(path)}" in help_text.split("examples:")[1], path
