"""Recount everything the engine keeps incrementally and report any drift (a test oracle).

The engine never rescans the fleet per event; this module does, so tests can prove after every
decision that the running counters equal a count from scratch.
"""

from __future__ import annotations

from rollout_planner.engine.model import TRACK_INDEXES, EngineState


def audit(state: EngineState) -> list[str]:
    problems: list[str] = []
    for stage in state.stages:
        in_flight = 0
        for partition in stage.partitions:
            unavailable = 0
            not_done = [0, 0]
            queued_unavailable = [0, 0]
            for name in partition.members:
                cluster = state.clusters[name]
                available = cluster.compute_available()
                if available != cluster.available:
                    problems.append(f"{name}: cached available {cluster.available}, really {available}")
                unavailable += not available
                in_flight += sum(v is not None for v in cluster.running)
                for track in TRACK_INDEXES:
                    not_done[track] += cluster.target[track] is not None or not available
                    queued_unavailable[track] += cluster.queued[track] and not available
            label = f"{stage.spec.name}/{partition.name}"
            if unavailable != partition.unavailable:
                problems.append(f"{label}: unavailable {partition.unavailable}, really {unavailable}")
            if not_done != partition.not_done:
                problems.append(f"{label}: not done {partition.not_done}, really {not_done}")
            if queued_unavailable != partition.queued_unavailable:
                problems.append(
                    f"{label}: queued unavailable {partition.queued_unavailable}, really {queued_unavailable}"
                )
        if in_flight != stage.in_flight:
            problems.append(f"{stage.spec.name}: in flight {stage.in_flight}, really {in_flight}")
        for track in TRACK_INDEXES:
            for run in stage.runs[track].values():
                remaining = sum(1 for n in stage.members if state.clusters[n].target_run[track] == run.rollout_id)
                if remaining != run.remaining:
                    problems.append(
                        f"{stage.spec.name}/{track}/{run.rollout_id}: remaining {run.remaining}, really {remaining}"
                    )
    return problems
