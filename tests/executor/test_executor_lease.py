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
from rollout_common.errors import TransientError
from rollout_common.events import UpgradeResult
from rollout_common.status import Track
from rollout_common.topics import ALL
from rollout_executor.drivers.port import DriverOutcome
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


TARGET_CP = UpgradeTarget(cluster="c1", track=Track.CONTROL_PLANE, version="1.31.2")  # what stage_advance names


class _RestartingStore(MemoryStore):
    """A store that stops answering while `away` (TransientError, as Redis shut down) and whose
    clock the test moves: a lease's TTL keeps counting while Redis is down. `refused_a_lease` is
    set once it refused to hand out a lease held by another."""

    def __init__(self) -> None:
        self.now = 0.0
        self.away = False
        self.refused_a_lease = asyncio.Event()
        super().__init__(clock=lambda: self.now)

    def _check_open(self) -> None:
        if self.away:
            raise TransientError("connection refused", retry_after_s=0.05)
        super()._check_open()

    async def take_lease(self, key: str, *, epoch_key: str, owner: str, ttl_s: float) -> bytes | None:
        token = await super().take_lease(key, epoch_key=epoch_key, owner=owner, ttl_s=ttl_s)
        if token is None:
            self.refused_a_lease.set()
        return token


class _DriverOutlivingTheStore(CountingDriver):
    """Its first upgrade succeeds just as the store goes away for longer than the lease (the
    store's clock moves `lease_s` + 1 on); the store answers again `back_after_s` later, or when
    the test says so (None)."""

    def __init__(self, store: _RestartingStore, *, lease_s: int, back_after_s: float | None) -> None:
        super().__init__()
        self._store = store
        self._lease_s = lease_s
        self._back_after_s = back_after_s
        self.finished = asyncio.Event()

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        outcome = await super().upgrade(target, fencing_token=fencing_token)
        if self.finished.is_set():  # one outage: a second run would find the store answering
            return outcome
        self._store.away = True
        self._store.now += self._lease_s + 1
        if self._back_after_s is not None:
            asyncio.get_running_loop().call_later(self._back_after_s, setattr, self._store, "away", False)
        self.finished.set()
        return outcome


async def _outage_setup(
    *, back_after_s: float | None
) -> tuple[_RestartingStore, MemoryBus, _DriverOutlivingTheStore, Executor]:
    store = _RestartingStore()
    bus = MemoryBus()
    await bus.ensure_topics([t.spec("") for t in ALL])
    driver = _DriverOutlivingTheStore(store, lease_s=30, back_after_s=back_after_s)
    executor = Executor(
        bus=bus,
        ledger=UpgradeLedger(store, executor_id="e1", lease_s=30),
        driver=driver,
        metrics=ExecutorMetrics(),
        executor_id="e1",
        wait_poll_s=0.05,
    )
    return store, bus, driver, executor


async def test_bus3_a_result_whose_lease_lapsed_while_the_store_was_away_is_recorded_not_rerun() -> None:
    """BUS-3: the driver succeeded, then Redis was away for longer than the lease. The fenced write
    of the result was refused when Redis answered again (the lease key had expired), and the
    executor gave its result up ("lease lost; the new holder will record the result"), found no
    result recorded and ran the driver a second time (found on the live services: 6 upgrades ran
    twice after two Redis restarts). Now it takes the lease again and records what it knows."""
    store, bus, driver, executor = await _outage_setup(back_after_s=0.3)

    async with asyncio.timeout(10):
        await executor.handle_command(stage_advance("cmd-1", ("c1",)))

    assert driver.calls == {"c1": 1}
    assert [(r.cluster, r.outcome) for r in results(bus)] == [("c1", "started"), ("c1", "succeeded")]
    recorded = await UpgradeLedger(store, executor_id="e2", lease_s=30).result(TARGET_CP)
    assert recorded is not None
    assert (recorded.command_id, recorded.outcome) == ("cmd-1", "succeeded")
    # Recorded under a second lease, the first having lapsed; the driver ran under the first only.
    assert await store.get(f"executor:lease-epoch:{TARGET_CP.key}") == b"2"
    assert driver.fencing_tokens == [("c1", 1)]


async def test_bus3_a_refused_result_waits_out_another_holder_and_is_recorded_without_a_rerun() -> None:
    """BUS-3: another executor took the target while this one's result could not be recorded; this
    one waits, and once that holder lets go without a result (it died), records the result it kept
    instead of running the driver again."""
    store, bus, driver, executor = await _outage_setup(back_after_s=None)
    other = UpgradeLedger(store, executor_id="e2", lease_s=30).lease(TARGET_CP)

    async def take_over_then_let_go() -> None:
        await driver.finished.wait()
        store.away = False
        assert await other.acquire()  # no await inside the memory store: before e1's next retry
        await store.refused_a_lease.wait()  # e1 asked for the lease while e2 held it
        await other.release()

    async with asyncio.timeout(10):
        await asyncio.gather(executor.handle_command(stage_advance("cmd-1", ("c1",))), take_over_then_let_go())

    assert driver.calls == {"c1": 1}
    assert [(r.cluster, r.outcome) for r in results(bus)] == [("c1", "started"), ("c1", "succeeded")]
    assert await store.get(f"executor:lease-epoch:{TARGET_CP.key}") == b"3"  # e1, e2, e1 again
