"""The embedded consumer protocol: what ``consumer``-type members put in JoinGroup metadata and
SyncGroup assignments (Kafka's ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``).

Kafka's non-flexible big-endian format: an int16 version, then the fields of that version. A newer
version than we know is read as the newest known one, ignoring trailing bytes -- exactly what
Kafka's ``ConsumerProtocol.deserialize*`` does, so newer clients keep working.

Written with ``struct`` rather than the wire codec on purpose: the coordinator knows nothing of
the codec (design.md layout table), and this format is small and frozen.

Public: DescribeGroups tooling and the pipeline decode member metadata with it.
"""

from __future__ import annotations

import struct
from dataclasses import field

from groupd.protocol.frozen import frozen_record

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

SUBSCRIPTION_HIGHEST_VERSION = 3
ASSIGNMENT_HIGHEST_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """The bytes are not a consumer-protocol structure (Kafka's SchemaException)."""


@frozen_record
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]

    def __init__(self, topic: str, partitions: tuple[int, ...]) -> None:
        _set(self, "topic", topic)
        _set(self, "partitions", partitions)


@frozen_record
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_HIGHEST_VERSION

    def __init__(
        self,
        topics: tuple[str, ...],
        user_data: bytes | None = None,
        owned_partitions: tuple[TopicPartitions, ...] = (),
        generation_id: int = -1,
        rack_id: str | None = None,
        version: int = SUBSCRIPTION_HIGHEST_VERSION,
    ) -> None:
        _set(self, "topics", topics)
        _set(self, "user_data", user_data)
        _set(self, "owned_partitions", owned_partitions)
        _set(self, "generation_id", generation_id)
        _set(self, "rack_id", rack_id)
        _set(self, "version", version)


@frozen_record
class Assignment:
    assigned_partitions: tuple[TopicPartitions, ...] = field(default_factory=tuple)
    user_data: bytes | None = None
    version: int = ASSIGNMENT_HIGHEST_VERSION

    def __init__(
        self,
        assigned_partitions: tuple[TopicPartitions, ...] = (),
        user_data: bytes | None = None,
        version: int = ASSIGNMENT_HIGHEST_VERSION,
    ) -> None:
        _set(self, "assigned_partitions", assigned_partitions)
        _set(self, "user_data", user_data)
        _set(self, "version", version)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ConsumerProtocolError(f"truncated: need {n} bytes at offset {self.pos}, have {len(self.buf)}")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConsumerProtocolError(f"bad utf-8 string: {e}") from e

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise ConsumerProtocolError("null where a string is required")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n == -1 else bytes(self._take(n))

    def array_len(self) -> int:
        n = self.int32()
        if n < 0:
            raise ConsumerProtocolError("null array")
        # Each element takes at least one byte, so a count beyond the remaining bytes is a lie:
        # refusing it early keeps a hostile 2**31 count from allocating anything.
        if n > len(self.buf) - self.pos:
            raise ConsumerProtocolError(f"array of {n} elements cannot fit in {len(self.buf) - self.pos} bytes")
        return n

    def topic_partitions(self) -> tuple[TopicPartitions, ...]:
        out = []
        for _ in range(self.array_len()):
            topic = self.string()
            parts = tuple(self.int32() for _ in range(self.array_len()))
            out.append(TopicPartitions(topic, parts))
        return tuple(out)


def _version(r: _Reader) -> int:
    v = r.int16()
    if v < 0:
        raise ConsumerProtocolError(f"unsupported version {v}")
    return v


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = _version(r)
    v = min(version, SUBSCRIPTION_HIGHEST_VERSION)
    topics = tuple(r.string() for _ in range(r.array_len()))
    user_data = r.nullable_bytes()
    owned: tuple[TopicPartitions, ...] = ()
    generation_id = -1
    rack_id = None
    if v >= 1:
        owned = r.topic_partitions()
    if v >= 2:
        generation_id = r.int32()
    if v >= 3:
        rack_id = r.nullable_string()
    return Subscription(topics, user_data, owned, generation_id, rack_id, version)


def decode_assignment(data: bytes) -> Assignment:
    r = _Reader(data)
    version = _version(r)
    partitions = r.topic_partitions()
    user_data = r.nullable_bytes()
    return Assignment(partitions, user_data, version)


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + b


def _topic_partitions(tps: tuple[TopicPartitions, ...] | list[TopicPartitions]) -> bytes:
    out = [_I32.pack(len(tps))]
    for tp in tps:
        out.append(_string(tp.topic))
        out.append(_I32.pack(len(tp.partitions)))
        out.extend(_I32.pack(p) for p in tp.partitions)
    return b"".join(out)


def encode_subscription(sub: Subscription) -> bytes:
    v = sub.version
    out = [_I16.pack(v), _I32.pack(len(sub.topics))]
    out.extend(_string(t) for t in sub.topics)
    out.append(_bytes(sub.user_data))
    if v >= 1:
        out.append(_topic_partitions(sub.owned_partitions))
    if v >= 2:
        out.append(_I32.pack(sub.generation_id))
    if v >= 3:
        out.append(_string(sub.rack_id))
    return b"".join(out)


def encode_assignment(a: Assignment) -> bytes:
    return _I16.pack(a.version) + _topic_partitions(a.assigned_partitions) + _bytes(a.user_data)


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of a subscription, read with the v0 prefix every version shares (as Kafka does)."""
    r = _Reader(metadata)
    _version(r)
    return {r.string() for _ in range(r.array_len())}
