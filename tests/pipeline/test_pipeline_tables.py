"""The four tables of the fixture history (tests/pipeline/history.py), row for row."""

from __future__ import annotations

import re

from groupd.pipeline import TABLES

from tests.pipeline.conftest import table
from tests.pipeline.history import T


def tps(topic: str, *partitions: int) -> list[dict]:
    return [{"topic": topic, "partition": p} for p in partitions]


def member(
    mid: str,
    assigned: list[dict] | None,
    *,
    instance: str | None = None,
    client: str | None = None,
    host: str | None = None,
    topics: list[str] | None = None,
) -> dict:
    return {
        "member_id": mid,
        "group_instance_id": instance,
        "client_id": client or f"client-{mid}",
        "client_host": host or f"/10.0.0.{len(mid)}",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 30000,
        "subscribed_topics": ["orders"] if topics is None else topics,
        "assigned_partitions": assigned,
    }


def test_cli_reports_every_table(analyzed) -> None:
    printed = analyzed.stdout
    # The whole run, then its phases by name (issue 29: it called the whole run "read").
    summary = (
        r"^analyzed 21 records from .* in [0-9.]+s \(read and decode [0-9.]+s, tables [0-9.]+s, report [0-9.]+s\)$"
    )
    assert re.search(summary, printed, re.M), printed
    assert not re.search(r"^read \d+ records", printed, re.M)
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^  (\w+) +(\d+) rows  (.*)$", printed, re.M)}
    assert counts == {
        "offset_commits": 10,
        "generations": 7,
        "rebalances": 4,
        "anomalies": 4,
        "consumer_group_epochs": 0,  # the fixture history has classic groups only
        "consumer_group_members": 0,
    }
    assert set(counts) == set(TABLES)
    assert f"report          {analyzed.out}/report.html" in printed
    for name in TABLES:
        assert list((analyzed.out / name).glob("*.parquet")), name


def test_offset_commits(spark, analyzed, history) -> None:
    def row(label: str, group: str, topic: str, partition: int, offset: int, at: int) -> dict:
        lp, lo = history.at[label]
        return {
            "group": group,
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "leader_epoch": 3,
            "metadata": f"m{offset}",
            "commit_time": at,
            "expire_time": None,
            "log_partition": lp,
            "log_offset": lo,
            "log_time": at,
        }

    assert table(spark, analyzed.out, "offset_commits", "group", "log_partition", "log_offset") == [
        row("audit.c.e2", "audit", "events", 2, 100, T + 3500),
        row("billing.c1.0", "billing", "orders", 0, 10, T + 2000),
        row("billing.c1.1", "billing", "orders", 1, 5, T + 2001),
        row("billing.c1.2", "billing", "orders", 2, 7, T + 2002),
        row("billing.c1.3", "billing", "orders", 3, 3, T + 2003),
        row("billing.c2.0", "billing", "orders", 0, 20, T + 6000),
        row("billing.c2.1", "billing", "orders", 1, 12, T + 6001),
        row("billing.c3.0", "billing", "orders", 0, 15, T + 11000),
        row("billing.c3.2", "billing", "orders", 2, 9, T + 11001),
        row("billing.c4.3", "billing", "orders", 3, 1, T + 17000),
    ]


def test_generations(spark, analyzed, history) -> None:
    def gen(
        group: str,
        seq: int,
        label: str,
        members: list[dict],
        start: int,
        end: int | None,
        *,
        records: int = 1,
        protocol_type: str = "consumer",
        protocol: str | None = "range",
        leader: str | None = None,
    ) -> dict:
        lp, lo = history.at[label]
        return {
            "group": group,
            "seq": seq,
            "generation": seq,
            "protocol_type": protocol_type,
            "protocol": protocol if members else None,
            "leader": (leader or members[0]["member_id"]) if members else None,
            "member_count": len(members),
            "members": members,
            "started_at": start,
            "ended_at": end,
            "duration_ms": None if end is None else end - start,
            "join_completed_at": start - 100,
            "records": records,
            "log_partition": lp,
            "log_offset": lo,
        }

    m1 = member("m1", tps("orders", 0, 1), client="app-1", host="/10.0.0.1")
    m2 = member("m2", tps("orders", 2))
    m3 = member("m3", tps("orders", 3), instance="i-3")
    m3b = member("m3b", tps("orders", 3), instance="i-3")
    m4 = member("m4", tps("orders", 1))
    expected = [
        gen(
            "audit",
            1,
            "audit.g1",
            [
                member("a1", tps("events", 0, 1), topics=["events"]),
                member("a2", [], topics=["events"]),
            ],
            T + 3000,
            None,
        ),
        gen("billing", 1, "billing.g1", [m1, m2, m3], T + 1000, T + 5000),
        # two records: the static member i-3 came back as m3b within generation 2; the last wins
        gen(
            "billing",
            2,
            "billing.g2",
            [{**m1, "assigned_partitions": tps("orders", 0)}, m2, m3b, m4],
            T + 5000,
            T + 10000,
            records=2,
        ),
        gen(
            "billing",
            3,
            "billing.g3",
            [
                member("m1", tps("orders", 0, 2)),
                m3b,
                member("m4", tps("orders", 1, 2)),
            ],
            T + 10000,
            T + 15000,
        ),
        gen("billing", 4, "billing.g4", [member("m1", tps("orders", 0, 1)), m3b], T + 15000, T + 20000),
        gen("billing", 5, "billing.g5", [], T + 20000, T + 25000),  # Empty, ended by the group's tombstone
        gen(
            "connect-cluster",
            1,
            "connect.g1",
            [
                {**member("w1", None), "subscribed_topics": None},  # not the consumer protocol: not decoded
            ],
            T + 4000,
            None,
            protocol_type="connect",
            protocol="sessioned",
        ),
    ]
    assert table(spark, analyzed.out, "generations", "group", "seq") == expected


