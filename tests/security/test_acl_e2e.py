"""ACLs on the wire, per API, as the principal User:bob (groups "bob-*", topics "orders*")."""

from __future__ import annotations

import uuid

import pytest
from groupd.protocol.errors import ErrorCode

from .conftest import PASSWORDS, RawClient, SecureDaemon

pytestmark = pytest.mark.e2e

G, T = ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED


@pytest.fixture
def bob(secure_daemon: SecureDaemon):  # type: ignore[no-untyped-def]
    c = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    assert c.request("SaslHandshake", 1, {"mechanism": "PLAIN"})["error_code"] == 0
    r = c.request("SaslAuthenticate", 2, {"auth_bytes": b"\0bob\0" + PASSWORDS["bob"].encode()})
    assert r["error_code"] == 0
    yield c
    c.close()


@pytest.fixture
def anonymous(secure_daemon: SecureDaemon):  # type: ignore[no-untyped-def]
    c = RawClient(secure_daemon.ports["PLAINTEXT"])
    # The topics the tests commit to (User:ANONYMOUS may auto-create anything). As Kafka 4, the
    # request that creates a topic answers UNKNOWN_TOPIC_OR_PARTITION; the next one sees it.
    for _ in range(2):
        md = c.request(
            "Metadata", 9, {"topics": [{"name": "orders"}, {"name": "other"}], "allow_auto_topic_creation": True}
        )
    assert [t["error_code"] for t in md["topics"]] == [0, 0]
    yield c
    c.close()


def _commit(c: RawClient, group: str, topics: list[str]) -> dict:  # type: ignore[type-arg]
    return c.request(
        "OffsetCommit",
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}
                for t in topics
            ],
        },
    )


