"""``report.html``: one self-contained page (plots inline as base64 PNG, no external resources).

``collect`` brings the few thousand numbers the page needs to the driver (bounded however large
the log: ranked groups, bucketed series, capped lists -- every cap is stated on the page, with
what was left out); ``render`` draws them with matplotlib and writes the HTML. The page reads
the same at 1 group and at 1,000: aggregates first, then the worst groups.

* summary -- counts, anomalies by kind, the sync-phase distribution;
* anomalies -- ranked (``tables.ANOMALY_RANK``: commits going backwards first), then by time;
* worst groups -- ranked by rewinds, double assignments, unassigned partitions, then rebalances;
* sync phase per rebalance -- see below; a histogram of every generation's sync phase and the longest ones;
* partitions moved per rebalance -- one bar per rebalance when there are few, otherwise summed
  per time bucket over all groups;
* generations timeline of the groups with most generations; commit progress of the groups with
  most commits (a rewind shows as a drop);
* the latest rebalances and generations as tables.

*Sync phase per rebalance.* What the log holds per generation is its group-metadata record: written
when the leader's SyncGroup brought the assignment (the record's log time, taken as the coordinator
writes it; the SyncGroup answers go out once it is durable), and its ``currentStateTimestamp``: when
the group entered CompletingRebalance, i.e. when the join phase ended and the JoinGroup responses
went out. The *start* of a rebalance -- the first JoinGroup, when the group entered
PreparingRebalance -- is not in the log: Kafka's coordinator writes no record then
(``GroupMetadataManager`` persists a classic group only on SyncGroup completion, a static member's
replacement and the move to Empty). So what the report can measure is the *sync phase*, from the
end of the join phase to the assignment being written: the tail of the stop-the-world window, after
every member rejoined, usually milliseconds. It is named apart from the dashboard's *paused* (first
JoinGroup to last SyncGroup answer, seconds: the join phase -- members finishing their poll,
revoking and rejoining, bounded by the rebalance timeout -- is most of it and cannot be read from the
log); the dashboard shows the same sync phase next to it (``groupd.ops.dashboard``).
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from .tables import ANOMALY_RANK, Tables

MAX_TIMELINE_GROUPS = 25
MAX_PROGRESS_GROUPS = 10
MAX_REBALANCE_BARS = 40  # more: summed per time bucket
REBALANCE_BUCKETS = 60
PROGRESS_POINTS = 400
MAX_LIST_ROWS = 500
MAX_WORST_GROUPS = 20
MAX_PAUSE_ROWS = 25


@dataclass
class ReportData:
    summary: dict[str, Any]
    timeline: dict[str, list[tuple[int, int | None, int, int]]]  # group -> (start, end, generation, members)
    data_end_ms: int | None
    rebalances: list[dict[str, Any]]
    progress: dict[str, list[tuple[int, int]]]  # group -> (time ms, total committed offset)
    anomalies: list[dict[str, Any]]
    anomaly_count: int
    generations: list[dict[str, Any]] = field(default_factory=list)
    groups_shown: dict[str, int] = field(default_factory=dict)
    rebalance_buckets: list[dict[str, Any]] = field(default_factory=list)  # when too many for one bar each
    worst_groups: list[dict[str, Any]] = field(default_factory=list)
    pauses: list[dict[str, Any]] = field(default_factory=list)  # the longest
    pause_histogram: list[tuple[int, int]] = field(default_factory=list)  # (upper bound ms, count)
    pause_count: int = 0
    # KIP-848 consumer groups: epoch bumps (latest first, reversed), members, epoch per group over time
    consumer_epochs: list[dict[str, Any]] = field(default_factory=list)
    consumer_members: list[dict[str, Any]] = field(default_factory=list)
    consumer_series: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # (ms, epoch, members)
    # KIP-932 share groups: ``share.summarize`` of share_state_changes (empty: none in the log)
    share: dict[str, Any] = field(default_factory=dict)


def _ms(d: datetime | None) -> int | None:
    if d is None:
        return None
    if d.tzinfo is None:  # Spark hands back local wall-clock times
        d = d.astimezone()
    return int(d.timestamp() * 1000)


def collect(t: Tables, counts: dict[str, int] | None = None) -> ReportData:
    """What the page shows, from the written tables (`counts`: their row counts, if known)."""
    if counts is None:
        counts = {name: df.count() for name, df in t.items()}
    gens = t.generations
    per_group = {r.group: r["count"] for r in gens.groupBy("group").count().collect()}
    top = sorted(per_group, key=lambda g: (-per_group[g], g))[:MAX_TIMELINE_GROUPS]
    timeline: dict[str, list[tuple[int, int | None, int, int]]] = {g: [] for g in sorted(top)}
    for r in (
        gens.where(F.col("group").isin(top))
        .select(
            "group",
            "generation",
            "member_count",
            F.unix_millis("started_at").alias("s"),
            F.unix_millis("ended_at").alias("e"),
        )
        .orderBy("group", "seq")
        .collect()
    ):
        timeline[r.group].append((r.s, r.e, r.generation, r.member_count))

    ends = t.offset_commits.select(F.max(F.unix_millis(F.coalesce("commit_time", "log_time"))).alias("m")).union(
        gens.select(F.max(F.unix_millis(F.coalesce("ended_at", "started_at"))).alias("m"))
    )
    data_end = ends.agg(F.max("m")).first()[0]

    rebalances = [
        r.asDict(recursive=True)
        for r in t.rebalances.select(
            "group",
            "from_generation",
            "to_generation",
            F.unix_millis("completed_at").alias("at"),
            "members_before",
            "members_after",
            "members_joined",
            "members_left",
            "partitions_moved",
            "partitions_kept",
            "partitions_newly_assigned",
            "partitions_unassigned",
            "partition_spread",
        )
        .orderBy(F.desc("at"), "group")
        .limit(MAX_LIST_ROWS)
        .collect()
    ]
    rebalances.reverse()

    progress = _progress(t)

    anomaly_count = counts["anomalies"]
    anomalies = [
        r.asDict(recursive=True)
        for r in t.anomalies.select(
            "kind",
            "group",
            "generation",
            "topic",
            "partition",
            "members",
            "offset",
            "previous_offset",
            F.unix_millis("timestamp").alias("at"),
            "detail",
        )
        .orderBy(_anomaly_rank(), "at", "group", "topic", "partition")
        .limit(MAX_LIST_ROWS)
        .collect()
    ]
    generations = [
        r.asDict(recursive=True)
        for r in gens.select(
            "group",
            "generation",
            "protocol_type",
            "protocol",
            "leader",
            "member_count",
            F.unix_millis("started_at").alias("at"),
            "duration_ms",
            F.transform(
                "members",
                lambda m: F.struct(
                    F.coalesce(m["group_instance_id"], m["member_id"]).alias("key"),
                    m["client_id"].alias("client_id"),
                    m["client_host"].alias("client_host"),
                    F.size(m["assigned_partitions"]).alias("partitions"),
                ),
            ).alias("members"),
        )
        .orderBy(F.desc("at"), "group")
        .limit(MAX_LIST_ROWS)
        .collect()
    ]
    generations.reverse()

    summary = {
        "groups": gens.select("group").union(t.offset_commits.select("group")).distinct().count(),
        "generations": counts["generations"],
        "rebalances": counts["rebalances"],
        "offset commits": counts["offset_commits"],
        "committing groups": t.offset_commits.select("group").distinct().count(),
        "anomalies": anomaly_count,
    }
    by_kind = {r.kind: r["count"] for r in t.anomalies.groupBy("kind").count().collect()}
    for kind in ANOMALY_RANK:
        summary[f"  {kind}"] = by_kind.get(kind, 0)
    pauses, histogram, pause_count, quantiles = _pauses(t)
    if pause_count:
        summary["sync phase ms p50 / p95 / max"] = " / ".join(str(q) for q in quantiles)
    buckets = _rebalance_buckets(t) if counts["rebalances"] > MAX_REBALANCE_BARS else []
    consumer = _consumer_groups(t, summary, counts)
    return ReportData(
        summary=summary,
        timeline=timeline,
        data_end_ms=data_end,
        rebalances=rebalances,
        progress=progress,
        anomalies=anomalies,
        anomaly_count=anomaly_count,
        generations=generations,
        groups_shown={"timeline": len(top), "all": len(per_group), "progress": len(progress)},
        rebalance_buckets=buckets,
        worst_groups=_worst_groups(t),
        pauses=pauses,
        pause_histogram=histogram,
        pause_count=pause_count,
        **consumer,
    )


def _consumer_groups(t: Tables, summary: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    """The KIP-848 section's rows: latest epoch bumps, members by assignment changes, epoch series."""
    epochs_df = t.consumer_group_epochs
    n_bumps = counts.get("consumer_group_epochs", 0)
    summary["consumer groups (KIP-848)"] = epochs_df.select("group").distinct().count() if n_bumps else 0
    summary["  group epoch bumps"] = n_bumps
    summary["  consumer group members"] = counts.get("consumer_group_members", 0)
    epochs = [
        r.asDict(recursive=True)
        for r in epochs_df.select(
            "group",
            "epoch",
            F.unix_millis("bumped_at").alias("at"),
            "members_reconciled",
            "convergence_ms",
            "assignment_changes",
            "members_left",
            "duration_ms",
        )
        .orderBy(F.desc("at"), "group", F.desc("epoch"))
        .limit(MAX_LIST_ROWS)
        .collect()
    ]
    epochs.reverse()
    members = [
        r.asDict(recursive=True)
        for r in t.consumer_group_members.select(
            "group",
            "member_id",
            "instance_id",
            "client_id",
            "assignment_changes",
            "first_epoch",
            "last_epoch",
            F.unix_millis("left_at").alias("left_at"),
            "last_assignment",
        )
        .orderBy(F.desc("assignment_changes"), "group", "member_id")
        .limit(MAX_LIST_ROWS)
        .collect()
    ]
    per_group = {r.group: r["count"] for r in epochs_df.groupBy("group").count().collect()} if n_bumps else {}
    top = sorted(per_group, key=lambda g: (-per_group[g], g))[:MAX_TIMELINE_GROUPS]
    series: dict[str, list[tuple[int, int, int]]] = {g: [] for g in sorted(top)}
    for r in (
        epochs_df.where(F.col("group").isin(top))
        .select("group", F.unix_millis("bumped_at").alias("at"), "epoch", "members_reconciled")
        .orderBy("group", "log_offset")
        .collect()
    ):
        series[r.group].append((r.at, r.epoch, r.members_reconciled))
    return {"consumer_epochs": epochs, "consumer_members": members, "consumer_series": series}


