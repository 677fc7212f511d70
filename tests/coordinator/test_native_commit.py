"""OffsetCommit's C path (``groupd.coordinator._native`` behind ``groupd.coordinator.native``)
against the Python path, the reference: the same answers, the same records (byte for byte: the
batch the C path builds is the one ``build_batch(encode_log_records(...))`` builds), the same
state, for any request; and the C request walk fed random and truncated bytes."""

from __future__ import annotations

import contextlib
import importlib
import os
from typing import Any

import pytest
from groupd.coordinator import CoordinatorConfig, native
from groupd.coordinator.records import OffsetCommitValue
from groupd.coordinator.serde import encode_log_records
from groupd.protocol.messages.offsets import OFFSET_COMMIT
from groupd.storage.records import build_batch
from harness import Shell
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rebalance import stable_group

needs_native = pytest.mark.skipif(not native.available(), reason="the C module is not built (or GROUPD_NO_NATIVE=1)")

NOW = 1_700_000_000_000
TOPICS = {"t": 4, "orders": 2, "ünï": 3, "empty": 0}  # "gone" is unknown


def test_the_c_module_is_built_here() -> None:
    # pyproject's ext-modules entry is optional (a machine without a compiler runs the Python
    # path); this environment has gcc and the headers, so the module must be there.
    if os.environ.get("GROUPD_NO_NATIVE") == "1":
        pytest.skip("GROUPD_NO_NATIVE=1")
    module = importlib.import_module("groupd.coordinator._native")
    assert module.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert native.available()


def wire_body(version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The body as the dispatcher hands it over: encoded, then decoded by OffsetCommit's decoder."""
    frame = b"\x00\x01" + OFFSET_COMMIT.request.codec(version).encode(body)
    parse = native.parse_body_for(version)
    assert parse is not None
    decoded, end = parse(frame, 2)
    assert end == len(frame)
    return decoded


def topic_partitions(name: str) -> int | None:
    return TOPICS.get(name)


metadata = st.one_of(st.none(), st.just(""), st.text(max_size=12))
partitions = st.lists(
    st.fixed_dictionaries(
        {
            "partition_index": st.integers(-2, 5),
            "committed_offset": st.integers(-(2**63), 2**63 - 1),
            "committed_leader_epoch": st.integers(-(2**31), 2**31 - 1),
            "commit_timestamp": st.one_of(st.just(-1), st.integers(-(2**63), 2**63 - 1)),
            "committed_metadata": metadata,
        }
    ),
    max_size=6,
)
topics = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from([*TOPICS, "gone"]), "partitions": partitions}), max_size=4
)


def _commit(s: Shell, version: int, body: dict[str, Any]) -> dict[str, Any] | None:
    return s.answer(s.send("OffsetCommit", version, body))


def _shells(group: str, member: bool) -> tuple[Shell, Shell, dict[str, Any]]:
    """Two coordinators in the same state: a stable classic group with one member, or none."""
    config = CoordinatorConfig(offset_metadata_max_bytes=8)
    shells = []
    ids: dict[str, Any] = {"member_id": "", "generation": -1}
    for _ in range(2):
        s = Shell(config=config, topic_partitions=topic_partitions)
        s.now = NOW
        if member:
            _, (c,) = stable_group(1, s)
            ids = {"member_id": c.member_id, "generation": c.generation}
        shells.append(s)
    return shells[0], shells[1], ids


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.integers(0, 9),
    group=st.sampled_from(["g", "", "grüppe"]),
    member=st.booleans(),
    right_member=st.booleans(),
    generation_delta=st.sampled_from([0, 0, 1]),
    instance=st.one_of(st.none(), st.just("i-1")),
    topics=topics,
    fail=st.sampled_from([None, None, 56]),
)
def test_c_path_answers_writes_and_folds_as_the_python_path(
    version: int,
    group: str,
    member: bool,
    right_member: bool,
    generation_delta: int,
    instance: str | None,
    topics: list[dict[str, Any]],
    fail: int | None,
) -> None:
    member = member and group == "g"  # stable_group makes group "g"
    py, c, ids = _shells(group, member)
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": ids["generation"] + generation_delta if member else -1,
        "member_id": ids["member_id"] if right_member else "someone-else",
        "group_instance_id": instance,
        "retention_time_ms": -1,
        "topics": topics,
    }
    decoded = wire_body(version, body)
    assert type(decoded) is native.CommitBody and decoded.native
    # the lazy dict is what the generic decoder makes of the same bytes
    generic = OFFSET_COMMIT.request.codec(version).parse_at(OFFSET_COMMIT.request.codec(version).encode(body), 0)[0]
    plain = dict(generic)
    assert dict(wire_body(version, body)) == plain

    if fail is not None:
        py.auto_append = c.auto_append = False
    ctx_py = py.send("OffsetCommit", version, plain)
    ctx_c = c.send("OffsetCommit", version, decoded)
    if fail is not None:
        assert [len(r) for r in (py.queued, c.queued)] in ([0, 0], [1, 1])
        py.flush(fail)
        c.flush(fail)
    want, got = py.answer(ctx_py), c.answer(ctx_c)
    assert want is not None and got is not None
    assert type(got) is native.CommitResponse and type(want) is dict  # each took its own path
    # the bytes the dispatcher sends are the codec's bytes of the Python path's answer
    assert got.wire_payload == OFFSET_COMMIT.response.codec(version).encode(want)
    assert dict(got) == want
    assert c.records() == py.records()
    assert c.coord.offset_manager.offsets == py.coord.offset_manager.offsets
    assert c.coord.offset_manager.inflight == py.coord.offset_manager.inflight == {}
    assert set(c.coord.classic.groups) == set(py.coord.classic.groups)
    # and a restart reads the same offsets back from either log
    assert c.reloaded().offset_manager.offsets == py.reloaded().offset_manager.offsets


