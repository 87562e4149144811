"""One executor, or several sharing a store, handling stage-advance batches on the memory bus."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from executor_kit import CountingDriver, ExecutorFactory, dead_letters, results, send, stage_advance

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.ports import Record
from rollout_common.status import Track
from rollout_common.topics.catalog import STAGE_ADVANCE
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.target import UpgradeTarget

# One loop for the whole session, as the async fixtures use (pyproject).
pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _taken(bus: MemoryBus, *, group: str = "executors") -> list[Record]:
    consumer = bus.consumer([STAGE_ADVANCE.name], group=group)
    records = await consumer.poll(timeout_s=0.1)
    await consumer.close()
    return records


def _outcomes(bus: MemoryBus) -> list[tuple[str, str]]:
    return [(r.cluster, r.outcome) for r in results(bus)]


async def test_a_batch_reports_started_then_succeeded_per_cluster(
    bus: MemoryBus, make_executor: ExecutorFactory
) -> None:
    driver = CountingDriver()
    await send(bus, stage_advance("cmd-1", ("c1", "c2", "c3")))
    await make_executor(driver).handle_batch(await _taken(bus))
    outcomes = _outcomes(bus)
    for cluster in ("c1", "c2", "c3"):
        assert [o for c, o in outcomes if c == cluster] == ["started", "succeeded"]
    assert dict(driver.calls) == {"c1": 1, "c2": 1, "c3": 1}
    assert {r.command_id for r in results(bus)} == {"cmd-1"}


async def test_a_failing_cluster_reports_the_drivers_error(bus: MemoryBus, make_executor: ExecutorFactory) -> None:
    await send(bus, stage_advance("cmd-1", ("c1", "c2")))
    await make_executor(CountingDriver(failing=frozenset({"c2"}))).handle_batch(await _taken(bus))
    final = {r.cluster: r for r in results(bus) if r.outcome != "started"}
    assert final["c1"].outcome == "succeeded"
    assert (final["c2"].outcome, final["c2"].error) == ("failed", "boom")


async def test_a_replayed_command_republishes_without_upgrading_again(
    bus: MemoryBus, make_executor: ExecutorFactory
) -> None:
    driver = CountingDriver()
    await send(bus, stage_advance("cmd-1", ("c1", "c2")))
    records = await _taken(bus)
    await make_executor(driver).handle_batch(records)
    # The same records again (an uncommitted batch redelivered), then a new command for the
    # same target (a planner re-sending it) read by a new group with cmd-1 once more: nothing
    # upgrades again, every delivery re-publishes the recorded outcome.
    await make_executor(driver, executor_id="e2").handle_batch(records)
    await send(bus, stage_advance("cmd-2", ("c1", "c2")))
    await make_executor(driver, executor_id="e3").handle_batch(await _taken(bus, group="other"))
    assert dict(driver.calls) == {"c1": 1, "c2": 1}
    # Results land on several partitions, so they are compared as a multiset.
    published = Counter((r.command_id, r.cluster, r.outcome) for r in results(bus))
    assert published == {
        **{("cmd-1", c, "started"): 1 for c in ("c1", "c2")},
        **{("cmd-1", c, "succeeded"): 3 for c in ("c1", "c2")},
        **{("cmd-2", c, "succeeded"): 1 for c in ("c1", "c2")},
    }


async def test_two_executors_with_one_command_upgrade_each_cluster_once(
    bus: MemoryBus, make_executor: ExecutorFactory
) -> None:
    driver = CountingDriver(seconds=0.2)
    clusters = tuple(f"c{i}" for i in range(6))
    await send(bus, stage_advance("cmd-1", clusters))
    records = await _taken(bus)
    await asyncio.gather(
        make_executor(driver, executor_id="e1").handle_batch(records),
        make_executor(driver, executor_id="e2").handle_batch(records),
    )
    assert dict(driver.calls) == dict.fromkeys(clusters, 1)
    # Both report a final result per cluster: the waiting one re-publishes the other's.
    finals = [c for c, o in _outcomes(bus) if o == "succeeded"]
    assert sorted(finals) == sorted(clusters * 2)


async def test_a_dead_executors_claim_is_taken_over_after_its_lease(
    bus: MemoryBus, store: MemoryStore, make_executor: ExecutorFactory
) -> None:
    # "dead" took the lease on c1 and vanished without a result.
    dead = UpgradeLedger(store, executor_id="dead", lease_s=1)
    target = UpgradeTarget(cluster="c1", track=Track.CONTROL_PLANE, version="1.31.2")
    assert await dead.claim(target, command_id="cmd-1") is None
    assert await dead.lease(target).acquire()
    driver = CountingDriver()
    await send(bus, stage_advance("cmd-1", ("c1",)))
    started = time.monotonic()
    await make_executor(driver, executor_id="e2", lease_s=1).handle_batch(await _taken(bus))
    waited = time.monotonic() - started
    assert dict(driver.calls) == {"c1": 1}
    assert 0.0 < waited < 3.0  # one to two lease periods
    assert _outcomes(bus) == [("c1", "started"), ("c1", "succeeded")]
    # The driver got the new holder's fencing token: the dead one had epoch 1.
    assert driver.fencing_tokens == [("c1", 2)]


async def test_upgrades_run_at_most_the_concurrency_bound(bus: MemoryBus, make_executor: ExecutorFactory) -> None:
    driver = CountingDriver(seconds=0.05)
    await send(bus, stage_advance("cmd-1", tuple(f"c{i}" for i in range(5))))
    await send(bus, stage_advance("cmd-2", tuple(f"d{i}" for i in range(5))))
    await make_executor(driver, max_concurrent_upgrades=2).handle_batch(await _taken(bus))
    assert sum(driver.calls.values()) == 10
    assert driver.most_at_once == 2


async def test_a_poison_message_is_dead_lettered_and_the_rest_handled(
    bus: MemoryBus, make_executor: ExecutorFactory
) -> None:
    await bus.publish(STAGE_ADVANCE.name, key=b"x", value=b"{not json", headers={"ce_specversion": b"1.0"})
    await send(bus, stage_advance("cmd-1", ("c1",)))
    driver = CountingDriver()
    await make_executor(driver).handle_batch(await _taken(bus))
    [letter] = dead_letters(bus)
    assert b"missing CloudEvents header" in letter["dlq_reason"]
    assert letter["dlq_topic"] == STAGE_ADVANCE.name.encode()
    assert dict(driver.calls) == {"c1": 1}


async def test_an_unsafe_cluster_name_fails_without_reaching_the_driver(
    bus: MemoryBus, make_executor: ExecutorFactory
) -> None:
    driver = CountingDriver()
    await send(bus, stage_advance("cmd-1", ("c1; rm -rf /", "c2")))
    await make_executor(driver).handle_batch(await _taken(bus))
    assert dict(driver.calls) == {"c2": 1}
    [rejected] = [r for r in results(bus) if r.cluster == "c1; rm -rf /"]
    assert rejected.outcome == "failed"
    assert rejected.error is not None and rejected.error.startswith("rejected:")


async def test_a_cancelled_batch_records_nothing_and_lets_go_of_its_leases(
    bus: MemoryBus, store: MemoryStore, make_executor: ExecutorFactory
) -> None:
    await send(bus, stage_advance("cmd-1", ("c1",)))
    records = await _taken(bus)
    slow = CountingDriver(seconds=30)
    batch = asyncio.create_task(make_executor(slow).handle_batch(records))
    await asyncio.wait_for(slow.started.wait(), 30)  # cancelled mid-upgrade: the driver runs, under its lease
    batch.cancel()
    await asyncio.gather(batch, return_exceptions=True)
    assert await store.keys("executor:result:") == []
    assert await store.keys("executor:lease:") == []
    # Another executor takes over at once, without waiting for a lease to expire.
    fast = CountingDriver()
    started = time.monotonic()
    await make_executor(fast, executor_id="e2").handle_batch(records)
    assert time.monotonic() - started < 1.0
    assert dict(fast.calls) == {"c1": 1}
