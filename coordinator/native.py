"""OffsetCommit's fast path: the request decoded once, in C, and answered from its bytes (issue 26).

A consumer commits its whole assignment in every OffsetCommit: a hundred partitions, each a dict
from the generic decoder, a pass of ``OffsetManager.commit``, two record objects, their bytes, a
record frame, a replay and a response entry (~5 us each in Python). ``groupd.coordinator._native``
(``_native.c``) does that per-partition loop; what it hands back to Python is one object per
request, not one per partition:

- :func:`parse_body` (the dispatcher's decoder of OffsetCommit requests) checks the request body in
  C and makes a :class:`CommitBody`: a dict with the top-level fields, whose ``topics`` are decoded
  by the generic decoder only if something reads them (the ACL wrapper, a test, a log line).
  Anything the C walk does not take (tagged fields, a null array, bad UTF-8, truncation) is the
  generic decoder's, which decides as it always did (closing the connection for a bad request).
- ``OffsetManager.commit`` hands such a body to :func:`build` with the group check as a callback
  and gets the response's bytes, the commit's record batch and the ``((topic, partition), value)``
  pairs that ``OffsetManager.replay_commit`` folds into the offsets map once the batch is durable.
- The answer is a :class:`CommitResponse`: the encoded body (the dispatcher sends it as it is) and
  a dict for whoever reads it (decoded on demand).
- :func:`steady_commit` is the shell's short path to the same build (``GroupShell.handler``): no
  ``GroupCoordinator.handle``/``append_done`` round and no Result on either side of the append,
  the same checks, records, answers and state (tests/coordinator/test_steady_commit.py).

The Python path stays the reference and the fallback (no compiler, ``GROUPD_NO_NATIVE=1``, a body
that did not come from the wire): tests/coordinator/test_native_commit.py checks the two agree
byte for byte.
"""

from __future__ import annotations

import importlib
import os
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

from ..protocol.lazy_dict import LazyDict
from ..protocol.messages.offsets import OFFSET_COMMIT
from .errors import append_error_to_response_error
from .records import OffsetCommitValue
from .runtime import PendingAppend

try:
    if os.environ.get("GROUPD_NO_NATIVE") == "1":  # read once, at import
        raise ImportError("GROUPD_NO_NATIVE=1")
    # by name: ``from . import _native`` would import the package (an import cycle for test_layout)
    _native: Any = importlib.import_module(__name__.rpartition(".")[0] + "._native")
except ImportError:
    _native = None

__all__ = [
    "CommitBody",
    "CommitResponse",
    "available",
    "build",
    "commit",
    "native_available",
    "native_commit",
    "parse_body_for",
    "steady_commit",
]

_TOPICS = "topics"
_OK_POSITIONS = struct.Struct("=I")
_dict_contains = dict.__contains__
_dict_get = dict.get
# topic -> its (topic, partition) keys by partition index, shared by every commit (``_native.c``)
_KEY_CACHE: dict[str, list[Any]] = {}


def available() -> bool:
    """Whether the C module is built and not disabled (``GROUPD_NO_NATIVE=1``)."""
    return _native is not None


class _Lazy(LazyDict):
    """A dict whose ``topics`` entry is decoded from bytes the first time anything reads it (or
    anything that reads every key: iteration, equality, ``repr``). The rest is a plain dict."""

    __slots__ = ()
    LAZY = _TOPICS

    def _fill(self) -> None:
        dict.__setitem__(self, _TOPICS, self._decode_topics())  # type: ignore[attr-defined]


class CommitBody(_Lazy):
    """An OffsetCommit request body checked by the C walk: the top-level fields as the generic
    decoder names them, ``topics`` decoded by it on first read. ``native`` is the commit path's
    way in (None once ``topics`` was decoded or replaced: then the body is an ordinary dict)."""

    __slots__ = ("frame", "pos", "topic_count", "topics_pos", "version")

    def __init__(
        self, fields: dict[str, Any], frame: bytes, pos: int, topics_pos: int, topic_count: int, version: int
    ) -> None:
        dict.__init__(self, fields)
        self.frame = frame
        self.pos = pos
        self.topics_pos = topics_pos
        self.topic_count = topic_count
        self.version = version

    def _decode_topics(self) -> Any:
        return OFFSET_COMMIT.request.codec(self.version).parse_at(self.frame, self.pos)[0][_TOPICS]

    @property
    def native(self) -> bool:
        """Whether the topics are still only bytes (the C path may take them)."""
        return not _dict_contains(self, _TOPICS)


