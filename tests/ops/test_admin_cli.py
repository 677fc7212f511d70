"""``groupd groups ...``, ``groupd offsets reset`` and ``groupd healthcheck`` against a real daemon
(from groupd's own pytest plugin) with real consumer groups (kafka-python and confluent-kafka).

What the CLI reports is checked against what the clients themselves see: librdkafka's
describe_consumer_groups for members and assignments, and a restarted consumer's committed() and
position() for the effect of a reset.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from groupd.ops.pytest_plugin import GroupdBroker
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.support.groups import Member, describe, wait_balanced

pytestmark = pytest.mark.e2e

BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: message i of every partition is stamped BASE_TS + i s


def make_topic(bootstrap: str, topic: str, partitions: int = 3, messages: int = 10) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for p in range(partitions):
            for i in range(messages):
                producer.send(topic, f"{p}-{i}".encode(), partition=p, timestamp_ms=BASE_TS + i * 1000)
        producer.flush()
    finally:
        producer.close()


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a real consumer that manages its own partitions would (kafka-python, assign())."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in offsets]
        c.assign(tps)
        c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        c.close()


def restarted_view(bootstrap: str, group: str, topic: str, partitions: int = 3) -> dict[int, tuple[Any, int]]:
    """(committed, position) per partition as a freshly started kafka-python consumer of ``group`` sees them."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        return {tp.partition: (c.committed(tp), c.position(tp)) for tp in tps}
    finally:
        c.close()


def wait_state(bootstrap: str, group: str, state: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = describe(bootstrap, group).state
        if seen == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"group {group} did not become {state} in {timeout}s (last seen {seen})")


def json_out(r: Any) -> Any:
    assert r.code == 0, r.err
    return json.loads(r.out)


# --- groups list ---------------------------------------------------------------------------------


@pytest.mark.groupd(num_partitions=2)
def test_list_on_a_fresh_broker_shows_no_groups_then_the_new_one(
    groupd_broker: GroupdBroker, cli: Callable[..., Any], unique: str
) -> None:
    b = groupd_broker.bootstrap
    r = cli("groups", "list", "--bootstrap-server", b)
    assert (r.code, r.out.strip()) == (0, "no consumer groups")
    assert json_out(cli("groups", "list", "--bootstrap-server", b, "--json")) == []

    # The marker's num_partitions reached the daemon: the auto-created topic has two partitions.
    commit(b, f"g-{unique}", f"t-{unique}", {0: 1, 1: 1})
    assert json_out(cli("groups", "list", "--bootstrap-server", b, "--json")) == [
        {"group": f"g-{unique}", "type": "classic", "state": "Empty", "protocol_type": ""}
    ]
    with KafkaConsumer(bootstrap_servers=b) as c:
        assert c.partitions_for_topic(f"t-{unique}") == {0, 1}


def test_list_shows_states_and_filters_by_state(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    topic, live, idle = f"t-{unique}", f"live-{unique}", f"idle-{unique}"
    make_topic(broker, topic, partitions=2, messages=1)
    commit(broker, idle, topic, {0: 1})
    members("kafka-python", broker, live, topic)
    wait_balanced(broker, live, topic, 1, 2)

    r = cli("groups", "list", "--bootstrap-server", broker)
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0].split() == ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert rows[live] == ["classic", "Stable", "consumer"]
    assert rows[idle] == ["classic", "Empty"]  # a "simple" group has no protocol type
    # Columns line up: every row starts its STATE at the same place as the header.
    col = lines[0].index("STATE")
    assert all(line[col - 2 : col] == "  " and line[col] != " " for line in lines[1:])

    listed = {g["group"]: g for g in json_out(cli("groups", "list", "--bootstrap-server", broker, "--json"))}
    assert listed[live] == {"group": live, "type": "classic", "state": "Stable", "protocol_type": "consumer"}
    assert listed[idle] == {"group": idle, "type": "classic", "state": "Empty", "protocol_type": ""}

    only_empty = {
        g["group"] for g in json_out(cli("groups", "list", "--bootstrap-server", broker, "--json", "--state", "Empty"))
    }
    assert idle in only_empty and live not in only_empty
    only_stable = {
        g["group"] for g in json_out(cli("groups", "list", "--bootstrap-server", broker, "--json", "--state", "stable"))
    }
    assert live in only_stable and idle not in only_stable


