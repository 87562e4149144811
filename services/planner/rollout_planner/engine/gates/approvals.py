"""CHK-1 approval gates: where a run waits for a sign-off, and what is recorded about it.

A gate belongs to a rollout, a stage and a position. It is reached when a run of the rollout
first waits at it; the record keeps since when (STAT-5) and who approved it when (OPS-3). Whether
it still waits is read from the runs, so a cancel or a SOAK-4c withdrawal discards it by itself.
"""

from __future__ import annotations

from rollout_common.commands import Wait
from rollout_common.gates import GatePosition
from rollout_common.status import StageReason, StageState, WaitRule
from rollout_common.window import from_epoch
from rollout_planner.engine.model import TRACK_INDEXES, EngineState, GateRec, Offer, Run, StageRec
from rollout_planner.engine.runs import transition

_REASONS = {GatePosition.BEFORE: StageReason.APPROVAL_BEFORE, GatePosition.AFTER: StageReason.APPROVAL_AFTER}


def hold_before(state: EngineState, stage: StageRec, run: Run, offer: Offer) -> bool:
    """A version reached a stage whose `before` gate is not approved: the run waits, keeping its offer."""
    if not _holds(state, stage, run, GatePosition.BEFORE):
        return False
    run.held_offer = offer  # nothing is targeted at it before the approval
    return True


def hold_after(state: EngineState, run: Run) -> bool:
    """A soak ended at a stage whose `after` gate is not approved: the run waits, qualifying nothing."""
    return _holds(state, state.stages[run.stage], run, GatePosition.AFTER)


def _holds(state: EngineState, stage: StageRec, run: Run, position: GatePosition) -> bool:
    if not stage.spec.approval.requires(position):
        return False
    key = (run.rollout_id, stage.spec.name, position)
    gate = state.gates.get(key)
    if gate is None:
        gate = state.gates[key] = GateRec(reached_at=state.now)
    if gate.approved_at is not None:
        return False
    transition(
        state,
        run,
        StageState.AWAITING_APPROVAL,
        _REASONS[position],
        detail=waiting_text(gate, stage, position),
        gate=position,
    )
    return True


def position_of(run: Run) -> GatePosition:
    """Which gate a run in AWAITING_APPROVAL waits at: one holding an offer has not started yet."""
    return GatePosition.BEFORE if run.held_offer is not None else GatePosition.AFTER


def waiting_runs(state: EngineState, stage: StageRec, rollout_id: str, position: GatePosition) -> list[Run]:
    runs = [stage.runs[track].get(rollout_id) for track in TRACK_INDEXES]
    return [
        run
        for run in runs
        if run is not None and run.state is StageState.AWAITING_APPROVAL and position_of(run) is position
    ]


def record_approval(gate: GateRec, *, now: float, by: str | None, comment: str | None) -> None:
    gate.approved_at = now
    gate.approved_by = by
    gate.comment = comment


def waiting_text(gate: GateRec, stage: StageRec, position: GatePosition) -> str:
    return f"the {position.value} approval of stage {stage.spec.name}, waiting since {_at(gate.reached_at)} (CHK-1)"


def approved_text(gate: GateRec, stage: StageRec, position: GatePosition) -> str:
    by = gate.approved_by or "an unnamed approver"
    said = f" ({gate.comment})" if gate.comment else ""
    when = _at(gate.approved_at or 0.0)
    return f"the {position.value} approval of stage {stage.spec.name} given by {by} at {when}{said} (CHK-1)"


def _at(epoch: float) -> str:
    return from_epoch(epoch).isoformat()


def approval_waits(state: EngineState, stage: StageRec, track: int) -> list[Wait]:
    """STAT-5: a track held at a gate says which gate and since when (status calls only)."""
    waits = []
    for run in stage.runs[track].values():
        if run.state is not StageState.AWAITING_APPROVAL:
            continue
        position = position_of(run)
        gate = state.gates[(run.rollout_id, stage.spec.name, position)]
        waits.append(
            Wait(
                rule=WaitRule.CHK_1_APPROVAL.value,
                message=f"rollout {run.rollout_id} waits for {waiting_text(gate, stage, position)}",
                numbers={"rollout": run.rollout_id, "gate": position.value, "since": gate.reached_at},
            )
        )
    return waits


def gate_views(state: EngineState, stage: StageRec) -> list[dict[str, object]]:
    """STAT-5, OPS-3: every gate of the stage some rollout reached, since when, who approved it when."""
    return [
        {
            "rollout": rollout_id,
            "gate": position.value,
            "waitingSince": gate.reached_at,
            "approvedAt": gate.approved_at,
            "approvedBy": gate.approved_by,
            "comment": gate.comment,
        }
        for (rollout_id, name, position), gate in state.gates.items()
        if name == stage.spec.name
    ]
