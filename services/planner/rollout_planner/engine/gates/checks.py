"""CHK-2 metric checks: their series, and whether a check holds a batch or a soak's end.

A check of a rollout at a stage forms a series while some track of the rollout there is in a
phase the check guards (`progress`: IN_PROGRESS; `soak`: SOAKING, FORCED_SOAKING). The engine
announces each series' start and end (`CheckSeries`); the shell evaluates the check at the start
and every interval after it, and hands the results back (`check_result` events).
"""

from __future__ import annotations

from collections.abc import Iterable

from rollout_common.check_results import CheckOutcome
from rollout_common.checks import Check, CheckPhase
from rollout_common.commands import CheckSeries
from rollout_common.status import StageReason, StageState, WaitRule
from rollout_common.window import from_epoch
from rollout_planner.engine.model import TRACK_INDEXES, CheckKey, CheckRec, EngineState, Run, StageRec

_PHASE_OF = {
    StageState.IN_PROGRESS: CheckPhase.PROGRESS,
    StageState.SOAKING: CheckPhase.SOAK,
    StageState.FORCED_SOAKING: CheckPhase.SOAK,
}
HALT_REASONS = frozenset((StageReason.CHECK_FAILED.value, StageReason.CHECK_INCONCLUSIVE.value))
# a result is fresh while it was observed less than this many intervals ago
_FRESH_INTERVALS = 2


def halted(run: Run) -> bool:
    """A run a check halted (PAUSED with CHECK_FAILED or CHECK_INCONCLUSIVE): only a resume moves it."""
    return run.state is StageState.PAUSED and run.reason in HALT_REASONS


def phases_of(state: EngineState, stage: StageRec, rollout_id: str) -> frozenset[CheckPhase]:
    """The phases the rollout's tracks at the stage are in now."""
    found = set()
    for track in TRACK_INDEXES:
        run = stage.runs[track].get(rollout_id)
        if run is not None and run.state in _PHASE_OF:
            found.add(_PHASE_OF[run.state])
    return frozenset(found)


def sync_series(state: EngineState, rollout_ids: Iterable[str]) -> None:
    """Start the series of checks whose phase a track entered while none was in one, end those whose
    phase no track is in any more (a removed check's too), and announce each change."""
    for rollout_id in sorted(set(rollout_ids), key=lambda rid: state.rollouts[rid].number):
        for stage in state.stages:
            _sync_stage(state, stage, rollout_id)
        _end_removed(state, rollout_id)


def _sync_stage(state: EngineState, stage: StageRec, rollout_id: str) -> None:
    if not stage.spec.checks:
        return
    phases = phases_of(state, stage, rollout_id)
    for check in stage.spec.checks:
        key = (rollout_id, stage.spec.name, check.name)
        rec = state.checks.get(key)
        guarded = any(check.guards(phase) for phase in phases)
        if guarded and (rec is None or rec.since is None):
            rec = state.checks.setdefault(key, CheckRec())
            _start(state, key, rec, check)
        elif not guarded and rec is not None and rec.since is not None:
            _end(state, key, rec)


def _end_removed(state: EngineState, rollout_id: str) -> None:
    """A sequence change that removed a check (or its stage) ends the check's running series."""
    for key, rec in state.checks.items():
        if key[0] != rollout_id or rec.since is None:
            continue
        stage = state.stage_by_name.get(key[1])
        if stage is None or check_named(stage, key[2]) is None:
            _end(state, key, rec)


def _start(state: EngineState, key: CheckKey, rec: CheckRec, check: Check) -> None:
    # a new series judges afresh: the previous series' result and counts say nothing about it
    rec.since = state.now
    rec.interval = check.interval
    rec.outcome = None
    rec.value = None
    rec.failed = 0
    rec.inconclusive = 0
    _announce(state, key, running=True, since=state.now, interval=check.interval)


def _end(state: EngineState, key: CheckKey, rec: CheckRec) -> None:
    since = rec.since if rec.since is not None else state.now
    rec.since = None
    _announce(state, key, running=False, since=since, interval=rec.interval)


def _announce(state: EngineState, key: CheckKey, *, running: bool, since: float, interval: float) -> None:
    rollout_id, stage, check = key
    state.emit(
        CheckSeries(rollout_id=rollout_id, stage=stage, check=check, running=running, since=since, interval=interval)
    )


