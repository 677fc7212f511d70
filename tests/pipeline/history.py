"""Deterministic ``__consumer_offsets`` logs for the pipeline tests, written with groupd's own storage
engine and record serde, so every expected table row is known exactly.

``write_history(data_dir)`` writes the scripted history below and returns a ``History`` that
knows where (log partition, log offset) each record landed.

billing (consumer, range; topic ``orders`` has 4 partitions in topics.json)
    g1  T+1000  m1[o0,o1] m2[o2] m3(static i-3)[o3]                   3 members
        commits o0=10 o1=5 o2=7 o3=3
    g2  T+5000  m1[o0] m2[o2] m3[o3] m4[o1]                           m4 joins, o1 moves m1->m4
        commits o0=20 o1=12
        T+7000  same generation: static i-3 restarts as m3b            (record 2 of g2)
    g3  T+10000 m1[o0,o2] m3b[o3] m4[o1,o2]                           m2 left; o2 double-assigned
        commits o0=15 (backwards from 20)  o2=9
    g4  T+15000 m1[o0,o1] m3b[o3]                                     m4 left; o2 unassigned
        T+16000 offset tombstone o3, T+17000 commit o3=1 (not backwards: the tombstone reset it)
    g5  T+20000 Empty
        T+25000 group tombstone
audit (consumer; topic ``events`` is not in topics.json: 3 partitions inferred from a commit on e2)
    g1  T+3000  a1[e0,e1] a2[]                                        e2 unassigned
        commit e2=100
connect-cluster (protocol type ``connect``: bytes are not consumer protocol)
    g1  T+4000  w1
plus one undecodable record (key version 9) in log partition 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from groupd.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)
from groupd.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from groupd.coordinator.routing import partition_for
from groupd.coordinator.serde import encode_key, encode_value
from groupd.storage import LogConfig, LogManager

OFFSETS = "__consumer_offsets"
T = 1_700_000_000_000  # 2023-11-14T22:13:20Z


@dataclass
class M:
    """A member: id, static instance id, assignment {topic: partitions}, subscribed topics."""

    member_id: str
    assigned: dict[str, list[int]]
    instance_id: str | None = None
    topics: tuple[str, ...] = ("orders",)
    client_id: str | None = None
    host: str | None = None

    def metadata(self, consumer: bool = True) -> MemberMetadata:
        if consumer:
            sub = encode_subscription(Subscription(topics=self.topics, version=1))
            asg = encode_assignment(
                Assignment(tuple(TopicPartitions(t, tuple(ps)) for t, ps in self.assigned.items()), version=1)
            )
        else:
            sub, asg = b"\x00\x01opaque", b"\xff\xfe"
        return MemberMetadata(
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            client_id=self.client_id or f"client-{self.member_id}",
            client_host=self.host or f"/10.0.0.{len(self.member_id)}",
            rebalance_timeout=30000,
            session_timeout=10000,
            subscription=sub,
            assignment=asg,
        )


@dataclass
class History:
    data_dir: Path
    at: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (log partition, offset)


class LogWriter:
    def __init__(self, data_dir: Path, segment_bytes: int = 700) -> None:
        self.history = History(Path(data_dir))
        self.manager = LogManager(data_dir, LogConfig(segment_bytes=segment_bytes, segment_ms=None, retention_ms=None))
        self.manager.open_all()

    def raw(self, label: str | None, log_partition: int, ts: int, key: bytes | None, value: bytes | None) -> None:
        plog = self.manager.get_or_create(OFFSETS, log_partition)
        base, _ = plog.append_records([(key, value, (), ts)])
        if label:
            assert label not in self.history.at, label
            self.history.at[label] = (log_partition, base)

    def record(self, label: str | None, ts: int, key, value) -> None:
        self.raw(label, partition_for(key.group), ts, encode_key(key), encode_value(value))

    def commit(
        self, label: str | None, ts: int, group: str, topic: str, partition: int, offset: int, epoch: int = 3
    ) -> None:
        value = OffsetCommitValue(offset=offset, leader_epoch=epoch, metadata=f"m{offset}", commit_timestamp=ts)
        self.record(label, ts, OffsetCommitKey(group, topic, partition), value)

    def offset_tombstone(self, label: str | None, ts: int, group: str, topic: str, partition: int) -> None:
        self.record(label, ts, OffsetCommitKey(group, topic, partition), None)

    def generation(
        self,
        label: str | None,
        ts: int,
        group: str,
        generation: int,
        members: list[M],
        *,
        protocol_type: str = "consumer",
        protocol: str | None = "range",
        state_ts: int | None = None,
        leader: str | None = None,
    ) -> None:
        consumer = protocol_type == "consumer"
        value = GroupMetadataValue(
            protocol_type=protocol_type,
            generation=generation,
            protocol=protocol if members else None,
            leader=(leader or members[0].member_id) if members else None,
            current_state_timestamp=ts - 100 if state_ts is None else state_ts,
            members=tuple(m.metadata(consumer) for m in members),
        )
        self.record(label, ts, GroupMetadataKey(group), value)

    def group_tombstone(self, label: str | None, ts: int, group: str) -> None:
        self.record(label, ts, GroupMetadataKey(group), None)

    def close(self) -> History:
        self.manager.close()
        return self.history


def write_registry(data_dir: Path, topics: dict[str, int]) -> None:
    """A topics.json as groupd's TopicRegistry writes it."""
    body = {
        "topics": [
            {
                "name": name,
                "topic_id": f"00000000-0000-0000-0000-{i:012d}",
                "partitions": n,
                "configs": {},
                "internal": name == OFFSETS,
            }
            for i, (name, n) in enumerate(sorted(topics.items()), start=1)
        ]
    }
    (Path(data_dir) / "topics.json").write_text(json.dumps(body, indent=1, sort_keys=True))


