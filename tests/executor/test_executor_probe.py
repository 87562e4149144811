"""The probe before a second run: an executor that takes over a target another one held and left
without a recorded result asks the driver what the track runs, and does not upgrade it again
when it already runs the version (the window between a driver's end and the recorded result)."""

from __future__ import annotations

from executor_kit import CountingDriver, ExecutorFactory, results, send, stage_advance

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.status import Track
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.target import UpgradeTarget

VERSION = "1.31.2"
TARGET = UpgradeTarget(cluster="c1", track=Track.CONTROL_PLANE, version=VERSION)


class ProbingDriver(CountingDriver):
    """Answers the probe with `answer` (None: cannot tell; an exception: raises it)."""

    def __init__(self, answer: str | Exception | None) -> None:
        super().__init__()
        self.answer = answer
        self.probes: list[str] = []

    async def observed_version(self, target: UpgradeTarget) -> str | None:
        self.probes.append(target.cluster)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def _dead_holder(store: MemoryStore) -> None:
    """An executor that claimed the target, took its lease and died before recording anything;
    its lease has lapsed since (deleted, as the TTL would)."""
    ledger = UpgradeLedger(store, executor_id="e0", lease_s=30)
    assert await ledger.claim(TARGET, command_id="cmd-1") is None
    lease = ledger.lease(TARGET)
    assert await lease.acquire()
    await store.delete(lease.key)


async def _run(make_executor: ExecutorFactory, bus: MemoryBus, driver: ProbingDriver, **options: object) -> None:
    executor = make_executor(driver, executor_id="e1", **options)
    await send(bus, stage_advance("cmd-1", ("c1",), version=VERSION))
    await executor.handle_command(stage_advance("cmd-1", ("c1",), version=VERSION))


async def test_a_takeover_that_finds_the_version_running_records_success_without_upgrading(
    make_executor: ExecutorFactory, bus: MemoryBus, store: MemoryStore
) -> None:
    await _dead_holder(store)
    driver = ProbingDriver(f"v{VERSION}")  # a leading v is how Cluster API writes it
    await _run(make_executor, bus, driver)
    assert driver.probes == ["c1"]
    assert driver.calls == {}
    assert [(r.cluster, r.outcome, r.error) for r in results(bus)] == [("c1", "succeeded", None)]
    recorded = await UpgradeLedger(store, executor_id="e2", lease_s=30).result(TARGET)
    assert recorded is not None and recorded.outcome == "succeeded"


async def test_a_takeover_that_finds_another_version_upgrades(
    make_executor: ExecutorFactory, bus: MemoryBus, store: MemoryStore
) -> None:
    await _dead_holder(store)
    driver = ProbingDriver("1.30.9")
    await _run(make_executor, bus, driver)
    assert (driver.probes, driver.calls) == (["c1"], {"c1": 1})
    assert [r.outcome for r in results(bus)] == ["started", "succeeded"]


async def test_a_driver_that_cannot_tell_or_fails_to_probe_upgrades(
    make_executor: ExecutorFactory, bus: MemoryBus, store: MemoryStore
) -> None:
    await _dead_holder(store)
    cannot_tell = ProbingDriver(None)
    await _run(make_executor, bus, cannot_tell)
    assert (cannot_tell.probes, cannot_tell.calls) == (["c1"], {"c1": 1})
    other = UpgradeTarget(cluster="c2", track=Track.CONTROL_PLANE, version=VERSION)
    ledger = UpgradeLedger(store, executor_id="e0", lease_s=30)
    lease = ledger.lease(other)
    assert await lease.acquire()
    await store.delete(lease.key)
    failing = ProbingDriver(RuntimeError("management cluster unreachable"))
    executor = make_executor(failing, executor_id="e1")
    await executor.handle_command(stage_advance("cmd-2", ("c2",), version=VERSION))
    assert (failing.probes, failing.calls) == (["c2"], {"c2": 1})
    assert [r.outcome for r in results(bus) if r.cluster == "c2"] == ["started", "succeeded"]


async def test_a_first_upgrade_is_not_probed(
    make_executor: ExecutorFactory, bus: MemoryBus, store: MemoryStore
) -> None:
    driver = ProbingDriver(VERSION)
    await _run(make_executor, bus, driver)
    # Nobody held the target before (lease epoch 1): no driver can have run, the probe costs nothing.
    assert (driver.probes, driver.calls) == ([], {"c1": 1})


async def test_with_the_probe_turned_off_a_takeover_upgrades_again(
    make_executor: ExecutorFactory, bus: MemoryBus, store: MemoryStore
) -> None:
    await _dead_holder(store)
    driver = ProbingDriver(VERSION)
    await _run(make_executor, bus, driver, probe_before_rerun=False)
    assert (driver.probes, driver.calls) == ([], {"c1": 1})
    assert [r.outcome for r in results(bus)] == ["started", "succeeded"]


async def test_a_recorded_result_is_re_published_without_probing(
    make_executor: ExecutorFactory, bus: MemoryBus, store: MemoryStore
) -> None:
    first = ProbingDriver(VERSION)
    await _run(make_executor, bus, first)
    again = ProbingDriver(VERSION)
    executor = make_executor(again, executor_id="e2")
    await executor.handle_command(stage_advance("cmd-9", ("c1",), version=VERSION))
    assert (again.probes, again.calls) == ([], {})
    assert [(r.command_id, r.outcome) for r in results(bus)] == [
        ("cmd-1", "started"),
        ("cmd-1", "succeeded"),
        ("cmd-9", "succeeded"),
    ]
