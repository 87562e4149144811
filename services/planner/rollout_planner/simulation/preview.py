"""`rollout plan`: partitions, batch order, eligibility and earliest stage times, from the engine itself.

Eligibility is what the engine decides right after the scenario's first release; the timeline is
an ideal run of the same scenario (no failures, no scripted outages), so it shows the earliest
each stage can start and finish given soak and upgrade durations.
"""

from __future__ import annotations

from typing import Any

from rollout_common.events import EventBatch
from rollout_common.gates import MinUpgradeInterval
from rollout_common.sequence import Stage
from rollout_common.window import from_epoch, to_epoch
from rollout_planner.engine import decide, new_state
from rollout_planner.engine.model import CP, NODES
from rollout_planner.engine.partitioning import StagePlan
from rollout_planner.engine.views import track_status
from rollout_planner.simulation.runner import Report, Simulator, plan_of
from rollout_planner.simulation.scenario import Scenario


def preview(scenario: Scenario) -> dict[str, Any]:
    plans, warnings = plan_of(scenario)
    ideal = scenario.model_copy(
        update={"simulation": scenario.simulation.model_copy(update={"failures": (), "not_ready": ()})}
    )
    simulator = Simulator(ideal)
    report = simulator.run()
    origin = to_epoch(scenario.start)
    specs = {s.name: s for s in scenario.sequence.stages}
    stages = [_stage_preview(scenario, specs[plan.name], plan, report=report, origin=origin) for plan in plans]
    return {
        "name": scenario.name,
        "stages": stages,
        "warnings": warnings,
        "batches": [{**b, "at": _iso(origin + b["t"])} for b in report.batches],
        "eligibility": _eligibility(scenario),
    }


def _stage_preview(
    scenario: Scenario, spec: Stage, plan: StagePlan, *, report: Report, origin: float
) -> dict[str, Any]:
    """One stage: its gates, its partitions and who is in each, and its timeline in the ideal run."""
    return {
        **_gates(spec, scenario.sequence.min_upgrade_interval),
        "name": plan.name,
        "clusters": len(plan.members) + len(plan.no_partition),
        "partitions": [
            {"name": p.name, "clusters": list(p.clusters), "maxUnavailable": p.max_unavailable} for p in plan.partitions
        ],
        "noPartition": plan.no_partition,
        "timeline": _timeline(report.transitions, report.batches, plan.name, origin),
    }


def _gates(stage: Stage, budget: MinUpgradeInterval | None) -> dict[str, Any]:
    """CHK-1..4: a stage's gates, shown only where set (the timeline shows what they cost): its
    approvals, start window, the disruption budget in force there (the sequence's, the stage's
    fields over it) and its metric checks."""
    gates: dict[str, Any] = {}
    if stage.approval.any:
        gates["approval"] = stage.approval.model_dump()
    if stage.start_window is not None:
        gates["startWindow"] = stage.start_window.model_dump(mode="json")
    interval = stage.upgrade_interval(budget)
    if interval is not None and (interval.patch or interval.minor):
        gates["minUpgradeInterval"] = {"patch": interval.patch or 0.0, "minor": interval.minor or 0.0}
    if stage.checks:
        gates["checks"] = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in stage.checks]
    return {"gates": gates} if gates else {}


def _iso(epoch: float) -> str:
    return from_epoch(epoch).isoformat()


def _timeline(
    transitions: list[dict[str, Any]], batches: list[dict[str, Any]], stage: str, origin: float
) -> dict[str, Any]:
    """Per track: when the stage starts the version and finishes it, and when its first upgrade goes
    out (later than the start while disruption budgets or maintenance windows hold every cluster)."""
    out: dict[str, Any] = {}
    for track in ("controlPlane", "nodes"):
        mine = [t for t in transitions if t["stage"] == stage and t["track"] == track]
        first = next((b["t"] for b in batches if b["stage"] == stage and b["track"] == track), None)
        started = next((t["t"] for t in mine if t["state"] == "IN_PROGRESS"), None)
        finished = next((t["t"] for t in mine if t["state"] == "COMPLETE"), None)
        stuck = next((t["reason"] for t in mine if t["state"] == "STUCK"), None)
        # CHK-1: a gate the scenario never approves holds the track for good; say which
        waits = [t["reason"] for t in mine if t["state"] == "AWAITING_APPROVAL"]
        if waits and mine[-1]["state"] == "AWAITING_APPROVAL":
            stuck = waits[-1]
        # CHK-2: a check that halts the stage in the ideal run (the scenario's metrics) holds it for good
        if mine and mine[-1]["state"] == "PAUSED":
            stuck = mine[-1]["reason"]
        out[track] = {
            "earliestStart": None if started is None else _iso(origin + started),
            "firstUpgrade": None if first is None else _iso(origin + first),
            "earliestFinish": None if finished is None else _iso(origin + finished),
            "stuck": stuck,
        }
    return out


def _eligibility(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """Each cluster's stage, partition, target and status right after the first release arrives."""
    state = new_state(scenario.sequence, scenario.fleet(), scenario.cluster_groups)
    first = next((e for e in scenario.events if e.release_target or e.start_rollout), None)
    if first is not None:
        events = Simulator(scenario).script_events(first)
        decide(state, EventBatch(events=tuple(events)), to_epoch(scenario.start) + first.at)
    out: dict[str, dict[str, Any]] = {}
    for name, cluster in sorted(state.clusters.items()):
        stage = None if cluster.stage is None else state.stages[cluster.stage]
        partition = None
        if stage is not None and cluster.partition is not None:
            partition = stage.partitions[cluster.partition].name
        entry: dict[str, Any] = {"stage": None if stage is None else stage.spec.name, "partition": partition}
        for track, label in ((CP, "controlPlane"), (NODES, "nodes")):
            status, reason = track_status(state, cluster, track)
            target = cluster.target[track] or cluster.running[track]
            entry[label] = {
                "version": cluster.versions[track].text,
                "target": None if target is None else target.text,
                "status": status.value,
                "reason": reason,
            }
        out[name] = entry
    return out
