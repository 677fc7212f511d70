"""``share.auto.offset.reset`` (Kafka's ``ShareGroupAutoOffsetResetStrategy``): where a new
share-partition starts. ``latest`` (the default) is the log end, ``earliest`` the log start,
``by_duration:<ISO-8601 duration>`` the first record written within that duration of now."""

from __future__ import annotations

import re

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE
)


def duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as ``java.time.Duration.parse`` reads it (days and smaller, not
    negative); None when it is not one."""
    m = _DURATION.match(text.strip())
    if m is None or not any(m.groupdict().values()):
        return None
    d, h, mi, s = (m.group(k) for k in "dhms")
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(mi or 0)) * 60_000 + float(s or 0) * 1000)


def parse_reset(value: str) -> tuple[str, int] | None:
    """("earliest" | "latest", 0) or ("by_duration", ms); None when ``value`` is none of them."""
    kind, sep, arg = value.strip().lower().partition(":")
    if not sep and kind in ("earliest", "latest"):
        return kind, 0
    if kind == "by_duration":
        ms = duration_ms(arg)
        if ms is not None:
            return kind, ms
    return None
