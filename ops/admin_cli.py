"""``groupd groups|offsets|topics ...``, ``groupd healthcheck`` and ``groupd completion``:
administration of any Kafka-protocol broker (groupd or Kafka itself), in the spirit of
``kafka-consumer-groups.sh`` and ``kafka-topics.sh``, over TLS and SASL as well as PLAINTEXT
(``--command-config`` reads Kafka's client properties files).

Output is an aligned table for people, or JSON with ``--json`` for scripts. Every failure is one
line on stderr and a nonzero exit: 1 when the broker said no or could not be reached, 2 for bad
input (argparse's convention). Commands that change something print a preview unless ``--execute``
is given (``offsets reset``), as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from . import share_cli
from .kafka_client import (
    DYNAMIC_TOPIC_CONFIG,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    SECURITY_PROTOCOLS,
    AuthenticationFailed,
    BrokerUnreachable,
    GroupDescription,
    KafkaClient,
    KafkaClientError,
    KafkaError,
    MemberDescription,
    Security,
    TopicPartition,
    error_name,
    read_properties,
)

COMMANDS = ("groups", "share-groups", "offsets", "topics", "transactions", "healthcheck", "completion")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# Kafka only lets an administrator move offsets of a group that no consumer is using.
RESETTABLE_STATES = ("Empty", "Dead")
PASSWORD_ENV = "GROUPD_SASL_PASSWORD"


class CommandError(Exception):
    """A failure explained in one line; ``code`` is the Kafka error name, when there is one."""

    def __init__(self, message: str, code: str | None = None, exit_code: int = 1) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code


# --- argument parsing ------------------------------------------------------------------------------


def _positive(convert: Callable[[str], float], kind: str) -> Callable[[str], Any]:
    """An argparse ``type`` that accepts only positive values of ``convert``'s kind."""

    def parse(s: str) -> Any:
        try:
            v = convert(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {kind}: {s!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {s!r}")
        return v

    return parse


_positive_float = _positive(float, "a number")
_positive_int = _positive(int, "an integer")


GROUP_TYPES = ("classic", "consumer")


def _group_types(s: str) -> list[str]:
    """``--type classic,consumer``: Kafka's ConsumerGroupCommand names, case-insensitive."""
    types = [t.strip().lower() for t in s.split(",") if t.strip()]
    bad = [t for t in types if t not in GROUP_TYPES]
    if bad or not types:
        raise argparse.ArgumentTypeError(f"unknown group type {s!r}: expected {' or '.join(GROUP_TYPES)}")
    return types


# Kafka's GroupState names but Unknown (what GroupState.parse answers for any other text)
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")


def _group_state(s: str) -> str:
    """``--state stable``: a Kafka group state, case-insensitive; anything else is refused as
    ConsumerGroupCommand.consumerGroupStatesFromString refuses it (Invalid state list)."""
    by_lower = {state.lower(): state for state in GROUP_STATES}
    state = by_lower.get(s.strip().lower())
    if state is None:
        raise argparse.ArgumentTypeError(f"invalid state {s!r}: valid states are {', '.join(GROUP_STATES)}")
    return state


def _config_pair(s: str) -> tuple[str, str]:
    key, sep, value = s.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {s!r}")
    return key.strip(), value


def _common_options() -> argparse.ArgumentParser:
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
    sec = common.add_argument_group(
        "security", "TLS and SASL (flags override --command-config; the password may come from $" + PASSWORD_ENV + ")"
    )
    sec.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties: security.protocol, ssl.ca.location (or a PEM ssl.truststore.location), "
        "ssl.certificate.location, ssl.key.location, sasl.mechanism, sasl.username/sasl.password or sasl.jaas.config",
    )
    sec.add_argument("--security-protocol", choices=SECURITY_PROTOCOLS, type=str.upper, help="default: PLAINTEXT")
    sec.add_argument("--ssl-cafile", metavar="PEM", help="CA bundle that signed the broker's certificate")
    sec.add_argument("--ssl-certfile", metavar="PEM", help="client certificate (chain), for brokers that ask for one")
    sec.add_argument("--ssl-keyfile", metavar="PEM", help="the client certificate's private key")
    sec.add_argument(
        "--sasl-mechanism",
        type=str.upper,
        metavar="MECHANISM",
        help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: PLAIN)",
    )
    sec.add_argument("--sasl-username", metavar="USER")
    pw = sec.add_mutually_exclusive_group()
    pw.add_argument(
        "--sasl-password",
        metavar="PASSWORD",
        help=f"visible to other local users: prefer --sasl-password-stdin or ${PASSWORD_ENV}",
    )
    pw.add_argument("--sasl-password-stdin", action="store_true", help="read the password from standard input")
    return common


