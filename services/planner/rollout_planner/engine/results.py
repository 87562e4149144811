"""Executors' upgrade results and health reporters' readiness, applied to one cluster each."""

from __future__ import annotations

from rollout_common.commands import Notice
from rollout_common.events import Readiness, UpgradeResult
from rollout_common.quantity import resolve
from rollout_common.status import StageReason, StageState
from rollout_common.version import parse_version
from rollout_planner.engine.lifecycle import set_state
from rollout_planner.engine.model import CP, NODES, ClusterRec, EngineState, put
from rollout_planner.engine.tally import refresh
from rollout_planner.engine.targets import enqueue, retarget


def apply_result(state: EngineState, event: UpgradeResult) -> None:
    cluster = state.clusters.get(event.cluster)
    if cluster is None:
        state.emit(
            Notice(
                code="UNKNOWN_CLUSTER",
                message=f"upgrade result for unknown cluster {event.cluster}",
                cluster=event.cluster,
            )
        )
        return
    track = CP if event.track.value == "controlPlane" else NODES
    version = parse_version(event.version)
    if cluster.running[track] != version or cluster.running_cmd[track] != event.command_id:
        return  # a replayed or stale result: already applied, or about an upgrade we no longer track
    if event.outcome == "started":
        return
    cluster.running[track] = None
    cluster.running_cmd = put(cluster.running_cmd, track, None)
    stage = state.stages[cluster.stage] if cluster.stage is not None else None
    if stage is not None:
        stage.in_flight -= 1
        state.dirty.add(stage.index)  # a freed slot (maxConcurrent) or a finished run may move the stage
    if event.outcome == "succeeded":
        _succeeded(state, cluster, track)
    else:
        _failed(state, cluster, track, event.error or "upgrade failed")
    _wake_other_track(state, cluster, track)


def _succeeded(state: EngineState, cluster: ClusterRec, track: int) -> None:
    version = cluster.target[track]
    run_id = cluster.target_run[track]
    assert version is not None
    cluster.versions[track] = version
    cluster.awaiting_ready = True  # GATE-1: unavailable until reported ready on the new version
    cluster.target[track] = None
    cluster.target_run[track] = None
    if run_id is not None:
        cluster.done_by = put(cluster.done_by, track, cluster.done_by[track] | {run_id})
        if cluster.stage is not None:
            run = state.stages[cluster.stage].runs[track].get(run_id)
            if run is not None:
                run.remaining -= 1
                run.upgraded.add(version)
    retarget(state, cluster)


def _failed(state: EngineState, cluster: ClusterRec, track: int, error: str) -> None:
    cluster.failed = put(cluster.failed, track, error)
    refresh(state, cluster)
    if cluster.stage is None:
        return
    stage = state.stages[cluster.stage]
    run = stage.runs[track].get(cluster.target_run[track] or "")
    if run is None:
        return
    run.failures += 1
    budget = stage.spec.rollout_strategy.max_failures
    if budget is not None and run.state is StageState.IN_PROGRESS:
        limit = max(1, resolve(budget, len(stage.members)))
        if run.failures >= limit:
            set_state(
                state,
                run,
                StageState.PAUSED,
                StageReason.FAILURE_BUDGET,
                detail=f"{run.failures} failed, maxFailures resolves to {limit} (GATE-6)",
            )


def _wake_other_track(state: EngineState, cluster: ClusterRec, track: int) -> None:
    """A cluster runs one upgrade at a time: the other track may have been held by this one."""
    other = NODES if track == CP else CP
    enqueue(state, cluster, other)
    enqueue(state, cluster, track)


def apply_readiness(state: EngineState, event: Readiness) -> None:
    cluster = state.clusters.get(event.cluster)
    if cluster is None:
        state.emit(
            Notice(
                code="UNKNOWN_CLUSTER", message=f"readiness for unknown cluster {event.cluster}", cluster=event.cluster
            )
        )
        return
    cluster.ready = event.ready
    if event.ready and not cluster.busy:
        cluster.awaiting_ready = False
    refresh(state, cluster)


__all__ = ["apply_readiness", "apply_result"]
