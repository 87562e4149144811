"""Retargeting every member of a stage in one pass (a release): each kind of cluster once, its effects copied.

A release retargets every member, and a fleet's members are mostly alike; `retarget_members` has the
outcome of `targets.retarget` on each of them, in order, at the cost of one retarget per kind.
"""

from __future__ import annotations

from operator import attrgetter

from rollout_common.version import Version
from rollout_planner.engine.model import TRACK_INDEXES, ClusterRec, EngineState, PartitionRec, Run, StageRec
from rollout_planner.engine.targets import retarget

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
