"""Commands that need no infrastructure: validate, plan, simulate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rollout_planner.simulation.runner import simulate
from rollout_planner.simulation.scenario import ScenarioError, load_scenario


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    validate = sub.add_parser("validate", help="check a scenario or sequence file and list every problem")
    validate.add_argument("file", type=Path)
    validate.set_defaults(handler=run_validate)
    simulate_cmd = sub.add_parser("simulate", help="run a scenario on a simulated clock")
    simulate_cmd.add_argument("file", type=Path)
    simulate_cmd.add_argument("--json", action="store_true", help="print the report as one JSON object")
    simulate_cmd.set_defaults(handler=run_simulate)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_validate(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.file)
    except ScenarioError as exc:
        return _fail(str(exc))
    print(f"{args.file}: valid ({len(scenario.fleet())} clusters, {len(scenario.sequence.stages)} stages)")
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.file)
    except ScenarioError as exc:
        return _fail(str(exc))
    report = simulate(scenario)
    if args.json:
        json.dump(report.as_json(), sys.stdout)
        sys.stdout.write("\n")
        return 0
    _print_timeline(report.as_json())
    return 0


def _print_timeline(report: dict[str, Any]) -> None:
    for tr in report["transitions"]:
        print(f"{tr['t']:>10.0f}s  {tr['stage']}/{tr['track']}: {tr['state']} {tr['version'] or ''} ({tr['reason']})")
    print(f"{len(report['batches'])} batches")
    for name, tracks in report["final"]["stages"].items():
        print(f"  {name}: controlPlane {tracks['controlPlane']}, nodes {tracks['nodes']}")
