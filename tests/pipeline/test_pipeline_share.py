"""Share groups in the pipeline: a real daemon's ``__share_group_state`` (written while confluent-kafka
``ShareConsumer``s release, accept and reject records) folded into ``share_state_changes`` and the
report's share section."""

from __future__ import annotations

from pathlib import Path

import pytest
from groupd.pipeline import job, share
from pyspark.sql import SparkSession

from tests.e2e.test_share_consumer_e2e import Member, _setup, produce, wait_for
from tests.pipeline.conftest import table
from tests.support.daemon import GroupdProcess


@pytest.fixture(scope="module")
def share_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """5 records: the first consumer releases all 5, the second gets them again (delivery count 2),
    rejects r3 and accepts the rest."""
    data = tmp_path_factory.mktemp("share") / "data"
    members: list[Member] = []
    with GroupdProcess(data) as d:
        try:
            group, topic = _setup(d)
            produce(d, topic, [f"r{i}" for i in range(5)])
            a = Member(d, group, topic, "release-once")
            members.append(a)
            wait_for(lambda: a.printed("closed"), 30, "the first consumer to release and close")
            b = Member(d, group, topic, "reject", "r3")
            members.append(b)
            wait_for(lambda: len(b.acked()) >= 5, 30, "the second consumer's acknowledgements")
            b.stop()
        finally:
            for m in members:
                m.kill()
    return data, group


def test_fold_partition_derives_deliveries_returns_and_final_states(share_history: tuple[Path, str]) -> None:
    data, group = share_history
    rows = [r for lp, path in share.state_dirs(str(data)) for r in share.fold_partition(lp, path)]
    cols = [c.split(" ")[0].strip("`") for c in share.CHANGES_DDL.split(", ")]
    changes = [
        dict(zip(cols, r, strict=True)) for r in rows if r[3] == group and r[cols.index("first_offset")] is not None
    ]
    per_offset: dict[int, list[tuple[str | None, str, int, int]]] = {}
    for c in changes:
        for off in range(c["first_offset"], c["last_offset"] + 1):
            per_offset.setdefault(off, []).append((c["from_state"], c["to_state"], c["from_count"], c["to_count"]))
    # ShareCoordinatorShard: the release (count 1, AVAILABLE), then the second delivery's outcome
    assert per_offset == {
        o: [(None, "available", 0, 1), ("available", "archived" if o == 3 else "acknowledged", 1, 2)] for o in range(5)
    }
    assert sum(c["deliveries"] for c in changes) == 10
    assert sum(c["redeliveries"] for c in changes) == 5


def test_analyze_writes_share_state_changes_and_the_share_section(
    spark: SparkSession, share_history: tuple[Path, str], tmp_path: Path
) -> None:
    data, group = share_history
    out = tmp_path / "out"
    result = job.run(spark, str(data), str(out))
    rows = [r for r in table(spark, out, share.CHANGES_TABLE, "log_partition", "log_offset") if r["group"] == group]
    assert result.counts[share.CHANGES_TABLE] >= len(rows) > 0
    assert sum(r["deliveries"] for r in rows) == 10
    assert {r["to_state"] for r in rows if r["first_offset"] is not None} == {"available", "acknowledged", "archived"}
    assert all(r["at"] is not None for r in rows)
    html = (out / "report.html").read_text()
    assert 'id="share-groups"' in html
    # the group's row: partitions, deliveries, redeliveries, returned, accepted, archived
    cells = "".join(f'<td class="n">{n}</td>' for n in (1, 10, 5, 5, 4, 1))
    assert f"<tr><td>{group}</td>{cells}</tr>" in html


def test_analyze_group_filter_leaves_other_groups_share_state_out(
    spark: SparkSession, share_history: tuple[Path, str], tmp_path: Path
) -> None:
    data, _group = share_history
    out = tmp_path / "out"
    job.run(spark, str(data), str(out), group="no-such-*", write_report=False)
    assert table(spark, out, share.CHANGES_TABLE) == []
