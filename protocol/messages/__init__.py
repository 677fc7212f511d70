"""Every API groupd speaks, described once (see ``schema.py``); ``API_BY_KEY`` is the registry.

``records`` holds the ``__consumer_offsets`` record schemas; they are not APIs and are not listed here.
"""

from __future__ import annotations

from ..schema import ApiSchema
from . import admin, consumer_groups, core, data, groups, offsets, sasl, share_fetch, share_groups, transactions

ALL_APIS: tuple[ApiSchema, ...] = tuple(
    sorted(
        (
            v
            for m in (
                core,
                groups,
                consumer_groups,
                share_groups,
                offsets,
                data,
                sasl,
                admin,
                transactions,
                share_fetch,
            )
            for v in vars(m).values()
            if isinstance(v, ApiSchema)
        ),
        key=lambda a: a.key,
    )
)
API_BY_KEY: dict[int, ApiSchema] = {a.key: a for a in ALL_APIS}
API_BY_NAME: dict[str, ApiSchema] = {a.name: a for a in ALL_APIS}
assert len(API_BY_KEY) == len(ALL_APIS), "two schemas share an api key"