# --- groups describe -------------------------------------------------------------------------------


def test_describe_shows_members_assignments_offsets_and_lag(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=3, messages=10)
    commit(broker, group, topic, {0: 4, 1: 10})  # partition 2: nothing committed
    members("confluent-kafka", broker, group, topic, client_id="alpha", instance_id=f"static-{unique}")
    members("kafka-python", broker, group, topic, client_id="beta")
    truth = wait_balanced(broker, group, topic, 2, 3)

    d = json_out(cli("groups", "describe", group, "--bootstrap-server", broker, "--json"))
    assert (d["group"], d["state"], d["protocol_type"], d["protocol"]) == (group, "Stable", "consumer", "range")
    assert d["coordinator"] == broker
    got = sorted(
        (
            m["member_id"],
            m["client_id"],
            m["host"],
            m["instance_id"],
            [(a["topic"], a["partition"]) for a in m["assignment"]],
        )
        for m in d["members"]
    )
    want = sorted((m["member_id"], m["client_id"], m["host"], m["instance_id"], m["assignment"]) for m in truth.members)
    assert got == want
    assert {m["client_id"] for m in d["members"]} == {"alpha", "beta"}

    owner = {(a["topic"], a["partition"]): m["member_id"] for m in d["members"] for a in m["assignment"]}
    assert d["offsets"] == [
        {
            "topic": topic,
            "partition": 0,
            "committed_offset": 4,
            "log_end_offset": 10,
            "lag": 6,
            "member_id": owner[(topic, 0)],
        },
        {
            "topic": topic,
            "partition": 1,
            "committed_offset": 10,
            "log_end_offset": 10,
            "lag": 0,
            "member_id": owner[(topic, 1)],
        },
        {
            "topic": topic,
            "partition": 2,
            "committed_offset": None,
            "log_end_offset": 10,
            "lag": None,
            "member_id": owner[(topic, 2)],
        },
    ]

    r = cli("groups", "describe", group, "--bootstrap-server", broker)
    assert r.code == 0
    head, member_table, offset_table = r.out.strip().split("\n\n")
    assert head.splitlines()[1].split() == [group, "Stable", "consumer", "range", broker, "2"]
    member_rows = [line.split() for line in member_table.splitlines()]
    assert member_rows[0] == ["GROUP", "MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "ASSIGNMENT"]
    assert {r[0] for r in member_rows[1:]} == {group}
    assert f"static-{unique}" in member_table
    rows = [line.split() for line in offset_table.splitlines()]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"]
    assert rows[1:] == [
        [group, topic, "0", "4", "10", "6", owner[(topic, 0)]],
        [group, topic, "1", "10", "10", "0", owner[(topic, 1)]],
        [group, topic, "2", "-", "10", "-", owner[(topic, 2)]],
    ]


def test_describe_a_missing_group_fails_with_one_line(broker: str, cli: Callable[..., Any], unique: str) -> None:
    r = cli("groups", "describe", f"nope-{unique}", "--bootstrap-server", broker)
    assert r.code == 1
    assert r.out == ""
    assert r.err == f"groupd: consumer group 'nope-{unique}' does not exist\n"

    r = cli("groups", "describe", f"nope-{unique}", "--bootstrap-server", broker, "--json")
    assert r.code == 1
    assert json.loads(r.out) == {
        "error": "GROUP_ID_NOT_FOUND",
        "message": f"consumer group 'nope-{unique}' does not exist",
    }


def _table_rows(text: str) -> list[list[str]]:
    """The data rows of every table in ``groups describe``'s text (header lines start with GROUP)."""
    return [
        line.split()
        for block in text.strip().split("\n\n")
        for line in block.splitlines()[1:]
        if not line.startswith("consumer group ")
    ]


def test_describe_takes_many_groups_and_all_groups_as_kafkas_tool(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    # kafka-consumer-groups.sh --describe --group A --group B / --all-groups: one block per group, in
    # group order (its TreeMap), every row naming its group; a missing group is an error line and the
    # others are still shown.
    topic = f"t-{unique}"
    live, idle = f"b-live-{unique}", f"a-idle-{unique}"  # idle sorts first
    make_topic(broker, topic, partitions=2, messages=5)
    commit(broker, idle, topic, {0: 1, 1: 2})  # offsets only: Empty, no members
    members("kafka-python", broker, live, topic, client_id="live")
    wait_balanced(broker, live, topic, 1, 2)

    r = cli("groups", "describe", live, idle, "--bootstrap-server", broker)
    assert r.code == 0, r.err
    heads = [b.splitlines() for b in r.out.strip().split("\n\n") if b.startswith("GROUP  ") and "STATE" in b]
    assert [h[1].split()[:2] for h in heads] == [[idle, "Empty"], [live, "Stable"]]
    rows = _table_rows(r.out)
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)  # the blocks do not interleave
    assert [row[:5] for row in rows if row[0] == idle and row[1] == topic] == [
        [idle, topic, "0", "1", "5"],
        [idle, topic, "1", "2", "5"],
    ]
    assert {row[0] for row in rows} == {idle, live}

    # --group (repeatable, Kafka's spelling) is the same as naming them; a name given twice counts once
    listed = json_out(
        cli("groups", "describe", "--group", live, "--group", idle, live, "--bootstrap-server", broker, "--json")
    )
    assert [(g["group"], g["state"], len(g["members"])) for g in listed] == [(idle, "Empty", 0), (live, "Stable", 1)]
    assert [(o["partition"], o["committed_offset"], o["lag"]) for o in listed[0]["offsets"]] == [(0, 1, 4), (1, 2, 3)]
    # one named group stays one object (README: `groups describe billing --json | jq '.offsets[].lag'`)
    assert json_out(cli("groups", "describe", "--group", live, "--bootstrap-server", broker, "--json"))["group"] == live

    missing = f"c-nope-{unique}"
    r = cli("groups", "describe", live, missing, idle, "--bootstrap-server", broker, "--json")
    assert r.code == 1
    assert r.err == f"groupd: consumer group '{missing}' does not exist\n"
    got = json.loads(r.out)
    assert [g["group"] for g in got] == [idle, live, missing]
    assert got[2] == {
        "group": missing,
        "error": "GROUP_ID_NOT_FOUND",
        "message": f"consumer group '{missing}' does not exist",
    }
    r = cli("groups", "describe", live, missing, "--bootstrap-server", broker)
    assert r.code == 1 and {row[0] for row in _table_rows(r.out)} == {live}
    assert r.err == f"groupd: consumer group '{missing}' does not exist\n"

    every = json_out(cli("groups", "describe", "--all-groups", "--bootstrap-server", broker, "--json"))
    names = [g["group"] for g in every]
    assert names == sorted(names) and {idle, live} <= set(names)
    assert next(g for g in every if g["group"] == live)["members"][0]["client_id"] == "live"
    r = cli("groups", "describe", "--all-groups", "--bootstrap-server", broker)
    assert r.code == 0 and {idle, live} <= {row[0] for row in _table_rows(r.out)}

    for bad in ([], [live, "--all-groups"]):
        r = cli("groups", "describe", *bad, "--bootstrap-server", broker)
        assert r.code == 2 and r.out == "" and r.err.count("\n") == 1, r.err


# --- groups delete ---------------------------------------------------------------------------------


def test_delete_refuses_a_live_group_then_deletes_it_once_empty(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=1, messages=3)
    commit(broker, group, topic, {0: 2})
    m = members("kafka-python", broker, group, topic)
    wait_balanced(broker, group, topic, 1, 1)

    r = cli("groups", "delete", group, "--bootstrap-server", broker)
    assert r.code == 1
    assert "not empty" in r.err and r.err.count("\n") == 1
    r = cli("groups", "delete", group, "--bootstrap-server", broker, "--json")
    assert r.code == 1 and json.loads(r.out)["error"] == "NON_EMPTY_GROUP"
    assert restarted_view(broker, group, topic, 1)[0][0] == 2  # nothing was deleted

    m.stop()
    wait_state(broker, group, "EMPTY")
    assert json_out(cli("groups", "delete", group, "--bootstrap-server", broker, "--json")) == {
        "group": group,
        "deleted": True,
    }
    assert group not in {g["group"] for g in json_out(cli("groups", "list", "--bootstrap-server", broker, "--json"))}
    assert restarted_view(broker, group, topic, 1)[0][0] is None  # its offsets went with it

    r = cli("groups", "delete", group, "--bootstrap-server", broker)
    assert (r.code, r.err) == (1, f"groupd: consumer group '{group}' does not exist\n")


# --- offsets reset ---------------------------------------------------------------------------------


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_reset_modes_are_what_a_restarted_consumer_sees(broker: str, cli: Callable[..., Any], unique: str) -> None:
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=3, messages=10)
    commit(broker, group, topic, {0: 5, 1: 5, 2: 5})

    def reset(*how: str) -> Any:
        return json_out(cli("offsets", "reset", "--group", group, *how, "--bootstrap-server", broker, "--json"))

    def seen() -> dict[int, int]:
        view = restarted_view(broker, group, topic)
        assert all(committed == position for committed, position in view.values()), view
        return {p: committed for p, (committed, _) in view.items()}

    # Without --execute: a preview, as kafka-consumer-groups.sh --reset-offsets.
    for preview in ([], ["--dry-run"]):
        out = reset("--topic", topic, "--to-earliest", *preview)
        assert out["executed"] is False
        assert [(r["group"], r["partition"], r["current_offset"], r["new_offset"]) for r in out["plan"]] == [
            (group, 0, 5, 0),
            (group, 1, 5, 0),
            (group, 2, 5, 0),
        ]
        assert seen() == {0: 5, 1: 5, 2: 5}  # a preview commits nothing

    assert reset("--topic", topic, "--to-earliest", "--execute")["executed"] is True
    assert seen() == {0: 0, 1: 0, 2: 0}

    reset("--topic", f"{topic}:1", "--to-latest", "--execute")
    assert seen() == {0: 0, 1: 10, 2: 0}

    reset("--topic", f"{topic}:0,2", "--to-offset", "7", "--execute")
    assert seen() == {0: 7, 1: 10, 2: 7}

    reset("--topic", topic, "--to-offset", "99", "--execute")  # kept within the log, as Kafka's tool does
    assert seen() == {0: 10, 1: 10, 2: 10}

    reset("--topic", topic, "--shift-by", "-3", "--execute")
    assert seen() == {0: 7, 1: 7, 2: 7}

    reset("--all-topics", "--shift-by", "-1", "--execute")  # the partitions the group has offsets for
    assert seen() == {0: 6, 1: 6, 2: 6}

    current = reset("--topic", topic, "--to-current", "--execute")["plan"]
    assert [r["new_offset"] for r in current] == [6, 6, 6] and seen() == {0: 6, 1: 6, 2: 6}

    reset("--topic", topic, "--to-datetime", iso(BASE_TS + 4000), "--execute")
    assert seen() == {0: 4, 1: 4, 2: 4}

    reset("--topic", topic, "--to-datetime", iso(BASE_TS + 3500), "--execute")  # between two records: the next
    assert seen() == {0: 4, 1: 4, 2: 4}

    local = datetime.fromtimestamp((BASE_TS + 2000) / 1000).strftime("%Y-%m-%dT%H:%M:%S")  # no zone: local time
    reset("--topic", topic, "--to-datetime", local, "--execute")
    assert seen() == {0: 2, 1: 2, 2: 2}

    reset("--topic", topic, "--to-datetime", iso(BASE_TS + 3_600_000), "--execute")  # after every record: the end
    assert seen() == {0: 10, 1: 10, 2: 10}

    # --by-duration: now minus the duration. The records are stamped 2026-01-01 + i s.
    # The tool takes its own "now" later: its target is ~ record 6's stamp - (1 s - the fraction
    # of a second of the age) + that delay, so the age is taken just after a whole second (the
    # delay may then be up to ~0.9 s before the target passes record 6; a loaded machine, not the tool).
    age = datetime.now(UTC) - datetime.fromtimestamp((BASE_TS + 6000) / 1000, tz=UTC)
    if age.total_seconds() % 1 > 0.1:
        time.sleep(1.02 - age.total_seconds() % 1)
        age = datetime.now(UTC) - datetime.fromtimestamp((BASE_TS + 6000) / 1000, tz=UTC)
    reset("--topic", topic, "--by-duration", f"PT{int(age.total_seconds()) + 1}S", "--execute")
    assert seen() == {0: 6, 1: 6, 2: 6}
    reset("--topic", topic, "--by-duration", "PT1H", "--execute")  # nothing that recent: the end
    assert seen() == {0: 10, 1: 10, 2: 10}


