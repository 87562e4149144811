"""Executors' upgrade results and health reporters' readiness, applied to one cluster each."""

from __future__ import annotations

from rollout_common.commands import Notice
from rollout_common.events import Readiness, UpgradeResult
from rollout_common.quantity import resolve
from rollout_common.status import TRACKS, NotReadyType, StageReason, StageState
from rollout_common.status_words import version_mismatch_text
from rollout_common.version import Version, parse_version
from rollout_planner.engine.errors import EngineInvariantError
from rollout_planner.engine.gates.budgets import record_upgrade
from rollout_planner.engine.model import CP, NODES, ClusterRec, EngineState, Run, put, put_count
from rollout_planner.engine.runs import transition
from rollout_planner.engine.tally import located, refresh
from rollout_planner.engine.targets import enqueue, retarget
from rollout_planner.engine.unknown_clusters import unknown_cluster


def apply_result(state: EngineState, event: UpgradeResult) -> None:
    cluster = state.clusters.get(event.cluster) or state.departed.get(event.cluster)
    if cluster is None:
        unknown_cluster(state, name=event.cluster, message=f"upgrade result for unknown cluster {event.cluster}")
        return
    track = CP if event.track.value == "controlPlane" else NODES
    version = parse_version(event.version)
    if cluster.running[track] != version or cluster.running_cmd[track] != event.command_id:
        return  # a replayed or stale result: already applied, or about an upgrade we no longer track
    if event.outcome == "started":
        return
    origin = _release(state, cluster, track)
    run = state.stages[origin].runs[track].get(cluster.target_run[track] or "")
    if event.outcome == "succeeded":
        if event.finished_at is not None:
            cluster.finished_at = event.finished_at
        record_upgrade(cluster, track, event.finished_at if event.finished_at is not None else state.now)
        _succeeded(state, cluster, track, version, run)
    else:
        _failed(state, cluster, track, event.error or "upgrade failed", run, moved=cluster.stage != origin)
    if cluster.name in state.departed:
        if not cluster.busy:
            del state.departed[cluster.name]  # SEQ-6a: recorded; never handed out again
            state.left[cluster.name] = cluster
        return
    if cluster.stage is not None:
        state.dirty.add(cluster.stage)
    _wake_other_track(state, cluster, track)


def _release(state: EngineState, cluster: ClusterRec, track: int) -> int:
    """Free the slot the upgrade held in the stage and partition that handed it out (SEQ-6a)."""
    origin = cluster.origin[track]
    cluster.running = put(cluster.running, track, None)
    cluster.running_cmd = put(cluster.running_cmd, track, None)
    cluster.origin = put(cluster.origin, track, None)
    if origin is None:
        raise EngineInvariantError(
            rule="SEQ-6a", cluster=cluster.name, message="an upgrade in flight has no stage that handed it out"
        )
    stage = state.stages[origin[0]]
    stage.handed.pop((cluster.name, track), None)
    if located(cluster) != origin and origin[1] < len(stage.partitions):
        stage.partitions[origin[1]].departed -= 1  # it had left that partition: its slot is free now
    state.dirty.add(stage.index)  # a freed slot (maxConcurrent) or a finished run may move the stage
    return stage.index


def _succeeded(state: EngineState, cluster: ClusterRec, track: int, version: Version, run: Run | None) -> None:
    target_run = cluster.target_run[track]
    cluster.versions = put(cluster.versions, track, version)
    cluster.awaiting_ready = True  # GATE-1: unavailable until reported ready on the new version
    cluster.mismatch = put(cluster.mismatch, track, None)  # judged again against the new version
    cluster.target = put(cluster.target, track, None)
    cluster.target_run = put(cluster.target_run, track, None)
    cluster.retries = put_count(cluster.retries, track, 0)  # done: the next target starts afresh
    if target_run is not None:
        cluster.done_by = put(cluster.done_by, track, cluster.done_by[track] | {target_run})
    if run is not None:
        run.remaining -= 1  # done for the run that handed it out, wherever it belongs now (SEQ-6a)
        run.overtaken = False  # it upgraded this one itself (SOAK-4c)
        run.upgraded.add(version)
    refresh(state, cluster)
    retarget(state, cluster)


