"""``groupd share-groups list|describe|reset-offsets|delete``: share groups (KIP-932) of any Kafka
broker, in the spirit of Kafka 4.2's ``kafka-share-groups.sh`` (``ShareGroupCommand``).

Safe by default, as Kafka's tool: ``reset-offsets`` takes exactly one of ``--dry-run`` (show the
plan) and ``--execute`` (do it), and refuses a group that has members ("Share group 'g' is not
empty."); ``delete`` refuses a group with members (NON_EMPTY_GROUP from the broker).

Wired into ``admin_cli`` (its options, connection, errors and output): the actions here return
``(data for --json, text for people)`` and raise ``KafkaClientError`` / ``ValueError`` as the other
admin commands do.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .kafka_client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    KafkaClient,
    KafkaClientError,
    KafkaError,
    TopicPartition,
)

COMMAND = "share-groups"
SHARE_STATES = ("Empty", "Stable", "Dead")


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [headers, *cells])


def _state(value: str) -> str:
    for s in SHARE_STATES:
        if s.lower() == value.strip().lower():
            return s
    raise argparse.ArgumentTypeError(f"unknown share group state {value!r}: one of {', '.join(SHARE_STATES)}")


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: list[argparse.ArgumentParser],
    cmd: Callable[..., argparse.ArgumentParser],
) -> None:
    """``share-groups`` and its subcommands; ``common``: the admin commands' connection options,
    ``cmd``: admin_cli's subcommand maker (help with examples)."""
    top = cmd(
        sub,
        COMMAND,
        [],
        "list, describe, reset the start offsets of and delete share groups (KIP-932)",
        "  groupd share-groups list\n  groupd share-groups describe orders\n"
        "  groupd share-groups reset-offsets orders --topic orders --to-earliest --dry-run",
    )
    ssub = top.add_subparsers(dest="share_groups_command", metavar="{list,describe,reset-offsets,delete}")
    p = cmd(ssub, "list", common, "list share groups", "  groupd share-groups list --state Stable")
    p.add_argument("--state", action="append", type=_state, metavar="STATE", help="only groups in this state")
    p = cmd(
        ssub,
        "describe",
        common,
        "a share group's state, members and their assignments, and its share partitions' start offsets",
        "  groupd share-groups describe orders\n  groupd share-groups describe orders --json",
    )
    p.add_argument("group")
    p = cmd(
        ssub,
        "reset-offsets",
        common,
        "set the start offsets of an empty share group's partitions (one of --dry-run and --execute)",
        "  groupd share-groups reset-offsets orders --topic orders --to-earliest --dry-run\n"
        "  groupd share-groups reset-offsets orders --all-topics --to-latest --execute\n"
        "  groupd share-groups reset-offsets orders --topic orders:0,1 --to-datetime 2026-01-01T00:00:00 --execute",
    )
    p.add_argument("group")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", action="append", metavar="TOPIC[:P,P]", help="topic (and partitions); repeatable")
    which.add_argument("--all-topics", action="store_true", help="every partition the group has a start offset for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the partitions' log start offsets")
    to.add_argument("--to-latest", action="store_true", help="the partitions' end offsets")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS[.sss]", help="the first offset at or after it")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true", help="only show the offsets it would set")
    mode.add_argument("--execute", action="store_true", help="set them")
    p = cmd(ssub, "delete", common, "delete an empty share group", "  groupd share-groups delete orders")
    p.add_argument("group")


# --- the wire ------------------------------------------------------------------------------------


def _describe(client: KafkaClient, group: str) -> dict[str, Any] | None:
    """ShareGroupDescribe of one group; None when it does not exist (GROUP_ID_NOT_FOUND)."""

    def ask() -> dict[str, Any]:
        _, resp = client.coordinator(group).send(
            "ShareGroupDescribe", {"group_ids": [group], "include_authorized_operations": False}
        )
        entry = resp["groups"][0]
        if entry["error_code"] and entry["error_code"] != 69:  # GROUP_ID_NOT_FOUND: no such share group
            raise KafkaError("ShareGroupDescribe", entry["error_code"], entry.get("error_message"))
        return entry

    entry = client._retrying(ask)
    return None if entry["error_code"] else entry


def _start_offsets(client: KafkaClient, group: str) -> list[dict[str, Any]]:
    """DescribeShareGroupOffsets with null topics: every share partition the group has state for."""

    def ask() -> dict[str, Any]:
        _, resp = client.coordinator(group).send(
            "DescribeShareGroupOffsets", {"groups": [{"group_id": group, "topics": None}]}
        )
        entry = resp["groups"][0]
        if entry["error_code"]:
            raise KafkaError("DescribeShareGroupOffsets", entry["error_code"], entry.get("error_message"))
        return entry

    return [
        {
            "topic": t["topic_name"],
            "partition": p["partition_index"],
            "start_offset": p["start_offset"],
            "lag": p.get("lag", -1),
        }
        for t in client._retrying(ask)["topics"]
        for p in t["partitions"]
    ]


# --- commands ------------------------------------------------------------------------------------


