"""The daemon process: one node (``groupd.broker.node.Broker``) with what a long-lived process needs
around it -- signals, the file-descriptor limit, a GC that does not pause the loop for the whole
heap, and the metrics endpoint and the dashboard when asked for."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import re
import signal
import sys
import time
from pathlib import Path

import structlog

from groupd.broker.node import Broker
from groupd.broker.settings import Config
from groupd.protocol import ratelimit
from groupd.storage import StorageError
from groupd.storage.manager import LOCK_FILE

log = structlog.get_logger("groupd")


def attach_metrics(broker: Broker) -> None:
    """Prometheus metrics hooked into the node's parts; prometheus_client is imported only when
    ``--metrics-port`` asks for it, so a daemon without metrics pays nothing."""
    from groupd import __version__
    from groupd.ops.metrics import Metrics

    config = broker.config
    metrics = Metrics(version=__version__, max_groups=config.metrics_max_groups)
    metrics.bind(
        dispatcher=broker.dispatcher,
        server=broker.server,
        core=broker.core,
        shell=broker.groups,
        appender=broker.appender,
        data=broker.data,
        logs=broker.logs,
        faults=broker.faults,
        txns=broker.txns,
        share=broker.share_partitions,
    )
    if broker.cluster is not None:
        # One process, one gauge: the connections of every broker of the cluster.
        servers = [node.server for node in broker.cluster.nodes.values()]

        def connections_changed(_n: int) -> None:
            metrics.connections.set(sum(len(s.connections) for s in servers))

        for server in servers:
            server.on_connection_change = connections_changed

    async def start() -> None:
        await metrics.start(config.metrics_listen_host, config.metrics_port)

    broker.before_listen.append(start)
    broker.before_stop.append(metrics.close)


def attach_dashboard(broker: Broker) -> None:
    """The live dashboard (``--dashboard-port``). Attached after the metrics: it becomes the core's
    listener and passes every event on to theirs."""
    from groupd.ops.dashboard import Dashboard

    config = broker.config
    dashboard = Dashboard(
        broker.core, topics=broker.topics, logs=broker.logs, cluster=broker.cluster, share=broker.share_partitions
    )
    dashboard.bind(dispatcher=broker.dispatcher)

    async def start() -> None:
        host, port = await dashboard.start(config.dashboard_listen_host, config.dashboard_port)
        broker.listening_fields["dashboard"] = f"http://{host}:{port}/"

    broker.before_listen.append(start)
    broker.before_stop.append(dashboard.close)


def attach_control(broker: Broker) -> None:
    """The fault-injection control endpoint (``--control-port``)."""
    from groupd.ops.control import Control

    config = broker.config
    control = Control(broker)

    async def start() -> None:
        host, port = await control.start(config.control_listen_host, config.control_port)
        broker.listening_fields["control"] = f"http://{host}:{port}/"

    broker.before_listen.append(start)
    broker.before_stop.append(control.close)


async def serve(config: Config, ready: asyncio.Event | None = None) -> None:
    broker = Broker(config)
    if config.metrics_port:
        attach_metrics(broker)
    if config.dashboard_port >= 0:
        attach_dashboard(broker)
    if config.control_port >= 0:
        attach_control(broker)
    await broker.start()
    watcher = asyncio.create_task(watch_fd_limit(broker))
    if ready is not None:
        ready.set()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("groupd_shutting_down")
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    await broker.stop()
    ratelimit.flush_all()  # the counts of rate-limited events not reported yet


async def watch_fd_limit(broker: Broker, every_s: float = 1.0) -> None:
    """Log running out of file descriptors, which the accept loop does silently.

    At EMFILE, libuv (uvloop's accept loop) closes its reserve descriptor, accepts every waiting
    connection and closes it at once (``uv__emfile_trick``), then goes on; the server never hears
    of them (asyncio's own loop only logs through the unconfigured ``asyncio`` logger and stops
    accepting for a second at a time, ``ACCEPT_RETRY_DELAY``, while the connections wait). So
    once a second the daemon opens and closes one descriptor: while that fails, a rate-limited
    ``fd_limit_reached`` error says so (with the limit and the open connections), and
    ``fd_limit_recovered`` when it works again."""
    limited = ratelimit.LogLimiter(log)
    exhausted = False
    while True:
        await asyncio.sleep(every_s)
        try:
            os.close(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        except OSError as e:
            if e.errno not in (errno.EMFILE, errno.ENFILE):
                return  # no /dev/null to probe with: nothing to watch by
            exhausted = True
            limited.error(
                "fd_limit_reached",
                error=os.strerror(e.errno),
                limit=_fd_limit(),
                connections=len(broker.server.connections),
                hint="new connections are closed unserved and new partition files cannot be opened: "
                "raise the limit (ulimit -n) or lower --max-connections",
            )
            continue
        if exhausted:
            exhausted = False
            limited.flush()  # the count of the failed probes first
            log.info("fd_limit_recovered", limit=_fd_limit(), connections=len(broker.server.connections))


def _fd_limit() -> int | None:
    try:
        import resource

        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):
        return None


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


def data_dir_problem(data_dir: str) -> str | None:
    """Why the daemon cannot use ``data_dir``, in one line, or None.

    The storage takes ``<data_dir>/.lock`` (``flock``, non-blocking, as Kafka's ``LogManager.lockLogDirs``
    takes its ``.lock``) and keeps it until the process ends; checked here first so a second daemon
    (``make run`` twice) is refused with the other process named instead of a storage traceback."""
    path = Path(data_dir)
    if path.exists() and not path.is_dir():
        return f"--data-dir {path}: the path is a file, not a directory"
    lock = path / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None  # no lock file yet (or unreadable: the storage says why)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _flock_holder(fd)
        who = f"process {holder}" if holder is not None else "another process"
        return f"data directory {path.resolve()} is in use by {who} (its {LOCK_FILE} is locked): stop it or use another --data-dir"
    except OSError:
        return None
    finally:
        os.close(fd)  # closing drops the probe's lock, if it got one
    return None


def _flock_holder(fd: int) -> int | None:
    """The pid holding a ``flock`` on ``fd``'s file, from /proc/locks (Linux), or None."""
    st = os.fstat(fd)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; "->" lines are waiters
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == dev:
            with contextlib.suppress(ValueError):
                return int(parts[4])
    return None


_BIND_ADDRESS = re.compile(r"address \('?([^',]*)'?, (\d+)")


def start_error(config: Config, e: BaseException) -> str:
    """One line for an error that stops the daemon from starting, with a hint where one helps."""
    if isinstance(e, OSError) and e.errno == errno.EADDRINUSE:
        m = _BIND_ADDRESS.search(str(e))
        if m is not None:
            host, port = m.group(1), int(m.group(2))
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            option = {
                config.metrics_port: "--metrics-port",
                config.dashboard_port: "--dashboard-port",
                config.control_port: "--control-port",
            }.get(port, "--port")
            hint = f"choose another with {option}" + (" (PORT=... for make run)" if option == "--port" else "")
            return f"{where} is already in use by another process: {hint}"
        return f"{e}: an address is already in use by another process (choose another --port)"
    return str(e)


def run(config: Config) -> int:
    problem = data_dir_problem(config.data_dir)
    if problem is not None:
        print(f"groupd: cannot start: {problem}", file=sys.stderr)
        return 1
    _raise_fd_limit()
    _GcTuner().install()
    try:
        import uvloop

        uvloop.run(serve(config))
    # ssl.SSLError is an OSError; bad listeners/users/acl are ValueErrors; StorageError: a disk that
    # refuses the data directory (or a second daemon that took its lock since data_dir_problem)
    except (OSError, ValueError, StorageError) as e:
        print(f"groupd: cannot start: {start_error(config, e)}", file=sys.stderr)
        return 1
    return 0
