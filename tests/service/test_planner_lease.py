"""One planner at a time (BUS-8) on the in-memory bus and store: a standby waits for the lease,
a planner whose lease passed to another writes nothing, and a lost lease sends it back to
standby. The same store rules hold on Redis (tests/contract); the process tests on the real
broker and Redis are tests/e2e/test_planner_standby.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from planner_harness import START, make_planner, release

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.topics.catalog import STAGE_ADVANCE
from rollout_planner.service.checkpoint import CHECKPOINT_KEY
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.journal import JOURNAL_PREFIX, SNAPSHOT_BATCH_KEY, JournalGapError, journal_key
from rollout_planner.service.leadership import (
    Leadership,
    LeaseEvent,
    LeaseLostError,
    LeaseState,
    LeaseTransitionError,
    transition,
)
from rollout_planner.service.lease_keeper import EPOCH_KEY, LEASE_KEY, PlannerLease
from rollout_planner.service.planner import Planner

pytestmark = pytest.mark.asyncio(loop_scope="session")

P = "t."
TTL_S = 10.0


class Ticks:
    """A monotonic clock the test moves: expiry without waiting."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def planner(bus: MemoryBus, store: MemoryStore, *, owner: str, ticks: Ticks | None = None) -> Planner:
    lease = PlannerLease(store, ttl_s=TTL_S, retry_s=0.05, owner=owner, monotonic=ticks or Ticks())
    made = make_planner(bus=bus, store=store, prefix=P, clock=ManualClock(START), lease=lease)
    return made


async def drain(planner: Planner) -> None:
    while await planner.step():
        pass


async def test_bus_8_the_lease_moves_only_along_its_table() -> None:
    lease = transition(Leadership(), LeaseEvent.TAKEN, sent_at=5.0, ttl_s=9.0, token=b"3/a")
    assert (lease.state, lease.epoch, lease.valid_until) == (LeaseState.ACTIVE, 3, 14.0)
    assert lease.may_act(13.9) and not lease.may_act(14.0)
    renewed = transition(lease, LeaseEvent.RENEWED, sent_at=8.0, ttl_s=9.0)
    assert renewed.valid_until == 17.0
    lost = transition(renewed, LeaseEvent.REFUSED, sent_at=9.0, ttl_s=9.0, reason="another holder")
    assert (lost.state, lost.reason, lost.may_act(9.0)) == (LeaseState.LOST, "another holder", False)
    with pytest.raises(LeaseTransitionError):
        transition(lost, LeaseEvent.RENEWED, sent_at=10.0, ttl_s=9.0)
    with pytest.raises(LeaseTransitionError):
        transition(Leadership(), LeaseEvent.RENEWED, sent_at=1.0, ttl_s=9.0)


async def test_bus_8_a_second_planner_stands_by_until_the_first_lets_go() -> None:
    bus, store = MemoryBus(), MemoryStore()
    first = planner(bus, store, owner="first")
    assert await first.start()
    await release(bus, P)
    await drain(first)
    second = planner(bus, store, owner="second")
    standby = asyncio.create_task(second.start())
    await asyncio.sleep(0.3)  # several of the standby's attempts (every 0.05 s)
    assert not standby.done()
    assert second.lease.state is LeaseState.STANDBY
    assert await store.get(LEASE_KEY) == b"1/first"

    await first.close()  # a clean stop lets go of the lease at once
    assert await asyncio.wait_for(standby, 5.0)
    assert await store.get(LEASE_KEY) == b"2/second"
    assert second.checkpoint.batch == first.checkpoint.batch  # restored what the first wrote
    await second.close()


async def test_bus_8_a_planner_whose_lease_passed_to_another_writes_nothing() -> None:
    """The paused-process case: its lease expired in the store (fake time), another took over;
    its own deadline has not passed (its clock did not move), so only the fenced write stops it."""
    bus, store_clock = MemoryBus(), Ticks()
    store = MemoryStore(clock=store_clock)
    old = planner(bus, store, owner="old")
    assert await old.start()
    store_clock.now += TTL_S + 1
    new = planner(bus, store, owner="new")
    assert await new.start()
    checkpoint = await store.get(CHECKPOINT_KEY)

    await release(bus, P)
    with pytest.raises(LeaseLostError, match="another planner holds the lease"):
        await old.step()
    assert old.lease.state is LeaseState.LOST
    assert await store.get(CHECKPOINT_KEY) == checkpoint  # refused: nothing written
    assert bus.records(P + STAGE_ADVANCE.name) == []  # and nothing published
    with pytest.raises(LeaseLostError):
        await old.step()  # it decides nothing more

    await old.close()  # its consumer leaves the group, as on its way back to standby
    await drain(new)
    assert len(bus.records(P + STAGE_ADVANCE.name)) == 1
    await new.close()


