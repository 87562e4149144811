"""Handing out batches inside a stage: partitions in order, GATE-1 per batch, GATE-3 across partitions."""

from __future__ import annotations

import heapq

from rollout_common.checks import CheckPhase
from rollout_common.commands import StageAdvance
from rollout_common.quantity import resolve
from rollout_common.status import TRACKS, StageState, WaitRule
from rollout_common.version import Version
from rollout_planner.engine.availability import blocked, next_block, next_start
from rollout_planner.engine.gates.budgets import budget_wait, hold_for_budget
from rollout_planner.engine.gates.checks import check_waits, holding
from rollout_planner.engine.lifecycle import finish_if_done, revisit_stuck
from rollout_planner.engine.model import (
    CP,
    MAX_UPGRADE_TIME,
    NO_PAIR,
    NODES,
    ClusterRec,
    EngineState,
    PartitionRec,
    Run,
    StageRec,
    hands_out,
    put,
)
from rollout_planner.engine.tally import refresh, set_queued
from rollout_planner.engine.wait_records import WaitTuple, gate_1_wait, record_waits, window_wait


def dispatch_stage(state: EngineState, stage: StageRec) -> None:
    # SOAK-1: within one instant, node upgrades (finishing started clusters) go before new control planes
    for track in (NODES, CP):
        revisit_stuck(state, stage, track)
        waits: list[WaitTuple] = []
        state.window_blocked = []
        state.budget_blocked = []
        if any(r.dispatchable or r.state is StageState.PAUSED for r in stage.runs[track].values()):
            _dispatch_track(state, stage, track, waits)
        if state.window_blocked:
            waits.append(window_wait(state.window_blocked))
        if state.budget_blocked:
            waits.append(budget_wait(state.budget_blocked))
        finish_if_done(state, stage, track)
        waits += _completion_waits(state, stage, track)
        waits += check_waits(state, stage, track)
        record_waits(state, stage, track, waits)


def _completion_waits(state: EngineState, stage: StageRec, track: int) -> list[WaitTuple]:
    """Why a run that hands nothing out has not started soaking yet (SOAK-2, SOAK-4)."""
    out: list[WaitTuple] = []
    for run in stage.runs[track].values():
        if not run.active:
            continue
        if run.remaining == 0:
            held = [p.name for p in stage.partitions if p.not_ready(track)]
            if held and stage.forced_run[track] is None:
                out.append((WaitRule.SOAK_2_PARTITIONS_NOT_READY.value, None, {"partitions": held[:20]}))
        elif stage.in_flight == 0 and not _has_pending(state, stage, 0, track) and run.started_at is not None:
            out.append(
                (
                    WaitRule.SOAK_2_SOAKING.value,
                    None,
                    {
                        "remaining": run.remaining,
                        "forcedSoakAt": run.started_at + MAX_UPGRADE_TIME,
                    },
                )
            )
    return out


def _dispatch_track(state: EngineState, stage: StageRec, track: int, waits: list[WaitTuple]) -> None:
    strategy = stage.spec.rollout_strategy
    limit = resolve(strategy.max_unavailable_partitions, len(stage.partitions))
    forced = stage.forced_run[track] is not None
    not_ready: list[str] = []
    for partition in stage.partitions:
        if partition.index > 0 and len(not_ready) > limit:
            if _has_pending(state, stage, partition.index, track):
                waits.append(
                    (
                        WaitRule.GATE_3_MAX_UNAVAILABLE_PARTITIONS.value,
                        partition.name,
                        {
                            "notReadyPartitions": len(not_ready),
                            "maxUnavailablePartitions": limit,
                            "partitions": list(not_ready),
                        },
                    )
                )
            return
        _dispatch_partition(state, stage, partition, track, waits)
        if not forced and partition.not_ready(track):
            not_ready.append(partition.name)


def _has_pending(state: EngineState, stage: StageRec, start: int, track: int) -> bool:
    """Whether a cluster waits for a slot in partition `start` or a later one (stale entries, of a
    cluster retargeted or moved to another partition, dropped on the way)."""
    return any(
        _valid_head(state, heap, track, version, p.index) is not None
        for p in stage.partitions[start:]
        for version, heap in p.pending[track].items()
    )


def _dispatch_partition(
    state: EngineState, stage: StageRec, partition: PartitionRec, track: int, waits: list[WaitTuple]
) -> None:
    """GATE-1: the next clusters of the partition, in member order: each batch goes to the version of
    the first cluster waiting, and takes that version's next clusters (one version per batch)."""
    pending = partition.pending[track]
    held: set[Version] = set()  # versions whose next batch cannot go now
    while True:
        heads = []
        for version, heap in list(pending.items()):
            head = _valid_head(state, heap, track, version, partition.index)
            if head is None:
                del pending[version]
            elif version not in held:
                heads.append((head.name, version))
        if not heads:
            return
        _, version = min(heads)
        if not _dispatch_batch(state, stage=stage, partition=partition, track=track, version=version, waits=waits):
            held.add(version)


