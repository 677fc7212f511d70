"""The README's cluster-mode section against a real ``--brokers 3`` daemon: what it says about where the
coordinators live is what FindCoordinator answers. (It once said the transaction coordinator was not
spread and named the first broker, while the transactions section, and the code, spread it.)"""

from __future__ import annotations

import re
from pathlib import Path

from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.partitioning import coordinator_partition

from tests.cluster.conftest import raw

README = Path(__file__).resolve().parents[2] / "README.md"
KEY_TYPES = {0: "__consumer_offsets", 1: "__transaction_state"}


def _cluster_mode_section() -> str:
    text = README.read_text()
    return text.split("\n## Cluster mode\n", 1)[1].split("\n## ", 1)[0]


def _find_coordinators(cluster: GroupdBroker, via: int, key_type: int, keys: list[str]) -> dict[str, int]:
    client = raw(cluster, via)
    try:
        answer = client.request("FindCoordinator", 4, {"key_type": key_type, "coordinator_keys": keys})
    finally:
        client.close()
    assert all(c["error_code"] == 0 for c in answer["coordinators"]), answer
    return {c["key"]: c["node_id"] for c in answer["coordinators"]}


def test_the_readme_says_both_coordinators_are_spread() -> None:
    section = _cluster_mode_section()
    assert "not spread" not in section.lower(), "the README says a coordinator is not spread over the brokers"
    (bullet,) = [b for b in section.split("\n- ") if "FindCoordinator on any broker" in b]
    bullet = " ".join(bullet.split())
    assert "spread over the brokers" in bullet
    assert "key type 1" in bullet
    for topic in KEY_TYPES.values():
        assert f"`{topic}` partition" in bullet, topic
    assert re.search(r"partition p on broker `p % N`", bullet)


def test_groups_and_transactional_ids_are_coordinated_where_the_readme_says(cluster: GroupdBroker) -> None:
    nodes = sorted(cluster.nodes)
    keys = [f"readme-key-{i}" for i in range(60)]
    for key_type in KEY_TYPES:
        # Placement as the README states it: partition p of the topic is led by the (p % N)-th broker.
        expected = {k: nodes[coordinator_partition(k, 50) % len(nodes)] for k in keys}
        for via in nodes:
            assert _find_coordinators(cluster, via, key_type, keys) == expected, (key_type, via)
        assert set(expected.values()) == set(nodes), key_type  # every broker coordinates some