def plot_consumer_epochs(data: ReportData) -> str:
    plt = _plt()
    import matplotlib.dates as mdates

    series = {g: pts for g, pts in data.consumer_series.items() if pts}
    if not series:
        return _png(_empty(plt, "no KIP-848 consumer groups in the log"))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True)
    for g, pts in series.items():
        times = [_dt(t) for t, _, _ in pts]
        top.step(times, [e for _, e, _ in pts], where="post", label=g, marker=".", markersize=4)
        bottom.step(times, [m for _, _, m in pts], where="post", label=g, marker=".", markersize=4)
    top.set_ylabel("group epoch")
    top.set_title("Group epoch bumps and members reconciled to each epoch")
    top.legend(fontsize=8, loc="upper left")
    bottom.set_ylabel("members at the epoch")
    bottom.set_xlabel("bump time (UTC)")
    bottom.xaxis.set_major_formatter(mdates.ConciseDateFormatter(bottom.xaxis.get_major_locator(), tz=UTC))
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return _png(fig)


def _assignment_text(tps: list[dict[str, Any]] | None) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in tps or []:
        by_topic.setdefault(tp["topic"], []).append(tp["partition"])
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or "-"


def _consumer_section(data: ReportData) -> list[str]:
    bumps = data.summary.get("  group epoch bumps", 0)
    parts = ['<h2 id="consumer-groups">KIP-848 consumer groups</h2>']
    parts.append(
        _note(
            "Consumer groups (group.protocol=consumer) have no generations: each member-set or subscription "
            "change bumps the group epoch, the coordinator computes the new target assignment and members "
            "reconcile to it one heartbeat at a time. Converged: the epoch's last member-assignment record "
            "(every member that reached it); steps: member-assignment records written until the next bump "
            "(new epochs, revocations, partitions released)."
        )
    )
    parts.append(_plot("consumers", "Group epoch over time", plot_consumer_epochs(data)))
    if bumps > len(data.consumer_epochs):
        parts.append(_note(f"the latest {len(data.consumer_epochs)} of {bumps}; all are in consumer_group_epochs"))
    parts.append(
        _table(
            ["bumped", "group", "epoch", "members", "converged ms", "steps", "left", "lasted ms"],
            [
                [
                    _fmt_time(e["at"]),
                    e["group"],
                    e["epoch"],
                    e["members_reconciled"],
                    e["convergence_ms"],
                    e["assignment_changes"],
                    e["members_left"],
                    e["duration_ms"],
                ]
                for e in data.consumer_epochs
            ],
        )
        if data.consumer_epochs
        else "<p>none</p>"
    )
    parts.append('<h3 id="consumer-members">Assignment changes per member</h3>')
    parts.append(
        _table(
            ["group", "member", "client", "changes", "epochs", "left", "last assignment"],
            [
                [
                    m["group"],
                    m["instance_id"] or m["member_id"],
                    m["client_id"],
                    m["assignment_changes"],
                    f"{m['first_epoch']}→{m['last_epoch']}",
                    _fmt_time(m["left_at"]) if m["left_at"] is not None else "",
                    _assignment_text(m["last_assignment"]),
                ]
                for m in data.consumer_members
            ],
        )
        if data.consumer_members
        else "<p>none</p>"
    )
    return parts


