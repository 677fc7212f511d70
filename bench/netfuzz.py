"""Network fuzzer: many connections send random and mutated Kafka frames to a running groupd.

    python -m bench.netfuzz --bootstrap 127.0.0.1:9092 --pid <groupd pid> --frames 100000 --group

Each worker connection sends bursts of frames drawn from these kinds, reads whatever comes back,
and reconnects when the daemon closes it (which is the right answer to most of them):

- ``valid``: a request of a routed API at a supported version with a default body (answered);
- ``corrupt``: the same with 1-4 bytes of the body overwritten, cut short or extended;
- ``bad_version``: a known API at a version outside its range (negative too);
- ``unknown_api``: an api key nobody speaks;
- ``truncated``: a size prefix promising more than is sent before the next frame starts;
- ``huge``/``zero``/``negative``: size prefixes of 2**31-1, 0 and -1..-2**31;
- ``garbage``: random bytes.

With ``--group``, three confluent-kafka members (session timeout 10 s) consume a topic meanwhile;
the run fails if any of them sees an error, a revocation or a new assignment after the group
settled. With ``--pid`` the daemon's VmRSS is read before and after. Afterwards a fresh connection
must still get an ApiVersions answer. Prints one JSON line; exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from groupd.protocol.messages import API_BY_KEY, API_BY_NAME

KINDS = ("valid", "corrupt", "bad_version", "unknown_api", "truncated", "huge", "zero", "negative", "garbage")
WEIGHTS = (10, 40, 8, 6, 6, 3, 3, 3, 8)
# What a daemon routes (ApiVersions decides at run time); these keys are never routed.
UNKNOWN_KEYS = (-1, 4, 5, 6, 7, 17, 1000, 32767, -32768)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def request(api_key: int, version: int, body: bytes, correlation_id: int, client_id: bytes = b"netfuzz") -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    api = API_BY_KEY.get(api_key)
    if api is not None and api.supports(version) and api.is_flexible(version):
        head += b"\x00"
    payload = head + body
    return struct.pack(">i", len(payload)) + payload


class FrameSource:
    """Deterministic (per seed) stream of fuzz frames."""

    def __init__(self, routed: dict[int, tuple[int, int]], seed: int) -> None:
        self.rng = random.Random(seed)
        self.routed = routed
        self.keys = sorted(routed)
        self.bodies: dict[tuple[int, int], bytes] = {}
        for key, (lo, hi) in routed.items():
            api = API_BY_KEY.get(key)
            if api is None:
                continue
            for v in range(lo, hi + 1):
                with contextlib.suppress(Exception):
                    self.bodies[(key, v)] = api.request.codec(v).encode({})
        self.pairs = sorted(self.bodies)
        self.corr = 0

    def next(self) -> tuple[str, bytes]:
        rng = self.rng
        kind = rng.choices(KINDS, WEIGHTS)[0]
        self.corr += 1
        if kind in ("valid", "corrupt"):
            key, v = rng.choice(self.pairs)
            body = bytearray(self.bodies[(key, v)])
            if kind == "corrupt":
                for _ in range(rng.randint(1, 4)):
                    op = rng.randrange(4)
                    if op == 0 and body:
                        body[rng.randrange(len(body))] = rng.randrange(256)
                    elif op == 1 and body:
                        del body[rng.randrange(len(body)) :]
                    elif op == 2:
                        pos = rng.randrange(len(body) + 1)
                        body[pos:pos] = rng.choice((b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80" * 5, b"\x00"))
                    else:
                        body += rng.randbytes(rng.randint(1, 16))
            return kind, request(key, v, bytes(body), self.corr)
        if kind == "bad_version":
            key = rng.choice(self.keys)
            lo, hi = self.routed[key]
            v = rng.choice((hi + 1, hi + 5, lo - 1, -1, 32767, -32768))
            return kind, request(key, max(-32768, min(32767, v)), rng.randbytes(rng.randint(0, 32)), self.corr)
        if kind == "unknown_api":
            return kind, request(rng.choice(UNKNOWN_KEYS), rng.randint(0, 20), rng.randbytes(8), self.corr)
        if kind == "truncated":
            key, v = rng.choice(self.pairs)
            full = request(key, v, self.bodies[(key, v)] + rng.randbytes(8), self.corr)
            return kind, full[: rng.randint(1, len(full) - 1)]
        if kind == "huge":
            return kind, struct.pack(">i", rng.choice((2**31 - 1, 2**30, 200 * 1024 * 1024))) + rng.randbytes(16)
        if kind == "zero":
            return kind, b"\x00\x00\x00\x00"
        if kind == "negative":
            return kind, struct.pack(">i", rng.choice((-1, -(2**31), -12345)))
        return kind, rng.randbytes(rng.randint(1, 256))


@dataclass
class Stats:
    frames: int = 0
    connections: int = 0
    closed_by_daemon: int = 0
    bytes_received: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


async def api_versions(host: str, port: int, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """Ask ApiVersions v0 (every broker answers it) and return {api_key: (min, max)}."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(request(18, 0, b"", 7))
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout))[0]
        data = await asyncio.wait_for(reader.readexactly(size), timeout)
        body = API_BY_NAME["ApiVersions"].response.codec(0).decode(data, 4)
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    finally:
        writer.close()


