"""Recount everything the engine keeps incrementally and report any drift (a test oracle).

The engine never rescans the fleet per event; this module does, so tests can prove after every
decision that the running counters equal a count from scratch, that no cluster is in flight twice,
that the keyed cluster timers are the pending ones, that every run's last move is one the run
table allows (STAT-2), and that no track of a rollout goes on at a stage where a check halted it
(CHK-2).
"""

from __future__ import annotations

from collections import Counter

from rollout_common.status import StageState
from rollout_planner.engine.gates.checks import halted
from rollout_planner.engine.model import TRACK_INDEXES, ClusterRec, EngineState, PartitionRec, StageRec
from rollout_planner.engine.runs import allowed

_GOING_ON = frozenset((StageState.IN_PROGRESS, StageState.SOAKING, StageState.FORCED_SOAKING))


def audit(state: EngineState) -> list[str]:
    problems: list[str] = []
    everyone = [*state.clusters.values(), *state.departed.values()]
    for stage in state.stages:
        problems += _partitions(state, stage, everyone)
        problems += _runs(state, stage, everyone)
        problems += _halts(stage)
    problems += _in_flight(state, everyone)
    problems += _cluster_timers(state)
    return problems


def _cluster_timers(state: EngineState) -> list[str]:
    pending = Counter((t.at, t.ref, t.track) for t in state.timers if t.kind == "cluster")
    if pending == Counter(state.cluster_timers):
        return []
    return [f"keyed cluster timers {dict(state.cluster_timers)} are not the pending ones {dict(pending)}"]


def _partitions(state: EngineState, stage: StageRec, everyone: list[ClusterRec]) -> list[str]:
    problems: list[str] = []
    for partition in stage.partitions:
        problems += _partition_drift(state, stage, partition, everyone)
    return problems


def _partition_drift(
    state: EngineState, stage: StageRec, partition: PartitionRec, everyone: list[ClusterRec]
) -> list[str]:
    """The partition's counters against a count from scratch (and its members' cached availability)."""
    problems: list[str] = []
    unavailable, not_done, queued_unavailable = _member_counts(state, partition, problems)
    departed = sum(
        1
        for c in everyone
        for t in TRACK_INDEXES
        if c.running[t] is not None
        and c.origin[t] == (stage.index, partition.index)
        and (c.stage, c.partition) != (stage.index, partition.index)
    )
    label = f"{stage.spec.name}/{partition.name}"
    if unavailable != partition.unavailable:
        problems.append(f"{label}: unavailable {partition.unavailable}, really {unavailable}")
    if departed != partition.departed:
        problems.append(f"{label}: departed in flight {partition.departed}, really {departed}")
    if not_done != partition.not_done:
        problems.append(f"{label}: not done {partition.not_done}, really {not_done}")
    if queued_unavailable != partition.queued_unavailable:
        problems.append(f"{label}: queued unavailable {partition.queued_unavailable}, really {queued_unavailable}")
    return problems


def _member_counts(
    state: EngineState, partition: PartitionRec, problems: list[str]
) -> tuple[int, list[int], list[int]]:
    """Unavailable members, and per track those not done and those queued while unavailable."""
    unavailable = 0
    not_done = [0, 0]
    queued_unavailable = [0, 0]
    for name in partition.members:
        cluster = state.clusters[name]
        available = cluster.compute_available()
        if available != cluster.available:
            problems.append(f"{name}: cached available {cluster.available}, really {available}")
        unavailable += not available
        if cluster.busy and any(cluster.queued):
            problems.append(f"{name}: queued {cluster.queued} while upgrading {cluster.running}")
        for track in TRACK_INDEXES:
            not_done[track] += cluster.target[track] is not None or not available
            queued_unavailable[track] += cluster.queued[track] and not available
    return unavailable, not_done, queued_unavailable


def _runs(state: EngineState, stage: StageRec, everyone: list[ClusterRec]) -> list[str]:
    problems: list[str] = []
    for track in TRACK_INDEXES:
        for run in stage.runs[track].values():
            remaining = sum(1 for c in everyone if _counts_for(c, track, stage.index, run.rollout_id))
            if remaining != run.remaining:
                problems.append(
                    f"{stage.spec.name}/{track}/{run.rollout_id}: remaining {run.remaining}, really {remaining}"
                )
            if run.prior is not None and not allowed(run.prior, run.state):
                problems.append(
                    f"{stage.spec.name}/{track}/{run.rollout_id}: moved {run.prior.value} -> {run.state.value}, "
                    "which the run table does not allow"
                )
    return problems


def _halts(stage: StageRec) -> list[str]:
    """CHK-2 halts the rollout at the stage: while one of its tracks there is halted, none goes on
    (upgrading or soaking), a track that reached the stage after the halt included."""
    problems: list[str] = []
    runs = [run for track in TRACK_INDEXES for run in stage.runs[track].values()]
    halted_ids = {run.rollout_id for run in runs if halted(run)}
    for run in runs:
        if run.rollout_id in halted_ids and run.state in _GOING_ON:
            problems.append(
                f"{stage.spec.name}/{run.track}/{run.rollout_id}: {run.state.value} while a check halts the "
                "rollout at the stage (CHK-2)"
            )
    return problems


def _counts_for(cluster: ClusterRec, track: int, stage: int, rollout_id: str) -> bool:
    """A target counts for its stage's run; an upgrade in flight for the run that handed it out."""
    if cluster.target_run[track] != rollout_id:
        return False
    origin = cluster.origin[track]
    if cluster.running[track] is not None and origin is not None:
        return origin[0] == stage
    return cluster.stage == stage and cluster.partition is not None


def _in_flight(state: EngineState, everyone: list[ClusterRec]) -> list[str]:
    """Each upgrade in flight is held by exactly the stage that handed it out, and no other."""
    problems: list[str] = []
    held: dict[tuple[str, int], int] = {}
    for stage in state.stages:
        for key in stage.handed:
            if key in held:
                problems.append(f"{key[0]}: in flight on track {key[1]} in two stages")
            held[key] = stage.index
    for cluster in everyone:
        for track in TRACK_INDEXES:
            origin = cluster.origin[track]
            running = cluster.running[track] is not None
            if running != (origin is not None):
                problems.append(f"{cluster.name}: running {cluster.running[track]} but handed out by {origin}")
            if running and origin is not None and held.pop((cluster.name, track), None) != origin[0]:
                problems.append(f"{cluster.name}: in flight on track {track}, not held by stage {origin[0]}")
    problems += [f"{name}: held in flight on track {track}, not running" for name, track in held]
    return problems
