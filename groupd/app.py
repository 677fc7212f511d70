"""Wiring: the server, the dispatcher, the topic registry, the coordinator shell and storage."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from groupd.coordinator import HANDLED_APIS, CoordinatorConfig, GroupCoordinator, Node, PartitionOwnership
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.server import Server
from groupd.storage import Appender, LogConfig, LogManager, PartitionLog

from . import acl
from .admin_handlers import AdminHandlers
from .auth import Authenticator
from .config import Config
from .data_plane import DataPlane, topic_log_config
from .group_shell import GroupShell
from .listeners import Listener, advertise_per_listener, endpoint, parse_listeners, server_ssl_context
from .topics import OFFSETS_TOPIC, TopicRegistry

if TYPE_CHECKING:
    from .metrics import Metrics

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
            max_inflight=config.max_inflight_requests,
            max_inflight_bytes=config.max_inflight_bytes,
            max_write_buffer_bytes=config.max_write_buffer_bytes,
        )
        self.topics.max_partitions = config.max_partitions
        # Security: listeners, TLS, SASL and ACLs are all checked here, before anything starts.
        self.listeners: list[Listener] = parse_listeners(config)
        self.ssl_context = server_ssl_context(config) if any(li.tls for li in self.listeners) else None
        self.authenticator = Authenticator.from_config(
            config.users, config.sasl_mechanisms, config.connection_failed_authentication_delay_ms
        )
        self.authorizer = acl.Authorizer(config.acl)
        if any(li.tls or li.sasl for li in self.listeners) or self.authorizer.enabled:
            self.dispatcher.open_session = self.authenticator.open_session
        self.port = self.listeners[0].port
        self.admin = AdminHandlers(config, self.topics, lambda req: endpoint(req.conn.listener, self.listeners[0]))
        self.logs = LogManager(self.data_dir, self._log_config(), topic_config=self._topic_log_config)
        self.appender = Appender(config.fsync)
        self.core = GroupCoordinator(
            CoordinatorConfig(
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
                group_max_size=config.group_max_size,
                offsets_retention_minutes=config.offsets_retention_minutes,
                offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
                offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            ),
            ownership=self._ownership(),
            topic_partitions=self.topics.partition_count,
        )
        self.groups = GroupShell(self.core, self._offsets_log, self.appender)
        self.data = DataPlane(config, self.topics, self.logs, self.appender)
        self.data.register_topic_callbacks(self.admin)
        self._register()
        # Prometheus metrics: hooked into the parts above only when asked for (prometheus_client
        # is not even imported otherwise), so a daemon without them pays nothing.
        self.metrics: Metrics | None = None
        if config.metrics_port:
            from .metrics import Metrics

            self.metrics = Metrics()
            self.metrics.bind(
                dispatcher=self.dispatcher,
                server=self.server,
                core=self.core,
                shell=self.groups,
                appender=self.appender,
                data=self.data,
            )

    def _ownership(self) -> PartitionOwnership:
        # The core's node is the first listener's endpoint; FindCoordinator answers are rewritten
        # per listener (advertise_per_listener).
        host, port = endpoint(None, self.listeners[0])
        return PartitionOwnership(Node(self.config.node_id, host, port), 50)

    def _log_config(self) -> LogConfig:
        return LogConfig(segment_bytes=self.config.segment_bytes, segment_ms=self.config.segment_ms)

    def _topic_log_config(self, topic: str) -> LogConfig | None:
        if topic == OFFSETS_TOPIC:
            return LogConfig(
                segment_bytes=self.config.segment_bytes,
                segment_ms=self.config.segment_ms,
                cleanup_policy="compact",
                retention_ms=None,
                delete_retention_ms=self.config.delete_retention_ms,
            )
        t = self.topics.get(topic)
        return topic_log_config(self._log_config(), t.configs) if t is not None else None

    def _offsets_log(self, partition: int) -> PartitionLog:
        return self.logs.get_or_create(OFFSETS_TOPIC, partition)

    def _register(self) -> None:
        d, a = self.dispatcher, self.admin
        d.register(API_BY_NAME["Metadata"], a.metadata)
        d.register(API_BY_NAME["CreateTopics"], a.create_topics)
        d.register(API_BY_NAME["DeleteTopics"], a.delete_topics)
        d.register(API_BY_NAME["CreatePartitions"], a.create_partitions)
        for name in HANDLED_APIS:
            d.register(API_BY_NAME[name], self.groups.handler(name))
        for name, handler, (lo, hi) in self.data.handlers():
            d.register(API_BY_NAME[name], handler, min_version=lo, max_version=hi)
        # Advertised on every listener, as Kafka does; on a listener without SASL they answer
        # ILLEGAL_SASL_STATE.
        d.register(API_BY_NAME["SaslHandshake"], self.authenticator.handshake)
        d.register(API_BY_NAME["SaslAuthenticate"], self.authenticator.authenticate)
        advertise_per_listener(d, self.config.node_id, self.listeners[0])
        if self.authorizer.enabled:
            acl.install(d, self.authorizer, self._topic_name_for_id)

    def _topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        t = self.topics.by_id(topic_id)
        return t.name if t is not None else None

    async def start(self) -> None:
        t0 = time.perf_counter()
        self.topics.load()
        self.logs.open_all()
        partitions = list(range(50))
        for p in partitions:
            self._offsets_log(p)
        self.data.start()
        # Groups answer COORDINATOR_LOAD_IN_PROGRESS until their partition is replayed; the server
        # listens straight away, as a Kafka broker does while it loads __consumer_offsets.
        self.groups.begin_load(partitions)
        if self.metrics is not None:  # before the listeners, so the whole replay can be watched
            await self.metrics.start(self.config.metrics_listen_host, self.config.metrics_port)
        for li in self.listeners:
            _host, li.port = await self.server.start(
                li.host, li.port, ssl=self.ssl_context if li.tls else None, listener=li
            )
        first = self.listeners[0]
        self.port = first.port
        self.core.ownership = self._ownership()
        self._load_task = asyncio.create_task(self.groups.load(partitions))
        if any(li.sasl for li in self.listeners) and not len(self.authenticator.store):
            log.warning("sasl_without_users", hint="add [users.<name>] entries (groupd scram-credential)")
        log.info(
            "groupd_listening",
            listen=f"{first.host}:{first.port}",
            listeners=[str(li) for li in self.listeners],
            advertised=f"{first.advertised_host}:{first.port}",
            data_dir=str(self.data_dir.resolve()),
            cluster_id=self.topics.cluster_id,
            node_id=self.config.node_id,
            startup_ms=round((time.perf_counter() - t0) * 1000, 1),
        )

    async def stop(self) -> None:
        if self.metrics is not None:
            await self.metrics.close()
        await self.server.close()
        await self.data.close()
        await self.groups.drain()
        await self.appender.close()
        self.logs.close()
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


def _raise_fd_limit() -> None:
    """Every connection and every partition (3 files) is a file descriptor; the usual soft limit of
    1024 would refuse connections long before --max-connections or --max-partitions do."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.debug("fd_limit_raised", soft=soft, now=target)
    except (ImportError, ValueError, OSError):
        pass  # not fatal: the limits still answer errors, just sooner