async def test_bus_8_a_planner_past_its_deadline_stops_before_deciding() -> None:
    """Resumed after a pause longer than the TTL: its own clock says the lease is gone."""
    bus, store, ticks = MemoryBus(), MemoryStore(), Ticks()
    paused = planner(bus, store, owner="paused", ticks=ticks)
    assert await paused.start()
    ticks.now += TTL_S
    await release(bus, P)
    with pytest.raises(LeaseLostError, match="not renewed within 9 s"):
        await paused.step()
    assert bus.records(P + STAGE_ADVANCE.name) == []
    await paused.close()
    assert await store.get(LEASE_KEY) == b"1/paused"  # not released: it may not be ours any more


async def test_bus_8_run_goes_back_to_standby_after_losing_the_lease_and_resumes_later() -> None:
    bus, store_clock = MemoryBus(), Ticks()
    store = MemoryStore(clock=store_clock)
    old = planner(bus, store, owner="old")
    running = asyncio.create_task(old.run())
    await asyncio.wait_for(_until(lambda: old.ready), 5.0)
    store_clock.now += TTL_S + 1
    new = planner(bus, store, owner="new")
    assert await new.start()
    await release(bus, P)  # the old one's next write is refused
    await asyncio.wait_for(_until(lambda: old.metrics.lease_lost._value.get() == 1), 5.0)
    assert old.lease.state is LeaseState.STANDBY and not old.ready
    await drain(new)
    await new.close()
    await asyncio.wait_for(_until(lambda: old.ready), 5.0)  # took over again, from the store
    assert await store.get(LEASE_KEY) == b"3/old"
    assert old.checkpoint.batch == new.checkpoint.batch
    old.stop()
    await asyncio.wait_for(running, 5.0)
    assert await store.get(EPOCH_KEY) == b"3"


async def test_a_clean_stop_writes_a_snapshot() -> None:
    bus, store = MemoryBus(), MemoryStore()
    first = planner(bus, store, owner="a")
    running = asyncio.create_task(first.run())
    await asyncio.wait_for(_until(lambda: first.ready), 5.0)
    await release(bus, P)
    await asyncio.wait_for(_until(lambda: len(bus.records(P + STAGE_ADVANCE.name)) == 1), 5.0)
    batch = first.checkpoint.batch
    assert await store.get(SNAPSHOT_BATCH_KEY) == b"0"  # journaled only, so far
    first.stop()
    await asyncio.wait_for(running, 5.0)
    assert await store.get(SNAPSHOT_BATCH_KEY) == str(batch).encode()
    assert await store.keys(JOURNAL_PREFIX) == []  # the next start replays nothing
    assert await store.get(LEASE_KEY) is None  # and a standby takes over at once


async def test_a_journal_gap_is_reported_with_what_to_do() -> None:
    bus, store = MemoryBus(), MemoryStore()
    first = planner(bus, store, owner="a")
    assert await first.start()
    await release(bus, P)
    await drain(first)
    batch = first.checkpoint.batch
    await first.close()
    await store.delete(journal_key(batch))
    with pytest.raises(JournalGapError, match=rf"misses 1 batch\(es\) from {batch} to {batch} .*restore the store"):
        await planner(bus, store, owner="b").start()


async def test_journal_entries_name_the_engine_version() -> None:
    bus, store = MemoryBus(), MemoryStore()
    first = planner(bus, store, owner="a")
    assert await first.start()
    await release(bus, P)
    await drain(first)
    entry = json.loads(await store.get(journal_key(first.checkpoint.batch)) or b"{}")
    assert entry["engine_version"].endswith("+snapshot.2")
    await first.close()


async def _until(condition: Callable[[], object]) -> None:
    """Poll: the planner offers no event for these states."""
    while True:
        if condition():
            return
        await asyncio.sleep(0.02)
