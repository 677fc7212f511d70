"""Configuration: defaults < TOML file < ``GROUPD_*`` environment variables < command-line flags.

Every field of ``Config`` is a setting under all three names: ``--group-max-size`` on the command
line, ``GROUPD_GROUP_MAX_SIZE`` in the environment, ``group_max_size`` in the TOML file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from groupd.broker.settings import Config

__all__ = ["Config", "add_arguments", "load"]


def _parse_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {s!r}")


def _convert(f: dataclasses.Field[Any], raw: Any) -> Any:
    if f.metadata.get("table"):
        if not isinstance(raw, dict):
            raise ValueError(f"{f.name} must be a TOML table")
        return raw
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    if kind == "bool":
        return raw if isinstance(raw, bool) else _parse_bool(str(raw))
    if kind == "int":
        return int(raw)
    return str(raw)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML configuration file")
    for f in fields(Config):
        if f.metadata.get("table"):
            continue
        flag = "--" + f.name.replace("_", "-")
        help_ = f.metadata.get("help", "") + f" (default: {f.default})"
        if (f.type if isinstance(f.type, str) else f.type.__name__) == "bool":
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=help_)
        else:
            parser.add_argument(flag, dest=f.name, default=None, help=help_)


def load(args: argparse.Namespace | None = None, env: dict[str, str] | None = None) -> Config:
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = {}
    by_name = {f.name: f for f in fields(Config)}
    path = getattr(args, "config", None) or env.get("GROUPD_CONFIG")
    if path:
        with Path(path).open("rb") as fh:
            data = tomllib.load(fh)
        section = data.get("groupd", data)
        # `[users.*]` and `[acl.*]` may sit beside a `[groupd]` table as well as inside it.
        if section is not data:
            section = {**{k: data[k] for k in ("users", "acl") if k in data}, **section}
        for k, v in section.items():
            key = k.replace("-", "_").replace(".", "_")
            if key not in by_name:
                raise ValueError(f"unknown setting {k!r} in {path}")
            values[key] = _convert(by_name[key], v)
    for name, f in by_name.items():
        raw = None if f.metadata.get("table") else env.get("GROUPD_" + name.upper())
        if raw is not None:
            values[name] = _convert(f, raw)
    if args is not None:
        for name, f in by_name.items():
            raw = getattr(args, name, None)
            if raw is not None:
                values[name] = _convert(f, raw)
    return Config(**values)
