"""`rollout plan` shows each stage's gates (CHK-1, CHK-3) and the earliest start and finish with them."""

from __future__ import annotations

from pathlib import Path

from rollout_planner.simulation.preview import preview
from rollout_planner.simulation.scenario import load_scenario

SCENARIOS = Path(__file__).parent.parent / "scenarios"


def test_chk_3_plan_shows_the_start_window_and_the_earliest_start_inside_it() -> None:
    plan = preview(load_scenario(SCENARIOS / "chk3-weekly-start-window.yaml"))
    test, prod = plan["stages"]
    assert "gates" not in test  # a stage without gates shows as before
    assert prod["gates"] == {
        "startWindow": {"start": "2026-01-06T09:00:00Z", "duration": 28800.0, "recurrence": "FREQ=WEEKLY;BYDAY=TU"}
    }
    assert prod["timeline"]["controlPlane"] == {
        "earliestStart": "2026-01-06T09:00:00+00:00",
        "earliestFinish": "2026-01-07T09:10:00+00:00",
        "stuck": None,
    }


def test_chk_1_plan_shows_the_approval_gates_and_the_times_the_scripted_approvals_give() -> None:
    plan = preview(load_scenario(SCENARIOS / "chk1-approval-before-and-after.yaml"))
    prod = plan["stages"][1]
    assert prod["gates"] == {"approval": {"before": True, "after": True}}
    assert prod["timeline"]["nodes"] == {
        "earliestStart": "2026-01-07T00:00:00+00:00",
        "earliestFinish": "2026-01-09T00:00:00+00:00",
        "stuck": None,
    }


def test_chk_1_plan_says_which_gate_holds_a_stage_the_scenario_never_approves() -> None:
    scenario = load_scenario(SCENARIOS / "chk1-approval-before-and-after.yaml")
    unapproved = scenario.model_copy(update={"events": scenario.events[:-1]})  # no `after` approval
    prod = preview(unapproved)["stages"][1]
    assert prod["timeline"]["controlPlane"] == {
        "earliestStart": "2026-01-07T00:00:00+00:00",
        "earliestFinish": None,
        "stuck": "soak ended; the version is qualified downstream once approved: the after approval of stage prod, "
        "waiting since 2026-01-08T00:10:00+00:00 (CHK-1)",
    }


def test_chk_2_plan_shows_the_checks_and_the_finish_the_scenario_metrics_give() -> None:
    plan = preview(load_scenario(SCENARIOS / "chk2-soak-check-holds-the-soak-past-its-time.yaml"))
    (prod,) = plan["stages"]
    assert prod["gates"] == {
        "checks": [
            {
                "name": "errors",
                "query": "error_ratio",
                "successCondition": "result < 0.01",
                "interval": 600.0,
                "failureLimit": 10,
                "inconclusiveLimit": 2,
                "phases": ["soak"],
            }
        ]
    }
    # the nodes' soak time ends at 1h40m, on a failure: they finish on the pass at 2h
    assert prod["timeline"]["nodes"]["earliestFinish"] == "2026-01-05T02:00:00+00:00"


def test_chk_2_plan_says_which_check_halts_a_stage() -> None:
    prod = preview(load_scenario(SCENARIOS / "chk2-inconclusive-halts-the-stage.yaml"))["stages"][0]
    assert prod["timeline"]["controlPlane"] == {
        "earliestStart": "2026-01-05T00:00:00+00:00",
        "earliestFinish": None,
        "stuck": "halted by a metric check without a conclusive result: check errors: inconclusive with no value "
        "at 2026-01-05T00:20:00+00:00 (successCondition result < 0.01): the query returned no sample; "
        "3 inconclusive in a row, inconclusiveLimit 2 (CHK-2)",
    }
