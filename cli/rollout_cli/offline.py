"""Commands that need no infrastructure: validate, plan, simulate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rollout_cli import help_text
from rollout_cli.exit_codes import ExitCode
from rollout_cli.plan_view import print_plan
from rollout_cli.progress_bars import spinner
from rollout_planner.simulation.preview import preview
from rollout_planner.simulation.runner import SimulationError, simulate
from rollout_planner.simulation.scenario import ScenarioError, load_scenario
from rollout_planner.simulation.validation import validate_file


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    _register_validate(sub)
    _register_plan(sub)
    _register_simulate(sub)


def _register_validate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    validate = help_text.command(
        sub,
        "validate",
        summary="check a scenario or sequence file and list every problem",
        description="Reads a fleet/scenario file (clusters, cluster groups, sequence) and lists every problem "
        "with the field it is in; warnings do not fail it. Needs no Kafka or Redis.",
        examples=["rollout validate fleet.yaml"],
    )
    validate.add_argument("file", type=Path, help="the file to check, e.g. fleet.yaml")
    validate.set_defaults(handler=run_validate)


def _register_plan(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    plan = help_text.command(
        sub,
        "plan",
        summary="preview partitions, batch order, eligibility and stage times",
        description="Runs the planner's own partitioning and an ideal run (no failures, no outages) of the "
        "file's first release, and shows which cluster goes in which partition and batch, and when.",
        examples=["rollout plan fleet.yaml", "rollout plan fleet.yaml --clusters", "rollout plan fleet.yaml --json"],
    )
    plan.add_argument("file", type=Path, help="scenario or fleet file, e.g. fleet.yaml")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON object, e.g. for jq")
    plan.add_argument("--clusters", action="store_true", help="list every cluster's eligibility, e.g. --clusters")
    plan.set_defaults(handler=run_plan)


def _register_simulate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    simulate_cmd = help_text.command(
        sub,
        "simulate",
        summary="run a scenario on a simulated clock",
        description="Runs the scenario's events (releases, commands, outages, failures) through the engine on "
        "a simulated clock and prints every stage transition; the conformance checker reads --json.",
        examples=["rollout simulate scenario.yaml", "rollout simulate scenario.yaml --json"],
    )
    simulate_cmd.add_argument("file", type=Path, help="scenario file, e.g. scenario.yaml")
    simulate_cmd.add_argument("--json", action="store_true", help="print the report as one JSON object")
    simulate_cmd.set_defaults(handler=run_simulate)


def _fail(message: str) -> int:
    """A file that cannot be read or is not valid: invalid input, as `validate` says (exit 1)."""
    print(f"error: {message}", file=sys.stderr)
    return ExitCode.REJECTED


def run_validate(args: argparse.Namespace) -> int:
    """Exit 0 when valid (warnings allowed), 1 with every problem listed otherwise."""
    findings = validate_file(args.file)
    for warning in findings.warnings:
        print(f"warning: {warning}")
    if findings.problems:
        print(f"{args.file}: {len(findings.problems)} problem(s)", file=sys.stderr)
        for problem in findings.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(f"{args.file}: valid ({findings.summary})")
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.file)
    except ScenarioError as exc:
        return _fail(str(exc))
    try:
        report = simulate(scenario)
    except SimulationError as exc:
        print(f"error: {exc}", file=sys.stderr)  # one line naming event, time and rule; no traceback
        return 1
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


def run_plan(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.file)
    except ScenarioError as exc:
        return _fail(str(exc))
    with spinner(f"planning {args.file}: partitions, batch order, eligibility of every cluster"):
        result = preview(scenario)
    if args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
        return 0
    print_plan(result, show_clusters=args.clusters)
    return 0
