"""STAT-1 with a throttled status document: a planner that has caught up brings it up to date.

The status document walks the whole fleet, so between stage and rollout changes it is rebuilt
only every so often (at least `status_interval_s` apart, and more rarely for a large fleet). Once
no event is left to decide, the planner writes it for the last batch: the load test's planner
otherwise left `rollout status` 46 s behind the batches it had decided.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from planner_harness import READINESS, START, make_planner, publish, release

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.events import Readiness
from rollout_common.fleet import Cluster
from rollout_common.sequence import Sequence
from rollout_planner.engine import new_state
from rollout_planner.service.checkpoint import STATUS_KEY
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.metrics import PlannerMetrics
from rollout_planner.service.status_writer import StatusWriter

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


class _Monotonic:
    """A monotonic clock that reads `times` in turn: the test says what each reading is."""

    def __init__(self, times: list[float]) -> None:
        self._times: Iterator[float] = iter(times)

    def __call__(self) -> float:
        return next(self._times)


async def test_stat_1_an_idle_planners_catch_up_is_spaced_by_the_documents_cost_as_any_rebuild() -> None:
    """A document that took 0.5 s to build is rebuilt at most 5% of the time: 10 s after the last
    one, not `status_interval_s` (1 s) after it, even when the planner is idle (the sustained run's
    planner, idle between bursts of readiness, spent half a core on catch-ups at 300,000 clusters)."""
    state = new_state(
        Sequence.model_validate({"name": "main", "stages": [{"name": "prod", "clusterSelector": {}}]}),
        [Cluster.model_validate({"name": "prod-1", "version": "1.30.5-gke.1000"})],
    )
    # readings: the build's start and end, then one per question asked
    clock = _Monotonic([100.0, 100.5, 101.0, 101.0, 109.9, 110.0, 110.0])
    writer = StatusWriter(interval_s=1.0, metrics=PlannerMetrics(), monotonic=clock)
    writer.written(1, writer.encode(state, 1))

    assert writer.behind(2) is False  # 1 s after: the interval has passed, the share has not
    assert writer.due(2, urgent=False) is False
    assert writer.due(2, urgent=True) is True  # a transition is described at once, whatever it costs
    assert writer.behind(2) is False  # 9.9 s after
    assert writer.behind(2) is True  # 10 s after: 0.5 s is 5% of it
    assert writer.behind(1) is False  # batch 1 is described already
    assert writer.due(2, urgent=False) is True


async def test_stat_1_the_first_batch_is_described_at_once_after_an_idle_planners_empty_document() -> None:
    """A new planner polls nothing at first and describes the state as built (batch 0, as of its
    start, not of 1970). The first batch is described at once: when the planner starts from the
    applied sequence alone, that batch holds the fleet `rollout apply` published, and `rollout
    status` right after the apply showed the empty document for a whole `status_interval_s`."""
    bus, store = MemoryBus(), MemoryStore()
    clock = ManualClock(START)
    planner = make_planner(bus=bus, store=store, prefix=P, clock=clock, status_interval_s=3600)
    assert await planner.start()
    assert await planner.step() == 0
    raw = await store.get(STATUS_KEY)
    assert raw is not None
    assert (json.loads(raw)["batch"], json.loads(raw)["now"]) == (0, START)
    await publish(bus, P, READINESS, Readiness(cluster="prod-1", ready=False, reason="drained"), event_id="r-1")
    assert await planner.step() == 1
    assert await status_batch(store) == 1
    await publish(bus, P, READINESS, Readiness(cluster="prod-1", ready=True), event_id="r-2")
    assert await planner.step() == 1
    assert await status_batch(store) == 1  # from the second on, throttled as before
    await planner.close()