def plot_share(data: ReportData) -> str:
    plt = _plt()
    import matplotlib.dates as mdates

    series = data.share.get("series") or []
    if not series:
        return _png(_empty(plt, "no share-partition state in __share_group_state"))
    fig, ax = plt.subplots(figsize=(11, 3.5))
    times = [_dt(s["at"]) for s in series]
    for key, label in (
        ("deliveries", "deliveries"),
        ("redeliveries", "redeliveries"),
        ("returned", "returned (release or lock expiry)"),
        ("archived", "archived"),
    ):
        ax.step(times, [s[key] for s in series], where="post", label=label, marker=".", markersize=4)
    ax.set_ylabel("records per bucket")
    ax.set_xlabel("state record time (UTC)")
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator(), tz=UTC))
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return _png(fig)


def _share_section(data: ReportData) -> list[str]:
    parts = ['<h2 id="share-groups">Share groups (KIP-932)</h2>']
    parts.append(
        _note(
            "From __share_group_state (table share_state_changes). Deliveries: growth of an offset's delivery "
            "count between two state records (acquisitions are not persisted, so a delivery is counted when "
            "it ends); redeliveries: deliveries beyond an offset's first; returned: changes to AVAILABLE, "
            "an explicit RELEASE and a lock expiry alike (the records do not tell them apart; the daemon's "
            "groupd_share_lock_expiries metric counts expiries alone); archived: rejected or past the "
            "delivery-count limit. History below a key's latest snapshot is pruned by the daemon."
        )
    )
    parts.append(_plot("share", "Deliveries, redeliveries, returns over time", plot_share(data)))
    groups = data.share.get("groups") or []
    parts.append(
        _table(
            ["group", "partitions", "deliveries", "redeliveries", "returned", "accepted", "archived"],
            [
                [
                    g["group"],
                    g["partitions"],
                    g["deliveries"],
                    g["redeliveries"],
                    g["returned"],
                    g["accepted"],
                    g["archived"],
                ]
                for g in groups
            ],
        )
        if groups
        else "<p>none</p>"
    )
    return parts


