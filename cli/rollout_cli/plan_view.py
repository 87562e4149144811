"""What `rollout plan` prints: the stages and their gates, the batch order, each cluster's eligibility."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from rollout_cli import tables
from rollout_common.duration import format_duration

# `rollout plan` lists this many batches; --json has them all
_BATCHES_SHOWN = 40


def print_plan(result: dict[str, Any], *, show_clusters: bool) -> None:
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
