"""Assigning each cluster its next target and queueing it for a batch slot."""

from __future__ import annotations

from rollout_common.version import Version
from rollout_planner.engine.eligibility import best_target
from rollout_planner.engine.model import (
    CP,
    NODES,
    TRACK_INDEXES,
    ClusterRec,
    EngineState,
    StageRec,
    put,
    put_count,
)
from rollout_planner.engine.tally import refresh, set_queued

# best targets already found in one pass over a stage's members, by what they depend on (the stage's
# offers do not change during such a pass): clusters alike get theirs once
TargetMemo = dict[tuple[object, ...], "tuple[tuple[Version, str] | None, tuple[object, ...]]"]


def retarget(state: EngineState, cluster: ClusterRec, memo: TargetMemo | None = None) -> None:
    """Re-evaluate both tracks (VER-6: after every upgrade and whenever a version reaches the stage).

    `memo`: shared by the calls of one pass over a stage's members while its offers stay the same."""
    if cluster.stage is None or cluster.partition is None:
        return
    for track in TRACK_INDEXES:
        _retarget_track(state, cluster, track, memo)
    refresh(state, cluster)
    for track in TRACK_INDEXES:
        enqueue(state, cluster, track)


def _retarget_track(state: EngineState, cluster: ClusterRec, track: int, memo: TargetMemo | None) -> None:
    if cluster.running[track] is not None or cluster.stage is None:
        return  # the running upgrade decides; re-evaluated when it reports back
    stage = state.stages[cluster.stage]
    best = _best(state, stage, cluster, track, memo)
    if cluster.failed[track] is not None:
        if _keeps_failed_target(state, cluster, track, best):
            return
        cluster.failed = put(cluster.failed, track, None)
    new_version, new_run = (None, None) if best is None else best
    old_version = cluster.target[track]
    if (new_version is old_version or new_version == old_version) and new_run == cluster.target_run[track]:
        return
    old_run = _leave_target(state, stage, cluster, track, new_run=new_run)
    cluster.target = put(cluster.target, track, new_version)
    cluster.target_run = put(cluster.target_run, track, new_run)
    set_queued(state, cluster, track, False)
    if new_run is not None and new_version is not None:
        _join_run(stage, track, new_run=new_run, old_run=old_run, version=new_version)


def _best(
    state: EngineState, stage: StageRec, cluster: ClusterRec, track: int, memo: TargetMemo | None
) -> tuple[Version, str] | None:
    """`best_target`, found once per kind of cluster in a pass that shares `memo`."""
    if memo is None:
        return best_target(state, stage, cluster, track)
    # what best_target reads of the cluster; pairs are shared objects (model.pair), so their
    # identity stands for their value; the entry keeps them alive, so no id is reused meanwhile
    pairs = (cluster.versions, cluster.running, cluster.target)
    if track == CP:
        key: tuple[object, ...] = (CP, id(pairs[0]), cluster.done_by[CP])
    else:
        key = (NODES, id(pairs[0]), id(pairs[1]), id(pairs[2]), cluster.done_by[NODES])
    found = memo.get(key)
    if found is None:
        found = memo[key] = (best_target(state, stage, cluster, track), pairs)
    return found[0]


def _keeps_failed_target(state: EngineState, cluster: ClusterRec, track: int, best: tuple[Version, str] | None) -> bool:
    """A failed upgrade keeps its target until an operator retries it (OPS-4), or until a newer
    rollout takes the cluster over with a new attempt at its own target (SOAK-4c)."""
    failed_run = cluster.target_run[track]
    return best is None or failed_run is None or not _newer(state, best[1], than=failed_run)


def _leave_target(
    state: EngineState, stage: StageRec, cluster: ClusterRec, track: int, *, new_run: str | None
) -> str | None:
    """What the old target held goes with it: its retries, its run's count, its window wait; returns its run."""
    old_run = cluster.target_run[track]
    if cluster.retries[track] and cluster.target[track] is not None:
        # retries count per target (OPS-4); a target set afresh (None before) keeps the count, as a
        # planner restarted from its snapshot recomputes targets from None (BUS-6)
        cluster.retries = put_count(cluster.retries, track, 0)
    if old_run is not None:
        run = stage.runs[track].get(old_run)
        if run is not None:
            run.remaining -= 1
            if new_run != old_run:
                run.overtaken = new_run is not None and _newer(state, new_run, than=old_run)
    if cluster.target[track] is not None:
        # a wait for a window was for the old target's kind of upgrade
        cluster.waiting_until = put(cluster.waiting_until, track, None)
    return old_run


def _join_run(stage: StageRec, track: int, *, new_run: str, old_run: str | None, version: Version) -> None:
    """The new target's run counts the cluster among those it still has to upgrade."""
    run = stage.runs[track].get(new_run)
    if run is not None:
        run.remaining += 1
        run.working.add(version)
        if new_run != old_run:
            run.overtaken = False


def _newer(state: EngineState, rollout_id: str, *, than: str) -> bool:
    return state.rollouts[rollout_id].number > state.rollouts[than].number


def enqueue(state: EngineState, cluster: ClusterRec, track: int) -> None:
    """Put the cluster in its partition's queue when nothing but a batch slot holds it back."""
    version = cluster.target[track]
    # A cluster runs one upgrade at a time: while either track runs it waits outside the queue and
    # its result queues it (`results._wake_other_track`). Queued meanwhile, it would be a head that
    # cannot start, and a restarted planner, whose queues are built from the stored facts, would
    # choose the next batch's version otherwise (BUS-6; fuzz seed 1001695).
    if version is None or cluster.queued[track] or cluster.busy:
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
