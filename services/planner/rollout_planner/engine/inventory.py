"""Fleet membership: building stages and partitions, and re-evaluating them when the inventory changes."""

from __future__ import annotations

from collections.abc import Iterable

from rollout_common.commands import Notice
from rollout_common.events import InventoryChange
from rollout_common.fleet import Cluster
from rollout_planner.engine.lifecycle import revisit_stuck
from rollout_planner.engine.model import TRACK_INDEXES, ClusterRec, EngineState, PartitionRec, StageRec, put
from rollout_planner.engine.partitioning import assign_stages, plan_partitions
from rollout_planner.engine.tally import attach, detach, recount_departed
from rollout_planner.engine.targets import retarget


def build_fleet(state: EngineState, clusters: Iterable[Cluster]) -> None:
    specs = list(clusters)
    for spec in specs:
        state.clusters[spec.name] = ClusterRec(spec)
    membership = assign_stages(state.sequence, specs)
    for name, stages in membership.conflicts.items():
        state.emit(
            Notice(
                code="SEQ-2",
                cluster=name,
                message=f"cluster {name} matches stages {', '.join(stages)}; it joins none (SEQ-2)",
            )
        )
    grouped: dict[int, list[str]] = {}
    for name, index in membership.stage_of.items():
        grouped.setdefault(index, []).append(name)
    for stage in state.stages:
        rebuild_stage(state, stage, grouped.get(stage.index, []))


def rebuild_stage(state: EngineState, stage: StageRec, names: list[str]) -> None:
    """Recompute the stage's partitions over its members (PART-4) and recount everything in it."""
    keep = set(names)
    for name in stage.members + stage.no_partition:
        cluster = state.clusters.get(name)
        if cluster is not None:
            detach(state, cluster)
            if name not in keep:
                _drop_targets(stage, cluster)
            cluster.stage = cluster.partition = None
            cluster.queued = [False, False]
    plan = plan_partitions(stage.spec, [state.clusters[n].spec for n in names])
    stage.partitions = []
    for index, part in enumerate(plan.partitions):
        record = PartitionRec(
            index=index, name=part.name, members=list(part.clusters), max_unavailable=part.max_unavailable
        )
        stage.partitions.append(record)
        for name in part.clusters:
            cluster = state.clusters[name]
            cluster.stage, cluster.partition = stage.index, index
    stage.members = plan.members
    stage.no_partition = plan.no_partition
    for name in stage.no_partition:
        state.clusters[name].stage = stage.index
    for name in stage.members:
        cluster = state.clusters[name]
        attach(state, cluster)
        retarget(state, cluster)
    recount_departed(state, stage)
    for track in TRACK_INDEXES:
        revisit_stuck(state, stage, track)
    state.dirty.add(stage.index)


def _drop_targets(stage: StageRec, cluster: ClusterRec) -> None:
    """A cluster that leaves the stage no longer counts towards its runs, except for an upgrade in
    flight: that one still belongs to the run that handed it out until its result (SEQ-6a)."""
    for track in TRACK_INDEXES:
        if cluster.running[track] is not None:
            continue
        run = stage.runs[track].get(cluster.target_run[track] or "")
        if run is not None:
            run.remaining -= 1
        cluster.target[track] = None
        cluster.target_run[track] = None
        cluster.waiting_until = put(cluster.waiting_until, track, None)


def apply_inventory(state: EngineState, event: InventoryChange) -> None:
    """SEQ-6: a join, leave or relabel re-evaluates the stages it touches, visibly."""
    name = event.cluster.name if event.cluster is not None else event.name
    if name is None:
        state.emit(Notice(code="INVALID_INVENTORY", message="inventory change without a cluster name"))
        return
    old = state.clusters.get(name)
    old_stage = old.stage if old is not None else None
    if event.action == "remove":
        _remove(state, name, old)
        return
    if event.cluster is None:
        state.emit(Notice(code="INVALID_INVENTORY", cluster=name, message=f"upsert of {name} without its record"))
        return
    if old is None and name in state.departed:
        # back before its upgrade in flight reported: the same record, so the result still lands
        old = state.departed.pop(name)
        state.clusters[name] = old
    record = _upsert(state, event.cluster, old)
    membership = assign_stages(state.sequence, [event.cluster])
    new_stage = membership.stage_of.get(name)
    if name in membership.conflicts:
        state.emit(
            Notice(
                code="SEQ-2",
                cluster=name,
                message=f"cluster {name} matches stages {', '.join(membership.conflicts[name])}; it joins none (SEQ-2)",
            )
        )
    # the stage it leaves first, so that stage lets go of it before the one it joins counts it
    if old_stage is not None and old_stage != new_stage:
        rebuild_stage(state, state.stages[old_stage], [n for n in _stage_names(state, old_stage) if n != name])
    if new_stage is not None:
        names = [n for n in _stage_names(state, new_stage) if n != name]
        rebuild_stage(state, state.stages[new_stage], [*names, name])
    if new_stage is None:
        record.stage = record.partition = None
    if old_stage != new_stage:
        before = "no stage" if old_stage is None else state.stages[old_stage].spec.name
        after = None if new_stage is None else state.stages[new_stage].spec.name
        state.emit(
            Notice(
                code="SEQ-6",
                cluster=name,
                stage=after if after is not None else before if old_stage is not None else None,
                message=f"cluster {name} moved from {before} to {after or 'no stage'}",
            )
        )


def _remove(state: EngineState, name: str, old: ClusterRec | None) -> None:
    """SEQ-6a: a removed cluster is never handed out again; an upgrade in flight still reports back."""
    if old is None:
        return
    stage_name = None if old.stage is None else state.stages[old.stage].spec.name
    if old.stage is not None:
        # rebuilt while the record still exists, so its counts and targets are taken out first
        rebuild_stage(state, state.stages[old.stage], [n for n in _stage_names(state, old.stage) if n != name])
    del state.clusters[name]
    if old.busy:
        state.departed[name] = old
        state.emit(
            Notice(code="SEQ-6", cluster=name, stage=stage_name, message=f"cluster {name} removed while upgrading")
        )
        for origin in old.origin:
            if origin is not None:
                recount_departed(state, state.stages[origin[0]])
    state.emit(Notice(code="SEQ-6", cluster=name, stage=stage_name, message=f"cluster {name} left the inventory"))


def _stage_names(state: EngineState, index: int) -> list[str]:
    stage = state.stages[index]
    return stage.members + stage.no_partition


def _upsert(state: EngineState, spec: Cluster, old: ClusterRec | None) -> ClusterRec:
    if old is None:
        record = ClusterRec(spec)
        state.clusters[spec.name] = record
        return record
    old.spec = spec
    for track, reported in ((0, spec.control_plane), (1, spec.nodes)):
        # the inventory may report an upgrade made outside the rollout; never move backwards
        if old.running[track] is None and reported > old.versions[track]:
            old.versions[track] = reported
    return old
