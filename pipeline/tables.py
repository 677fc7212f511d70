"""The four analytic tables, derived from the raw record DataFrame (``source.read_log``).

Theory of operation
-------------------
Every record of one group lives in one ``__consumer_offsets`` partition, so ordering a group's
records by (log partition, log offset) replays its history exactly as the coordinator wrote it.

*Generations.* The coordinator writes a group-metadata record when a generation's assignment is
persisted (the end of SyncGroup), when a static member replaces its old member id within the same
generation, and when the group becomes Empty; a tombstone when the group is deleted. (An empty
generation-0 record, which Kafka 4 writes when a join creates a group, is the group's creation and
starts no generation.) A generation
is therefore a *run* of consecutive group-metadata records carrying the same generation number (a
tombstone ends a run; a group deleted and created again starts counting anew, and its new
generations are new runs). Per run: the first record says when it started (``started_at``: the
record's log time, i.e. when the assignment became durable; ``join_completed_at``: its
currentStateTimestamp, when the join phase ended), the last record says who the members are
(after any static replacement). It ends when the next run starts or the group is deleted.

*Members* are identified by ``coalesce(group_instance_id, member_id)`` when comparing
generations: a static member that restarts under a new member id is the same member, which is
what "who moved my partitions" means.

*Rebalances* pair each generation with the previous one of its group (``seq`` - 1). A partition
is *kept* when its owners are the same in both, *moved* when both have owners and they differ,
*newly assigned* when only the new generation assigns it and *unassigned* when only the old one
did. Partition statistics are null for groups whose protocol type is not ``consumer`` (their
assignments are not topic-partitions).

*Anomalies*:
``backwards_commit``  a committed offset lower than the previous commit of the same group, topic
                      and partition (a tombstone in between -- offsets deleted or expired --
                      starts the comparison afresh);
``double_assigned``   a partition owned by two or more members in one generation;
``unassigned``        a partition of a topic some member subscribes to that no member owns, in a
                      generation with members. A topic's partitions are ``0 .. n-1`` with n from
                      the data directory's ``topics.json`` when it lists the topic, otherwise one
                      more than the highest partition the log mentions anywhere. Not reported for
                      a generation in which no member got any partition and that a later
                      generation replaced: a client's first generation often looks like that (the
                      leader assigns nothing for a topic whose metadata it has not fetched yet, then
                      rejoins when it has), which is the normal start of a consumer, not a fault.
                      A group that *stays* with an empty assignment is still reported.

*KIP-848 consumer groups* write no generations: their history is the group epoch. A
``metadata`` record is a bump (a member joined, left or changed its subscription, or the topics
changed); the coordinator then writes the new target assignment and, as members reconcile, one
``current_member_assignment`` record per member per step (a new epoch, a revocation, partitions
released to it). ``consumer_group_epochs`` has a row per bump: when it happened, when the next one
did, the members that reached the epoch and when the last one did (``converged_at``: the epoch's
last member-assignment record before the next bump), the reconciliation steps written meanwhile,
and the members whose leave (or fencing) caused the bump (their tombstones precede it). ``consumer_group_members`` has a row per member: its client, how many
assignment changes it went through, its first and last epoch and what it owned last (by topic name,
from the group's partition-metadata records).

Anomalies are ranked by ``ANOMALY_RANK`` (a commit going backwards -- data re-read or skipped --
first, then double assignment, then unassigned partitions), which is how the report lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .decode import CONSUMER_GROUP, GROUP_METADATA, OFFSET_COMMIT

ANOMALY_SCHEMA = StructType(
    [
        StructField("kind", StringType(), False),
        StructField("group", StringType(), True),
        StructField("generation", IntegerType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("members", ArrayType(StringType()), True),
        StructField("offset", LongType(), True),
        StructField("previous_offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("log_partition", IntegerType(), True),
        StructField("log_offset", LongType(), True),
        StructField("detail", StringType(), True),
    ]
)


ANOMALY_RANK = {"backwards_commit": 0, "double_assigned": 1, "unassigned": 2}
"""Most serious first: the order the report lists anomalies in."""


@dataclass
class Tables:
    offset_commits: DataFrame
    generations: DataFrame
    rebalances: DataFrame
    anomalies: DataFrame
    consumer_group_epochs: DataFrame
    consumer_group_members: DataFrame

    def items(self) -> list[tuple[str, DataFrame]]:
        return [
            ("offset_commits", self.offset_commits),
            ("generations", self.generations),
            ("rebalances", self.rebalances),
            ("anomalies", self.anomalies),
            ("consumer_group_epochs", self.consumer_group_epochs),
            ("consumer_group_members", self.consumer_group_members),
        ]


def _member_key(m: Column) -> Column:
    return F.coalesce(m["group_instance_id"], m["member_id"])


def _ms_between(later: Column, earlier: Column) -> Column:
    return F.unix_millis(later) - F.unix_millis(earlier)


def _generation_member(m: Column) -> Column:
    """A member as the generations table shows it (the raw protocol bytes left out)."""
    return F.struct(
        *[
            m[name].alias(name)
            for name in (
                "member_id",
                "group_instance_id",
                "client_id",
                "client_host",
                "session_timeout_ms",
                "rebalance_timeout_ms",
                "subscribed_topics",
                "assigned_partitions",
            )
        ]
    )


def offset_commits(raw: DataFrame) -> DataFrame:
    return raw.where((F.col("record_type") == OFFSET_COMMIT) & ~F.col("tombstone")).select(
        "group",
        "topic",
        "partition",
        F.col("committed_offset").alias("offset"),
        F.when(F.col("leader_epoch") >= 0, F.col("leader_epoch")).alias("leader_epoch"),
        "metadata",
        F.col("commit_timestamp").alias("commit_time"),
        F.col("expire_timestamp").alias("expire_time"),
        "log_partition",
        F.col("offset").alias("log_offset"),
        F.col("timestamp").alias("log_time"),
    )


def generations(raw: DataFrame) -> DataFrame:
    # Kafka 4 writes an empty generation-0 record when a join creates a group and writes nothing
    # else (GroupMetadataManager.classicGroupJoinToClassicGroup, newEmptyGroupMetadataRecord): the
    # group's creation, not a generation.
    created = ~F.col("tombstone") & (F.col("generation") == 0) & (F.size("members") == 0)
    gm = raw.where((F.col("record_type") == GROUP_METADATA) & ~F.coalesce(created, F.lit(False))).select(
        "group",
        "log_partition",
        "offset",
        "timestamp",
        "tombstone",
        "generation",
        "protocol_type",
        "protocol",
        "leader",
        "current_state_timestamp",
        "members",
    )
    history = Window.partitionBy("group").orderBy("log_partition", "offset")
    gm = gm.withColumn(
        "starts",
        ~F.col("tombstone")
        & (F.lag("generation").over(history).isNull() | (F.lag("generation").over(history) != F.col("generation"))),
    )
    gm = gm.withColumn(
        "seq", F.sum(F.col("starts").cast("int")).over(history.rowsBetween(Window.unboundedPreceding, 0))
    )
    # A run ends where the next run starts or the group is deleted.
    boundaries = gm.where(F.col("starts") | F.col("tombstone"))
    ends = (
        boundaries.withColumn("ended_at", F.lead("timestamp").over(history))
        .where(F.col("starts"))
        .select("group", "seq", "ended_at")
    )
    runs = (
        gm.where(~F.col("tombstone"))
        .withColumn("members", F.transform("members", _generation_member))
        .groupBy("group", "seq")
        .agg(
            F.min_by(F.struct("log_partition", "offset", "timestamp", "current_state_timestamp"), "offset").alias(
                "first"
            ),
            F.max_by(F.struct("generation", "protocol_type", "protocol", "leader", "members"), "offset").alias("last"),
            F.count(F.lit(1)).alias("records"),
        )
    )
    return runs.join(ends, ["group", "seq"], "left").select(
        "group",
        "seq",
        F.col("last.generation").alias("generation"),
        F.col("last.protocol_type").alias("protocol_type"),
        F.col("last.protocol").alias("protocol"),
        F.col("last.leader").alias("leader"),
        F.size("last.members").alias("member_count"),
        F.col("last.members").alias("members"),
        F.col("first.timestamp").alias("started_at"),
        "ended_at",
        _ms_between(F.col("ended_at"), F.col("first.timestamp")).alias("duration_ms"),
        F.col("first.current_state_timestamp").alias("join_completed_at"),
        "records",
        F.col("first.log_partition").alias("log_partition"),
        F.col("first.offset").alias("log_offset"),
    )


def _assignments(gens: DataFrame) -> DataFrame:
    """(group, seq, topic, partition, owners): who owns each partition in each generation."""
    return (
        gens.select("group", "seq", F.explode("members").alias("m"))
        .select("group", "seq", _member_key(F.col("m")).alias("owner"), F.explode("m.assigned_partitions").alias("tp"))
        .groupBy("group", "seq", F.col("tp.topic").alias("topic"), F.col("tp.partition").alias("partition"))
        .agg(F.array_sort(F.collect_set("owner")).alias("owners"))
    )


def rebalances(gens: DataFrame) -> DataFrame:
    keys = F.transform("members", _member_key)
    g = gens.select(
        "group",
        "seq",
        "generation",
        "protocol_type",
        "members",
        "started_at",
        "join_completed_at",
        keys.alias("keys"),
    )
    prev = g.select(
        "group",
        (F.col("seq") + 1).alias("seq"),
        F.col("generation").alias("from_generation"),
        F.col("keys").alias("prev_keys"),
        F.size("members").alias("members_before"),
    )
    pairs = g.join(prev, ["group", "seq"], "inner")

    a = _assignments(gens)
    pa = a.select("group", (F.col("seq") + 1).alias("seq"), "topic", "partition", F.col("owners").alias("before"))
    ca = a.select("group", "seq", "topic", "partition", F.col("owners").alias("after"))
    change = (
        F.when(F.col("before").isNull(), "newly_assigned")
        .when(F.col("after").isNull(), "unassigned")
        .when(F.col("before") == F.col("after"), "kept")
        .otherwise("moved")
    )
    moves = (
        pa.join(ca, ["group", "seq", "topic", "partition"], "full_outer")
        .withColumn("change", change)
        .groupBy("group", "seq")
        .agg(
            *[
                F.sum(F.when(F.col("change") == c, 1).otherwise(0)).alias(c)
                for c in ("moved", "kept", "newly_assigned", "unassigned")
            ],
            F.array_sort(
                F.collect_list(
                    F.when(
                        F.col("change") == "moved",
                        F.struct(
                            "topic",
                            "partition",
                            F.col("before").alias("from_members"),
                            F.col("after").alias("to_members"),
                        ),
                    )
                )
            ).alias("moved_partitions"),
        )
    )
    consumer = F.col("protocol_type") == "consumer"
    sizes = F.transform("members", lambda m: F.coalesce(F.size(m["assigned_partitions"]), F.lit(0)))

    def stat(c: Column) -> Column:
        return F.when(consumer, c)

    def count(name: str) -> Column:
        return stat(F.coalesce(F.col(name), F.lit(0)).cast("int")).alias(f"partitions_{name}")

    return pairs.join(moves, ["group", "seq"], "left").select(
        "group",
        "seq",
        "from_generation",
        F.col("generation").alias("to_generation"),
        F.col("started_at").alias("completed_at"),
        "join_completed_at",
        "members_before",
        F.size("members").alias("members_after"),
        F.array_sort(F.array_except("keys", "prev_keys")).alias("members_joined"),
        F.array_sort(F.array_except("prev_keys", "keys")).alias("members_left"),
        count("moved"),
        count("kept"),
        count("newly_assigned"),
        count("unassigned"),
        stat(F.array_max(sizes)).alias("max_partitions_per_member"),
        stat(F.array_min(sizes)).alias("min_partitions_per_member"),
        stat(F.array_max(sizes) - F.array_min(sizes)).alias("partition_spread"),
        stat(F.coalesce(F.col("moved_partitions"), F.array())).alias("moved_partitions"),
    )


def partition_counts(raw: DataFrame, registry: DataFrame | None = None) -> DataFrame:
    """(topic, partitions): the registry's count where it has one, else inferred from the log."""
    tp = "struct<topic: string, partition: int>"
    mentioned = (
        raw.select(F.explode(F.col("members")).alias("m"))
        .select(
            F.explode(
                F.concat(
                    F.coalesce("m.assigned_partitions", F.array().cast(f"array<{tp}>")),
                    F.coalesce("m.owned_partitions", F.array().cast(f"array<{tp}>")),
                )
            ).alias("tp")
        )
        .select("tp.topic", "tp.partition")
        .unionByName(raw.where(F.col("record_type") == OFFSET_COMMIT).select("topic", "partition"))
    )
    inferred = mentioned.groupBy("topic").agg((F.max("partition") + 1).alias("inferred"))
    if registry is None:
        return inferred.select("topic", F.col("inferred").alias("partitions"))
    reg = registry.select("topic", F.col("partitions").alias("registered"))
    return inferred.join(reg, "topic", "full_outer").select(
        "topic", F.coalesce("registered", "inferred").cast("int").alias("partitions")
    )


