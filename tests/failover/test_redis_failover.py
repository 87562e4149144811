"""A whole rollout of 60 clusters on Redis with a replica and three Sentinels while the primary
dies (BUS-3, BUS-6, BUS-8).

The services reach Redis through the Sentinels and wait for the replica's confirmation of every
write (`ROLLOUT_REDIS_REPLICA_ACKS=1`), so nothing the planner journals or an executor records or
leases counts before the replica has it. The primary is SIGKILLed right after the planner
published a batch (journalled just before), Sentinel promotes the replica, and the old primary
comes back as its replica. In the second test the replica is held back first (SIGSTOPped until
the primary drops it), so the promoted replica lacks every write the primary took meanwhile:
those were never confirmed, so no service acted on them. After: every stage and track COMPLETE,
every cluster upgraded exactly once per track (the upgrade program's own log), no batch past a
closed gate, lag 0. `tests/failover/test_store_failover.py` shows the duplicate the same
failover makes of a write that was not waited for.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from chaos_processes import ChaosProcesses
from failover_rollout import Watcher, assert_exactly_once, sentinel_infra, whole_rollout

from rollout_devenv import RedisSentinelGroup

pytestmark = [pytest.mark.integration, pytest.mark.failover_e2e, pytest.mark.asyncio(loop_scope="session")]


async def kill_primary_after_a_batch(group: RedisSentinelGroup, watcher: Watcher, *, lagging: bool) -> str:
    """At a quarter of the upgrades, SIGKILL the primary as soon as the planner publishes its next
    batch (journalled just before), or, `lagging`, once the primary has dropped its held-back
    replica. Then wait for the promotion and bring the old primary back as the new one's replica."""
    await watcher.until_fraction(0.25)
    replica = None
    if lagging:
        # From now on no write is confirmed, so no batch is published: the primary dies at once.
        replica = await asyncio.to_thread(group.lag_replica)
    else:
        seen = watcher.batches
        await watcher.until(lambda: watcher.batches > seen or watcher.all_complete, what="the next batch")
    primary = group.primary()
    assert primary is not None
    primary.kill()
    if replica is not None:
        replica.resume()
    promoted = await asyncio.to_thread(group.wait_for_primary, other_than=primary)
    await asyncio.to_thread(group.bring_back, primary)
    return f"killed the primary after batch {watcher.batches}, {len(watcher.succeeded)} upgrades; promoted {promoted}"


async def test_a_rollout_survives_the_loss_of_the_redis_primary_right_after_a_journalled_batch(
    kafka_bootstrap: str, redis_sentinel: RedisSentinelGroup, tmp_path: Path
) -> None:
    fired: list[str] = []

    async def faults(watcher: Watcher, processes: ChaosProcesses) -> None:
        fired.append(await kill_primary_after_a_batch(redis_sentinel, watcher, lagging=False))

    outcome = await whole_rollout(sentinel_infra(kafka_bootstrap, redis_sentinel), tmp_path, faults)
    assert len(fired) == 1
    assert_exactly_once(outcome, fired, tmp_path)


async def test_a_rollout_survives_a_failover_to_a_replica_that_lacks_the_primary_s_last_writes(
    kafka_bootstrap: str, redis_sentinel: RedisSentinelGroup, tmp_path: Path
) -> None:
    fired: list[str] = []

    async def faults(watcher: Watcher, processes: ChaosProcesses) -> None:
        fired.append(await kill_primary_after_a_batch(redis_sentinel, watcher, lagging=True))

    outcome = await whole_rollout(sentinel_infra(kafka_bootstrap, redis_sentinel), tmp_path, faults)
    assert len(fired) == 1
    assert_exactly_once(outcome, fired, tmp_path)
