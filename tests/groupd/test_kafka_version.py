"""``--kafka-version``: a real daemon advertises and accepts exactly that release's API versions
(intersected with what groupd serves), refuses a removed version as Kafka does, and takes the
release's defaults; a bad value is refused at start-up."""

from __future__ import annotations

import argparse
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from groupd.broker.apis import APIS
from groupd.protocol.kafka_releases import RELEASES
from groupd.protocol.messages import API_BY_NAME

from groupd import config
from tests.support.daemon import GroupdProcess
from tests.support.raw_client import RawClient

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
V3_BODY = {"client_software_name": "test", "client_software_version": "1"}


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    config.add_arguments(p)
    return p.parse_args(list(argv))


def expected_ranges(rel: str | None) -> dict[int, tuple[int, int]]:
    """What ApiVersions must say: groupd's API table, each range cut to the release's (Produce
    advertised from the lower of the two minimums, KAFKA-18659)."""
    out: dict[int, tuple[int, int]] = {}
    for api in APIS:
        schema = API_BY_NAME[api.name]
        lo, hi = api.versions or (schema.min_version, schema.max_version)
        if rel is not None:
            r = RELEASES[rel].apis.get(schema.key)
            if r is None or max(lo, r.accepted[0]) > min(hi, r.accepted[1]):
                continue
            lo, hi = max(lo, r.advertised[0]), min(hi, r.accepted[1])
        out[schema.key] = (lo, hi)
    return out


def ranges(answer: dict[str, Any]) -> dict[int, tuple[int, int]]:
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in answer["api_keys"]}


