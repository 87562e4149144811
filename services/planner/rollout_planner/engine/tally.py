"""Per-partition counters kept current one cluster at a time, so no event rescans the fleet."""

from __future__ import annotations

from rollout_planner.engine.model import FLAGS, NO_FLAGS, TRACK_INDEXES, ClusterRec, EngineState, StageRec, put


def refresh(state: EngineState, cluster: ClusterRec) -> None:
    """Recompute the cluster's availability and GATE-2 'not done' flags; move the partition counts."""
    available = cluster.compute_available()
    target = cluster.target
    not_done = FLAGS[(target[0] is not None or not available, target[1] is not None or not available)]
    if cluster.stage is None or cluster.partition is None:
        cluster.available, cluster.not_done = available, not_done
        return
    if available == cluster.available and not_done is cluster.not_done:
        return  # nothing moves (most clusters of a release): no partition lookup
    partition = state.stages[cluster.stage].partitions[cluster.partition]
    # Only a count going down can open a gate or finish a track; a count going up only makes the
    # stage stricter, so it needs no new dispatch (this halves the work per readiness flap).
    loosened = False
    if available != cluster.available:
        step = -1 if available else 1
        partition.unavailable += step
        for track in TRACK_INDEXES:
            if cluster.queued[track]:
                partition.queued_unavailable[track] += step
        cluster.available = available
        loosened = available
    for track in TRACK_INDEXES:
        if not_done[track] != cluster.not_done[track]:
            partition.not_done[track] += 1 if not_done[track] else -1
            loosened = loosened or not not_done[track]
    cluster.not_done = not_done
    if loosened:
        state.dirty.add(cluster.stage)


def detach(state: EngineState, cluster: ClusterRec) -> None:
    """Take the cluster out of its partition's counts (before a membership change)."""
    if cluster.stage is not None and cluster.partition is not None:
        partition = state.stages[cluster.stage].partitions[cluster.partition]
        if not cluster.available:
            partition.unavailable -= 1
            for track in TRACK_INDEXES:
                if cluster.queued[track]:
                    partition.queued_unavailable[track] -= 1
        for track in TRACK_INDEXES:
            if cluster.not_done[track]:
                partition.not_done[track] -= 1
        state.dirty.add(cluster.stage)
    cluster.available = True
    cluster.not_done = NO_FLAGS


def attach(state: EngineState, cluster: ClusterRec) -> None:
    """Count the cluster in its (new) partition from scratch."""
    cluster.available = True
    cluster.not_done = NO_FLAGS
    refresh(state, cluster)


def set_queued(state: EngineState, cluster: ClusterRec, track: int, queued: bool) -> None:
    """Change whether the cluster waits in its partition's queue, keeping GATE-1's count right."""
    if cluster.queued[track] == queued:
        return
    cluster.queued = put(cluster.queued, track, queued)
    if not cluster.available and cluster.stage is not None and cluster.partition is not None:
        partition = state.stages[cluster.stage].partitions[cluster.partition]
        partition.queued_unavailable[track] += 1 if queued else -1


def located(cluster: ClusterRec) -> tuple[int, int] | None:
    if cluster.stage is None or cluster.partition is None:
        return None
    return (cluster.stage, cluster.partition)


def recount_departed(state: EngineState, stage: StageRec) -> None:
    """SEQ-6a: per partition, the in-flight clusters it handed out that are no longer its members."""
    for partition in stage.partitions:
        partition.departed = 0
    for (name, _track), position in stage.handed.items():
        cluster = state.clusters.get(name) or state.departed.get(name)
        if cluster is None or position >= len(stage.partitions):
            continue
        if located(cluster) != (stage.index, position):
            stage.partitions[position].departed += 1
