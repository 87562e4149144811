"""Wall and CPU time to simulate a whole staged rollout of a large fleet in the embedded simulator.

Stages use the default rolloutStrategy (maxUnavailable 100%, autoPartitionSize 25%, maxNew 50); upgrades
take 10m (control plane) and 30m (nodes); every stage soaks 1d. The time spent inside `decide` is
measured separately, so the time per decision can be compared between fleet sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from rollout_common.commands import Command
from rollout_common.events import Event
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario

# share of the fleet in each stage, canaries first
SHARES = {5: (0.01, 0.04, 0.15, 0.30, 0.50), 3: (0.05, 0.25, 0.70)}


# The windows variant: every cluster holds an hourly 30-minute window defined years before the
# scenario starts (2026-01-01), so batches start only in the first half of each hour (WIN-1).
OLD_WINDOW = {"start": "2020-01-01T00:00:00Z", "duration": "30m", "recurrence": "FREQ=HOURLY"}


def scenario(clusters: int, stages: int, *, windows: bool = False) -> Scenario:
    doc = scenario_doc(clusters, stages)
    if windows:
        for template in doc["generate"]:
            template["maintenanceWindow"] = OLD_WINDOW
    return Scenario.model_validate(doc)


def scenario_doc(clusters: int, stages: int) -> dict[str, Any]:
    """The scenario as its YAML document would hold it (other benchmarks vary it)."""
    shares = SHARES[stages]
    counts = [max(1, round(clusters * s)) for s in shares[:-1]]
    counts.append(clusters - sum(counts))
    names = [f"s{i + 1}" for i in range(stages)]
    return {
        "name": f"bench-{clusters}-{stages}",
        "generate": [
            {"count": n, "name": f"{stage}-{{i:06d}}", "labels": {"stage": stage}, "version": "1.30.5-gke.1000"}
            for stage, n in zip(names, counts, strict=True)
        ],
        "sequence": {
            "name": "bench",
            "channel": "regular",
            "stages": [
                {"name": stage, "clusterSelector": {"matchLabels": {"stage": stage}}, "soak": "1d"} for stage in names
            ],
        },
        "simulation": {"upgradeDuration": {"controlPlane": "10m", "nodes": "30m"}},
        "events": [{"at": "0s", "releaseTarget": {"channel": "regular", "targets": {"1.30": "1.31.13-gke.1023000"}}}],
        "until": "30d",
    }


class TimedSimulator(Simulator):
    """The simulator, with the time spent inside the engine's `decide` added up."""

    decide_s = 0.0
    events_in = 0

    def _decide(self, events: list[Event], t: float) -> list[Command]:
        self.events_in += len(events)
        start = time.perf_counter()
        try:
            return super()._decide(events, t)
        finally:
            self.decide_s += time.perf_counter() - start


@dataclass
class RolloutResult:
    clusters: int
    stages: int
    windows: bool
    wall_s: float
    cpu_s: float
    setup_s: float
    decide_s: float
    decisions: int
    us_per_decision: float
    events: int
    us_per_event: float
    batches: int
    simulated_days: float
    complete: bool


def measure_rollout(clusters: int, stages: int, *, windows: bool = False) -> RolloutResult:
    spec = scenario(clusters, stages, windows=windows)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    sim = TimedSimulator(spec)  # builds the fleet, the plan report and the engine state
    setup_s = time.perf_counter() - wall0
    report = sim.run()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finished = [t["t"] for t in report.transitions if t["state"] == "COMPLETE"]
    stages_done = report.final["stages"].values()
    return RolloutResult(
        clusters=clusters,
        stages=stages,
        windows=windows,
        wall_s=wall,
        cpu_s=cpu,
        setup_s=setup_s,
        decide_s=sim.decide_s,
        decisions=report.decisions,
        us_per_decision=sim.decide_s / max(1, report.decisions) * 1e6,
        events=sim.events_in,
        us_per_event=sim.decide_s / max(1, sim.events_in) * 1e6,
        batches=len(report.batches),
        simulated_days=(max(finished) if finished else 0.0) / 86400.0,
        complete=all(s["controlPlane"] == "COMPLETE" and s["nodes"] == "COMPLETE" for s in stages_done),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--stages", type=int, choices=sorted(SHARES), default=5)
    parser.add_argument("--windows", action="store_true", help="every cluster with an hourly window from 2020")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure_rollout(args.clusters, args.stages, windows=args.windows)
    out: dict[str, Any] = asdict(result)
    if args.json:
        json.dump(out, sys.stdout)
    else:
        print(out)


if __name__ == "__main__":
    main()
