"""The staleness timer looks only at the rows whose silence could be due (issue 21, BUS-7).

The schedule's own rules first, then the monitor: a tick at rest judges no row, and under random
heartbeats, clock steps, republish turns, expiries and rebalances the timer says exactly what it
says when it judges every row on every tick (the way it worked before the schedule)."""

from __future__ import annotations

import random

import pytest
from test_monitor_agent import FakeClock, RecordingOutbox, _heartbeat, _sample, raw_channel, running_monitor

from rollout_health.monitor import HealthMonitor
from rollout_health.settings import MonitorSettings
from rollout_health.silence_schedule import SilenceSchedule

# One loop for the whole session, as the async fixtures use (pyproject).
session_loop = pytest.mark.asyncio(loop_scope="session")


def _due(schedule: SilenceSchedule, now: float, *, group: int | None = None, rows: tuple[str, ...] = ()) -> list[str]:
    return schedule.due(now=now, group=group, everything=lambda: rows, settled=True)


def test_the_first_tick_looks_at_every_row_then_only_at_those_whose_time_came() -> None:
    schedule = SilenceSchedule()
    assert _due(schedule, 100.0, rows=("b", "a")) == ["a", "b"]
    schedule.later("a", at=130.0, group=None)
    schedule.later("b", at=190.0, group=None)
    assert _due(schedule, 129.9, rows=("a", "b")) == []
    assert _due(schedule, 130.0, rows=("a", "b")) == ["a"]
    assert _due(schedule, 200.0, rows=("a", "b")) == ["b"]
    assert _due(schedule, 300.0, rows=("a", "b")) == []  # looked at, given no new time


def test_an_earlier_time_stands_and_a_changed_cluster_is_looked_at_next_tick() -> None:
    schedule = SilenceSchedule()
    _due(schedule, 0.0)
    schedule.later("a", at=130.0, group=None)
    schedule.later("a", at=160.0, group=None)  # a newer heartbeat: the earlier look still comes
    schedule.later("b", at=160.0, group=None)
    schedule.later("b", at=120.0, group=None)  # its grace ended: sooner
    schedule.look_soon("c")
    assert _due(schedule, 1.0) == ["c"]
    assert _due(schedule, 125.0) == ["b"]
    assert _due(schedule, 130.0) == ["a"]
    assert len(schedule) == 0


def test_a_forgotten_cluster_is_not_looked_at_and_inf_means_its_turn_only() -> None:
    schedule = SilenceSchedule()
    _due(schedule, 0.0)
    schedule.later("a", at=10.0, group=1)
    schedule.later("b", at=float("inf"), group=1)
    schedule.later("c", at=10.0, group=2)
    schedule.forget("c")
    assert _due(schedule, 5.0, group=1) == ["a", "b"]
    assert _due(schedule, 5.0, group=0) == []
    assert _due(schedule, 20.0, group=2) == ["a"]


def test_a_rescan_repeats_until_the_worker_is_settled() -> None:
    schedule = SilenceSchedule()
    assert schedule.due(now=0.0, group=None, everything=lambda: ["a"], settled=False) == ["a"]
    assert schedule.due(now=0.0, group=None, everything=lambda: ["a", "b"], settled=True) == ["a", "b"]
    schedule.later("a", at=50.0, group=None)
    schedule.later("b", at=50.0, group=None)
    assert _due(schedule, 1.0, rows=("a", "b")) == []
    schedule.rescan()
    assert _due(schedule, 1.0, rows=("a", "b")) == ["a", "b"]  # what was kept is rebuilt
    assert _due(schedule, 60.0, rows=("a", "b")) == []


@session_loop
async def test_a_tick_at_rest_judges_no_row() -> None:
    """1,000 clusters beat every 30 s (limit 90 s, no republishing): after the first tick's look at
    the new rows, ticks judge only the rows that changed, until the silence of the others is due.
    (A checkpoint is a row written, so it is looked at too: with an interval of 10^6 s no row's
    checkpoint mark falls within the test.)"""
    clock, outbox = FakeClock(1000.0), RecordingOutbox()
    settings = MonitorSettings(staleness_limit_s=90, republish_interval_s=0, checkpoint_interval_s=1e6)
    with running_monitor(settings, outbox, clock) as made:
        async with made.agent.test_context(channel=raw_channel(made)) as agent:
            for at in (1000.0, 1030.0):
                clock.now = at
                for i in range(1000):
                    value, headers = _heartbeat(f"c{i}", True, at)
                    await agent.put(value, key=f"c{i}".encode(), headers=headers, timestamp=at)
                assert await made.check_staleness() == []
            looked = _sample(made, "rollout_health_rows_looked_at_total")
            assert looked == 1000  # the first tick looked at every row (new ones); the second at none
            value, headers = _heartbeat("c7", False, 1031.0)
            await agent.put(value, key=b"c7", headers=headers, timestamp=1031.0)
            clock.now = 1035.0
            assert await made.check_staleness() == []
            assert _sample(made, "rollout_health_rows_looked_at_total") == 1001
            for now in (1060.0, 1089.0):
                clock.now = now
                assert await made.check_staleness() == []
                assert _sample(made, "rollout_health_rows_looked_at_total") == 1001  # none
            # The time each row was given when first looked at (1000 + 90) comes: each is looked at
            # once, found heard from at 1030, and given 1120. c7's row says not ready: it is given
            # its expiry (1031 + 900), no stale mark.
            clock.now = 1090.0
            assert await made.check_staleness() == []
            assert _sample(made, "rollout_health_rows_looked_at_total") == 1001 + 1000
            clock.now = 1120.0
            stale = await made.check_staleness()
            assert sorted(r.cluster for r in stale) == sorted(f"c{i}" for i in range(1000) if i != 7)
            assert {r.reason for r in stale} == {"stale: no heartbeat for 90 s"}
            assert _sample(made, "rollout_health_rows_looked_at_total") == 2001 + 999


