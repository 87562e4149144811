"""The executor's loop: commits only handled batches; on shutdown abandons unfinished ones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from executor_kit import CountingDriver, ExecutorFactory, results, send, stage_advance

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.topics.catalog import STAGE_ADVANCE
from rollout_executor.service import ExecutorService
from rollout_executor.settings import ExecutorSettings

# One loop for the whole session, as the async fixtures use (pyproject).
pytestmark = pytest.mark.asyncio(loop_scope="session")


def _settings(**overrides: object) -> ExecutorSettings:
    return ExecutorSettings(group_id="executors", metrics_port=0, **overrides)  # type: ignore[arg-type]


async def _until(condition: Callable[[], object], *, timeout_s: float = 30.0) -> None:
    """Poll: the memory bus offers no event for "committed"."""
    async with asyncio.timeout(timeout_s):
        while True:
            if condition():
                return
            await asyncio.sleep(0.02)


async def test_a_handled_batch_is_committed(bus: MemoryBus, make_executor: ExecutorFactory) -> None:
    driver = CountingDriver()
    service = ExecutorService(_settings(), bus=bus, executor=make_executor(driver))
    stop = asyncio.Event()
    running = asyncio.create_task(service.run(stop))
    await send(bus, stage_advance("cmd-1", ("c1", "c2")))
    await _until(lambda: bus.committed("executors", STAGE_ADVANCE.name))
    assert service.ready
    stop.set()
    await running
    assert sum(bus.committed("executors", STAGE_ADVANCE.name).values()) == 1
    assert sorted(r.outcome for r in results(bus)) == ["started", "started", "succeeded", "succeeded"]


async def test_shutdown_abandons_an_unfinished_batch_without_committing(
    bus: MemoryBus, store: MemoryStore, make_executor: ExecutorFactory
) -> None:
    slow = CountingDriver(seconds=30)
    service = ExecutorService(_settings(shutdown_grace_s=0.1), bus=bus, executor=make_executor(slow))
    stop = asyncio.Event()
    running = asyncio.create_task(service.run(stop))
    await send(bus, stage_advance("cmd-1", ("c1",)))
    await _until(lambda: slow.calls)
    stop.set()
    await asyncio.wait_for(running, 30)  # a generous bound: the grace period is what is tested
    assert bus.committed("executors", STAGE_ADVANCE.name) == {}
    assert await store.keys("executor:lease:") == []
    # The next member of the group gets the batch again and finishes it.
    fast = CountingDriver()
    successor = ExecutorService(_settings(), bus=bus, executor=make_executor(fast, executor_id="e2"))
    stop = asyncio.Event()
    running = asyncio.create_task(successor.run(stop))
    await _until(lambda: bus.committed("executors", STAGE_ADVANCE.name))
    stop.set()
    await running
    assert dict(fast.calls) == {"c1": 1}


async def test_shutdown_lets_a_batch_finish_within_the_grace_period(
    bus: MemoryBus, make_executor: ExecutorFactory
) -> None:
    driver = CountingDriver(seconds=0.3)
    service = ExecutorService(_settings(shutdown_grace_s=5), bus=bus, executor=make_executor(driver))
    stop = asyncio.Event()
    running = asyncio.create_task(service.run(stop))
    await send(bus, stage_advance("cmd-1", ("c1",)))
    await _until(lambda: driver.calls)
    stop.set()
    await asyncio.wait_for(running, 30)  # a generous bound: the grace period is what is tested
    assert sum(bus.committed("executors", STAGE_ADVANCE.name).values()) == 1
