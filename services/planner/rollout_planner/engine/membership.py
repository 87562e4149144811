"""One cluster joining a stage, leaving it, or changing within it, without recomputing the stage
(SEQ-6, PART-2..4).

Partitions are computed over every member in name order (PART-4), so a join or a leave moves
something only where the name falls and at the partitions' boundaries: automatic partitions are
consecutive slices of the members, and a join (a leave) shifts each later boundary by one (or by a
few, when the resolved `autoPartitionSize` changes with the count). Only the clusters that cross a
boundary change partition; a manual partition (PART-2) takes in or gives up the one member alone.
So a join costs the same in a stage of a thousand clusters as in one of a hundred thousand, where
recomputing the stage cost in proportion to it (Fleet recomputes on every change). Changes of cluster
groups still recompute every stage. The outcome is `rebuild_stage`'s over the new members, which
a property test checks on generated join, leave and relabel sequences.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

from rollout_common.quantity import resolve
from rollout_planner.engine.lifecycle import revisit_stuck
from rollout_planner.engine.model import (
    NO_FLAGS,
    TRACK_INDEXES,
    ClusterRec,
    EngineState,
    PartitionRec,
    StageRec,
    put,
)
from rollout_planner.engine.partitioning import automatic_bounds, automatic_name, manual_limit, manual_matches
from rollout_planner.engine.tally import attach, detach, recount_departed
from rollout_planner.engine.targets import retarget


def join_stage(state: EngineState, stage: StageRec, cluster: ClusterRec) -> None:
    """Place a cluster that is not yet a member of the stage."""
    if stage.spec.rollout_strategy.partitions:
        _join_manual(state, stage, cluster)
    else:
        _join_automatic(state, stage, cluster)
    _settle(state, stage, cluster)


def leave_stage(state: EngineState, stage: StageRec, cluster: ClusterRec) -> None:
    """Take a member (or a cluster of the stage in no partition) out of the stage; an upgrade in flight
    keeps its slot where it was handed out (SEQ-6a)."""
    detach(state, cluster)
    drop_targets(stage, cluster)
    if cluster.partition is None:
        stage.no_partition.remove(cluster.name)
    elif stage.spec.rollout_strategy.partitions:
        _leave_manual(stage, cluster)
    else:
        spans = _leave_automatic(stage, cluster)
        cluster.stage = cluster.partition = None  # before the others move: it is in none of them
        _repartition(state, stage, spans)
    cluster.stage = cluster.partition = None
    cluster.queued = NO_FLAGS
    _settle(state, stage, cluster)


def _leave_manual(stage: StageRec, cluster: ClusterRec) -> None:
    assert cluster.partition is not None
    partition = stage.partitions[cluster.partition]
    del stage.members[bisect_left(stage.members, cluster.name)]
    del partition.members[bisect_left(partition.members, cluster.name)]
    limit = manual_limit(stage.spec.rollout_strategy, cluster.partition, len(partition.members))
    partition.max_unavailable = limit


def stays_in_place(state: EngineState, stage: StageRec, cluster: ClusterRec) -> bool:
    """Whether a member whose record changed keeps its place: always with automatic partitions (they go
    by name only); with manual ones, when the partition it is in is still the first it matches."""
    strategy = stage.spec.rollout_strategy
    if cluster.partition is None or cluster.stage != stage.index:
        return False
    return not strategy.partitions or manual_matches(strategy, cluster, state.groups.values())[:1] == [
        cluster.partition
    ]


def refresh_member(state: EngineState, stage: StageRec, cluster: ClusterRec) -> None:
    """A member whose record changed in place (labels, window, versions): counted and targeted again."""
    detach(state, cluster)
    cluster.queued = NO_FLAGS  # queued again by retarget when nothing but a slot holds it back
    attach(state, cluster)
    retarget(state, cluster)
    _settle(state, stage, cluster)


def _settle(state: EngineState, stage: StageRec, cluster: ClusterRec) -> None:
    if cluster.busy:
        recount_departed(state, stage)  # back while upgrading (SEQ-6a): rare, counted in full
    for track in TRACK_INDEXES:
        revisit_stuck(state, stage, track)
    state.dirty.add(stage.index)


def _place(state: EngineState, stage: StageRec, cluster: ClusterRec, partition: int) -> None:
    cluster.stage, cluster.partition = stage.index, partition
    attach(state, cluster)
    retarget(state, cluster)


def _join_manual(state: EngineState, stage: StageRec, cluster: ClusterRec) -> None:
    strategy = stage.spec.rollout_strategy
    hits = manual_matches(strategy, cluster, state.groups.values())
    if not hits:
        insort(stage.no_partition, cluster.name)  # PART-2: not upgraded, INELIGIBLE / NO_PARTITION
        cluster.stage, cluster.partition = stage.index, None
        return
    index = hits[0]
    partition = stage.partitions[index]
    insort(stage.members, cluster.name)
    insort(partition.members, cluster.name)
    partition.max_unavailable = manual_limit(strategy, index, len(partition.members))
    _place(state, stage, cluster, index)


def _join_automatic(state: EngineState, stage: StageRec, cluster: ClusterRec) -> None:
    names = stage.members
    spans = _spans(stage.partitions)
    rank = bisect_left(names, cluster.name)
    names.insert(rank, cluster.name)
    # where each partition's members are now: one place on from `rank`
    spans = [(_shifted(a, rank), _shifted(b - 1, rank) + 1 if b > a else _shifted(a, rank)) for a, b in spans]
    for partition, (first, last) in zip(stage.partitions, spans, strict=True):
        if first < rank < last:
            partition.members.insert(rank - first, cluster.name)  # it falls inside this one's run
    starts = _repartition(state, stage, spans, joined=rank)
    _place(state, stage, cluster, bisect_right(starts, rank) - 1)


def _leave_automatic(stage: StageRec, cluster: ClusterRec) -> list[tuple[int, int]]:
    """Take the name out of the members and its partition; the partitions' runs of `names` after."""
    names = stage.members
    spans = _spans(stage.partitions)
    rank = bisect_left(names, cluster.name)
    assert cluster.partition is not None and names[rank] == cluster.name
    first = spans[cluster.partition][0]
    del stage.partitions[cluster.partition].members[rank - first]
    del names[rank]
    # one place back after `rank`
    return [(a if a <= rank else a - 1, b if b <= rank else b - 1) for a, b in spans]


