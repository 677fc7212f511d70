"""``report.html``: one self-contained page (plots inline as base64 PNG, no external resources).

``collect`` brings the few thousand numbers the page needs to the driver (bounded however large
the log: top groups, downsampled series, capped lists); ``render`` draws them with matplotlib
and writes the HTML. Plots:

* generations timeline per group -- one bar per generation, from when its assignment became
  durable to when the next one did (or the group was deleted, or the data ends);
* partitions moved per rebalance -- moved / newly assigned / unassigned per rebalance;
* commit progress per group over time -- the sum over a group's partitions of its latest
  committed offsets, after every commit (a rewind shows as a drop);
* then the anomaly list, and the latest rebalances and generations as tables.
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

from .tables import Tables

MAX_TIMELINE_GROUPS = 25
MAX_PROGRESS_GROUPS = 10
MAX_REBALANCE_BARS = 60
PROGRESS_POINTS = 400
MAX_LIST_ROWS = 500


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
        .orderBy("at", "kind", "group", "topic", "partition")
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
        "anomalies": anomaly_count,
    }
    by_kind = {r.kind: r["count"] for r in t.anomalies.groupBy("kind").count().collect()}
    for kind in ("backwards_commit", "double_assigned", "unassigned"):
        summary[f"  {kind}"] = by_kind.get(kind, 0)
    return ReportData(
        summary=summary,
        timeline=timeline,
        data_end_ms=data_end,
        rebalances=rebalances,
        progress=progress,
        anomalies=anomalies,
        anomaly_count=anomaly_count,
        generations=generations,
        groups_shown={"timeline": len(top), "all": len(per_group)},
    )


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
            if width >= span * 0.03:  # label only bars wide enough to hold it
                ax.text(
                    left + width / 2,
                    y,
                    f"g{generation}\n{members}m",
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    clip_on=True,
                )
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels(groups)
    ax.invert_yaxis()
    ax.xaxis_date(tz=UTC)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator(), tz=UTC))
    ax.set_xlabel("time (UTC); label: generation, members; grey: Empty")
    ax.set_title("Generations per group")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def plot_rebalances(data: ReportData) -> str:
    plt = _plt()
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
        rotation=60,
        ha="right",
        fontsize=7,
    )
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("partitions")
    ax.set_title("Partitions moved per rebalance")
    ax.legend(fontsize=8)
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
    owned = f", {n}p" if n is not None and n >= 0 else ""  # non-consumer protocols: no partitions
    return f"{m['key']} ({m['client_id']}, {m['client_host']}{owned})"


def render(data: ReportData, *, title: str = "groupd analysis", subtitle: str = "") -> str:
    plots = [
        ("generations", "Generations timeline", plot_timeline(data)),
        ("rebalances", "Partitions moved per rebalance", plot_rebalances(data)),
        ("progress", "Commit progress", plot_progress(data)),
    ]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">{html.escape(subtitle)} · generated {datetime.now(UTC):%Y-%m-%d %H:%M:%SZ}</p>',
        "<h2>Summary</h2>",
        _table(["", "count"], [[k, v] for k, v in data.summary.items()]),
    ]
    shown = data.groups_shown
    for pid, heading, png in plots:
        parts.append(f'<h2 id="{pid}">{html.escape(heading)}</h2>')
        if pid == "generations" and shown and shown.get("all", 0) > shown.get("timeline", 0):
            parts.append(f'<p class="note">the {shown["timeline"]} groups with most generations of {shown["all"]}</p>')
        parts.append(
            f'<img class="plot" id="plot-{pid}" alt="{html.escape(heading)}" src="data:image/png;base64,{png}">'
        )

    parts.append(f'<h2 id="anomalies">Anomalies ({data.anomaly_count})</h2>')
    if data.anomalies:
        if data.anomaly_count > len(data.anomalies):
            parts.append(f'<p class="note">first {len(data.anomalies)} of {data.anomaly_count}</p>')
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

    parts.append('<h2 id="rebalance-list">Rebalances</h2>')
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
