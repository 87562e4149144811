"""Executor tests' fixtures: an in-memory bus and store, and a factory of executors over them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from executor_kit import CountingDriver, ExecutorFactory

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_executor.executor import Executor
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    made = MemoryBus()
    await made.ensure_topics([t.spec() for t in (STAGE_ADVANCE, UPGRADE_RESULTS, DEAD_LETTER)])
    yield made
    await made.close()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def make_executor(bus: MemoryBus, store: MemoryStore) -> ExecutorFactory:
    def make(driver: CountingDriver, *, executor_id: str = "e1", lease_s: int = 30, **options: object) -> Executor:
        ledger = UpgradeLedger(store, executor_id=executor_id, lease_s=lease_s)
        return Executor(
            bus=bus,
            ledger=ledger,
            driver=driver,
            metrics=ExecutorMetrics(),
            executor_id=executor_id,
            wait_poll_s=0.05,
            **options,  # type: ignore[arg-type]
        )

    return make