def _cmd(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    parents: list[argparse.ArgumentParser],
    help_: str,
    examples: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with examples."""
    return sub.add_parser(
        name,
        parents=parents,
        help=help_,
        description=description or help_[0].upper() + help_[1:] + ".",
        epilog="examples:\n" + examples.strip("\n"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = [_common_options()]

    groups = _cmd(
        sub,
        "groups",
        [],
        "list, describe and delete consumer groups of any Kafka broker",
        "  groupd groups list\n  groupd groups describe billing\n  groupd groups delete billing",
    )
    gsub = groups.add_subparsers(dest="groups_command", metavar="{list,describe,delete}")
    p = _cmd(
        gsub,
        "list",
        common,
        "list consumer groups",
        "  groupd groups list --state Stable\n  groupd groups list --type consumer\n"
        "  groupd groups list --bootstrap-server kafka:9093 "
        "--command-config client.properties --json",
    )
    p.add_argument(
        "--state",
        action="append",
        type=_group_state,
        metavar="STATE",
        help=f"only groups in this state (repeatable): {', '.join(GROUP_STATES)}",
    )
    p.add_argument(
        "--type",
        action="append",
        type=_group_types,
        metavar="TYPE[,TYPE]",
        help="only groups of these types: classic (JoinGroup/SyncGroup) or consumer (KIP-848); repeatable",
    )
    p = _cmd(
        gsub,
        "describe",
        common,
        "members, assignments, committed offsets and lag of a group",
        "  groupd groups describe billing\n  groupd groups describe billing --json | jq '.offsets[].lag'",
    )
    p.add_argument("group")
    p = _cmd(
        gsub,
        "delete",
        common,
        "delete an empty group and its committed offsets",
        "  groupd groups delete billing",
    )
    p.add_argument("group")

    share_cli.add_parsers(sub, common, _cmd)  # share-groups (KIP-932)

    txns = _cmd(
        sub,
        "transactions",
        [],
        "list and describe the transactions of transactional producers",
        "  groupd transactions list\n  groupd transactions describe payments-1",
    )
    xsub = txns.add_subparsers(dest="transactions_command", metavar="{list,describe}")
    p = _cmd(
        xsub,
        "list",
        common,
        "list transactional ids, their producer ids and transaction states",
        "  groupd transactions list --state Ongoing\n  groupd transactions list --json",
    )
    p.add_argument(
        "--state",
        action="append",
        metavar="STATE",
        help="only transactions in this state (repeatable), e.g. Ongoing, PrepareCommit, CompleteAbort",
    )
    p.add_argument("--producer-id", action="append", type=int, metavar="ID", help="only this producer id (repeatable)")
    p = _cmd(
        xsub,
        "describe",
        common,
        "state, producer id and epoch, timeout, start time and partitions of transactions",
        "  groupd transactions describe payments-1\n  groupd transactions describe payments-1 payments-2 --json",
    )
    p.add_argument("transactional_id", nargs="+")

    offsets = _cmd(
        sub,
        "offsets",
        [],
        "preview, reset, export and delete the committed offsets of consumer groups",
        "  groupd offsets reset --group billing --topic orders --to-earliest            # preview\n"
        "  groupd offsets reset --group billing --topic orders --to-earliest --execute  # commit\n"
        "  groupd offsets delete --group billing --topic orders",
    )
    osub = offsets.add_subparsers(dest="offsets_command", metavar="{reset,delete}")
    p = _cmd(
        osub,
        "reset",
        common,
        "reset committed offsets (groups must be inactive: Empty or Dead)",
        """
  groupd offsets reset --group billing --topic orders --to-earliest             # preview the plan
  groupd offsets reset --group billing --topic orders --to-earliest --execute   # commit it
  groupd offsets reset --group billing --topic orders:0,2 --to-offset 1200 --execute
  groupd offsets reset --group billing --all-topics --shift-by -100 --execute
  groupd offsets reset --group billing --topic orders --by-duration PT1H --execute
  groupd offsets reset --group billing --topic orders --to-datetime 2026-01-01T00:00:00Z
  groupd offsets reset --all-groups --all-topics --to-current --export > offsets.csv
  groupd offsets reset --group billing --from-file offsets.csv --execute
  groupd offsets reset --group new-app --topic orders --to-latest --allow-new-group --execute
""",
        description="Reset committed offsets. Prints the plan (group, topic, partition, current and new offset) "
        "and commits nothing unless --execute is given. New offsets are kept between each partition's earliest "
        "and log end offset.",
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--group", action="append", metavar="GROUP", help="the group (repeatable)")
    who.add_argument("--all-groups", action="store_true", help="every group the brokers know")
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:PARTITIONS]",
        help="topic, optionally with partitions (orders:0,2); repeatable; default: every partition",
    )
    what.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the earliest offset still in the log")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-current", action="store_true", help="the committed offset (the log end where none)")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    to.add_argument(
        "--to-datetime",
        metavar="ISO-8601",
        help="the first offset at or after this time, e.g. 2026-01-01T00:00:00Z (no zone = local time)",
    )
    to.add_argument(
        "--by-duration", metavar="DURATION", help="the first offset at or after now minus an ISO-8601 duration (PT1H)"
    )
    to.add_argument(
        "--from-file",
        metavar="CSV",
        help="offsets from a CSV file: topic,partition,offset (or group,topic,partition,offset), as --export writes",
    )
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    run.add_argument("--dry-run", action="store_true", help="only show the plan (the default)")
    p.add_argument("--export", action="store_true", help="print the plan as the CSV that --from-file reads")
    p.add_argument(
        "--allow-new-group",
        action="store_true",
        help="give offsets to a group that does not exist yet (before its first consumer starts)",
    )

    p = _cmd(
        osub,
        "delete",
        common,
        "delete a group's committed offsets of one or more topics (OffsetDelete)",
        "  groupd offsets delete --group billing --topic orders\n"
        "  groupd offsets delete --group billing --topic orders:0,1 --topic refunds",
        description="Delete a group's committed offsets of some topics (Kafka's OffsetDelete, "
        "kafka-consumer-groups.sh --delete-offsets). A group whose active members consume a topic keeps "
        "its offsets of that topic (GROUP_SUBSCRIBED_TO_TOPIC).",
    )
    p.add_argument("--group", required=True)
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:PARTITIONS]",
        help="repeatable; default: every partition",
    )

    topics = _cmd(
        sub,
        "topics",
        [],
        "list, describe, create, delete and alter topics",
        "  groupd topics list\n  groupd topics create orders --partitions 6 --config retention.ms=86400000\n"
        "  groupd topics describe orders\n  groupd topics alter orders --partitions 12\n  groupd topics delete orders",
    )
    tsub = topics.add_subparsers(dest="topics_command", metavar="{list,describe,create,delete,alter}")
    p = _cmd(
        tsub, "list", common, "list topics", "  groupd topics list\n  groupd topics list --exclude-internal --json"
    )
    p.add_argument("--exclude-internal", action="store_true", help="leave out __consumer_offsets and the like")
    p = _cmd(
        tsub,
        "describe",
        common,
        "partitions, leaders, replicas, in-sync replicas and offsets of topics",
        "  groupd topics describe orders\n  groupd topics describe            # every topic",
    )
    p.add_argument("topic", nargs="*", help="topics (default: all)")
    p = _cmd(
        tsub,
        "create",
        common,
        "create a topic",
        "  groupd topics create orders --partitions 6\n"
        "  groupd topics create audit --config cleanup.policy=compact --config retention.ms=-1 --if-not-exists",
    )
    p.add_argument("topic")
    p.add_argument("--partitions", type=_positive_int, help="default: the broker's num.partitions")
    p.add_argument("--replication-factor", type=_positive_int, help="default: the broker's")
    p.add_argument("--config", type=_config_pair, action="append", default=[], metavar="KEY=VALUE", help="repeatable")
    p.add_argument("--if-not-exists", action="store_true", help="succeed when the topic already exists")
    p = _cmd(tsub, "delete", common, "delete topics", "  groupd topics delete orders refunds --if-exists")
    p.add_argument("topic", nargs="+")
    p.add_argument("--if-exists", action="store_true", help="succeed when a topic does not exist")
    p = _cmd(
        tsub,
        "alter",
        common,
        "add partitions to a topic, or change its configs",
        "  groupd topics alter orders --partitions 12\n  groupd topics alter orders --config retention.ms=3600000\n"
        "  groupd topics alter orders --delete-config retention.ms",
    )
    p.add_argument("topic")
    p.add_argument("--partitions", type=_positive_int, help="the new total number of partitions")
    p.add_argument(
        "--config",
        type=_config_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config (repeatable)",
    )
    p.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="back to the default (repeatable)"
    )

    p = _cmd(
        sub,
        "healthcheck",
        common,
        "exit 0 when the broker answers (ApiVersions, authentication, Metadata), 1 otherwise",
        "  groupd healthcheck --bootstrap-server 127.0.0.1:9092\n"
        "  groupd healthcheck --bootstrap-server 127.0.0.1:9093 --command-config client.properties\n"
        "  GROUPD_PORT=19092 groupd healthcheck --local     # the Docker image's HEALTHCHECK",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="check the groupd daemon that this environment configures (GROUPD_PORT, GROUPD_LISTENERS, ... "
        "and GROUPD_CONFIG, as `groupd serve` reads them): its first PLAINTEXT listener (else its first), "
        "on the loopback address when it binds every address",
    )

    p = _cmd(
        sub,
        "completion",
        [],
        "print a shell completion script (needs shtab: pip install 'groupd[completion]')",
        "  groupd completion bash > ~/.local/share/bash-completion/completions/groupd\n"
        '  groupd completion zsh > "${fpath[1]}/_groupd"',
    )
    p.add_argument("shell", choices=("bash", "zsh"))


def load_security(args: argparse.Namespace) -> tuple[Security, list[str]]:
    """The connection's security from --command-config, then the flags on top, then the password
    from stdin or the environment; raises ValueError (a usage error) on what cannot work."""
    kwargs: dict[str, Any] = {}
    warnings: list[str] = []
    if args.command_config:
        try:
            text = Path(args.command_config).read_text()
        except OSError as e:
            raise ValueError(f"cannot read --command-config {args.command_config}: {e.strerror or e}") from None
        kwargs, warnings = Security.from_properties(read_properties(text))
        warnings = [f"{args.command_config}: {w}" for w in warnings]
    flags = {
        "protocol": args.security_protocol,
        "ssl_cafile": args.ssl_cafile,
        "ssl_certfile": args.ssl_certfile,
        "ssl_keyfile": args.ssl_keyfile,
        "sasl_mechanism": args.sasl_mechanism,
        "sasl_username": args.sasl_username,
        "sasl_password": args.sasl_password,
    }
    kwargs.update({k: v for k, v in flags.items() if v is not None})
    if args.sasl_password_stdin:
        kwargs["sasl_password"] = sys.stdin.readline().rstrip("\r\n")
    elif kwargs.get("sasl_password") is None and os.environ.get(PASSWORD_ENV) is not None:
        kwargs["sasl_password"] = os.environ[PASSWORD_ENV]
    return Security(**kwargs).validate(), warnings


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.command == "completion":
        return completion(args, parser)
    sub = (
        getattr(args, "groups_command", None)
        or getattr(args, "offsets_command", None)
        or getattr(args, "topics_command", None)
        or getattr(args, "transactions_command", None)
        or getattr(args, "share_groups_command", None)
    )
    action = {
        ("groups", "list"): groups_list,
        ("groups", "describe"): groups_describe,
        ("groups", "delete"): groups_delete,
        ("offsets", "reset"): offsets_reset,
        ("offsets", "delete"): offsets_delete,
        ("topics", "list"): topics_list,
        ("topics", "describe"): topics_describe,
        ("topics", "create"): topics_create,
        ("topics", "delete"): topics_delete,
        ("topics", "alter"): topics_alter,
        ("transactions", "list"): transactions_list,
        ("transactions", "describe"): transactions_describe,
        ("healthcheck", None): healthcheck,
        **share_cli.ACTIONS,
    }.get((args.command, sub))
    if action is None:  # `groupd groups` without a subcommand: show what there is
        with contextlib.suppress(SystemExit):
            parser.parse_args([args.command, "--help"])
        return 2
    try:
        security, warnings = load_security(args)
        for w in warnings:
            print(f"groupd: warning: {w}", file=sys.stderr)
        with KafkaClient(args.bootstrap_server, timeout=args.timeout, security=security) as client:
            result = action(client, args)
    except ValueError as e:  # bad input found after parsing (bootstrap address, datetime, partitions, files)
        return _fail(args, CommandError(str(e), exit_code=2))
    except CommandError as e:
        return _fail(args, e)
    except AuthenticationFailed as e:
        return _fail(args, CommandError(str(e), e.name))
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


def completion(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        import shtab
    except ImportError:
        print("groupd: shell completion needs shtab: pip install 'groupd[completion]'", file=sys.stderr)
        return 1
    print(shtab.complete(parser, shell=args.shell))
    return 0


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
    """ApiVersions alone is answered before authentication: Metadata proves the broker lets us in."""
    versions = client.api_versions()
    conn = client.any_connection()
    md = client.metadata([])
    data = {
        "status": "ok",
        "broker": conn.address,
        "apis": len(versions),
        "brokers": len(md.brokers),
        "security_protocol": client.security.protocol,
        "principal": conn.principal,
    }
    text = f"ok: {conn.address} answered ApiVersions ({len(versions)} APIs) and Metadata ({len(md.brokers)} brokers)"
    if conn.principal is not None:
        text += f", authenticated as {conn.principal} ({client.security.sasl_mechanism})"
    return data, text


def groups_list(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    types = sorted({t for ts in args.type or [] for t in ts})
    listed = client.list_groups(args.state, types or None)
    data = [
        {"group": g.group_id, "type": g.group_type, "state": g.state, "protocol_type": g.protocol_type} for g in listed
    ]
    if not listed:
        where = [f"in state {', '.join(args.state)}"] if args.state else []
        where += [f"of type {', '.join(types)}"] if types else []
        return data, " ".join(["no consumer groups", *where])
    return data, table(
        ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
        [[g.group_id, g.group_type, g.state, g.protocol_type] for g in listed],
    )


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
    consumer = d.group_type == "consumer"
    members = [_member_data(m, consumer) for m in d.members]
    data = {
        "group": d.group_id,
        "type": d.group_type,
        "state": d.state,
        "protocol_type": d.protocol_type,
        "protocol": d.protocol,
        "coordinator": d.coordinator,
        # Classic DescribeGroups does not carry the generation; kept so scripts need not guess.
        "generation": None,
        "members": members,
        "offsets": offsets,
    }
    if consumer:
        # kafka-consumer-groups.sh --describe --state --verbose of a consumer group
        data.update(group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch, assignor=d.protocol)
        head = table(
            [
                "GROUP",
                "TYPE",
                "STATE",
                "ASSIGNMENT-STRATEGY",
                "GROUP-EPOCH",
                "TARGET-ASSIGNMENT-EPOCH",
                "COORDINATOR",
                "MEMBERS",
            ],
            [
                [
                    d.group_id,
                    d.group_type,
                    d.state,
                    d.protocol or None,
                    d.group_epoch,
                    d.assignment_epoch,
                    d.coordinator,
                    len(d.members),
                ]
            ],
        )
    else:
        head = table(
            ["GROUP", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "COORDINATOR", "MEMBERS"],
            [[d.group_id, d.state, d.protocol_type or None, d.protocol or None, d.coordinator, len(d.members)]],
        )
    parts = [head]
    if d.members and consumer:
        # --describe --members --verbose: each member's epoch, what it owns and what it is moving to
        rows = [
            [
                m.member_id,
                m.client_id,
                m.host,
                m.instance_id,
                m.member_epoch,
                _partitions_text(m.assignment),
                d.assignment_epoch,
                _partitions_text(m.target_assignment),
            ]
            for m in d.members
        ]
        headers = ["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT"]
        parts.append(table([*headers, "TARGET-EPOCH", "TARGET-ASSIGNMENT"], rows))
    elif d.members:
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


def _member_data(m: MemberDescription, consumer: bool) -> dict[str, Any]:
    def tps(parts: list[TopicPartition] | None) -> list[dict[str, Any]] | None:
        return None if parts is None else [{"topic": t, "partition": p} for t, p in parts]

    out: dict[str, Any] = {
        "member_id": m.member_id,
        "client_id": m.client_id,
        "host": m.host,
        "instance_id": m.instance_id,
        "assignment": tps(m.assignment),
    }
    if consumer:
        out.update(
            member_epoch=m.member_epoch,
            target_assignment=tps(m.target_assignment),
            subscribed_topics=m.subscribed_topics,
            subscribed_regex=m.subscribed_regex,
        )
    return out


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


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``PT1H``, ``P1DT30M``, ``PT0.5S``,
    ``-PT1H``), in milliseconds; Kafka's ``--by-duration`` goes that far back from now."""
    m = re.fullmatch(
        r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:[.,]\d{0,9})?)S)?)?",
        text.strip().upper(),
    )
    if not m or not any(m.groups()[1:]) or text.strip().upper().endswith("T"):
        raise ValueError(f"bad --by-duration {text!r}: expected an ISO-8601 duration such as PT1H, P1D or PT30M")
    sign, days, hours, minutes, seconds = m.groups()
    ms = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    ms += round(float((seconds or "0").replace(",", ".")) * 1000)
    return -ms if sign == "-" else ms


