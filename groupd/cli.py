"""Command line: ``groupd serve`` (the daemon) and ``groupd --version``."""

from __future__ import annotations

import argparse
import sys

from . import __version__, config, logs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupd", description="Kafka consumer-group coordinator daemon")
    parser.add_argument("--version", action="version", version=f"groupd {__version__}")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the daemon")
    config.add_arguments(serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            cfg = config.load(args)
            logs.configure(cfg.log_format, cfg.log_level)
        except (ValueError, OSError) as e:
            print(f"groupd: bad configuration: {e}", file=sys.stderr)
            return 2
        from .app import run

        return run(cfg)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