def test_to_current_moves_partitions_without_an_offset_to_the_log_end(
    broker: str, cli: Callable[..., Any], unique: str
) -> None:
    """Kafka's ConsumerGroupCommand.prepareOffsetsToReset for --to-current."""
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=2, messages=5)
    commit(broker, group, topic, {0: 2})
    r = cli(
        "offsets",
        "reset",
        "--group",
        group,
        "--topic",
        topic,
        "--to-current",
        "--execute",
        "--bootstrap-server",
        broker,
    )
    assert r.code == 0, r.err
    assert restarted_view(broker, group, topic, 2) == {0: (2, 2), 1: (5, 5)}


def test_export_then_from_file_round_trip(broker: str, cli: Callable[..., Any], unique: str, tmp_path: Any) -> None:
    """--export prints Kafka's CSV (topic,partition,offset for one group; group,topic,partition,offset for
    several) and --from-file reads it back."""
    topic, g1, g2 = f"t-{unique}", f"g1-{unique}", f"g2-{unique}"
    make_topic(broker, topic, partitions=2, messages=8)
    commit(broker, g1, topic, {0: 3, 1: 4})
    commit(broker, g2, topic, {0: 1, 1: 1})

    one = cli(
        "offsets", "reset", "--group", g1, "--all-topics", "--to-current", "--export", "--bootstrap-server", broker
    )
    assert one.code == 0 and one.out == f"{topic},0,3\n{topic},1,4\n"
    assert "preview only" in one.err  # on stderr: the CSV on stdout stays clean

    both = cli(
        "offsets", "reset", "--group", g1, "--group", g2, "--all-topics", "--to-earliest", "--export",
        "--bootstrap-server", broker,
    )  # fmt: skip
    assert both.code == 0 and both.out.splitlines() == [f"{g1},{topic},0,0", f"{g1},{topic},1,0",
                                                        f"{g2},{topic},0,0", f"{g2},{topic},1,0"]  # fmt: skip

    plan = tmp_path / "plan.csv"
    plan.write_text(one.out.replace(f"{topic},0,3", f"{topic},0,7"))
    r = cli("offsets", "reset", "--group", g2, "--from-file", str(plan), "--execute", "--bootstrap-server", broker)
    assert r.code == 0, r.err
    assert restarted_view(broker, g2, topic, 2) == {0: (7, 7), 1: (4, 4)}

    plan.write_text(f"{g1},{topic},1,8\n{g2},{topic},1,2\n")
    r = cli(
        "offsets", "reset", "--group", g1, "--group", g2, "--from-file", str(plan), "--execute",
        "--bootstrap-server", broker,
    )  # fmt: skip
    assert r.code == 0, r.err
    assert restarted_view(broker, g1, topic, 2)[1] == (8, 8)
    assert restarted_view(broker, g2, topic, 2)[1] == (2, 2)