class Daemons:
    """One daemon per release, started when a test first asks for it and shared by the module's tests."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.running: dict[str | None, GroupdProcess] = {}

    def __call__(self, rel: str | None) -> GroupdProcess:
        if rel not in self.running:
            args = ("--kafka-version", rel) if rel else ()
            self.running[rel] = GroupdProcess(self.base / (rel or "default"), *args).start()
        return self.running[rel]


@pytest.fixture(scope="module")
def daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemons]:
    d = Daemons(Path(tmp_path_factory.mktemp("kv")))
    try:
        yield d
    finally:
        for proc in d.running.values():
            proc.stop()


@pytest.mark.parametrize("rel", [None, "3.9", "4.0", "4.1", "4.2"], ids=lambda r: r or "default")
def test_api_versions_is_the_generated_table(daemons: Daemons, rel: str | None) -> None:
    d = daemons(rel)
    c = RawClient(d.port)
    try:
        v3 = c.request("ApiVersions", 3, V3_BODY)
        v4 = c.request("ApiVersions", 4, V3_BODY)
    finally:
        c.close()
    assert v3["error_code"] == 0
    assert ranges(v3) == ranges(v4) == expected_ranges(rel)
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in v4.get("supported_features") or []}
    finalized = {f["name"]: f["max_version_level"] for f in v4.get("finalized_features") or []}
    v3_supported = {f["name"] for f in v3.get("supported_features") or []}
    if rel is None:
        # share groups (KIP-932): share.version finalized at 1, Kafka 4.2's default
        assert supported == {"group.version": (0, 1), "transaction.version": (0, 2), "share.version": (0, 1)}
        assert finalized == {"group.version": 1, "transaction.version": 2, "share.version": 1}
        return
    # groupd serves no streams groups: not advertised, whatever the release says
    assert "streams.version" not in supported
    assert v3_supported == set()  # Kafka leaves out min-0 features below ApiVersions v4 (KAFKA-17492)
    if rel == "3.9":
        assert supported == {} and finalized == {}
    elif rel == "4.0":
        assert supported == {"group.version": (0, 1), "transaction.version": (0, 2)}
        assert finalized == {"group.version": 1, "transaction.version": 2}
    else:
        # 4.1 supports share.version 1 but finalizes 0 (share groups a preview); 4.2 finalizes 1
        assert supported == {"group.version": (0, 1), "transaction.version": (0, 2), "share.version": (0, 1)}
        share = {"share.version": 1} if rel == "4.2" else {}
        assert finalized == {"group.version": 1, "transaction.version": 2, **share}


@pytest.mark.parametrize("rel", ["4.1", "4.2"])
def test_share_groups_only_where_share_version_is_finalized(daemons: Daemons, rel: str) -> None:
    """4.1 lists the share-group APIs but finalizes share.version 0: KafkaApis'
    ``isShareGroupProtocolEnabled`` answers them UNSUPPORTED_VERSION; 4.2 serves them."""
    c = RawClient(daemons(rel).port)
    try:
        body = {
            "group_id": "sg",
            "member_id": "m" * 22,
            "member_epoch": 0,
            "rack_id": None,
            "subscribed_topic_names": ["t"],
        }
        hb = c.request("ShareGroupHeartbeat", 1, body)
        described = c.request("ShareGroupDescribe", 1, {"group_ids": ["sg"], "include_authorized_operations": False})
        fetch = {
            "group_id": "sg",
            "member_id": "m" * 22,
            "share_session_epoch": 0,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1024,
            "max_records": 10,
            "batch_size": 10,
            "topics": [],
            "forgotten_topics_data": [],
        }
        fetched = c.request("ShareFetch", 1, fetch)
    finally:
        c.close()
    # KafkaApis.handleShareFetchRequest checks isShareGroupProtocolEnabled first too
    assert fetched["error_code"] == (35 if rel == "4.1" else 0)
    if rel == "4.1":
        assert hb["error_code"] == 35
        assert [(g["group_id"], g["error_code"]) for g in described["groups"]] == [("sg", 35)]
    else:
        assert hb["error_code"] == 0 and hb["member_epoch"] == 1
        assert described["groups"][0]["group_state"] == "Stable"


def test_hand_checked_ranges_under_4_0(daemons: Daemons) -> None:
    d = daemons("4.0")
    c = RawClient(d.port)
    try:
        got = ranges(c.request("ApiVersions", 3, V3_BODY))
    finally:
        c.close()
    assert got[0] == (0, 12)  # Produce: advertised from 0 (KAFKA-18659), accepted 3-12
    assert got[1] == (4, 12)  # Fetch
    assert got[2] == (1, 8)  # ListOffsets
    assert got[8] == (2, 9)  # OffsetCommit
    assert got[9] == (1, 9)  # OffsetFetch
    assert got[26] == (0, 5)  # EndTxn: v5 is transaction version 2


REMOVED_IN_4_0 = [("Produce", 2), ("Fetch", 3), ("ListOffsets", 0), ("OffsetCommit", 1), ("OffsetFetch", 0)]


@pytest.mark.parametrize("rel", [None, "4.0"], ids=lambda r: r or "default")
@pytest.mark.parametrize(("api", "version"), REMOVED_IN_4_0)
def test_a_removed_version_closes_the_connection_under_4_0(
    daemons: Daemons, rel: str | None, api: str, version: int
) -> None:
    d = daemons(rel)
    c = RawClient(d.port)
    try:
        c.send(api, version, {"acks": 1, "timeout_ms": 1000} if api == "Produce" else {})
        if rel == "4.0":
            # SocketServer.parseRequestHeader: ApiVersionManager.isApiEnabled refuses it, the connection closes
            assert c.closed_by_peer()
        else:
            c.recv_frame()  # answered
    finally:
        c.close()


def test_api_versions_above_the_range_answers_unsupported_version(daemons: Daemons) -> None:
    d = daemons("4.0")
    c = RawClient(d.port)
    try:
        # ApiVersions v5 (unknown to every release), header v2 and no body: answered in the v0 format
        header = struct.pack(">hhih", API_VERSIONS, 5, 7, 4) + b"test" + b"\x00"
        c.sock.sendall(struct.pack(">i", len(header)) + header)
        answer = c.recv_frame()
    finally:
        c.close()
    body = API_BY_NAME["ApiVersions"].response.codec(0).decode(answer, 4)
    assert body["error_code"] == UNSUPPORTED_VERSION
    assert ranges(body) == expected_ranges("4.0")


@pytest.mark.parametrize("rel", [None, "4.0"], ids=lambda r: r or "default")
def test_an_old_client_that_works_by_default_is_refused_under_4_0(daemons: Daemons, rel: str | None) -> None:
    d = daemons(rel)
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    # kafka-python pinned to Kafka 0.10.1 produces with Produce v2, which 4.0 removed
    producer = KafkaProducer(
        bootstrap_servers=d.bootstrap, api_version=(0, 10, 1), retries=0, request_timeout_ms=3000, max_block_ms=5000
    )
    try:
        future = producer.send(f"old-client-{rel or 'default'}", b"x")
        if rel is None:
            assert future.get(timeout=15).offset >= 0
        else:
            with pytest.raises(KafkaError):
                future.get(timeout=15)
    finally:
        producer.close(timeout=5)


# --- configuration -----------------------------------------------------------------------------
def test_release_defaults_and_explicit_overrides() -> None:
    cfg = config.load(_args("--kafka-version", "4.0"), env={})
    assert cfg.kafka_version == "4.0"
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert cfg.group_consumer_heartbeat_interval_ms == 5000
    assert (cfg.group_consumer_min_heartbeat_interval_ms, cfg.group_consumer_max_heartbeat_interval_ms) == (5000, 15000)
    assert cfg.group_consumer_regex_refresh_interval_ms == 10000
    assert config.load(_args("--kafka-version", "4.2"), env={}).group_consumer_regex_refresh_interval_ms == 600_000
    cfg = config.load(_args("--kafka-version", "4.0", "--group-initial-rebalance-delay-ms", "300"), env={})
    assert cfg.group_initial_rebalance_delay_ms == 300
    cfg = config.load(
        _args(), env={"GROUPD_KAFKA_VERSION": "4.1", "GROUPD_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "6000"}
    )
    assert (cfg.kafka_version, cfg.group_consumer_heartbeat_interval_ms) == ("4.1", 6000)


def test_release_bounds_apply_to_explicit_values() -> None:
    # Kafka's group.consumer.min.heartbeat.interval.ms (5000) refuses groupd's test-friendly interval
    with pytest.raises(config.ConfigError, match="below --group-consumer-min-heartbeat-interval-ms 5000"):
        config.load(_args("--kafka-version", "4.0", "--group-consumer-heartbeat-interval-ms", "500"), env={})
    cfg = config.load(
        _args(
            "--kafka-version",
            "4.0",
            "--group-consumer-heartbeat-interval-ms",
            "500",
            "--group-consumer-min-heartbeat-interval-ms",
            "500",
        ),
        env={},
    )
    assert cfg.group_consumer_heartbeat_interval_ms == 500


def test_default_is_groupds_own_timings() -> None:
    cfg = config.load(_args(), env={})
    assert cfg.kafka_version == ""
    assert cfg.group_initial_rebalance_delay_ms == 300
    assert (
        cfg.group_consumer_heartbeat_interval_ms
        < 1000
        <= 5000
        == cfg.group_consumer_min_heartbeat_interval_ms * 0 + 5000
    )
    assert cfg.group_consumer_min_heartbeat_interval_ms <= cfg.group_consumer_heartbeat_interval_ms


def test_kafka_version_in_the_toml_file(tmp_path: Path) -> None:
    f = tmp_path / "g.toml"
    f.write_text('kafka_version = "3.9"\n')
    cfg = config.load(_args("--config", str(f)), env={})
    assert (cfg.kafka_version, cfg.group_initial_rebalance_delay_ms) == ("3.9", 3000)


@pytest.mark.parametrize("value", ["5.0", "3.8", "4", "latest"])
def test_an_unknown_version_is_refused_at_start_up_in_one_line(tmp_path: Path, value: str) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "groupd", "serve", "--port", "0", "--data-dir", str(tmp_path), "--kafka-version", value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("groupd: bad configuration: --kafka-version: must be one of 3.9, 4.0, 4.1, 4.2")
    assert repr(value) in lines[0]


def test_a_minimum_raised_alone_raises_groupds_default_interval() -> None:
    cfg = config.load(_args("--group-consumer-min-heartbeat-interval-ms", "5000"), env={})
    assert (cfg.group_consumer_min_heartbeat_interval_ms, cfg.group_consumer_heartbeat_interval_ms) == (5000, 5000)
    # an interval given explicitly is checked against the bound, as Kafka does
    with pytest.raises(config.ConfigError, match="300 is below --group-consumer-min-heartbeat-interval-ms 5000"):
        config.load(
            _args(
                "--group-consumer-min-heartbeat-interval-ms", "5000", "--group-consumer-heartbeat-interval-ms", "300"
            ),
            env={},
        )
