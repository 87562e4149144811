"""CHK-2 in the simulator: `simulation.metrics` give each query's value over time, each running
series is evaluated at its start and every interval on the simulated clock, and the report lists
every evaluation as FORMAT's `checks` ({t, stage, check, value, result})."""

from __future__ import annotations

from pathlib import Path

from rollout_planner.simulation.runner import simulate
from rollout_planner.simulation.scenario import load_scenario

SCENARIOS = Path(__file__).parent.parent / "scenarios"


def _evaluations(name: str) -> list[tuple[float, str, str, float | None, str]]:
    report = simulate(load_scenario(SCENARIOS / name)).as_json()
    return [(c["t"], c["stage"], c["check"], c["value"], c["result"]) for c in report["checks"]]


def test_chk_2_the_report_lists_each_evaluation_and_no_data_is_inconclusive() -> None:
    assert _evaluations("chk2-inconclusive-halts-the-stage.yaml") == [
        (0.0, "prod", "errors", 0.002, "passed"),
        (300.0, "prod", "errors", 0.002, "passed"),
        (600.0, "prod", "errors", None, "inconclusive"),
        (900.0, "prod", "errors", None, "inconclusive"),
        (1200.0, "prod", "errors", None, "inconclusive"),  # the halt ends the series: no more
    ]


def test_chk_2_a_halt_ends_the_series_and_the_resume_starts_a_new_one_at_once() -> None:
    times = [t for t, *_ in _evaluations("chk2-check-failed-halts-then-resume-soaks-again.yaml")]
    # every 10m from 0s until the halt at 1h10m; again from the resume at 2h until both complete at 3h
    assert times == [float(t) for t in [*range(0, 4201, 600), *range(7200, 10801, 600)]]


def test_chk_2_a_scenario_without_checks_reports_exactly_as_before() -> None:
    report = simulate(load_scenario(SCENARIOS / "chk1-approval-before-and-after.yaml")).as_json()
    assert "checks" not in report
