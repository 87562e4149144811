"""CHK-2: applying a check's result: the latest value, the counts in a row, halting, releasing a soak.

Results are applied like readiness (BUS-7): only one of a running series, observed at or after the
series started and newer than the newest applied for the check; anything else changes nothing.
"""

from __future__ import annotations

from rollout_common.check_results import CheckOutcome, CheckResult
from rollout_common.status import StageReason, StageState
from rollout_planner.engine.gates.checks import check_named, describe, soak_held
from rollout_planner.engine.lifecycle import complete
from rollout_planner.engine.model import TRACK_INDEXES, CheckRec, EngineState, StageRec
from rollout_planner.engine.runs import transition

_HALTED_FROM = (StageState.IN_PROGRESS, StageState.SOAKING, StageState.FORCED_SOAKING)


def apply_check_result(state: EngineState, event: CheckResult) -> None:
    stage = state.stage_by_name.get(event.stage)
    check = None if stage is None else check_named(stage, event.check)
    rec = state.checks.get((event.rollout_id, event.stage, event.check))
    if stage is None or check is None or rec is None or not _applies(rec, event.observed_at):
        return
    rec.observed_at = event.observed_at
    rec.outcome = event.outcome
    rec.value = event.value
    # counts are "in a row": any other outcome ends a row
    rec.failed = rec.failed + 1 if event.outcome is CheckOutcome.FAILED else 0
    rec.inconclusive = rec.inconclusive + 1 if event.outcome is CheckOutcome.INCONCLUSIVE else 0
    if rec.failed > check.failure_limit:
        limit = f"{rec.failed} failed in a row, failureLimit {check.failure_limit}"
        _halt(state, stage, event.rollout_id, StageReason.CHECK_FAILED, detail=f"{describe(check, rec)}; {limit}")
    elif rec.inconclusive > check.inconclusive_limit:
        limit = f"{rec.inconclusive} inconclusive in a row, inconclusiveLimit {check.inconclusive_limit}"
        said = f"{describe(check, rec)}: {event.reason}; {limit}"
        _halt(state, stage, event.rollout_id, StageReason.CHECK_INCONCLUSIVE, detail=said)
    elif event.outcome is CheckOutcome.PASSED:
        _release(state, stage, event.rollout_id)


def _applies(rec: CheckRec, observed_at: float) -> bool:
    if rec.since is None or observed_at < rec.since:
        return False
    return rec.observed_at is None or observed_at > rec.observed_at


def _halt(state: EngineState, stage: StageRec, rollout_id: str, reason: StageReason, *, detail: str) -> None:
    """The rollout halts at this stage: running upgrades finish, nothing more goes out, nothing qualifies."""
    for track in TRACK_INDEXES:
        run = stage.runs[track].get(rollout_id)
        if run is not None and run.state in _HALTED_FROM:
            transition(state, run, StageState.PAUSED, reason, detail=f"{detail} (CHK-2)")
    state.dirty.add(stage.index)


def _release(state: EngineState, stage: StageRec, rollout_id: str) -> None:
    """A pass may open the stage's next batch, or end a soak whose time has elapsed."""
    state.dirty.add(stage.index)
    for track in TRACK_INDEXES:
        run = stage.runs[track].get(rollout_id)
        if run is None or not run.soaking or run.soak_end is None or run.soak_end > state.now:
            continue
        if soak_held(state, run) is None:
            complete(state, run)
