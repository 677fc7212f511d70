"""Command line: ``groupd serve`` (the daemon), ``groupd analyze`` (the PySpark pipeline),
``groupd groups|offsets|topics|healthcheck|completion`` (admin commands for any Kafka broker, see
admin_cli), ``groupd fault ...`` (fault injection through a broker's control endpoint) and
``groupd --version``."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

from . import config, logs

# What `serve` must not import (the admin client, the fault CLI, SCRAM's client side, the
# dashboard, PySpark, the pytest plugin): ~130 ms and ~10 MiB of every daemon start. The admin
# commands' modules are imported by build_parser, which `serve` does not call (see main);
# tests/groupd/test_serve_imports.py holds the line.


class _VersionAction(argparse.Action):
    """``--version``, reading the installed version (importlib.metadata, ~25 ms) only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from . import __version__

        print(f"groupd {__version__}")  # stdout, as argparse's own version action prints it
        parser.exit()


def _root_parser() -> tuple[argparse.ArgumentParser, Any]:
    parser = argparse.ArgumentParser(prog="groupd", description="Kafka consumer-group coordinator daemon")
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the daemon")
    config.add_arguments(serve)
    return parser, sub


def build_parser() -> argparse.ArgumentParser:
    from groupd.ops import admin_cli, fault_cli
    from groupd.security import scram

    parser, sub = _root_parser()
    # `analyze` is parsed by groupd.pipeline itself (see main); listed here for --help only.
    sub.add_parser("analyze", help="rebalance and offset analytics over a data directory (PySpark)", add_help=False)
    admin_cli.add_parsers(sub)
    fault_cli.add_parser(sub)
    scram.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] != ["serve"]:
        gc.enable()  # off while `python -m groupd` imported this module (groupd/__main__.py)
    if argv[:1] == ["analyze"]:
        return _analyze(argv[1:])
    # `serve` needs only its own subcommand: the same parser as build_parser's, without the rest.
    parser = _root_parser()[0] if argv[:1] == ["serve"] else build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            cfg = config.load(args)
            logs.configure(cfg.log_format, cfg.log_level)
        except (ValueError, OSError) as e:
            print(f"groupd: bad configuration: {e}", file=sys.stderr)
            return 2
        # The daemon's imports allocate ~50,000 tracked objects (classes, functions, constants) that
        # live as long as the process: the cyclic collector's passes over them while importing find
        # nothing and cost ~10-15 ms of a ~200 ms start (issue 26). Off while importing (from the
        # start of `python -m groupd`: groupd/__main__.py), then they are frozen (gc.freeze: never
        # scanned again; daemon._GcTuner's periodic full pass unfreezes).
        gc.disable()
        try:
            from .daemon import run
        finally:
            gc.freeze()
            gc.enable()
        return run(cfg)
    from groupd.ops import admin_cli, fault_cli

    if args.command == "fault":
        return fault_cli.run(args, parser)
    if args.command == "scram-credential":
        return _scram_credential(args)
    if args.command == "healthcheck" and args.local:
        try:  # the daemon's own configuration, which ops/ cannot read (it sits below groupd/)
            args.bootstrap_server = local_bootstrap(config.load(None))
        except (ValueError, OSError) as e:
            print(f"groupd: bad configuration: {e}", file=sys.stderr)
            return 2
    if args.command in admin_cli.COMMANDS:
        return admin_cli.run(args, parser)
    parser.print_help()
    return 2


def _scram_credential(args: argparse.Namespace) -> int:
    """Without a terminal to prompt on (a pipe, a CI job, ``docker run`` without ``-t``) the password
    is read from standard input, as ``--password-stdin`` says: getpass would warn that it cannot hide
    the echo and read it there anyway, or end in a traceback on an empty input."""
    if not args.password_stdin and not sys.stdin.isatty():
        args.password_stdin = True
    from groupd.security import scram

    try:
        return scram.run_cli(args)
    except (EOFError, KeyboardInterrupt):
        print(
            "groupd: no password given: type it at the prompt or pipe it in "
            f"(echo secret | groupd scram-credential {args.user} --password-stdin)",
            file=sys.stderr,
        )
        return 2


def local_bootstrap(cfg: config.Config) -> str:
    """HOST:PORT of the daemon ``cfg`` describes, as a process beside it reaches it (``healthcheck --local``)."""
    from groupd.security.listeners import parse_listeners

    listeners = parse_listeners(cfg)
    li = next((li for li in listeners if li.protocol == "PLAINTEXT"), listeners[0])
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(li.host, li.host)
    if li.port == 0:
        raise ValueError(f"listener {li} has port 0: the healthcheck cannot know which port it got")
    return f"[{host}]:{li.port}" if ":" in host else f"{host}:{li.port}"


def _analyze(argv: list[str]) -> int:
    try:  # lazy: pulls in pyspark, which only the `pipeline` extra installs
        from groupd.pipeline.job import main as analyze
    except ImportError as e:
        print(f"groupd analyze needs the pipeline extra (pip install 'groupd[pipeline]'): {e}", file=sys.stderr)
        return 2
    return analyze(argv, prog="groupd analyze", default_master="local[*]")


if __name__ == "__main__":
    sys.exit(main())