def parse_offsets_csv(text: str, source: str) -> dict[str, dict[TopicPartition, int]]:
    """Kafka's reset plan CSV: ``topic,partition,offset`` lines for one group, or
    ``group,topic,partition,offset`` for several; the group is "" in the first form."""
    plan: dict[str, dict[TopicPartition, int]] = {}
    for n, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not "".join(row).strip():
            continue
        try:
            if len(row) == 3:
                group, (topic, part, off) = "", row
            elif len(row) == 4:
                group, topic, part, off = row
            else:
                raise ValueError
            tp, offset = (topic.strip(), int(part)), int(off)
        except ValueError:
            raise ValueError(
                f"{source} line {n}: expected topic,partition,offset or group,topic,partition,offset"
            ) from None
        if not tp[0] or tp[1] < 0 or offset < 0:
            raise ValueError(f"{source} line {n}: expected a topic, a partition >= 0 and an offset >= 0")
        plan.setdefault(group.strip(), {})[tp] = offset
    if not plan:
        raise ValueError(f"{source} has no offsets")
    return plan


def _resolve_topics(client: KafkaClient, specs: list[str]) -> list[TopicPartition]:
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


def _check_resettable(client: KafkaClient, groups: list[str], allow_new: bool) -> None:
    """Kafka's ConsumerGroupCommand.resetOffsets: only an inactive group's assignments may move.
    A group that does not exist is refused unless asked for (a typo would create a group)."""
    for group in groups:
        d = client.describe_group(group)
        if d is None:
            if not allow_new:
                raise CommandError(
                    f"consumer group {group!r} does not exist; add --allow-new-group to give a new group offsets",
                    "GROUP_ID_NOT_FOUND",
                )
            continue
        if d.state not in RESETTABLE_STATES:
            raise CommandError(
                f"cannot reset offsets of consumer group {group!r}: it is {d.state}. Assignments can only be "
                "reset if the group is inactive (Empty or Dead): stop its consumers first",
                "NON_EMPTY_GROUP",
            )


