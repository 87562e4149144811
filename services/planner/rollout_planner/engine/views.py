"""Read-only views of the engine state: cluster statuses (STAT-1), stages (STAT-2), partitions (STAT-3)."""

from __future__ import annotations

from typing import Any

from rollout_common.commands import Wait
from rollout_common.quantity import resolve
from rollout_common.status import (
    TRACKS,
    ClusterStatus,
    IneligibleType,
    PauseType,
    StageReason,
    StageState,
    WaitRule,
)
from rollout_common.status_words import version_mismatch_reason
from rollout_planner.engine.eligibility import offered_versions
from rollout_planner.engine.gates.approvals import approval_waits, gate_views
from rollout_planner.engine.gates.budgets import budget_waits, held_by_budget
from rollout_planner.engine.gates.checks import check_views
from rollout_planner.engine.gates.start_windows import start_window_waits
from rollout_planner.engine.model import CP, NODES, TRACK_INDEXES, ClusterRec, EngineState, StageRec, hands_out
from rollout_planner.engine.reasons import describe_waits, window_waits

# most pressing first: the overall status of a cluster is the first of its two tracks' in this order
_PRIORITY = [
    ClusterStatus.FAILED,
    ClusterStatus.PAUSED,
    ClusterStatus.IN_PROGRESS,
    ClusterStatus.NOT_READY,
    ClusterStatus.OUT_OF_SYNC,
    # a track the rollout will never upgrade says more than one nothing has reached yet (VER-5)
    ClusterStatus.INELIGIBLE,
    ClusterStatus.PENDING,
    ClusterStatus.COMPLETE,
    ClusterStatus.SKIPPED_NEWER,
]

StatusPair = tuple[ClusterStatus, str | None]


def reached_partitions(state: EngineState, stage: StageRec, track: int) -> int:
    """How many partitions GATE-3 lets through right now."""
    limit = resolve(stage.spec.rollout_strategy.max_unavailable_partitions, len(stage.partitions))
    forced = stage.forced_run[track] is not None
    not_ready = 0
    for partition in stage.partitions:
        if partition.index > 0 and not_ready > limit:
            return partition.index
        if not forced and partition.not_ready(track):
            not_ready += 1
    return len(stage.partitions)


def track_status(state: EngineState, cluster: ClusterRec, track: int, *, reached: int | None = None) -> StatusPair:
    """The cluster's status on one track (STAT-1) and why. `reached` is `reached_partitions` of its
    stage's track, when the caller walks many of the stage's clusters and worked it out once."""
    if cluster.stage is None:
        if cluster.profile.channel != state.sequence.channel:
            return ClusterStatus.INELIGIBLE, IneligibleType.OTHER_CHANNEL.value
        return ClusterStatus.INELIGIBLE, "matches no stage of the sequence"
    stage = state.stages[cluster.stage]
    if cluster.partition is None:
        return ClusterStatus.INELIGIBLE, IneligibleType.NO_PARTITION.value
    if cluster.failed[track] is not None:
        return ClusterStatus.FAILED, cluster.failed[track]
    if cluster.running[track] is not None:
        return ClusterStatus.IN_PROGRESS, f"upgrading to {cluster.running[track]}"
    if cluster.target[track] is not None:
        return _targeted(state, stage, cluster, track, reached)
    return _untargeted(state, stage, cluster, track)


def _targeted(state: EngineState, stage: StageRec, cluster: ClusterRec, track: int, reached: int | None) -> StatusPair:
    target = cluster.target[track]
    run = stage.runs[track].get(cluster.target_run[track] or "")
    if cluster.profile.deprecated_api_usage:
        return ClusterStatus.PAUSED, PauseType.DEPRECATED_API.value
    until = cluster.waiting_until[track]
    if until is not None and until > state.now:
        if target is not None and held_by_budget(state, cluster, track, target):
            return ClusterStatus.PAUSED, PauseType.DISRUPTION_BUDGET.value
        return ClusterStatus.PAUSED, PauseType.MAINTENANCE_POLICY.value
    if run is not None and run.state is StageState.PAUSED:
        return ClusterStatus.PAUSED, PauseType.USER.value if run.reason == "USER" else run.reason
    if track == NODES and target is not None and cluster.versions[CP] < target:
        return ClusterStatus.PENDING, "waits for its control plane (SOAK-1)"
    handing_out = run is not None and (run.active or hands_out(run, state.rollouts[run.rollout_id]))
    if reached is None:
        reached = reached_partitions(state, stage, track)
    if run is None or not handing_out or (cluster.partition or 0) >= reached:
        return ClusterStatus.PENDING, f"target {target}; partition not reached"
    return ClusterStatus.OUT_OF_SYNC, f"target {target}; waiting for a batch slot"


def _untargeted(state: EngineState, stage: StageRec, cluster: ClusterRec, track: int) -> StatusPair:
    if cluster.done_by[track]:
        reported = cluster.mismatch[track]
        if reported is not None:
            text = version_mismatch_reason(expected=cluster.versions[track].text, reported=reported.text)
            return ClusterStatus.NOT_READY, text
        if cluster.awaiting_ready or not cluster.ready:
            return ClusterStatus.NOT_READY, "upgraded, not yet reported ready"
        return ClusterStatus.COMPLETE, None
    candidates = [v for o in stage.offers(track) for v in offered_versions(o, cluster, track)]
    if not candidates:
        if not stage.offers(track):
            return ClusterStatus.PENDING, _nothing_offered(state, stage, track)
        return ClusterStatus.INELIGIBLE, IneligibleType.INCOMPATIBLE_VERSION.value
    current = cluster.versions[track]
    if current in candidates:
        return ClusterStatus.COMPLETE, None
    if all(v < current for v in candidates):
        return ClusterStatus.SKIPPED_NEWER, f"already on {current}, newer than {max(candidates)}"
    floor = cluster.floor[track]
    if floor is not None and all(v < floor for v in candidates):
        # the inventory lowered it: no upgrade goes below (or to) the version it ran before
        return (
            ClusterStatus.SKIPPED_NEWER,
            f"ran {floor} before the inventory reported {current}; newer than {max(candidates)}",
        )
    return ClusterStatus.INELIGIBLE, IneligibleType.INCOMPATIBLE_VERSION.value