def _anomaly_rank() -> Any:
    rank = F.lit(len(ANOMALY_RANK))
    for kind, r in sorted(ANOMALY_RANK.items(), key=lambda kv: -kv[1]):
        rank = F.when(F.col("kind") == kind, r).otherwise(rank)
    return rank


def _pause_ms() -> Any:
    """The sync phase: join phase end to assignment written (the module docstring); null for Empty groups."""
    return F.when(
        (F.col("member_count") > 0) & F.col("join_completed_at").isNotNull(),
        F.greatest(F.unix_millis("started_at") - F.unix_millis("join_completed_at"), F.lit(0)),
    )


def _pauses(t: Tables) -> tuple[list[dict[str, Any]], list[tuple[int, int]], int, list[int]]:
    """(longest pauses, histogram by powers of two, how many, [p50, p95, max])."""
    p = t.generations.select("group", "generation", "member_count", _pause_ms().alias("pause_ms"), "started_at")
    p = p.where(F.col("pause_ms").isNotNull())
    stats = p.agg(
        F.count(F.lit(1)).alias("n"),
        F.percentile_approx("pause_ms", [0.5, 0.95]).alias("q"),
        F.max("pause_ms").alias("max"),
    ).first()
    if not stats or not stats["n"]:
        return [], [], 0, []
    bound = F.pow(F.lit(2), F.ceil(F.log2(F.greatest(F.col("pause_ms"), F.lit(1))))).cast("long")
    histogram = [(r.bound, r["count"]) for r in p.groupBy(bound.alias("bound")).count().orderBy("bound").collect()]
    longest = [
        r.asDict()
        for r in p.select("group", "generation", "member_count", "pause_ms", F.unix_millis("started_at").alias("at"))
        .orderBy(F.desc("pause_ms"), "group", "generation")
        .limit(MAX_PAUSE_ROWS)
        .collect()
    ]
    return longest, histogram, stats["n"], [*stats["q"], stats["max"]]


