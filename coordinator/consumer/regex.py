"""Subscription regular expressions, in the RE2/J syntax Kafka uses.

Kafka compiles ``SubscribedTopicRegex`` with ``com.google.re2j.Pattern`` and a topic matches when the
whole name matches (``matcher(topicName).matches()``, ``GroupMetadataManager.resolveRegularExpressions``;
every topic of the metadata image is scanned, internal ones included). RE2/J is a port of RE2's syntax,
so groupd uses RE2 itself (Google's ``google-re2`` bindings) rather than Python's ``re``, whose syntax
differs (it accepts look-around and back-references that RE2/J rejects, and reads some escapes
differently): a pattern Kafka refuses with INVALID_REGULAR_EXPRESSION is refused here too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import re2


# RE2 is imported by the first regex subscription, not by every daemon's start (issue 26).
@functools.cache
def _re2() -> tuple[Any, Any]:
    import re2

    options = re2.Options()
    options.log_errors = False  # an invalid client pattern is an answer, not a line on stderr
    return re2, options


class InvalidRegularExpression(ValueError):
    pass


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re2._Regexp:
    """The compiled pattern; ``InvalidRegularExpression`` with RE2's reason when it is not valid."""
    re2_, options = _re2()
    try:
        return re2_.compile(pattern, options)
    except re2_.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidRegularExpression(reason) from None


def resolve(pattern: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topics whose whole name matches ``pattern`` (an invalid pattern matches nothing, as Kafka
    logs and ignores one that slipped past validation)."""
    try:
        rx = compile_regex(pattern)
    except InvalidRegularExpression:
        return frozenset()
    return frozenset(n for n in topic_names if rx.fullmatch(n) is not None)
