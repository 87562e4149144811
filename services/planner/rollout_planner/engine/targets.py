"""Assigning each cluster its next target and queueing it for a batch slot."""

from __future__ import annotations

from rollout_planner.engine.eligibility import best_target
from rollout_planner.engine.model import CP, NODES, TRACK_INDEXES, ClusterRec, EngineState, put, put_count
from rollout_planner.engine.tally import refresh, set_queued


def retarget(state: EngineState, cluster: ClusterRec) -> None:
    """Re-evaluate both tracks (VER-6: after every upgrade and whenever a version reaches the stage)."""
    if cluster.stage is None or cluster.partition is None:
        return
    for track in TRACK_INDEXES:
        _retarget_track(state, cluster, track)
    refresh(state, cluster)
    for track in TRACK_INDEXES:
        enqueue(state, cluster, track)


def _retarget_track(state: EngineState, cluster: ClusterRec, track: int) -> None:
    if cluster.running[track] is not None or cluster.stage is None:
        return  # the running upgrade decides; re-evaluated when it reports back
    if cluster.failed[track] is not None:
        return  # a failed upgrade keeps its target until an operator retries it (OPS-4)
    stage = state.stages[cluster.stage]
    best = best_target(state, stage, cluster, track)
    new_version, new_run = (None, None) if best is None else best
    if new_version == cluster.target[track] and new_run == cluster.target_run[track]:
        return
    old_run = cluster.target_run[track]
    if cluster.retries[track] and cluster.target[track] is not None:
        # retries count per target (OPS-4); a target set afresh (None before) keeps the count, as a
        # planner restarted from its snapshot recomputes targets from None (BUS-6)
        cluster.retries = put_count(cluster.retries, track, 0)
    if old_run is not None:
        run = stage.runs[track].get(old_run)
        if run is not None:
            run.remaining -= 1
            if new_run is not None and new_run != old_run:
                run.superseded += 1
    if cluster.target[track] is not None:
        # a wait for a window was for the old target's kind of upgrade
        cluster.waiting_until = put(cluster.waiting_until, track, None)
    cluster.target = put(cluster.target, track, new_version)
    cluster.target_run = put(cluster.target_run, track, new_run)
    set_queued(state, cluster, track, False)
    if new_run is not None and new_version is not None:
        run = stage.runs[track].get(new_run)
        if run is not None:
            run.remaining += 1
            run.working.add(new_version)


def enqueue(state: EngineState, cluster: ClusterRec, track: int) -> None:
    """Put the cluster in its partition's queue when nothing but a batch slot holds it back."""
    version = cluster.target[track]
    if version is None or cluster.queued[track] or cluster.running[track] is not None:
        return
    if cluster.failed[track] is not None or cluster.profile.deprecated_api_usage:
        return
    if track == NODES and cluster.versions[CP] < version:
        return  # SOAK-1: queued when the control plane gets there
    until = cluster.waiting_until[track]
    if until is not None and until > state.now:
        return
    if cluster.stage is None or cluster.partition is None:
        return
    state.stages[cluster.stage].partitions[cluster.partition].push(track, version, cluster.name)
    set_queued(state, cluster, track, True)
    cluster.waiting_until = put(cluster.waiting_until, track, None)
    state.dirty.add(cluster.stage)


def release_failed(state: EngineState, cluster: ClusterRec, rollout_id: str) -> None:
    """A failed upgrade whose run is withdrawn (cancelled, superseded) no longer holds the cluster:
    the failure stays in the log and the cluster is evaluated again (SOAK-4c, OPS-1)."""
    released = False
    for track in TRACK_INDEXES:
        if cluster.failed[track] is not None and cluster.target_run[track] == rollout_id:
            cluster.failed = put(cluster.failed, track, None)
            released = True
    if released:
        retarget(state, cluster)