def _rebalance_buckets(t: Tables) -> list[dict[str, Any]]:
    """Rebalances of all groups summed per time bucket: (start ms, width ms, count, partitions)."""
    r = t.rebalances.select(
        F.unix_millis("completed_at").alias("at"),
        *[F.coalesce(F.col(c), F.lit(0)).alias(c) for c in _MOVES],
    )
    span = r.agg(F.min("at").alias("lo"), F.max("at").alias("hi")).first()
    if span is None or span.lo is None:
        return []
    width = max(1, -(-(span.hi - span.lo + 1) // REBALANCE_BUCKETS))
    rows = (
        r.groupBy(F.floor((F.col("at") - span.lo) / width).alias("b"))
        .agg(F.count(F.lit(1)).alias("rebalances"), *[F.sum(c).alias(c) for c in _MOVES])
        .orderBy("b")
        .collect()
    )
    # every bucket, the empty ones as zeros: a gap must read as "no rebalance", not be bridged
    found = {row.b: row.asDict() for row in rows}
    empty = {"rebalances": 0, **dict.fromkeys(_MOVES, 0)}
    last = max(found, default=-1)
    return [{**empty, **found.get(b, {}), "start": span.lo + b * width, "width": width} for b in range(last + 1)]


_MOVES = ("partitions_moved", "partitions_newly_assigned", "partitions_unassigned")


def _worst_groups(t: Tables) -> list[dict[str, Any]]:
    """Per group: anomalies by kind, generations, rebalances, partitions moved, longest sync phase;
    the worst first (rewinds, then double assignments, unassigned, then rebalances)."""
    kinds = list(ANOMALY_RANK)
    a = t.anomalies.groupBy("group").agg(*[F.sum(F.when(F.col("kind") == k, 1).otherwise(0)).alias(k) for k in kinds])
    g = t.generations.groupBy("group").agg(
        F.count(F.lit(1)).alias("generations"), F.max(_pause_ms()).alias("max_pause_ms")
    )
    r = t.rebalances.groupBy("group").agg(
        F.count(F.lit(1)).alias("rebalances"), F.sum(F.coalesce("partitions_moved", F.lit(0))).alias("moved")
    )
    zero = [F.coalesce(F.col(c), F.lit(0)).alias(c) for c in [*kinds, "generations", "rebalances", "moved"]]
    rows = (
        g.join(r, "group", "full_outer")
        .join(a, "group", "full_outer")
        .select("group", *zero, "max_pause_ms")
        .orderBy(*[F.desc(k) for k in kinds], F.desc("rebalances"), F.desc("moved"), "group")
        .limit(MAX_WORST_GROUPS)
        .collect()
    )
    return [row.asDict() for row in rows]


def _progress(t: Tables) -> dict[str, list[tuple[int, int]]]:
    oc = t.offset_commits.select(
        "group",
        "topic",
        "partition",
        "offset",
        "log_partition",
        "log_offset",
        F.unix_millis(F.coalesce("commit_time", "log_time")).alias("at"),
    )
    top = [
        r.group
        for r in oc.groupBy("group").count().orderBy(F.desc("count"), "group").limit(MAX_PROGRESS_GROUPS).collect()
    ]
    if not top:
        return {}
    oc = oc.where(F.col("group").isin(top))
    per_partition = Window.partitionBy("group", "topic", "partition").orderBy("log_partition", "log_offset")
    per_group = (
        Window.partitionBy("group").orderBy("log_partition", "log_offset").rowsBetween(Window.unboundedPreceding, 0)
    )
    totals = oc.withColumn("delta", F.col("offset") - F.coalesce(F.lag("offset").over(per_partition), F.lit(0)))
    totals = totals.withColumn("total", F.sum("delta").over(per_group))
    span = Window.partitionBy("group")
    lo, hi = F.min("at").over(span), F.max("at").over(span)
    bucket = F.floor((F.col("at") - lo) * PROGRESS_POINTS / (hi - lo + 1))
    points = (
        totals.withColumn("bucket", bucket)
        .groupBy("group", "bucket")
        .agg(F.max_by(F.struct("at", "total"), F.struct("log_partition", "log_offset")).alias("p"))
        .select("group", "bucket", "p.at", "p.total")
        .orderBy("group", "bucket")
        .collect()
    )
    out: dict[str, list[tuple[int, int]]] = {g: [] for g in sorted(top)}
    for r in points:
        out[r.group].append((r.at, r.total))
    return out


# --------------------------------------------------------------------------------------------
# drawing


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    _plt().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _empty(plt: Any, text: str) -> Any:
    fig, ax = plt.subplots(figsize=(9, 1.6))
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#555")
    ax.set_axis_off()
    return fig


_LABEL_FRACTION = 0.0075  # of the 11-inch axis per character of 8-pt text


def _members(n: int) -> str:
    return "1 member" if n == 1 else f"{n} members"


def plot_timeline(data: ReportData) -> str:
    plt = _plt()
    import matplotlib.dates as mdates

    groups = [g for g, gens in data.timeline.items() if gens]
    if not groups:
        return _png(_empty(plt, "no generations in the log"))
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.55 * len(groups)))
    palette = plt.get_cmap("tab20").colors
    end_all = data.data_end_ms or max(s for gens in data.timeline.values() for s, *_ in gens)
    begin_all = min(s for gens in data.timeline.values() for s, *_ in gens)
    span = max(mdates.date2num(_dt(end_all)) - mdates.date2num(_dt(begin_all)), 1e-9)
    for y, g in enumerate(groups):
        for i, (start, end, generation, members) in enumerate(data.timeline[g]):
            stop = end if end is not None else max(end_all, start)
            left = mdates.date2num(_dt(start))
            width = max(mdates.date2num(_dt(stop)) - left, 1e-9)
            color = "#dddddd" if members == 0 else palette[i % len(palette)]
            ax.broken_barh([(left, width)], (y - 0.35, 0.7), facecolors=color, edgecolor="#333", linewidth=0.4)
            # Spelled out ("3 members", never "3m", which reads as minutes), in the widest form
            # the bar holds; a bar too narrow for "g3" stays unlabelled (the table lists all).
            for text in (
                f"g{generation} · {_members(members)}",
                f"g{generation}\n{_members(members)}",
                f"g{generation}",
            ):
                if width >= span * _LABEL_FRACTION * max(len(line) for line in text.split("\n")):
                    ax.text(left + width / 2, y, text, ha="center", va="center", fontsize=8, clip_on=True)
                    break
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels(groups)
    ax.invert_yaxis()
    ax.xaxis_date(tz=UTC)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator(), tz=UTC))
    ax.set_xlabel("time (UTC); bar label: generation and member count; grey: Empty (no members)")
    ax.set_title("Generations per group")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def plot_rebalances(data: ReportData) -> str:
    plt = _plt()
    if data.rebalance_buckets:
        return _plot_rebalance_buckets(plt, data.rebalance_buckets)
    rows = data.rebalances[-MAX_REBALANCE_BARS:]
    if not rows:
        return _png(_empty(plt, "no rebalances in the log"))
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(11, 4.2))
    xs = list(range(len(rows)))
    moved = [r["partitions_moved"] or 0 for r in rows]
    new = [r["partitions_newly_assigned"] or 0 for r in rows]
    gone = [r["partitions_unassigned"] or 0 for r in rows]
    ax.bar(xs, moved, label="moved", color="#d62728")
    ax.bar(xs, new, bottom=moved, label="newly assigned", color="#2ca02c")
    ax.bar(xs, gone, bottom=[a + b for a, b in zip(moved, new)], label="unassigned", color="#7f7f7f")
    ax.set_xticks(xs)
    ax.set_xticklabels(
        [f"{r['group']} g{r['from_generation']}→g{r['to_generation']}" for r in rows],
        rotation=45,
        ha="right",
        fontsize=8,
    )
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("partitions")
    ax.set_title("Partitions moved per rebalance")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _plot_rebalance_buckets(plt: Any, buckets: list[dict[str, Any]]) -> str:
    """Every rebalance of every group, summed per time bucket: partitions (bars) and rebalances (line)."""
    import matplotlib.dates as mdates

    fig, ax = plt.subplots(figsize=(11, 4.2))
    width = buckets[0]["width"] / 86_400_000  # matplotlib dates are in days
    xs = [mdates.date2num(_dt(b["start"])) for b in buckets]
    bottom = [0] * len(buckets)
    for key, label, color in zip(_MOVES, ("moved", "newly assigned", "unassigned"), ("#d62728", "#2ca02c", "#7f7f7f")):
        ys = [b[key] or 0 for b in buckets]
        ax.bar(xs, ys, width=width * 0.9, align="edge", bottom=bottom, label=label, color=color)
        bottom = [a + b for a, b in zip(bottom, ys)]
    ax.set_ylabel("partitions (all groups)")
    ax.xaxis_date(tz=UTC)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator(), tz=UTC))
    count = ax.twinx()
    (line,) = count.plot(
        [x + width / 2 for x in xs], [b["rebalances"] for b in buckets], color="#1f77b4", marker=".", label="rebalances"
    )
    count.set_ylabel("rebalances", color="#1f77b4")
    count.set_ylim(bottom=0, top=max(b["rebalances"] for b in buckets) * 1.25 + 1)
    ax.set_ylim(top=max(bottom) * 1.25 + 1)  # headroom for the legend
    ax.set_xlabel(f"time (UTC), {len(buckets)} buckets of {_duration(buckets[0]['width'])}")
    ax.set_title("Partitions moved and rebalances, all groups, per time bucket")
    handles, labels = ax.get_legend_handles_labels()
    ax.legend([*handles, line], [*labels, "rebalances (right axis)"], fontsize=8, loc="upper center", ncol=4)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.3g} {unit}"
    return f"{ms} ms"


