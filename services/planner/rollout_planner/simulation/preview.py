"""`rollout plan`: partitions, batch order, eligibility and earliest stage times, from the engine itself.

Eligibility is what the engine decides right after the scenario's first release; the timeline is
an ideal run of the same scenario (no failures, no scripted outages), so it shows the earliest
each stage can start and finish given soak and upgrade durations.
"""

from __future__ import annotations

from typing import Any

from rollout_common.events import EventBatch
from rollout_common.sequence import Stage
from rollout_common.window import from_epoch, to_epoch
from rollout_planner.engine import decide, new_state
from rollout_planner.engine.model import CP, NODES
from rollout_planner.engine.views import track_status
from rollout_planner.simulation.runner import Simulator, plan_of
from rollout_planner.simulation.scenario import Scenario


def preview(scenario: Scenario) -> dict[str, Any]:
    plans, warnings = plan_of(scenario)
    ideal = scenario.model_copy(
        update={"simulation": scenario.simulation.model_copy(update={"failures": (), "not_ready": ()})}
    )
    simulator = Simulator(ideal)
    report = simulator.run()
    origin = to_epoch(scenario.start)
    stages = []
    specs = {s.name: s for s in scenario.sequence.stages}
    for plan in plans:
        stages.append(
            {
                **_gates(specs[plan.name]),
                "name": plan.name,
                "clusters": len(plan.members) + len(plan.no_partition),
                "partitions": [
                    {"name": p.name, "clusters": list(p.clusters), "maxUnavailable": p.max_unavailable}
                    for p in plan.partitions
                ],
                "noPartition": plan.no_partition,
                "timeline": _timeline(report.transitions, plan.name, origin),
            }
        )
    return {
        "name": scenario.name,
        "stages": stages,
        "warnings": warnings,
        "batches": [{**b, "at": _iso(origin + b["t"])} for b in report.batches],
        "eligibility": _eligibility(scenario),
    }


def _gates(stage: Stage) -> dict[str, Any]:
    """CHK-1, CHK-2, CHK-3: a stage's gates, shown only where set (the timeline shows what they cost)."""
    gates: dict[str, Any] = {}
    if stage.approval.any:
        gates["approval"] = stage.approval.model_dump()
    if stage.start_window is not None:
        gates["startWindow"] = stage.start_window.model_dump(mode="json")
    if stage.checks:
        gates["checks"] = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in stage.checks]
    return {"gates": gates} if gates else {}


def _iso(epoch: float) -> str:
    return from_epoch(epoch).isoformat()


def _timeline(transitions: list[dict[str, Any]], stage: str, origin: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for track in ("controlPlane", "nodes"):
        mine = [t for t in transitions if t["stage"] == stage and t["track"] == track]
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