def check_named(stage: StageRec, name: str) -> Check | None:
    return next((c for c in stage.spec.checks if c.name == name), None)


def passed_fresh(state: EngineState, rec: CheckRec | None, check: Check) -> bool:
    """The series' latest result passed and was observed less than two intervals ago."""
    if rec is None or rec.since is None or rec.outcome is not CheckOutcome.PASSED or rec.observed_at is None:
        return False
    return state.now - rec.observed_at < _FRESH_INTERVALS * check.interval


def holding(state: EngineState, stage: StageRec, rollout_id: str, phase: CheckPhase) -> tuple[Check, CheckRec] | None:
    """The first check guarding `phase` of the rollout at the stage that is not passed and fresh."""
    for check in stage.spec.checks:
        if not check.guards(phase):
            continue
        rec = state.checks.get((rollout_id, stage.spec.name, check.name))
        if not passed_fresh(state, rec, check):
            return check, rec or CheckRec()
    return None


def soak_held(state: EngineState, run: Run) -> tuple[Check, CheckRec] | None:
    """A soak check that keeps the soak from ending now (the forced soak included: it skips none)."""
    return holding(state, state.stages[run.stage], run.rollout_id, CheckPhase.SOAK)


def describe(check: Check, rec: CheckRec) -> str:
    """Which check, its latest value and since when, against which condition (STAT-5)."""
    if rec.outcome is None or rec.observed_at is None:
        seen = "no result yet" if rec.since is None else f"no result since {_at(rec.since)}"
    else:
        value = "no value" if rec.value is None else f"{rec.value:g}"
        seen = f"{rec.outcome.value} with {value} at {_at(rec.observed_at)}"
    condition = f"successCondition {check.success_condition}"
    if check.failure_condition is not None:
        condition += f", failureCondition {check.failure_condition}"
    return f"check {check.name}: {seen} ({condition})"


def check_wait(state: EngineState, stage: StageRec, run: Run, held: tuple[Check, CheckRec]) -> dict[str, object]:
    """The numbers of a wait on a check: rollout, check, latest outcome, value, observed when."""
    check, rec = held
    return {
        "rollout": run.rollout_id,
        "check": check.name,
        "outcome": None if rec.outcome is None else rec.outcome.value,
        "value": rec.value,
        "observedAt": rec.observed_at,
        "since": rec.since,
        "successCondition": check.success_condition,
        "text": describe(check, rec),
    }


def check_waits(state: EngineState, stage: StageRec, track: int) -> list[tuple[str, str | None, dict[str, object]]]:
    """STAT-5: an IN_PROGRESS track held by a progress check, a soak past its time held by a soak check."""
    out: list[tuple[str, str | None, dict[str, object]]] = []
    if not stage.spec.checks:
        return out
    for run in stage.runs[track].values():
        held = None
        if run.state is StageState.IN_PROGRESS and run.remaining > 0:
            held = holding(state, stage, run.rollout_id, CheckPhase.PROGRESS)
        elif run.soaking and run.soak_end is not None and run.soak_end <= state.now:
            held = soak_held(state, run)
        if held is not None:
            out.append((WaitRule.CHK_2_CHECK.value, None, check_wait(state, stage, run, held)))
    return out


def _at(epoch: float) -> str:
    return from_epoch(epoch).isoformat()


def check_views(state: EngineState, stage: StageRec) -> list[dict[str, object]]:
    """STAT-5: every check of the stage some rollout evaluated: its series, latest result, counts."""
    out: list[dict[str, object]] = []
    for (rollout_id, name, check_name), rec in state.checks.items():
        check = check_named(stage, check_name) if name == stage.spec.name else None
        if check is None:
            continue
        out.append(
            {
                "rollout": rollout_id,
                "check": check_name,
                "running": rec.since is not None,
                "since": rec.since,
                "outcome": None if rec.outcome is None else rec.outcome.value,
                "value": rec.value,
                "observedAt": rec.observed_at,
                "failedInARow": rec.failed,
                "inconclusiveInARow": rec.inconclusive,
                "successCondition": check.success_condition,
                "failureCondition": check.failure_condition,
                "interval": check.interval,
                "failureLimit": check.failure_limit,
                "inconclusiveLimit": check.inconclusive_limit,
                "text": describe(check, rec),
            }
        )
    return out
