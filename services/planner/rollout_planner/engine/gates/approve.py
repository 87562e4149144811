"""The `approve` operator command (CHK-1, OPS-3): open a waiting gate, or say why not.

Accepted only while the gate waits; approving it again is accepted as `ALREADY_APPROVED` and
changes nothing (a redelivered or repeated approval, BUS-3); a gate not reached yet cannot be
approved in advance (an approval judges what happened).
"""

from __future__ import annotations

from rollout_common.events import OperatorCommand
from rollout_common.gates import GatePosition
from rollout_common.status import StageReason
from rollout_planner.engine.gates.approvals import approved_text, record_approval, waiting_runs
from rollout_planner.engine.lifecycle import admit, finish, update_rollout
from rollout_planner.engine.model import EngineState, GateRec, RolloutRec, StageRec

ALREADY_APPROVED = "ALREADY_APPROVED"


def approve(state: EngineState, command: OperatorCommand, rollouts: list[RolloutRec]) -> tuple[bool, str]:
    """Open the named gate for every rollout given that waits at it: (accepted, reason)."""
    stage = state.stage_by_name.get(command.stage or "")
    if stage is None:
        return False, f"unknown stage {command.stage!r}"
    position = command.gate
    if position is None:
        return False, "approve names its gate: before or after (CHK-1)"
    if not stage.spec.approval.requires(position):
        return False, f"stage {stage.spec.name} has no {position.value} approval gate (CHK-1)"
    waiting = [r for r in rollouts if waiting_runs(state, stage, r.id, position)]
    if waiting:
        for rollout in waiting:
            _open(state, stage, rollout, command, position)
        by = command.issued_by or "an unnamed approver"
        names = ", ".join(r.id for r in waiting)
        return True, f"the {position.value} gate of stage {stage.spec.name} approved by {by} for {names}"
    if any(_approved(state, stage, r, position) for r in rollouts):
        return True, ALREADY_APPROVED
    named = command.rollout_id or "any active rollout"
    return False, (
        f"the {position.value} gate of stage {stage.spec.name} is not waiting for {named}; "
        "a gate is approved only once reached (CHK-1)"
    )


def _approved(state: EngineState, stage: StageRec, rollout: RolloutRec, position: GatePosition) -> bool:
    gate = state.gates.get((rollout.id, stage.spec.name, position))
    return gate is not None and gate.approved_at is not None


def _open(
    state: EngineState, stage: StageRec, rollout: RolloutRec, command: OperatorCommand, position: GatePosition
) -> None:
    gate: GateRec = state.gates[(rollout.id, stage.spec.name, position)]
    record_approval(gate, now=state.now, by=command.issued_by, comment=command.comment)
    runs = waiting_runs(state, stage, rollout.id, position)
    if position is GatePosition.BEFORE:
        admit(state, stage, [(run, run.held_offer) for run in runs if run.held_offer is not None])
    else:
        detail = approved_text(gate, stage, position)
        for run in runs:  # one approval opens the gate for both tracks
            finish(state, run, StageReason.APPROVED, detail=detail)
    update_rollout(state, rollout.id)
