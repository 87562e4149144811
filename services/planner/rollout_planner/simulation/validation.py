"""`rollout validate`: every problem of a scenario, sequence or fleet file, each naming its field."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rollout_planner.engine.partitioning import assign_stages
from rollout_planner.simulation.runner import plan_of
from rollout_planner.simulation.scenario import Scenario, ScenarioError, load_scenario


@dataclass(slots=True)
class Findings:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: str = ""


def validate_file(path: Path) -> Findings:
    findings = Findings()
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        findings.problems += [line.strip().removeprefix("- ") for line in str(exc).splitlines()[1:]] or [str(exc)]
        return findings
    _cross_references(scenario, findings)
    _membership(scenario, findings)
    fleet = scenario.fleet()
    findings.summary = f"{len(fleet)} clusters, {len(scenario.sequence.stages)} stages, {len(scenario.events)} events"
    return findings


def _cross_references(scenario: Scenario, findings: Findings) -> None:
    """Names that must exist elsewhere in the file: stages in commands, clusters in the simulation."""
    stages = {s.name for s in scenario.sequence.stages}
    clusters = {c.name for c in scenario.fleet()}
    for index, event in enumerate(scenario.events):
        override = event.command.soak_override if event.command else None
        if override is not None and override.stage not in stages:
            findings.problems.append(f"events.{index}.command.soakOverride.stage: unknown stage {override.stage!r}")
        if event.release_target is not None and event.release_target.channel != scenario.sequence.channel:
            findings.warnings.append(
                f"events.{index}.releaseTarget.channel: {event.release_target.channel!r} is not the sequence's "
                f"channel {scenario.sequence.channel!r}; the release will be ignored"
            )
    for index, window in enumerate(scenario.simulation.not_ready):
        if window.cluster not in clusters:
            findings.problems.append(f"simulation.notReady.{index}.cluster: unknown cluster {window.cluster!r}")
    for index, failure in enumerate(scenario.simulation.failures):
        if failure.cluster not in clusters:
            findings.problems.append(f"simulation.failures.{index}.cluster: unknown cluster {failure.cluster!r}")
    for stage in scenario.sequence.stages:
        queries = {m.query for m in scenario.simulation.metrics}
        for check in stage.checks:
            if check.query not in queries:
                findings.warnings.append(
                    f"sequence.stages.{stage.name}.checks.{check.name}: simulation.metrics gives its query no "
                    "value, so every evaluation is inconclusive (CHK-2)"
                )
        for name in stage.cluster_names or ():
            if name not in clusters:
                findings.warnings.append(f"sequence.stages.{stage.name}.clusterNames: no cluster named {name!r}")


def _membership(scenario: Scenario, findings: Findings) -> None:
    membership = assign_stages(scenario.sequence, scenario.fleet(), scenario.cluster_groups)
    for name, stages in membership.conflicts.items():
        findings.problems.append(
            f"clusters.{name}: selected by stages {', '.join(stages)}; a cluster belongs to at most one stage (SEQ-2)"
        )
    counts = {s.name: 0 for s in scenario.sequence.stages}
    for index in membership.stage_of.values():
        counts[scenario.sequence.stages[index].name] += 1
    for index, stage in enumerate(scenario.sequence.stages):
        if counts[stage.name] == 0:
            hint = "nothing can be qualified downstream (SOAK-5)" if index == 0 else "versions pass through it"
            findings.warnings.append(f"sequence.stages.{stage.name}: selects no cluster; {hint}")
    if membership.unmatched:
        findings.warnings.append(
            f"{len(membership.unmatched)} cluster(s) in no stage will not be upgraded: "
            f"{', '.join(membership.unmatched[:10])}"
        )
    _, warnings = plan_of(scenario)
    findings.warnings += warnings
