"""SEQ-6, PART-2..4: a join or a change in place is applied to the stage incrementally (only the
clusters that cross a partition boundary move), and the outcome must be exactly the full recompute's:
the same partitions (names, members in name order, limits, counts), the same per-cluster state,
queues and runs, and the same commands, after every event of generated join / leave / relabel
sequences during a rollout (with upgrades finishing and readiness flapping in between)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_common.events import Event, InventoryChange, Readiness, ReleaseTarget, UpgradeResult
from rollout_common.fleet import Cluster
from rollout_common.sequence import Sequence
from rollout_common.status import TRACKS
from rollout_planner.engine import EngineState, decide, new_state
from rollout_planner.engine.inventory import Placement

V30 = "1.30.5-gke.1000"
V31 = "1.31.13-gke.1023000"
T0 = 1_767_225_600.0

AUTO_PERCENT = {"autoPartitionSize": "25%", "autoPartitionThreshold": 4, "maxUnavailable": 1, "maxNew": 2}
AUTO_COUNT = {"autoPartitionSize": 3, "autoPartitionThreshold": 4, "maxUnavailable": "50%", "maxNew": 3}
SINGLE = {"autoPartitionThreshold": 0, "maxUnavailable": 2, "maxNew": 2}
MANUAL = {
    "maxUnavailable": 1,
    "maxNew": 2,
    "partitions": [
        {"name": "x", "clusterSelector": {"matchLabels": {"zone": "x"}}},
        {
            "name": "xy",
            "clusterSelector": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x", "y"]}]},
        },
    ],
}
STRATEGIES = [AUTO_PERCENT, AUTO_COUNT, SINGLE, MANUAL]
ENVS = ["a", "b", "none"]
ZONES = ["x", "y", "z"]


def _sequence(first: dict[str, Any], second: dict[str, Any]) -> Sequence:
    stages = [
        {"name": "a", "clusterSelector": {"matchLabels": {"env": "a"}}, "soak": "1h", "rolloutStrategy": first},
        {"name": "b", "clusterSelector": {"matchLabels": {"env": "b"}}, "soak": "1h", "rolloutStrategy": second},
    ]
    return Sequence.model_validate({"name": "main", "channel": "regular", "stages": stages})


def _cluster(name: str, env: str, zone: str) -> Cluster:
    return Cluster(name=name, labels={"env": env, "zone": zone}, version=V30)


op = st.one_of(
    st.tuples(st.just("join"), st.integers(0, 999), st.sampled_from(ENVS), st.sampled_from(ZONES)),
    st.tuples(st.just("relabel"), st.integers(0, 10**6), st.sampled_from(ENVS), st.sampled_from(ZONES)),
    st.tuples(st.just("leave"), st.integers(0, 10**6)),
    st.tuples(st.just("finish"), st.integers(0, 10**6), st.booleans()),
    st.tuples(st.just("ready"), st.integers(0, 10**6), st.booleans()),
)


def _event(state: EngineState, step: tuple[Any, ...]) -> Event | None:
    names = sorted(state.clusters)
    kind = step[0]
    if kind == "join":
        return InventoryChange(action="upsert", cluster=_cluster(f"c-{step[1]:03d}", step[2], step[3]))
    if not names:
        return None
    name = names[step[1] % len(names)]
    if kind == "relabel":
        return InventoryChange(action="upsert", cluster=_cluster(name, step[2], step[3]))
    if kind == "leave":
        return InventoryChange(action="remove", name=name)
    if kind == "ready":
        return Readiness(cluster=name, ready=step[2])
    busy = [(n, t) for n in names for t in range(2) if state.clusters[n].running[t] is not None]
    if not busy:
        return None
    name, track = busy[step[1] % len(busy)]
    record = state.clusters[name]
    return UpgradeResult(
        command_id=record.running_cmd[track] or "",
        cluster=name,
        track=TRACKS[track],
        version=(record.running[track] or record.versions[track]).text,
        outcome="succeeded" if step[2] else "failed",
        error=None if step[2] else "boom",
    )


def _digest(state: EngineState) -> dict[str, Any]:
    """Everything a placement decides or counts, and the queue entries dispatch would take."""
    stages = []
    for stage in state.stages:
        parts = []
        for p in stage.partitions:
            live = {
                (t, v.text): sorted(
                    {
                        n
                        for n in heap
                        if (c := state.clusters.get(n)) is not None
                        and c.partition == p.index
                        and c.stage == stage.index
                        and c.queued[t]
                        and c.target[t] == v
                        and c.running[t] is None
                    }
                )
                for t in range(2)
                for v, heap in p.pending[t].items()
            }
            parts.append(
                (
                    p.name,
                    list(p.members),
                    p.max_unavailable,
                    p.unavailable,
                    list(p.not_done),
                    list(p.queued_unavailable),
                    p.departed,
                    {k: v for k, v in live.items() if v},
                )
            )
        runs = [(r.rollout_id, r.state.value, r.remaining, r.overtaken) for t in stage.runs for r in t.values()]
        stages.append((list(stage.members), list(stage.no_partition), parts, runs, dict(stage.handed)))
    # availability and queue flags count only in a partition: a cluster in none (PART-2, or no stage)
    # keeps whatever it had, which a recompute happens to reset
    clusters = {
        n: (c.stage, c.partition, c.target, c.target_run, c.versions, c.running)
        + ((c.queued, c.available, c.not_done) if c.partition is not None else ())
        for n, c in state.clusters.items()
    }
    return {"stages": stages, "clusters": clusters}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    first=st.sampled_from(STRATEGIES),
    second=st.sampled_from(STRATEGIES),
    fleet=st.lists(st.tuples(st.integers(0, 999), st.sampled_from(ENVS), st.sampled_from(ZONES)), max_size=24),
    steps=st.lists(op, min_size=1, max_size=40),
)
def test_seq_6_part_4_incremental_placement_equals_the_full_recompute(
    first: dict[str, Any], second: dict[str, Any], fleet: list[tuple[int, str, str]], steps: list[tuple[Any, ...]]
) -> None:
    clusters = {f"c-{i:03d}": _cluster(f"c-{i:03d}", env, zone) for i, env, zone in fleet}
    sequence = _sequence(first, second)
    incremental = new_state(sequence, clusters.values())
    full = new_state(sequence, clusters.values())
    release = ReleaseTarget(event_id="rel-1", channel="regular", targets={"1.30": V31})
    assert decide(incremental, release, T0)[1] == decide(full, release, T0)[1]
    for at, step in enumerate(steps, start=1):
        event = _event(incremental, step)
        if event is None:
            continue
        _, commands = decide(incremental, event, T0 + at)
        _, expected = decide(full, event, T0 + at, placement=Placement.FULL)
        assert commands == expected, (at, event)
        assert _digest(incremental) == _digest(full), (at, event)
