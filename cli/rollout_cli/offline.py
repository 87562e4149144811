"""Commands that need no infrastructure: validate, plan, simulate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rollout_cli import help_text, tables
from rollout_cli.exit_codes import ExitCode
from rollout_cli.progress_bars import spinner
from rollout_common.duration import format_duration
from rollout_planner.simulation.preview import preview
from rollout_planner.simulation.runner import SimulationError, simulate
from rollout_planner.simulation.scenario import ScenarioError, load_scenario
from rollout_planner.simulation.validation import validate_file

# `rollout plan` lists this many batches; --json has them all
_BATCHES_SHOWN = 40


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
    _print_plan(result, show_clusters=args.clusters)
    return 0


def _print_plan(result: dict[str, Any], *, show_clusters: bool) -> None:
    console = Console()
    tables.show(console, _stages_table(result))
    _print_gates(console, result["stages"])
    tables.show(console, _batches_table(result["batches"]))
    if len(result["batches"]) > _BATCHES_SHOWN:
        console.print(f"... {len(result['batches']) - _BATCHES_SHOWN} more batches (--json shows all)")
    _print_eligibility(console, result["eligibility"], show_all=show_clusters)
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {warning}")


def _stages_table(result: dict[str, Any]) -> Table:
    stages = Table(title=f"plan: {result['name']}")
    for column in ("stage", "clusters", "partitions (size / maxUnavailable)", "controlPlane", "nodes"):
        stages.add_column(column)
    for stage in result["stages"]:
        parts = ", ".join(f"{p['name']} ({len(p['clusters'])}/{p['maxUnavailable']})" for p in stage["partitions"])
        if stage["noPartition"]:
            parts += f"; {len(stage['noPartition'])} in no partition"
        budget = "minUpgradeInterval" in stage.get("gates", {})
        cells = [_window(stage["timeline"][t], budget=budget) for t in ("controlPlane", "nodes")]
        stages.add_row(stage["name"], str(stage["clusters"]), parts or "-", *cells)
    return stages


def _print_gates(console: Console, stages: list[dict[str, Any]]) -> None:
    for stage in stages:
        for line in _gate_lines(stage.get("gates", {})):
            # one unwrapped line per gate, as written: a query or condition is not rich markup
            console.print(f"{stage['name']}: {line}", markup=False, soft_wrap=True)


def _batches_table(batches: list[dict[str, Any]]) -> Table:
    table = Table(title="batch order (ideal run: no failures, no outages)")
    for column in ("at", "stage", "track", "partition", "version", "clusters"):
        table.add_column(column)
    for batch in batches[:_BATCHES_SHOWN]:
        names = batch["clusters"]
        shown = ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")
        table.add_row(
            batch["at"], batch["stage"], batch["track"], batch["partition"], batch["version"], f"{len(names)}: {shown}"
        )
    return table


def _gate_lines(gates: dict[str, Any]) -> list[str]:
    """A stage's gates in words (CHK-1..4); none for a stage without gates."""
    lines = []
    approval = gates.get("approval")
    if approval:
        lines.append("approval " + " and ".join(k for k in ("before", "after") if approval.get(k)))
    window = gates.get("startWindow")
    if window:
        recurrence = f", {window['recurrence']}" if window.get("recurrence") else ""
        lines.append(f"start window from {window['start']} for {format_duration(window['duration'])}{recurrence}")
    budget = gates.get("minUpgradeInterval")
    if budget:
        patch, minor = format_duration(budget["patch"]), format_duration(budget["minor"])
        lines.append(f"disruption budget: a cluster's upgrades at least patch {patch} / minor {minor} apart")
    for check in gates.get("checks", []):
        condition = check["successCondition"]
        if "failureCondition" in check:
            condition += f", fails when {check['failureCondition']}"
        every = format_duration(check["interval"])
        lines.append(
            f"check {check['name']}: {check['query']} passes when {condition}, every {every} "
            f"while {' and '.join(check['phases'])} (failureLimit {check['failureLimit']}, "
            f"inconclusiveLimit {check['inconclusiveLimit']})"
        )
    return lines


def _window(timeline: dict[str, Any], *, budget: bool) -> str:
    if timeline["stuck"]:
        return f"STUCK: {timeline['stuck']}"
    start, finish = timeline["earliestStart"], timeline["earliestFinish"]
    if start is None:
        return "does not start"
    # CHK-4: a budget can hold every cluster of a started stage; say when the first one goes
    first = timeline.get("firstUpgrade")
    held = f" (first upgrade {first})" if budget and first is not None and first != start else ""
    return f"{start}{held} -> {finish or 'not within the scenario'}"


def _print_eligibility(console: Console, eligibility: dict[str, Any], *, show_all: bool) -> None:
    counts: dict[str, int] = {}
    for entry in eligibility.values():
        key = entry["controlPlane"]["status"]
        counts[key] = counts.get(key, 0) + 1
    console.print("eligibility after the first release: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if not show_all:
        return
    table = Table(title="clusters")
    for column in ("cluster", "stage", "partition", "controlPlane", "nodes"):
        table.add_column(column)
    for name, entry in eligibility.items():
        cells = []
        for track in ("controlPlane", "nodes"):
            t = entry[track]
            arrow = f" -> {t['target']}" if t["target"] else ""
            why = f" ({t['reason']})" if t["reason"] else ""
            cells.append(f"{t['version']}{arrow} {t['status']}{why}")
        table.add_row(name, entry["stage"] or "-", entry["partition"] or "-", *cells)
    tables.show(console, table)