def write_history(data_dir: Path) -> History:
    w = LogWriter(data_dir)
    o = "orders"
    m1 = M("m1", {o: [0, 1]}, host="/10.0.0.1", client_id="app-1")
    m2 = M("m2", {o: [2]})
    m3 = M("m3", {o: [3]}, instance_id="i-3")
    w.generation("billing.g1", T + 1000, "billing", 1, [m1, m2, m3])
    for i, (p, off) in enumerate([(0, 10), (1, 5), (2, 7), (3, 3)]):
        w.commit(f"billing.c1.{p}", T + 2000 + i, "billing", o, p, off)

    w.generation(
        "audit.g1",
        T + 3000,
        "audit",
        1,
        [M("a1", {"events": [0, 1]}, topics=("events",)), M("a2", {}, topics=("events",))],
    )
    w.commit("audit.c.e2", T + 3500, "audit", "events", 2, 100)
    w.generation(
        "connect.g1", T + 4000, "connect-cluster", 1, [M("w1", {})], protocol_type="connect", protocol="sessioned"
    )

    m1b = M("m1", {o: [0]}, host="/10.0.0.1", client_id="app-1")
    m4 = M("m4", {o: [1]})
    w.generation("billing.g2", T + 5000, "billing", 2, [m1b, m2, m3, m4])
    w.commit("billing.c2.0", T + 6000, "billing", o, 0, 20)
    w.commit("billing.c2.1", T + 6001, "billing", o, 1, 12)
    m3b = M("m3b", {o: [3]}, instance_id="i-3")
    w.generation("billing.g2.static", T + 7000, "billing", 2, [m1b, m2, m3b, m4], state_ts=T + 6900)

    w.raw("invalid", 0, T + 8000, b"\x00\x09garbage", b"\x00\x00")

    w.generation(
        "billing.g3",
        T + 10000,
        "billing",
        3,
        [M("m1", {o: [0, 2]}), M("m3b", {o: [3]}, instance_id="i-3"), M("m4", {o: [1, 2]})],
    )
    w.commit("billing.c3.0", T + 11000, "billing", o, 0, 15)  # backwards: 20 -> 15
    w.commit("billing.c3.2", T + 11001, "billing", o, 2, 9)
    w.generation("billing.g4", T + 15000, "billing", 4, [M("m1", {o: [0, 1]}), M("m3b", {o: [3]}, instance_id="i-3")])
    w.offset_tombstone("billing.t.3", T + 16000, "billing", o, 3)
    w.commit("billing.c4.3", T + 17000, "billing", o, 3, 1)
    w.generation("billing.g5", T + 20000, "billing", 5, [])
    w.group_tombstone("billing.dead", T + 25000, "billing")
    write_registry(data_dir, {OFFSETS: 50, o: 4})
    return w.close()


def write_startup_history(data_dir: Path) -> History:
    """Two consumer groups on ``orders`` (4 partitions in topics.json):

    fresh   g1  T+1000  f1[] f2[]            the leader assigned nothing (no metadata yet)
            g2  T+2000  f1[o0,o1] f2[o2,o3]  it rejoined: everything assigned
                commits o0=10 (T+3000), o0=20 (T+4000), o0=5 (T+9000: a rewind)
    stuck   g1  T+5000  s1[] s2[]            never replaced: its 4 partitions stay unassigned
    """
    w = LogWriter(data_dir)
    o = "orders"
    w.generation("fresh.g1", T + 1000, "fresh", 1, [M("f1", {}), M("f2", {})])
    w.generation("fresh.g2", T + 2000, "fresh", 2, [M("f1", {o: [0, 1]}), M("f2", {o: [2, 3]})], state_ts=T + 1200)
    for label, ts, offset in [("c1", 3000, 10), ("c2", 4000, 20), ("rewind", 9000, 5)]:
        w.commit(f"fresh.{label}", T + ts, "fresh", o, 0, offset)
    w.generation("stuck.g1", T + 5000, "stuck", 1, [M("s1", {}), M("s2", {})])
    write_registry(data_dir, {OFFSETS: 50, o: 4})
    return w.close()
