"""SEQ-7: a changed sequence definition, applied at once or refused with a reason, always acknowledged."""

from __future__ import annotations

import heapq

from rollout_common.commands import CommandAck
from rollout_common.events import SequenceChange
from rollout_common.sequence import Sequence
from rollout_planner.engine.errors import EngineInvariantError
from rollout_planner.engine.inventory import conflict_notice, rebuild_stage
from rollout_planner.engine.lifecycle import receive_qualified, recompute_soak
from rollout_planner.engine.model import (
    NO_FLAGS,
    NO_PAIR,
    TRACK_INDEXES,
    ClusterRec,
    EngineState,
    StageRec,
    Timer,
    put,
    put_count,
)
from rollout_planner.engine.partitioning import assign_stages
from rollout_planner.engine.tally import recount_departed, refresh


def apply_sequence_change(state: EngineState, event: SequenceChange) -> None:
    if event.command_id in state.seen_events:
        return  # acknowledged once (OPS-3)
    state.seen_events.add(event.command_id)
    refusal = _refusal(state, event.sequence)
    if refusal is None:
        _replace(state, event.sequence)
    state.emit(
        CommandAck(command_id=event.command_id, accepted=refusal is None, reason=refusal or "sequence change applied")
    )


def _active(stage: StageRec) -> bool:
    """A run not ended here (STUCK included: it starts again when the inventory changes, SOAK-4b),
    one still handing out to stragglers (left behind by its forced soak, or late members, SEQ-6a),
    or an upgrade handed out and still in flight."""
    return bool(stage.handed) or any(
        not r.terminal or (r.dispatchable and (r.forced or r.remaining > 0))
        for t in TRACK_INDEXES
        for r in stage.runs[t].values()
    )


def _refusal(state: EngineState, new: Sequence) -> str | None:
    """Why the change cannot apply now, or None. A stage with an active run keeps its place: every
    stage before it stays before it, in the same order, and none is put in front of it (its
    versions come from its upstream stage, VER-2)."""
    if new.name != state.sequence.name:
        return f"the sequence is {state.sequence.name}; a change cannot rename it to {new.name}"
    new_names = [s.name for s in new.stages]
    old_names = [s.spec.name for s in state.stages]
    for stage in state.stages:
        name = stage.spec.name
        if not _active(stage):
            continue
        if name not in new_names:
            return f"stage {name} has an active run; it cannot be removed"
        old_before = old_names[: old_names.index(name)]
        new_before = new_names[: new_names.index(name)]
        if any(n in old_names and n not in old_before for n in new_before) or [
            n for n in old_before if n in new_before
        ] != [n for n in new_before if n in old_names]:
            return f"stage {name} has an active run; it cannot be reordered"
        inserted = [n for n in new_before if n not in old_names]
        if inserted:
            return f"stage {name} has an active run; a new stage {inserted[0]} cannot be put before it"
    return _conflict(state, new)


def _conflict(state: EngineState, new: Sequence) -> str | None:
    """SEQ-2: a definition that would put a cluster of the inventory in two stages is refused (an
    inventory change that does it leaves the cluster in neither, and says so)."""
    conflicts = assign_stages(new, list(state.clusters.values()), state.groups.values()).conflicts
    if not conflicts:
        return None
    name = min(conflicts)
    stages = conflicts[name]
    more = f" (and {len(conflicts) - 1} more clusters)" if len(conflicts) > 1 else ""
    listed = f"{', '.join(stages[:-1])} and {stages[-1]}"
    return f"cluster {name} would be in stages {listed}{more}; a cluster belongs to one stage (SEQ-2)"


def _replace(state: EngineState, new: Sequence) -> None:
    """Swap the definition, carry runs over by stage name, and re-evaluate membership (SEQ-6/6a)."""
    stages, moved = _carried_over(state, new)
    state.sequence = new
    state.stages = stages
    state.stage_by_name = {s.spec.name: s for s in stages}
    _remap_timers(state, moved)
    failed = _reset_clusters(state, moved)
    membership = assign_stages(new, list(state.clusters.values()))
    for name, conflict in membership.conflicts.items():
        conflict_notice(state, name, conflict)
    grouped: dict[int, list[str]] = {}
    for name, index in membership.stage_of.items():
        grouped.setdefault(index, []).append(name)
    for stage in stages:
        rebuild_stage(state, stage, grouped.get(stage.index, []))
    _settle_failed(state, failed)
    for stage in stages:
        recount_departed(state, stage)  # once every cluster is placed again
    for stage in stages:
        for track in TRACK_INDEXES:  # a changed soak applies to the soaks under way
            for run in list(stage.runs[track].values()):
                recompute_soak(state, run, detail="soak changed by the sequence (SEQ-7)", unchanged_too=False)
        receive_qualified(state, stage)  # a new stage behind a qualified version starts with it
    state.dirty = set(range(len(stages)))  # indexes of the old definition mean nothing now


