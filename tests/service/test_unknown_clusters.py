"""Heartbeats for made-up cluster names must not flood the progress topic: the health monitor
republishes readiness for every name it has a row for, every interval, and the planner answered each
with an UNKNOWN_CLUSTER notice (300 names gave 1,551 notices in 35 s, never ending). Every such event
is counted (a metric); each name is said at most once per `unknown_notice_interval_s`, saying how many
events the notice stands for; names beyond a bound within one period are summed up in one notice."""

from __future__ import annotations

import json

import pytest
from planner_harness import START, make_planner, publish

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.commands import Notice, WaitChanged
from rollout_common.events import Readiness
from rollout_common.topics.catalog import PROGRESS, READINESS
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.planner import Planner
from rollout_planner.service.unknown_clusters import UnknownClusterNotices

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


def _ghost(name: str) -> Notice:
    return Notice(code="UNKNOWN_CLUSTER", message=f"readiness for unknown cluster {name}", cluster=name)


def test_names_beyond_the_bound_are_summed_up_once_per_period() -> None:
    notices = UnknownClusterNotices(interval_s=60, max_names=2)
    other = WaitChanged(rollout_id="r", stage="s", track="nodes", waits=())
    out = notices.filter([_ghost("a"), other, _ghost("b"), _ghost("c"), _ghost("d")], now=0)
    assert [(getattr(c, "cluster", None), c.kind) for c in out] == [
        ("a", "notice"),
        (None, "wait_changed"),
        ("b", "notice"),
        (None, "notice"),
    ]
    assert out[-1] == Notice(
        code="UNKNOWN_CLUSTER",
        message="2 readiness events or results about unknown clusters beyond the 2 named in the last 60 s "
        "(said at most once per 60 s)",
    )
    assert notices.filter([_ghost("e"), _ghost("a")], now=30) == []  # within the period: held, counted
    assert notices.events == 6
    later = notices.filter([_ghost("e")], now=60)  # a and b expired: room for e; c, d, e's count summed
    assert [(n.cluster, n.message) for n in later if isinstance(n, Notice)] == [
        ("e", "readiness for unknown cluster e (said at most once per 60 s per cluster)"),
        (
            None,
            "1 readiness events or results about unknown clusters beyond the 2 named in the last 60 s "
            "(said at most once per 60 s)",
        ),
    ]
