"""Which checks are due (pure, `now` passed in): CHK-2's series per rollout, stage and check.

A series runs while some track of the rollout at the stage is in a phase the check guards. It
evaluates at once when it starts, then every `interval` after its last evaluation; when it ends,
its last time is dropped (`live_series`), so the next series again evaluates at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rollout_common.checks import Check, CheckPhase


@dataclass(frozen=True, slots=True)
class GuardedStage:
    """A rollout at a stage with checks, and the phases its tracks are in now (the planner says)."""

    rollout_id: str
    stage: str
    phases: frozenset[CheckPhase]
    checks: tuple[Check, ...]


@dataclass(frozen=True, slots=True, order=True)
class SeriesKey:
    rollout_id: str
    stage: str
    check: str


@dataclass(frozen=True, slots=True)
class DueCheck:
    key: SeriesKey
    check: Check


def _running(guarded: Iterable[GuardedStage]) -> Iterable[tuple[SeriesKey, Check]]:
    for stage in guarded:
        for check in stage.checks:
            if any(check.guards(phase) for phase in stage.phases):
                yield SeriesKey(stage.rollout_id, stage.stage, check.name), check


def live_series(guarded: Iterable[GuardedStage], last_evaluated: Mapping[SeriesKey, float]) -> dict[SeriesKey, float]:
    """The last evaluation times of the series still running; the others have ended."""
    running = {key for key, _ in _running(guarded)}
    return {key: at for key, at in last_evaluated.items() if key in running}


def due_checks(
    guarded: Iterable[GuardedStage], last_evaluated: Mapping[SeriesKey, float], *, now: float
) -> list[DueCheck]:
    """The checks to evaluate at `now`, in (rollout, stage, check) order."""
    due = [
        DueCheck(key, check)
        for key, check in _running(guarded)
        if key not in last_evaluated or now >= last_evaluated[key] + check.interval
    ]
    return sorted(due, key=lambda item: item.key)


def next_due_at(
    guarded: Iterable[GuardedStage], last_evaluated: Mapping[SeriesKey, float], *, now: float
) -> float | None:
    """When to look again: `now` while some check is due, else when the next falls due; None when
    no series runs (nothing to wait for until the planner says otherwise)."""
    times = [last_evaluated[key] + check.interval if key in last_evaluated else now for key, check in _running(guarded)]
    return max(min(times), now) if times else None
