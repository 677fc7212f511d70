"""Wiring: the server, the dispatcher, the topic registry, the coordinator shell and storage."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import structlog

from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.server import Server

from .admin_handlers import AdminHandlers
from .config import Config
from .topics import TopicRegistry

log = structlog.get_logger("groupd")


class Broker:
    """One groupd node: everything that lives as long as the process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self.topics = TopicRegistry(self.data_dir)
        self.dispatcher = Dispatcher()
        self.server = Server(
            self.dispatcher,
            max_request_bytes=config.max_request_bytes,
            max_connections=config.max_connections,
            idle_timeout_ms=config.connections_max_idle_ms,
        )
        self.port = config.port
        self.admin = AdminHandlers(config, self.topics, lambda: self.port)
        self._register()

    def _register(self) -> None:
        d, a = self.dispatcher, self.admin
        d.register(API_BY_NAME["Metadata"], a.metadata)
        d.register(API_BY_NAME["CreateTopics"], a.create_topics)
        d.register(API_BY_NAME["DeleteTopics"], a.delete_topics)
        d.register(API_BY_NAME["CreatePartitions"], a.create_partitions)

    async def start(self) -> None:
        t0 = time.perf_counter()
        self.topics.load()
        host, self.port = await self.server.start(self.config.host, self.config.port)
        log.info(
            "groupd_listening",
            listen=f"{host}:{self.port}",
            advertised=f"{self.config.advertised}:{self.port}",
            data_dir=str(self.data_dir.resolve()),
            cluster_id=self.topics.cluster_id,
            node_id=self.config.node_id,
            startup_ms=round((time.perf_counter() - t0) * 1000, 1),
        )

    async def stop(self) -> None:
        await self.server.close()
        log.info("groupd_stopped")


async def serve(config: Config, ready: asyncio.Event | None = None) -> None:
    broker = Broker(config)
    await broker.start()
    if ready is not None:
        ready.set()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("groupd_shutting_down")
    await broker.stop()


def run(config: Config) -> int:
    try:
        import uvloop

        uvloop.run(serve(config))
    except OSError as e:
        print(f"groupd: cannot start: {e}", file=sys.stderr)
        return 1
    return 0