def test_all_groups_refuses_when_one_group_is_active(
    groupd_broker: GroupdBroker, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    broker = groupd_broker.bootstrap  # a broker of its own: --all-groups sees no other test's groups
    topic, idle, live = f"t-{unique}", f"idle-{unique}", f"live-{unique}"
    make_topic(broker, topic, partitions=1, messages=3)
    commit(broker, idle, topic, {0: 3})
    members("kafka-python", broker, live, topic)
    wait_balanced(broker, live, topic, 1, 1)
    r = cli(
        "offsets", "reset", "--all-groups", "--topic", topic, "--to-earliest", "--execute", "--bootstrap-server", broker
    )
    assert r.code == 1
    assert f"'{live}': it is Stable" in r.err and "Assignments can only be reset if the group is inactive" in r.err
    assert restarted_view(broker, idle, topic, 1)[0][0] == 3  # nothing was committed for any group


def test_reset_is_seen_by_a_restarted_subscriber(broker: str, cli: Callable[..., Any], unique: str) -> None:
    """A confluent-kafka consumer reads to the end and commits; after the reset, the same consumer
    started again reads from the new offset."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=1, messages=6)
    conf = {
        "bootstrap.servers": broker,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }

    def read(n: int) -> list[int]:
        c = Consumer(conf)
        c.subscribe([topic])
        got: list[int] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < n and time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is not None and not msg.error():
                    got.append(msg.offset())
            c.commit(asynchronous=False)
            assert c.committed([CTP(topic, 0)], timeout=10)[0].offset == got[-1] + 1
        finally:
            c.close()
        return got

    assert read(6) == [0, 1, 2, 3, 4, 5]
    wait_state(broker, group, "EMPTY")
    r = cli(
        "offsets", "reset", "--group", group, "--topic", topic, "--to-offset", "2", "--execute",
        "--bootstrap-server", broker,
    )  # fmt: skip
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    assert r.out.splitlines()[1].split() == [group, topic, "0", "6", "2"]
    assert read(4) == [2, 3, 4, 5]


def test_reset_of_an_active_group_is_refused(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=1, messages=3)
    commit(broker, group, topic, {0: 3})
    members("kafka-python", broker, group, topic)
    wait_balanced(broker, group, topic, 1, 1)

    r = cli(
        "offsets", "reset", "--group", group, "--topic", topic, "--to-earliest", "--execute",
        "--bootstrap-server", broker,
    )  # fmt: skip
    assert r.code == 1
    assert "it is Stable" in r.err and "Empty or Dead" in r.err and r.err.count("\n") == 1
    assert "Assignments can only be reset if the group is inactive" in r.err
    assert r.out == ""
    assert restarted_view(broker, group, topic, 1)[0][0] == 3


def test_reset_of_a_group_that_does_not_exist_needs_allow_new_group(
    broker: str, cli: Callable[..., Any], unique: str
) -> None:
    """The issue's `--group nosuch` exited 0 and created a group with offsets: a typo must not do that.
    Asked for, a group may be given offsets before its first consumer starts (Kafka's tool allows it)."""
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=2, messages=4)
    argv = ["offsets", "reset", "--group", group, "--topic", topic, "--to-latest", "--execute"]
    r = cli(*argv, "--bootstrap-server", broker)
    assert r.code == 1
    assert r.err == (
        f"groupd: consumer group '{group}' does not exist; add --allow-new-group to give a new group offsets\n"
    )
    assert group not in cli("groups", "list", "--bootstrap-server", broker).out
    assert [c for c, _ in restarted_view(broker, group, topic, 2).values()] == [None, None]

    r = cli(*argv, "--allow-new-group", "--bootstrap-server", broker)
    assert r.code == 0, r.err
    assert restarted_view(broker, group, topic, 2) == {0: (4, 4), 1: (4, 4)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "missing-topic-xyz", "--to-earliest"], "topic 'missing-topic-xyz' does not exist"),
        (["--topic", "{topic}:5", "--to-earliest"], "has no partition 5"),
        (["--topic", "{topic}", "--shift-by", "1"], "without a committed offset"),
        (["--all-topics", "--to-earliest"], "has no committed offsets: name topics with --topic"),
    ],
)
def test_reset_explains_what_is_wrong(
    broker: str, cli: Callable[..., Any], unique: str, args: list[str], message: str
) -> None:
    topic = f"t-{unique}"
    make_topic(broker, topic, partitions=1, messages=1)
    r = cli(
        "offsets",
        "reset",
        "--group",
        f"g-{unique}",
        "--allow-new-group",
        *[a.format(topic=topic) for a in args],
        "--bootstrap-server",
        broker,
    )
    assert r.code == 1
    assert message in r.err and r.err.startswith("groupd: ") and r.err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to-datetime", "yesterday"], "expected ISO-8601"),
        (["--topic", "t:x", "--to-earliest"], "partitions must be integers"),
        (["--by-duration", "1 hour"], "expected an ISO-8601 duration"),
        (["--from-file", "/nonexistent/plan.csv"], "cannot read --from-file"),
        (["--topic", "t", "--from-file", "x.csv"], "--from-file names its own partitions"),
    ],
)
def test_reset_bad_input_is_a_usage_error(
    broker: str, cli: Callable[..., Any], unique: str, args: list[str], message: str
) -> None:
    argv = ["offsets", "reset", "--group", f"g-{unique}", "--bootstrap-server", broker]
    if "--topic" not in args and "--from-file" not in args:
        argv += ["--topic", "t"]
    r = cli(*argv, *args)
    assert r.code == 2
    assert message in r.err


