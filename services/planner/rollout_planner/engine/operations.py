"""Operator commands: pause, resume, cancel, soak overrides; each validated and acknowledged (OPS)."""

from __future__ import annotations

from rollout_common.commands import CommandAck, RolloutTransition
from rollout_common.events import OperatorCommand
from rollout_common.status import RolloutState, StageReason, StageState
from rollout_common.version import VersionError, parse_version
from rollout_planner.engine.lifecycle import complete, set_state, soak_seconds, update_rollout
from rollout_planner.engine.model import TRACK_INDEXES, EngineState, RolloutRec, Run
from rollout_planner.engine.targets import retarget


def apply_command(state: EngineState, command: OperatorCommand) -> None:
    if command.command_id in state.seen_events:
        return  # OPS-3 acknowledges once; a redelivered command changes nothing
    state.seen_events.add(command.command_id)
    error = _apply(state, command)
    state.emit(
        CommandAck(command_id=command.command_id, accepted=error is None, reason=error or f"{command.action} applied")
    )


def _apply(state: EngineState, command: OperatorCommand) -> str | None:
    if command.action == "soak_override":
        return _soak_override(state, command)
    targets = _targets(state, command.rollout_id)
    if isinstance(targets, str):
        return targets
    for rollout in targets:
        if command.action == "pause":
            _pause(state, rollout)
        elif command.action == "resume":
            _resume(state, rollout)
        else:
            _cancel(state, rollout)
    return None


def _targets(state: EngineState, rollout_id: str | None) -> list[RolloutRec] | str:
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
            set_state(state, run, StageState.PAUSED, StageReason.USER)


def _resume(state: EngineState, rollout: RolloutRec) -> None:
    rollout.paused = False
    rollout.state = RolloutState.RUNNING
    state.emit(RolloutTransition(rollout_id=rollout.id, state=rollout.state, reason="resumed by an operator"))
    for run in _runs_of(state, rollout.id):
        if run.state is StageState.PAUSED:
            run.failures = 0  # resuming after FAILURE_BUDGET grants a fresh budget
            set_state(state, run, StageState.IN_PROGRESS, StageReason.RESUMED)
            state.dirty.add(run.stage)


def _cancel(state: EngineState, rollout: RolloutRec) -> None:
    rollout.state = RolloutState.CANCELLED
    state.emit(RolloutTransition(rollout_id=rollout.id, state=rollout.state, reason="cancelled by an operator"))
    for run in _runs_of(state, rollout.id):
        if not run.terminal:
            set_state(state, run, StageState.CANCELLED, StageReason.USER)
    for stage in state.stages:
        touched = False
        for track in TRACK_INDEXES:
            kept = [o for o in stage.offers[track] if o.rollout_id != rollout.id]
            touched |= len(kept) != len(stage.offers[track])
            stage.offers[track] = kept
        if touched:
            for name in stage.members:
                retarget(state, state.clusters[name])


def _soak_override(state: EngineState, command: OperatorCommand) -> str | None:
    stage = state.stage_by_name.get(command.stage or "")
    if stage is None:
        return f"unknown stage {command.stage!r}"
    try:
        version = parse_version(command.version or "")
    except VersionError as exc:
        return str(exc)
    key = (stage.spec.name, version.text)
    if command.soak is None:
        state.soak_overrides.pop(key, None)
    else:
        state.soak_overrides[key] = command.soak
    for track in TRACK_INDEXES:
        for run in list(stage.runs[track].values()):
            if run.soaking and run.qualified == version and run.soak_started is not None:
                # OPS-2: the remaining soak is recomputed from when the soak began
                run.soak_end = run.soak_started + soak_seconds(state, stage, version)
                if run.soak_end <= state.now:
                    complete(state, run)
                else:
                    state.add_run_timer(
                        run.soak_end, "soak", stage=run.stage, track=run.track, rollout_id=run.rollout_id
                    )
                    set_state(state, run, run.state, StageReason.ALL_UPGRADED, detail="soak override applied")
    for rollout_id in list(state.rollouts):
        update_rollout(state, rollout_id)
    return None