def plot_pauses(data: ReportData) -> str:
    plt = _plt()
    if not data.pause_histogram:
        return _png(_empty(plt, "no generation with members in the log"))
    fig, ax = plt.subplots(figsize=(11, 3.6))
    labels = [f"≤{_duration(bound)}" for bound, _ in data.pause_histogram]
    ax.bar(range(len(labels)), [n for _, n in data.pause_histogram], color="#9467bd")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("generations")
    ax.set_xlabel("sync phase: join phase end → assignment written (the join phase before it is not in the log)")
    ax.set_title(f"Sync phase per rebalance, all {data.pause_count} generations with members")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def plot_progress(data: ReportData) -> str:
    plt = _plt()
    import matplotlib.dates as mdates

    series = {g: pts for g, pts in data.progress.items() if pts}
    if not series:
        return _png(_empty(plt, "no offset commits in the log"))
    fig, ax = plt.subplots(figsize=(11, 4.2))
    for g, pts in series.items():
        ax.step([_dt(t) for t, _ in pts], [v for _, v in pts], where="post", label=g, marker=".", markersize=3)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator(), tz=UTC))
    ax.set_ylabel("sum of committed offsets")
    ax.set_xlabel("commit time (UTC)")
    ax.set_title("Commit progress per group")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return _png(fig)