def _failed(state: EngineState, cluster: ClusterRec, track: int, error: str, run: Run | None, *, moved: bool) -> None:
    cluster.failed = put(cluster.failed, track, error)
    if moved:
        # SEQ-6a: recorded on the cluster; the run that handed it out counts it as done, and from
        # now on it follows its new membership
        cluster.leave_run(track, run)
    refresh(state, cluster)
    if run is None:
        return
    stage = state.stages[run.stage]
    run.failures += 1
    budget = stage.spec.rollout_strategy.max_failures
    if budget is not None and run.state is StageState.IN_PROGRESS:
        limit = max(1, resolve(budget, len(stage.members)))
        if run.failures >= limit:
            transition(
                state,
                run,
                StageState.PAUSED,
                StageReason.FAILURE_BUDGET,
                detail=f"{run.failures} failed, maxFailures resolves to {limit} (GATE-6)",
            )
    # its new stage's view of it when it moved (it stays FAILED there, OPS-4); in its own stage, a
    # newer rollout's offer takes it over at once with a new attempt (SOAK-4c)
    retarget(state, cluster)


def _wake_other_track(state: EngineState, cluster: ClusterRec, track: int) -> None:
    """A cluster runs one upgrade at a time: the other track may have been held by this one."""
    other = NODES if track == CP else CP
    enqueue(state, cluster, other)
    enqueue(state, cluster, track)


def apply_readiness(state: EngineState, event: Readiness) -> None:
    cluster = state.clusters.get(event.cluster)
    if cluster is None:
        if event.cluster not in state.departed:
            unknown_cluster(state, name=event.cluster, message=f"readiness for unknown cluster {event.cluster}")
        return
    observed = event.observed_at
    if observed is not None:
        if cluster.observed_at is not None and observed < cluster.observed_at:
            return  # BUS-7: older than an observation already applied
        cluster.observed_at = observed
    cluster.ready = event.ready
    if event.ready and not cluster.busy and _after_upgrade(cluster, observed):
        cluster.awaiting_ready = False
    if _observed_after_result(cluster, observed):
        _check_versions(state, cluster, (event.control_plane_version, event.node_version))
    refresh(state, cluster)


def _observed_after_result(cluster: ClusterRec, observed: float | None) -> bool:
    """BUS-7: what the cluster ran before its last upgrade finished says nothing about that upgrade."""
    return observed is None or cluster.finished_at is None or observed > cluster.finished_at


def _check_versions(state: EngineState, cluster: ClusterRec, reported: tuple[str | None, str | None]) -> None:
    """A track whose upgrade succeeded must report the version it went to, or it is not done.

    Only tracks a rollout upgraded are checked: elsewhere the version is the inventory's, which the
    cluster's own report may lead or lag without anything having gone wrong. A version not reported
    (a probe that cannot read it) changes nothing either way.
    """
    for track, text in enumerate(reported):
        if text is None or not cluster.done_by[track] or cluster.running[track] is not None:
            continue  # unchecked, or an upgrade in flight: its result says what to expect
        version, expected = parse_version(text), cluster.versions[track]
        found = None if version == expected else version
        if found == cluster.mismatch[track]:
            continue
        cluster.mismatch = put(cluster.mismatch, track, found)
        name = TRACKS[track].value
        stage = None if cluster.stage is None else state.stages[cluster.stage].spec.name
        if found is not None:
            code = NotReadyType.VERSION_MISMATCH.value
            message = version_mismatch_text(cluster.name, name, expected=expected.text, reported=version.text)
        else:
            code = "VERSION_CONFIRMED"
            message = f"cluster {cluster.name} {name} reports {expected.text}, the version it was upgraded to"
        state.emit(Notice(code=code, message=message, cluster=cluster.name, stage=stage))


def _after_upgrade(cluster: ClusterRec, observed: float | None) -> bool:
    """BUS-7: after an upgrade, only an observation made after it finished counts (when both are timed)."""
    if not cluster.awaiting_ready or observed is None or cluster.finished_at is None:
        return True
    return observed > cluster.finished_at


__all__ = ["apply_readiness", "apply_result"]
