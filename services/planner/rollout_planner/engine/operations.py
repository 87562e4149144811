"""Operator commands: pause, resume, cancel, retry, soak overrides; each validated and acknowledged (OPS)."""

from __future__ import annotations

from rollout_common.commands import CommandAck, RolloutTransition
from rollout_common.events import OperatorCommand
from rollout_common.status import RolloutState, StageReason, StageState
from rollout_common.version import VersionError, parse_version
from rollout_planner.engine.gates.approve import approve
from rollout_planner.engine.gates.checks import halted
from rollout_planner.engine.lifecycle import halted_here, recompute_soak, resume_halted, update_rollout
from rollout_planner.engine.model import (
    TRACK_INDEXES,
    ClusterRec,
    EngineState,
    RolloutRec,
    Run,
    StageRec,
    put,
    put_count,
)
from rollout_planner.engine.runs import transition
from rollout_planner.engine.tally import refresh
from rollout_planner.engine.targets import enqueue, release_failed, retarget


def apply_command(state: EngineState, command: OperatorCommand) -> None:
    if command.command_id in state.seen_events:
        return  # OPS-3 acknowledges once; a redelivered command changes nothing
    state.seen_events.add(command.command_id)
    if command.action == "approve":
        accepted, reason = _approve(state, command)
    else:
        error = _apply(state, command)
        accepted, reason = error is None, error or f"{command.action} applied"
    state.emit(CommandAck(command_id=command.command_id, accepted=accepted, reason=reason))


def _approve(state: EngineState, command: OperatorCommand) -> tuple[bool, str]:
    targets = _targets(state, command)
    if isinstance(targets, str):
        return False, targets
    return approve(state, command, targets)


def _apply(state: EngineState, command: OperatorCommand) -> str | None:
    misplaced = command.misplaced_field()
    if misplaced is not None:
        return misplaced
    if command.action == "soak_override":
        return _soak_override(state, command)
    if command.stage is not None and command.stage not in state.stage_by_name:
        return f"unknown stage {command.stage!r}"
    if command.cluster is not None and command.cluster not in state.clusters:
        return f"unknown cluster {command.cluster!r}"
    targets = _targets(state, command)
    if isinstance(targets, str):
        return targets
    if command.action == "retry":
        return _retry(state, command, targets)
    for rollout in targets:
        if command.action == "pause":
            _pause(state, rollout)
        elif command.action == "resume":
            _resume(state, rollout)
        else:
            _cancel(state, rollout)
    return None


def _targets(state: EngineState, command: OperatorCommand) -> list[RolloutRec] | str:
    """OPS-5: a command that changes a rollout names it, or says it is for every active rollout."""
    rollout_id = command.rollout_id
    if rollout_id is None and not command.all_rollouts:
        return "name a rollout (rolloutId) or say it applies to all active rollouts (all: true) (OPS-5)"
    if rollout_id is not None and command.all_rollouts:
        return "name a rollout or say all, not both (OPS-5)"
    active = [r for r in state.rollouts.values() if r.state in (RolloutState.RUNNING, RolloutState.PAUSED)]
    if rollout_id is None:
        return active if active else "no active rollout"
    rollout = state.rollouts.get(rollout_id)
    if rollout is None:
        return f"unknown rollout {rollout_id}"
    if rollout not in active:
        return f"rollout {rollout_id} is {rollout.state.value}"
    return [rollout]


def _runs_of(state: EngineState, rollout_id: str) -> list[Run]:
    return [s.runs[t][rollout_id] for s in state.stages for t in TRACK_INDEXES if rollout_id in s.runs[t]]


def _pause(state: EngineState, rollout: RolloutRec) -> None:
    rollout.paused = True
    rollout.state = RolloutState.PAUSED
    state.emit(RolloutTransition(rollout_id=rollout.id, state=rollout.state, reason="paused by an operator"))
    for run in _runs_of(state, rollout.id):
        if run.state is StageState.IN_PROGRESS:
            transition(state, run, StageState.PAUSED, StageReason.USER)


def _resume(state: EngineState, rollout: RolloutRec) -> None:
    rollout.paused = False
    rollout.state = RolloutState.RUNNING
    state.emit(RolloutTransition(rollout_id=rollout.id, state=rollout.state, reason="resumed by an operator"))
    for run in _runs_of(state, rollout.id):
        if halted(run):
            resume_halted(state, run)
            state.dirty.add(run.stage)
        elif run.state is StageState.PAUSED:
            run.failures = 0  # resuming after FAILURE_BUDGET grants a fresh budget
            transition(state, run, StageState.IN_PROGRESS, StageReason.RESUMED)
        if run.dispatchable:
            # a soaking or completed run hands out too (late members, SEQ-6a): one that joined
            # during the pause was held then and is looked at again now (fuzz seed 11472)
            state.dirty.add(run.stage)


