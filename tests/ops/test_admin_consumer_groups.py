"""``groupd groups ...`` and ``groupd offsets reset`` with KIP-848 consumer groups (issue 18), against a
real daemon whose members are confluent-kafka consumers with ``group.protocol=consumer``.

What ``kafka-consumer-groups.sh --list --type`` and ``--describe --members --verbose`` show for a
consumer group (ConsumerGroupCommand over the admin client's ConsumerGroupDescribe) is what the CLI
shows; reset and delete follow Kafka's rules (``ConsumerGroupCommand.resetOffsets`` needs an inactive
group; DeleteGroups answers NON_EMPTY_GROUP while members remain).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.ops.test_admin_cli import commit, json_out, make_topic
from tests.support.groups import Member, admin_for

pytestmark = pytest.mark.e2e


def wait_described(
    cli: Callable[..., Any], broker: str, group: str, done: Callable[[dict[str, Any]], bool], timeout: float = 30.0
) -> dict[str, Any]:
    """``groups describe --json`` until ``done`` holds for it."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        r = cli("groups", "describe", group, "--bootstrap-server", broker, "--json")
        if r.code == 0:
            last = json_out(r)
            if done(last):
                return last
        else:
            last = r.err
        time.sleep(0.2)
    raise AssertionError(f"group {group} never got there in {timeout}s: {last}")


def converged(n_members: int, n_partitions: int) -> Callable[[dict[str, Any]], bool]:
    """Stable, every member at the target epoch, owning its target, every partition once."""

    def check(d: dict[str, Any]) -> bool:
        owned = [(a["topic"], a["partition"]) for m in d["members"] for a in m["assignment"]]
        return (
            d["state"] == "Stable"
            and len(d["members"]) == n_members
            and all(m["member_epoch"] == d["assignment_epoch"] == d["group_epoch"] for m in d["members"])
            and all(m["assignment"] == m["target_assignment"] for m in d["members"])
            and len(owned) == len(set(owned)) == n_partitions
        )

    return check


def consumer_member(members: Callable[..., Member], broker: str, group: str, topic: str, **opts: Any) -> Member:
    return members("confluent-kafka", broker, group, topic, group_protocol="consumer", **opts)