class _GcTuner:
    """Keep full collections from pausing the loop for O(heap).

    CPython 3.11 runs a full (generation 2) collection whenever the objects promoted since the last
    one exceed a quarter of the old generation; each goes over every tracked object: with 100,000
    members held that is 300-400 ms during which no heartbeat is answered. The old generation is the
    members, groups and connections, which live for minutes and are almost never cyclic garbage
    (full collections in the soak collect nothing). So after each full collection its survivors are
    frozen (gc.freeze: moved to the permanent generation, still freed by reference counting, never
    scanned again), and the next one only goes over what came since. Cyclic garbage among frozen
    objects would stay: every ``full_every_s`` the permanent generation is unfrozen, so one full
    collection a while goes over the whole heap again.
    """

    def __init__(self, full_every_s: float = 600.0, threshold0: int = 5_000) -> None:
        self.full_every_s = full_every_s
        self.threshold0 = threshold0
        self.last_full = time.monotonic()

    def install(self) -> None:
        import gc

        _t0, t1, t2 = gc.get_threshold()
        gc.set_threshold(self.threshold0, t1, t2)  # fewer young collections; each is still small
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        import gc

        if phase != "stop" or info["generation"] != 2:
            return
        # Only list moves from here on (no allocation), safe inside a collection callback.
        now = time.monotonic()
        if now - self.last_full >= self.full_every_s:
            self.last_full = now
            gc.unfreeze()  # the next full collection goes over the whole heap
        else:
            gc.freeze()


def run(config: Config) -> int:
    _raise_fd_limit()
    _GcTuner().install()
    try:
        import uvloop

        uvloop.run(serve(config))
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError; bad listeners/users/acl are ValueErrors
        print(f"groupd: cannot start: {e}", file=sys.stderr)
        return 1
    return 0
