"""Fleet membership: building stages and partitions, and re-evaluating them when the inventory changes."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from rollout_common.commands import Notice
from rollout_common.events import InventoryChange
from rollout_common.fleet import Cluster, ClusterGroup
from rollout_common.status import TRACKS
from rollout_common.version import Version
from rollout_planner.engine.gates.budgets import record_inventory
from rollout_planner.engine.lifecycle import revisit_stuck
from rollout_planner.engine.membership import drop_targets, join_stage, leave_stage, refresh_member, stays_in_place
from rollout_planner.engine.model import (
    CP,
    NO_FLAGS,
    NO_PAIR,
    NODES,
    TRACK_INDEXES,
    ClusterRec,
    EngineState,
    PartitionRec,
    StageRec,
    put,
)
from rollout_planner.engine.partitioning import StagePlan, assign_stages, plan_partitions
from rollout_planner.engine.retarget_pass import retarget_members
from rollout_planner.engine.tally import attach, detach, recount_departed
from rollout_planner.engine.targets import retarget


class Placement(StrEnum):
    """How an inventory change places its cluster in a stage."""

    INCREMENTAL = "incremental"  # only what the change touches moves (`membership`)
    # every change recomputes its stages, as before the incremental placement: the reference the
    # incremental one is tested against
    FULL = "full"


def build_fleet(state: EngineState, clusters: Iterable[Cluster]) -> None:
    # one inventory model at a time: only the compact record stays (the models may be a generator)
    for spec in clusters:
        state.clusters[spec.name] = state.record(spec)
    membership = assign_stages(state.sequence, list(state.clusters.values()), state.groups.values())
    for name, stages in membership.conflicts.items():
        conflict_notice(state, name, stages)
    stage_of = membership.stage_of
    for stage in state.stages:
        index = stage.index
        rebuild_stage(state, stage, [name for name, i in stage_of.items() if i == index])


def rebuild_stage(state: EngineState, stage: StageRec, names: list[str]) -> None:
    """Recompute the stage's partitions over its members (PART-4) and recount everything in it."""
    _release_members(state, stage, keep=set(names))
    plan = plan_partitions(stage.spec, [state.clusters[n] for n in names], state.groups.values())
    _place_partitions(state, stage, plan)
    stage.members = plan.members
    stage.no_partition = plan.no_partition
    for name in stage.no_partition:
        state.clusters[name].stage = stage.index
    _retarget_all(state, stage)
    recount_departed(state, stage)
    for track in TRACK_INDEXES:
        revisit_stuck(state, stage, track)
    state.dirty.add(stage.index)


def _release_members(state: EngineState, stage: StageRec, *, keep: set[str]) -> None:
    """Every member uncounted and unplaced; those not kept lose the stage's targets too."""
    for name in stage.members + stage.no_partition:
        cluster = state.clusters.get(name)
        if cluster is not None:
            detach(state, cluster)
            if name not in keep:
                drop_targets(stage, cluster)
            cluster.stage = cluster.partition = None
            cluster.queued = NO_FLAGS


def _place_partitions(state: EngineState, stage: StageRec, plan: StagePlan) -> None:
    clusters = state.clusters
    stage_index = stage.index
    stage.partitions = []
    for index, part in enumerate(plan.partitions):
        record = PartitionRec(
            index=index, name=part.name, members=list(part.clusters), max_unavailable=part.max_unavailable
        )
        stage.partitions.append(record)
        # the partition's members are the stage's members: each is placed and counted here (attach
        # touches nothing of the others, so counting them partition by partition is the same)
        for name in part.clusters:
            cluster = clusters[name]
            cluster.stage, cluster.partition = stage_index, index
            # a cluster with nothing to count (the usual one) is counted by attach as nothing
            if (
                cluster.target is not NO_PAIR
                or not cluster.available
                or cluster.not_done is not NO_FLAGS
                or not cluster.compute_available()
            ):
                attach(state, cluster)


def _retarget_all(state: EngineState, stage: StageRec) -> None:
    # without an offer on either track, a cluster without a target keeps none: no retarget needed
    # (retargeting one cluster touches nothing another's attach reads: a pass of its own)
    if any(stage.offers(track) for track in TRACK_INDEXES):
        retarget_members(state, stage, stage.members)
        return
    for name in stage.members:
        cluster = state.clusters[name]
        if cluster.target is not NO_PAIR:
            retarget(state, cluster)


