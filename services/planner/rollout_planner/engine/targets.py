"""Assigning each cluster its next target and queueing it for a batch slot."""

from __future__ import annotations

from operator import attrgetter

from rollout_common.version import Version
from rollout_planner.engine.eligibility import best_target
from rollout_planner.engine.model import (
    CP,
    NODES,
    TRACK_INDEXES,
    ClusterRec,
    EngineState,
    PartitionRec,
    Run,
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


# What retarget reads and writes of a cluster, besides its name and where it is. Equal values are
# shared objects (model.pair, bools, profiles), so the identities of these stand for their values.
_FIELDS = (
    "versions",
    "running",
    "target",
    "target_run",
    "failed",
    "done_by",
    "retries",
    "waiting_until",
    "queued",
    "not_done",
    "available",
    "ready",
    "awaiting_ready",
    "profile",
)
_fields_of = attrgetter(*_FIELDS)
_PARTITION_COUNTS = ("unavailable", "departed")


class _Change:
    """What retarget did to one cluster, to do to the clusters alike in the same pass."""

    __slots__ = ("before", "counts", "dirties", "pushes", "runs", "writes")

    def __init__(self, before: tuple[object, ...]) -> None:
        self.before = before  # kept alive for the pass, so no id in the key is reused
        self.writes: list[tuple[str, object]] = []
        self.counts: list[tuple[str, int, int]] = []  # (counter, track or -1, step) on its partition
        self.runs: list[tuple[Run, int, bool]] = []  # (run, remaining step, overtaken after)
        self.pushes: list[tuple[int, Version]] = []
        self.dirties = False  # whether it left its stage to dispatch again


def _partition_counts(partition: PartitionRec) -> list[int]:
    return [
        partition.unavailable,
        partition.departed,
        *partition.not_done,
        *partition.queued_unavailable,
    ]


def _heap_sizes(partition: PartitionRec) -> dict[tuple[int, Version], int]:
    return {(t, v): len(heap) for t in TRACK_INDEXES for v, heap in partition.pending[t].items()}


def _learn(state: EngineState, stage: StageRec, cluster: ClusterRec, before: tuple[object, ...]) -> _Change:
    """Retarget the cluster the ordinary way, and note every effect it had."""
    assert cluster.partition is not None
    partition = stage.partitions[cluster.partition]
    runs = [r for track in stage.runs for r in track.values()]
    counts0, heaps0 = _partition_counts(partition), _heap_sizes(partition)
    runs0 = [(r.remaining, r.overtaken) for r in runs]
    retarget(state, cluster)
    change = _Change(before)
    after = _fields_of(cluster)
    change.writes = [(name, new) for name, old, new in zip(_FIELDS, before, after, strict=True) if old is not new]
    names = [("unavailable", -1), ("departed", -1), ("not_done", 0), ("not_done", 1)]
    names += [("queued_unavailable", 0), ("queued_unavailable", 1)]
    for (counter, track), old_count, new_count in zip(names, counts0, _partition_counts(partition), strict=True):
        if new_count != old_count:
            change.counts.append((counter, track, new_count - old_count))
    for run, (remaining, overtaken) in zip(runs, runs0, strict=True):
        if (run.remaining, run.overtaken) != (remaining, overtaken):
            change.runs.append((run, run.remaining - remaining, run.overtaken))
    for key, size in _heap_sizes(partition).items():
        change.pushes += [key] * (size - heaps0.get(key, 0))
    # the pass only ever adds to `dirty`: when it was there before, adding it again changes nothing
    change.dirties = stage.index in state.dirty
    return change


def retarget_members(state: EngineState, stage: StageRec, names: list[str]) -> None:
    """`retarget` for each of the stage's members, in order, with the same outcome.

    A release retargets every member, and a fleet's members are mostly alike: the same versions,
    targets and flags (shared objects). The first of each kind is retargeted the ordinary way and
    its effects noted (its fields, its partition's counts, the runs' counts, its queue entries);
    the others of its kind get the same, on their own partition and under their own name. The
    stage's offers and runs' states do not change during the pass, so alike clusters change alike.
    """
    clusters = state.clusters
    learnt: dict[tuple[int, ...], _Change] = {}
    for name in names:
        cluster = clusters[name]
        if cluster.partition is None or cluster.stage != stage.index:
            retarget(state, cluster)
            continue
        before = _fields_of(cluster)
        key = tuple(map(id, before))
        change = learnt.get(key)
        if change is None:
            learnt[key] = _learn(state, stage, cluster, before)
        else:
            _repeat(state, stage, cluster, change)


def _repeat(state: EngineState, stage: StageRec, cluster: ClusterRec, change: _Change) -> None:
    """Do to `cluster` what retarget did to the first cluster of its kind, on its own partition."""
    assert cluster.partition is not None
    for field, value in change.writes:
        setattr(cluster, field, value)
    partition = stage.partitions[cluster.partition]
    for counter, track, step in change.counts:
        if track < 0:
            setattr(partition, counter, getattr(partition, counter) + step)
        else:
            getattr(partition, counter)[track] += step
    for run, remaining, overtaken in change.runs:
        run.remaining += remaining
        run.overtaken = overtaken
    for track, version in change.pushes:
        partition.push(track, version, cluster.name)
    if change.dirties:
        state.dirty.add(stage.index)