def _valid_head(state: EngineState, heap: list[str], track: int, version: Version, at: int) -> ClusterRec | None:
    """Drop queue entries made stale by a retarget, a hand-out or a move to another partition (a join
    shifts partition boundaries); return the first live one. `at`: the heap's partition position."""
    while heap:
        cluster = state.clusters.get(heap[0])
        if (
            cluster is not None
            and cluster.partition == at
            and cluster.queued[track]
            and cluster.target[track] == version
            and cluster.running[track] is None
        ):
            return cluster
        heapq.heappop(heap)
    return None


def _dispatch_batch(
    state: EngineState,
    *,
    stage: StageRec,
    partition: PartitionRec,
    track: int,
    version: Version,
    waits: list[WaitTuple],
) -> bool:
    """Try one batch; True when one went out (so the caller tries the next)."""
    heap = partition.pending[track][version]
    head = _valid_head(state, heap, track, version, partition.index)
    if head is None:
        return False
    run = _handing_run(state, stage=stage, partition=partition, head=head, track=track, waits=waits)
    cap = None if run is None else _concurrency_cap(stage, partition, waits)
    if run is None or cap is None:
        return False
    batch = _gated_batch(state, partition, heap=heap, run=run, cap=cap, track=track, version=version, waits=waits)
    if not batch:
        return False
    _hand_out(state, stage=stage, partition=partition, track=track, version=version, run=run, batch=batch)
    return True


def _gated_batch(
    state: EngineState,
    partition: PartitionRec,
    *,
    heap: list[str],
    run: Run,
    cap: int,
    track: int,
    version: Version,
    waits: list[WaitTuple],
) -> list[ClusterRec]:
    """The next clusters of the version's queue that may go together now; none when GATE-1 refuses."""
    # GATE-1: the run's first batch in this partition (by position: a rename after an inventory
    # change is the same partition) goes out ungated, once per release, whatever its versions
    first = partition.index not in run.first_batches
    if not first and _gate_1_refuses_before(partition, track=track, cap=cap, waits=waits):
        return []
    batch = _take(state, heap=heap, track=track, version=version, run=run, cap=cap, at=partition.index)
    if (
        batch
        and not first
        and _gate_1_refuses(state, partition, heap=heap, track=track, version=version, batch=batch, waits=waits)
    ):
        return []
    return batch


def _handing_run(
    state: EngineState,
    *,
    stage: StageRec,
    partition: PartitionRec,
    head: ClusterRec,
    track: int,
    waits: list[WaitTuple],
) -> Run | None:
    """The run the queue's head waits for, when it hands out now (OPS-1: not paused; CHK-2: its
    progress checks hold no batch)."""
    run = stage.runs[track].get(head.target_run[track] or "")
    if run is None or not hands_out(run, state.rollouts[run.rollout_id]) or state.rollouts[run.rollout_id].paused:
        if run is not None and (run.state is StageState.PAUSED or state.rollouts[run.rollout_id].paused):
            waits.append((WaitRule.OPS_1_PAUSED.value, partition.name, {"reason": run.reason}))
        return None
    # CHK-2: each progress check's latest result passed and is fresh (check_waits says which not)
    progress_held = stage.spec.checks and holding(state, stage, run.rollout_id, CheckPhase.PROGRESS)
    if run.state is StageState.IN_PROGRESS and progress_held:
        return None
    return run


def _concurrency_cap(stage: StageRec, partition: PartitionRec, waits: list[WaitTuple]) -> int | None:
    """How many clusters the next batch may take (maxNew, GATE-6 maxConcurrent); None: none now."""
    strategy = stage.spec.rollout_strategy
    cap = strategy.max_new
    if strategy.max_concurrent is None:
        return cap
    cap = min(cap, strategy.max_concurrent - stage.in_flight)
    if cap > 0:
        return cap
    waits.append(
        (
            WaitRule.GATE_6_MAX_CONCURRENT.value,
            partition.name,
            {"inFlight": stage.in_flight, "maxConcurrent": strategy.max_concurrent},
        )
    )
    return None


def _gate_1_refuses_before(partition: PartitionRec, *, track: int, cap: int, waits: list[WaitTuple]) -> bool:
    """GATE-1 on a lower bound of "the other clusters' unavailability": refuse without touching the queue."""
    others_at_least = partition.holding - min(cap, partition.queued_unavailable[track])
    if others_at_least > 0 and others_at_least >= partition.max_unavailable:
        gate_1_wait(waits, partition, partition.holding)
        return True
    return False


