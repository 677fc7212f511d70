"""``groupd fault add|list|clear|expire-member|rebalance``: the control endpoint from a shell."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .admin_cli import _cmd
from .control_client import ControlError, FaultsClient

CONTROL_ENV = "GROUPD_CONTROL"
DEFAULT_CONTROL = "http://127.0.0.1:9644"
BROKER_COMMANDS = (
    "brokers",
    "stop-broker",
    "start-broker",
    "isolate-broker",
    "rebalance-leaders",
    "move-coordinator",
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--control",
        metavar="URL",
        default=os.environ.get(CONTROL_ENV, DEFAULT_CONTROL),
        help=f"the broker's control endpoint (groupd serve --control-port; default ${CONTROL_ENV} or {DEFAULT_CONTROL})",
    )
    common.add_argument("--json", action="store_true", help="print JSON")
    fault = _cmd(
        sub,
        "fault",
        [],
        "inject faults into a groupd broker (errors, delays, closed connections, expiries, rebalances, broker stops)",
        "  groupd fault add --api Heartbeat --error NOT_COORDINATOR --count 3 --group billing\n"
        "  groupd fault list\n  groupd fault clear\n"
        "  groupd fault stop-broker 2        # a cluster (groupd serve --brokers 3): also start-, isolate-broker",
    )
    fsub = fault.add_subparsers(
        dest="fault_command",
        metavar="{add,list,clear,expire-member,expire-locks,rebalance,brokers,stop-broker,start-broker,isolate-broker,"
        "rebalance-leaders,move-coordinator}",
    )
    add = _cmd(
        fsub,
        "add",
        [common],
        "add a fault rule",
        """
  groupd fault add --api Heartbeat --error NOT_COORDINATOR --count 3 --group billing
  groupd fault add --api OffsetCommit --error COORDINATOR_LOAD_IN_PROGRESS --probability 0.2
  groupd fault add --api Fetch --delay-ms 500 --topic orders
  groupd fault add --api OffsetCommit --close              # close the connection of the next one
  groupd fault add --api JoinGroup --error 15 --client-id worker-3 --control http://127.0.0.1:9644
