"""A run's life (STAT-2): its states, the moves allowed between them, and the one function that moves it.

Every other module asks `transition`; none sets `Run.state` itself. The table is also what the
audit checks after every decision (each run remembers the state it came from).
"""

from __future__ import annotations

from rollout_common.commands import StageTransition
from rollout_common.gates import GatePosition
from rollout_common.status import TRACKS, StageReason, StageState
from rollout_common.version import Version
from rollout_planner.engine.errors import EngineInvariantError
from rollout_planner.engine.model import EngineState, Run

S = StageState

# from -> the states a run may move to. A soaking run may "move" to its own state: an override
# (OPS-2) restarts the announcement with a new end.
ALLOWED: dict[StageState, frozenset[StageState]] = {
    # a run held by its stage's start window stays PENDING and says when it opens (CHK-3)
    # an empty stage with soak checks soaks for no time at once, held by those checks (CHK-2)
    S.PENDING: frozenset(
        {S.PENDING, S.IN_PROGRESS, S.PAUSED, S.STUCK, S.COMPLETE, S.CANCELLED, S.AWAITING_APPROVAL, S.SOAKING}
    ),
    S.IN_PROGRESS: frozenset({S.PAUSED, S.SOAKING, S.FORCED_SOAKING, S.STUCK, S.CANCELLED}),
    S.PAUSED: frozenset({S.IN_PROGRESS, S.SOAKING, S.FORCED_SOAKING, S.STUCK, S.CANCELLED}),
    S.STUCK: frozenset({S.IN_PROGRESS, S.PAUSED, S.CANCELLED}),
    # CHK-2: a check halts a soak (PAUSED); the resume soaks the whole soak again (PAUSED -> SOAKING)
    S.SOAKING: frozenset({S.SOAKING, S.COMPLETE, S.CANCELLED, S.AWAITING_APPROVAL, S.PAUSED}),
    S.FORCED_SOAKING: frozenset({S.FORCED_SOAKING, S.COMPLETE, S.CANCELLED, S.AWAITING_APPROVAL, S.PAUSED}),
    # CHK-1: `before` opens into the moves a version's arrival makes; `after` into COMPLETE. An empty
    # stage approved `before` passes straight on to wait at `after` (its own state again); a closed
    # start window keeps an approved run PENDING (CHK-3).
    S.AWAITING_APPROVAL: frozenset(
        {S.PENDING, S.IN_PROGRESS, S.PAUSED, S.STUCK, S.COMPLETE, S.CANCELLED, S.AWAITING_APPROVAL, S.SOAKING}
    ),
    S.COMPLETE: frozenset(),
    S.CANCELLED: frozenset(),
}

_REASONS = {
    StageReason.VERSION_ARRIVED: "the version reached the stage",
    StageReason.ALL_UPGRADED: "all eligible clusters upgraded",
    StageReason.MAX_UPGRADE_TIME: "not finished within the 30-day maximum upgrade time; soaking anyway",
    StageReason.SOAK_ELAPSED: "soak elapsed; version qualified downstream",
    StageReason.EMPTY_STAGE_PASS_THROUGH: "no clusters in this stage; the version passes through",
    StageReason.EMPTY_FIRST_STAGE: "the first stage has no clusters, so nothing can be qualified downstream",
    StageReason.INCOMPATIBLE_VERSION: "no cluster of the stage is eligible for any qualified version",
    StageReason.SUPERSEDED: "every cluster it still had to upgrade now goes to a newer version",
    StageReason.USER: "paused by an operator",
    StageReason.FAILURE_BUDGET: "too many upgrades failed",
    StageReason.RESUMED: "resumed",
    StageReason.APPROVAL_BEFORE: "the version reached the stage; it starts once approved",
    StageReason.APPROVAL_AFTER: "soak ended; the version is qualified downstream once approved",
    StageReason.APPROVED: "approved",
    StageReason.START_WINDOW: "the version reached the stage; it starts when the stage's start window opens",
    StageReason.CHECK_FAILED: "halted by a failing metric check",
    StageReason.CHECK_INCONCLUSIVE: "halted by a metric check without a conclusive result",
    StageReason.CHECK_HOLDS_SOAK: "held by a metric check",
}


def allowed(old: StageState | None, new: StageState) -> bool:
    """Whether a run may go from `old` to `new` (None: the run was just opened, as PENDING)."""
    return new in ALLOWED[S.PENDING if old is None else old]


def transition(
    state: EngineState,
    run: Run,
    new: StageState,
    reason: StageReason,
    *,
    detail: str = "",
    gate: GatePosition | None = None,
) -> None:
    """Move the run, announce it on the progress stream; a move outside the table is a broken
    invariant. `gate` names the approval gate a run going AWAITING_APPROVAL waits at (CHK-1)."""
    stage = state.stages[run.stage]
    _check_allowed(run, new, reason, stage_name=stage.spec.name)
    run.prior = run.state
    run.state = new
    state.touched_rollouts.add(run.rollout_id)
    run.reason = reason.value
    version = _shown_version(run, new)
    state.emit(
        StageTransition(
            rollout_id=run.rollout_id,
            stage=stage.spec.name,
            track=TRACKS[run.track],
            state=new,
            version=None if version is None else version.text,
            reason=_reason_text(new, reason, detail),
            until=run.soak_end if new in (S.SOAKING, S.FORCED_SOAKING) else None,
            gate=gate,
        )
    )


def _check_allowed(run: Run, new: StageState, reason: StageReason, *, stage_name: str) -> None:
    if not allowed(run.state, new):
        raise EngineInvariantError(
            rule="STAT-2",
            stage=stage_name,
            message=f"run of {run.rollout_id} on track {TRACKS[run.track].value} cannot go from "
            f"{run.state.value} to {new.value} ({reason.value})",
        )


def _shown_version(run: Run, new: StageState) -> Version | None:
    """The version a transition names: the one qualified once the run soaks, else the one it works on."""
    soaked = new in (S.SOAKING, S.FORCED_SOAKING, S.COMPLETE) or (new is S.AWAITING_APPROVAL and run.qualified)
    version = run.qualified if soaked else None
    if version is None:
        version = min(run.working) if run.working else run.offered
    return version


def _reason_text(new: StageState, reason: StageReason, detail: str) -> str:
    said = "cancelled by an operator" if new is S.CANCELLED and reason is StageReason.USER else None
    return (said or _REASONS.get(reason, reason.value)) + (f": {detail}" if detail else "")
