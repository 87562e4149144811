"""Simulating a fleet whose maintenance windows were defined years ago costs what a fresh one costs (WIN-1).

The whole-rollout scenario (3 stages, default strategy), every cluster with an hourly 30-minute
window, once with the window defined on 2020-01-01 and once the day before the scenario starts.
Each simulation runs `repeats` times and the fastest CPU time counts (the machine is shared).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.whole_rollout import scenario_doc
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import DEFAULT_START, Scenario

TARGET_RATIO = 1.5
OLD_START = "2020-01-01T00:00:00Z"
STAGES = 3


@dataclass
class WindowRun:
    window_start: str
    wall_s: float
    cpu_s: float
    decisions: int
    complete: bool


@dataclass
class WindowResult:
    clusters: int
    old: WindowRun
    recent: WindowRun

    @property
    def ratio(self) -> float:
        return self.old.cpu_s / self.recent.cpu_s


def windowed(clusters: int, window_start: str) -> Scenario:
    doc = scenario_doc(clusters, STAGES)
    window = {"start": window_start, "duration": "30m", "recurrence": "FREQ=HOURLY"}
    for template in doc["generate"]:
        template["maintenanceWindow"] = window
    return Scenario.model_validate(doc)


def _run(clusters: int, window_start: str, repeats: int) -> WindowRun:
    best: WindowRun | None = None
    for _ in range(repeats):
        spec = windowed(clusters, window_start)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        report = Simulator(spec).run()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        stages = report.final["stages"].values()
        run = WindowRun(
            window_start=window_start,
            wall_s=wall,
            cpu_s=cpu,
            decisions=report.decisions,
            complete=all(s["controlPlane"] == "COMPLETE" and s["nodes"] == "COMPLETE" for s in stages),
        )
        if best is None or run.cpu_s < best.cpu_s:
            best = run
    assert best is not None
    return best


def measure_windows(clusters: int, repeats: int = 2) -> WindowResult:
    day_before = (DEFAULT_START - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return WindowResult(
        clusters=clusters,
        old=_run(clusters, OLD_START, repeats),
        recent=_run(clusters, day_before, repeats),
    )


def as_json(result: WindowResult) -> dict[str, Any]:
    return {**asdict(result), "ratio": result.ratio}


def verdict(data: dict[str, Any]) -> tuple[str, bool, str]:
    """(target, met, measured) for the page's targets table."""
    old, recent = data["old"], data["recent"]
    return (
        f"{data['clusters']:,} clusters, hourly window from {OLD_START[:10]} within "
        f"{TARGET_RATIO:g}x of one from the day before",
        data["ratio"] <= TARGET_RATIO,
        f"{old['cpu_s']:.2f} s vs {recent['cpu_s']:.2f} s CPU = {data['ratio']:.2f}x "
        f"(wall {old['wall_s']:.2f} vs {recent['wall_s']:.2f} s)",
    )


def page_lines(data: dict[str, Any]) -> list[str]:
    target, met, measured = verdict(data)
    rows = [
        "## Maintenance windows defined years ago",
        "",
        f"The whole-rollout scenario above with 3 stages at {data['clusters']:,} clusters, every cluster with",
        "`maintenanceWindow: {start: ..., duration: 30m, recurrence: FREQ=HOURLY}`, the window defined on",
        f"{OLD_START[:10]} or the day before the scenario starts. Whether a window is open and when it next",
        "opens is asked once per cluster per dispatch; the recurrence is re-anchored a few periods before",
        "the instant asked about (`rollout_common.recurrence`), so its age costs nothing. Fastest of the",
        "runs, CPU time (the machine is shared).",
        "",
        "| window defined | wall s | CPU s | decisions | complete |",
        "|---|---:|---:|---:|---|",
    ]
    for run in (data["old"], data["recent"]):
        rows.append(
            f"| {run['window_start'][:10]} | {run['wall_s']:.2f} | {run['cpu_s']:.2f} | "
            f"{run['decisions']:,} | {'yes' if run['complete'] else 'NO'} |"
        )
    rows += ["", f"{target}: **{'met' if met else 'missed'}**, {measured}.", ""]
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the page's section")
    args = parser.parse_args(argv)
    data = as_json(measure_windows(args.clusters, args.repeats))
    if args.json:
        json.dump(data, sys.stdout)
    elif args.markdown:
        print("\n".join(page_lines(data)))
    else:
        print(data)


if __name__ == "__main__":
    main()
