"""A one-member consumer group spoken in raw protocol with groupd's codec, heartbeating on its own
socket and timing every heartbeat round trip (what a real client's session depends on)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

from groupd.protocol.messages import API_BY_NAME

from bench.netfuzz import request

# consumer-protocol subscription v0 for topic "probe"
_SUBSCRIPTION = struct.pack(">hi", 0, 1) + struct.pack(">h", 5) + b"probe" + struct.pack(">i", -1)


class HeartbeatProbe:
    def __init__(
        self, host: str, port: int, group: str, session_timeout_ms: int = 10000, interval: float = 0.2
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=session_timeout_ms / 1000)
        self.group = group
        self.session_timeout_ms = session_timeout_ms
        self.interval = interval
        self.corr = 0
        self.latencies: list[float] = []
        self.errors: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="heartbeat-probe")

    def call(self, name: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        api = API_BY_NAME[name]
        self.corr += 1
        self.sock.sendall(request(api.key, version, api.request.codec(version).encode(body), self.corr))
        size = struct.unpack(">i", self._read(4))[0]
        payload = self._read(size)
        assert struct.unpack_from(">i", payload)[0] == self.corr
        return api.response.codec(version).decode(payload, 5 if api.is_flexible(version) else 4)

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("groupd closed the probe's connection")
            out += chunk
        return out

    def join(self) -> HeartbeatProbe:
        joined = self.call(
            "JoinGroup",
            3,
            {
                "group_id": self.group,
                "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.session_timeout_ms,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": _SUBSCRIPTION}],
            },
        )
        assert joined["error_code"] == 0, joined
        self.member_id, self.generation = joined["member_id"], joined["generation_id"]
        synced = self.call(
            "SyncGroup",
            2,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "assignments": [{"member_id": self.member_id, "assignment": b""}],
            },
        )
        assert synced["error_code"] == 0, synced
        self._thread.start()
        return self

    def _beat(self) -> None:
        body = {"group_id": self.group, "generation_id": self.generation, "member_id": self.member_id}
        while not self._stop.wait(self.interval):
            t0 = time.perf_counter()
            resp = self.call("Heartbeat", 2, body)
            self.latencies.append(time.perf_counter() - t0)
            if resp["error_code"]:
                self.errors.append(resp["error_code"])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sock.close()