def test_rebalances(spark, analyzed) -> None:
    def reb(
        seq: int,
        before: int,
        after: int,
        joined: list[str],
        left: list[str],
        moved: int,
        kept: int,
        new: int,
        gone: int,
        mx: int | None,
        mn: int | None,
        moves: list[tuple],
    ) -> dict:
        return {
            "group": "billing",
            "seq": seq,
            "from_generation": seq - 1,
            "to_generation": seq,
            "completed_at": T + 5000 * (seq - 1),
            "join_completed_at": T + 5000 * (seq - 1) - 100,
            "members_before": before,
            "members_after": after,
            "members_joined": joined,
            "members_left": left,
            "partitions_moved": moved,
            "partitions_kept": kept,
            "partitions_newly_assigned": new,
            "partitions_unassigned": gone,
            "max_partitions_per_member": mx,
            "min_partitions_per_member": mn,
            "partition_spread": None if mx is None else mx - mn,
            "moved_partitions": [
                {"topic": t, "partition": p, "from_members": f, "to_members": to} for t, p, f, to in moves
            ],
        }

    assert table(spark, analyzed.out, "rebalances", "group", "seq") == [
        reb(2, 3, 4, ["m4"], [], 1, 3, 0, 0, 1, 1, [("orders", 1, ["m1"], ["m4"])]),
        # m2 left; its partition went to two members at once
        reb(3, 4, 3, [], ["m2"], 1, 3, 0, 0, 2, 1, [("orders", 2, ["m2"], ["m1", "m4"])]),
        # m4 left: orders-1 moved back to m1, orders-2 is nobody's
        reb(4, 3, 2, [], ["m4"], 1, 2, 0, 1, 2, 1, [("orders", 1, ["m4"], ["m1"])]),
        # everyone left (the static member is named by its instance id)
        reb(5, 2, 0, [], ["i-3", "m1"], 0, 0, 0, 3, None, None, []),
    ]


def test_anomalies(spark, analyzed, history) -> None:
    def anomaly(
        kind: str,
        group: str,
        label: str,
        at: int,
        *,
        generation: int | None = None,
        topic: str,
        partition: int,
        members: list[str] | None = None,
        offset: int | None = None,
        previous: int | None = None,
        detail: str,
    ) -> dict:
        lp, lo = history.at[label]
        return {
            "kind": kind,
            "group": group,
            "generation": generation,
            "topic": topic,
            "partition": partition,
            "members": members,
            "offset": offset,
            "previous_offset": previous,
            "timestamp": at,
            "log_partition": lp,
            "log_offset": lo,
            "detail": detail,
        }

    assert table(spark, analyzed.out, "anomalies", "kind", "group", "timestamp") == [
        anomaly(
            "backwards_commit",
            "billing",
            "billing.c3.0",
            T + 11000,
            topic="orders",
            partition=0,
            offset=15,
            previous=20,
            detail="committed offset went from 20 back to 15",
        ),
        anomaly(
            "double_assigned",
            "billing",
            "billing.g3",
            T + 10000,
            generation=3,
            topic="orders",
            partition=2,
            members=["m1", "m4"],
            detail="assigned to 2 members: m1, m4",
        ),
        # events is not in topics.json: its 3 partitions are inferred from the commit on events-2
        anomaly(
            "unassigned",
            "audit",
            "audit.g1",
            T + 3000,
            generation=1,
            topic="events",
            partition=2,
            members=[],
            detail="subscribed but assigned to no member",
        ),
        anomaly(
            "unassigned",
            "billing",
            "billing.g4",
            T + 15000,
            generation=4,
            topic="orders",
            partition=2,
            members=[],
            detail="subscribed but assigned to no member",
        ),
    ]


def test_kafka_group_creation_record_starts_no_generation(spark, tmp_path) -> None:
    # Kafka 4 writes an empty generation-0 group-metadata record when a join creates a group and
    # writes nothing else (GroupMetadataManager.classicGroupJoinToClassicGroup); groupd does too.
    from groupd.pipeline import source, tables

    from tests.pipeline.history import LogWriter, M

    w = LogWriter(tmp_path / "data")
    w.generation("created", T + 500, "fresh", 0, [], protocol_type="", state_ts=T + 500)
    w.generation("g1", T + 1000, "fresh", 1, [M("m1", {"orders": [0]})])
    w.close()
    gens = tables.generations(source.read_log(spark, str(tmp_path / "data"))).collect()
    assert [(g["group"], g["seq"], g["generation"], g["member_count"]) for g in gens] == [("fresh", 1, 1, 1)]
    assert gens[0]["records"] == 1