async def _worker(
    host: str, port: int, source: FrameSource, budget: list[int], stats: Stats, rng: random.Random
) -> None:
    while budget[0] > 0:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        stats.connections += 1
        try:
            while budget[0] > 0:
                burst = []
                for _ in range(min(budget[0], rng.randint(1, 16))):
                    kind, data = source.next()
                    stats.by_kind[kind] = stats.by_kind.get(kind, 0) + 1
                    burst.append(data)
                budget[0] -= len(burst)
                stats.frames += len(burst)
                writer.write(b"".join(burst))
                await writer.drain()
                # Read what the daemon answers; EOF means it closed us (bad frame): reconnect.
                try:
                    data = await asyncio.wait_for(reader.read(65536), 0.02)
                except TimeoutError:
                    data = b"-"
                if not data:
                    stats.closed_by_daemon += 1
                    break
                stats.bytes_received += len(data) if data != b"-" else 0
                if rng.random() < 0.1:
                    break  # also hang up ourselves, mid-conversation
        except (ConnectionError, OSError):
            stats.closed_by_daemon += 1
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def fuzz(host: str, port: int, frames: int, connections: int, seed: int) -> Stats:
    routed = await api_versions(host, port)
    source = FrameSource(routed, seed)
    stats = Stats()
    budget = [frames]
    rng = random.Random(seed + 1)
    await asyncio.gather(*(_worker(host, port, source, budget, stats, rng) for _ in range(connections)))
    return stats


class GroupWatch:
    """Real confluent-kafka members that count every assignment change and error they see."""

    def __init__(self, bootstrap: str, topic: str, members: int = 3, session_timeout_ms: int = 10000) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = f"netfuzz-{uuid.uuid4().hex[:8]}"
        self.session_timeout_ms = session_timeout_ms
        self.events: list[str] = []
        self.errors: list[str] = []
        self.assignments: dict[int, set[tuple[str, int]]] = {}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(members)]

    def start(self) -> GroupWatch:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def _run(self, i: int) -> None:
        from confluent_kafka import Consumer

        def on_assign(_c: Any, parts: list[Any]) -> None:
            self.events.append(f"{i}:assign:{sorted(p.partition for p in parts)}")
            self.assignments[i] = {(p.topic, p.partition) for p in parts}

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            self.events.append(f"{i}:revoke:{sorted(p.partition for p in parts)}")

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "client.id": f"netfuzz-member-{i}",
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": 1000,
                "enable.auto.commit": False,
                "error_cb": lambda e: self.errors.append(f"{i}:{e}"),
            }
        )
        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self._stop.is_set():
                msg = c.poll(0.1)
                if msg is not None and msg.error():
                    self.errors.append(f"{i}:{msg.error()}")
        finally:
            c.close()

    def wait_settled(self, partitions: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            held = [tp for a in self.assignments.values() for tp in a]
            if len(self.assignments) == len(self._threads) and sorted(held) == [
                (self.topic, p) for p in range(partitions)
            ]:
                return
            time.sleep(0.1)
        raise RuntimeError(f"group did not settle: {self.events} {self.errors}")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=15)


def run(bootstrap: str, frames: int, connections: int, seed: int, pid: int | None, group: bool) -> dict[str, Any]:
    host, port_s = bootstrap.rsplit(":", 1)
    port = int(port_s)
    watch = None
    events_before: list[str] = []
    if group:
        topic = f"netfuzz-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 6)
        watch = GroupWatch(bootstrap, topic).start()
        watch.wait_settled(6)
        # Let the joins finish their last round before taking the baseline.
        time.sleep(2)
        events_before = list(watch.events)
    rss_before = rss_kb(pid) if pid else None
    t0 = time.perf_counter()
    stats = asyncio.run(fuzz(host, port, frames, connections, seed))
    elapsed = time.perf_counter() - t0
    rss_after = rss_kb(pid) if pid else None
    alive = bool(asyncio.run(api_versions(host, port)))
    result: dict[str, Any] = {
        "frames": stats.frames,
        "seconds": round(elapsed, 1),
        "frames_per_s": round(stats.frames / elapsed),
        "connections": stats.connections,
        "closed_by_daemon": stats.closed_by_daemon,
        "by_kind": stats.by_kind,
        "rss_kb_before": rss_before,
        "rss_kb_after": rss_after,
        "alive": alive,
    }
    if watch is not None:
        new_events = watch.events[len(events_before) :]
        result["group_events_during_fuzz"] = new_events
        result["group_errors"] = list(watch.errors)
        result["group_ok"] = not new_events and not watch.errors
        watch.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pid", type=int, help="groupd's pid, to read its VmRSS before and after")
    ap.add_argument("--group", action="store_true", help="run three real confluent-kafka members meanwhile")
    args = ap.parse_args(argv)
    result = run(args.bootstrap, args.frames, args.connections, args.seed, args.pid, args.group)
    print(json.dumps(result))
    return 0 if result["alive"] and result.get("group_ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