@needs_native
def test_the_batch_is_build_batch_of_the_encoded_records() -> None:
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": i, "committed_offset": 10 * i, "committed_leader_epoch": i - 1}
                    | {"committed_metadata": "m" if i == 2 else None}
                    for i in range(4)
                ],
            }
        ],
    }
    decoded = wire_body(8, body)
    built = native.build(decoded, None, lambda: 0, "g", 4096, NOW, OffsetCommitValue)
    assert built is not None
    code, _response, batch, entries = built
    records = [((_key("g", "t", i)), value) for (_t, i), value in entries.items()]
    assert code == 0 and batch == build_batch(encode_log_records(records, NOW))
    assert [v.metadata for v in entries.values()] == ["", "", "m", ""]
    assert [v.leader_epoch for v in entries.values()] == [-1, 0, 1, 2]


class _Topic:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions


@needs_native
@settings(max_examples=150, deadline=None)
@given(version=st.integers(0, 9), topics=topics, valid=st.booleans())
def test_a_table_of_topics_reads_as_the_callable_does(version: int, topics: list[dict[str, Any]], valid: bool) -> None:
    """C reads a registry's dict of topics (``native.partition_table``) exactly as it calls
    ``topic_partitions``: unknown and zero-partition topics alike, the group checked as often."""
    body = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": topics}
    table = {name: _Topic(n) for name, n in TOPICS.items()}
    outs = []
    for source in (topic_partitions, table):
        checks: list[int] = []

        def validate(checks: list[int] = checks) -> int:
            checks.append(1)
            return 0 if valid else 25

        built = native.build(wire_body(version, body), source, validate, "g", 4096, NOW, OffsetCommitValue)
        assert built is not None
        code, response, batch, entries = built
        outs.append((code, response.payload, batch, entries, len(checks)))
    assert outs[0] == outs[1]


# names alike in length, prefix and bytes, and beyond the C name cache's 64 positions
_SIMILAR = ["ab", "ac", "a", "abc", "ba", "é", "ée", "t"]


