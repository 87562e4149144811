"""The executors' target lease: compare-and-delete, fencing tokens, and a driver stopped (or its
result refused) once the lease is lost (BUS-3: a stale holder never records or reports)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rollout_adapters.memory_store import MemoryStore
from rollout_common.events import UpgradeResult
from rollout_common.status import Track
from rollout_executor.lease import LeaseLostError
from rollout_executor.ledger import UpgradeLedger
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