def _anomaly(df: DataFrame, **cols: Column) -> DataFrame:
    return df.select(
        *[
            (cols[f.name] if f.name in cols else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in ANOMALY_SCHEMA.fields
        ]
    )


def anomalies(raw: DataFrame, gens: DataFrame, counts: DataFrame) -> DataFrame:
    commits = raw.where(F.col("record_type") == OFFSET_COMMIT)
    per_partition = Window.partitionBy("group", "topic", "partition").orderBy("log_partition", "offset")
    backwards = commits.withColumn("previous_offset", F.lag("committed_offset").over(per_partition)).where(
        ~F.col("tombstone") & (F.col("committed_offset") < F.col("previous_offset"))
    )
    backwards = _anomaly(
        backwards,
        kind=F.lit("backwards_commit"),
        group=F.col("group"),
        topic=F.col("topic"),
        partition=F.col("partition"),
        offset=F.col("committed_offset"),
        previous_offset=F.col("previous_offset"),
        timestamp=F.coalesce("commit_timestamp", "timestamp"),
        log_partition=F.col("log_partition"),
        log_offset=F.col("offset"),
        detail=F.format_string("committed offset went from %d back to %d", "previous_offset", "committed_offset"),
    )

    consumer_gens = gens.where((F.col("protocol_type") == "consumer") & (F.col("member_count") > 0))
    where = consumer_gens.select("group", "seq", "generation", "started_at", "log_partition", "log_offset")
    owned = _assignments(consumer_gens)
    # A replaced generation in which nobody got anything: a client's first join before it knew the
    # topic's partitions (see the module docstring), not a partition left behind.
    assigned = F.aggregate(
        "members",
        F.lit(0),
        lambda acc, m: acc + F.greatest(F.coalesce(F.size(m["assigned_partitions"]), F.lit(0)), F.lit(0)),
    )
    startup = consumer_gens.where((assigned <= 0) & F.col("ended_at").isNotNull()).select("group", "seq")
    double = _anomaly(
        owned.where(F.size("owners") > 1).join(where, ["group", "seq"]),
        kind=F.lit("double_assigned"),
        group=F.col("group"),
        generation=F.col("generation"),
        topic=F.col("topic"),
        partition=F.col("partition"),
        members=F.col("owners"),
        timestamp=F.col("started_at"),
        log_partition=F.col("log_partition"),
        log_offset=F.col("log_offset"),
        detail=F.format_string("assigned to %d members: %s", F.size("owners"), F.array_join("owners", ", ")),
    )

    subscribed = (
        consumer_gens.select("group", "seq", F.explode("members").alias("m"))
        .select("group", "seq", F.explode("m.subscribed_topics").alias("topic"))
        .distinct()
    )
    expected = (
        subscribed.join(counts, "topic")
        .select("group", "seq", "topic", F.explode(F.sequence(F.lit(0), F.col("partitions") - 1)).alias("partition"))
        .where(F.col("partition") >= 0)
    )
    missing = (
        expected.join(owned, ["group", "seq", "topic", "partition"], "left_anti")
        .join(startup, ["group", "seq"], "left_anti")
        .join(where, ["group", "seq"])
    )
    unassigned = _anomaly(
        missing,
        kind=F.lit("unassigned"),
        group=F.col("group"),
        generation=F.col("generation"),
        topic=F.col("topic"),
        partition=F.col("partition"),
        members=F.array().cast("array<string>"),
        timestamp=F.col("started_at"),
        log_partition=F.col("log_partition"),
        log_offset=F.col("log_offset"),
        detail=F.lit("subscribed but assigned to no member"),
    )
    return backwards.unionByName(double).unionByName(unassigned)


def _consumer_records(raw: DataFrame, kind: str, tombstone: bool = False) -> DataFrame:
    return raw.where(
        (F.col("record_type") == CONSUMER_GROUP)
        & (F.col("consumer.kind") == kind)
        & (F.col("tombstone") == F.lit(tombstone))
    ).select(
        "group",
        "log_partition",
        F.col("offset").alias("log_offset"),
        F.col("timestamp").alias("log_time"),
        F.col("consumer.member_id").alias("member_id"),
        F.col("consumer.epoch").alias("epoch"),
        F.col("consumer.partitions").alias("partitions"),
    )


def consumer_group_epochs(raw: DataFrame) -> DataFrame:
    """One row per KIP-848 group epoch bump (see the module's theory of operation). Each record is
    placed by window functions over the group's log order -- after which bump it came, before which
    one -- rather than by joins of the bumps with themselves."""
    kind, tomb = F.col("consumer.kind"), F.col("tombstone")
    order = Window.partitionBy("group").orderBy("log_offset")
    before = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    after = order.rowsBetween(Window.currentRow, Window.unboundedFollowing)
    is_bump = (F.col("kind") == "metadata") & ~F.col("tombstone")
    events = (
        raw.where(
            (F.col("record_type") == CONSUMER_GROUP)
            & (
                (kind == "metadata")
                | ((kind == "current_member_assignment") & ~tomb)
                | ((kind == "member_metadata") & tomb)
            )
        )
        .select(
            "group",
            "log_partition",
            F.col("offset").alias("log_offset"),
            F.col("timestamp").alias("log_time"),
            kind.alias("kind"),
            "tombstone",
            F.col("consumer.member_id").alias("member_id"),
            F.col("consumer.epoch").alias("epoch"),
        )
        .withColumn("bump_offset", F.max(F.when(is_bump, F.col("log_offset"))).over(before))
        .withColumn("bump_epoch", F.last(F.when(is_bump, F.col("epoch")), ignorenulls=True).over(before))
        .withColumn("next_bump_offset", F.first(F.when(is_bump, F.col("log_offset")), ignorenulls=True).over(after))
    )
    reached = F.col("epoch") == F.col("bump_epoch")
    steps = (
        events.where(F.col("kind") == "current_member_assignment")
        .groupBy("group", F.col("bump_offset").alias("log_offset"))
        .agg(
            F.count("*").alias("assignment_changes"),
            F.countDistinct(F.when(reached, F.col("member_id"))).alias("members_reconciled"),
            F.max(F.when(reached, F.col("log_time"))).alias("converged_at"),
        )
    )
    # a leave's (or fencing's) tombstones are written just before the bump it causes
    left = (
        events.where(F.col("kind") == "member_metadata")
        .groupBy("group", F.col("next_bump_offset").alias("log_offset"))
        .agg(F.count("*").alias("members_left"))
    )
    # the next metadata record ends an epoch: a bump, or the group's deletion (a tombstone)
    bumps = (
        events.where(F.col("kind") == "metadata")
        .withColumn("ended_at", F.lead("log_time").over(order))
        .where(~F.col("tombstone"))
        .select("group", "epoch", F.col("log_time").alias("bumped_at"), "ended_at", "log_partition", "log_offset")
    )
    out = bumps.join(steps, ["group", "log_offset"], "left").join(left, ["group", "log_offset"], "left")
    return out.select(
        "group",
        "epoch",
        "bumped_at",
        "ended_at",
        _ms_between(F.col("ended_at"), F.col("bumped_at")).alias("duration_ms"),
        F.coalesce("members_reconciled", F.lit(0)).alias("members_reconciled"),
        "converged_at",
        _ms_between(F.col("converged_at"), F.col("bumped_at")).alias("convergence_ms"),
        F.coalesce("assignment_changes", F.lit(0)).alias("assignment_changes"),
        F.coalesce("members_left", F.lit(0)).alias("members_left"),
        "log_partition",
        "log_offset",
    )


def consumer_group_members(raw: DataFrame) -> DataFrame:
    """One row per KIP-848 member (group, member id): its client and its assignment changes."""
    names = (
        raw.where((F.col("record_type") == CONSUMER_GROUP) & (F.col("consumer.kind") == "partition_metadata"))
        .select("group", F.explode("consumer.topics").alias("t"))
        .select("group", F.col("t.topic_id").alias("topic_id"), F.col("t.topic").alias("topic"))
        .distinct()
        .groupBy("group")
        .agg(F.map_from_entries(F.collect_list(F.struct("topic_id", "topic"))).alias("names"))
    )
    meta = (
        raw.where(
            (F.col("record_type") == CONSUMER_GROUP)
            & (F.col("consumer.kind") == "member_metadata")
            & ~F.col("tombstone")
        )
        .groupBy("group", F.col("consumer.member_id").alias("member_id"))
        .agg(
            F.max_by(F.col("consumer.client_id"), F.col("offset")).alias("client_id"),
            F.max_by(F.col("consumer.client_host"), F.col("offset")).alias("client_host"),
            F.max_by(F.col("consumer.instance_id"), F.col("offset")).alias("instance_id"),
            F.max_by(F.col("consumer.subscribed_topics"), F.col("offset")).alias("subscribed_topics"),
        )
    )
    left = (
        _consumer_records(raw, "member_metadata", tombstone=True)
        .groupBy("group", "member_id")
        .agg(F.max("log_time").alias("left_at"))
    )
    changes = (
        _consumer_records(raw, "current_member_assignment")
        .groupBy("group", "member_id")
        .agg(
            F.count("*").alias("assignment_changes"),
            F.min("log_time").alias("first_change"),
            F.max("log_time").alias("last_change"),
            F.min("epoch").alias("first_epoch"),
            F.max("epoch").alias("last_epoch"),
            F.max_by("partitions", "log_offset").alias("last_partitions"),
        )
    )
    out = meta.join(changes, ["group", "member_id"], "full").join(left, ["group", "member_id"], "left")
    out = out.join(names, "group", "left")
    named = F.transform(
        "last_partitions",
        lambda tp: F.struct(
            F.coalesce(F.element_at(F.col("names"), tp["topic_id"]), tp["topic_id"]).alias("topic"),
            tp["partition"].alias("partition"),
        ),
    )
    return out.select(
        "group",
        "member_id",
        "instance_id",
        "client_id",
        "client_host",
        "subscribed_topics",
        F.coalesce("assignment_changes", F.lit(0)).alias("assignment_changes"),
        "first_epoch",
        "last_epoch",
        "first_change",
        "last_change",
        "left_at",
        named.alias("last_assignment"),
    )


def build(raw: DataFrame, registry: DataFrame | None = None, *, gens: DataFrame | None = None) -> Tables:
    """All four tables from the raw records (`registry`: optional (topic, partitions) counts;
    `gens`: the generations table if the caller has it already, e.g. persisted)."""
    if gens is None:
        gens = generations(raw)
    return Tables(
        offset_commits=offset_commits(raw),
        generations=gens,
        rebalances=rebalances(gens),
        anomalies=anomalies(raw, gens, partition_counts(raw, registry)),
        consumer_group_epochs=consumer_group_epochs(raw),
        consumer_group_members=consumer_group_members(raw),
    )


def within(tables: Tables, since: object | None, until: object | None) -> Tables:
    """Only what happened in [since, until) (timestamps or None for open ends); generations that
    overlap the window are kept whole."""
    if since is None and until is None:
        return tables

    def inside(c: Column) -> Column:
        cond = F.lit(True)
        if since is not None:
            cond = cond & (c >= F.lit(since))
        if until is not None:
            cond = cond & (c < F.lit(until))
        return cond

    overlap = F.lit(True)
    if until is not None:
        overlap = overlap & (F.col("started_at") < F.lit(until))
    if since is not None:
        overlap = overlap & (F.col("ended_at").isNull() | (F.col("ended_at") >= F.lit(since)))
    return Tables(
        offset_commits=tables.offset_commits.where(inside(F.coalesce("commit_time", "log_time"))),
        generations=tables.generations.where(overlap),
        rebalances=tables.rebalances.where(inside(F.col("completed_at"))),
        anomalies=tables.anomalies.where(inside(F.col("timestamp"))),
        consumer_group_epochs=tables.consumer_group_epochs.where(inside(F.col("bumped_at"))),
        consumer_group_members=tables.consumer_group_members.where(
            F.col("last_change").isNull() | inside(F.col("last_change")) | inside(F.col("first_change"))
        ),
    )