def test_single_group_apis_refuse_other_groups(bob: RawClient) -> None:
    r = bob.request("Heartbeat", 4, {"group_id": "app-x", "generation_id": 1, "member_id": "m"})
    assert r["error_code"] == G
    r = bob.request(
        "JoinGroup",
        9,
        {
            "group_id": "app-x",
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert (r["error_code"], r["generation_id"], r["member_id"]) == (G, -1, "")
    r = bob.request("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["bob-a", "app-x"]})
    assert [(x["key"], x["error_code"]) for x in r["coordinators"]] == [("bob-a", 0), ("app-x", G)]


def test_find_coordinator_of_transactional_ids(bob: RawClient) -> None:
    # KafkaApis.getCoordinator: Describe on TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # and no node; an allowed id is answered with the node (the transaction coordinator's place).
    X = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    r = bob.request("FindCoordinator", 4, {"key_type": 1, "coordinator_keys": ["bob-tx", "app-tx"]})
    got = {c["key"]: (c["error_code"], c["node_id"] >= 0, c["error_message"]) for c in r["coordinators"]}
    assert got == {"bob-tx": (0, True, ""), "app-tx": (X, False, "")}
    r = bob.request("FindCoordinator", 3, {"key": "app-tx", "key_type": 1})
    assert (r["error_code"], r["node_id"], r["error_message"]) == (X, -1, "Transactional Id authorization failed.")
    r = bob.request("FindCoordinator", 1, {"key": "bob-tx", "key_type": 1})
    assert (r["error_code"], r["error_message"]) == (0, "NONE") and r["node_id"] >= 0
    r = bob.request("FindCoordinator", 1, {"key": "app-x", "key_type": 0})
    assert (r["error_code"], r["error_message"]) == (G, "Group authorization failed.")


def test_sync_group_v5_without_protocol_is_inconsistent_before_the_acl_check(bob: RawClient) -> None:
    # KafkaApis.handleSyncGroupRequest checks areMandatoryProtocolTypeAndNamePresent() first.
    req = {"group_id": "app-x", "generation_id": 1, "member_id": "m", "group_instance_id": None, "assignments": []}
    r = bob.request("SyncGroup", 5, {**req, "protocol_type": None, "protocol_name": "range"})
    assert r["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    r = bob.request("SyncGroup", 5, {**req, "protocol_type": "consumer", "protocol_name": "range"})
    assert r["error_code"] == G


def test_delete_groups_answers_each_group_once(bob: RawClient) -> None:
    r = bob.request("DeleteGroups", 2, {"groups_names": ["app-x", "bob-none", "app-x", "bob-none"]})
    assert sorted((x["group_id"], x["error_code"]) for x in r["results"]) == [
        ("app-x", G),
        ("bob-none", ErrorCode.GROUP_ID_NOT_FOUND),
    ]


def test_offset_commit_per_topic_and_group(bob: RawClient, anonymous: RawClient) -> None:
    group = f"bob-{uuid.uuid4().hex[:6]}"
    r = _commit(bob, group, ["orders", "secrets"])
    got = {t["name"]: t["partitions"][0]["error_code"] for t in r["topics"]}
    assert got == {"orders": 0, "secrets": T}
    r = _commit(bob, "app-x", ["orders"])
    assert r["topics"][0]["partitions"][0]["error_code"] == G
    # The refused topic was neither committed nor auto-created.
    md = anonymous.request("Metadata", 9, {"topics": [{"name": "secrets"}], "allow_auto_topic_creation": False})
    assert md["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_per_group_responses_and_listing(bob: RawClient, anonymous: RawClient) -> None:
    mine, theirs = f"bob-{uuid.uuid4().hex[:6]}", f"app-{uuid.uuid4().hex[:6]}"
    assert _commit(bob, mine, ["orders"])["topics"][0]["partitions"][0]["error_code"] == 0
    assert _commit(anonymous, theirs, ["orders", "other"])["topics"][0]["partitions"][0]["error_code"] == 0

    r = bob.request("DescribeGroups", 5, {"groups": [theirs, mine], "include_authorized_operations": False})
    assert [(g["group_id"], g["error_code"]) for g in r["groups"]] == [(theirs, G), (mine, 0)]

    listed = {g["group_id"] for g in bob.request("ListGroups", 4, {"states_filter": []})["groups"]}
    assert mine in listed and theirs not in listed
    assert all(g.startswith("bob-") for g in listed)

    r = bob.request(
        "OffsetFetch",
        8,
        {"groups": [{"group_id": mine, "topics": None}, {"group_id": theirs, "topics": None}], "require_stable": False},
    )
    by_group = {g["group_id"]: g for g in r["groups"]}
    assert by_group[theirs]["error_code"] == G and by_group[theirs]["topics"] == []
    assert [t["name"] for t in by_group[mine]["topics"]] == ["orders"]

    r = bob.request("OffsetFetch", 7, {"group_id": theirs, "topics": None, "require_stable": False})
    assert r["error_code"] == G

    r = bob.request("DeleteGroups", 2, {"groups_names": [theirs]})
    assert r["results"] == [{"group_id": theirs, "error_code": G}]
    # Still there for someone who may see it.
    r = anonymous.request("DescribeGroups", 5, {"groups": [theirs], "include_authorized_operations": False})
    assert r["groups"][0]["error_code"] == 0 and r["groups"][0]["group_state"] == "Empty"


def test_topic_apis(bob: RawClient, anonymous: RawClient) -> None:
    md = bob.request(
        "Metadata", 9, {"topics": [{"name": "orders"}, {"name": "secrets"}], "allow_auto_topic_creation": True}
    )
    assert {t["name"]: t["error_code"] for t in md["topics"]} == {"orders": 0, "secrets": T}
    everything = bob.request("Metadata", 9, {"topics": None, "allow_auto_topic_creation": False})
    assert everything["topics"] and all(t["name"].startswith("orders") for t in everything["topics"])

    r = bob.request(
        "ListOffsets",
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {"name": n, "partitions": [{"partition_index": 0, "timestamp": -1}]} for n in ("orders", "secrets")
            ],
        },
    )
    assert {t["name"]: t["partitions"][0]["error_code"] for t in r["topics"]} == {"orders": 0, "secrets": T}

    r = bob.request(
        "Fetch",
        11,
        {
            "max_wait_ms": 0,
            "min_bytes": 1,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {"topic": "secrets", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}
            ],
            "forgotten_topics_data": [],
        },
    )
    assert [(t["topic"], t["partitions"][0]["error_code"]) for t in r["responses"]] == [("secrets", T)]

    r = bob.request(
        "CreateTopics",
        5,
        {
            "topics": [
                {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                for n in ("orders-created", "secrets-created")
            ],
            "timeout_ms": 1000,
            "validate_only": True,
        },
    )
    assert {t["name"]: t["error_code"] for t in r["topics"]} == {"orders-created": 0, "secrets-created": T}


def test_transactional_produce_needs_write_on_the_transactional_id(bob: RawClient, anonymous: RawClient) -> None:
    # KafkaApis.handleProduceRequest: hasTransactionalRecords -> WRITE on TRANSACTIONAL_ID, else the
    # whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, before any topic is looked at.
    from groupd.storage import records as rec

    raw = rec.build_batch(
        [(None, b"v", (), 1)], producer_id=4242, producer_epoch=0, base_sequence=0, transactional=True
    )

    def produce(txn_id: str) -> list[int]:
        r = bob.request(
            "Produce",
            9,
            {
                "transactional_id": txn_id,
                "acks": -1,
                "timeout_ms": 1000,
                "topic_data": [
                    {"name": "orders", "partition_data": [{"index": 0, "records": raw}]},
                    {"name": "secrets", "partition_data": [{"index": 0, "records": raw}]},
                ],
            },
        )
        return [p["error_code"] for t in r["responses"] for p in t["partition_responses"]]

    X = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(f"app-{uuid.uuid4().hex}") == [X, X]
    # allowed: on to the partition's KIP-890 check, which refuses a producer the transaction
    # coordinator does not know
    assert produce(f"bob-{uuid.uuid4().hex}") == [ErrorCode.INVALID_PRODUCER_ID_MAPPING, T]


def test_transaction_apis_need_the_transactional_id(bob: RawClient, anonymous: RawClient) -> None:
    # KafkaApis: InitProducerId, AddPartitionsToTxn v0-3, AddOffsetsToTxn, EndTxn and TxnOffsetCommit
    # need WRITE on the transactional id (then WRITE on the topics, READ on the group);
    # AddPartitionsToTxn v4+ (broker to broker) CLUSTER_ACTION; Describe/ListTransactions DESCRIBE.
    X, N = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.OPERATION_NOT_ATTEMPTED
    mine, theirs = f"bob-{uuid.uuid4().hex}", f"app-{uuid.uuid4().hex}"
    init = {"transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    assert bob.request("InitProducerId", 4, {"transactional_id": theirs, **init})["error_code"] == X
    assert anonymous.request("InitProducerId", 4, {"transactional_id": theirs, **init})["error_code"] == 0
    r = bob.request("InitProducerId", 4, {"transactional_id": mine, **init})
    assert r["error_code"] == 0
    ids = {"producer_id": r["producer_id"], "producer_epoch": r["producer_epoch"]}
    topics = [{"name": "orders", "partitions": [0]}, {"name": "secrets", "partitions": [0]}]

    def add(txn_id: str) -> dict[str, int]:
        body = {f"v3_and_below_{k}": v for k, v in {"transactional_id": txn_id, **ids, "topics": topics}.items()}
        r = bob.request("AddPartitionsToTxn", 3, body)
        return {
            t["name"]: p["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        }

    assert add(theirs) == {"orders": X, "secrets": X}
    assert add(mine) == {"orders": N, "secrets": T}
    r = bob.request(
        "AddPartitionsToTxn",
        4,
        {"transactions": [{"transactional_id": mine, **ids, "verify_only": True, "topics": topics[:1]}]},
    )
    assert r["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    offsets = {**ids, "group_id": "bob-g"}
    assert bob.request("AddOffsetsToTxn", 3, {"transactional_id": theirs, **offsets})["error_code"] == X
    assert bob.request("AddOffsetsToTxn", 3, {"transactional_id": mine, **ids, "group_id": "app-g"})["error_code"] == G
    assert bob.request("EndTxn", 3, {"transactional_id": theirs, **ids, "committed": True})["error_code"] == X
    commit = {
        **offsets,
        "transactional_id": theirs,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    }
    r = bob.request("TxnOffsetCommit", 3, commit)
    assert [p["error_code"] for t in r["topics"] for p in t["partitions"]] == [X]
    r = bob.request("TxnOffsetCommit", 3, {**commit, "transactional_id": mine, "group_id": "app-g"})
    assert [p["error_code"] for t in r["topics"] for p in t["partitions"]] == [G]
    r = bob.request("DescribeTransactions", 0, {"transactional_ids": [mine, theirs]})
    got = {s["transactional_id"]: (s["error_code"], s["transaction_state"]) for s in r["transaction_states"]}
    assert got == {mine: (0, "Empty"), theirs: (X, "")}
    listed = {t["transactional_id"] for t in bob.request("ListTransactions", 1, {})["transaction_states"]}
    assert mine in listed and theirs not in listed
    listed = {t["transactional_id"] for t in anonymous.request("ListTransactions", 1, {})["transaction_states"]}
    assert {mine, theirs} <= listed