def share_groups_list(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    groups = client.list_groups(states=args.state, types=["share"])
    rows = sorted((g.group_id, g.state) for g in groups)
    data = [{"group": g, "state": s} for g, s in rows]
    return data, _table(["GROUP", "STATE"], [list(r) for r in rows]) if rows else "no share groups"


def share_groups_describe(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    d = _describe(client, args.group)
    if d is None:
        raise KafkaClientError(f"share group {args.group!r} does not exist")
    members = [
        {
            "member_id": m["member_id"],
            "client_id": m["client_id"],
            "host": m["client_host"],
            "member_epoch": m["member_epoch"],
            "subscribed_topics": m["subscribed_topic_names"],
            "assignment": [
                [tp["topic_name"], p] for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]
            ],
        }
        for m in d["members"]
    ]
    offsets = _start_offsets(client, args.group)
    data = {
        "group": args.group,
        "state": d["group_state"],
        "group_epoch": d["group_epoch"],
        "assignment_epoch": d["assignment_epoch"],
        "assignor": d["assignor_name"],
        "members": members,
        "offsets": offsets,
    }
    parts = [
        _table(
            ["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
            [[args.group, d["group_state"], d["group_epoch"], d["assignment_epoch"], len(members)]],
        )
    ]
    if members:
        parts.append(
            _table(
                ["CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "#PARTITIONS", "ASSIGNMENT"],
                [
                    [
                        m["member_id"],
                        m["host"],
                        m["client_id"],
                        m["member_epoch"],
                        len(m["assignment"]),
                        " ".join(f"{t}:{p}" for t, p in m["assignment"]) or "(none)",
                    ]
                    for m in members
                ],
            )
        )
    if offsets:
        parts.append(
            _table(
                ["TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                [[o["topic"], o["partition"], o["start_offset"], None if o["lag"] < 0 else o["lag"]] for o in offsets],
            )
        )
    return data, "\n\n".join(parts)


def _parse_topics(specs: list[str], client: KafkaClient) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for spec in specs:
        name, _, parts = spec.partition(":")
        if parts:
            try:
                out += [(name, int(p)) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise ValueError(f"bad --topic {spec!r}: expected TOPIC or TOPIC:P,P") from None
            continue
        meta = client.metadata([name])
        count = len(meta.topics.get(name, []))
        if not count:
            raise KafkaClientError(f"topic {name!r} does not exist")
        out += [(name, p) for p in range(count)]
    return out


def _timestamp(text: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"bad --to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS[.sss]") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def share_groups_reset_offsets(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    """``ShareGroupCommand.resetOffsets``: only an Empty (or unknown) group; the plan is shown, and
    set with ``--execute`` (AlterShareGroupOffsets)."""
    group = args.group
    d = _describe(client, group)
    if d is not None and d["group_state"] not in ("Empty", "Dead"):
        raise KafkaClientError(f"Share group '{group}' is not empty.")
    if args.all_topics:
        partitions = [(o["topic"], o["partition"]) for o in _start_offsets(client, group)] if d is not None else []
    else:
        partitions = _parse_topics(args.topic, client)
    if args.to_earliest:
        stamp = EARLIEST_TIMESTAMP
    elif args.to_latest:
        stamp = LATEST_TIMESTAMP
    else:
        stamp = _timestamp(args.to_datetime)
    new = client.list_offsets(sorted(set(partitions)), stamp) if partitions else {}
    if args.execute and new:
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (t, p), offset in sorted(new.items()):
            by_topic.setdefault(t, []).append({"partition_index": p, "start_offset": offset})
        body = {"group_id": group, "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def ask() -> dict[str, Any]:
            _, resp = client.coordinator(group).send("AlterShareGroupOffsets", body)
            if resp["error_code"]:
                raise KafkaError("AlterShareGroupOffsets", resp["error_code"], resp.get("error_message"))
            return resp

        resp = client._retrying(ask)
        for t in resp["responses"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    raise KafkaError(
                        "AlterShareGroupOffsets", p["error_code"], f"{t['topic_name']}:{p['partition_index']}"
                    )
    rows = [[group, t, p, o] for (t, p), o in sorted(new.items())]
    data = {
        "group": group,
        "executed": bool(args.execute),
        "offsets": [{"topic": t, "partition": p, "start_offset": o} for _g, t, p, o in rows],
    }
    text = _table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"], rows) if rows else "no partitions to reset"
    if not args.execute:
        text += "\n(dry run: nothing changed; --execute sets these start offsets)"
    return data, text


def share_groups_delete(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    d = _describe(client, args.group)
    if d is None:
        raise KafkaClientError(f"share group {args.group!r} does not exist")
    client.delete_group(args.group)
    return {"group": args.group, "deleted": True}, f"Deleted share group '{args.group}'."


ACTIONS: dict[tuple[str, str | None], Callable[[KafkaClient, argparse.Namespace], tuple[Any, str]]] = {
    (COMMAND, "list"): share_groups_list,
    (COMMAND, "describe"): share_groups_describe,
    (COMMAND, "reset-offsets"): share_groups_reset_offsets,
    (COMMAND, "delete"): share_groups_delete,
}