def _repartition(state: EngineState, stage: StageRec, spans: list[tuple[int, int]], *, joined: int = -1) -> list[int]:
    """PART-3/4 over the stage's members after one was put in or taken out; `spans`: the run of the
    members each partition's list holds now. Moves the members that crossed a boundary, fits the lists;
    returns the partitions' starts."""
    strategy = stage.spec.rollout_strategy
    names = stage.members
    bounds = automatic_bounds(strategy, len(names))
    old_starts = [start for start, _ in spans] + [len(names)] * (len(bounds) - len(spans))
    new_starts = [start for start, _ in bounds] + [len(names)] * (len(spans) - len(bounds))
    for position in range(len(stage.partitions), len(bounds)):
        stage.partitions.append(_new_partition(stage, position))
    for position in _crossing(old_starts, new_starts, joined):
        _move(state, stage, state.clusters[names[position]], bisect_right(new_starts, position) - 1)
    del stage.partitions[len(bounds) :]
    for index, (start, end) in enumerate(bounds):
        partition = stage.partitions[index]
        if index < len(spans):
            _fit_members(partition.members, names, (start, end), spans[index])
        else:
            partition.members = names[start:end]
        partition.name = automatic_name(bounds, index)
        partition.max_unavailable = resolve(strategy.max_unavailable, end - start)
    return new_starts


def _shifted(position: int, rank: int) -> int:
    return position if position < rank else position + 1


def _spans(partitions: list[PartitionRec]) -> list[tuple[int, int]]:
    spans, at = [], 0
    for partition in partitions:
        spans.append((at, at + len(partition.members)))
        at += len(partition.members)
    return spans


def _new_partition(stage: StageRec, position: int) -> PartitionRec:
    """A partition that comes with the join; upgrades handed out by an earlier one at its position
    count against it (as `recount_departed` counts them by position)."""
    partition = PartitionRec(index=position, name="", members=[], max_unavailable=0)
    if position in stage.handed.values():
        partition.departed = sum(1 for p in stage.handed.values() if p == position)
    return partition


def _fit_members(members: list[str], names: list[str], bounds: tuple[int, int], span: tuple[int, int]) -> None:
    """Make the partition's list `names[start:end]` by editing its ends, the list holding `names[first:last]`."""
    start, end = bounds
    first, last = span
    if last <= first or end <= first or start >= last:
        members[:] = names[start:end]
        return
    if start > first:
        del members[: start - first]
    elif start < first:
        members[0:0] = names[start:first]
    if end < last:
        del members[end - start :]
    elif end > last:
        members.extend(names[last:end])


def _crossing(old_starts: list[int], new_starts: list[int], rank: int) -> list[int]:
    """Positions (the new member's aside) whose partition differs: only between an old boundary and
    its new place can a member have changed sides."""
    out: set[int] = set()
    for old, new in zip(old_starts, new_starts, strict=True):
        out.update(range(min(old, new), max(old, new)))
    out.discard(rank)
    return sorted(p for p in out if bisect_right(old_starts, p) != bisect_right(new_starts, p))


def _move(state: EngineState, stage: StageRec, cluster: ClusterRec, partition: int) -> None:
    """Take a member across a boundary: out of its old partition's counts and queues, into the new one's.
    An upgrade in flight keeps its slot in the partition that handed it out (SEQ-6a): `departed`."""
    _count_departed(stage, cluster, -1)
    detach(state, cluster)
    cluster.partition = partition
    attach(state, cluster)
    _count_departed(stage, cluster, 1)
    for track in TRACK_INDEXES:
        version = cluster.target[track]
        if cluster.queued[track] and version is not None:
            # the old partition's queue entry is stale now: dispatch takes a cluster only from the
            # partition it belongs to
            stage.partitions[partition].push(track, version, cluster.name)


def _count_departed(stage: StageRec, cluster: ClusterRec, step: int) -> None:
    """`recount_departed` for one cluster: its upgrades in flight handed out here by a partition it is
    not in (`step` -1 before a move, +1 after)."""
    if not cluster.busy:
        return
    for track in TRACK_INDEXES:
        position = stage.handed.get((cluster.name, track))
        if position is not None and position < len(stage.partitions) and cluster.partition != position:
            stage.partitions[position].departed += step


def drop_targets(stage: StageRec, cluster: ClusterRec) -> None:
    """A cluster that leaves the stage no longer counts towards its runs, except for an upgrade in
    flight: that one still belongs to the run that handed it out until its result (SEQ-6a)."""
    for track in TRACK_INDEXES:
        if cluster.running[track] is not None:
            continue
        cluster.leave_run(track, stage.runs[track].get(cluster.target_run[track] or ""))
        cluster.waiting_until = put(cluster.waiting_until, track, None)


__all__ = ["drop_targets", "join_stage", "leave_stage", "refresh_member", "stays_in_place"]