def _gate_1_refuses(
    state: EngineState,
    partition: PartitionRec,
    *,
    heap: list[str],
    track: int,
    version: Version,
    batch: list[ClusterRec],
    waits: list[WaitTuple],
) -> bool:
    """GATE-1 on the batch taken (all of one version): when refused, its clusters go back to the queue."""
    others = partition.holding - sum(1 for c in batch if not c.available)
    if not (others > 0 and others >= partition.max_unavailable):
        return False
    for cluster in batch:
        heapq.heappush(heap, cluster.name)
        _look_again_when_blocked(state, cluster, track, version)
    gate_1_wait(waits, partition, others)
    return True


def _take(
    state: EngineState, *, heap: list[str], track: int, version: Version, run: Run, cap: int, at: int
) -> list[ClusterRec]:
    """The next clusters in name order that can start now (WIN-3: the others give up their turn)."""
    batch: list[ClusterRec] = []
    taken: set[str] = set()
    while len(batch) < cap:
        cluster = _valid_head(state, heap, track, version, at)
        if cluster is None:
            break
        if cluster.target_run[track] != run.rollout_id:
            break  # another rollout's clusters on the same version get their own batch
        heapq.heappop(heap)
        if cluster.name in taken:
            continue  # a second queue entry for the same cluster (queued again after a retarget)
        if not _can_start(state, cluster, track, version):
            continue
        batch.append(cluster)
        taken.add(cluster.name)
    return batch


def _can_start(state: EngineState, cluster: ClusterRec, track: int, version: Version) -> bool:
    if cluster.busy or cluster.profile.deprecated_api_usage or (track == NODES and cluster.versions[CP] < version):
        set_queued(state, cluster, track, False)  # queued again when what holds it changes
        return False
    if cluster.upgraded_at is not NO_PAIR and hold_for_budget(state, cluster, track, version):
        set_queued(state, cluster, track, False)  # CHK-4: as WIN-3, queued again by its timer
        return False
    if cluster.profile.maintenance_window is None and not cluster.profile.exclusions:
        return True
    if not blocked(cluster, track, version, state.now):
        return True
    set_queued(state, cluster, track, False)
    opens = next_start(cluster, track, version, state.now)
    until = opens if opens is not None else float("inf")
    cluster.waiting_until = put(cluster.waiting_until, track, until)
    state.window_blocked.append((until, cluster.name))
    if opens is not None:
        state.add_cluster_timer(opens, name=cluster.name, track=track)
    return False


def _look_again_when_blocked(state: EngineState, cluster: ClusterRec, track: int, version: Version) -> None:
    """WIN-3: a cluster held back in the queue while it may start stops holding the clusters behind
    it once its window closes (or an exclusion begins), so its stage is looked at again then: not
    only at the next event that happens to reach the stage (BUS-6: nor at a restart)."""
    if cluster.profile.maintenance_window is None and not cluster.profile.exclusions:
        return
    at = next_block(cluster, track, version, state.now)
    if at is None:
        return
    if not state.has_cluster_timer(at, name=cluster.name, track=track):
        state.add_cluster_timer(at, name=cluster.name, track=track)


def _hand_out(
    state: EngineState,
    *,
    stage: StageRec,
    partition: PartitionRec,
    track: int,
    version: Version,
    run: Run,
    batch: list[ClusterRec],
) -> None:
    state.next_command += 1
    command_id = f"{run.rollout_id}/{stage.spec.name}/{TRACKS[track].value}/{state.next_command}"
    _mark_running(state, batch, stage=stage, partition=partition, track=track, version=version, command_id=command_id)
    run.first_batches.add(partition.index)
    state.emit(
        StageAdvance(
            command_id=command_id,
            rollout_id=run.rollout_id,
            stage=stage.spec.name,
            track=TRACKS[track],
            partition=partition.name,
            version=version.text,
            clusters=tuple(c.name for c in batch),
            retries={c.name: c.retries[track] for c in batch if c.retries[track]},
        )
    )


def _mark_running(
    state: EngineState,
    batch: list[ClusterRec],
    *,
    stage: StageRec,
    partition: PartitionRec,
    track: int,
    version: Version,
    command_id: str,
) -> None:
    """The batch's clusters are upgrading: out of the queue, their slot held by the partition that handed them out."""
    for cluster in batch:
        cluster.running = put(cluster.running, track, version)
        cluster.running_cmd = put(cluster.running_cmd, track, command_id)
        cluster.origin = put(cluster.origin, track, (stage.index, partition.index))
        stage.handed[(cluster.name, track)] = partition.index
        set_queued(state, cluster, track, False)
        # busy now, so out of the other track's queue too: its result queues it again (`enqueue`)
        set_queued(state, cluster, NODES if track == CP else CP, False)
        refresh(state, cluster)
