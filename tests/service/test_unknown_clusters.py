"""Heartbeats for made-up cluster names must not flood the progress topic: the health monitor
republishes readiness for every name it has a row for, every interval, and the planner answered each
with an UNKNOWN_CLUSTER notice (300 names gave 1,551 notices in 35 s, never ending). Every such event
is counted (a metric); each name is said at most once per `unknown_notice_interval_s`, saying how many
events the notice stands for; names beyond a bound within one period are summed up in one notice.
What was said is in the engine's state and its snapshot, so a restarted planner does not say it again."""

from __future__ import annotations

import json

import pytest
from planner_harness import START, make_planner, publish, sequence

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.commands import Command, Notice
from rollout_common.events import EventBatch, Readiness, UpgradeResult
from rollout_common.topics.catalog import PROGRESS, READINESS
from rollout_planner.engine import EngineState, decide, new_state, snapshot
from rollout_planner.engine.audit import audit
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.planner import Planner

P = "t."
HOUR = 3600.0
GHOSTS = [f"ghost-{i:03d}" for i in range(300)]


async def _republish(bus: MemoryBus, planner: Planner, round_: int) -> None:
    """One republish interval of a monitor with a row for each made-up name, then the planner drains."""
    for name in GHOSTS:
        await publish(bus, P, READINESS, Readiness(cluster=name, ready=True), event_id=f"{name}/{round_}")
    while await planner.step():
        pass


def _unknown_notices(bus: MemoryBus) -> list[dict[str, object]]:
    bodies = [json.loads(r.value) for r in bus.records(P + PROGRESS.name)]
    return [b for b in bodies if b["kind"] == "notice" and b["code"] == "UNKNOWN_CLUSTER"]


@pytest.mark.asyncio(loop_scope="session")
async def test_unknown_clusters_are_counted_and_said_once_per_name_per_period() -> None:
    bus, store, clock = MemoryBus(), MemoryStore(), ManualClock(START)
    planner = make_planner(bus=bus, store=store, prefix=P, clock=clock)
    assert await planner.start()
    try:
        for round_ in range(4):  # four republish intervals of 30 s
            await _republish(bus, planner, round_)
            clock.advance(30)
        notices = _unknown_notices(bus)
        assert sorted(n["cluster"] for n in notices) == GHOSTS  # once each, not 1,200 times
        by_name = {n["cluster"]: n["message"] for n in notices}
        assert by_name["ghost-000"] == (
            "readiness for unknown cluster ghost-000 (said at most once per 3600 s per cluster)"
        )
        metric = planner.metrics.registry.get_sample_value
        assert metric("rollout_planner_unknown_cluster_events_total") == 1200
        assert metric("rollout_planner_unknown_clusters") == 300

        clock.advance(HOUR)  # the next period: each name once more, with what it stood for
        await _republish(bus, planner, 4)
        again = _unknown_notices(bus)[300:]
        assert sorted(n["cluster"] for n in again) == GHOSTS
        assert {n["cluster"]: n["message"] for n in again}["ghost-000"] == (
            "readiness for unknown cluster ghost-000 (said at most once per 3600 s per cluster; "
            "3 more since its last notice)"
        )
        assert metric("rollout_planner_unknown_cluster_events_total") == 1500
    finally:
        await planner.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_restarted_planner_does_not_say_again_the_names_it_said_within_the_period() -> None:
    bus, store, clock = MemoryBus(), MemoryStore(), ManualClock(START)
    # a snapshot after every batch: the restart loads what was said from it, with no journal to replay
    planner = make_planner(bus=bus, store=store, prefix=P, clock=clock, snapshot_every_batches=1)
    assert await planner.start()
    await _republish(bus, planner, 0)
    await planner.close()
    assert len(_unknown_notices(bus)) == 300

    clock.advance(30)
    restarted = make_planner(bus=bus, store=store, prefix=P, clock=clock)
    assert await restarted.start()
    try:
        await _republish(bus, restarted, 1)
        assert len(_unknown_notices(bus)) == 300  # before, the restart said all 300 names again
        metric = restarted.metrics.registry.get_sample_value
        assert metric("rollout_planner_unknown_cluster_events_total") == 300  # this process's events
        assert metric("rollout_planner_unknown_clusters") == 300

        clock.advance(HOUR)
        await _republish(bus, restarted, 2)
        again = {n["cluster"]: n["message"] for n in _unknown_notices(bus)[300:]}
        assert sorted(again) == GHOSTS
        assert again["ghost-000"] == (
            "readiness for unknown cluster ghost-000 (said at most once per 3600 s per cluster; "
            "1 more since its last notice)"
        )
    finally:
        await restarted.close()


def _ghost(name: str) -> Readiness:
    return Readiness(cluster=name, ready=True)


def _decided(state: EngineState, *events: Readiness | UpgradeResult, at: float) -> list[Command]:
    _, commands = decide(state, EventBatch(events=events), at)
    assert audit(state) == []
    return commands


def _said(name: str) -> Notice:
    message = f"readiness for unknown cluster {name} (said at most once per 60 s per cluster)"
    return Notice(code="UNKNOWN_CLUSTER", cluster=name, message=message)


def _summed(count: int) -> Notice:
    return Notice(
        code="UNKNOWN_CLUSTER",
        message=f"{count} readiness events or results about unknown clusters beyond the 2 named in the last 60 s "
        "(said at most once per 60 s)",
    )


def test_names_beyond_the_bound_are_summed_up_once_per_period() -> None:
    state = new_state(sequence(), [])
    state.unknown.interval_s, state.unknown.max_names = 60, 2
    out = _decided(state, _ghost("a"), _ghost("b"), _ghost("c"), _ghost("d"), at=0)
    assert out == [_said("a"), _said("b"), _summed(2)]
    assert _decided(state, _ghost("e"), _ghost("a"), at=30) == []  # within the period: held, counted
    assert state.unknown.events == 6
    # a snapshot keeps what was said: the reloaded state decides as the live one
    twin = snapshot.load(snapshot.dump(state))
    twin.unknown.interval_s, twin.unknown.max_names = 60, 2
    later = _decided(state, _ghost("e"), at=60)  # b expired: room for e; c, d, e's count summed
    assert _decided(twin, _ghost("e"), at=60) == later
    assert [c for c in later if isinstance(c, Notice)] == [_said("e"), _summed(1)]
