"""The executors' target lease: compare-and-delete, fencing tokens, and a driver stopped (or its
result refused) once the lease is lost (BUS-3: a stale holder never records or reports)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import pytest
from executor_kit import CountingDriver, results, stage_advance

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.events import UpgradeResult
from rollout_common.status import Track
from rollout_common.topics import ALL
from rollout_executor.executor import Executor
from rollout_executor.lease import LeaseLostError
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics
from rollout_executor.target import UpgradeTarget

TARGET = UpgradeTarget(cluster="c1", track=Track.NODES, version="1.31.2")
KEY = f"executor:lease:{TARGET.key}"


def _result() -> UpgradeResult:
    return UpgradeResult(command_id="cmd-1", cluster="c1", track=Track.NODES, version="1.31.2", outcome="succeeded")


async def test_release_never_deletes_a_lease_another_executor_took_since() -> None:
    store = MemoryStore()
    first = UpgradeLedger(store, executor_id="e1", lease_s=30).lease(TARGET)
    assert await first.acquire()
    await store.delete(KEY)  # as if it had expired
    second = UpgradeLedger(store, executor_id="e2", lease_s=30).lease(TARGET)
    assert await second.acquire()
    await first.release()
    assert await store.get(KEY) == second.token
    assert second.fencing_token == 2


async def test_the_driver_is_stopped_when_another_executor_takes_the_lease() -> None:
    store = MemoryStore()
    lease = UpgradeLedger(store, executor_id="e1", lease_s=1).lease(TARGET)
    assert await lease.acquire()
    await store.delete(KEY)
    other = UpgradeLedger(store, executor_id="e2", lease_s=30).lease(TARGET)
    assert await other.acquire()
    finished: list[bool] = []

    async def upgrade() -> None:
        await asyncio.sleep(30)
        finished.append(True)

    started = time.monotonic()
    with pytest.raises(LeaseLostError):
        await lease.hold(upgrade())
    assert time.monotonic() - started < 1.0  # the first renewal, a third of the lease in
    assert finished == []


async def test_the_driver_is_stopped_when_renewals_fail_for_a_whole_lease() -> None:
    store = MemoryStore()
    lease = UpgradeLedger(store, executor_id="e1", lease_s=1).lease(TARGET)
    assert await lease.acquire()
    await store.close()  # every renewal now fails: the key will have expired after lease_s

    started = time.monotonic()
    with pytest.raises(LeaseLostError):
        await lease.hold(asyncio.sleep(30))
    assert 1.0 <= time.monotonic() - started < 2.0


async def test_a_result_is_refused_once_the_lease_is_lost() -> None:
    store = MemoryStore()
    ledger = UpgradeLedger(store, executor_id="e1", lease_s=30)
    lease = ledger.lease(TARGET)
    assert await lease.acquire()
    await store.delete(KEY)
    assert await UpgradeLedger(store, executor_id="e2", lease_s=30).lease(TARGET).acquire()
    with pytest.raises(LeaseLostError):
        await ledger.record(TARGET, _result(), lease=lease)
    assert await ledger.result(TARGET) is None

    mine = UpgradeLedger(store, executor_id="e3", lease_s=30)
    await store.delete(KEY)
    held = mine.lease(TARGET)
    assert await held.acquire()
    await mine.record(TARGET, _result(), lease=held)
    assert await mine.result(TARGET) == _result()


class _SlowStartedBus(MemoryBus):
    """A bus on which publishing a `started` result takes `delay_s`, as with the broker restarting
    (an idempotent producer retries until the broker is back)."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self._delay_s = delay_s

    async def publish(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes] | None = None
    ) -> None:
        if b'"started"' in value:
            await asyncio.sleep(self._delay_s)
        await super().publish(topic, key=key, value=value, headers=headers)


async def test_a_slow_started_publish_does_not_lapse_the_lease_and_rerun_the_upgrade() -> None:
    """BUS-3: the `started` result published for longer than the lease (a broker restart) lapsed
    the lease before its renewals began, so the driver's result was refused and the same executor
    ran the upgrade again (the chaos test's unexplained duplicates, seeds 5 and 6)."""
    bus = _SlowStartedBus(delay_s=2.5)
    await bus.ensure_topics([t.spec("") for t in ALL])
    driver = CountingDriver()
    executor = Executor(
        bus=bus,
        ledger=UpgradeLedger(MemoryStore(), executor_id="e1", lease_s=1),
        driver=driver,
        metrics=ExecutorMetrics(),
        executor_id="e1",
        wait_poll_s=0.05,
    )
    async with asyncio.timeout(20):  # here every publish is slow: without the fix it reran for good
        await executor.handle_command(stage_advance("cmd-1", ("c1",)))
    assert driver.calls == {"c1": 1}
    assert [r.outcome for r in results(bus)] == ["started", "succeeded"]