class CommitResponse(_Lazy):
    """An OffsetCommit response built by the C path: ``payload`` is its encoded body (the
    dispatcher sends it as it is: ``wire_payload``), the dict view is decoded from it on demand."""

    __slots__ = ("ok_positions", "payload", "version")

    def __init__(self, payload: bytes, ok_positions: bytes, version: int) -> None:
        dict.__init__(self, {"throttle_time_ms": 0})  # as the Python path answers (v0-2 send none)
        self.payload = payload
        self.ok_positions = ok_positions
        self.version = version

    @property
    def wire_payload(self) -> bytes | None:
        # A dict view someone changed is no longer what the bytes say: the codec encodes it then.
        return self.payload if not _dict_contains(self, _TOPICS) else None

    def _decode_topics(self) -> Any:
        return OFFSET_COMMIT.response.codec(self.version).parse_at(self.payload, 0)[0][_TOPICS]

    def fail(self, code: int) -> None:
        """Every partition the commit wrote gets ``code`` (the append failed)."""
        if _dict_contains(self, _TOPICS):
            dict.__delitem__(self, _TOPICS)
        data = bytearray(self.payload)
        pack = struct.Struct(">h").pack_into
        for (at,) in _OK_POSITIONS.iter_unpack(self.ok_positions):
            pack(data, at, code)
        self.payload = bytes(data)


def parse_body_for(version: int) -> Callable[[bytes, int], tuple[dict[str, Any], int]] | None:
    """The dispatcher's decoder of OffsetCommit ``version`` request bodies (None: the generic one)."""
    if _native is None:
        return None
    generic = OFFSET_COMMIT.request.codec(version).parse_at
    parse = _native.parse_commit

    def parse_body(frame: bytes, pos: int) -> tuple[dict[str, Any], int]:
        walked = parse(frame, pos, version)
        if walked is None:
            return generic(frame, pos)
        end, group_id, generation, member_id, instance_id, retention, topics_pos, topic_count = walked
        fields: dict[str, Any] = {"group_id": group_id}
        if version >= 1:
            fields["generation_id_or_member_epoch"] = generation
            fields["member_id"] = member_id
        if version >= 7:
            fields["group_instance_id"] = instance_id
        if 2 <= version <= 4:
            fields["retention_time_ms"] = retention
        return CommitBody(fields, frame, pos, topics_pos, topic_count, version), end

    return parse_body


def partition_table(topic_partitions: Callable[[str], int | None] | None) -> Any:
    """What :func:`build` passes to C for ``topic_partitions``: the registry's table itself when
    the callable says it only reads one (``TopicRegistry.partition_count.reads_table``: the name of
    its owner's dict of topics, each with an int ``partitions``), so that C looks each topic up
    without a Python call per topic (6% of a 50-committer load's samples); else the callable."""
    attr = getattr(topic_partitions, "reads_table", None)
    if attr is not None:
        table = getattr(getattr(topic_partitions, "__self__", None), attr, None)
        if type(table) is dict:
            return table
    return topic_partitions


def build(
    body: CommitBody,
    topic_partitions: Callable[[str], int | None] | dict[str, Any] | None,
    validate: Callable[[], int],
    group_id: str,
    max_metadata: int,
    now: int,
    value_type: type,
) -> tuple[int, CommitResponse, bytes | None, dict[tuple[str, int], Any]] | None:
    """OffsetMetadataManager.commitOffset's per-partition part in C (see ``_native.c``): the
    group's error code (``validate()``, called where the Python path calls it), the response,
    the record batch (None: nothing to write) and the ``{(topic, partition): value}`` to fold; None when the Python path
    must do it (a string too long for the records' 2-byte lengths)."""
    assert _native is not None
    out = _native.build_commit(
        body.frame,
        body.topics_pos,
        body.topic_count,
        body.version,
        topic_partitions,
        validate,
        group_id,
        max_metadata,
        now,
        value_type,
        _KEY_CACHE,
    )
    if out is None:
        return None
    code, payload, ok_positions, batch, entries = out
    return code, CommitResponse(payload, ok_positions, body.version), batch, entries