@session_loop
async def test_bus_7_after_a_takeover_a_heartbeat_within_the_grace_counts_from_itself() -> None:
    """c1's row says 1000 (checkpoint interval 45 s, limit 30 s). After a rebalance the row alone
    would be judged stale from 1075; a heartbeat at 1010 that changes nothing ends the grace, so c1
    is stale at 1040, as the full look has it."""
    clock, outbox = FakeClock(1000.0), RecordingOutbox()
    settings = MonitorSettings(staleness_limit_s=30, republish_interval_s=0, checkpoint_interval_s=45)
    with running_monitor(settings, outbox, clock) as made:
        async with made.agent.test_context(channel=raw_channel(made)) as agent:
            value, headers = _heartbeat("c1", True, 1000.0)
            await agent.put(value, key=b"c1", headers=headers, timestamp=1000.0)
            await made.app.on_partitions_revoked.send(set())
            await made.app.on_partitions_assigned.send(set())
            assert await made.check_staleness() == []  # the look after the rebalance: c1 at 1075
            clock.now = 1010.0
            value, headers = _heartbeat("c1", True, 1010.0)
            await agent.put(value, key=b"c1", headers=headers, timestamp=1010.0)
            clock.now = 1039.0
            assert await made.check_staleness() == []
            clock.now = 1040.0
            assert [(r.cluster, r.reason) for r in await made.check_staleness()] == [
                ("c1", "stale: no heartbeat for 30 s")
            ]


# ---- the timer says what the full look says, on generated histories -------------------------

CLUSTERS = [f"c{i}" for i in range(6)]


def _history(seed: int) -> list[tuple[str, ...]]:
    """Heartbeats (some late, some for a new name), clock steps, ticks and rebalances."""
    rng = random.Random(seed)
    steps: list[tuple[str, ...]] = []
    for _ in range(rng.randint(20, 80)):
        roll = rng.random()
        if roll < 0.4:
            steps.append(("beat", rng.choice(CLUSTERS), rng.choice(["ready", "not"]), str(rng.choice([0, 0, 3, 40]))))
        elif roll < 0.65:
            steps.append(("step", str(rng.choice([1, 5, 10, 20, 31, 60, 130, 400]))))
        elif roll < 0.88:
            steps.append(("tick",))
        else:
            steps.append(("rebalance",))
    steps.append(("tick",))
    return steps


async def _said(settings: MonitorSettings, steps: list[tuple[str, ...]], *, full_look: bool) -> list[list[str]]:
    """What each tick said (sorted), the rows at the end last."""
    clock, outbox = FakeClock(1000.0), RecordingOutbox()
    said: list[list[str]] = []
    with running_monitor(settings, outbox, clock) as made:
        async with made.agent.test_context(channel=raw_channel(made)) as agent:
            for step in steps:
                await _apply(made, agent, clock, step, full_look=full_look, said=said)
        said.append(sorted(f"{name}={row}" for name, row in made.table.items()))
    return said


async def _apply(
    made: HealthMonitor,
    agent: object,
    clock: FakeClock,
    step: tuple[str, ...],
    *,
    full_look: bool,
    said: list[list[str]],
) -> None:
    kind = step[0]
    if kind == "beat":
        _, cluster, ready, late = step
        at = clock.now - float(late)
        value, headers = _heartbeat(cluster, ready == "ready", at)
        await agent.put(value, key=cluster.encode(), headers=headers, timestamp=at)  # type: ignore[attr-defined]
    elif kind == "step":
        clock.now += float(step[1])
    elif kind == "tick":
        if full_look:
            made._schedule.rescan()  # every row, every tick: the timer before the schedule
        readiness = await made.check_staleness()
        said.append(sorted(f"{r.cluster}:{r.ready}:{r.reason}:{r.observed_at}" for r in readiness))
    else:
        await made.app.on_partitions_revoked.send(set())
        await made.app.on_partitions_assigned.send(set())


@session_loop
@pytest.mark.parametrize("republish_s", [0.0, 10.0])
async def test_bus_7_the_scheduled_timer_says_what_the_full_look_says(republish_s: float) -> None:
    settings = MonitorSettings(
        staleness_limit_s=30,
        check_interval_s=5,
        republish_interval_s=republish_s,
        checkpoint_interval_s=45,
        row_expiry_s=200,
    )
    for seed in range(120):
        steps = _history(seed)
        scheduled = await _said(settings, steps, full_look=False)
        full = await _said(settings, steps, full_look=True)
        assert scheduled == full, f"seed {seed}: {steps}"