@needs_native
@settings(max_examples=100, deadline=None)
@given(
    version=st.integers(0, 9),
    commits=st.lists(
        st.lists(st.sampled_from(_SIMILAR), min_size=0, max_size=6).map(lambda names: names + ["t"] * 66),
        min_size=1,
        max_size=5,
    ),
)
def test_commits_one_after_another_read_each_its_own_topic_names(version: int, commits: list[list[str]]) -> None:
    """``_native.c`` reuses the str of the topic name at the same position of the previous
    commits (the name cache): whatever came before, a commit's names, counts and keys are its own,
    as a lone commit's (a fresh key cache, a fresh topic table) are."""
    table = {name: _Topic(2) for name in _SIMILAR if name != "ba"}

    def body(names: list[str]) -> dict[str, Any]:
        topics = [
            {"name": n, "partitions": [{"partition_index": i % 3, "committed_offset": i}]} for i, n in enumerate(names)
        ]
        return {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": topics}

    for names in commits:
        built = native.build(wire_body(version, body(names)), table, lambda: 0, "g", 4096, NOW, OffsetCommitValue)
        assert built is not None
        _code, response, batch, entries = built
        # what the Python path answers and writes for the same commit, read from the body alone
        known = [(n, i) for i, n in enumerate(names) if n in table and i % 3 < 2]
        records = [(_key("g", n, i % 3), OffsetCommitValue(i, -1, "", NOW, -1)) for n, i in known]
        assert {k: v.offset for k, v in entries.items()} == {(n, i % 3): i for n, i in known}
        assert batch == (build_batch(encode_log_records(records, NOW)) if records else None)
        answer = {
            "throttle_time_ms": 0,
            "topics": [
                {"name": n, "partitions": [{"partition_index": i % 3, "error_code": 0 if (n, i) in known else 3}]}
                for i, n in enumerate(names)
            ],
        }
        assert response.payload == OFFSET_COMMIT.response.codec(version).encode(answer)


def test_partition_table_is_the_owners_dict_only_when_the_callable_says_so() -> None:
    class Registry:
        def __init__(self) -> None:
            self.topics = {"t": _Topic(3)}

        def partition_count(self, name: str) -> int | None:
            t = self.topics.get(name)
            return t.partitions if t else None

        partition_count.reads_table = "topics"  # type: ignore[attr-defined]

        def other(self, name: str) -> int | None:
            return 1

    r = Registry()
    assert native.partition_table(r.partition_count) is r.topics
    assert native.partition_table(r.other) == r.other
    assert native.partition_table(topic_partitions) is topic_partitions
    assert native.partition_table(None) is None


def _key(group: str, topic: str, partition: int) -> Any:
    from groupd.coordinator.records import OffsetCommitKey

    return OffsetCommitKey(group, topic, partition)


@needs_native
def test_a_body_whose_topics_were_read_or_replaced_takes_the_python_path() -> None:
    s = Shell(topic_partitions=topic_partitions)
    body = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None}
    decoded = wire_body(8, {**body, "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]})
    # what the ACL wrapper does with refused topics: the kept ones replace the request's
    decoded["topics"] = [{"name": "orders", "partitions": [{"partition_index": 1, "committed_offset": 5}]}]
    assert not decoded.native
    resp = _commit(s, 8, decoded)
    assert type(resp) is dict and resp["topics"] == [
        {"name": "orders", "partitions": [{"partition_index": 1, "error_code": 0}]}
    ]
    assert s.coord.offset_manager.offsets == {"g": {("orders", 1): OffsetCommitValue(5, -1, "", 0, -1)}}


@needs_native
def test_retention_of_old_versions_takes_the_python_path() -> None:
    # v2-4 with a retention time write value v1 with an expire timestamp: the Python path's
    s = Shell(topic_partitions=topic_partitions)
    s.now = NOW
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time_ms": 1000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 3}]}],
    }
    resp = _commit(s, 3, wire_body(3, body))
    assert type(resp) is dict
    assert s.coord.offset_manager.offsets["g"][("t", 0)].expire_timestamp == NOW + 1000


# -- the request walk against random and truncated bytes -------------------------------------------


def _generic(version: int, frame: bytes) -> Any:
    try:
        return OFFSET_COMMIT.request.codec(version).parse_at(frame, 0)
    except Exception:
        return None


@needs_native
@settings(max_examples=400, deadline=None)
@given(version=st.integers(0, 9), data=st.binary(max_size=200))
def test_random_bytes_never_crash_and_what_the_walk_takes_the_generic_decoder_takes_too(
    version: int, data: bytes
) -> None:
    parse = native.parse_body_for(version)
    assert parse is not None
    try:
        body, end = parse(data, 0)
    except Exception:
        return  # the generic decoder refused it (the fallback raises its error)
    generic = _generic(version, data)
    assert generic is not None
    assert dict(body) == generic[0] and end == generic[1]


@needs_native
@settings(max_examples=100, deadline=None)
@given(version=st.integers(0, 9), topics=topics, cut=st.integers(0, 400), flip=st.integers(0, 400))
def test_truncated_and_damaged_requests_never_crash(
    version: int, topics: list[dict[str, Any]], cut: int, flip: int
) -> None:
    from groupd.coordinator import _native  # type: ignore[attr-defined]

    frame = OFFSET_COMMIT.request.codec(version).encode(
        {
            "group_id": "g",
            "generation_id_or_member_epoch": 1,
            "member_id": "m",
            "group_instance_id": None,
            "topics": topics,
        }
    )
    for data in (frame[: cut % (len(frame) + 1)], _flipped(frame, flip)):
        walked = _native.parse_commit(data, 0, version)
        generic = _generic(version, data)
        if walked is not None:
            assert generic is not None and walked[0] == generic[1]
        # build_commit reads only where it is told, within the buffer, whatever it is told
        for pos in (0, len(data) // 2, len(data)):
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                _native.build_commit(data, pos, 3, version, None, lambda: 0, "g", 10, NOW, OffsetCommitValue, {})


def _flipped(frame: bytes, at: int) -> bytes:
    if not frame:
        return frame
    b = bytearray(frame)
    b[at % len(b)] ^= 0xFF
    return bytes(b)


def test_without_the_c_module_the_generic_decoder_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_native", None)
    assert native.parse_body_for(8) is None
    assert not native.available()


@needs_native
@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=3000))
def test_the_batch_crc_is_crc32c(data: bytes) -> None:
    import crc32c
    from groupd.coordinator import _native  # type: ignore[attr-defined]

    assert _native.crc32c(data) == crc32c.crc32c(data)


@needs_native
def test_the_table_crc_where_the_cpu_has_no_crc_instruction() -> None:
    import subprocess
    import sys

    probe = (
        "import os, crc32c; from groupd.coordinator import _native as n;"
        "assert all(n.crc32c(d) == crc32c.crc32c(d) for d in (b'', b'1', b'123456789', os.urandom(6001)))"
    )
    env = {**os.environ, "GROUPD_NATIVE_NO_HW_CRC": "1"}
    subprocess.run([sys.executable, "-c", probe], check=True, env=env, timeout=60)