def _plan_group(client: KafkaClient, group: str, args: argparse.Namespace, now_ms: int) -> list[dict[str, Any]]:
    """One group's reset plan, the way Kafka's ConsumerGroupCommand.prepareOffsetsToReset makes it."""
    committed = client.committed_offsets(group)
    if args.all_topics:
        tps = sorted(committed)
        if not tps:
            raise CommandError(f"consumer group {group!r} has no committed offsets: name topics with --topic")
    else:
        tps = _resolve_topics(client, args.topic)
    earliest = client.list_offsets(tps, EARLIEST_TIMESTAMP)
    latest = client.list_offsets(tps, LATEST_TIMESTAMP)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    if args.to_earliest:
        new = dict(earliest)
    elif args.to_latest:
        new = dict(latest)
    elif args.to_current:
        # Kafka: partitions without a committed offset go to the log end offset.
        new = {tp: committed.get(tp, latest[tp]) for tp in tps}
    elif args.to_offset is not None:
        new = {tp: clamp(tp, args.to_offset) for tp in tps}
    elif args.shift_by is not None:
        missing = [f"{t}:{p}" for t, p in tps if (t, p) not in committed]
        if missing:
            raise CommandError(f"cannot shift partitions without a committed offset: {', '.join(missing)}")
        new = {tp: clamp(tp, committed[tp] + args.shift_by) for tp in tps}
    else:
        target_ms = (
            parse_datetime_ms(args.to_datetime)
            if args.to_datetime is not None
            else now_ms - parse_duration_ms(args.by_duration)
        )
        by_time = client.list_offsets(tps, target_ms)
        # No record at or after that time: the consumer would start at the end, as Kafka's tool does.
        new = {tp: latest[tp] if by_time[tp] < 0 else by_time[tp] for tp in tps}
    return [
        {"group": group, "topic": t, "partition": p, "current_offset": committed.get((t, p)), "new_offset": new[(t, p)]}
        for t, p in tps
    ]