def _carried_over(state: EngineState, new: Sequence) -> tuple[list[StageRec], dict[int, int]]:
    """The new definition's stages, each with the runs of the old stage of its name (emptied of
    members, to be placed again), and which old index moved to which new one."""
    by_name = {s.spec.name: s for s in state.stages}
    moved: dict[int, int] = {}
    stages: list[StageRec] = []
    for index, spec in enumerate(new.stages):
        record = by_name.get(spec.name)
        if record is None:
            record = StageRec(index=index, spec=spec)
        else:
            moved[record.index] = index
            record.index, record.spec = index, spec
            for track in TRACK_INDEXES:
                for run in record.runs[track].values():
                    run.stage = index
                    run.remaining = 0
            record.members, record.no_partition, record.partitions = [], [], []
        stages.append(record)
    return stages, moved


def _remap_timers(state: EngineState, moved: dict[int, int]) -> None:
    timers: list[Timer] = []
    for timer in state.timers:
        if timer.kind == "cluster":
            timer.rank = (len(state.stages), 0)
            timers.append(timer)
        elif timer.stage in moved:
            timer.stage = moved[timer.stage]
            timer.rank = (timer.stage, timer.track)
            timers.append(timer)
    heapq.heapify(timers)
    state.timers = timers


def _reset_clusters(state: EngineState, moved: dict[int, int]) -> dict[tuple[str, int], int]:
    """Every cluster out of every stage; an upgrade in flight stays with the run that handed it out.

    A failed upgrade keeps its target (OPS-4: until a retry, GATE-2: not done until the forced soak):
    returned as (cluster, track) -> the stage it failed in, by its new index, for `_settle_failed`."""
    failed: dict[tuple[str, int], int] = {}
    for cluster in [*state.clusters.values(), *state.departed.values()]:
        stage_before = None if cluster.partition is None else cluster.stage
        cluster.stage = cluster.partition = None
        cluster.queued = NO_FLAGS
        cluster.available, cluster.not_done = True, NO_FLAGS
        for track in TRACK_INDEXES:
            kept = cluster.failed[track] is not None and cluster.target_run[track] is not None
            if kept and stage_before in moved and cluster.name in state.clusters:
                failed[(cluster.name, track)] = moved[stage_before]
            else:
                _reset_track(state, cluster, track, moved)
        if cluster.origin == (None, None):
            cluster.origin = NO_PAIR
    return failed


def _reset_track(state: EngineState, cluster: ClusterRec, track: int, moved: dict[int, int]) -> None:
    """The track's target goes, unless an upgrade is in flight: that one moves with its stage's new index."""
    origin = cluster.origin[track]
    if cluster.running[track] is None or origin is None:
        cluster.target = put(cluster.target, track, None)
        cluster.target_run = put(cluster.target_run, track, None)
        cluster.waiting_until = put(cluster.waiting_until, track, None)
        return
    if origin[0] not in moved:
        raise EngineInvariantError(
            rule="SEQ-7", cluster=cluster.name, message="an upgrade in flight belongs to a removed stage"
        )
    stage = state.stages[moved[origin[0]]]
    cluster.origin = put(cluster.origin, track, (stage.index, origin[1]))
    run = stage.runs[track].get(cluster.target_run[track] or "")
    if run is not None:
        run.remaining += 1


def _settle_failed(state: EngineState, failed: dict[tuple[str, int], int]) -> None:
    """A failed target counts for its run again when the cluster stays in the stage it failed in;
    one that moved follows its new membership without it (SEQ-6a), FAILED there until a retry."""
    for (name, track), index in failed.items():
        cluster = state.clusters[name]
        run = state.stages[index].runs[track].get(cluster.target_run[track] or "")
        if cluster.stage == index and cluster.partition is not None and run is not None:
            run.remaining += 1
            continue
        cluster.target = put(cluster.target, track, None)
        cluster.target_run = put(cluster.target_run, track, None)
        cluster.retries = put_count(cluster.retries, track, 0)
        refresh(state, cluster)