def apply_inventory(
    state: EngineState, event: InventoryChange, *, placement: Placement = Placement.INCREMENTAL
) -> None:
    """SEQ-6: a join, leave or relabel re-evaluates the stages it touches, visibly."""
    if event.cluster_group is not None:
        _apply_group(state, event.action, event.cluster_group)
        return
    name = event.cluster.name if event.cluster is not None else event.name
    if name is None:
        state.emit(Notice(code="INVALID_INVENTORY", message="inventory change without a cluster name"))
        return
    if event.action == "remove":
        _remove(state, name, state.clusters.get(name), placement=placement)
    elif event.cluster is None:
        state.emit(Notice(code="INVALID_INVENTORY", cluster=name, message=f"upsert of {name} without its record"))
    else:
        _apply_upsert(state, event.cluster, placement=placement)


def _apply_upsert(state: EngineState, spec: Cluster, *, placement: Placement) -> None:
    """A cluster registered or changed: placed in the stage it now selects, and out of the one it left."""
    name = spec.name
    old = state.clusters.get(name)
    old_stage = old.stage if old is not None else None
    record = _upsert(state, spec, old if old is not None else _returning(state, name))
    membership = assign_stages(state.sequence, [spec], state.groups.values())
    new_stage = membership.stage_of.get(name)
    if name in membership.conflicts:
        conflict_notice(state, name, membership.conflicts[name])
    # the stage it leaves first, so that stage lets go of it before the one it joins counts it
    if old_stage is not None and old_stage != new_stage:
        _let_go(state, state.stages[old_stage], record, placement=placement)
    if new_stage is not None:
        _place(state, state.stages[new_stage], record, joins=old_stage != new_stage, placement=placement)
    if new_stage is None:
        record.stage = record.partition = None
    if old_stage != new_stage:
        _moved_notice(state, name, old_stage=old_stage, new_stage=new_stage)


def _returning(state: EngineState, name: str) -> ClusterRec | None:
    """The record of a cluster registered again, put back among the clusters; None for a new one."""
    # back before its upgrade in flight reported: the same record, so the result still lands;
    # back after it left: what the rollouts did to it still counts
    old = state.departed.pop(name, None)
    if old is None:
        old = state.left.pop(name, None)
    if old is not None:
        state.clusters[name] = old
    return old


def conflict_notice(state: EngineState, name: str, stages: Iterable[str]) -> None:
    """SEQ-2: a cluster that more than one stage selects joins none, and it is said."""
    state.emit(
        Notice(
            code="SEQ-2",
            cluster=name,
            message=f"cluster {name} matches stages {', '.join(stages)}; it joins none (SEQ-2)",
        )
    )


def _moved_notice(state: EngineState, name: str, *, old_stage: int | None, new_stage: int | None) -> None:
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


def _place(state: EngineState, stage: StageRec, record: ClusterRec, *, joins: bool, placement: Placement) -> None:
    """A join or a change in place costs what it touches (`membership`); anything else, or every
    change placed in full, recomputes the stage."""
    incremental = placement is Placement.INCREMENTAL
    if incremental and joins:
        join_stage(state, stage, record)
    elif incremental and stays_in_place(state, stage, record):
        refresh_member(state, stage, record)
    else:
        names = [n for n in _stage_names(state, stage.index) if n != record.name]
        rebuild_stage(state, stage, [*names, record.name])


def _let_go(state: EngineState, stage: StageRec, record: ClusterRec, *, placement: Placement) -> None:
    """The stage lets go of a cluster that leaves it (removed, relabelled, moved to another stage)."""
    if placement is Placement.INCREMENTAL:
        leave_stage(state, stage, record)
    else:
        rebuild_stage(state, stage, [n for n in _stage_names(state, stage.index) if n != record.name])


def _remove(state: EngineState, name: str, old: ClusterRec | None, *, placement: Placement) -> None:
    """SEQ-6a: a removed cluster is never handed out again; an upgrade in flight still reports back."""
    if old is None:
        return
    stage_name = None if old.stage is None else state.stages[old.stage].spec.name
    if old.stage is not None:
        # let go while the record still exists, so its counts and targets are taken out first
        _let_go(state, state.stages[old.stage], old, placement=placement)
    del state.clusters[name]
    if not old.busy:
        state.left[name] = old
    if old.busy:
        state.departed[name] = old
        state.emit(
            Notice(code="SEQ-6", cluster=name, stage=stage_name, message=f"cluster {name} removed while upgrading")
        )
        for origin in old.origin:
            if origin is not None:
                recount_departed(state, state.stages[origin[0]])
    state.emit(Notice(code="SEQ-6", cluster=name, stage=stage_name, message=f"cluster {name} left the inventory"))


