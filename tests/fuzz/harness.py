"""In-process fuzz target: bytes -> framing -> header/body decoding -> the real request handlers.

Theory of operation
-------------------
A real ``Broker`` (``groupd.broker.node``) is built on a temporary data directory, but its ``Server`` never
listens: each input gets a fresh ``Connection`` wired to a ``FakeTransport`` that records writes and
turns ``abort()`` into ``connection_lost``. The input is fed through ``Connection.data_received`` in
chunks (so frame splitting is exercised), the event loop is then run until the broker has nothing
left to do for this input (appends written, ready callbacks run), and the connection is dropped.

What counts as a crash (``FuzzCrash``):

- any exception escaping ``data_received`` (i.e. the dispatcher);
- a connection closed because a handler raised or a response could not be encoded
  (``"internal error while handling request"``, ``"response could not be encoded"``, ``"handler cancelled"``);
- an exception reaching the event loop's exception handler (a failed timer or task: e.g. the
  coordinator's deadline callback, which would leave every group without timers);
- any log event carrying a traceback (``log.exception``): the daemon caught a bug, not a bad input;
- an input that keeps the loop busy past ``HANG_SECONDS``.

Input format (so that a mutator can reach deep states without having to repair length prefixes):

``byte 0`` selects the mode (low 2 bits) and the chunking (the rest, a seed for chunk sizes);

- mode 0/2, *stream*: the remaining bytes are the TCP stream, size prefixes and all;
- mode 1, *body*: ``api index, version offset, body...``: the harness writes the size prefix and a
  valid request header for that (api, version) and appends the body bytes as they are;
- mode 3, *bodies*: a sequence of ``api index, version offset, u16 length, body`` records, each
  framed as in mode 1 and sent on the same connection (join, then sync, then heartbeat...).

The broker is rebuilt every ``RESET_EVERY`` inputs so that accumulated groups and topics do not make
later inputs slower and slower.
"""

from __future__ import annotations

import asyncio
import atexit
import random
import shutil
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog
from groupd.broker.node import Broker
from groupd.protocol.messages import API_BY_KEY
from groupd.protocol.server import Connection, Server
from groupd.storage import build_batch

from groupd.config import Config

HANG_SECONDS = 5.0
RESET_EVERY = 20_000
CLIENT_ID = b"fuzz"
CRASH_CLOSE_REASONS = ("internal error", "response could not be encoded", "handler cancelled")


class FuzzCrash(Exception):
    """The daemon misbehaved on this input (see the module docstring)."""


