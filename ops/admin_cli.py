"""``groupd groups ...``, ``groupd offsets reset`` and ``groupd healthcheck``: administration of any
Kafka-protocol broker (groupd or Kafka itself), in the spirit of ``kafka-consumer-groups.sh``.

Output is an aligned table for people, or JSON with ``--json`` for scripts. Every failure is one
line on stderr and a nonzero exit: 1 when the broker said no or could not be reached, 2 for bad
input (argparse's convention).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from datetime import datetime
from typing import Any

from .kafka_client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BrokerUnreachable,
    GroupDescription,
    KafkaClient,
    KafkaClientError,
    KafkaError,
    TopicPartition,
)

COMMANDS = ("groups", "offsets", "healthcheck")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# Kafka only lets an administrator move offsets of a group that no consumer is using.
RESETTABLE_STATES = ("Empty", "Dead")


class CommandError(Exception):
    """A failure explained in one line; ``code`` is the Kafka error name, when there is one."""

    def __init__(self, message: str, code: str | None = None, exit_code: int = 1) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code


# --- argument parsing ------------------------------------------------------------------------------


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {s!r}")
    return v


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker to connect to, or a comma-separated list (default: {DEFAULT_BOOTSTRAP})",
    )
    common.add_argument(
        "--timeout", type=_positive_float, default=10.0, metavar="SECONDS", help="per-request timeout (default: 10)"
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")

    groups = sub.add_parser("groups", help="list, describe and delete consumer groups of any Kafka broker")
    gsub = groups.add_subparsers(dest="groups_command", metavar="{list,describe,delete}")
    p = gsub.add_parser("list", parents=[common], help="list consumer groups")
    p.add_argument(
        "--state", action="append", metavar="STATE", help="only groups in this state (repeatable), e.g. Stable, Empty"
    )
    p = gsub.add_parser("describe", parents=[common], help="members, assignments, committed offsets and lag")
    p.add_argument("group")
    p = gsub.add_parser("delete", parents=[common], help="delete an empty group and its committed offsets")
    p.add_argument("group")

    offsets = sub.add_parser("offsets", help="change the committed offsets of a consumer group")
    osub = offsets.add_subparsers(dest="offsets_command", metavar="{reset}")
    p = osub.add_parser(
        "reset",
        parents=[common],
        help="reset committed offsets (the group must be Empty or Dead)",
        description="Reset a group's committed offsets. Executes unless --dry-run is given.",
    )
    p.add_argument("--group", required=True)
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:PARTITIONS]",
        help="topic, optionally with partitions (orders:0,2); repeatable; default: every partition",
    )
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the earliest offset still in the log")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept within earliest..latest)")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    to.add_argument(
        "--to-datetime",
        metavar="ISO-8601",
        help="the first offset at or after this time, e.g. 2026-01-01T00:00:00Z (no zone = local time)",
    )
    run = p.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="show the new offsets, commit nothing")
    run.add_argument("--execute", action="store_true", help="commit the new offsets (the default)")

    sub.add_parser(
        "healthcheck",
        parents=[common],
        help="exit 0 when the broker answers ApiVersions, 1 otherwise (Docker HEALTHCHECK)",
    )


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    action = {
        ("groups", "list"): groups_list,
        ("groups", "describe"): groups_describe,
        ("groups", "delete"): groups_delete,
        ("offsets", "reset"): offsets_reset,
        ("healthcheck", None): healthcheck,
    }.get((args.command, getattr(args, "groups_command", None) or getattr(args, "offsets_command", None)))
    if action is None:  # `groupd groups` without a subcommand: show what there is
        with contextlib.suppress(SystemExit):
            parser.parse_args([args.command, "--help"])
        return 2
    try:
        with KafkaClient(args.bootstrap_server, timeout=args.timeout) as client:
            result = action(client, args)
    except ValueError as e:  # bad input found after parsing (bootstrap address, datetime, partitions)
        return _fail(args, CommandError(str(e), exit_code=2))
    except CommandError as e:
        return _fail(args, e)
    except BrokerUnreachable as e:
        return _fail(args, CommandError(str(e), "BROKER_UNREACHABLE"))
    except KafkaError as e:
        return _fail(args, CommandError(str(e), e.name))
    except KafkaClientError as e:
        return _fail(args, CommandError(str(e)))
    data, text = result
    if args.json:
        print(json.dumps(data, indent=2))
    elif text:
        print(text)
    return 0


def _fail(args: argparse.Namespace, e: CommandError) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"error": e.code or "ERROR", "message": str(e)}))
    print(f"groupd: {e}", file=sys.stderr)
    return e.exit_code


# --- output ----------------------------------------------------------------------------------------


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """Columns padded to their widest cell; None shows as "-" (as kafka-consumer-groups.sh does)."""
    cells = [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def _partitions_text(tps: list[TopicPartition] | None) -> str | None:
    if tps is None:
        return None
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "(none)"


# --- commands --------------------------------------------------------------------------------------


def healthcheck(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    versions = client.api_versions()
    conn = client.any_connection()
    return (
        {"status": "ok", "broker": conn.address, "apis": len(versions)},
        f"ok: {conn.address} answered ApiVersions ({len(versions)} APIs)",
    )


def groups_list(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    listed = client.list_groups(args.state)
    data = [{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type} for g in listed]
    if not listed:
        return data, "no consumer groups" + (f" in state {', '.join(args.state)}" if args.state else "")
    return data, table(["GROUP", "STATE", "PROTOCOL-TYPE"], [[g.group_id, g.state, g.protocol_type] for g in listed])


def _describe_or_fail(client: KafkaClient, group: str) -> GroupDescription:
    d = client.describe_group(group)
    if d is None:
        raise CommandError(f"consumer group {group!r} does not exist", "GROUP_ID_NOT_FOUND")
    return d


def _log_end_offsets(client: KafkaClient, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
    """Log end offsets of the partitions that still exist (a group may hold offsets of deleted topics)."""
    if not tps:
        return {}
    md = client.metadata(sorted({t for t, _ in tps}))
    live = [tp for tp in sorted(tps) if tp[1] in md.topics.get(tp[0], {})]
    return client.list_offsets(live, LATEST_TIMESTAMP) if live else {}


def groups_describe(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    d = _describe_or_fail(client, args.group)
    committed = client.committed_offsets(args.group)
    owner = {tp: m.member_id for m in d.members for tp in (m.assignment or [])}
    tps = set(committed) | set(owner)
    ends = _log_end_offsets(client, tps)
    offsets = []
    for tp in sorted(tps):
        c, end = committed.get(tp), ends.get(tp)
        offsets.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "committed_offset": c,
                "log_end_offset": end,
                "lag": end - c if c is not None and end is not None else None,
                "member_id": owner.get(tp),
            }
        )
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.host,
            "instance_id": m.instance_id,
            "assignment": None if m.assignment is None else [{"topic": t, "partition": p} for t, p in m.assignment],
        }
        for m in d.members
    ]
    data = {
        "group": d.group_id,
        "state": d.state,
        "protocol_type": d.protocol_type,
        "protocol": d.protocol,
        "coordinator": d.coordinator,
        # Classic DescribeGroups does not carry the generation; kept so scripts need not guess.
        "generation": None,
        "members": members,
        "offsets": offsets,
    }
    head = table(
        ["GROUP", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "COORDINATOR", "MEMBERS"],
        [[d.group_id, d.state, d.protocol_type or None, d.protocol or None, d.coordinator, len(d.members)]],
    )
    parts = [head]
    if d.members:
        rows = [[m.member_id, m.client_id, m.host, m.instance_id, _partitions_text(m.assignment)] for m in d.members]
        parts.append(table(["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "ASSIGNMENT"], rows))
    if offsets:
        rows = [
            [o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"], o["member_id"]]
            for o in offsets
        ]
        parts.append(table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"], rows))
    else:
        parts.append("no committed offsets")
    return data, "\n\n".join(parts)


def groups_delete(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    try:
        client.delete_group(args.group)
    except KafkaError as e:
        if e.name == "GROUP_ID_NOT_FOUND":
            raise CommandError(f"consumer group {args.group!r} does not exist", e.name) from None
        if e.name == "NON_EMPTY_GROUP":
            raise CommandError(
                f"consumer group {args.group!r} is not empty: it has active members (stop its consumers first)",
                e.name,
            ) from None
        raise
    return {"group": args.group, "deleted": True}, f"deleted consumer group {args.group!r}"


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``orders`` (every partition) or ``orders:0,2``."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise ValueError(f"bad --topic {spec!r}: expected TOPIC or TOPIC:P[,P...]")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",")})
    except ValueError:
        raise ValueError(f"bad --topic {spec!r}: partitions must be integers, e.g. {topic}:0,1") from None
    if not partitions or partitions[0] < 0:
        raise ValueError(f"bad --topic {spec!r}: partitions must be integers >= 0")
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """ISO-8601 to epoch milliseconds; a time without a zone is local time (as Kafka's tool reads it)."""
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"bad --to-datetime {text!r}: expected ISO-8601, e.g. 2026-01-01T00:00:00Z") from None
    return int(dt.timestamp() * 1000)  # naive datetimes are taken as local time by timestamp()