def _apply_group(state: EngineState, action: str, group: ClusterGroup) -> None:
    """A group defined, changed or removed: every cluster's stage is evaluated again (SEQ-6), and the
    partitions of every stage, since partitions may select by group too."""
    if not _group_changed(state, action, group):
        return
    before = {name: record.stage for name, record in state.clusters.items()}
    membership = assign_stages(state.sequence, list(state.clusters.values()), state.groups.values())
    # Stages first let go of the clusters that leave them, so the stage a cluster joins never counts
    # it while another still does (as a single cluster's move does in `apply_inventory`).
    for stage in state.stages:
        staying = [n for n in _stage_names(state, stage.index) if membership.stage_of.get(n) == stage.index]
        rebuild_stage(state, stage, staying)
    for stage in state.stages:
        rebuild_stage(state, stage, sorted(n for n, i in membership.stage_of.items() if i == stage.index))
    for name, record in state.clusters.items():
        if name not in membership.stage_of:
            record.stage = record.partition = None
        was, now = _stage_name(state, before[name]), _stage_name(state, record.stage)
        if was != now:
            state.emit(
                Notice(
                    code="SEQ-6",
                    cluster=name,
                    stage=now or was,
                    message=f"cluster {name} moved from {was or 'no stage'} to {now or 'no stage'} "
                    f"(cluster group {group.name}: {action})",
                )
            )


def _group_changed(state: EngineState, action: str, group: ClusterGroup) -> bool:
    """The group removed or stored; False when that changes nothing (redelivered, or unknown)."""
    if action == "remove":
        return state.groups.pop(group.name, None) is not None
    if state.groups.get(group.name) == group:
        return False
    state.groups[group.name] = group
    return True


def _stage_name(state: EngineState, index: int | None) -> str | None:
    return None if index is None else state.stages[index].spec.name


def _stage_names(state: EngineState, index: int) -> list[str]:
    stage = state.stages[index]
    return stage.members + stage.no_partition


def _upsert(state: EngineState, spec: Cluster, old: ClusterRec | None) -> ClusterRec:
    if old is None:
        record = state.record(spec)
        state.clusters[spec.name] = record
        return record
    old.profile = state.profile(spec)
    record_inventory(old, spec.last_upgrade)  # CHK-4: the later of what it says and what we know
    for track, reported in ((CP, spec.control_plane), (NODES, spec.nodes)):
        known = old.versions[track]
        if reported == known:
            continue
        # What the inventory reports is what the cluster runs: an upgrade made outside the rollout, or
        # a lower version (a rollback, a corrected record). Kept higher, the cluster's next
        # control-plane target was reckoned from a version it does not run, two minors above the one
        # it does (VER-6); it is retargeted from the reported one with the stage. Except while an
        # upgrade runs on the track (its result says), and below a version a rollout upgraded the
        # track to: an inventory that has not caught up with our own upgrade (a relabel carrying the
        # registered version); the cluster's own reported versions judge that (VERSION_MISMATCH).
        lowered = reported < known
        if old.running[track] is None and not (lowered and old.done_by[track]):
            old.versions = put(old.versions, track, reported)
            if lowered:
                floor = old.floor[track]
                old.floor = put(old.floor, track, known if floor is None else max(floor, known))
        if lowered:
            _lowered_notice(state, old, track, reported=reported, known=known)
    return old


def _lowered_notice(state: EngineState, cluster: ClusterRec, track: int, *, reported: Version, known: Version) -> None:
    """STAT-5: a lower version from the inventory is said, with what the planner does about it."""
    name, running = TRACKS[track].value, cluster.running[track]
    if running is not None:
        outcome = f"an upgrade to {running.text} is in flight on that track: its result says what it runs"
    elif cluster.versions[track] == known:
        outcome = (
            f"kept: a rollout upgraded it to {known.text}; its own reported versions are checked against that "
            "(VERSION_MISMATCH)"
        )
    else:
        outcome = (
            f"taken as the version it runs; its targets are reckoned from {reported.text} (VER-6), and "
            f"none goes below {known.text} (START-3)"
        )
    state.emit(
        Notice(
            code="VERSION_LOWERED",
            cluster=cluster.name,
            stage=None if cluster.stage is None else state.stages[cluster.stage].spec.name,
            message=f"inventory reports cluster {cluster.name} {name} on {reported.text}, below the "
            f"{known.text} the planner knew; {outcome}",
        )
    )