def _cancel(state: EngineState, rollout: RolloutRec) -> None:
    rollout.state = RolloutState.CANCELLED
    state.emit(RolloutTransition(rollout_id=rollout.id, state=rollout.state, reason="cancelled by an operator"))
    _open_unreached(state, rollout)
    touched: set[int] = set()
    for run in _runs_of(state, rollout.id):
        if not run.terminal:
            transition(state, run, StageState.CANCELLED, StageReason.USER)
        if run.offer is not None:
            run.offer = None  # a cancelled rollout offers nothing, even where its run completed
            touched.add(run.stage)
    for index in sorted(touched):
        stage = state.stages[index]
        for name in stage.members:
            cluster = state.clusters[name]
            release_failed(state, cluster, rollout.id)
            retarget(state, cluster)
        state.dirty.add(index)


def _open_unreached(state: EngineState, rollout: RolloutRec) -> None:
    """OPS-1: every stage and track of the rollout is cancelled, the ones its version never reached
    too: each gets the run it would have had, PENDING, for the cancel to end (in rollout order among
    the stage's runs, so a newer rollout's run there stays the stage's latest)."""
    for stage in state.stages:
        for track in rollout.tracks:
            runs = stage.runs[track]
            if rollout.id in runs:
                continue
            run = Run(rollout.id, stage.index, track, StageState.PENDING, "", opened_at=state.now)
            older = {k: r for k, r in runs.items() if state.rollouts[k].number < rollout.number}
            stage.runs[track] = {**older, rollout.id: run, **{k: r for k, r in runs.items() if k not in older}}


def _retry(state: EngineState, command: OperatorCommand, rollouts: list[RolloutRec]) -> str | None:
    """OPS-4: the failed upgrades named go OUT_OF_SYNC again, to go out in later batches under the
    same gates; each stage retried counts its failures afresh (maxFailures)."""
    ids = {r.id for r in rollouts}
    stages = [state.stage_by_name[command.stage]] if command.stage is not None else state.stages
    retried = 0
    for stage in stages:
        names = [command.cluster] if command.cluster is not None else stage.members
        for name in names:
            cluster = state.clusters[name]
            if cluster.stage == stage.index:
                retried += _retry_cluster(state, stage, cluster, ids=ids)
    if not retried:
        return f"no failed upgrade to retry{_retry_where(command)}"
    return None


def _retry_cluster(state: EngineState, stage: StageRec, cluster: ClusterRec, *, ids: set[str]) -> int:
    """Retry the cluster's failed tracks of the rollouts `ids`; returns how many it retried."""
    retried = 0
    for track in TRACK_INDEXES:
        run_id = cluster.target_run[track]
        if cluster.failed[track] is None or (run_id is not None and run_id not in ids):
            continue
        # a failure with no target left (it moved stage meanwhile, SEQ-6a) is retried too
        cluster.failed = put(cluster.failed, track, None)
        retarget(state, cluster)  # evaluated again: the newest eligible version (VER-6)
        cluster.retries = put_count(cluster.retries, track, cluster.retries[track] + 1)
        refresh(state, cluster)
        enqueue(state, cluster, track)
        _fresh_budget(state, stage, stage.runs[track].get(cluster.target_run[track] or ""))
        retried += 1
    return retried


def _retry_where(command: OperatorCommand) -> str:
    if command.cluster:
        return f" of cluster {command.cluster}"
    if command.stage:
        return f" in stage {command.stage}"
    return ""


def _fresh_budget(state: EngineState, stage: StageRec, run: Run | None) -> None:
    if run is None:
        return
    run.failures = 0
    state.dirty.add(stage.index)
    held = run.state is StageState.PAUSED and run.reason == StageReason.FAILURE_BUDGET.value
    # a rollout halted at the stage (CHK-2) or paused goes on only when resumed
    if held and not state.rollouts[run.rollout_id].paused and halted_here(state, run) is None:
        transition(state, run, StageState.IN_PROGRESS, StageReason.RESUMED, detail="failed upgrades retried (OPS-4)")


def _soak_override(state: EngineState, command: OperatorCommand) -> str | None:
    stage = state.stage_by_name.get(command.stage or "")
    if stage is None:
        return f"unknown stage {command.stage!r}"
    try:
        version = parse_version(command.version or "")
    except VersionError as exc:
        return str(exc)
    # OPS-2: a removal takes away any override for the version, the stage definition's included
    state.soak_overrides[(stage.spec.name, version.text)] = command.soak
    for track in TRACK_INDEXES:
        for run in list(stage.runs[track].values()):
            if run.qualified == version:
                # OPS-2: the remaining soak is recomputed from when the soak began
                recompute_soak(state, run, detail="soak override applied")
    for rollout_id in list(state.rollouts):
        update_rollout(state, rollout_id)
    return None