def _reset_targets(client: KafkaClient, specs: list[str]) -> list[TopicPartition]:
    wanted = [parse_topic_spec(s) for s in specs]
    md = client.metadata(sorted({t for t, _ in wanted}))
    out: set[TopicPartition] = set()
    for topic, partitions in wanted:
        if topic not in md.topics:
            raise CommandError(f"topic {topic!r} does not exist", "UNKNOWN_TOPIC_OR_PARTITION")
        have = md.topics[topic]
        for p in partitions if partitions is not None else sorted(have):
            if p not in have:
                raise CommandError(
                    f"topic {topic!r} has no partition {p} (it has {len(have)})", "UNKNOWN_TOPIC_OR_PARTITION"
                )
            out.add((topic, p))
    return sorted(out)


def offsets_reset(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    group = args.group
    target_ms = parse_datetime_ms(args.to_datetime) if args.to_datetime is not None else None
    d = client.describe_group(group)
    state = d.state if d is not None else "Dead"
    if state not in RESETTABLE_STATES:
        raise CommandError(
            f"cannot reset offsets of consumer group {group!r}: it is {state}, and offsets can only be reset "
            "while the group is inactive (Empty or Dead); stop its consumers first",
            "NON_EMPTY_GROUP",
        )
    tps = _reset_targets(client, args.topic)
    earliest = client.list_offsets(tps, EARLIEST_TIMESTAMP)
    latest = client.list_offsets(tps, LATEST_TIMESTAMP)
    committed = client.committed_offsets(group)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    new: dict[TopicPartition, int] = {}
    if args.to_earliest:
        new = dict(earliest)
    elif args.to_latest:
        new = dict(latest)
    elif args.to_offset is not None:
        new = {tp: clamp(tp, args.to_offset) for tp in tps}
    elif args.shift_by is not None:
        missing = [f"{t}:{p}" for t, p in tps if (t, p) not in committed]
        if missing:
            raise CommandError(f"cannot shift partitions without a committed offset: {', '.join(missing)}")
        new = {tp: clamp(tp, committed[tp] + args.shift_by) for tp in tps}
    else:
        assert target_ms is not None
        by_time = client.list_offsets(tps, target_ms)
        # No record at or after that time: the consumer would start at the end, as Kafka's tool does.
        new = {tp: latest[tp] if by_time[tp] < 0 else by_time[tp] for tp in tps}

    if not args.dry_run:
        client.commit_offsets(group, new)
    rows = [
        {"topic": t, "partition": p, "previous_offset": committed.get((t, p)), "new_offset": new[(t, p)]}
        for t, p in tps
    ]
    data = {"group": group, "dry_run": bool(args.dry_run), "partitions": rows}
    text = table(
        ["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
        [[group, r["topic"], r["partition"], r["previous_offset"], r["new_offset"]] for r in rows],
    )
    if args.dry_run:
        text += "\n\ndry run: nothing was committed (run without --dry-run to commit)"
    return data, text
