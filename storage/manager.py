"""LogManager: the partition logs of one data directory, keyed by (topic, partition)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from .compaction import CompactionResult, run_cleanup
from .errors import StorageError
from .files import write_atomically
from .log import LogConfig, PartitionLog, fsync_dir, now_ms

log = structlog.get_logger("groupd.storage")

__all__ = ["LogManager", "parse_partition_dir"]

LOCK_FILE = ".lock"
DELETE_SUFFIX = "-delete"
TOPIC_CONFIG_DIR = ".topic-configs"
# Kafka's legal topic names: ASCII letters, digits, '.', '_' and '-', at most 249 characters.
_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``my-topic-3`` -> ("my-topic", 3); None for anything that is not a partition directory."""
    topic, sep, num = name.rpartition("-")
    if not sep or not num.isdigit() or not _TOPIC_RE.match(topic) or topic in (".", ".."):
        return None
    return topic, int(num)


class LogManager:
    """Opens, creates and deletes partition logs under `data_dir`.

    `config` is the default. A topic's config is, in order of precedence: what
    `topic_config(topic)` returns (the daemon's own topics, e.g. a compacted
    ``__consumer_offsets``), else `config` with the topic's Kafka-style overrides applied (set
    through `set_topic_configs`, e.g. from CreateTopics, and persisted under `.topic-configs/` so
    retention and compaction survive a restart). A lock file keeps a second process out.
    """

    def __init__(
        self,
        data_dir: Path | str,
        config: LogConfig | None = None,
        *,
        topic_config: Callable[[str], LogConfig | None] | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.config = config or LogConfig()
        self._topic_config = topic_config
        self._clock = clock
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        # (topic, partition) -> its open log, read-only for callers: ``get`` without its call, for
        # Produce's per-partition lookup (issue 26). The dict itself is never replaced.
        self.by_key: dict[tuple[str, int], PartitionLog] = self._logs
        self._overrides: dict[str, dict[str, str | None]] = {}
        self._lock_fd: int | None = None
        # Told of every corrupt batch a verified read of any of these logs skips (the metrics).
        self.corruption_observer: Callable[[PartitionLog], None] | None = None
        # (topic, partition) -> current leader epoch, when the owner leads logs at changing epochs
        # (``track_leader_epochs``); None: every batch at epoch 0 and no epoch cache at all.
        self._leader_epochs: Callable[[str, int], int] | None = None

    def track_leader_epochs(self, source: Callable[[str, int], int]) -> None:
        """Stamp every log's appends with ``source(topic, partition)`` and keep its leader epoch
        cache (storage/epochs.py), for the logs open now and those opened later. Costs nothing until
        a log is used: each cache loads on its log's first append or epoch question."""
        self._leader_epochs = source
        for (topic, partition), plog in self._logs.items():
            self._attach(topic, partition, plog)

    def _attach(self, topic: str, partition: int, plog: PartitionLog) -> None:
        plog.on_corrupt_batch = self._corrupt_batch
        source = self._leader_epochs
        if source is not None:
            plog.leader_epoch_source = functools.partial(source, topic, partition)

    def config_for(self, topic: str) -> LogConfig:
        if self._topic_config is not None:
            override = self._topic_config(topic)
            if override is not None:
                return override
        overrides = self._overrides.get(topic)
        return self.config.with_kafka_configs(overrides) if overrides else self.config

    def topic_configs(self, topic: str) -> dict[str, str | None]:
        """The Kafka-style overrides stored for a topic (empty if none)."""
        return dict(self._overrides.get(topic, {}))

    def set_topic_configs(self, topic: str, configs: dict[str, str | None]) -> LogConfig:
        """Validate, persist and apply a topic's overrides (replacing earlier ones). Raises
        ValueError for an unknown name or bad value, StorageError if they cannot be saved."""
        if not _TOPIC_RE.match(topic) or topic in (".", ".."):
            raise ValueError(f"illegal topic name {topic!r}")
        self.config.with_kafka_configs(configs)  # validate before anything is written
        directory = self.data_dir / TOPIC_CONFIG_DIR
        path = directory / f"{topic}.json"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if configs:
                write_atomically(path, json.dumps(configs, sort_keys=True), self.config.file_ops)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            fsync_dir(directory, self.config.file_ops)
        except OSError as exc:
            raise StorageError(f"cannot save configs of topic {topic}: {exc}") from exc
        if configs:
            self._overrides[topic] = dict(configs)
        else:
            self._overrides.pop(topic, None)
        cfg = self.config_for(topic)
        for (t, _p), plog in self._logs.items():
            if t == topic:
                plog.config = cfg
        return cfg

    def _load_overrides(self) -> None:
        directory = self.data_dir / TOPIC_CONFIG_DIR
        if not directory.is_dir():
            return
        for p in directory.glob("*.json"):
            try:
                configs = json.loads(p.read_text())
                self.config.with_kafka_configs(configs)
            except (ValueError, TypeError, AttributeError) as exc:
                log.error("storage.topic_config.invalid", path=str(p), error=str(exc))
                continue
            self._overrides[p.name[: -len(".json")]] = configs

    def _dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def open_all(self) -> list[tuple[str, int]]:
        """Lock the directory, remove half-deleted partitions and open (recover) every log."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise StorageError(f"{self.data_dir} is in use by another process") from None
            self._lock_fd = fd
            self._load_overrides()
            found = []
            for p in sorted(self.data_dir.iterdir()):
                if not p.is_dir():
                    continue
                if p.name.endswith(DELETE_SUFFIX):
                    shutil.rmtree(p, ignore_errors=True)
                    continue
                parsed = parse_partition_dir(p.name)
                if parsed is None:
                    continue
                found.append(parsed)
        except OSError as exc:
            raise StorageError(f"cannot open data directory {self.data_dir}: {exc}") from exc
        for topic, partition in found:
            plog = PartitionLog.open(self._dir(topic, partition), self.config_for(topic), clock=self._clock)
            self._attach(topic, partition, plog)
            self._logs[(topic, partition)] = plog
        log.info("storage.opened", data_dir=str(self.data_dir), partitions=len(found))
        return found

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        plog = self._logs.get((topic, partition))
        if plog is None:
            plog = self.create(topic, partition, config)
        return plog

    def get_or_create_many(self, topic: str, partitions: Iterable[int]) -> list[PartitionLog]:
        """``get_or_create`` of each partition with one fsync of the data dir for all the new ones
        (not one each): a first start creates 50 ``__consumer_offsets`` partitions before it
        listens, and their 50 directory fsyncs were most of its start-up (issue 26). Every new
        directory entry is durable when this returns, as after ``create``."""
        out = []
        created = False
        for p in partitions:
            plog = self._logs.get((topic, p))
            if plog is None:
                plog = self.create(topic, p, sync_parent=False)
                created = True
            out.append(plog)
        if created:
            try:
                fsync_dir(self.data_dir, self.config.file_ops)
            except OSError as exc:
                raise StorageError(f"cannot create partitions of {topic}: {exc}") from exc
        return out

    def create(
        self, topic: str, partition: int, config: LogConfig | None = None, *, sync_parent: bool = True
    ) -> PartitionLog:
        """``sync_parent=False``: the caller fsyncs the data dir before relying on the new log."""
        if (topic, partition) in self._logs:
            raise ValueError(f"{topic}-{partition} already exists")
        if not _TOPIC_RE.match(topic) or topic in (".", "..") or partition < 0:
            raise ValueError(f"illegal topic partition {topic!r}-{partition}")
        path = self._dir(topic, partition)
        plog = PartitionLog.open(path, config or self.config_for(topic), clock=self._clock)
        if sync_parent:
            try:
                fsync_dir(self.data_dir, self.config.file_ops)
            except OSError as exc:
                raise StorageError(f"cannot create {path}: {exc}") from exc
        self._attach(topic, partition, plog)
        self._logs[(topic, partition)] = plog
        return plog

    def _corrupt_batch(self, plog: PartitionLog) -> None:
        observer = self.corruption_observer
        if observer is not None:
            observer(plog)

    def delete(self, topic: str, partition: int) -> None:
        """Remove a partition and its data (rename first, so a crash never leaves half a log)."""
        plog = self._logs.pop((topic, partition), None)
        path = self._dir(topic, partition)
        if plog is not None:
            plog.abandon()
        if not path.exists():
            return
        tomb = self.data_dir / f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        try:
            os.rename(path, tomb)
            fsync_dir(self.data_dir, self.config.file_ops)
        except OSError as exc:
            raise StorageError(f"cannot delete {path}: {exc}") from exc
        shutil.rmtree(tomb, ignore_errors=True)

    def delete_topic(self, topic: str) -> None:
        """Delete every partition of a topic and its stored configs."""
        for t, p in self.partitions(topic):
            self.delete(t, p)
        if topic in self._overrides:
            self.set_topic_configs(topic, {})

    def partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        return sorted(k for k in self._logs if topic is None or k[0] == topic)

    def topics(self) -> set[str]:
        return {t for t, _ in self._logs}

    @property
    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def flush_all(self) -> None:
        for plog in self._logs.values():
            plog.flush()

    def cleanup(self, now: int | None = None) -> dict[tuple[str, int], CompactionResult | int]:
        """One pass of compaction/retention over every partition (blocking: use an executor)."""
        results = {}
        for key, plog in list(self._logs.items()):
            try:
                results[key] = run_cleanup(plog, now=now)
            except StorageError as exc:
                log.error("storage.cleanup.failed", topic=key[0], partition=key[1], error=str(exc))
        return results

    def close(self) -> None:
        errors = []
        for plog in self._logs.values():
            try:
                plog.close()
            except StorageError as exc:
                errors.append(exc)
        self._logs.clear()
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None
        if errors:
            raise errors[0]