def test_list_shows_each_groups_type_and_filters_by_type_listgroups_v5(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    topic, modern, classic = f"t-{unique}", f"modern-{unique}", f"classic-{unique}"
    make_topic(broker, topic, partitions=2, messages=1)
    commit(broker, classic, topic, {0: 1})
    consumer_member(members, broker, modern, topic)
    wait_described(cli, broker, modern, converged(1, 2))

    listed = {g["group"]: g for g in json_out(cli("groups", "list", "--bootstrap-server", broker, "--json"))}
    assert listed[modern] == {"group": modern, "type": "consumer", "state": "Stable", "protocol_type": "consumer"}
    assert listed[classic] == {"group": classic, "type": "classic", "state": "Empty", "protocol_type": ""}

    def only(*flags: str) -> set[str]:
        got = json_out(cli("groups", "list", "--bootstrap-server", broker, "--json", *flags))
        return {g["group"] for g in got} & {modern, classic}

    assert only("--type", "consumer") == {modern}
    assert only("--type", "CLASSIC") == {classic}
    assert only("--type", "classic,consumer") == {modern, classic}
    assert only("--type", "consumer", "--state", "Empty") == set()

    lines = cli("groups", "list", "--bootstrap-server", broker, "--type", "consumer").out.splitlines()
    assert lines[0].split() == ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"]
    assert [line.split() for line in lines[1:] if line.startswith(modern)] == [
        [modern, "consumer", "Stable", "consumer"]
    ]
    with pytest.raises(SystemExit) as bad:  # argparse's usage error
        cli("groups", "list", "--bootstrap-server", broker, "--type", "share")
    assert bad.value.code == 2


def test_describe_a_consumer_group_shows_epochs_members_targets_and_lag_consumergroupdescribe(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=4, messages=10)
    # Offsets given before the first member, as an operator does for a new application.
    r = cli(
        "offsets", "reset", "--group", group, "--topic", f"{topic}:0,1", "--to-offset", "3",
        "--allow-new-group", "--execute", "--bootstrap-server", broker, "--json",
    )  # fmt: skip
    assert json_out(r)["executed"] is True
    consumer_member(members, broker, group, topic, client_id="alpha", instance_id=f"static-{unique}")
    consumer_member(members, broker, group, topic, client_id="beta")
    d = wait_described(cli, broker, group, converged(2, 4))

    assert (d["type"], d["protocol_type"], d["assignor"], d["protocol"]) == (
        "consumer",
        "consumer",
        "uniform",
        "uniform",
    )
    assert d["coordinator"] == broker
    assert d["group_epoch"] >= 2  # one bump per joining member at least
    by_client = {m["client_id"]: m for m in d["members"]}
    assert set(by_client) == {"alpha", "beta"}
    assert by_client["alpha"]["instance_id"] == f"static-{unique}" and by_client["beta"]["instance_id"] is None
    assert all(m["subscribed_topics"] == [topic] and m["subscribed_regex"] is None for m in d["members"])
    assert sorted(len(m["assignment"]) for m in d["members"]) == [2, 2]

    # The same group as librdkafka's own admin client decodes ConsumerGroupDescribe.
    truth = admin_for(broker).describe_consumer_groups([group])[group].result(timeout=15)
    assert sorted(
        (m.member_id, m.client_id, m.host, sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
        for m in truth.members
    ) == sorted(
        (m["member_id"], m["client_id"], m["host"], [(a["topic"], a["partition"]) for a in m["assignment"]])
        for m in d["members"]
    )

    owner = {(a["topic"], a["partition"]): m["member_id"] for m in d["members"] for a in m["assignment"]}
    assert d["offsets"] == [
        {
            "topic": topic,
            "partition": p,
            "committed_offset": 3 if p < 2 else None,
            "log_end_offset": 10,
            "lag": 7 if p < 2 else None,
            "member_id": owner[(topic, p)],
        }
        for p in range(4)
    ]

    r = cli("groups", "describe", group, "--bootstrap-server", broker)
    assert r.code == 0, r.err
    head, member_table, offset_table = r.out.strip().split("\n\n")
    assert head.splitlines()[0].split() == [
        "GROUP", "TYPE", "STATE", "ASSIGNMENT-STRATEGY", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "COORDINATOR",
        "MEMBERS",
    ]  # fmt: skip
    epoch = str(d["group_epoch"])
    assert head.splitlines()[1].split() == [group, "consumer", "Stable", "uniform", epoch, epoch, broker, "2"]
    rows = [line.split() for line in member_table.splitlines()]
    assert rows[0] == [
        "GROUP", "MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT",
        "TARGET-EPOCH", "TARGET-ASSIGNMENT",
    ]  # fmt: skip
    for row in rows[1:]:
        m = next(m for m in d["members"] if m["member_id"] == row[1])
        parts = f"{topic}:" + ",".join(str(a["partition"]) for a in m["assignment"])
        assert row[0] == group
        assert row[2:] == [m["client_id"], m["host"], m["instance_id"] or "-", epoch, parts, epoch, parts]
    assert [line.split() for line in offset_table.splitlines()][1:] == [
        [group, topic, str(p), "3" if p < 2 else "-", "10", "7" if p < 2 else "-", owner[(topic, p)]] for p in range(4)
    ]


def test_reset_and_delete_of_a_consumer_group_need_it_empty(
    broker: str, cli: Callable[..., Any], members: Callable[..., Member], unique: str
) -> None:
    topic, group = f"t-{unique}", f"g-{unique}"
    make_topic(broker, topic, partitions=2, messages=5)
    m = consumer_member(members, broker, group, topic)
    wait_described(cli, broker, group, converged(1, 2))
    reset = ("offsets", "reset", "--group", group, "--topic", topic, "--bootstrap-server", broker, "--json")

    # ConsumerGroupCommand.resetOffsets: "Assignments can only be reset if the group is inactive".
    r = cli(*reset, "--to-offset", "2", "--execute")
    assert r.code == 1 and json_out_error(r) == "NON_EMPTY_GROUP" and "it is Stable" in r.err
    r = cli("groups", "delete", group, "--bootstrap-server", broker, "--json")
    assert r.code == 1 and json_out_error(r) == "NON_EMPTY_GROUP"

    m.stop()  # close(): leaves with epoch -1, the group is Empty at once
    wait_described(cli, broker, group, lambda d: d["state"] == "Empty" and not d["members"])
    plan = json_out(cli(*reset, "--to-offset", "2", "--execute"))["plan"]
    assert [(p["partition"], p["new_offset"]) for p in plan] == [(0, 2), (1, 2)]
    d = wait_described(cli, broker, group, lambda d: True)
    assert [(o["partition"], o["committed_offset"], o["lag"]) for o in d["offsets"]] == [(0, 2, 3), (1, 2, 3)]

    assert json_out(cli("groups", "delete", group, "--bootstrap-server", broker, "--json")) == {
        "group": group,
        "deleted": True,
    }
    assert group not in {g["group"] for g in json_out(cli("groups", "list", "--bootstrap-server", broker, "--json"))}
    r = cli("groups", "describe", group, "--bootstrap-server", broker)
    assert (r.code, r.err) == (1, f"groupd: consumer group '{group}' does not exist\n")


def json_out_error(r: Any) -> str:
    import json

    return str(json.loads(r.out)["error"])