class FakeTransport(asyncio.Transport):
    """Enough of a transport for ``Connection``: records writes and reading/writing pauses."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.protocol: Connection | None = None
        self.written: list[bytes] = []
        self.written_bytes = 0
        self.reading = True
        self.closing = False
        self.buffer_size = 0  # what a test wants get_write_buffer_size() to report

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closing:
            return
        self.written.append(bytes(data))
        self.written_bytes += len(data)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def get_write_buffer_size(self) -> int:
        return self.buffer_size

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.close()

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        if self.protocol is not None:
            self.loop.call_soon(self.protocol.connection_lost, None)


class FuzzConnection(Connection):
    """A ``Connection`` that remembers why it was closed."""

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.close_reasons: list[str] = []

    def close(self, reason: str, **fields: Any) -> None:
        if not self.closed:
            self.close_reasons.append(reason)
        super().close(reason, **fields)


def _capture_errors(sink: list[str]) -> None:
    """structlog: keep the harness quiet and remember every event that carries a traceback."""

    def processor(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
        exc = event.get("exc_info")
        if exc:
            if exc is True:
                exc = sys.exc_info()
            tb = "".join(traceback.format_exception(*exc)) if isinstance(exc, tuple) else repr(exc)
            sink.append(f"{event.get('event')}: {tb}")
        raise structlog.DropEvent

    structlog.configure(
        processors=[processor],
        wrapper_class=structlog.make_filtering_bound_logger(0),
        cache_logger_on_first_use=False,
    )


# --- framing helpers -------------------------------------------------------------------------------

ROUTED_KEYS: list[int] = []  # filled by FuzzTarget from the dispatcher's routes (ApiVersions' order)


def request_header(api_key: int, version: int, correlation_id: int) -> bytes:
    api = API_BY_KEY[api_key]
    head = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    # Flexible versions use request header v2 (a tagged-field section), ApiVersions included.
    return head + b"\x00" if api.is_flexible(version) else head


def frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    payload = request_header(api_key, version, correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def _pick(keys: list[int], idx: int, voff: int) -> tuple[int, int]:
    api = API_BY_KEY[keys[idx % len(keys)]]
    span = api.max_version - api.min_version + 1
    # One value in 16 goes one past the top: unsupported versions are a path of their own.
    version = api.min_version + voff % (span + 1)
    return api.key, version


def decode_input(data: bytes, keys: list[int]) -> tuple[bytes, list[int]]:
    """The TCP stream an input stands for, and the chunk sizes to deliver it in."""
    if not data:
        return b"", []
    mode, chunk_seed = data[0] & 3, data[0] >> 2
    rest = data[1:]
    if mode == 1:
        if len(rest) < 2:
            stream = rest
        else:
            key, version = _pick(keys, rest[0], rest[1])
            stream = frame(key, version, rest[2:])
    elif mode == 3:
        parts = []
        pos, corr = 0, 1
        while pos + 4 <= len(rest) and len(parts) < 64:
            key, version = _pick(keys, rest[pos], rest[pos + 1])
            n = int.from_bytes(rest[pos + 2 : pos + 4], "big")
            body = rest[pos + 4 : pos + 4 + n]
            pos += 4 + n
            parts.append(frame(key, version, body, corr))
            corr += 1
        stream = b"".join(parts)
    else:
        stream = rest
    chunks: list[int] = []
    if chunk_seed and stream:
        rng = random.Random(chunk_seed)
        left = len(stream)
        while left > 0:
            n = min(left, rng.choice((1, 2, 3, 4, 5, 7, 13, 64, 1000)))
            chunks.append(n)
            left -= n
    else:
        chunks = [len(stream)] if stream else []
    return stream, chunks


# --- the target ------------------------------------------------------------------------------------


class FuzzTarget:
    def __init__(self, base_dir: str | None = None, reset_every: int = RESET_EVERY) -> None:
        self.errors: list[str] = []
        _capture_errors(self.errors)
        self.base_dir = Path(tempfile.mkdtemp(prefix="groupd-fuzz-", dir=base_dir or _fast_tmp()))
        # For processes that end without close() (not libFuzzer's, which skips atexit handlers).
        atexit.register(shutil.rmtree, self.base_dir, True)
        self.reset_every = reset_every
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.set_exception_handler(self._loop_exception)
        self.broker: Broker | None = None
        self.inputs = 0
        self.generation = 0
        self._start_broker()

    def _loop_exception(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.errors.append(f"loop: {context.get('message')}: {context.get('exception')!r}")

    def _start_broker(self) -> None:
        self.generation += 1
        data_dir = self.base_dir / f"gen{self.generation}"
        config = Config(
            data_dir=str(data_dir),
            port=9092,
            fsync="never",
            connections_max_idle_ms=0,
            log_retention_check_interval_ms=0,
        )
        broker = Broker(config)

        async def start() -> None:
            broker.topics.load()
            broker.logs.open_all()
            for p in range(50):
                broker._offsets_log(p)
            broker.data.start()
            broker.groups.begin_load(list(range(50)))
            await broker.groups.load(list(range(50)))

        self.loop.run_until_complete(start())
        self.broker = broker
        ROUTED_KEYS[:] = sorted(broker.dispatcher.routes)

    def _stop_broker(self) -> None:
        broker = self.broker
        if broker is None:
            return
        for conn in list(broker.server.connections):
            conn.close("fuzz reset")
        self._settle()
        self.broker = None

        async def stop() -> None:
            await broker.data.close()
            await broker.groups.drain()
            await broker.appender.close()

        self.loop.run_until_complete(stop())
        broker.logs.close()
        shutil.rmtree(broker.data_dir, ignore_errors=True)

    def close(self) -> None:
        self._stop_broker()
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def _busy(self) -> bool:
        assert self.broker is not None
        b = self.broker
        return bool(b.appender._tasks or b.groups._tasks or b.appender._drain_scheduled)

    def _settle(self) -> None:
        """Run the loop until the broker is idle for this input (or fail as a hang)."""
        deadline = time.monotonic() + HANG_SECONDS

        async def settle() -> None:
            for _ in range(3):
                await asyncio.sleep(0)
            while self._busy():
                if time.monotonic() > deadline:
                    raise FuzzCrash(f"hang: broker still busy after {HANG_SECONDS}s")
                await asyncio.sleep(0.0005 if self.broker and self.broker.appender._tasks else 0)
            for _ in range(2):
                await asyncio.sleep(0)

        self.loop.run_until_complete(settle())
        if time.monotonic() > deadline:
            raise FuzzCrash(f"hang: input took more than {HANG_SECONDS}s")

    def feed(self, stream: bytes, chunks: list[int]) -> FuzzConnection:
        """Deliver ``stream`` on a new connection in ``chunks``; returns the (open or closed) connection."""
        assert self.broker is not None
        conn = FuzzConnection(self.broker.server)
        transport = FakeTransport(self.loop)
        transport.protocol = conn

        async def deliver() -> None:
            # Inside a running loop, as uvloop calls data_received: handlers may create tasks.
            conn.connection_made(transport)
            pos = 0
            for n in chunks:
                if conn.closed:
                    break
                conn.data_received(stream[pos : pos + n])
                pos += n

        try:
            self.loop.run_until_complete(deliver())
        except Exception as e:
            raise FuzzCrash(f"exception escaped the dispatcher: {e!r}") from e
        self._settle()
        return conn

    def one_input(self, data: bytes) -> None:
        if self.broker is None or (self.inputs and self.inputs % self.reset_every == 0):
            self._stop_broker()
            self._start_broker()
        self.inputs += 1
        stream, chunks = decode_input(data, ROUTED_KEYS)
        self.errors.clear()
        conn = self.feed(stream, chunks)
        if not conn.closed:

            async def drop() -> None:
                conn.close("fuzz done")

            self.loop.run_until_complete(drop())
        self._settle()
        bad = [r for r in conn.close_reasons if r.startswith(CRASH_CLOSE_REASONS)]
        if bad or self.errors:
            raise FuzzCrash(f"close reasons {conn.close_reasons}, errors {self.errors}")


def _fast_tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


# --- seed corpus -----------------------------------------------------------------------------------


def _templates() -> dict[str, dict[str, Any]]:
    """Plausible request bodies per API (fields absent in a version are ignored by the encoder)."""
    sub = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # consumer-protocol subscription v1: topic "t"
    batch = build_batch([(b"k", b"v", (), 1_700_000_000_000)])
    group = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    return {
        "Produce": {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
        },
        "Fetch": {
            "max_wait_ms": 0,
            "min_bytes": 1,
            "topics": [
                {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
            ],
        },
        "ListOffsets": {
            "replica_id": -1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
        "Metadata": {"topics": [{"name": "t"}], "allow_auto_topic_creation": True},
        "OffsetCommit": {
            **group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
        },
        "OffsetFetch": {
            "group_id": "g",
            "topics": [{"name": "t", "partition_indexes": [0]}],
            "groups": [{"group_id": "g", "topics": None}],
        },
        "FindCoordinator": {"key": "g", "coordinator_keys": ["g"]},
        "JoinGroup": {
            "group_id": "g",
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": sub}],
        },
        "Heartbeat": group,
        "LeaveGroup": {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]},
        "SyncGroup": {**group, "assignments": [{"member_id": "m", "assignment": b"\x00\x01\x00\x00\x00\x00"}]},
        "DescribeGroups": {"groups": ["g"]},
        "ListGroups": {"states_filter": ["Stable"]},
        "ApiVersions": {"client_software_name": "fuzz", "client_software_version": "1"},
        "CreateTopics": {
            "topics": [
                {
                    "name": "t2",
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "configs": [{"name": "retention.ms", "value": "1000"}],
                }
            ],
            "timeout_ms": 1000,
        },
        "DeleteTopics": {"topic_names": ["t2"], "topics": [{"name": "t2"}]},
        "InitProducerId": {"transactional_id": None, "transaction_timeout_ms": 1000},
        "DeleteGroups": {"groups_names": ["g"]},
        "CreatePartitions": {"topics": [{"name": "t", "count": 3}], "timeout_ms": 1000},
        "OffsetDelete": {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
    }


def _encode(api_key: int, version: int, body: dict[str, Any]) -> bytes | None:
    try:
        return API_BY_KEY[api_key].request.codec(version).encode(body)
    except Exception:
        return None


def seed_corpus(keys: list[int]) -> Iterator[bytes]:
    """Valid requests of every routed (api, version), in each input mode."""
    templates = _templates()
    for idx, key in enumerate(keys):
        api = API_BY_KEY[key]
        for version in range(api.min_version, api.max_version + 1):
            voff = version - api.min_version
            for body in (templates.get(api.name, {}), {}):
                enc = _encode(key, version, body)
                if enc is None:
                    continue
                yield bytes([1, idx, voff]) + enc
                yield bytes([0]) + frame(key, version, enc)
                yield bytes([0b1000_0000]) + frame(key, version, enc)  # chunked delivery
    # A whole rebalance on one connection: Metadata (auto-create), join twice (member id required),
    # sync, heartbeat, commit, fetch offsets, leave.
    idx = {API_BY_KEY[k].name: i for i, k in enumerate(keys)}
    seq = []
    for name, version in (
        ("Metadata", 9),
        ("JoinGroup", 5),
        ("JoinGroup", 3),
        ("SyncGroup", 3),
        ("Heartbeat", 3),
        ("OffsetCommit", 7),
        ("OffsetFetch", 7),
        ("LeaveGroup", 3),
        ("Produce", 8),
        ("Fetch", 11),
    ):
        if name not in idx:
            continue
        key = keys[idx[name]]
        enc = _encode(key, version, templates[name])
        if enc is None:
            continue
        voff = version - API_BY_KEY[key].min_version
        seq.append(bytes([idx[name], voff]) + len(enc).to_bytes(2, "big") + enc)
    yield bytes([3]) + b"".join(seq)
    # Framing edge cases: zero, negative, huge and short size prefixes, a lone partial prefix.
    for raw in (b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x07abcdefg", b"\x00\x00"):
        yield bytes([0]) + raw


def mutate(data: bytes, rng: random.Random) -> bytes:
    """A few byte-level mutations of the kind libFuzzer makes, for the hypothesis-free short run."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[pos % len(b)] = rng.randrange(256)
        elif op == 1 and b:
            b[pos % len(b)] ^= 1 << rng.randrange(8)
        elif op == 2:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3 and b:
            del b[pos : pos + rng.randint(1, 8)]
        elif op == 4:
            filler = rng.choice(
                (b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x80\x80\x80\x80", b"\x00\x00", b"\x00\x00\x00\x00")
            )
            b[pos : pos + len(filler)] = filler
        elif op == 5 and len(b) > 2:
            b = b[: rng.randrange(1, len(b))]
        elif op == 6 and b:
            # an interesting integer at a random aligned spot
            width = rng.choice((2, 4))
            v = rng.choice((0, 1, -1, 255, 256, 0x7FFF, -0x8000) + ((0x7FFFFFFF, -0x80000000) if width == 4 else ()))
            b[pos : pos + width] = v.to_bytes(width, "big", signed=True)
    return bytes(b)
