"""A minimal raw Kafka client over groupd's own codec, for what real clients never send (or to read
a response field by field)."""

from __future__ import annotations

import socket
import struct
from typing import Any

from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER


class RawClient:
    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, api_name: str, version: int, body: dict[str, Any]) -> int:
        api = API_BY_NAME[api_name]
        self.corr += 1
        flexible = api.is_flexible(version)
        header = {"request_api_key": api.key, "request_api_version": version, "correlation_id": self.corr}
        header["client_id"] = "raw"
        payload = REQUEST_HEADER.codec(2 if flexible else 1).encode(header) + api.request.codec(version).encode(body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.corr

    def login_plain(self, user: str, password: str) -> None:
        """SASL/PLAIN (SaslHandshake v1 + SaslAuthenticate v2) on a SASL listener."""
        assert self.request("SaslHandshake", 1, {"mechanism": "PLAIN"})["error_code"] == 0
        auth = self.request("SaslAuthenticate", 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
        assert auth["error_code"] == 0, auth

    def send_raw(self, token: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(token)) + token)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._exact(4))[0]
        return self._exact(size)

    def request(self, api_name: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        corr = self.send(api_name, version, body)
        return self.receive(api_name, version, corr)

    def receive(self, api_name: str, version: int, corr: int | None = None) -> dict[str, Any]:
        """The next answer, decoded as ``api_name`` at ``version`` (of request ``corr``: default the last sent)."""
        api = API_BY_NAME[api_name]
        frame = self.recv_frame()
        assert struct.unpack(">i", frame[:4])[0] == (self.corr if corr is None else corr)
        pos = 4
        if api.is_flexible(version) and api.key != 18:
            pos += 1  # response header v1: empty tagged fields
        return api.response.codec(version).decode(frame, pos)  # type: ignore[no-any-return]

    def closed_by_peer(self, wait: float = 3.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by peer")
            buf += chunk
        return buf