def _read_plan(path: str) -> dict[str, dict[TopicPartition, int]]:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ValueError(f"cannot read --from-file {path}: {e.strerror or e}") from None
    return parse_offsets_csv(text, path)


def _plan_from_file(
    client: KafkaClient, groups: list[str], by_group: dict[str, dict[TopicPartition, int]], source: str
) -> list[dict[str, Any]]:
    if "" in by_group:  # topic,partition,offset: for the one group named
        if len(groups) != 1 or len(by_group) > 1:
            raise ValueError(f"{source}: topic,partition,offset lines need exactly one --group")
        by_group = {groups[0]: by_group[""]}
    unknown = sorted(set(by_group) - set(groups))
    if unknown:
        raise ValueError(f"{source} has offsets of groups not asked for: {', '.join(unknown)}")
    rows = []
    for group, offsets in sorted(by_group.items()):
        committed = client.committed_offsets(group)
        _resolve_topics(client, sorted({f"{t}:{p}" for t, p in offsets}))  # every partition exists
        rows += [
            {"group": group, "topic": t, "partition": p, "current_offset": committed.get((t, p)), "new_offset": o}
            for (t, p), o in sorted(offsets.items())
        ]
    return rows


def offsets_reset(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    if args.from_file is None and not args.topic and not args.all_topics:
        raise ValueError("name the partitions: --topic TOPIC[:PARTITIONS], --all-topics or --from-file")
    if args.from_file is not None and (args.topic or args.all_topics):
        raise ValueError("--from-file names its own partitions: drop --topic/--all-topics")
    if args.by_duration is not None:
        parse_duration_ms(args.by_duration)  # bad input before any request
    if args.to_datetime is not None:
        parse_datetime_ms(args.to_datetime)
    for spec in args.topic or []:
        parse_topic_spec(spec)
    file_plan = _read_plan(args.from_file) if args.from_file is not None else None
    if args.all_groups:
        groups = [g.group_id for g in client.list_groups()]
        if not groups:
            raise CommandError("there are no consumer groups")
    else:
        groups = list(dict.fromkeys(args.group))
    _check_resettable(client, groups, args.allow_new_group)
    if file_plan is not None:
        rows = _plan_from_file(client, groups, file_plan, args.from_file)
    else:
        now_ms = int(time.time() * 1000)
        rows = [row for group in groups for row in _plan_group(client, group, args, now_ms)]
    if args.execute:
        for group in groups:
            new = {(r["topic"], r["partition"]): r["new_offset"] for r in rows if r["group"] == group}
            if new:
                client.commit_offsets(group, new)
    data = {"executed": bool(args.execute), "plan": rows}
    if args.export:
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        for r in rows:  # Kafka's --export: the group column only when there are several groups
            w.writerow(([r["group"]] if len(groups) > 1 else []) + [r["topic"], r["partition"], r["new_offset"]])
        text = out.getvalue().rstrip("\n")
    else:
        text = table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            [[r["group"], r["topic"], r["partition"], r["current_offset"], r["new_offset"]] for r in rows],
        )
    if not args.execute and not args.json:
        # On stderr, so that `--export > plan.csv` writes the CSV alone.
        print("preview only: nothing was committed (add --execute to commit these offsets)", file=sys.stderr)
    return data, text


