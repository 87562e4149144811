"""A status document of a stage halted by a metric check (CHK-2), for the screens that draw it.

The planner's `stage_view` lists a stage's checks under `checks` (series, latest result, counts,
conditions) and a halted track is PAUSED with reason CHECK_FAILED. The rest of the document is a
real one: prod of the gate6 scenario after its control planes halted at 10m (2026-01-01 00:10 UTC).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollout_planner.service.status_document import status_document
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import load_scenario

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "gate6-max-failures.yaml"
HALTED_AT = 1_767_225_900.0  # 2026-01-01 00:05 UTC: the latest results, before the halt at 00:10


def _check(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "rollout": "main-1",
        "check": name,
        "running": False,
        "since": 1_767_225_600.0,
        "interval": 300.0,
        "successCondition": "result < 0.01",
        "failureCondition": None,
        "failureLimit": 1,
        "inconclusiveLimit": 2,
        "failedInARow": 0,
        "inconclusiveInARow": 0,
        **fields,
    }


def halted_by_a_check() -> dict[str, Any]:
    sim = Simulator(load_scenario(SCENARIO))
    sim.start()
    while (t := sim.next_time()) is not None and t <= 1800:
        sim.step()
    doc = status_document(sim.state, batch=1)
    (prod,) = doc["stages"]
    prod["tracks"]["controlPlane"]["reason"] = "CHECK_FAILED"
    prod["checks"] = [
        _check(
            "error-rate",
            outcome="failed",
            value=0.07,
            observedAt=HALTED_AT,
            failedInARow=2,
            failureCondition="result > 0.05",
        ),
        _check("p99-latency", outcome="passed", value=0.25, observedAt=HALTED_AT, successCondition="result < 0.5"),
        _check("saturation", outcome=None, value=None, observedAt=None, running=True),
    ]
    return doc