# --- unreachable brokers, healthcheck, the console script ---------------------------------------


@pytest.fixture
def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel completes the handshake) but never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


@pytest.mark.parametrize(
    "command",
    [["groups", "list"], ["groups", "describe", "g"], ["groups", "delete", "g"], ["healthcheck"]],
)
def test_unreachable_broker_is_one_line_and_exit_1(
    cli: Callable[..., Any], closed_port: int, command: list[str]
) -> None:
    r = cli(*command, "--bootstrap-server", f"127.0.0.1:{closed_port}")
    assert r.code == 1
    assert r.err == f"groupd: cannot connect to 127.0.0.1:{closed_port}: Connection refused\n"


def test_a_broker_that_does_not_answer_times_out(cli: Callable[..., Any], silent_port: int) -> None:
    r = cli("groups", "list", "--bootstrap-server", f"127.0.0.1:{silent_port}", "--timeout", "0.5", "--json")
    assert r.code == 1
    assert r.err == f"groupd: 127.0.0.1:{silent_port} did not answer ApiVersions within 0.5s\n"
    assert json.loads(r.out)["error"] == "BROKER_UNREACHABLE"


def test_bad_bootstrap_server_is_a_usage_error(cli: Callable[..., Any]) -> None:
    r = cli("groups", "list", "--bootstrap-server", "localhost")
    assert (r.code, r.err) == (2, "groupd: bad bootstrap server 'localhost': expected HOST:PORT\n")


def test_console_script_exit_codes(groupd_broker_session: GroupdBroker, closed_port: int) -> None:
    """The installed entry point, as a shell script or a Docker HEALTHCHECK runs it."""

    def groupd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "groupd", *args], capture_output=True, text=True, timeout=60, check=False
        )

    ok = groupd("healthcheck", "--bootstrap-server", groupd_broker_session.bootstrap)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"ok: {groupd_broker_session.bootstrap} answered ApiVersions")
    listed = groupd("groups", "list", "--bootstrap-server", groupd_broker_session.bootstrap, "--json")
    assert listed.returncode == 0 and isinstance(json.loads(listed.stdout), list)
    down = groupd("healthcheck", "--bootstrap-server", f"127.0.0.1:{closed_port}")
    assert down.returncode == 1
    assert "Traceback" not in down.stderr and down.stderr.startswith("groupd: cannot connect")
