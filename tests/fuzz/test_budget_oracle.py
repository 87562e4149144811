"""The oracle's CHK-4 point: a report whose batch starts an upgrade within the track's disruption
budget is a failure, with the numbers; the engine's own report of the same scenario is not."""

from __future__ import annotations

import copy
from pathlib import Path

from budget_oracle import budget_problems

from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "chk4-patch-and-minor-intervals.yaml"


def test_chk_4_the_engines_report_keeps_every_budget() -> None:
    scenario = load_scenario(SCENARIO)
    assert budget_problems(scenario, Simulator(scenario).run().as_json()) == []


def test_chk_4_a_batch_inside_a_budget_is_a_failure_naming_the_cluster_and_the_interval() -> None:
    scenario = load_scenario(SCENARIO)
    report = Simulator(scenario).run().as_json()
    early = copy.deepcopy(report)
    (p01,) = [b for b in early["batches"] if b["clusters"] == ["p-01"] and b["track"] == "controlPlane"]
    p01["t"] = 6 * 3600.0  # six hours into the 24h patch budget that ends at 12h
    early["batches"].sort(key=lambda b: b["t"])
    assert budget_problems(scenario, early) == [
        "budget: CHK-4: p-01/controlPlane started at t=21600.0 toward 1.31.13-gke.1023000, 64800 s after its "
        "last upgrade; the patch interval is 86400 s"
    ]
