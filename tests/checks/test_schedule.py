"""CHK-2's evaluation series (FORMAT.md): a check of a rollout at a stage evaluates at once when a
track there enters a phase it guards while none was in one, then every `interval` while one stays
in such a phase, and its series ends when none does. The schedule is pure, `now` passed in."""

from __future__ import annotations

from rollout_common.checks import Check, CheckPhase
from rollout_health.checks import DueCheck, GuardedStage, SeriesKey, due_checks, live_series, next_due_at

PROGRESS, SOAK = CheckPhase.PROGRESS, CheckPhase.SOAK
ERRORS = Check(name="errors", query="e", success_condition="result < 0.01", interval=300, phases=(PROGRESS, SOAK))
LATENCY = Check(name="latency", query="l", success_condition="result < 0.3", interval=60, phases=(SOAK,))


def _stage(*phases: CheckPhase, rollout: str = "r-1", stage: str = "prod") -> GuardedStage:
    return GuardedStage(rollout_id=rollout, stage=stage, phases=frozenset(phases), checks=(ERRORS, LATENCY))


def _keys(due: list[DueCheck]) -> list[tuple[str, str, str]]:
    return [(d.key.rollout_id, d.key.stage, d.key.check) for d in due]


def test_chk2_a_series_evaluates_at_once_then_every_interval() -> None:
    guarded = [_stage(PROGRESS)]
    assert _keys(due_checks(guarded, {}, now=1000)) == [("r-1", "prod", "errors")]
    last = {SeriesKey("r-1", "prod", "errors"): 1000.0}
    assert due_checks(guarded, last, now=1299.9) == []
    assert next_due_at(guarded, last, now=1100) == 1300.0
    assert next_due_at(guarded, last, now=1400) == 1400.0  # overdue: at once
    assert _keys(due_checks(guarded, last, now=1300)) == [("r-1", "prod", "errors")]


def test_chk2_only_checks_guarding_a_phase_a_track_is_in() -> None:
    """`latency` guards soak only: it starts with the soak, `errors` goes on (progress and soak)."""
    last = {SeriesKey("r-1", "prod", "errors"): 1000.0}
    soaking = [_stage(SOAK)]
    assert _keys(due_checks(soaking, last, now=1100)) == [("r-1", "prod", "latency")]
    assert _keys(due_checks([_stage(PROGRESS, SOAK)], {}, now=0)) == [
        ("r-1", "prod", "errors"),
        ("r-1", "prod", "latency"),
    ]
    assert due_checks([_stage()], {}, now=0) == []
    assert next_due_at([_stage()], {}, now=0) is None


def test_chk2_a_series_that_ended_starts_afresh() -> None:
    """No track in a guarded phase ends the series; the next one evaluates at once, not an interval
    after the old series' last evaluation."""
    last = {SeriesKey("r-1", "prod", "errors"): 1000.0, SeriesKey("r-1", "prod", "latency"): 1000.0}
    kept = live_series([_stage(PROGRESS)], last)
    assert kept == {SeriesKey("r-1", "prod", "errors"): 1000.0}
    assert _keys(due_checks([_stage(PROGRESS, SOAK)], kept, now=1010)) == [("r-1", "prod", "latency")]


def test_chk2_series_are_per_rollout_and_stage_in_a_stable_order() -> None:
    guarded = [_stage(SOAK, rollout="r-2"), _stage(PROGRESS, rollout="r-1", stage="canary"), _stage(SOAK)]
    assert _keys(due_checks(guarded, {SeriesKey("r-1", "prod", "latency"): 950.0}, now=1000)) == [
        ("r-1", "canary", "errors"),
        ("r-1", "prod", "errors"),
        # ("r-1", "prod", "latency") evaluated at 950: due at 1010
        ("r-2", "prod", "errors"),
        ("r-2", "prod", "latency"),
    ]
    assert next_due_at(guarded, {}, now=1000) == 1000.0  # a series not evaluated yet: now
