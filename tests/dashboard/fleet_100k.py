"""A 100,000-cluster status snapshot built by the simulator: the demo fleet scaled up, with trouble.

Every 10th prod cluster's control-plane upgrade fails and every 20th staging cluster is offline
for a while, so the attention list holds thousands of rows for the filter and the pager.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

from rollout_adapters.web_dashboard import ClusterRow
from rollout_cli.demo_scenario import scale_fleet
from rollout_planner.service.attention_rows import attention_rows
from rollout_planner.service.status_document import status_document
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario

CLUSTERS = 100_000
AT_S = 12 * 3600.0  # prod under way: GATE-1 and GATE-3 holds, hundreds of failed upgrades
MAX_NEW = 2000


def scenario() -> Scenario:
    raw = yaml.safe_load(resources.files("rollout_cli").joinpath("scenarios/demo.yaml").read_text(encoding="utf-8"))
    scaled = scale_fleet(raw, clusters=CLUSTERS)
    counts = {group["name"].split("-{")[0]: group["count"] for group in scaled["generate"]}
    failures = [{"cluster": f"prod-{i:03d}", "track": "controlPlane"} for i in range(3, counts["prod"], 10)]
    outages = [{"cluster": f"stg-{i:03d}", "from": "1h", "until": "30d"} for i in range(0, counts["stg"], 20)]
    # batches sized for the fleet (the demo's maxNew 10 and 25 would take weeks at this size)
    sequence = dict(scaled["sequence"])
    sequence["stages"] = [_with_max_new(stage, MAX_NEW) for stage in sequence["stages"]]
    simulation: dict[str, Any] = dict(scaled["simulation"])
    simulation["failures"] = simulation["failures"] + failures
    simulation["notReady"] = simulation["notReady"] + outages
    return Scenario.model_validate({**scaled, "sequence": sequence, "simulation": simulation})


def _with_max_new(stage: dict[str, Any], max_new: int) -> dict[str, Any]:
    strategy = stage.get("rolloutStrategy")
    return stage if strategy is None else {**stage, "rolloutStrategy": {**strategy, "maxNew": max_new}}


def snapshot() -> tuple[dict[str, Any], list[ClusterRow]]:
    sim = Simulator(scenario())
    sim.start()
    while (t := sim.next_time()) is not None and t <= AT_S:
        sim.step()
    return status_document(sim.state, batch=len(sim.report.batches)), attention_rows(sim.state)