""",
    )
    add.add_argument("--api", required=True, help="the Kafka API (Heartbeat, OffsetCommit, Fetch, ...)")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--error", metavar="NAME|CODE", help="answer with this Kafka error")
    what.add_argument("--delay-ms", type=int, metavar="MS", help="handle the request this much later")
    what.add_argument("--close", action="store_true", help="close the connection instead of answering")
    add.add_argument("--count", type=int, help="only the next COUNT matching requests (close: default 1)")
    add.add_argument("--probability", type=float, metavar="P", help="only this fraction of them (0 < P <= 1)")
    add.add_argument("--group", help="only requests naming this group id")
    add.add_argument("--topic", help="only requests naming this topic")
    add.add_argument("--client-id", help="only requests from this client id")
    add.add_argument("--broker", type=int, help="only on this broker (node id)")
    _cmd(fsub, "list", [common], "list the active fault rules", "  groupd fault list\n  groupd fault list --json")
    clear = _cmd(
        fsub, "clear", [common], "clear one fault rule, or all", "  groupd fault clear\n  groupd fault clear 3"
    )
    clear.add_argument("id", nargs="?", type=int, help="the rule's id (default: every rule)")
    expire = _cmd(
        fsub,
        "expire-member",
        [common],
        "expire a member's session now (the group rebalances without it)",
        "  groupd fault expire-member --group billing --member consumer-1-4f1c...\n"
        "  (member ids: groupd groups describe billing)",
    )
    expire.add_argument("--group", required=True)
    expire.add_argument("--member", required=True, help="the member id")
    locks = _cmd(
        fsub,
        "expire-locks",
        [common],
        "expire a share group's acquisition locks now (its acquired records are delivered again)",
        "  groupd fault expire-locks --group jobs\n  groupd fault expire-locks --group jobs --topic tasks --partition 0",
    )
    locks.add_argument("--group", required=True, help="the share group id")
    locks.add_argument("--topic", help="only this topic's share-partitions")
    locks.add_argument("--partition", type=int, help="only this partition (with --topic)")
    rebalance = _cmd(
        fsub,
        "rebalance",
        [common],
        "trigger a rebalance of a group (members rejoin into a new generation)",
        "  groupd fault rebalance --group billing",
    )
    rebalance.add_argument("--group", required=True)
    _add_broker_parsers(fsub, common)


def _add_broker_parsers(fsub: Any, common: argparse.ArgumentParser) -> None:
    """The broker actions of a cluster (``groupd serve --brokers N``)."""
    _cmd(fsub, "brokers", [common], "list the brokers and their state", "  groupd fault brokers")
    stop = _cmd(
        fsub,
        "stop-broker",
        [common],
        "stop a broker: its connections close, new ones are refused, its partitions get new leaders",
        "  groupd fault stop-broker 2",
    )
    stop.add_argument("broker", type=int, help="node id")
    start = _cmd(
        fsub,
        "start-broker",
        [common],
        "start a stopped broker (it listens again; --rebalance gives it back its partitions)",
        "  groupd fault start-broker 2\n  groupd fault start-broker 2 --rebalance",
    )
    start.add_argument("broker", type=int, help="node id")
    start.add_argument("--rebalance", action="store_true", help="then elect the preferred leaders")
    isolate = _cmd(
        fsub,
        "isolate-broker",
        [common],
        "isolate a broker: it reads nothing from its connections (clients time out); --undo ends it",
        "  groupd fault isolate-broker 2\n  groupd fault isolate-broker 2 --undo",
    )
    isolate.add_argument("broker", type=int, help="node id")
    isolate.add_argument("--undo", action="store_true", help="answer again")
    _cmd(
        fsub,
        "rebalance-leaders",
        [common],
        "move every partition back to its preferred (first) replica (preferred leader election)",
        "  groupd fault rebalance-leaders",
    )
    move = _cmd(
        fsub,
        "move-coordinator",
        [common],
        "move a group's coordinator (its __consumer_offsets partition) to another broker",
        "  groupd fault move-coordinator --group billing --broker 3",
    )
    move.add_argument("--group", required=True)
    move.add_argument("--broker", type=int, required=True, help="node id of the new coordinator")


def _broker_command(client: FaultsClient, command: str, args: argparse.Namespace) -> tuple[Any, str]:
    if command == "brokers":
        out = client.brokers()
        lines = [f"{b['node_id']:>4}  {b['host']}:{b['port']}  {b['state']}" for b in out["brokers"]]
        return out, "\n".join(lines)
    if command == "stop-broker":
        out = client.stop_broker(args.broker)
        return out, f"broker {args.broker} stopped ({out['leaders_moved']} partition leaders moved)"
    if command == "start-broker":
        out = client.start_broker(args.broker, rebalance=args.rebalance)
        return out, f"broker {args.broker} started ({out['leaders_moved']} partition leaders moved back)"
    if command == "isolate-broker":
        out = client.isolate_broker(args.broker, not args.undo)
        return out, f"broker {args.broker} is {out['state']}"
    if command == "rebalance-leaders":
        out = client.rebalance_leaders()
        return out, f"{out['leaders_moved']} partition leaders moved to their preferred broker"
    out = client.move_coordinator(args.group, args.broker)
    return out, f"group {args.group} (partition {out['partition']}) is coordinated by broker {out['coordinator']}"


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    command = getattr(args, "fault_command", None)
    if command is None:
        parser.parse_args(["fault", "--help"])
        return 2
    client = FaultsClient(args.control)
    try:
        out: Any
        if command == "add":
            kind = "close" if args.close else None
            error: Any = args.error
            if error is not None and error.lstrip("-").isdigit():
                error = int(error)
            out = client.add(
                args.api,
                kind=kind,
                error=error,
                delay_ms=args.delay_ms,
                count=args.count,
                probability=args.probability,
                group=args.group,
                topic=args.topic,
                client_id=args.client_id,
                broker=args.broker,
            )
            text = f"added fault {out['id']}: {_describe(out)}"
        elif command == "list":
            out = client.list()
            text = "\n".join(f"{r['id']:>4}  {_describe(r)}  (injected {r['injected']})" for r in out) or "no faults"
        elif command == "clear":
            n = client.clear(args.id)
            out = {"cleared": n}
            text = f"cleared {n} fault(s)"
        elif command in BROKER_COMMANDS:
            out, text = _broker_command(client, command, args)
        elif command == "expire-member":
            out = client.expire_member(args.group, args.member)
            text = f"expired member {args.member} of group {args.group}"
        elif command == "expire-locks":
            out = client.expire_locks(args.group, args.topic, args.partition)
            text = f"expired the locks of {out['records']} record(s) in {out['partitions']} share-partition(s) of {args.group}"
        else:
            out = client.trigger_rebalance(args.group)
            text = f"group {args.group} is rebalancing"
    except ControlError as e:
        if args.json:
            print(json.dumps({"error": e.status, "message": e.message}))
        print(f"groupd fault {command}: {e.message}", file=sys.stderr)
        return 2 if e.status == 400 else 1
    print(json.dumps(out) if args.json else text)
    return 0


def _describe(rule: dict[str, Any]) -> str:
    what = {"error": f"answer {rule.get('error')}", "delay": f"delay {rule.get('delay_ms')} ms", "close": "close"}
    parts = [f"{rule['api']}: {what.get(rule['kind'], rule['kind'])}"]
    if rule.get("count") is not None:
        parts.append(f"next {rule['count'] - rule['injected']}")
    if rule.get("probability") is not None:
        parts.append(f"p={rule['probability']:g}")
    for key in ("group", "topic", "client_id", "broker"):
        if rule.get(key) is not None:
            parts.append(f"{key}={rule[key]}")
    return ", ".join(parts)
