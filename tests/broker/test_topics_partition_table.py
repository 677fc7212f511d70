"""The C commit path reads the topic registry's table directly (``coordinator.native.partition_table``):
it must be the dict ``partition_count`` reads, so that both always agree (issue 26)."""

from __future__ import annotations

from groupd.broker.topics import TopicRegistry
from groupd.coordinator import native


def test_the_registry_hands_its_topics_table_to_the_commit_path(tmp_path) -> None:
    reg = TopicRegistry(tmp_path)
    reg.create("t", 3)
    table = native.partition_table(reg.partition_count)
    assert table is reg.topics
    reg.create("u", 5)
    reg.delete("t")
    for name in ["t", "u", "missing"]:
        topic = table.get(name)
        assert (topic.partitions if topic else None) == reg.partition_count(name)
