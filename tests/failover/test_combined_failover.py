"""Both at once (BUS-3, BUS-6, BUS-8): a whole 60-cluster rollout on the three-broker cluster and
Redis through Sentinel with replica acks, where the broker leading most stage-advance and
upgrade-results partitions and the Redis primary are SIGKILLed in the same moment, right after the
planner published a batch; both come back (the old primary as the new one's replica)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from chaos_processes import ChaosProcesses
from failover_rollout import CLUSTER_ENV, Watcher, assert_exactly_once, busiest_leader, sentinel_infra, whole_rollout

from rollout_devenv import KafkaCluster, RedisSentinelGroup

pytestmark = [pytest.mark.integration, pytest.mark.failover_e2e, pytest.mark.asyncio(loop_scope="session")]


async def test_a_rollout_survives_a_broker_and_the_redis_primary_dying_together(
    kafka_cluster: KafkaCluster, redis_sentinel: RedisSentinelGroup, tmp_path: Path
) -> None:
    infra = sentinel_infra(kafka_cluster.bootstrap, redis_sentinel, extra=CLUSTER_ENV)
    fired: list[str] = []

    async def faults(watcher: Watcher, processes: ChaosProcesses) -> None:
        await watcher.until_fraction(0.25)
        seen = watcher.batches
        await watcher.until(lambda: watcher.batches > seen or watcher.all_complete, what="the next batch")
        prefix = processes.base_env["ROLLOUT_TOPIC_PREFIX"]
        leader = await asyncio.to_thread(busiest_leader, kafka_cluster, prefix)
        primary = redis_sentinel.primary()
        assert primary is not None
        kafka_cluster.node(leader).kill()
        primary.kill()
        promoted = await asyncio.to_thread(redis_sentinel.wait_for_primary, other_than=primary)
        fired.append(f"killed broker {leader} and the primary after batch {watcher.batches}; promoted {promoted}")
        await asyncio.to_thread(redis_sentinel.bring_back, primary)
        await watcher.until_fraction(0.5)
        await asyncio.to_thread(kafka_cluster.node(leader).start)

    outcome = await whole_rollout(infra, tmp_path, faults)
    assert len(fired) == 1
    assert_exactly_once(outcome, fired, tmp_path)
