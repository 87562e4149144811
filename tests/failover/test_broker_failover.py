"""A whole rollout of 60 clusters on a three-broker KRaft cluster while brokers die (BUS-3, BUS-6).

The services create their topics with replication factor 3 and min.insync.replicas 2 and produce
with acks=all and idempotence. Mid-rollout the broker leading most of the stage-advance and
upgrade-results partitions is SIGKILLed; the rollout goes on on the other two; it is started
again, and then the active KRaft controller is SIGKILLed, another is elected, and it is started
again. After: every stage and track COMPLETE, every cluster upgraded exactly once per track (the
upgrade program's own log of its starts, and the topics), no batch past a closed gate (GATE-1,
GATE-3), lag 0.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from chaos_processes import ChaosProcesses
from failover_rollout import CLUSTER_ENV, Infra, Watcher, assert_exactly_once, busiest_leader, whole_rollout

from rollout_common.topics.catalog import STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_devenv import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.failover_e2e, pytest.mark.asyncio(loop_scope="session")]


async def test_a_rollout_survives_the_loss_of_the_leading_broker_and_of_the_active_controller(
    kafka_cluster: KafkaCluster, redis_url: str, tmp_path: Path
) -> None:
    infra = Infra(bootstrap=kafka_cluster.bootstrap, redis_url=redis_url, env=CLUSTER_ENV)
    fired: list[str] = []

    async def faults(watcher: Watcher, processes: ChaosProcesses) -> None:
        await watcher.until_fraction(0.2)
        prefix = processes.base_env["ROLLOUT_TOPIC_PREFIX"]
        leader = await asyncio.to_thread(busiest_leader, kafka_cluster, prefix)
        kafka_cluster.node(leader).kill()
        fired.append(f"killed leader {leader} at {len(watcher.succeeded)}")
        # The rollout goes on with one broker of three gone.
        await watcher.until_fraction(0.45)
        await asyncio.to_thread(kafka_cluster.node(leader).start)
        topics = [prefix + STAGE_ADVANCE.name, prefix + UPGRADE_RESULTS.name]
        await asyncio.to_thread(kafka_cluster.wait_in_sync, topics)
        controller = await asyncio.to_thread(kafka_cluster.wait_for_controller)
        kafka_cluster.node(controller).kill()
        elected = await asyncio.to_thread(kafka_cluster.wait_for_controller, other_than=controller)
        fired.append(f"killed controller {controller} at {len(watcher.succeeded)}, {elected} elected")
        await watcher.until_fraction(0.7)
        await asyncio.to_thread(kafka_cluster.node(controller).start)

    outcome = await whole_rollout(infra, tmp_path, faults)
    assert len(fired) == 2, fired
    assert_exactly_once(outcome, fired, tmp_path)
