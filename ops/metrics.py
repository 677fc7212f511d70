"""Prometheus metrics (``--metrics-port``): what the daemon serves, how hot it runs, how groups behave.

Where each figure comes from, and why it is collected that way:

- **Requests** are counted on the request path (``Dispatcher.observers``), which costs ~10 us per
  heartbeat in all. prometheus-client's own ``Counter.labels(...).inc()`` plus
  ``Histogram.observe()`` take 2-3 us per call (a lock per value, a Python loop over the buckets),
  so the per-request work here is a dict lookup and three in-place additions on plain objects
  (``RequestStats``), turned into Prometheus families only when scraped.
- **Groups by state, members, pending appends, start-up replay, parked fetches** are read from the
  coordinator core, the shell and the data plane at scrape time (``_StateCollector``): nothing at
  all on the request path.
- **Per-group lag, state and size** (``_GroupCollector``) are computed at scrape time too, from the
  core's committed offsets and the logs' end offsets (``group_view``). One series per group (and
  per group and topic for lag) would let a broker with many groups flood Prometheus, so at most
  ``max_groups`` groups get series (``--metrics-max-groups``): the most lagging first, then by name;
  the others are counted in ``groupd_group_metrics_omitted_groups`` and their lag summed in
  ``groupd_group_metrics_omitted_lag``, so a sum over groups still adds up.
- **KIP-848 consumer groups**: groups by state and their members are read at scrape time like the
  classic ones; heartbeats are the ConsumerGroupHeartbeat slots of ``RequestStats`` (nothing more on
  the request path); group epoch bumps, target assignment runs, member assignment changes, members
  removed and the time from a bump to Stable come from the records of each durable write
  (``CoordinatorListener.consumer_group_written``: once per change, not per heartbeat).
- **Rebalances and expiries** come through the core's ``CoordinatorListener`` hooks, and **disk
  writes and fsyncs** through the appender's ``AppendObserver``; those are rare enough for ordinary
  prometheus-client counters and histograms (which are thread-safe: the appender reports from its
  executor threads).

The endpoint is the tiny HTTP/1.1 server of ``ops.http`` on the daemon's own event loop, not
prometheus-client's ``start_http_server`` thread: a scrape then reads the core's dicts on the thread
that mutates them, so it never sees one half-changed, and it never competes with the loop for the GIL.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

import structlog
from groupd.broker.data_plane import DataPlane
from groupd.broker.group_shell import GroupShell
from groupd.broker.share import SharePartitions
from groupd.broker.txn_shell import TxnShell
from groupd.coordinator import CoordinatorListener, GroupCoordinator, GroupState
from groupd.coordinator import listener as events
from groupd.coordinator.consumer import ConsumerGroupState
from groupd.coordinator.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from groupd.coordinator.share import ShareGroupState
from groupd.protocol.dispatch import Dispatcher
from groupd.protocol.faults import FaultInjector
from groupd.protocol.messages import API_BY_KEY
from groupd.protocol.server import Request, Server
from groupd.storage import Appender, LogManager, PartitionLog
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from . import group_view
from .http import HttpRequest, HttpServer, Response, text

log = structlog.get_logger("groupd.ops.metrics")

# Request latency: a heartbeat takes tens of microseconds, a parked JoinGroup up to the rebalance timeout.
REQUEST_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)
REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
DISK_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

_OFFSETS_PREFIX = "__consumer_offsets-"
# What DataPlane.fetch_session_stats reports (zeros before a data plane is bound).
_FETCH_SESSION_STATS = ("sessions", "partitions", "evictions", "sessionless", "full", "incremental", "error")
CONSUMER_GROUP_HEARTBEAT = 68  # api key


class _Histogram:
    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(REQUEST_BUCKETS) + 1)  # the last one is +Inf
        self.sum = 0.0


class _Slot:
    __slots__ = ("count", "hist")

    def __init__(self, hist: _Histogram) -> None:
        self.count = 0
        self.hist = hist


class RequestStats:
    """Requests by (api, version, top-level error code) and latency by api, in plain Python objects.

    Only ever touched on the event loop thread (the dispatcher's observer and the scrape), so it
    needs no lock."""

    def __init__(self) -> None:
        self._slots: dict[tuple[int, int, Any], _Slot] = {}
        self._hists: dict[int, _Histogram] = {}

    def observe(self, req: Request, body: dict[str, Any], elapsed: float) -> None:
        # The hot path: one dict lookup, then in-place additions. error_code is None for responses
        # without a top-level one (Metadata, Fetch, OffsetCommit, ...).
        key = (req.api_key, req.api_version, body.get("error_code"))
        slot = self._slots.get(key)
        if slot is None:
            slot = self._new_slot(key)
        slot.count += 1
        if req.received_ns:  # requests the dispatcher made up itself (version fallbacks) have no start
            h = slot.hist
            h.counts[bisect_left(REQUEST_BUCKETS, elapsed)] += 1
            h.sum += elapsed

    def _new_slot(self, key: tuple[int, int, Any]) -> _Slot:
        hist = self._hists.get(key[0])
        if hist is None:
            hist = self._hists[key[0]] = _Histogram()
        slot = self._slots[key] = _Slot(hist)
        return slot

    def families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "groupd_requests",
            "Requests answered, by API, version and top-level error code",
            labels=["api", "version", "error_code"],
        )
        for (api_key, version, code), slot in sorted(self._slots.items(), key=_slot_order):
            requests.add_metric(
                [_api_name(api_key), str(version), "none" if code is None else str(int(code))], slot.count
            )
        yield requests
        latency = HistogramMetricFamily(
            "groupd_request_duration_seconds",
            "Time from a request's decoding to its response's encoding (parked JoinGroup/SyncGroup included)",
            labels=["api"],
        )
        bounds = [floatToGoString(b) for b in REQUEST_BUCKETS] + ["+Inf"]
        for api_key, hist in sorted(self._hists.items()):
            cumulative, buckets = 0, []
            for bound, n in zip(bounds, hist.counts):
                cumulative += n
                buckets.append((bound, cumulative))
            latency.add_metric([_api_name(api_key)], buckets, hist.sum)
        yield latency
        heartbeats = CounterMetricFamily(
            "groupd_consumer_group_heartbeats",
            "ConsumerGroupHeartbeat requests answered (KIP-848), by error code",
            labels=["error_code"],
        )
        by_code: dict[str, int] = {"0": 0}
        for (api_key, _version, code), slot in self._slots.items():
            if api_key == CONSUMER_GROUP_HEARTBEAT:
                label = "none" if code is None else str(int(code))
                by_code[label] = by_code.get(label, 0) + slot.count
        for label, n in sorted(by_code.items(), key=lambda kv: int(kv[0]) if kv[0] != "none" else -1):
            heartbeats.add_metric([label], n)
        yield heartbeats


def _slot_order(item: tuple[tuple[int, int, Any], _Slot]) -> tuple[int, int, int]:
    (api_key, version, code), _ = item
    return api_key, version, -1 if code is None else int(code)


def _api_name(api_key: int) -> str:
    api = API_BY_KEY.get(api_key)
    return api.name if api is not None else str(api_key)


def _log_kind(plog: PartitionLog) -> str:
    return "offsets" if plog.path.name.startswith(_OFFSETS_PREFIX) else "data"


class _StateCollector(Collector):
    """Figures read from the live objects when Prometheus scrapes."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield from m.requests.families()
        if m.faults is not None:
            injected = CounterMetricFamily(
                "groupd_faults_injected", "Faults injected (control endpoint), by API and kind", labels=["api", "kind"]
            )
            for (api, kind), n in sorted(m.faults.counts.items()):
                injected.add_metric([api, kind], n)
            yield injected
        core, shell = m.core, m.shell
        if core is not None:
            states = dict.fromkeys(GroupState, 0)
            members = 0
            for group in core.groups.values():
                states[group.state] += 1
                members += len(group.members)
            groups = GaugeMetricFamily("groupd_groups", "Classic groups by state", labels=["state"])
            for state, n in states.items():
                groups.add_metric([str(state)], n)
            yield groups
            modern = dict.fromkeys(ConsumerGroupState, 0)
            modern_members = 0
            for cg in core.consumer.groups.groups.values():
                modern[cg.state] += 1
                modern_members += len(cg.members)
            by_type = GaugeMetricFamily(
                "groupd_groups_by_type",
                "Groups by type (classic, consumer = KIP-848, share = KIP-932) and state",
                labels=["type", "state"],
            )
            for state, n in states.items():
                by_type.add_metric(["classic", str(state)], n)
            for cstate, n in modern.items():
                by_type.add_metric(["consumer", cstate.value], n)
            shares = dict.fromkeys(ShareGroupState, 0)
            share_members = 0
            for sg in core.share.groups.groups.values():
                shares[sg.state] += 1
                share_members += len(sg.members)
            for sstate, n in shares.items():
                by_type.add_metric(["share", sstate.value], n)
            yield by_type
            yield GaugeMetricFamily(
                "groupd_share_group_members", "Members of all KIP-932 share groups", value=share_members
            )
            yield GaugeMetricFamily("groupd_group_members", "Members of all classic groups", value=members)
            yield GaugeMetricFamily(
                "groupd_consumer_group_members", "Members of all KIP-848 consumer groups", value=modern_members
            )
            yield GaugeMetricFamily(
                "groupd_offsets_pending_appends",
                "Coordinator records waiting to be written to __consumer_offsets",
                value=core.pending_appends,
            )
        yield GaugeMetricFamily(
            "groupd_fetch_parked",
            "Fetch requests waiting for min_bytes or max_wait_ms (dropped when their connection closes)",
            value=m.data.parked_fetches if m.data is not None else 0,
        )
        fs = m.data.fetch_session_stats() if m.data is not None else dict.fromkeys(_FETCH_SESSION_STATS, 0)
        yield GaugeMetricFamily(
            "groupd_fetch_sessions",
            "Incremental fetch sessions (KIP-227) cached by the brokers (Kafka's NumIncrementalFetchSessions)",
            value=fs["sessions"],
        )
        yield GaugeMetricFamily(
            "groupd_fetch_session_partitions",
            "Partitions held by those sessions (Kafka's NumIncrementalFetchPartitionsCached)",
            value=fs["partitions"],
        )
        yield CounterMetricFamily(
            "groupd_fetch_session_evictions",
            "Fetch sessions evicted to make room for new ones (Kafka's IncrementalFetchSessionEvictionsPerSec)",
            value=fs["evictions"],
        )
        by_context = CounterMetricFamily(
            "groupd_fetch_session_requests",
            "Fetch requests by session context: sessionless, full (opens a session), incremental, error "
            "(FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH)",
            labels=["context"],
        )
        for kind in ("sessionless", "full", "incremental", "error"):
            by_context.add_metric([kind], fs[kind])
        yield by_context
        if m.txns is not None:
            t = m.txns.stats()
            yield GaugeMetricFamily(
                "groupd_transactions_open",
                "Transactions begun and not yet complete (Ongoing, PrepareCommit, PrepareAbort)",
                value=t["open"],
            )
            yield GaugeMetricFamily(
                "groupd_transactional_ids", "Transactional ids the coordinator holds", value=t["transactional_ids"]
            )
            yield CounterMetricFamily(
                "groupd_transactions_committed", "Transactions committed (CompleteCommit written)", value=t["commits"]
            )
            yield CounterMetricFamily(
                "groupd_transactions_aborted",
                "Transactions aborted (CompleteAbort written): by the producer, by a fence or by a timeout",
                value=t["aborts"],
            )
            yield CounterMetricFamily(
                "groupd_transactions_timed_out",
                "Transactions aborted by the coordinator after transaction.timeout.ms",
                value=t["timeouts"],
            )
        if m.share is not None:
            sh = m.share.stats()
            yield GaugeMetricFamily(
                "groupd_share_partitions",
                "Share-partitions (group, topic, partition) in memory",
                value=sh["share_partitions"],
            )
            yield GaugeMetricFamily(
                "groupd_share_in_flight_records",
                "Records of share-partitions between their start and end offsets (not yet acknowledged or archived)",
                value=sh["in_flight"],
            )
            yield GaugeMetricFamily(
                "groupd_share_acquired_records", "Records a share consumer holds under a lock", value=sh["acquired"]
            )
            yield GaugeMetricFamily("groupd_share_sessions", "Share sessions (ShareFetch)", value=sh["sessions"])
            yield CounterMetricFamily(
                "groupd_share_deliveries",
                "Records handed to share consumers (redeliveries included)",
                value=sh["deliveries"],
            )
            yield CounterMetricFamily(
                "groupd_share_redeliveries",
                "Records handed out again after a release, a lock expiry or a session closing",
                value=sh["redeliveries"],
            )
            yield CounterMetricFamily(
                "groupd_share_lock_expiries",
                "Acquired records released because their lock expired",
                value=sh["lock_expiries"],
            )
            yield CounterMetricFamily(
                "groupd_share_archived",
                "Records archived: rejected, at the delivery-count limit, control or aborted records",
                value=sh["archived"],
            )
        if shell is not None:
            p = shell.load_progress
            yield CounterMetricFamily(
                "groupd_offsets_load_records", "Records replayed from __consumer_offsets at start-up", value=p.records
            )
            yield CounterMetricFamily(
                "groupd_offsets_load_skipped_records",
                "Undecodable records skipped during the start-up replay",
                value=p.skipped,
            )
            yield GaugeMetricFamily(
                "groupd_offsets_load_partitions", "__consumer_offsets partitions to replay", value=p.partitions_total
            )
            yield GaugeMetricFamily(
                "groupd_offsets_load_partitions_loaded",
                "__consumer_offsets partitions replayed so far (groups of the others answer COORDINATOR_LOAD_IN_PROGRESS)",
                value=p.partitions_loaded,
            )
            yield GaugeMetricFamily(
                "groupd_offsets_load_duration_seconds",
                "Duration of the start-up replay (so far, while it runs)",
                value=p.seconds(),
            )


def _share_by_group(share: Any) -> dict[str, dict[str, int]]:
    """Per share group, over its share-partitions in memory (``SharePartitions.partitions``): the
    in-flight and acquired records now, and the counters ``SharePartition`` keeps since it was loaded
    (a restart or a deleted topic starts them again, as any counter of a restarted process)."""
    out: dict[str, dict[str, int]] = {}
    for key, sp in list(getattr(share, "partitions", {}).items()):
        g = out.setdefault(
            key.group_id,
            dict.fromkeys(("in_flight", "acquired", "deliveries", "redeliveries", "lock_expiries", "archived"), 0),
        )
        g["in_flight"] += sp.in_flight()
        g["acquired"] += sp.acquired_count()
        g["deliveries"] += sp.deliveries
        g["redeliveries"] += sp.redeliveries
        g["lock_expiries"] += sp.lock_expiries
        g["archived"] += sp.archived
    return out


class _GroupCollector(Collector):
    """Per-group series, read at scrape time, for at most ``max_groups`` groups (0 = no cap)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        core = m.core
        if core is None:
            return
        lags = {g.group_id: g for g in group_view.all_lags(core, m.logs)}
        totals = {gid: lag.total for gid, lag in lags.items()}
        gids = sorted(group_view.group_ids(core), key=lambda gid: (-totals.get(gid, 0), gid))
        cap = m.max_groups
        kept, omitted = (gids[:cap], gids[cap:]) if cap > 0 else (gids, [])
        lag = GaugeMetricFamily(
            "groupd_group_lag",
            "Log end offset minus committed offset, summed over the group's committed partitions of a topic",
            labels=["group", "topic"],
        )
        state = GaugeMetricFamily("groupd_group_state", "1 for the group's current state", labels=["group", "state"])
        size = GaugeMetricFamily("groupd_group_size", "Members of the group", labels=["group"])
        epoch = GaugeMetricFamily(
            "groupd_consumer_group_epoch",
            "A KIP-848 consumer group's group epoch and target assignment epoch",
            labels=["group", "epoch"],
        )
        share_fams = [
            (
                GaugeMetricFamily,
                "groupd_share_group_in_flight_records",
                "in_flight",
                "Records between a share group's share-partition start and end offsets",
            ),
            (
                GaugeMetricFamily,
                "groupd_share_group_acquired_records",
                "acquired",
                "Records a share group's consumers hold under a lock",
            ),
            (
                CounterMetricFamily,
                "groupd_share_group_deliveries",
                "deliveries",
                "Records handed to a share group's consumers (redeliveries included)",
            ),
            (
                CounterMetricFamily,
                "groupd_share_group_redeliveries",
                "redeliveries",
                "Records handed to a share group's consumers again",
            ),
            (
                CounterMetricFamily,
                "groupd_share_group_lock_expiries",
                "lock_expiries",
                "A share group's acquired records released because their lock expired",
            ),
            (
                CounterMetricFamily,
                "groupd_share_group_archived",
                "archived",
                "A share group's records archived (rejected, delivery-count limit, control, aborted)",
            ),
        ]
        share_out = [(key, kind(name, text, labels=["group"])) for kind, name, key, text in share_fams]
        per_share = _share_by_group(m.share)
        for gid in kept:
            for key, fam in share_out:
                if gid in per_share:
                    fam.add_metric([gid], per_share[gid][key])
            state.add_metric([gid, group_view.state_of(core, gid)], 1)
            size.add_metric([gid], group_view.size_of(core, gid))
            cg = group_view.consumer_group(core, gid)
            if cg is not None:
                epoch.add_metric([gid, "group"], cg.group_epoch)
                epoch.add_metric([gid, "target"], cg.target_epoch)
            if gid in lags:
                for topic, n in sorted(lags[gid].by_topic().items()):
                    lag.add_metric([gid, topic], n)
        yield lag
        yield state
        yield size
        yield epoch
        for _key, fam in share_out:
            yield fam
        yield GaugeMetricFamily(
            "groupd_group_metrics_omitted_groups",
            "Groups left out of the per-group series (beyond --metrics-max-groups)",
            value=len(omitted),
        )
        yield GaugeMetricFamily(
            "groupd_group_metrics_omitted_lag",
            "Summed lag of the groups left out of the per-group series",
            value=sum(totals.get(gid, 0) for gid in omitted),
        )


def _installed_version() -> str:
    # Asked of the installed distribution, not of the ``groupd`` package: ops sits below the entry
    # point and never imports it.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("groupd")
    except PackageNotFoundError:  # a source tree without an install
        return "0.0.0"


class Metrics(CoordinatorListener):
    """Every groupd metric in one registry of its own, and the endpoint that serves it.

    ``bind`` hooks it into the running parts; it is the core's listener and the appender's
    observer itself."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        process_metrics: bool = True,
        version: str | None = None,
        max_groups: int = 1000,
    ) -> None:
        # No `_created` series next to every counter and histogram: they double the exposition for
        # a figure (process start time) that process_start_time_seconds already gives.
        disable_created_metrics()
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = RequestStats()
        self.core: GroupCoordinator | None = None
        self.shell: GroupShell | None = None
        self.txns: TxnShell | None = None
        self.share: SharePartitions | None = None
        self.data: DataPlane | None = None
        self.logs: LogManager | None = None
        self.faults: FaultInjector | None = None
        self.max_groups = max_groups
        self._http: HttpServer | None = None

        self.connections = Gauge("groupd_connections", "Open client connections", registry=r)
        self.rebalances_started = Counter("groupd_rebalances_started", "Groups entering PreparingRebalance", registry=r)
        self.rebalances_completed = Counter(
            "groupd_rebalances_completed",
            "Rebalances that ended, in Stable or (everyone left) in Empty",
            ["outcome"],
            registry=r,
        )
        self.rebalance_duration = Histogram(
            "groupd_rebalance_duration_seconds",
            "From entering PreparingRebalance to Stable or Empty",
            buckets=REBALANCE_BUCKETS,
            registry=r,
        )
        self.member_expirations = Counter(
            "groupd_member_expirations", "Members removed on a deadline, by reason", ["reason"], registry=r
        )
        self.log_appends = Counter(
            "groupd_log_appends",
            "Disk writes (group commit: one write holds many callers)",
            ["log", "result"],
            registry=r,
        )
        self.log_append_items = Counter(
            "groupd_log_append_items", "Callers' record sets and batches written", ["log"], registry=r
        )
        self.log_append_seconds = Histogram(
            "groupd_log_append_duration_seconds",
            "Duration of one disk write (with its fsync under --fsync always)",
            ["log"],
            buckets=DISK_BUCKETS,
            registry=r,
        )
        self.log_fsyncs = Counter("groupd_log_fsyncs", "fsyncs of partition logs", ["log", "result"], registry=r)
        self.log_fsync_seconds = Histogram(
            "groupd_log_fsync_duration_seconds", "Duration of one fsync", ["log"], buckets=DISK_BUCKETS, registry=r
        )
        self.log_corrupt_batches = Counter(
            "groupd_log_corrupt_batches",
            "Damaged record batches found (bad CRC or undecodable) and skipped by the start-up replay",
            ["log"],
            registry=r,
        )
        self.consumer_epoch_bumps = Counter(
            "groupd_consumer_group_epoch_bumps",
            "KIP-848 group epoch bumps (a member joined, left or changed its subscription; topics changed)",
            registry=r,
        )
        self.consumer_target_assignments = Counter(
            "groupd_consumer_group_target_assignments",
            "Target assignments computed by the server-side assignor (KIP-848)",
            registry=r,
        )
        self.consumer_assignment_changes = Counter(
            "groupd_consumer_group_member_assignment_changes",
            "Reconciliation steps: a member's current assignment or epoch written (KIP-848)",
            registry=r,
        )
        self.consumer_members_removed = Counter(
            "groupd_consumer_group_members_removed",
            "Members removed from KIP-848 consumer groups (left, fenced, or with their group deleted)",
            registry=r,
        )
        self.consumer_rebalance_duration = Histogram(
            "groupd_consumer_group_rebalance_duration_seconds",
            "From a KIP-848 group epoch bump to every member reconciled at the target epoch (Stable)",
            buckets=REBALANCE_BUCKETS,
            registry=r,
        )
        # group -> monotonic time of the first epoch bump not yet followed by Stable
        self._consumer_unsettled: dict[str, float] = {}
        build = Gauge("groupd_build_info", "groupd's version", ["version"], registry=r)
        build.labels(version or _installed_version()).set(1)

        # Every label value known in advance is exported from the start, at 0, so that rate() and
        # alerts see a series before its first event.
        for outcome in events.REBALANCE_OUTCOMES:
            self.rebalances_completed.labels(outcome)
        for reason in events.EXPIRY_REASONS:
            self.member_expirations.labels(reason)
        self._appends: dict[tuple[str, bool], Callable[[], None]] = {}
        self._fsyncs: dict[tuple[str, bool], Callable[[], None]] = {}
        for kind in ("offsets", "data"):
            for ok in (True, False):
                self._appends[kind, ok] = self.log_appends.labels(kind, "ok" if ok else "error").inc
                self._fsyncs[kind, ok] = self.log_fsyncs.labels(kind, "ok" if ok else "error").inc
        self._corrupt = {k: self.log_corrupt_batches.labels(k).inc for k in ("offsets", "data")}
        self._append_items = {k: self.log_append_items.labels(k).inc for k in ("offsets", "data")}
        self._append_seconds = {k: self.log_append_seconds.labels(k).observe for k in ("offsets", "data")}
        self._fsync_seconds = {k: self.log_fsync_seconds.labels(k).observe for k in ("offsets", "data")}

        r.register(_StateCollector(self))
        r.register(_GroupCollector(self))
        if process_metrics:
            # Own registry, so the default collectors are added by hand (they are stateless readers).
            for c in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                r.register(c)

    # --- wiring -----------------------------------------------------------------------------------
    def bind(
        self,
        *,
        dispatcher: Dispatcher | None = None,
        server: Server | None = None,
        core: GroupCoordinator | None = None,
        shell: GroupShell | None = None,
        appender: Appender | None = None,
        data: DataPlane | None = None,
        logs: LogManager | None = None,
        faults: FaultInjector | None = None,
        txns: TxnShell | None = None,
        share: SharePartitions | None = None,
    ) -> None:
        if txns is not None:
            self.txns = txns
        if share is not None:
            self.share = share
        if faults is not None:
            self.faults = faults
        if dispatcher is not None:
            dispatcher.observers.append(self.requests.observe)
        if server is not None:
            previous = server.on_connection_change
            gauge_set = self.connections.set

            def on_connection_change(n: int) -> None:
                gauge_set(n)
                if previous is not None:
                    previous(n)

            server.on_connection_change = on_connection_change
        if core is not None:
            self.core = core
            core.listener = self
        if shell is not None:
            self.shell = shell
        if appender is not None:
            appender.observer = self
        if data is not None:
            self.data = data
        if logs is not None:
            self.logs = logs
            logs.corruption_observer = self.corrupt_batch

    # --- CoordinatorListener ----------------------------------------------------------------------
    def rebalance_started(self, group_id: str, generation: int, members: int, reason: str) -> None:
        self.rebalances_started.inc()

    def rebalance_completed(
        self, group_id: str, generation: int, members: int, duration_ms: int | None, outcome: str
    ) -> None:
        self.rebalances_completed.labels(outcome).inc()
        if duration_ms is not None:
            self.rebalance_duration.observe(duration_ms / 1000)

    def member_expired(self, group_id: str, member_id: str, generation: int, reason: str) -> None:
        self.member_expirations.labels(reason).inc()

    def consumer_group_written(self, group_id: str, records: Any) -> None:
        bumps = assignments = changes = removed = 0
        for key, value in records:
            if isinstance(value, ConsumerGroupMetadataValue):
                bumps += 1
            elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
                assignments += 1
            elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
                changes += 1
            elif value is None and isinstance(key, ConsumerGroupMemberMetadataKey):
                removed += 1
        for counter, n in (
            (self.consumer_epoch_bumps, bumps),
            (self.consumer_target_assignments, assignments),
            (self.consumer_assignment_changes, changes),
            (self.consumer_members_removed, removed),
        ):
            if n:
                counter.inc(n)
        now = time.monotonic()
        if bumps:
            self._consumer_unsettled.setdefault(group_id, now)
        group = self.core.consumer.group(group_id) if self.core is not None else None
        if group is None or group.state == ConsumerGroupState.EMPTY:
            self._consumer_unsettled.pop(group_id, None)  # nobody left to reconcile
        elif group.state == ConsumerGroupState.STABLE and group_id in self._consumer_unsettled:
            self.consumer_rebalance_duration.observe(now - self._consumer_unsettled.pop(group_id))

    # --- AppendObserver (called on executor threads) ----------------------------------------------
    def write_done(self, plog: PartitionLog, seconds: float, items: int, ok: bool) -> None:
        kind = _log_kind(plog)
        self._appends[kind, ok]()
        if ok:
            self._append_items[kind](items)
            self._append_seconds[kind](seconds)

    def fsync_done(self, plog: PartitionLog, seconds: float, ok: bool) -> None:
        kind = _log_kind(plog)
        self._fsyncs[kind, ok]()
        if ok:
            self._fsync_seconds[kind](seconds)

    def corrupt_batch(self, plog: PartitionLog) -> None:
        self._corrupt[_log_kind(plog)]()

    # --- the endpoint -----------------------------------------------------------------------------
    def render(self, accept: str = "") -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._http = HttpServer(
            "metrics",
            {"/metrics": self._serve_metrics, "/": _serve_root},
            not_found="not found; metrics are at /metrics",
        )
        host, port = await self._http.start(host, port)
        log.info("metrics_listening", metrics=f"http://{host}:{port}/metrics")
        return host, port

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def _serve_metrics(self, req: HttpRequest) -> Response:
        try:
            t0 = time.perf_counter()
            body, content_type = self.render(req.headers.get("accept", ""))
            log.debug("metrics_scraped", bytes=len(body), ms=round((time.perf_counter() - t0) * 1000, 2))
            return Response("200 OK", body, content_type)
        except Exception:
            log.exception("metrics_render_failed")
            return text("500 Internal Server Error", "metrics could not be rendered")


async def _serve_root(req: HttpRequest) -> Response:
    return text("200 OK", "groupd: metrics are at /metrics")