# --------------------------------------------------------------------------------------------
# HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:1.5em;margin-bottom:0}h2{margin-top:1.8em;border-bottom:1px solid #ddd}
.sub{color:#666;margin-top:4px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right}
img.plot{max-width:100%;border:1px solid #eee}
.kind-backwards_commit{color:#b00}.kind-double_assigned{color:#a50}.kind-unassigned{color:#555}
.note{color:#666;font-size:12px}
"""


def _fmt_time(ms: int | None) -> str:
    if ms is None:
        return ""
    return _dt(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _cell(v: Any) -> str:
    if v is None:
        return "<td></td>"
    if isinstance(v, bool):
        return f"<td>{v}</td>"
    if isinstance(v, int):
        return f'<td class="n">{v}</td>'
    if isinstance(v, list):
        return "<td>" + html.escape(", ".join(str(x) for x in v)) + "</td>"
    return f"<td>{html.escape(str(v))}</td>"


def _table(headers: list[str], rows: list[list[Any]], row_class: list[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f' class="{row_class[i]}"' if row_class else ""
        out.append(f"<tr{cls}>" + "".join(_cell(v) for v in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _member_label(m: dict[str, Any]) -> str:
    n = m["partitions"]
    # non-consumer protocols: no partitions
    owned = f", {n} partition{'' if n == 1 else 's'}" if n is not None and n >= 0 else ""
    return f"{m['key']} ({m['client_id']}, {m['client_host']}{owned})"


_WORST_HEADERS = [
    "group",
    "backwards commits",
    "double assigned",
    "unassigned",
    "generations",
    "rebalances",
    "partitions moved",
    "longest sync phase ms",
]


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def _plot(pid: str, heading: str, png: str) -> str:
    return f'<img class="plot" id="plot-{pid}" alt="{html.escape(heading)}" src="data:image/png;base64,{png}">'


def render(data: ReportData, *, title: str = "groupd analysis", subtitle: str = "") -> str:
    shown = data.groups_shown
    n_groups = data.summary.get("groups", 0)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">{html.escape(subtitle)} · generated {datetime.now(UTC):%Y-%m-%d %H:%M:%SZ}</p>',
        "<h2>Summary</h2>",
        _table(["", "count"], [[k, v] for k, v in data.summary.items()]),
    ]

    parts.append(f'<h2 id="anomalies">Anomalies ({data.anomaly_count})</h2>')
    if data.anomalies:
        parts.append(
            _note(
                "most serious first: commits going backwards, then partitions assigned twice, then "
                "partitions left unassigned; by time within each kind"
                + (
                    f"; the first {len(data.anomalies)} of {data.anomaly_count} shown, the rest are in the anomalies table"
                    if data.anomaly_count > len(data.anomalies)
                    else ""
                )
            )
        )
        parts.append(
            _table(
                [
                    "time",
                    "kind",
                    "group",
                    "generation",
                    "topic",
                    "partition",
                    "members",
                    "offset",
                    "previous",
                    "detail",
                ],
                [
                    [
                        _fmt_time(a["at"]),
                        a["kind"],
                        a["group"],
                        a["generation"],
                        a["topic"],
                        a["partition"],
                        a["members"],
                        a["offset"],
                        a["previous_offset"],
                        a["detail"],
                    ]
                    for a in data.anomalies
                ],
                [f"kind-{a['kind']}" for a in data.anomalies],
            )
        )
    else:
        parts.append("<p>none</p>")

    parts.append('<h2 id="worst-groups">Groups, worst first</h2>')
    if data.worst_groups:
        more = n_groups - len(data.worst_groups)
        parts.append(
            _note(
                "ranked by commits going backwards, double assignments, unassigned partitions, then rebalances"
                + (f"; {len(data.worst_groups)} of {n_groups} groups shown, {more} left out" if more > 0 else "")
            )
        )
        parts.append(
            _table(
                _WORST_HEADERS,
                [
                    [
                        g["group"],
                        g["backwards_commit"],
                        g["double_assigned"],
                        g["unassigned"],
                        g["generations"],
                        g["rebalances"],
                        g["moved"],
                        g["max_pause_ms"],
                    ]
                    for g in data.worst_groups
                ],
            )
        )
    else:
        parts.append("<p>none</p>")

    parts.append('<h2 id="pauses">Sync phase per rebalance</h2>')
    parts.append(
        _note(
            "The sync phase, measured per generation from the end of its join phase (the group-metadata "
            "record's currentStateTimestamp: every member had rejoined and got its JoinGroup response) to "
            "the assignment being written (the record's log time: the leader's SyncGroup brought it; the "
            "SyncGroup responses go out once it is durable). The first JoinGroup is not in the log -- "
            "Kafka's coordinator writes nothing when a rebalance starts -- so the join phase before it "
            "(bounded by the rebalance timeout) comes on top of these figures. This is not the dashboard's "
            '"paused" (first JoinGroup to last SyncGroup answer, join phase included: seconds where this '
            'is milliseconds); the dashboard shows this same "sync phase" next to it.'
        )
    )
    parts.append(_plot("pauses", "Sync phase per rebalance", plot_pauses(data)))
    if data.pauses:
        if data.pause_count > len(data.pauses):
            parts.append(_note(f"the {len(data.pauses)} longest of {data.pause_count}"))
        parts.append(
            _table(
                ["assignment written", "group", "generation", "members", "sync phase ms"],
                [
                    [_fmt_time(p["at"]), p["group"], p["generation"], p["member_count"], p["pause_ms"]]
                    for p in data.pauses
                ],
            )
        )

    parts.append('<h2 id="rebalances">Partitions moved per rebalance</h2>')
    total = data.summary.get("rebalances", 0)
    if data.rebalance_buckets:
        parts.append(
            _note(
                f"all {total} rebalances of all groups, summed per time bucket (one bar each above {MAX_REBALANCE_BARS})"
            )
        )
    elif total:
        parts.append(_note(f"all {total} rebalances, one bar each"))
    parts.append(_plot("rebalances", "Partitions moved per rebalance", plot_rebalances(data)))

    parts.append('<h2 id="generations">Generations timeline</h2>')
    if shown.get("all", 0) > shown.get("timeline", 0):
        parts.append(
            _note(
                f"the {shown['timeline']} groups with most generations of {shown['all']}; "
                f"{shown['all'] - shown['timeline']} left out (all are in the generations table)"
            )
        )
    parts.append(_plot("generations", "Generations timeline", plot_timeline(data)))

    parts.append('<h2 id="progress">Commit progress</h2>')
    committing = data.summary.get("committing groups", 0)
    if committing > shown.get("progress", 0):
        parts.append(
            _note(
                f"the {shown['progress']} groups with most commits of {committing} committing groups; the rest left out"
            )
        )
    parts.append(_plot("progress", "Commit progress", plot_progress(data)))

    parts += _consumer_section(data)
    if data.share.get("groups"):  # only a log with share groups gets their section
        parts += _share_section(data)

    parts.append('<h2 id="rebalance-list">Rebalances</h2>')
    if total > len(data.rebalances):
        parts.append(_note(f"the latest {len(data.rebalances)} of {total}; all are in the rebalances table"))
    parts.append(
        _table(
            [
                "completed",
                "group",
                "from",
                "to",
                "members",
                "joined",
                "left",
                "moved",
                "kept",
                "new",
                "unassigned",
                "max-min",
            ],
            [
                [
                    _fmt_time(r["at"]),
                    r["group"],
                    r["from_generation"],
                    r["to_generation"],
                    f"{r['members_before']}→{r['members_after']}",
                    r["members_joined"],
                    r["members_left"],
                    r["partitions_moved"],
                    r["partitions_kept"],
                    r["partitions_newly_assigned"],
                    r["partitions_unassigned"],
                    r["partition_spread"],
                ]
                for r in data.rebalances
            ],
        )
        if data.rebalances
        else "<p>none</p>"
    )
    parts.append('<h2 id="generation-list">Generations</h2>')
    if data.summary.get("generations", 0) > len(data.generations):
        parts.append(
            _note(
                f"the latest {len(data.generations)} of {data.summary['generations']}; all are in the generations table"
            )
        )
    parts.append(
        _table(
            ["started", "group", "generation", "type", "protocol", "leader", "members", "duration ms"],
            [
                [
                    _fmt_time(g["at"]),
                    g["group"],
                    g["generation"],
                    g["protocol_type"],
                    g["protocol"],
                    g["leader"],
                    [_member_label(m) for m in g["members"]],
                    g["duration_ms"],
                ]
                for g in data.generations
            ],
        )
        if data.generations
        else "<p>none</p>"
    )
    parts.append("</body></html>")
    return "\n".join(parts)
