"""Every API groupd speaks, described once (see ``schema.py``); ``API_BY_KEY`` is the registry."""

from __future__ import annotations

from ..schema import ApiSchema
from . import core, groups

ALL_APIS: tuple[ApiSchema, ...] = tuple(
    v for m in (core, groups) for v in vars(m).values() if isinstance(v, ApiSchema)
)
API_BY_KEY: dict[int, ApiSchema] = {a.key: a for a in ALL_APIS}
API_BY_NAME: dict[str, ApiSchema] = {a.name: a for a in ALL_APIS}
