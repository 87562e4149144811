"""STAT-1 with a throttled status document: a planner that has caught up brings it up to date.

The status document walks the whole fleet, so between stage and rollout changes it is rebuilt
only every so often (at least `status_interval_s` apart, and more rarely for a large fleet). Once
no event is left to decide, the planner writes it for the last batch: the load test's planner
otherwise left `rollout status` 46 s behind the batches it had decided.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from planner_harness import READINESS, START, make_planner, publish, release

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.events import Readiness
from rollout_planner.service.checkpoint import STATUS_KEY
from rollout_planner.service.clock import ManualClock

pytestmark = pytest.mark.asyncio(loop_scope="session")

P = "t."


async def status_batch(store: MemoryStore) -> int:
    raw = await store.get(STATUS_KEY)
    assert raw is not None
    return int(json.loads(raw)["batch"])


async def test_stat_1_the_status_document_catches_up_with_the_last_batch_once_the_planner_is_idle() -> None:
    bus, store = MemoryBus(), MemoryStore()
    planner = make_planner(bus=bus, store=store, prefix=P, clock=ManualClock(START), status_interval_s=0.5)
    assert await planner.start()
    await release(bus, P)
    assert await planner.step() == 1
    assert await status_batch(store) == 1  # a rollout started: written at once

    await publish(bus, P, READINESS, Readiness(cluster="prod-1", ready=False, reason="drained"), event_id="r-1")
    assert await planner.step() == 1
    assert planner.checkpoint.batch == 2
    assert await status_batch(store) == 1  # throttled: nothing changed state

    async with asyncio.timeout(10):
        while await status_batch(store) != 2:
            assert await planner.step() == 0  # idle polls only
    await planner.close()
