"""The KIP-848 bench's pieces against a real groupd: a preloaded consumer group is loaded as Stable,
its raw ConsumerGroupHeartbeat clients reconcile it to one owner per partition, and a joining member
takes its share without an error answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groupd.ops.kafka_client import KafkaClient

from bench import consumer_groups as cg
from tests.support.daemon import GroupdProcess


def test_a_preloaded_group_reconciles_and_takes_a_joining_member(tmp_path: Path) -> None:
    group, topic, n = "bench-cg", "cg-topic", 40
    ids = cg.preload(tmp_path / "data", group, topic, n)
    with GroupdProcess(tmp_path / "data") as d:
        with KafkaClient(d.bootstrap) as client:
            loaded = client.describe_consumer_group(group)
            assert loaded is not None and (loaded.state, loaded.group_epoch, len(loaded.members)) == ("Stable", 1, n)
            client.create_topic(topic, 64, 1, {})

        async def run() -> float:
            driver = cg.CgDriver("127.0.0.1", d.port, group, topic, conns=2, inflight=4)
            await driver.start()
            try:
                members = [cg.CgMember(mid, cg.EPOCH_AT_LOAD) for mid in ids]
                await driver.closed_loop(members, lambda: members[0].epoch > 1 and cg.settled(members), 30)
                steady = await cg.heartbeat_throughput(driver, members, 0.3)
                assert steady["requests"] > 0 and steady["errors"] == {}
                joiner = cg.new_member()
                members.append(joiner)
                return await driver.closed_loop(
                    members,
                    lambda: joiner.epoch > 0 and bool(joiner.owned) and cg.settled(members, joiner.epoch),
                    30,
                )
            finally:
                driver.close()

        took = asyncio.run(run())
        assert took < 30
        with KafkaClient(d.bootstrap) as client:
            after = client.describe_consumer_group(group)
        assert after is not None and after.state == "Stable" and len(after.members) == n + 1
        owned = sorted(p for m in after.members for _t, p in m.assignment or [])
        assert owned == list(range(64))
        assert all(m.member_epoch == after.group_epoch == after.assignment_epoch for m in after.members)