def offsets_delete(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    """Kafka's ``kafka-consumer-groups.sh --delete-offsets``: a topic without partitions means every
    partition the group has an offset for (or, when it has none, every partition of the topic)."""
    group = args.group
    if client.describe_group(group) is None:
        raise CommandError(f"consumer group {group!r} does not exist", "GROUP_ID_NOT_FOUND")
    committed = client.committed_offsets(group)
    rows = []
    for spec in args.topic:
        topic, partitions = parse_topic_spec(spec)
        if partitions is None:
            partitions = sorted(p for t, p in committed if t == topic)
        if not partitions:
            partitions = [p for t, p in _resolve_topics(client, [topic])]
        results = client.delete_offsets(group, topic, partitions)
        rows += [
            {"topic": topic, "partition": p, "error": None if code == 0 else error_name(code)}
            for p, code in sorted(results.items())
        ]
    failed = [r for r in rows if r["error"]]
    text = table(
        ["TOPIC", "PARTITION", "STATUS"],
        [[r["topic"], r["partition"], "Error: " + r["error"] if r["error"] else "Successful"] for r in rows],
    )
    if failed:
        why = {r["error"] for r in failed}
        hint = (
            ": the group's active members consume it (stop them first)" if why == {"GROUP_SUBSCRIBED_TO_TOPIC"} else ""
        )
        print(text, file=sys.stderr)
        raise CommandError(
            f"offsets of {len(failed)} of {len(rows)} partitions were not deleted ({', '.join(sorted(why))}){hint}",
            sorted(why)[0],
        )
    return {"group": group, "deleted": rows}, text


# --- topics ---------------------------------------------------------------------------------------


def topics_list(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    md = client.metadata(None)
    names = sorted(t for t in md.topics if not (args.exclude_internal and t in md.internal))
    data = [{"topic": t, "partitions": len(md.topics[t]), "internal": t in md.internal} for t in names]
    return data, "\n".join(names) if names else "no topics"


def topics_describe(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    md = client.metadata(args.topic or None)
    for t in args.topic:
        if t not in md.topics:
            code = md.topic_errors.get(t)
            raise CommandError(
                f"topic {t!r} does not exist", error_name(code) if code else "UNKNOWN_TOPIC_OR_PARTITION"
            )
    tps = [(t, pm.partition) for t in sorted(md.partitions) for pm in md.partitions[t]]
    start = client.list_offsets(tps, EARLIEST_TIMESTAMP) if tps else {}
    end = client.list_offsets(tps, LATEST_TIMESTAMP) if tps else {}
    data = []
    rows = []
    for t in sorted(md.partitions):
        parts = []
        for pm in md.partitions[t]:
            tp = (t, pm.partition)
            parts.append(
                {
                    "partition": pm.partition,
                    "leader": pm.leader,
                    "replicas": pm.replicas,
                    "isr": pm.isr,
                    "start_offset": start.get(tp),
                    "end_offset": end.get(tp),
                }
            )
            rows.append([t, pm.partition, pm.leader, _ids(pm.replicas), _ids(pm.isr), start.get(tp), end.get(tp)])
        rf = len(md.partitions[t][0].replicas) if md.partitions[t] else 0
        data.append(
            {
                "topic": t,
                "internal": t in md.internal,
                "partition_count": len(parts),
                "replication_factor": rf,
                "partitions": parts,
            }
        )
    if not rows:
        return data, "no topics"
    text = table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "START-OFFSET", "END-OFFSET"], rows)
    if client.supports("DescribeConfigs"):
        # As kafka-topics.sh --describe: the topic's own configs (the overrides of the broker's defaults).
        config_rows = []
        for d in data:
            own = {
                c["name"]: c["value"]
                for c in client.describe_topic_configs(d["topic"])
                if c.get("config_source") == DYNAMIC_TOPIC_CONFIG
            }
            d["configs"] = own
            config_rows += [[d["topic"], k, v] for k, v in sorted(own.items())]
        if config_rows:
            text += "\n\n" + table(["TOPIC", "CONFIG", "VALUE"], config_rows)
    return data, text


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def topics_create(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    configs = dict(args.config)
    try:
        t = client.create_topic(args.topic, args.partitions or -1, args.replication_factor or -1, configs)
    except KafkaError as e:
        if e.name == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
            return {"topic": args.topic, "created": False}, f"topic {args.topic!r} already exists"
        if e.name == "TOPIC_ALREADY_EXISTS":
            raise CommandError(f"topic {args.topic!r} already exists (--if-not-exists accepts that)", e.name) from None
        raise
    partitions = t.get("num_partitions", -1)
    data = {
        "topic": args.topic,
        "created": True,
        "partitions": None if partitions < 0 else partitions,
        "configs": configs,
    }
    return data, f"created topic {args.topic!r}" + (f" with {partitions} partitions" if partitions > 0 else "")


def topics_delete(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    done = []
    lines = []
    for topic in dict.fromkeys(args.topic):
        try:
            client.delete_topic(topic)
        except KafkaError as e:
            if e.name == "UNKNOWN_TOPIC_OR_PARTITION":
                if args.if_exists:
                    lines.append(f"topic {topic!r} does not exist")
                    continue
                raise CommandError(f"topic {topic!r} does not exist (--if-exists accepts that)", e.name) from None
            raise
        done.append(topic)
        lines.append(f"deleted topic {topic!r}")
    return {"deleted": done}, "\n".join(lines)


def topics_alter(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    if args.partitions is None and not args.config and not args.delete_config:
        raise ValueError("nothing to change: give --partitions N, --config KEY=VALUE and/or --delete-config KEY")
    md = client.metadata([args.topic])
    if args.topic not in md.topics:
        raise CommandError(f"topic {args.topic!r} does not exist", "UNKNOWN_TOPIC_OR_PARTITION")
    changes: dict[str, str | None] = {**dict(args.config), **dict.fromkeys(args.delete_config)}
    api = None
    if changes:
        # Configs first: a refused config leaves the partition count as it was.
        if not any(client.supports(n) for n in ("IncrementalAlterConfigs", "AlterConfigs")):
            raise CommandError(
                "the broker does not support AlterConfigs/IncrementalAlterConfigs (not in its ApiVersions): "
                "give topic configs at creation (groupd topics create --config KEY=VALUE)",
                "UNSUPPORTED_VERSION",
            )
        api = client.alter_topic_configs(args.topic, changes)
    lines = []
    if changes:
        shown = ", ".join(k if v is None else f"{k}={v}" for k, v in changes.items())
        lines.append(f"topic {args.topic!r}: configs altered ({shown})")
    current = len(md.topics[args.topic])
    data: dict[str, Any] = {"topic": args.topic, "configs": changes, "configs_api": api}
    if args.partitions is None:
        return data, "\n".join(lines)
    if args.partitions is not None:
        if args.partitions <= current:
            raise CommandError(
                f"topic {args.topic!r} has {current} partitions: the count can only grow (asked {args.partitions})",
                "INVALID_PARTITIONS",
            )
        client.create_partitions(args.topic, args.partitions)
    data.update(partitions=args.partitions, previous_partitions=current)
    lines.append(f"topic {args.topic!r}: {current} -> {args.partitions} partitions")
    return data, "\n".join(lines)


def transactions_list(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    listed = client.list_transactions(args.state, args.producer_id)
    data = [{"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": t.state} for t in listed]
    if not listed:
        return data, "no transactional ids" + (f" in state {', '.join(args.state)}" if args.state else "")
    rows = [[t.transactional_id, t.producer_id, t.state] for t in listed]
    return data, table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"], rows)


def transactions_describe(client: KafkaClient, args: argparse.Namespace) -> tuple[Any, str]:
    described = []
    for txn_id in args.transactional_id:
        d = client.describe_transaction(txn_id)
        if d is None:
            raise CommandError(f"transactional id {txn_id!r} does not exist", "TRANSACTIONAL_ID_NOT_FOUND")
        described.append(d)
    data = [
        {
            "transactional_id": d.transactional_id,
            "coordinator": d.coordinator,
            "state": d.state,
            "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "transaction_timeout_ms": d.timeout_ms,
            "transaction_start_time_ms": d.start_time_ms if d.start_time_ms >= 0 else None,
            "partitions": [{"topic": t, "partition": p} for t, p in d.partitions],
        }
        for d in described
    ]
    now_ms = time.time() * 1000
    rows = [
        [
            d.transactional_id,
            d.coordinator,
            d.state,
            d.producer_id,
            d.producer_epoch,
            d.timeout_ms,
            round(now_ms - d.start_time_ms) if d.start_time_ms >= 0 else None,
            _partitions_text(d.partitions),
        ]
        for d in described
    ]
    headers = ["TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "DURATION-MS"]
    return data, table([*headers, "PARTITIONS"], rows)