def _nothing_offered(state: EngineState, stage: StageRec, track: int) -> str:
    """Why no version is held out to the stage's members: none came yet, or its rollout was cancelled."""
    run = stage.latest_run(track)
    if run is not None and run.state is StageState.CANCELLED and run.reason == StageReason.USER.value:
        if run.started_at is None:
            return f"rollout {run.rollout_id} was cancelled before its version reached this stage (OPS-1)"
        return f"rollout {run.rollout_id} was cancelled (OPS-1); the next release reaches this stage"
    return "no version has reached this stage yet"


def cluster_status(state: EngineState, cluster: ClusterRec) -> StatusPair:
    pairs = [track_status(state, cluster, t) for t in TRACK_INDEXES]
    return min(pairs, key=lambda p: _PRIORITY.index(p[0]))


def stage_track_state(stage: StageRec, track: int) -> str:
    run = stage.latest_run(track)
    return StageState.PENDING.value if run is None else run.state.value


def stage_view(state: EngineState, stage: StageRec, *, with_clusters: bool = True) -> dict[str, Any]:
    """One stage's status: per track state, counts per cluster status, partitions, and why it waits."""
    tracks = {TRACKS[track].value: _track_view(state, stage, track, with_clusters) for track in TRACK_INDEXES}
    view: dict[str, Any] = {"name": stage.spec.name, "clusters": len(stage.members) + len(stage.no_partition)}
    view["tracks"] = tracks
    if stage.spec.approval.any:  # CHK-1; a stage without gates shows as before
        view["gates"] = gate_views(state, stage)
    if stage.spec.checks:  # CHK-2; a stage without checks shows as before
        view["checks"] = check_views(state, stage)
    return view


def _track_view(state: EngineState, stage: StageRec, track: int, with_clusters: bool) -> dict[str, Any]:
    counts = _status_counts(state, stage, track)
    run = stage.latest_run(track)
    qualified = _qualified(stage, track)
    waits = _track_waits(state, stage, track, with_clusters)
    return {
        "state": stage_track_state(stage, track),
        "rollout": None if run is None else run.rollout_id,
        "reason": None if run is None else run.reason,
        "version": None if run is None else _run_version(run),
        "soakEnd": None if run is None else run.soak_end,
        "startedAt": None if run is None else run.started_at,
        "finishedAt": None if run is None else run.finished_at,
        "counts": counts,
        "qualified": qualified,
        "partitions": [_partition_view(p, track) for p in stage.partitions],
        "waits": [w.model_dump(mode="json") for w in waits],
    }


def _qualified(stage: StageRec, track: int) -> list[str]:
    """The versions the stage's completed runs qualified on the track, in order."""
    return sorted(
        {
            r.qualified.text
            for r in stage.runs[track].values()
            if r.state is StageState.COMPLETE and r.qualified is not None
        }
    )


def _status_counts(state: EngineState, stage: StageRec, track: int) -> dict[str, int]:
    """How many of the stage's clusters are in each status (STAT-1) on the track.

    A walk over the whole stage each status document (a million clusters at most): what every
    cluster of the walk shares, GATE-3's reach, is worked out once, and the statuses are counted
    as enum members and named once at the end."""
    reached = reached_partitions(state, stage, track)
    clusters = state.clusters
    counts: dict[ClusterStatus, int] = {}
    for name in stage.members + stage.no_partition:
        status, _ = track_status(state, clusters[name], track, reached=reached)
        counts[status] = counts.get(status, 0) + 1
    return {status.value: count for status, count in counts.items()}


def _track_waits(state: EngineState, stage: StageRec, track: int, with_clusters: bool) -> list[Wait]:
    """Why the track waits (STAT-5): what the last dispatch pass recorded, with what scans of the stage add."""
    waits = describe_waits(state, stage, track, with_clusters=with_clusters)
    if not any(w.rule == WaitRule.WIN_MAINTENANCE.value for w in waits):
        # the scan finds clusters whose window wait the last dispatch pass did not record; one
        # it did record is said once (it was listed twice: the recorded wait and the scan's)
        waits += window_waits(state, stage, track)
    # CHK-4: every cluster its budget holds now, not only those the last dispatch pass met
    waits = [w for w in waits if w.rule != WaitRule.CHK_4_DISRUPTION_BUDGET.value]
    waits += budget_waits(state, stage, track)
    waits += approval_waits(state, stage, track)
    waits += start_window_waits(state, stage, track)
    return waits


def _run_version(run: Any) -> str | None:
    version = run.qualified or (min(run.working) if run.working else run.offered)
    return None if version is None else str(version)


def _partition_view(partition: Any, track: int) -> dict[str, Any]:
    return {
        "name": partition.name,
        "clusters": len(partition.members),
        "maxUnavailable": partition.max_unavailable,
        "unavailable": partition.unavailable,
        "notDone": partition.not_done[track],
        "ready": not partition.not_ready(track),
    }