def commit(
    m: Any,
    v: int,
    req: CommitBody,
    ctx: Any,
    gid: str,
    generation: int,
    member_id: str,
    instance_id: str | None,
) -> bool:
    """``OffsetManager.commit`` (``m``) of a body whose partitions are still bytes: the group check
    is ``m``'s, called where the Python path calls it, the rest is :func:`build`'s. The batch is
    appended as it is; until durable the commit's entries count as in flight for the group, then
    ``append_done`` hands them to ``m.replay_commit``. False: the Python path must do it."""

    built = build(
        req,
        partition_table(m.topic_partitions),
        # a partial, not a closure: no Python frame of its own, no cells for the names it holds
        partial(m._commit_group_error, v, gid, generation, member_id, instance_id),
        gid,
        m.config.offset_metadata_max_bytes,
        m.rt.now,
        OffsetCommitValue,
    )
    if built is None:
        return False
    _code, response, batch, entries = built
    if batch is None:
        m.rt.respond(ctx, response)
        return True
    if m.classic.debug_enabled():  # README: --log-level debug shows every commit
        m.log.debug("offset_commit", group=gid, member=member_id, generation=generation, partitions=len(entries))
    m._write_seq = n = m._write_seq + 1
    writing = m.inflight.get(gid)
    if writing is None:
        writing = m.inflight[gid] = {}
    writing[n] = entries

    def done(error: int | None) -> None:
        w = m.inflight.get(gid)
        if w is not None:
            w.pop(n, None)
            if not w:
                del m.inflight[gid]
        if error is not None:
            response.fail(append_error_to_response_error(error))
        m.rt.respond(ctx, response)

    m.rt.append(m.partition_for(gid), entries, done, batch=batch, native_group=gid)
    return True


ANSWERED = ()  # steady_commit: the request is answered and there is nothing to write


def steady_commit(
    m: Any, v: int, req: CommitBody, ctx: Any
) -> tuple[int, int, bytes, Callable[[], None]] | tuple[()] | None:
    """The shell's short path of an OffsetCommit whose partitions are still bytes (issue 26): what
    ``GroupCoordinator.handle`` -> ``OffsetManager.commit`` -> :func:`commit` do, without the
    Result that carries the answer and the append to the shell, and with the ``finish`` that
    ``GroupCoordinator.append_done`` -> ``replay_commit`` -> ``done`` -> Result would do once the
    batch is durable. The caller has called ``GroupCoordinator.enter`` (now, receiving broker).

    Every check is the general path's: the group check is ``m._commit_group_error`` (Kafka's
    ``OffsetMetadataManager.validateOffsetCommit``, every error code), called from C where
    ``OffsetManager.commit`` calls it, each partition's code from C as there. Returns
    ``ANSWERED`` (answered: nothing to write, e.g. a group error on every partition), or
    ``(token, partition, batch, finish)``: the append registered with the runtime under
    ``token`` (an unload fails it as any other: ``done`` answers through the Result then), the
    shell to queue ``batch`` and call ``finish()`` once it is durable, or
    ``GroupCoordinator.append_done`` in every other outcome (a failure, a token the runtime
    no longer holds). None: nothing was done, the general path must take the request (a
    retention time, or a string too long for C: the general path then checks the group again,
    as it does today when ``commit`` declines)."""
    get = _dict_get
    if 2 <= v <= 4 and get(req, "retention_time_ms", -1) != -1:
        return None
    gid = get(req, "group_id") or ""
    generation = get(req, "generation_id_or_member_epoch", -1) if v >= 1 else -1
    member_id = (get(req, "member_id") or "") if v >= 1 else ""
    instance_id = get(req, "group_instance_id") if v >= 7 else None
    rt = m.rt
    built = build(
        req,
        partition_table(m.topic_partitions),
        partial(m._commit_group_error, v, gid, generation, member_id, instance_id),
        gid,
        m.config.offset_metadata_max_bytes,
        rt.now,
        OffsetCommitValue,
    )
    if built is None:
        return None
    _code, response, batch, entries = built
    if batch is None:
        ctx.respond(response)
        return ANSWERED
    if m.classic.debug_enabled():  # README: --log-level debug shows every commit
        m.log.debug("offset_commit", group=gid, member=member_id, generation=generation, partitions=len(entries))
    m._write_seq = n = m._write_seq + 1
    inflight = m.inflight
    writing = inflight.get(gid)
    if writing is None:
        writing = inflight[gid] = {}
    writing[n] = entries

    def done(error: int | None) -> None:
        # The general outcome (GroupCoordinator.append_done, an unload's fail_appends): answered
        # through the Result of that call, as :func:`commit`'s ``done``.
        w = inflight.get(gid)
        if w is not None:
            w.pop(n, None)
            if not w:
                del inflight[gid]
        if error is not None:
            response.fail(append_error_to_response_error(error))
        rt.respond(ctx, response)

    def finish() -> None:
        # Durable: append_done's replay_commit and done(None), answered at once.
        m.replay_commit(gid, entries)
        w = inflight.get(gid)
        if w is not None:
            w.pop(n, None)
            if not w:
                del inflight[gid]
        ctx.respond(response)

    token = rt.next_token
    rt.next_token = token + 1
    partition = m.partition_for(gid)
    rt.pending[token] = PendingAppend(token, partition, entries, done, {"batch": batch, "native_group": gid})
    return token, partition, batch, finish


# under these names where the module is imported from (``from .native import ...``)
native_available = available
native_commit = commit
