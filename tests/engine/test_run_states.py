"""STAT-2: a run's life is one state machine; a move outside its table is an invariant broken, named
by rule and stage, and the audit reports a run whose last move the table does not allow."""

from __future__ import annotations

import pytest
from enginekit import CP, MIN, V31, Driver, cluster, sequence, stage

from rollout_common.status import StageReason, StageState
from rollout_planner.engine.audit import audit
from rollout_planner.engine.errors import EngineInvariantError
from rollout_planner.engine.runs import ALLOWED, transition


def soaked() -> Driver:
    d = Driver(sequence(stage("a", soak="0d")), [cluster("a-1")])
    d.start(V31, (CP,))
    d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    return d


def test_stat_2_every_state_has_a_row_and_ended_runs_never_move() -> None:
    assert set(ALLOWED) == set(StageState)
    assert ALLOWED[StageState.COMPLETE] == frozenset()
    assert ALLOWED[StageState.CANCELLED] == frozenset()
    assert StageState.SOAKING not in ALLOWED[StageState.STUCK]  # SOAK-4b: STUCK never soaks


def test_stat_2_a_move_outside_the_table_raises_naming_rule_and_stage() -> None:
    d = soaked()
    run = d.state.stages[0].runs[0]["main-1"]
    assert run.state is StageState.COMPLETE
    with pytest.raises(EngineInvariantError) as caught:
        transition(d.state, run, StageState.IN_PROGRESS, StageReason.RESUMED)
    assert str(caught.value) == (
        "STAT-2: run of main-1 on track controlPlane cannot go from COMPLETE to IN_PROGRESS (RESUMED) (stage a)"
    )


def test_stat_2_the_audit_reports_a_run_moved_outside_the_table() -> None:
    d = soaked()
    run = d.state.stages[0].runs[0]["main-1"]
    assert audit(d.state) == []
    run.prior, run.state = StageState.COMPLETE, StageState.IN_PROGRESS  # as a stray assignment would
    assert audit(d.state) == ["a/0/main-1: moved COMPLETE -> IN_PROGRESS, which the run table does not allow"]
