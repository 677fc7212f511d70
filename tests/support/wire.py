"""Raw Kafka requests over a plain socket, pipelined: several requests leave before any answer is
read, which ``BrokerConnection`` (one request at a time) cannot do. Encoded and decoded with
groupd's codec; answers are matched to their request by correlation id."""

from __future__ import annotations

import socket
import struct
from typing import Any

from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER

INT32_MAX = 2**31 - 1


def fetch_body(
    topic: str,
    partitions: int = 1,
    *,
    max_wait_ms: int = INT32_MAX,
    min_bytes: int = INT32_MAX,
    max_bytes: int = 1 << 20,
) -> dict[str, Any]:
    """A Fetch of ``partitions`` partitions of ``topic`` from offset 0 (by default one that parks:
    it waits for more bytes than will ever come, as long as Kafka allows)."""
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                    for p in range(partitions)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def request_frame(name: str, version: int, body: dict[str, Any], correlation_id: int, client_id: str = "wire") -> bytes:
    api = API_BY_NAME[name]
    header = REQUEST_HEADER.codec(2 if api.is_flexible(version) else 1).encode(
        {
            "request_api_key": api.key,
            "request_api_version": version,
            "correlation_id": correlation_id,
            "client_id": client_id,
        }
    )
    payload = header + api.request.codec(version).encode(body)
    return struct.pack(">i", len(payload)) + payload


class Wire:
    def __init__(self, port: int, *, timeout: float = 10.0, client_id: str = "wire") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._corr = 0
        self._sent: dict[int, tuple[str, int]] = {}

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def frame(self, name: str, version: int, body: dict[str, Any]) -> bytes:
        """The framed request, remembered so that ``read`` decodes its answer."""
        self._corr += 1
        self._sent[self._corr] = (name, version)
        return request_frame(name, version, body, self._corr, self.client_id)

    def pipeline(self, *requests: tuple[str, int, dict[str, Any]]) -> None:
        """Send every request in one write, before reading anything."""
        self.sock.sendall(b"".join(self.frame(*r) for r in requests))

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        self.pipeline(
            (
                "CreateTopics",
                4,
                {
                    "topics": [
                        {
                            "name": topic,
                            "num_partitions": partitions,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout_ms": 10_000,
                    "validate_only": False,
                },
            )
        )
        _, created = self.read()
        assert created["topics"][0]["error_code"] == 0, created

    def read(self) -> tuple[str, dict[str, Any]]:
        """The next answer: the name of the API it answers and its decoded body."""
        (size,) = struct.unpack(">i", self._recv_exact(4))
        payload = self._recv_exact(size)
        (corr,) = struct.unpack_from(">i", payload)
        name, version = self._sent.pop(corr)
        api = API_BY_NAME[name]
        # Response header v1 (a tagged-field section) in flexible versions, but ApiVersions' (KIP-511).
        pos = 5 if api.is_flexible(version) and name != "ApiVersions" else 4
        return name, api.response.codec(version).decode(payload, pos)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            buf += chunk
        return bytes(buf)
