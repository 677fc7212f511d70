"""LogManager: partition directories, reopening, deletion, per-topic configs, the directory lock."""

from __future__ import annotations

import pytest
from groupd.storage.errors import StorageError
from groupd.storage.manager import LogManager, parse_partition_dir
from storage_helpers import small_config


def test_parse_partition_dir():
    assert parse_partition_dir("__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir("my-topic-3") == ("my-topic", 3)
    assert parse_partition_dir("a.b_c-0") == ("a.b_c", 0)
    for bad in ("topic", "topic-", "-3", "topic-x", "t-0.abcdef-delete", "bad topic-1", ".lock"):
        assert parse_partition_dir(bad) is None


def test_create_reopen_list_and_delete(tmp_path):
    compacted = small_config(cleanup_policy="compact")
    mgr = LogManager(tmp_path, small_config(), topic_config=lambda t: compacted if t == "__consumer_offsets" else None)
    assert mgr.open_all() == []
    for p in range(3):
        mgr.create("__consumer_offsets", p).append_records([(b"k%d" % p, b"v", [], 1)])
    mgr.get_or_create("orders", 0).append_records([(b"o", b"1", [], 1)])
    assert mgr.get_or_create("orders", 0) is mgr.get("orders", 0)
    with pytest.raises(ValueError):
        mgr.create("orders", 0)
    with pytest.raises(ValueError):
        mgr.create("../escape", 0)
    assert mgr.get("__consumer_offsets", 1).config.compact
    assert not mgr.get("orders", 0).config.compact
    mgr.close()

    mgr = LogManager(tmp_path, small_config(), topic_config=lambda t: compacted if t == "__consumer_offsets" else None)
    found = mgr.open_all()
    assert sorted(found) == [
        ("__consumer_offsets", 0),
        ("__consumer_offsets", 1),
        ("__consumer_offsets", 2),
        ("orders", 0),
    ]
    assert mgr.partitions("__consumer_offsets") == [("__consumer_offsets", p) for p in range(3)]
    assert mgr.topics() == {"__consumer_offsets", "orders"}
    assert list(mgr.get("__consumer_offsets", 2).iter_records()) == [(0, 1, b"k2", b"v")]
    assert mgr.get("__consumer_offsets", 0).config.compact
    mgr.delete("orders", 0)
    assert mgr.get("orders", 0) is None
    assert not (tmp_path / "orders-0").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("orders")]
    mgr.cleanup(now=0)
    mgr.close()


def test_half_deleted_partitions_are_removed_at_open(tmp_path):
    mgr = LogManager(tmp_path, small_config())
    mgr.open_all()
    mgr.create("t", 0).append_records([(b"k", b"v", [], 1)])
    mgr.close()
    (tmp_path / "t-0").rename(tmp_path / "t-0.0123abcd-delete")  # a crash in the middle of delete
    mgr = LogManager(tmp_path, small_config())
    assert mgr.open_all() == []
    assert not (tmp_path / "t-0.0123abcd-delete").exists()
    mgr.close()


def test_a_second_manager_cannot_open_the_same_directory(tmp_path):
    first = LogManager(tmp_path, small_config())
    first.open_all()
    second = LogManager(tmp_path, small_config())
    with pytest.raises(StorageError):
        second.open_all()
    first.close()
    second.open_all()
    second.close()


def test_topic_configs_are_validated_persisted_and_applied(tmp_path):
    mgr = LogManager(tmp_path, small_config(retention_ms=None))
    mgr.open_all()
    plog = mgr.create("events", 0)
    with pytest.raises(ValueError):
        mgr.set_topic_configs("events", {"retention.ms": "soon"})
    with pytest.raises(ValueError):
        mgr.set_topic_configs("events", {"no.such.config": "1"})
    with pytest.raises(ValueError):
        mgr.set_topic_configs("events", {"cleanup.policy": "shred"})
    cfg = mgr.set_topic_configs(
        "events",
        {"retention.ms": "1000", "cleanup.policy": "compact,delete", "message.timestamp.type": "LogAppendTime"},
    )
    assert plog.config is cfg
    assert (cfg.retention_ms, cfg.compact, cfg.delete, cfg.message_timestamp_type) == (
        1000,
        True,
        True,
        "LogAppendTime",
    )
    assert cfg.segment_bytes == small_config().segment_bytes  # untouched settings keep the default
    mgr.close()

    mgr = LogManager(tmp_path, small_config(retention_ms=None))
    mgr.open_all()
    assert mgr.get("events", 0).config.retention_ms == 1000
    assert mgr.topic_configs("events")["cleanup.policy"] == "compact,delete"
    assert mgr.config_for("other").retention_ms is None
    assert mgr.set_topic_configs("events", {"retention.ms": "-1"}).retention_ms is None
    mgr.delete_topic("events")
    assert mgr.partitions() == [] and mgr.topic_configs("events") == {}
    mgr.close()
    mgr = LogManager(tmp_path, small_config(retention_ms=None))
    assert mgr.open_all() == [] and mgr.topic_configs("events") == {}
    mgr.close()
