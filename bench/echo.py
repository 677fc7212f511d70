"""The loopback limit: a minimal uvloop ``asyncio.Protocol`` server that answers every request frame
with a canned response of the same size (the request's correlation id, then zeros).

No decoding, no state: whatever a load costs here is the cost of the sockets, the event loop and the
client. A zero body decodes as "error_code 0" for Heartbeat, so the simulator can drive it like a
broker whose members are all stable.

    python -m bench.echo [--port 0]     # prints {"port": N} once listening; SIGTERM/SIGINT to stop
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys


class Echo(asyncio.Protocol):
    __slots__ = ("buf", "transport")
    _zeros: dict[int, bytes] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buf = bytearray()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        end = len(buf)
        out = []
        zeros = self._zeros
        while end - pos >= 12:
            size = int.from_bytes(buf[pos : pos + 4], "big")
            if end - pos - 4 < size:
                break
            z = zeros.get(size)
            if z is None:
                z = zeros[size] = bytes(size - 4)
            # size prefix + correlation id (bytes 8..12 of the request: after api key and version)
            out.append(bytes(buf[pos : pos + 4]) + bytes(buf[pos + 8 : pos + 12]) + z)
            pos += 4 + size
        if pos:
            del buf[:pos]
        if out:
            self.transport.write(b"".join(out))  # type: ignore[attr-defined]


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, host, port, reuse_address=True, backlog=1024)
    print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    import uvloop

    uvloop.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
